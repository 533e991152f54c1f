/*-------------------------------------------------------------------------
 *
 * remote.h
 *	  The remote layer: connections to shards cached per backend, remote
 *	  transactions tied to the front's, statements run with parameters, and
 *	  conversion of values between PostgreSQL and the adapters' neutral form.
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_REMOTE_H
#define COLLEGEDB_REMOTE_H

#include "postgres.h"

#include "access/transam.h"
#include "access/tupdesc.h"
#include "fmgr.h"
#include "portability/instr_time.h"
#include "utils/jsonb.h"
#include "utils/tuplestore.h"

#include "adapters/adapter.h"
#include "catalog/shards.h"

/*
 * A global transaction id of two-phase commit: "cdb_<system identifier>_
 * <database oid>_<front full xid>_<server oid>", in lower-case hex, 16 + 8
 * + 16 + 8 digits: 55 characters, within MySQL's 64-byte gtrid.  Its first
 * part up to the xid names the front transaction (CD_XACT_SIZE).
 */
#define CD_GID_SIZE 64
#define CD_XACT_SIZE 48

/* connection.c */
typedef struct CdConnection CdConnection;

extern void ConnectionInit(void);
extern CdConnection *ConnectionGet(const CdShard *shard);
extern bool ConnectionIsOpen(const CdShard *shard);
extern bool ConnectionDisconnect(const char *shard);
extern void RemoteMayCommitAlone(bool on);
extern int	ConnectionDisconnectAll(void);

typedef struct CdConnectionStatus
{
	char		shard[NAMEDATALEN];
	Oid			userid;
	const char *dialect;
	bool		valid;
	bool		in_transaction;
} CdConnectionStatus;

extern CdConnectionStatus *ConnectionStatusList(int *count);

/* errors.c */
typedef enum CdRemoteOp
{
	CD_REMOTE_STATEMENT = 0,	/* a statement: the shard's own message */
	CD_REMOTE_CONNECT,			/* "could not connect to shard" */
	CD_REMOTE_COMMIT,			/* "could not commit on shard" */
	CD_REMOTE_RELEASE,			/* "could not release savepoint on shard" */
	CD_REMOTE_PREPARE			/* "could not prepare the transaction on shard" */
} CdRemoteOp;

extern int	RemoteSqlstate(const char *sqlstate);
extern void RemoteRaise(CdRemoteOp op, const char *shard, const CdAdapter *adapter,
						const char *sql, const CdRemoteError *err) pg_attribute_noreturn();
extern char *RemoteErrorText(const ErrorData *edata);

/* execute.c */
extern int64 RemoteExecute(const CdShard *shard, const char *sql,
						   int nparams, const CdParam *params,
						   CdRowSink *sink, bool is_write);
extern int64 RemoteExecuteInternal(const CdShard *shard, const char *sql,
								   int nparams, const CdParam *params,
								   CdRowSink *sink, bool is_write);
typedef struct CdStatement CdPendingStatement;
extern CdPendingStatement *RemoteSend(const CdShard *shard, const char *sql,
									  int nparams, const CdParam *params);
extern bool RemoteExecutesRows(const CdShard *shard);
extern int64 RemoteExecuteRows(const CdShard *shard, const char *sql, int nrows, int ncols,
							   const CdParam *params);
extern bool RemoteSendsRows(const CdShard *shard);
extern CdPendingStatement *RemoteSendRows(const CdShard *shard, const char *sql,
										  int nrows, int ncols, const CdParam *params);
extern int64 RemoteAwait(CdPendingStatement *st);
extern int64 RemoteExecuteAside(const CdShard *shard, const char *sql,
								int nparams, const CdParam *params, CdRowSink *sink);
extern bool RemoteStatementWritesOn(const CdShard *shard, const char *sql);
extern bool RemoteStatementWrites(const CdShard *const *shards, int n, const char *sql);
extern bool RemoteErrorIsInterrupt(const ErrorData *edata);
extern bool RemoteTry(void (*fn) (void *arg), void *arg, ErrorData **failure);

/* observe.c: per-shard timings for EXPLAIN ANALYZE */
typedef struct CdShardTiming
{
	char		shard[NAMEDATALEN];
	int			dialect;
	int64		statements;		/* sent, one of collegedb's own included */
	int64		errors;			/* of which failed */
	int64		rows;			/* returned or changed by the caller's */
	bool		has_first_row;
	double		first_row_ms;	/* from the start of the first statement
								 * that returned a row to that row */
	double		total_ms;		/* every statement, start to end */
	instr_time	started;		/* of the running statement */
	instr_time	ended;			/* of the last statement */
	bool		running;
	bool		row_seen;		/* the running statement gave a row */
} CdShardTiming;

typedef struct CdRemoteObserver
{
	MemoryContext context;
	bool		timing;
	int			level;			/* transaction nesting level installed at */
	int			count;
	int			allocated;
	CdShardTiming *shards;
	int			current;		/* the entry of the running statement */
} CdRemoteObserver;

/* A row sink that notes a shard's first row for an observer */
typedef struct ObservedRowSink
{
	CdRowSink	base;
	CdRowSink  *inner;
	CdRemoteObserver *observer;
	const CdShard *shard;		/* NULL: the running statement's */
} ObservedRowSink;

extern void RemoteObserverInit(CdRemoteObserver *obs, bool timing);
extern CdRemoteObserver *RemoteObserve(CdRemoteObserver *obs);
extern CdShardTiming *RemoteObserverShard(CdRemoteObserver *obs, const CdShard *shard);
extern void ObservedRowSinkInit(ObservedRowSink *sink, CdRowSink *inner,
								CdRemoteObserver *obs, const CdShard *shard);

/* values.c */
extern CdParam *ValuesFromVariadic(FunctionCallInfo fcinfo, int first, int *nparams);
extern void ValuesToParam(Datum value, bool isnull, Oid typid, CdParam *param);
extern char *ValuesArrayLiteral(char *const *texts, const int *lens, int n);
extern Jsonb *ValuesRowToJsonb(int ncols, const char *const *names, const CdCell *cells);
extern Datum ValuesCellToDatum(const CdCell *cell, Oid typid, int32 typmod,
							   FmgrInfo *input, Oid ioparam, bool *isnull);

/*
 * A sink that stores each row as one jsonb object in a tuplestore (or, with
 * 'limit' 1, keeps only the first row).
 */
typedef struct JsonbRowSink
{
	CdRowSink	base;
	Tuplestorestate *store;		/* NULL: keep 'first' only */
	TupleDesc	desc;			/* one jsonb column, or (tag, jsonb, error) */
	const char *tag;			/* with three columns: the shard name */
	MemoryContext context;		/* where 'names' and 'first' live */
	MemoryContext row_context;
	int			ncols;
	char	  **names;
	int64		rows;
	Jsonb	   *first;
} JsonbRowSink;

extern void JsonbRowSinkInit(JsonbRowSink *sink, Tuplestorestate *store,
							 TupleDesc desc);

/*
 * A sink that stores rows as tuples of a caller-given descriptor,
 * converting each cell to the column's type; columns match by position.
 */
typedef struct RecordRowSink RecordRowSink;
struct RecordRowSink
{
	CdRowSink	base;
	Tuplestorestate *store;		/* where rows go, or: */
	void		(*put) (RecordRowSink *sink, Datum *values, bool *nulls);
	TupleDesc	desc;
	MemoryContext row_context;
	FmgrInfo   *inputs;
	Oid		   *ioparams;
	int64		rows;
};

extern void RecordRowSinkInit(RecordRowSink *sink, Tuplestorestate *store,
							  TupleDesc desc);

/*
 * A sink that keeps every row as parameters (see ValuesCellToParam), for
 * copying rows between shards.
 */
typedef struct CaptureRowSink
{
	CdRowSink	base;
	MemoryContext context;
	int			ncols;
	char	  **names;
	List	   *rows;			/* of CdParam[ncols] */
} CaptureRowSink;

extern void CaptureRowSinkInit(CaptureRowSink *sink);
extern void ValuesCellToParam(const CdCell *cell, CdParam *param);

/* execute.c */
extern void RemoteCommitNow(const CdShard *shard);

/* xact.c: the remote transactions follow the front's */
extern void XactInit(void);

/* twophase.c: two-phase commit's global transaction ids */
extern void TwoPhaseFrontPrefix(char *buf);
extern void TwoPhaseXactName(FullTransactionId fxid, char *buf);
extern bool TwoPhaseParseGid(const char *gid, char *xact, FullTransactionId *fxid,
							 Oid *serverid);

/* recovery.c: prepared transactions left on the shards */
typedef struct CdInDoubt
{
	char	   *shard;
	char	   *gid;			/* NULL: the shard could not be listed */
	char	   *action;
	char	   *error;
} CdInDoubt;

extern List *RecoveryRun(bool act);
extern char *RemoteRunAlone(const CdShard *shard, const char *sql, const char *gid,
							int nparams, CdParam *params, CaptureRowSink *sink,
							bool *unknown);

/* deadlock.c: deadlocks across shards */
extern bool DeadlockDue(void);
extern void DeadlockRun(void);

/* activity.c: what the backends share about their remote work */
typedef struct ShardActivity
{
	char		shard[NAMEDATALEN];
	uint64		statements;
	uint64		errors;
} ShardActivity;

/* what ActivityShardHealth tells of one shard */
#define CD_HEALTH_ERROR_LEN 256

typedef struct ShardHealth
{
	bool		shared;			/* every backend's (preloaded), or this one's */
	uint64		statements;
	uint64		errors;
	int64		last_ok;		/* TimestampTz; 0: never */
	int64		last_error_at;	/* TimestampTz; 0: never */
	char		last_error[CD_HEALTH_ERROR_LEN];
} ShardHealth;

extern void ActivityInit(void);
extern void ActivityCountStatement(const char *shard, const char *error);
extern void ActivityRecordContact(const char *shard, const char *error);
extern bool ActivityShardHealth(const char *shard, ShardHealth *out);
extern ShardActivity *ActivitySnapshot(int *count);
extern void ActivityTwoPhaseBegin(void);
extern void ActivityTwoPhaseEnd(bool clean);
extern bool ActivityTwoPhaseQuiet(uint64 *begun);

#endif							/* COLLEGEDB_REMOTE_H */
