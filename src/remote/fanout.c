/*-------------------------------------------------------------------------
 *
 * fanout.c
 *	  Runs one statement on many shards at once, with bounded concurrency
 *	  and a per-shard timeout, reporting each shard's failure as data.
 *
 * Statements on shards whose adapter can run asynchronously (PostgreSQL,
 * MySQL) are sent without waiting and then awaited together in one wait
 * set with the process latch, at most collegedb.fanout_concurrency at a
 * time.  A shard that takes longer than collegedb.fanout_timeout is
 * cancelled, its connection dropped, and reported as a timeout.  SQLite
 * shards, being local, run synchronously while the remote ones are in
 * flight.  A query cancel or statement_timeout on the front cancels every
 * statement still in flight before the error goes on.
 *
 * Memory stays bounded whatever the shards return: adapters stream rows to
 * the caller's sinks as they arrive (libpq in single-row mode), and the
 * sinks put them in tuplestores, which spill to disk beyond work_mem.
 *
 * Failures stay on their shard: the fan-out runs in an internal
 * subtransaction, so a shard whose statement joined its remote transaction
 * (a write, or a transaction block) and failed is rolled back to the
 * savepoint, and the others keep their work.
 *
 * A shard may have a statement of its own, and a sequence of them (see
 * CdFanoutShard.next): each next one starts on the shard's connection as
 * soon as the one before ended, whatever the other shards are doing.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

#include "collegedb.h"
#include "remote/connection_internal.h"
#include "remote/fanout.h"

typedef enum FanoutState
{
	FANOUT_QUEUED = 0,
	FANOUT_RUNNING,				/* sent, awaited */
	FANOUT_DONE
} FanoutState;

typedef struct FanoutWork
{
	CdFanoutShard *out;
	CdFanoutKind kind;
	FanoutState state;
	CdStatement st;
	int			attempt;
	CdPollResult waiting;		/* READ or WRITE while running */
	TimestampTz deadline;		/* 0: none */
	bool		in_block;		/* the front was in a transaction block */
	CdWaitSlot *slot;			/* its socket in the fan-out's wait set */
} FanoutWork;

static void ended(FanoutWork *w);
static void poll_one(FanoutWork *w, TimestampTz now);

/*
 * fail records a shard's failure: its SQLSTATE, message, detail and hint.
 */
static void
fail(FanoutWork *w, const char *sqlstate, const char *message, const char *detail,
	 const char *hint)
{
	w->out->ok = false;
	w->out->error = pstrdup(message);
	w->out->detail = detail ? pstrdup(detail) : NULL;
	w->out->hint = hint ? pstrdup(hint) : NULL;
	strlcpy(w->out->sqlstate, sqlstate, sizeof(w->out->sqlstate));
	ended(w);
}

/*
 * prepare checks a shard's statement 'sql' and queues it; a statement the
 * shard refuses before it is sent fails there alone.
 */
static void
prepare(FanoutWork *w, const char *sql, int nparams, const CdParam *params)
{
	const CdShard *shard = w->out->shard;
	bool		is_write = w->kind == CD_FANOUT_WRITE || w->kind == CD_FANOUT_AUTOCOMMIT ||
		((w->kind == CD_FANOUT_BY_DIALECT || w->kind == CD_FANOUT_EACH_COMMITS) &&
		 RemoteStatementWritesOn(shard, sql));
	CdStatementProblem problem;

	w->state = FANOUT_QUEUED;
	w->attempt = 0;
	if (!StatementTryPrepare(&w->st, shard, sql, nparams, params, is_write,
							 w->kind == CD_FANOUT_AUTOCOMMIT ? CD_EXEC_INTERNAL : 0,
							 &problem))
	{
		fail(w, unpack_sql_state(problem.sqlerrcode), problem.message,
			 problem.detail, problem.hint);
		return;
	}
	/* it commits on its own: no remote transaction is opened for it */
	if (w->kind == CD_FANOUT_AUTOCOMMIT)
		w->st.autocommit_only = true;
	w->st.commits_now = w->kind == CD_FANOUT_EACH_COMMITS;

	/*
	 * The fan-out's own subtransaction is not the caller's transaction
	 * block: a read outside one runs in each shard's autocommit, without
	 * BEGIN or SAVEPOINT, one round trip per shard.
	 */
	w->st.in_block = w->in_block;
}

/*
 * ended marks a shard's statement ended (its outcome filled in) and,
 * when the caller's 'next' gives the shard another statement, queues that.
 */
static void
ended(FanoutWork *w)
{
	CdFanoutShard *out = w->out;

	w->state = FANOUT_DONE;
	if (out->next == NULL || !out->next(out))
		return;
	out->ok = false;
	out->timed_out = false;
	out->rows = 0;
	out->error = NULL;
	out->detail = NULL;
	out->hint = NULL;
	prepare(w, out->sql, out->nparams, out->params);
}

/*
 * error_text renders a shard's error for the result row.
 */
static char *
error_text(const CdStatement *st)
{
	if (st->err.connection_lost)
		return psprintf("lost connection to shard \"%s\": %s", st->shard->name,
						st->err.message);
	return pstrdup(st->err.message ? st->err.message : "unknown error");
}

/*
 * undo_failure rolls a failed shard back to the fan-out's savepoint, so
 * that its remote transaction goes on without the failed statement.
 */
static void
undo_failure(FanoutWork *w)
{
	CdConnection *conn = w->st.conn;

	if (!w->st.need_xact || conn->handle == NULL || conn->doomed)
		return;
	if (!ConnectionRollbackTo(conn, w->st.level))
		conn->doomed = true;
}

/*
 * finish records the end of a statement, sending it again when it failed
 * on a stale connection.
 */
static void
finish(FanoutWork *w, bool ok, int64 rows)
{
	w->st.rows = rows;
	if (StatementFinish(&w->st, ok, w->attempt))
	{
		w->attempt++;
		w->state = FANOUT_QUEUED;
		return;
	}
	if (ok)
	{
		w->out->ok = true;
		w->out->rows = rows;
		ended(w);
		return;
	}
	undo_failure(w);
	fail(w, w->st.err.connection_lost ? "08006" : w->st.err.sqlstate, error_text(&w->st),
		 w->st.err.connection_lost ? NULL : w->st.err.detail, w->st.err.hint);
}

/*
 * begin_one takes a statement's connection (StatementBegin, for RemoteTry).
 */
static void
begin_one(void *arg)
{
	StatementBegin((CdStatement *) arg);
}

/*
 * start begins a shard's statement: asynchronously when its adapter can,
 * otherwise to completion right away.  Errors become the shard's result.
 *
 * Connecting may fail (no user mapping, the password rule, a shard that
 * cannot be reached): that runs in a subtransaction of its own
 * (RemoteTry), so that whatever the failed attempt left behind is released
 * before the fan-out goes on, and a cancel or statement_timeout is
 * re-thrown, never turned into a shard's error.  With the connection open
 * already, nothing can throw, and the checks' failures are data.
 */
static void
start(FanoutWork *w, int timeout_ms)
{
	const CdAdapter *adapter = AdapterForDialect(w->out->shard->dialect);

	if (ConnectionIsOpen(w->out->shard))
	{
		CdStatementProblem problem;

		if (!StatementTryBegin(&w->st, &problem))
		{
			fail(w, unpack_sql_state(problem.sqlerrcode), problem.message,
				 problem.detail, problem.hint);
			return;
		}
	}
	else
	{
		ErrorData  *failure;

		if (!RemoteTry(begin_one, &w->st, &failure))
		{
			fail(w, unpack_sql_state(failure->sqlerrcode), failure->message,
				 failure->detail, failure->hint);
			return;
		}
	}

	if (adapter->send == NULL)
	{
		ErrorContextCallback context;
		bool		ok;

		StatementContextPush(&w->st, &context);
		ok = adapter->exec(w->st.conn->handle, w->st.nsetup, w->st.setup,
						   w->st.sql, w->st.nparams, w->st.params, w->st.flags,
						   w->out->sink, &w->st.rows, &w->st.err);
		StatementContextPop(&context);
		finish(w, ok, w->st.rows);
		return;
	}

	if (!adapter->send(w->st.conn->handle, w->st.nsetup, w->st.setup, w->st.sql,
					   w->st.nparams, w->st.params, w->st.flags, &w->st.err))
	{
		finish(w, false, 0);
		return;
	}
	w->state = FANOUT_RUNNING;
	w->deadline = timeout_ms > 0 ?
		TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms) : 0;
	/* what it waits for first: mostly the answer, already (see wait_any) */
	poll_one(w, 0);
}

/*
 * cancel_running asks every shard still running to stop, all within one
 * collegedb.cleanup_timeout; their connections are closed at abort
 * (in_flight stays set).
 */
static void
cancel_running(FanoutWork *work, int n)
{
	TimestampTz deadline = AdapterCleanupDeadline();

	for (int i = 0; i < n; i++)
	{
		long		left = AdapterWaitTimeout(deadline);

		if (work[i].state == FANOUT_RUNNING && work[i].st.conn->handle && left > 0)
			work[i].st.conn->adapter->cancel(work[i].st.conn->handle, (int) left);
	}
}

/*
 * wait_any waits until a running shard's socket is ready, the latch is
 * set, or the nearest deadline passes; then services interrupts.  The
 * wait set 'ws' is the one kept from fan-out to fan-out: the same shards
 * waiting for their answers wait on it as they are, without a change.
 */
static void
wait_any(FanoutWork *work, int n, CdWaitSet *ws)
{
	TimestampTz nearest = 0;
	long		timeout = -1;

	for (int i = 0; i < n; i++)
	{
		FanoutWork *w = &work[i];

		w->slot->events = 0;
		if (w->state != FANOUT_RUNNING)
			continue;
		w->slot->events = RemoteWaitEvents(w->waiting);
		w->slot->sock = w->st.conn->adapter->socket(w->st.conn->handle);
		if (w->deadline && (nearest == 0 || w->deadline < nearest))
			nearest = w->deadline;
	}
	if (nearest)
		timeout = Max(TimestampDifferenceMilliseconds(GetCurrentTimestamp(), nearest), 0);
	RemoteWaitSlots(ws, work[0].slot, n, timeout, true);
}

/*
 * poll_one makes progress on a running shard's statement and handles its
 * end, or its running out of time.
 */
static void
poll_one(FanoutWork *w, TimestampTz now)
{
	CdPollResult r;
	int64		rows = 0;
	ErrorContextCallback context;

	StatementContextPush(&w->st, &context);
	r = w->st.conn->adapter->poll(w->st.conn->handle, w->out->sink, &rows, &w->st.err);
	StatementContextPop(&context);
	if (r == CD_POLL_DONE || r == CD_POLL_FAILED)
		finish(w, r == CD_POLL_DONE, rows);
	else if (w->deadline && now >= w->deadline)
	{
		w->st.conn->adapter->cancel(w->st.conn->handle, CollegeCleanupTimeout);
		w->st.err.connection_lost = true;	/* drop the connection */
		w->st.err.message = "timeout";
		(void) StatementFinish(&w->st, false, 1);
		w->out->timed_out = true;
		fail(w, "57014", psprintf("timeout after %d ms on shard \"%s\"",
								  CollegeFanoutTimeout, w->out->shard->name), NULL, NULL);
	}
	else
		w->waiting = r;
}

/*
 * progress polls the running shards whose socket the wait found ready,
 * and those that ran out of time.
 */
static void
progress(FanoutWork *work, int n)
{
	TimestampTz now = GetCurrentTimestamp();

	for (int i = 0; i < n; i++)
	{
		FanoutWork *w = &work[i];

		if (w->state == FANOUT_RUNNING &&
			(w->slot->ready || (w->deadline && now >= w->deadline)))
			poll_one(w, now);
	}
}

/*
 * FanoutRun runs 'sql' (or each shard's own statements, CdFanoutShard.sql
 * and .next) on every shard of 'shards' (their rows to each one's sink)
 * and fills in each one's outcome.  'kind' says whether it is a read, a
 * write, whatever each shard's dialect classifies it as, or collegedb's
 * own writes committed on each shard at once.  Errors of a shard are
 * reported in its outcome; only interrupts and errors of the front are
 * raised.
 */
void
FanoutRun(CdFanoutShard *shards, int n, const char *sql, int nparams,
		  const CdParam *params, CdFanoutKind kind)
{
	MemoryContext context = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	FanoutWork *work = palloc0(sizeof(FanoutWork) * Max(n, 1));
	CdWaitSlot *slots = palloc0(sizeof(CdWaitSlot) * Max(n, 1));
	int			concurrency = Max(CollegeFanoutConcurrency, 1);
	bool		in_block = IsTransactionBlock();
	CdWaitSet  *volatile ws = NULL;	/* see wait_any */

	/* the savepoint that a failed shard's remote transaction goes back to */
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(context);

	for (int i = 0; i < n; i++)
	{
		work[i].out = &shards[i];
		work[i].kind = kind;
		work[i].in_block = in_block;
		work[i].slot = &slots[i];
		slots[i].pos = -1;
		work[i].state = FANOUT_DONE;
		shards[i].ok = false;
		shards[i].timed_out = false;
		shards[i].rows = 0;
		shards[i].error = NULL;
		shards[i].detail = NULL;
		shards[i].hint = NULL;
	}

	PG_TRY();
	{
		/* a shard's own statement takes the fan-out's parameters unless it has some */
		for (int i = 0; i < n; i++)
		{
			CdFanoutShard *out = &shards[i];

			if (out->sql == NULL)
				prepare(&work[i], sql, nparams, params);
			else if (out->nparams == 0)
				prepare(&work[i], out->sql, nparams, params);
			else
				prepare(&work[i], out->sql, out->nparams, out->params);
		}
		for (;;)
		{
			int			running = 0;
			bool		pending = false;

			for (int i = 0; i < n; i++)
				running += work[i].state == FANOUT_RUNNING;
			for (int i = 0; i < n && running < concurrency; i++)
			{
				/* a shard run synchronously goes through its sequence at once */
				while (work[i].state == FANOUT_QUEUED && running < concurrency)
				{
					start(&work[i], CollegeFanoutTimeout);
					running += work[i].state == FANOUT_RUNNING;
				}
			}
			for (int i = 0; i < n; i++)
				pending |= work[i].state != FANOUT_DONE;
			if (!pending)
				break;
			if (running > 0)
			{
				if (ws == NULL)
					ws = RemoteWaitSetAcquire();
				wait_any(work, n, ws);
				progress(work, n);
			}
		}
		if (ws)
			RemoteWaitSetRelease(ws, false);
		ws = NULL;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		if (ws)
			RemoteWaitSetRelease(ws, true);
		ws = NULL;

		/*
		 * An error of the front (an interrupt, a row the sink cannot take):
		 * stop the shards, leave the subtransaction (closing connections
		 * still sending) and raise it in the caller's.
		 */
		cancel_running(work, n);
		MemoryContextSwitchTo(context);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(context);
		CurrentResourceOwner = owner;
		ReThrowError(edata);
	}
	PG_END_TRY();

	/* releases the successful shards' savepoints (connection.c) */
	ReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(context);
	CurrentResourceOwner = owner;
}


/*
 * FanoutRaise raises a shard's failure as the front's error (RemoteRaise),
 * with 'hint' when the failure has none, and 'sql' as the statement.
 */
void
FanoutRaise(const CdFanoutShard *shard, const char *sql, const char *hint)
{
	CdRemoteError err;

	memset(&err, 0, sizeof(err));
	strlcpy(err.sqlstate, shard->sqlstate, sizeof(err.sqlstate));
	err.message = shard->error;
	err.detail = shard->detail;
	err.hint = shard->hint ? shard->hint : (char *) hint;
	RemoteRaise(CD_REMOTE_STATEMENT, shard->shard->name,
				AdapterForDialect(shard->shard->dialect),
				shard->sql ? shard->sql : sql, &err);
}
