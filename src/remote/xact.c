/*-------------------------------------------------------------------------
 *
 * xact.c
 *	  The remote transactions follow the front's: savepoints with its
 *	  subtransactions, the commit of every participant at its pre-commit
 *	  and commit, and the rollback of every one at its abort.
 *
 * Both of the front's callbacks are here.  At pre-commit the participants
 * (ConnectionParticipants: every connection with an open, lost or prepared
 * remote transaction) commit one of two ways:
 *	- fewer than two wrote, or collegedb.commit_protocol is 'sequential':
 *	  the readers commit together (commit_together: every COMMIT
 *	  sent, then all awaited), then each writer in turn;
 *	- otherwise two-phase commit (twophase.c): its checks, the readers
 *	  together, then the decision, the PREPAREs and the last participant;
 *	  at the front's commit, the prepared participants' COMMIT PREPARED.
 * At abort every participant rolls back (rollback_remote), or is closed
 * when it was in the middle of a statement or lost.
 *
 * A front statement that is one routed call outside a transaction block
 * may commit on its shard in the same round trip instead
 * (ConnectionCommitAloneOk).
 *
 * The connection cache itself, connecting and running statements are
 * connection.c's and execute.c's.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "utils/memutils.h"

#include "cd_errcodes.h"
#include "collegedb.h"
#include "remote/connection_internal.h"

/* the running front statement is one routed call (RemoteMayCommitAlone) */
static bool commit_alone = false;

static void at_end(bool aborted);
static void xact_callback(XactEvent event, void *arg);
static void subxact_callback(SubXactEvent event, SubTransactionId mySubid,
							 SubTransactionId parentSubid, void *arg);

/*
 * XactInit registers the transaction and subtransaction callbacks.
 */
void
XactInit(void)
{
	RegisterXactCallback(xact_callback, NULL);
	RegisterSubXactCallback(subxact_callback, NULL);
}

/*
 * ConnectionRollbackTo undoes the shard's work since savepoint s<level>
 * and releases it, leaving the remote transaction one level up; false when
 * that failed (the caller dooms the transaction).
 */
bool
ConnectionRollbackTo(CdConnection *conn, int level)
{
	char		sql[64];

	if (conn->xact_depth < level)
		return true;
	snprintf(sql, sizeof(sql), conn->adapter->sql_rollback_to, level);
	if (!ConnectionRunCleanup(conn, sql))
		return false;
	snprintf(sql, sizeof(sql), conn->adapter->sql_release, level);
	if (!ConnectionRunCleanup(conn, sql))
		return false;
	conn->xact_depth = level - 1;
	return true;
}

/*
 * commit_together commits the remote transactions of 'conns' at
 * front pre-commit, without preparing them: every COMMIT is sent before
 * any is awaited (ConnectionGroupExec), so the shards commit in parallel.
 * A participant that was lost fails before anything is sent; otherwise
 * every answer is collected, and the first failure (in the order of
 * 'conns') aborts the front transaction with the shard's error.
 */
static void
commit_together(CdConnection **conns, int n)
{
	CdGroupCommand *cmds;
	int			failed = -1;

	for (int i = 0; i < n; i++)
		if (conns[i]->doomed || conns[i]->handle == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_TRANSACTION_RESOLUTION_UNKNOWN),
					 errmsg("cannot commit: the transaction on shard \"%s\" was lost",
							conns[i]->shard),
					 errdetail("The connection to the shard failed during the transaction.")));
	if (n == 0)
		return;

	cmds = palloc0(sizeof(CdGroupCommand) * n);
	for (int i = 0; i < n; i++)
	{
		if (conns[i]->xa)
			ConnectionListCommand(conns[i], conns[i]->adapter->two_phase_sql->commit_one_phase,
						 conns[i]->gid, &cmds[i]);
		else
		{
			cmds[i].conn = conns[i];
			cmds[i].sql = conns[i]->adapter->sql_commit;
		}
	}
	ConnectionGroupRun(cmds, n, CD_EXEC_INTERNAL | CD_EXEC_COMMIT);

	for (int i = 0; i < n; i++)
	{
		/* the abort that follows rolls back what a shard still holds open */
		if (cmds[i].ok || cmds[i].err.connection_lost ||
			strcmp(cmds[i].err.sqlstate, "40000") == 0)
			ConnectionMarkFinished(conns[i]);	/* committed, or rolled back */
		if (!cmds[i].ok && failed < 0)
			failed = i;
	}
	if (failed >= 0)
		RemoteRaise(CD_REMOTE_COMMIT, conns[failed]->shard, conns[failed]->adapter, NULL,
					&cmds[failed].err);
	pfree(cmds);
}

/*
 * ConnectionCommitOnePhase commits one shard's remote transaction at front
 * pre-commit, without preparing it; failure aborts the front transaction.
 */
void
ConnectionCommitOnePhase(CdConnection *conn)
{
	commit_together(&conn, 1);
}

/*
 * rollback_remote rolls back one shard's part of an aborting front
 * transaction, as a cleanup (see ConnectionRunCleanup): a prepared one
 * (or one whose PREPARE was sent) with the dialect's rollback of a
 * prepared transaction, one begun for two-phase commit with its rollback
 * list, any other with ROLLBACK.  What fails is left to recovery (a
 * prepared transaction whose front transaction aborted is rolled back by
 * the coordinator) or to the shard (a closed connection rolls back).
 */
static void
rollback_remote(CdConnection *conn)
{
	CdRemoteError err;

	if (conn->prepare_sent)
	{
		if (!ConnectionExecList(conn,
								(const char *const[]) {conn->adapter->two_phase_sql->rollback_prepared, NULL},
								conn->gid, CD_EXEC_CLEANUP, &err) &&
			conn->prepared && !err.connection_lost)
			ereport(WARNING,
					(errcode(err.sqlstate[0] ? MAKE_SQLSTATE(err.sqlstate[0], err.sqlstate[1], err.sqlstate[2],
															 err.sqlstate[3], err.sqlstate[4]) : ERRCODE_CONNECTION_FAILURE),
					 errmsg("could not roll back prepared transaction %s on shard \"%s\": %s",
							conn->gid, conn->shard, err.message ? err.message : "unknown error"),
					 errhint("The coordinator rolls it back later.")));
	}
	else if (conn->xa && conn->xact_depth > 0)
	{
		if (!ConnectionExecList(conn, conn->adapter->two_phase_sql->rollback, conn->gid,
								CD_EXEC_CLEANUP, &err))
			ConnectionClose(conn);
	}
	else if (conn->xact_depth > 0 &&
			 !ConnectionRunCleanup(conn, conn->adapter->sql_rollback))
		ConnectionClose(conn);
}

/*
 * ConnectionCommitNow commits the shard's open remote transaction before
 * the front's; statements after it start a new one.
 */
void
ConnectionCommitNow(CdConnection *conn)
{
	if (conn->xact_depth > 0 || conn->doomed)
		ConnectionCommitOnePhase(conn);
}

/*
 * RemoteCommitNow commits the current transaction's work on 'shard' at
 * once, before the front commits: a mover needs the target's copy durable
 * before it deletes the source's rows.
 */
void
RemoteCommitNow(const CdShard *shard)
{
	ConnectionCommitNow(ConnectionGet(shard));
}

/*
 * ConnectionUndoGuard cleans up after a guard found the key moved: a
 * pipelined guard (guard_setup) aborted the remote transaction (or, when it
 * was open before, the guard's savepoint), which is undone here; after a
 * guard query (was_open false) the transaction it opened is rolled back.
 */
void
ConnectionUndoGuard(CdConnection *conn, bool was_open)
{
	if (was_open)
	{
		if (!ConnectionRunCleanup(conn, conn->adapter->guard_rollback_to) ||
			!ConnectionRunCleanup(conn, conn->adapter->guard_release))
			conn->doomed = true;
		return;
	}
	if (!ConnectionRunCleanup(conn, conn->adapter->sql_rollback))
		ConnectionClose(conn);
	ConnectionMarkFinished(conn);
}

/*
 * commit_readers commits together (commit_together) the
 * participants that did not write (a lost one counts as a writer: its
 * commit raises).
 */
static void
commit_readers(CdConnection **parts, int n)
{
	CdConnection **readers = palloc(sizeof(CdConnection *) * n);
	int			m = 0;

	for (int i = 0; i < n; i++)
		if (!parts[i]->wrote && !parts[i]->doomed)
			readers[m++] = parts[i];
	commit_together(readers, m);
	pfree(readers);
}

/*
 * pre_commit commits the participants of the front transaction at its
 * pre-commit: together, one after another, or with two-phase commit up to
 * the decision record (see the file header).
 */
static void
pre_commit(CdConnection **parts, int n)
{
	int			writers = 0;
	CdConnection *last;

	for (int i = 0; i < n; i++)
		if (parts[i]->wrote || parts[i]->doomed)
			writers++;
	if (writers < 2 || CollegeCommitProtocol == CD_COMMIT_SEQUENTIAL)
	{
		int			committed = 0;

		commit_readers(parts, n);
		for (int i = 0; i < n; i++)
			if (parts[i]->wrote || parts[i]->doomed)
			{
				if (committed++ == 1)
					TwoPhasePause("between_commits");
				ConnectionCommitOnePhase(parts[i]);
			}
		return;
	}

	/* everything that can fail before any shard is prepared, first */
	for (int i = 0; i < n; i++)
		if (parts[i]->doomed || parts[i]->handle == NULL)
			ConnectionCommitOnePhase(parts[i]); /* raises: it was lost */
	last = TwoPhaseCheck(parts, n);
	commit_readers(parts, n);
	TwoPhasePrepare(parts, n, last);
	if (last)
	{
		ConnectionCommitOnePhase(last);
		TwoPhaseLastCommitted();
	}
}

/*
 * xact_callback commits or rolls back the remote transactions with the
 * front's.
 */
static void
xact_callback(XactEvent event, void *arg)
{
	CdConnection **parts;
	int			n;
	bool		clean;

	switch (event)
	{
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
		case XACT_EVENT_PRE_COMMIT:
			ConnectionAwaitAllPending();
			parts = ConnectionParticipants(&n);
			if (n > 0)
				pre_commit(parts, n);
			break;

		case XACT_EVENT_PRE_PREPARE:
			if (ConnectionAnyOpen() != NULL)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot PREPARE a transaction that has operated on collegedb shards"),
						 errdetail("collegedb commits the shards' part of a transaction itself when the front transaction commits, with two-phase commit when it wrote on several.")));
			break;

		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_ABORT:
			(void) TwoPhaseFinish(true);
			at_end(true);
			TwoPhaseEnded(false);
			break;

		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PREPARE:
			clean = TwoPhaseFinish(false);
			at_end(false);
			TwoPhaseEnded(clean);
			break;
	}
}

/*
 * at_end ends every shard's part of the ending front transaction.
 * After an abort ('aborted') it rolls each back; a connection in the
 * middle of a statement, or lost, is closed instead (the shard rolls back
 * what was open; a prepared one is rolled back by its gid, or else by
 * recovery).  After a commit it closes the connections whose server or
 * mapping changed.
 */
static void
at_end(bool aborted)
{
	int			n;
	CdConnection **all;

	commit_alone = false;
	all = ConnectionList(&n);
	for (int k = 0; k < n; k++)
	{
		CdConnection *conn = all[k];

		if (aborted && (conn->in_flight || (conn->doomed && !conn->prepared)))
			ConnectionClose(conn);
		else if (aborted)
			rollback_remote(conn);
		ConnectionMarkFinished(conn);
		conn->doomed = false;
		if (!aborted && conn->invalidated)
			ConnectionClose(conn);
	}
	if (all)
		pfree(all);
}

/*
 * RemoteMayCommitAlone says (true) that the front statement now running is
 * a single routed call and nothing else: its caller has proved that
 * nothing of the front statement runs after the call returns.  Cleared by
 * the caller after the call, and at the end of the transaction.
 */
void
RemoteMayCommitAlone(bool on)
{
	commit_alone = on;
}

/*
 * ConnectionCommitAloneOk says whether a write may commit on its shard on
 * its own, in one round trip, before the front commits: the front
 * statement is a single routed call (RemoteMayCommitAlone), outside a
 * transaction block and any subtransaction, the front transaction has
 * written nothing itself and no shard has a remote transaction open.  Then
 * the shard's commit is the statement's only effect, and nothing that
 * could still fail follows it but the front's commit of nothing; the
 * front commits right after this statement even inside a pipeline of the
 * extended protocol (XACT_FLAGS_NEEDIMMEDIATECOMMIT), so no later
 * statement joins its transaction.
 */
bool
ConnectionCommitAloneOk(void)
{
	if (!commit_alone || IsTransactionBlock() || GetCurrentTransactionNestLevel() != 1 ||
		FullTransactionIdIsValid(GetTopFullTransactionIdIfAny()) ||
		ConnectionAnyOpen() != NULL)
		return false;
	MyXactFlags |= XACT_FLAGS_NEEDIMMEDIATECOMMIT;
	return true;
}

/*
 * release_together releases savepoint s<level> on every shard that has
 * it, all RELEASEs sent before any is awaited (ConnectionGroupExec).  A
 * failure dooms the shard's transaction and is raised once every answer
 * is in; the subtransaction then aborts, and since the shards that did
 * release can no longer undo its work, they are doomed too.
 */
static void
release_together(int level)
{
	int			nall;
	CdConnection **all = ConnectionList(&nall);
	CdGroupCommand *cmds = NULL;
	int			n = 0;
	int			failed = -1;

	for (int k = 0; k < nall; k++)
	{
		CdConnection *conn = all[k];

		if (conn->xact_depth < level)
			continue;
		if (conn->doomed || conn->handle == NULL)
		{
			conn->xact_depth = level - 1;
			continue;
		}
		/* most subtransactions (a fan-out's in autocommit) have none */
		if (cmds == NULL)
			cmds = palloc0(sizeof(CdGroupCommand) * nall);
		cmds[n].conn = conn;
		cmds[n].sql = psprintf(conn->adapter->sql_release, level);
		n++;
	}
	if (all)
		pfree(all);
	if (n == 0)
		return;
	ConnectionGroupRun(cmds, n, CD_EXEC_INTERNAL);
	for (int i = 0; i < n; i++)
		if (!cmds[i].ok)
		{
			cmds[i].conn->doomed = true;
			if (failed < 0)
				failed = i;
		}
	for (int i = 0; i < n; i++)
		if (cmds[i].ok)
		{
			cmds[i].conn->xact_depth = level - 1;
			if (failed >= 0)
				cmds[i].conn->doomed = true;
		}
	if (failed >= 0)
		RemoteRaise(CD_REMOTE_RELEASE, cmds[failed].conn->shard, cmds[failed].conn->adapter,
					NULL, &cmds[failed].err);
	pfree(cmds);
}

/*
 * subxact_callback releases or rolls back the shards'
 * savepoints with the front's subtransactions.
 */
static void
subxact_callback(SubXactEvent event, SubTransactionId mySubid,
							SubTransactionId parentSubid, void *arg)
{
	CdConnection **all;
	int			nall;
	int			level;

	if (event != SUBXACT_EVENT_PRE_COMMIT_SUB && event != SUBXACT_EVENT_ABORT_SUB)
		return;

	level = GetCurrentTransactionNestLevel();
	if (event == SUBXACT_EVENT_PRE_COMMIT_SUB)
	{
		ConnectionAwaitAllPending();
		release_together(level);
		return;
	}
	all = ConnectionList(&nall);
	for (int k = 0; k < nall; k++)
	{
		CdConnection *conn = all[k];

		if (conn->in_flight && conn->in_flight_level >= level)
		{
			/*
			 * A statement of this subtransaction abandoned midway (an
			 * interrupt, a row the front could not take): the shard may
			 * still be sending.  What it had open before the statement is
			 * lost with the connection.  Statements an outer level has in
			 * flight (a fan-out's) are not this subtransaction's.
			 */
			if (conn->xact_depth > 0)
				conn->doomed = true;
			ConnectionClose(conn);
			continue;
		}
		if (conn->xact_depth < level)
			continue;
		if (conn->doomed || conn->handle == NULL)
		{
			/* the shard's state inside its transaction is unknown */
			conn->doomed = true;
		}
		else if (!ConnectionRollbackTo(conn, level))
			conn->doomed = true;
		conn->xact_depth = level - 1;
	}
	if (all)
		pfree(all);
}
