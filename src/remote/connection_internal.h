/*-------------------------------------------------------------------------
 *
 * connection_internal.h
 *	  The connection cache entry and statement state, shared by the remote
 *	  layer's files (connection.c, execute.c, xact.c, twophase.c, ...).
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_CONNECTION_INTERNAL_H
#define COLLEGEDB_CONNECTION_INTERNAL_H

#include "storage/latch.h"

#include "remote/remote.h"

typedef struct CdConnKey
{
	Oid			serverid;
	Oid			userid;
} CdConnKey;

struct CdConnection
{
	CdConnKey	key;			/* hash key: must be first */
	char		shard[NAMEDATALEN];
	const CdAdapter *adapter;
	void	   *handle;			/* NULL: not connected */
	int64		session;		/* the shard's session id (WaitsSessionOpened) */
	bool		fresh;			/* connected for the current statement */

	/*
	 * xact_depth is 0 while no remote transaction is open; otherwise the
	 * front transaction nesting level the remote side has reached (1: BEGIN
	 * sent; n > 1: also SAVEPOINT s2 .. sn).
	 */
	int			xact_depth;
	bool		in_flight;		/* a statement is on the wire */
	int			in_flight_level;	/* the nesting level it was sent at */
	struct CdStatement *pending;	/* sent by RemoteSend, not yet awaited */
	bool		doomed;			/* remote transaction lost: fail until the
								 * front transaction ends */
	bool		invalidated;	/* server or mapping changed: reconnect */
	uint32		server_hash;

	/*
	 * Two-phase commit (twophase.c).  'wrote': a statement that joined the
	 * open remote transaction was a write.  'xa': the remote transaction
	 * began with the dialect's two-phase begin (CdTwoPhaseSql.begin) under
	 * 'gid'.  'prepare_sent': the front's pre-commit sent PREPARE under
	 * 'gid'; 'prepared': the shard answered it, and the transaction now
	 * waits for the front's decision.
	 */
	bool		wrote;
	LocalTransactionId write_lxid;	/* a write began in this remote transaction */
	bool		xa;
	bool		prepare_sent;
	bool		prepared;
	char		gid[CD_GID_SIZE];
};

#define MAX_SETUP_COMMANDS 64

/*
 * One statement on one shard, through its life: prepared (checked),
 * begun (connection taken, transaction-control commands worked out),
 * sent and waited for by the caller (exec, or send/poll), finished.
 */
typedef struct CdStatement
{
	bool		done;			/* RemoteSend ran it to its end at once */
	const CdShard *shard;
	const char *sql;
	int			nparams;
	const CdParam *params;
	bool		is_write;
	int			flags;			/* CD_EXEC_* for the statement */
	bool		autocommit_only;	/* the dialect would commit implicitly */
	bool		in_block;		/* the front is in a transaction block */
	bool		commits_now;	/* the caller commits the shard's part right
								 * after it (RemoteCommitNow), not the front */
	bool		commit_alone;	/* commits on the shard in its own round
								 * trip, no remote transaction
								 * (ConnectionCommitAloneOk) */
	int			level;			/* front transaction nesting level */

	CdConnection *conn;
	const char *setup[MAX_SETUP_COMMANDS];
	int			nsetup;
	bool		was_open;		/* a remote transaction was open before */
	bool		need_xact;		/* the statement joins the remote transaction */
	bool		fresh;			/* connected for this statement */
	bool		xa_begin;		/* setup begins a two-phase transaction
								 * under 'gid' */
	char		gid[CD_GID_SIZE];
	CdRemoteError err;
	int64		rows;
} CdStatement;

/* Why a statement must not be sent (StatementTryPrepare) */
typedef struct CdStatementProblem
{
	int			sqlerrcode;
	char	   *message;
	char	   *detail;
	char	   *hint;
} CdStatementProblem;

extern bool StatementTryPrepare(CdStatement *st, const CdShard *shard, const char *sql,
								int nparams, const CdParam *params, bool is_write,
								int flags, CdStatementProblem *problem);
extern void StatementPrepare(CdStatement *st, const CdShard *shard, const char *sql,
							 int nparams, const CdParam *params, bool is_write, int flags);
extern void StatementRaiseProblem(const CdStatementProblem *problem);
extern bool StatementTryBegin(CdStatement *st, CdStatementProblem *problem);
extern void StatementBegin(CdStatement *st);
extern bool StatementFinish(CdStatement *st, bool ok, int attempt);
extern void ConnectionAwaitPending(CdConnection *conn);
extern void ConnectionAwaitAllPending(void);
extern void StatementRaise(CdStatement *st);
extern void StatementContextPush(CdStatement *st, ErrorContextCallback *callback);
extern void StatementContextPop(ErrorContextCallback *callback);

/* connection.c */
extern bool ConnectionIsOpen(const CdShard *shard);
extern bool ConnectionRunCleanup(CdConnection *conn, const char *sql);
extern void ConnectionMarkFinished(CdConnection *conn);
extern CdConnection **ConnectionParticipants(int *n);
extern CdConnection **ConnectionList(int *n);
extern CdConnection *ConnectionAnyOpen(void);
extern void ConnectionClose(CdConnection *conn);
extern void ConnectionOpen(CdConnection *conn, const CdShard *shard);
extern bool ConnectionExecList(CdConnection *conn, const char *const *list,
							   const char *gid, int flags, CdRemoteError *err);

/* xact.c: the remote transactions' commit, rollback and savepoints */
extern void ConnectionCommitOnePhase(CdConnection *conn);
extern bool ConnectionCommitAloneOk(void);
extern bool ConnectionRollbackTo(CdConnection *conn, int level);
extern void ConnectionCommitNow(CdConnection *conn);
extern void ConnectionUndoGuard(CdConnection *conn, bool was_open);

/*
 * One shard's socket in a wait over several (group.c, fanout.c): 'events'
 * are the wait-set events it waits for (0: not waiting now); 'ready' says
 * that the wait found the socket ready; 'pos' is RemoteWaitSlots' (its
 * place in the wait set).
 */
typedef struct CdWaitSlot
{
	pgsocket	sock;
	int			events;
	bool		ready;
	int			pos;
} CdWaitSlot;

typedef struct CdWaitSet CdWaitSet;

/*
 * One of collegedb's own commands on one connection, run with others at
 * once (ConnectionGroupExec): the setup commands and 'sql', without
 * parameters or rows; 'ok' and 'err' are its outcome.
 */
typedef struct CdGroupCommand
{
	CdConnection *conn;
	int			nsetup;
	const char *setup[8];
	const char *sql;
	bool		ok;
	CdRemoteError err;
} CdGroupCommand;

/* group.c */
extern uint64 RemoteSocketGeneration;
extern CdWaitSet *RemoteWaitSetAcquire(void);
extern void RemoteWaitSetRelease(CdWaitSet *ws, bool failed);
extern void RemoteWaitSlots(CdWaitSet *ws, CdWaitSlot *slots, int n, long timeout,
							bool interruptible);
extern int	RemoteWaitEvents(CdPollResult r);
extern void ConnectionGroupExec(CdGroupCommand *cmds, int n, int flags);

/* connection.c: group commands that close what they lost */
extern void ConnectionGroupRun(CdGroupCommand *cmds, int n, int flags);
extern void ConnectionListCommand(CdConnection *conn, const char *const *list,
								  const char *gid, CdGroupCommand *cmd);

/* observe.c: what StatementTryBegin and StatementFinish report */
extern void ObserveBegan(const CdShard *shard);
extern void ObserveEnded(const CdShard *shard, int64 rows, bool internal, bool ok);

/* twophase.c: the two-phase path of xact.c's commit */
extern void TwoPhaseBeginGid(const CdShard *shard, CdConnection *conn, char *gid);
extern CdConnection *TwoPhaseCheck(CdConnection **parts, int n);
extern bool TwoPhaseWriterProblem(CdConnection *conn, CdStatementProblem *problem);
extern void TwoPhasePrepare(CdConnection **parts, int n, CdConnection *last);
extern void TwoPhaseLastCommitted(void);
extern bool TwoPhaseFinish(bool aborted);
extern void TwoPhaseEnded(bool clean);
extern void TwoPhasePause(const char *step);

#endif							/* COLLEGEDB_CONNECTION_INTERNAL_H */
