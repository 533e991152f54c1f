/*-------------------------------------------------------------------------
 *
 * execute.c
 *	  Runs one statement on one shard: checks it, opens or joins the remote
 *	  transaction, retries once on a stale connection, and raises the
 *	  shard's errors with their identity and a context line.
 *
 * Transactions (src/README.md, "Transactions"): a read outside a
 * transaction block, on a shard with no open remote transaction, runs in
 * the shard's autocommit: one round trip.  So does a statement that the
 * dialect would commit implicitly (MySQL's DDL): it is refused inside an
 * open remote transaction, and otherwise not transactional.  Anything else
 * (a write, or any statement in a transaction block) joins the shard's
 * remote transaction, opening it with BEGIN (and SAVEPOINTs up to the
 * current subtransaction level) sent together with the statement.
 * connection.c commits and rolls back.
 *
 * A connection found dead when the statement started (a restarted shard)
 * is reconnected and the statement sent again, but only when no remote
 * transaction was open: then nothing on the shard can have happened twice
 * (a write always travels inside BEGIN, which a dropped connection rolls
 * back).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "lib/stringinfo.h"
#include "catalog/pg_type.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/resowner.h"

#include "cd_errcodes.h"
#include "collegedb.h"
#include "remote/connection_internal.h"

/*
 * RemoteStatementWritesOn says whether 'sql' is a write by the rules of
 * 'shard''s dialect: whatever its adapter cannot prove a read.
 */
bool
RemoteStatementWritesOn(const CdShard *shard, const char *sql)
{
	return !AdapterScan(AdapterForDialect(shard->dialect), sql).read_only;
}

/*
 * RemoteStatementWrites says whether 'sql' is a write on any of 'shards'
 * (by each one's dialect); with no shards given, on any registered shard,
 * and with none registered, in any dialect.  A statement that may reach
 * several dialects (a routed statement follows its key wherever it moved)
 * is a read only when every one of them proves it is.
 */
bool
RemoteStatementWrites(const CdShard *const *shards, int n, const char *sql)
{
	bool		dialects[CD_MAX_DIALECTS] = {false};
	bool		any = false;

	if (n == 0)
	{
		ListCell   *lc;

		foreach(lc, ShardList())
		{
			dialects[((const CdShard *) lfirst(lc))->dialect] = true;
			any = true;
		}
	}
	for (int i = 0; i < n; i++)
	{
		dialects[shards[i]->dialect] = true;
		any = true;
	}
	for (int d = 0; d < AdapterCount(); d++)
		if ((dialects[d] || !any) &&
			!AdapterScan(AdapterForDialect(d), sql).read_only)
			return true;
	return false;
}

/*
 * statement_problem says what no shard should receive, before anything is
 * sent: an empty string, parameter counts that do not match or that the
 * dialect cannot carry, and transaction control, which is collegedb's own
 * business (the shard's transaction follows the front's).  Several
 * commands in one string are refused by every dialect itself (the
 * extended protocol, a MySQL connection without multi-statements, the
 * SQLite adapter's check of what its parser left over), which unlike a
 * lexer knows that a trigger body's semicolons belong to one command.
 * Returns false with *problem filled, or true with *shape filled.
 */
static bool
statement_problem(const CdShard *shard, const char *sql, int nparams, int flags,
				  CdStatementShape *shape, CdStatementProblem *problem)
{
	const CdAdapter *adapter = AdapterForDialect(shard->dialect);

	memset(problem, 0, sizeof(*problem));
	if (nparams > adapter->max_params)
	{
		problem->sqlerrcode = ERRCODE_TOO_MANY_ARGUMENTS;
		problem->message = psprintf("cannot send %d parameters to %s shard \"%s\"",
									nparams, adapter->name, shard->name);
		problem->detail = psprintf("A statement on a %s shard takes at most %d parameters.",
								   adapter->name, adapter->max_params);
		return false;
	}
	*shape = AdapterScan(adapter, sql);
	if (shape->empty)
	{
		problem->sqlerrcode = ERRCODE_SYNTAX_ERROR;
		problem->message = psprintf("cannot run an empty statement on shard \"%s\"", shard->name);
		return false;
	}
	if (shape->max_param > nparams)
	{
		problem->sqlerrcode = ERRCODE_UNDEFINED_PARAMETER;
		problem->message = psprintf("there is no parameter $%d", shape->max_param);
		problem->detail = nparams == 1 ?
			psprintf("The statement uses $%d but %d parameter was given.", shape->max_param, nparams) :
			psprintf("The statement uses $%d but %d parameters were given.", shape->max_param, nparams);
		return false;
	}
	if (shape->max_param < nparams)
	{
		problem->sqlerrcode = ERRCODE_INVALID_PARAMETER_VALUE;
		if (shape->max_param == 0)
			problem->message = nparams == 1 ?
				psprintf("%d parameter was given but the statement uses none", nparams) :
				psprintf("%d parameters were given but the statement uses none", nparams);
		else
			problem->message = nparams == 1 ?
				psprintf("%d parameter was given but the statement uses only up to $%d",
						 nparams, shape->max_param) :
				psprintf("%d parameters were given but the statement uses only up to $%d",
						 nparams, shape->max_param);
		return false;
	}
	if (shape->transaction_control && !(flags & CD_EXEC_INTERNAL))
	{
		problem->sqlerrcode = ERRCODE_FEATURE_NOT_SUPPORTED;
		problem->message = psprintf("cannot run transaction control (%s) on shard \"%s\"",
									shape->first_word, shard->name);
		problem->detail = pstrdup("collegedb opens, commits and rolls back each shard's transaction with the front's.");
		problem->hint = pstrdup("Use BEGIN, SAVEPOINT, COMMIT and ROLLBACK on the front.");
		return false;
	}
	return true;
}

/*
 * StatementRaiseProblem raises what statement_problem found.
 */
void
StatementRaiseProblem(const CdStatementProblem *problem)
{
	ereport(ERROR,
			(errcode(problem->sqlerrcode),
			 errmsg_internal("%s", problem->message),
			 problem->detail ? errdetail_internal("%s", problem->detail) : 0,
			 problem->hint ? errhint("%s", problem->hint) : 0));
}

/*
 * commits_implicitly says whether the dialect commits the open transaction
 * when it runs a statement of this shape (MySQL's DDL).
 */
static bool
commits_implicitly(const CdAdapter *adapter, const CdStatementShape *shape)
{
	if (adapter->implicit_commit == NULL)
		return false;
	for (int i = 0; adapter->implicit_commit[i]; i++)
		if (strcmp(shape->first_word, adapter->implicit_commit[i]) == 0)
			return true;
	return false;
}

/*
 * StatementTryPrepare checks a statement for 'shard' and fills 'st'
 * (nothing is sent yet); false with *problem filled when the statement
 * must not be sent.  'flags': CD_EXEC_INTERNAL for collegedb's own
 * statements; a statement that is not a write runs with CD_EXEC_READ.
 */
bool
StatementTryPrepare(CdStatement *st, const CdShard *shard, const char *sql,
					int nparams, const CdParam *params, bool is_write, int flags,
					CdStatementProblem *problem)
{
	CdStatementShape shape;

	memset(st, 0, sizeof(*st));
	if (!statement_problem(shard, sql, nparams, flags, &shape, problem))
		return false;
	st->shard = shard;
	st->sql = sql;
	st->nparams = nparams;
	st->params = params;
	st->is_write = is_write;
	st->flags = flags | (is_write ? 0 : CD_EXEC_READ);
	/* a dialect without transactions runs everything in its autocommit */
	st->autocommit_only = !AdapterForDialect(shard->dialect)->caps.transactions ||
		commits_implicitly(AdapterForDialect(shard->dialect), &shape);
	st->level = GetCurrentTransactionNestLevel();
	st->in_block = IsTransactionBlock();
	return true;
}

/*
 * StatementPrepare is StatementTryPrepare that raises the problem.
 */
void
StatementPrepare(CdStatement *st, const CdShard *shard, const char *sql,
				 int nparams, const CdParam *params, bool is_write, int flags)
{
	CdStatementProblem problem;

	if (!StatementTryPrepare(st, shard, sql, nparams, params, is_write, flags, &problem))
		StatementRaiseProblem(&problem);
}

/*
 * StatementTryBegin takes the shard's connection (connecting if needed)
 * and works out the transaction-control commands that must precede the
 * statement; the caller sends them with it.  False with *problem filled
 * for a doomed remote transaction, a statement the dialect would commit
 * implicitly inside an open transaction, and too deep a nesting; it still
 * raises when connecting fails (see ConnectionGet).
 */
bool
StatementTryBegin(CdStatement *st, CdStatementProblem *problem)
{
	CdConnection *conn;

	ObserveBegan(st->shard);
	conn = ConnectionGet(st->shard);
	/* a statement sent earlier (RemoteSend) ends before the next one goes */
	ConnectionAwaitPending(conn);
	memset(problem, 0, sizeof(*problem));
	st->conn = conn;
	st->nsetup = 0;
	st->was_open = conn->xact_depth > 0;
	st->need_xact = !st->autocommit_only && !st->commit_alone &&
		(st->is_write || st->was_open || st->in_block);
	st->fresh = conn->fresh;
	st->xa_begin = false;
	st->gid[0] = '\0';
	memset(&st->err, 0, sizeof(st->err));
	st->rows = 0;

	if (conn->doomed)
	{
		problem->sqlerrcode = ERRCODE_CONNECTION_FAILURE;
		problem->message = psprintf("the transaction on shard \"%s\" was lost", st->shard->name);
		problem->detail = pstrdup("The connection to the shard failed earlier in this transaction.");
		problem->hint = pstrdup("Roll back the transaction and retry it.");
		return false;
	}

	if (st->autocommit_only && st->was_open)
	{
		problem->sqlerrcode = ERRCODE_ACTIVE_SQL_TRANSACTION;
		problem->message = psprintf("cannot run this statement inside a transaction on %s shard \"%s\"",
									conn->adapter->name, st->shard->name);
		problem->detail = pstrdup("The shard would commit its open transaction first.");
		problem->hint = pstrdup("Run it in its own transaction.");
		return false;
	}

	/*
	 * A caller's write that would leave the transaction unable to commit is
	 * refused before it is sent.  collegedb's own statements (a mover's)
	 * commit their shards themselves.
	 */
	if (st->is_write && st->need_xact && !st->commits_now &&
		(st->flags & CD_EXEC_INTERNAL) == 0 && TwoPhaseWriterProblem(conn, problem))
		return false;

	if (st->need_xact)
	{
		if (st->level - conn->xact_depth + 4 > MAX_SETUP_COMMANDS)
		{
			problem->sqlerrcode = ERRCODE_PROGRAM_LIMIT_EXCEEDED;
			problem->message = psprintf("too many nested subtransactions to open on shard \"%s\"",
										st->shard->name);
			return false;
		}
		if (st->level > Max(conn->xact_depth, 1) && !conn->adapter->caps.savepoints)
		{
			problem->sqlerrcode = ERRCODE_FEATURE_NOT_SUPPORTED;
			problem->message = psprintf("cannot open a subtransaction on %s shard \"%s\"",
										conn->adapter->name, st->shard->name);
			problem->detail = psprintf("%s shards have no savepoints.",
									   conn->adapter->display_name);
			return false;
		}
		/* conn->xact_depth follows at StatementFinish, once the shard answered */
		if (conn->xact_depth == 0)
		{
			/* a dialect that prepares only what began so (XA) begins so */
			TwoPhaseBeginGid(st->shard, conn, st->gid);
			st->xa_begin = st->gid[0] != '\0';
			if (st->xa_begin)
				st->setup[st->nsetup++] = psprintf(conn->adapter->two_phase_sql->begin, st->gid);
			else
				st->setup[st->nsetup++] = st->is_write ? conn->adapter->sql_begin_write :
					conn->adapter->sql_begin;
		}
		for (int l = Max(conn->xact_depth, 1) + 1; l <= st->level; l++)
			st->setup[st->nsetup++] = psprintf(conn->adapter->sql_savepoint, l);
	}

	/*
	 * If the statement is abandoned (an interrupt, or a row the sink cannot
	 * convert), in_flight stays set and the connection is closed at abort:
	 * rows stream, so the shard may still be sending.
	 */
	conn->in_flight = true;
	conn->in_flight_level = st->level;
	return true;
}

/*
 * StatementBegin is StatementTryBegin that raises the problem.
 */
void
StatementBegin(CdStatement *st)
{
	CdStatementProblem problem;

	if (!StatementTryBegin(st, &problem))
		StatementRaiseProblem(&problem);
}

/*
 * StatementFinish records how a statement ended: the remote transaction's
 * depth, a lost connection (closed; the transaction doomed if one was
 * open), the shared counters.  Returns whether the statement should be
 * sent again on a new connection: only when it failed on a stale cached
 * connection with nothing open on the shard.
 */
bool
StatementFinish(CdStatement *st, bool ok, int attempt)
{
	CdConnection *conn = st->conn;

	conn->in_flight = false;
	ActivityCountStatement(st->shard->name,
						ok ? NULL : st->err.message ? st->err.message : "unknown error");
	ObserveEnded(st->shard, st->rows, (st->flags & CD_EXEC_INTERNAL) != 0, ok);
	if (ok || !st->err.connection_lost)
	{
		/* an adapter's refusal before sending opened nothing on the shard */
		if (st->need_xact && (ok || !st->err.nothing_sent))
		{
			if (st->xa_begin)
			{
				conn->xa = true;
				strlcpy(conn->gid, st->gid, CD_GID_SIZE);
			}
			conn->xact_depth = st->level;
			if (st->is_write)
				conn->wrote = true;
		}
		return false;
	}

	ConnectionClose(conn);
	if (st->was_open)
	{
		conn->doomed = true;
		return false;
	}
	conn->xact_depth = 0;

	/*
	 * A statement that commits alone may have committed before the
	 * connection failed: sent again only when it never left.
	 */
	if (attempt == 0 && !st->fresh && (!st->commit_alone || st->err.nothing_sent))
	{
		if (CollegeDebug)
			elog(LOG, "collegedb: reconnecting to shard \"%s\": %s",
				 st->shard->name, st->err.message);
		return true;
	}
	return false;
}

/*
 * statement_error_context names the shard and the statement in an error
 * raised while the statement runs: an interrupt, statement_timeout, a row
 * the caller's sink cannot take.
 */
static void
statement_error_context(void *arg)
{
	CdStatement *st = arg;

	errcontext("shard \"%s\" (%s): %s", st->shard->name,
			   AdapterForDialect(st->shard->dialect)->name, st->sql);
}

/*
 * StatementContextPush installs statement_error_context for 'st' while its
 * adapter runs it; StatementContextPop removes it before the statement's
 * own failure is raised (which carries the same line).
 */
void
StatementContextPush(CdStatement *st, ErrorContextCallback *callback)
{
	callback->callback = statement_error_context;
	callback->arg = st;
	callback->previous = error_context_stack;
	error_context_stack = callback;
}

void
StatementContextPop(ErrorContextCallback *callback)
{
	error_context_stack = callback->previous;
}

/*
 * StatementRaise raises a failed statement's error.
 */
void
StatementRaise(CdStatement *st)
{
	RemoteRaise(CD_REMOTE_STATEMENT, st->shard->name, AdapterForDialect(st->shard->dialect),
				st->sql, &st->err);
}

/*
 * execute_rows runs a checked statement with retries on a stale
 * connection; see RemoteExecute.  With 'nrows' > 0 the statement is one
 * row's and runs once for each of 'nrows' rows of st->nparams values
 * (CdAdapter.exec_rows); execute runs it once.
 */
static int64
execute_rows(CdStatement *st, CdRowSink *sink, int nrows)
{
	for (int attempt = 0;; attempt++)
	{
		bool		ok;
		ErrorContextCallback context;

		StatementBegin(st);
		StatementContextPush(st, &context);
		if (nrows > 0)
			ok = st->conn->adapter->exec_rows(st->conn->handle, st->nsetup, st->setup,
											  st->sql, nrows, st->nparams, st->params,
											  st->flags, &st->rows, &st->err);
		else
			ok = st->conn->adapter->exec(st->conn->handle, st->nsetup, st->setup, st->sql,
										 st->nparams, st->params, st->flags, sink,
										 &st->rows, &st->err);
		StatementContextPop(&context);
		if (StatementFinish(st, ok, attempt))
			continue;
		if (ok)
			return st->rows;
		StatementRaise(st);
	}
}

static int64
execute(CdStatement *st, CdRowSink *sink)
{
	return execute_rows(st, sink, 0);
}

/*
 * RemoteExecuteRows runs the one-row write 'sql' on 'shard' once for each
 * of 'nrows' rows of 'ncols' values ('params', row after row), in the
 * shard's remote transaction, by the dialect's exec_rows (a dialect
 * without one is not asked: RemoteExecutesRows); returns the rows
 * affected by all of them.
 */
int64
RemoteExecuteRows(const CdShard *shard, const char *sql, int nrows, int ncols,
				  const CdParam *params)
{
	CdStatement st;

	Assert(RemoteExecutesRows(shard) && nrows > 0);
	StatementPrepare(&st, shard, sql, ncols, params, true, 0);
	return execute_rows(&st, NULL, nrows);
}

/*
 * RemoteExecutesRows says whether 'shard''s dialect runs a one-row
 * statement for many rows at once (RemoteExecuteRows).
 */
bool
RemoteExecutesRows(const CdShard *shard)
{
	return AdapterForDialect(shard->dialect)->exec_rows != NULL;
}

/*
 * RemoteExecute runs 'sql' with 'params' on 'shard', streaming rows to
 * 'sink' (NULL: none), and returns the rows affected (or returned).
 * 'is_write' makes the statement join the shard's remote transaction even
 * outside a transaction block; otherwise it runs as a read, and an adapter
 * that finds it writes refuses it.
 */
int64
RemoteExecute(const CdShard *shard, const char *sql, int nparams,
			  const CdParam *params, CdRowSink *sink, bool is_write)
{
	CdStatement st;

	StatementPrepare(&st, shard, sql, nparams, params, is_write, 0);
	return execute(&st, sink);
}

/*
 * sent ends RemoteSend and RemoteSendRows: the statement stays on the
 * connection until it is awaited, or its failure to go out is raised.
 */
static CdPendingStatement *
sent(CdStatement *st, bool ok)
{
	if (!ok)
	{
		(void) StatementFinish(st, false, 1);
		StatementRaise(st);
	}
	st->done = false;
	st->conn->pending = st;
	return st;
}

/*
 * RemoteSend sends 'sql' with 'params' to 'shard' as a write that joins
 * the shard's open remote transaction, and returns without waiting for
 * the answer, so that the caller can prepare its next work (or another
 * shard's) meanwhile; RemoteAwait gets the answer, and raises its
 * failure.  The statement and 'params' must stay valid until then (an
 * adapter may send a statement again to prepare it).  Any other use of
 * the connection awaits it first (StatementTryBegin, the end of a
 * (sub)transaction), and an abort before that closes the connection, as
 * for any statement abandoned midway.  A statement that would open the
 * remote transaction, or a dialect without asynchronous statements, runs
 * to its end at once instead (a stale connection is then retried, as by
 * RemoteExecute).  The result is allocated in the current memory context.
 */
CdPendingStatement *
RemoteSend(const CdShard *shard, const char *sql, int nparams, const CdParam *params)
{
	CdStatement *st = palloc(sizeof(CdStatement));
	CdConnection *conn;
	ErrorContextCallback context;
	bool		ok;

	StatementPrepare(st, shard, sql, nparams, params, true, 0);
	conn = ConnectionGet(shard);
	ConnectionAwaitPending(conn);
	if (conn->adapter->send == NULL || conn->handle == NULL || conn->xact_depth == 0 ||
		conn->doomed || st->autocommit_only)
	{
		st->rows = execute(st, NULL);
		st->done = true;
		return st;
	}
	StatementBegin(st);
	StatementContextPush(st, &context);
	ok = conn->adapter->send(conn->handle, st->nsetup, st->setup, st->sql, st->nparams,
							 st->params, st->flags, &st->err);
	StatementContextPop(&context);
	return sent(st, ok);
}

/*
 * RemoteSendsRows says whether a batch of rows can go to 'shard' by its
 * dialect's bulk path now (RemoteSendRows): the dialect has one,
 * collegedb.insert_by_copy allows it, and the shard's remote transaction
 * is open down to the current subtransaction, so that nothing has to be
 * sent before the rows.
 */
bool
RemoteSendsRows(const CdShard *shard)
{
	CdConnection *conn;

	if (!CollegeInsertByCopy || AdapterForDialect(shard->dialect)->send_rows == NULL)
		return false;
	conn = ConnectionGet(shard);
	return conn->handle != NULL && !conn->doomed && conn->xact_depth > 0 &&
		GetCurrentTransactionNestLevel() <= conn->xact_depth;
}

/*
 * RemoteSendRows sends 'nrows' rows of 'ncols' values ('params', row after
 * row) into a table of 'shard' by the dialect's bulk statement 'sql'
 * (CdAdapter.rows_sql filled in), as RemoteSend sends a statement: the
 * answer, the rows inserted, comes from RemoteAwait.  Only where
 * RemoteSendsRows said yes; 'params' may go once this returns.
 */
CdPendingStatement *
RemoteSendRows(const CdShard *shard, const char *sql, int nrows, int ncols,
			   const CdParam *params)
{
	CdStatement *st = palloc(sizeof(CdStatement));
	CdConnection *conn;
	ErrorContextCallback context;
	bool		ok;

	StatementPrepare(st, shard, sql, 0, NULL, true, 0);
	conn = ConnectionGet(shard);
	ConnectionAwaitPending(conn);
	Assert(RemoteSendsRows(shard));
	StatementBegin(st);
	Assert(st->nsetup == 0);
	StatementContextPush(st, &context);
	ok = conn->adapter->send_rows(conn->handle, st->sql, nrows, ncols, params, st->flags,
								  &st->err);
	StatementContextPop(&context);
	return sent(st, ok);
}

/*
 * RemoteAwait waits for a statement that RemoteSend sent, as an exec of it
 * would (statement_timeout and interrupts cancel it), and returns its rows
 * affected; raises its failure.
 */
int64
RemoteAwait(CdPendingStatement *st)
{
	CdConnection *conn = st->conn;
	const CdAdapter *adapter;
	bool		interruptible;
	TimestampTz deadline;
	CdWaitSlot	slot;
	CdWaitSet  *volatile ws = NULL;
	CdPollResult r = CD_POLL_FAILED;
	int64		rows = 0;
	ErrorContextCallback context;

	if (st->done)
		return st->rows;
	st->done = true;
	if (conn->pending != st || conn->handle == NULL)
	{
		/* the connection was closed under it (an abort): nothing to wait for */
		AdapterSetError(&st->err, "08003", true, "the connection to the shard is closed",
						NULL, NULL);
		StatementRaise(st);
	}
	adapter = conn->adapter;
	deadline = AdapterExecDeadline(st->flags, &interruptible);
	memset(&slot, 0, sizeof(slot));
	slot.pos = -1;
	StatementContextPush(st, &context);
	PG_TRY();
	{
		for (;;)
		{
			r = adapter->poll(conn->handle, NULL, &rows, &st->err);
			if (r == CD_POLL_DONE || r == CD_POLL_FAILED)
				break;
			if (AdapterDeadlinePassed(deadline) || (!interruptible && AdapterStopWaiting()))
			{
				adapter->cancel(conn->handle, CollegeCleanupTimeout);
				AdapterSetGaveUp(&st->err, st->flags);
				r = CD_POLL_FAILED;
				break;
			}
			slot.sock = adapter->socket(conn->handle);
			slot.events = RemoteWaitEvents(r);
			if (ws == NULL)
				ws = RemoteWaitSetAcquire();
			RemoteWaitSlots(ws, &slot, 1, AdapterWaitTimeout(deadline), interruptible);
		}
	}
	PG_CATCH();
	{
		/* an interrupt: the statement stays in flight, closed at abort */
		if (ws)
			RemoteWaitSetRelease(ws, true);
		if (conn->handle)
			adapter->cancel(conn->handle, CollegeCleanupTimeout);
		PG_RE_THROW();
	}
	PG_END_TRY();
	StatementContextPop(&context);
	if (ws)
		RemoteWaitSetRelease(ws, false);
	conn->pending = NULL;
	st->rows = rows;
	(void) StatementFinish(st, r == CD_POLL_DONE, 1);
	if (r != CD_POLL_DONE)
		StatementRaise(st);
	return rows;
}

/*
 * ConnectionAwaitPending awaits what RemoteSend left on the wire of
 * 'conn', if anything.
 */
void
ConnectionAwaitPending(CdConnection *conn)
{
	if (conn->pending != NULL)
		(void) RemoteAwait(conn->pending);
}

/*
 * ConnectionAwaitAllPending awaits every connection's, before the front's
 * (sub)transaction ends them.
 */
void
ConnectionAwaitAllPending(void)
{
	CdConnection **all;
	int			n;

	all = ConnectionList(&n);
	for (int i = 0; i < n; i++)
		ConnectionAwaitPending(all[i]);
	if (all)
		pfree(all);
}

/*
 * RemoteExecuteInternal runs one of collegedb's own statements (a move's
 * copy, tombstones, probes, sizes, the objects add_shard creates): the
 * adapters allow these what they refuse statements a caller routed, such
 * as writes to collegedb_tombstones on SQLite shards.  Never pass it a
 * caller's text.
 */
int64
RemoteExecuteInternal(const CdShard *shard, const char *sql, int nparams,
					  const CdParam *params, CdRowSink *sink, bool is_write)
{
	CdStatement st;

	StatementPrepare(&st, shard, sql, nparams, params, is_write, CD_EXEC_INTERNAL);
	return execute(&st, sink);
}

/*
 * RemoteExecuteAside runs one of collegedb's own reads (a planner's
 * question, fdw/estimate.c) in the shard's autocommit, beside the front's
 * transaction: it never opens a remote transaction, also inside a
 * transaction block or subtransaction, and sends nothing when the shard's
 * connection has one open (or lost), returning -1.  Otherwise as
 * RemoteExecuteInternal.
 */
int64
RemoteExecuteAside(const CdShard *shard, const char *sql, int nparams,
				   const CdParam *params, CdRowSink *sink)
{
	CdStatement st;
	CdConnection *conn;

	StatementPrepare(&st, shard, sql, nparams, params, false, CD_EXEC_INTERNAL);
	conn = ConnectionGet(shard);
	if (conn->xact_depth > 0 || conn->doomed || conn->in_flight)
		return -1;
	st.autocommit_only = true;
	st.in_block = false;
	return execute(&st, sink);
}

/*
 * RemoteTry runs fn(arg) in an internal subtransaction, for a caller that
 * goes on after a failure: true when fn returned; otherwise the
 * subtransaction is rolled back (and with it the shards' part, back to
 * its savepoint, so that no remote transaction stays aborted) and the
 * error is returned in *failure (may be NULL), except a cancel or
 * statement_timeout, which is re-thrown.
 */
bool
RemoteTry(void (*fn) (void *arg), void *arg, ErrorData **failure)
{
	MemoryContext context = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	ErrorData  *volatile edata = NULL;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(context);
	PG_TRY();
	{
		fn(arg);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(context);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(context);
	CurrentResourceOwner = owner;
	if (edata != NULL && RemoteErrorIsInterrupt(edata))
		ReThrowError(edata);
	if (failure)
		*failure = edata;
	return edata == NULL;
}

/*
 * RemoteErrorIsInterrupt says whether a caught error is a query cancel or
 * statement_timeout (SQLSTATE 57014, also when a shard reported it): a
 * catch that goes on after a failure re-throws these, so that nothing
 * swallows a cancel.
 */
bool
RemoteErrorIsInterrupt(const ErrorData *edata)
{
	return edata->sqlerrcode == ERRCODE_QUERY_CANCELED || edata->elevel >= FATAL ||
		(edata->sqlerrcode == ERRCODE_T_R_DEADLOCK_DETECTED && WaitsRaisedVictim());
}
