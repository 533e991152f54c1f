/*-------------------------------------------------------------------------
 *
 * pg.c
 *	  The PostgreSQL shard adapter, on libpq: its operations table, and
 *	  running a statement.
 *
 * Statements go out with the extended protocol: one round trip for a
 * statement with parameters.  One with parameters is prepared on the shard
 * the first time the connection sends it (PQsendPrepare, in the same
 * pipeline as its execution) and executed by name after that
 * (PQsendQueryPrepared; the cache is pg_prepared.c); when the shard no
 * longer has it or its result type changed, and no transaction was open,
 * it is sent once more without a name.  Transaction-control commands
 * that must precede a statement (BEGIN, SAVEPOINT, the guard) travel with
 * it in one pipeline, so joining a remote transaction costs no extra round
 * trip.  A send that fails midway leaves the pipeline in a state nothing
 * can finish (no Sync went out), so it counts as a lost connection.  An
 * interrupt while a statement runs cancels the shard's query before the
 * error goes on.
 *
 * Parameters are sent in text form, typed with their built-in type OID,
 * except plain text, which is sent untyped so that the shard infers its
 * type from the context as it does for a literal; bytea goes in binary.
 * Results are read in text form, in single-row mode: each row reaches the
 * sink as it arrives, in a memory context reset after each row, so a large
 * result never sits whole in memory.  The statement runs as send + poll,
 * which fan-out drives for many shards at once and pg_exec drives for one.
 *
 * Connecting, waiting and cancelling are in pg_connect.c, the options in
 * pg_options.c.  This file does not decide about transactions or retries:
 * the remote layer (src/remote/) does.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <poll.h>

#include "access/transam.h"
#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/memutils.h"

#include "adapters/dialects.h"
#include "adapters/lexer.h"
#include "adapters/pg_internal.h"
#include "cd_errcodes.h"
#include "collegedb.h"

static const char *const pg_read_words[] = {
	"select", "values", "table", "show", "explain", "with", NULL
};
static const char *const pg_write_words[] = {
	"insert", "update", "delete", "merge", "into", NULL
};
static const char *const pg_transaction_words[] = {
	"begin", "start", "commit", "end", "rollback", "abort", "savepoint",
	"release", "prepare transaction", NULL
};

/* the words a prepared statement's name follows */
static const char *const pg_statement_name_words[] = {
	"prepare", "execute", "deallocate", NULL
};

static const CdLexerRules pg_lexer_rules = {
	.nested_comments = true,
	.dollar_quotes = true,
	.e_strings = true,
	.read_words = pg_read_words,
	.write_words = pg_write_words,
	.transaction_words = pg_transaction_words,
	.statement_name_words = pg_statement_name_words,
};

static int
pg_socket(void *h)
{
	return PQsocket(((PgHandle *) h)->conn);
}

static CdValueKind
pg_kind(Oid type)
{
	switch (type)
	{
		case BOOLOID:
			return CD_VALUE_BOOL;
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case OIDOID:
			return CD_VALUE_INT;
		case FLOAT4OID:
		case FLOAT8OID:
			return CD_VALUE_FLOAT;
		case NUMERICOID:
			return CD_VALUE_NUMERIC;
		case BYTEAOID:
			return CD_VALUE_BYTES;
		case JSONOID:
		case JSONBOID:
			return CD_VALUE_JSON;
		case DATEOID:
			return CD_VALUE_DATE;
		case TIMEOID:
			return CD_VALUE_TIME;
		case TIMESTAMPOID:
			return CD_VALUE_TIMESTAMP;
		case TIMESTAMPTZOID:
			return CD_VALUE_TIMESTAMPTZ;
		case UUIDOID:
			return CD_VALUE_UUID;
		default:
			return CD_VALUE_TEXT;
	}
}

/*
 * pg_columns reads a statement's row description, once: the value kinds
 * and the per-row buffers, in the statement's context, and the column
 * names for the sink.
 */
static void
pg_columns(PgHandle *handle, PGresult *res, CdRowSink *sink)
{
	int			ncols = PQnfields(res);
	MemoryContext old = MemoryContextSwitchTo(handle->statement_context);
	const char **names = palloc(sizeof(char *) * Max(ncols, 1));

	handle->ncols = ncols;
	handle->kinds = palloc(sizeof(CdValueKind) * Max(ncols, 1));
	handle->cells = palloc(sizeof(CdCell) * Max(ncols, 1));
	handle->unescaped = palloc0(sizeof(unsigned char *) * Max(ncols, 1));
	for (int c = 0; c < ncols; c++)
	{
		names[c] = PQfname(res, c);
		handle->kinds[c] = pg_kind(PQftype(res, c));
	}
	MemoryContextSwitchTo(old);
	handle->columns_sent = true;
	if (sink)
		sink->columns(sink, ncols, names);
}

/*
 * pg_free_unescaped frees the row's unescaped bytea values.
 */
static void
pg_free_unescaped(PgHandle *handle)
{
	for (int c = 0; c < handle->ncols; c++)
	{
		if (handle->unescaped[c])
			PQfreemem(handle->unescaped[c]);
		handle->unescaped[c] = NULL;
	}
}

/*
 * pg_deliver hands the rows of a result (one row in single-row mode) to
 * the sink, each with the row context current and reset after it: nothing
 * is allocated per row that outlives the row.
 */
static void
pg_deliver(PgHandle *handle, PGresult *res, CdRowSink *sink)
{
	int			nrows = PQntuples(res);
	CdCell	   *cells = handle->cells;

	if (sink == NULL)
		return;

	PG_TRY();
	{
		for (int r = 0; r < nrows; r++)
		{
			for (int c = 0; c < handle->ncols; c++)
			{
				cells[c].kind = handle->kinds[c];
				cells[c].isnull = PQgetisnull(res, r, c);
				cells[c].data = PQgetvalue(res, r, c);
				cells[c].len = PQgetlength(res, r, c);
				if (cells[c].kind == CD_VALUE_BYTES && !cells[c].isnull)
				{
					size_t		len;

					handle->unescaped[c] = PQunescapeBytea((unsigned char *) cells[c].data, &len);
					if (handle->unescaped[c] == NULL)
						ereport(ERROR,
								(errcode(ERRCODE_OUT_OF_MEMORY),
								 errmsg("out of memory")));
					cells[c].data = (char *) handle->unescaped[c];
					cells[c].len = len;
				}
			}
			AdapterDeliverRow(sink, handle->ncols, cells, handle->row_context);
			pg_free_unescaped(handle);
		}
	}
	PG_CATCH();
	{
		pg_free_unescaped(handle);
		PG_RE_THROW();
	}
	PG_END_TRY();
}

/*
 * pg_idle_alive says whether an idle connection is still in step: nothing
 * arrived on it since its last result (a shard that restarted or ended
 * the session has sent its farewell, or closed the socket).
 */
static bool
pg_idle_alive(PGconn *conn)
{
	struct pollfd pfd;

	pfd.fd = PQsocket(conn);
	pfd.events = POLLIN;
	pfd.revents = 0;
	if (pfd.fd < 0 || PQstatus(conn) != CONNECTION_OK)
		return false;
	return poll(&pfd, 1, 0) == 0;
}

/*
 * pg_send_named sends one statement by its prepared name, preceded by its
 * Parse when the shard does not have it yet, and by PG_DEALLOCATE_OWN_SQL
 * when the shard may hold statements the cache forgot; it records at which
 * pipeline places these answers come.
 */
static bool
pg_send_named(PgHandle *handle, PgPrepared *entry, const char *sql, int nparams,
			  const Oid *types, const char *const *values, const int *lengths,
			  const int *formats)
{
	PGconn	   *conn = handle->conn;
	char		name[PG_PREPARED_NAME_LEN];

	PgPreparedName(entry, name);
	if (!entry->ready)
	{
		if (handle->deallocate_pending && handle->deallocate_index < 0)
		{
			handle->deallocate_index = handle->queries++;
			if (!PQsendQueryParams(conn, PG_DEALLOCATE_OWN_SQL, 0, NULL, NULL, NULL, NULL, 0))
				return false;
		}
		handle->parse_at[handle->queries++] = entry;
		if (!PQsendPrepare(conn, name, sql, nparams, types))
			return false;
	}
	handle->named_at[handle->queries++] = true;
	return PQsendQueryPrepared(conn, name, nparams, values, lengths, formats, 0);
}

/*
 * pg_start sends what pg_send set up in the handle: the setup commands
 * (the guard by its prepared name, with the key as its parameter), then
 * the statement, by name when it has parameters.  One pipeline when more
 * than one query goes out, and single-row mode for the statement.
 */
static bool
pg_start(PgHandle *handle, CdRemoteError *err)
{
	PGconn	   *conn = handle->conn;
	int			maxq = 3 * handle->nsetup + 3;
	bool		sent = true;
	bool		by_name = handle->nparams > 0 && !(handle->flags & CD_EXEC_CLEANUP);
	PgPrepared *statement = NULL;
	PgPrepared *guard = NULL;
	MemoryContext old = MemoryContextSwitchTo(handle->statement_context);

	handle->parse_at = palloc0(sizeof(PgPrepared *) * maxq);
	handle->named_at = palloc0(sizeof(bool) * maxq);
	MemoryContextSwitchTo(old);

	/* both lookups first: neither may empty the cache under the other */
	if (by_name || handle->guard_key)
		PgPreparedMakeRoom(handle, 2);
	if (by_name)
		statement = PgPreparedLookup(handle, handle->sql, handle->nparams,
									 handle->param_types);
	if (handle->guard_key)
	{
		Oid			text_type = InvalidOid;

		guard = PgPreparedLookup(handle, PG_GUARD_SQL, 1, &text_type);
	}

	handle->queries = 0;
	handle->deallocate_index = -1;
	handle->pipeline = handle->nsetup > 0 || (statement && !statement->ready);
	handle->current = 0;
	handle->single_row = false;
	handle->columns_sent = false;
	handle->rows = 0;
	handle->failed = false;
	handle->retry = false;
	handle->is_commit = (handle->flags & CD_EXEC_COMMIT) != 0;
	handle->ncols = 0;
	handle->kinds = NULL;
	handle->cells = NULL;
	handle->unescaped = NULL;

	if (handle->pipeline)
		sent = PQenterPipelineMode(conn);
	for (int i = 0; sent && i < handle->nsetup; i++)
	{
		if (guard && strcmp(handle->setup[i], PG_GUARD_SQL) == 0)
		{
			const char *values[1] = {handle->guard_key};

			sent = pg_send_named(handle, guard, PG_GUARD_SQL, 1, NULL, values, NULL, NULL);
			continue;
		}
		handle->queries++;
		sent = PQsendQueryParams(conn, handle->setup[i], 0, NULL, NULL, NULL, NULL, 0);
	}
	if (sent && statement)
		sent = pg_send_named(handle, statement, handle->sql, handle->nparams,
							 handle->param_types, handle->param_values,
							 handle->param_lengths, handle->param_formats);
	else if (sent)
	{
		handle->queries++;
		sent = PQsendQueryParams(conn, handle->sql, handle->nparams, handle->param_types,
								 handle->param_values, handle->param_lengths,
								 handle->param_formats, 0);
	}
	if (sent && handle->pipeline)
		sent = PQpipelineSync(conn);
	if (sent && !handle->pipeline)
		handle->single_row = PQsetSingleRowMode(conn);
	if (!sent)
	{
		/*
		 * Part of it may be queued, or on the wire, without the Sync that
		 * would end the pipeline: nothing can bring this connection back in
		 * step (a ROLLBACK would wait forever), so it is lost.
		 */
		PgFillError(conn, NULL, err);
		err->connection_lost = true;
		if (strncmp(err->sqlstate, "08", 2) != 0)
			memcpy(err->sqlstate, "08006", 6);
		return false;
	}
	return true;
}

/*
 * pg_send starts the setup commands and the statement without waiting:
 * one pipeline when there are setup commands, and single-row mode for the
 * statement, so that rows reach the sink as they arrive and no result is
 * ever held whole in memory.  A statement with more parameters than the
 * protocol carries fails before anything is sent; a send that fails
 * midway loses the connection.  See adapter.h.
 */
static bool
pg_send(void *h, int nsetup, const char *const *setup, const char *sql,
		int nparams, const CdParam *params, int flags, CdRemoteError *err)
{
	PgHandle   *handle = h;
	MemoryContext old;
	Oid		   *types;
	const char **values;
	int		   *lengths;
	int		   *formats;

	if (AdapterTooManyParams(nparams, PG_MAX_PARAMS, "a PostgreSQL", err))
		return false;

	if (handle->statement_context == NULL)
	{
		handle->statement_context = AllocSetContextCreate(TopMemoryContext,
														  "collegedb pg statement",
														  ALLOCSET_SMALL_SIZES);
		handle->row_context = AllocSetContextCreate(handle->statement_context,
													"collegedb pg row",
													ALLOCSET_DEFAULT_SIZES);
	}
	MemoryContextReset(handle->row_context);
	MemoryContextResetOnly(handle->statement_context);
	old = MemoryContextSwitchTo(handle->statement_context);
	types = palloc(sizeof(Oid) * Max(nparams, 1));
	values = palloc(sizeof(char *) * Max(nparams, 1));
	lengths = palloc(sizeof(int) * Max(nparams, 1));
	formats = palloc(sizeof(int) * Max(nparams, 1));
	for (int i = 0; i < nparams; i++)
	{
		const CdParam *p = &params[i];

		types[i] = (p->kind == CD_VALUE_TEXT || p->kind == CD_VALUE_NULL ||
					p->typid >= FirstNormalObjectId) ? InvalidOid : p->typid;
		formats[i] = 0;
		lengths[i] = 0;
		switch (p->kind)
		{
			case CD_VALUE_NULL:
				values[i] = NULL;
				break;
			case CD_VALUE_BYTES:
				types[i] = BYTEAOID;
				values[i] = p->str;
				lengths[i] = p->len;
				formats[i] = 1;
				break;
			case CD_VALUE_TIMESTAMPTZ:
				values[i] = psprintf("%s+00", p->str);
				break;
			default:
				values[i] = p->str;
				break;
		}
	}
	MemoryContextSwitchTo(old);

	handle->sql = sql;
	handle->nparams = nparams;
	handle->param_types = types;
	handle->param_values = values;
	handle->param_lengths = lengths;
	handle->param_formats = formats;
	handle->setup = setup;
	handle->nsetup = nsetup;
	handle->flags = flags;
	handle->guard_key = (flags & CD_EXEC_GUARD) ? params[nparams].str : NULL;
	handle->resent = false;
	handle->forgets = false;
	if (!(flags & CD_EXEC_INTERNAL) &&
		!PgPreparedCheck(&CdPostgresAdapter, sql, &handle->forgets, err))
		return false;
	if ((flags & CD_EXEC_ALONE) && !pg_idle_alive(handle->conn))
	{
		AdapterSetError(err, "08006", true,
						"the connection to the shard ended while it was idle", NULL, NULL);
		err->nothing_sent = true;
		return false;
	}
	return pg_start(handle, err);
}

/*
 * pg_prepared_failed handles a failure of a query sent by name: a
 * statement the shard no longer has (DISCARD ALL or DEALLOCATE ALL behind
 * collegedb's back: SQLSTATE 26000) empties the cache, a plan whose result
 * type changed (a table altered: 0A000) drops the statement's entry.
 * Either way nothing ran, so pg_poll may send it all again, once.
 */
static void
pg_prepared_failed(PgHandle *handle, const CdRemoteError *err)
{
	bool		gone = strcmp(err->sqlstate, "26000") == 0;

	if (!handle->named_at[handle->current] ||
		(!gone && strcmp(err->sqlstate, "0A000") != 0))
		return;
	PgPreparedForgetAll(handle, true);
	handle->retry = !handle->resent && !handle->columns_sent && handle->rows == 0;
}

/*
 * pg_poll_results makes progress on the statement started by pg_send without
 * blocking: flushes what is left to send, reads what has arrived, and
 * hands complete rows to the sink.  A COMMIT that the shard answers with
 * ROLLBACK (its transaction had failed) is a failure.  See adapter.h.
 */
static CdPollResult
pg_poll_results(PgHandle *handle, CdRowSink *sink, int64 *rows_affected,
				CdRemoteError *err)
{
	PGconn	   *conn = handle->conn;
	int			flush = PQflush(conn);

	if (flush < 0 || !PQconsumeInput(conn))
	{
		PgFillError(conn, NULL, err);
		err->connection_lost = true;
		return CD_POLL_FAILED;
	}
	if (flush > 0)
		return CD_POLL_WRITE;

	while (!PQisBusy(conn))
	{
		PGresult   *res;
		ExecStatusType st;
		bool		last = handle->current == handle->queries - 1;

		if (handle->current == handle->queries)
		{
			/* after the last query of a pipeline comes the sync */
			res = PQgetResult(conn);
			if (res == NULL)
				continue;
			st = PQresultStatus(res);
			PQclear(res);
			if (st == PGRES_PIPELINE_SYNC)
			{
				(void) PQexitPipelineMode(conn);
				break;
			}
			continue;
		}

		/* else at the statement's turn, if it has no rows parsed yet */
		if (last && handle->pipeline && !handle->single_row)
			handle->single_row = PQsetSingleRowMode(conn);

		res = PQgetResult(conn);
		if (res == NULL)
		{
			if (PQstatus(conn) == CONNECTION_BAD)
			{
				PgFillError(conn, NULL, err);
				return CD_POLL_FAILED;
			}
			handle->current++;
			if (handle->current == handle->queries && !handle->pipeline)
				break;

			/*
			 * The statement's turn: single-row mode now, before anything
			 * parses its first rows into one result.
			 */
			if (handle->pipeline && handle->current == handle->queries - 1)
				handle->single_row = PQsetSingleRowMode(conn);
			continue;
		}

		st = PQresultStatus(res);
		PG_TRY();
		{
			if ((st == PGRES_SINGLE_TUPLE || st == PGRES_TUPLES_OK) && last && !handle->failed)
			{
				if (!handle->columns_sent)
					pg_columns(handle, res, sink);
				pg_deliver(handle, res, sink);
				handle->rows += PQntuples(res);
			}
			else if (st == PGRES_COMMAND_OK && last && !handle->failed)
			{
				char	   *n = PQcmdTuples(res);

				if (handle->is_commit && strcmp(PQcmdStatus(res), "ROLLBACK") == 0)
				{
					AdapterSetError(err, "40000", false,
									"the shard rolled back the transaction instead of committing it",
									"A statement had failed in the shard's transaction, which aborted it.",
									NULL);
					handle->failed = true;
				}
				else
					handle->rows = n[0] ? strtoi64(n, NULL, 10) : 0;
			}
			else if ((st == PGRES_FATAL_ERROR || st == PGRES_BAD_RESPONSE) && !handle->failed)
			{
				PgFillError(conn, res, err);
				handle->failed = true;
				pg_prepared_failed(handle, err);
			}
			else if (st == PGRES_COMMAND_OK && handle->parse_at[handle->current])
				handle->parse_at[handle->current]->ready = true;
			else if (st == PGRES_COMMAND_OK && handle->current == handle->deallocate_index)
				handle->deallocate_pending = false;
		}
		PG_CATCH();
		{
			PQclear(res);
			PG_RE_THROW();
		}
		PG_END_TRY();
		PQclear(res);
	}

	if (PQisBusy(conn))
		return CD_POLL_READ;
	if (handle->forgets)
		PgPreparedForgetAll(handle, true);
	if (handle->failed)
		return CD_POLL_FAILED;
	*rows_affected = handle->rows;
	return CD_POLL_DONE;
}

/*
 * pg_poll is pg_poll_results, which also sends everything once more,
 * prepared anew, when a query sent by name failed before anything ran
 * (pg_prepared_failed) and that left no transaction open on the shard:
 * the caller sees one statement.  See adapter.h.
 */
static CdPollResult
pg_poll(void *h, CdRowSink *sink, int64 *rows_affected, CdRemoteError *err)
{
	PgHandle   *handle = h;

	for (;;)
	{
		CdPollResult result = pg_poll_results(handle, sink, rows_affected, err);

		if (result != CD_POLL_FAILED || !handle->retry ||
			PQstatus(handle->conn) != CONNECTION_OK ||
			PQtransactionStatus(handle->conn) != PQTRANS_IDLE)
			return result;
		if (CollegeDebug)
			elog(LOG, "collegedb: shard \"%s\": preparing again: %s",
				 handle->shard, err->message);
		handle->resent = true;
		if (!pg_start(handle, err))
			return CD_POLL_FAILED;
	}
}

/*
 * pg_send_rows sends 'nrows' rows by the COPY statement 'sql'
 * (CdAdapter.rows_sql): the statement as pg_send sends any, then the rows
 * (pg_copy.c).  See adapter.h.
 */
static bool
pg_send_rows(void *h, const char *sql, int nrows, int ncols, const CdParam *params,
			 int flags, CdRemoteError *err)
{
	if (!pg_send(h, 0, NULL, sql, 0, NULL, flags, err))
		return false;
	return PgCopyRows(h, nrows, ncols, params, flags, err);
}

/*
 * pg_exec runs a statement to completion: pg_send, then pg_poll while
 * waiting on the socket and the latch, so that a cancel or
 * statement_timeout interrupts it; the shard's query is then cancelled
 * before the error goes on.  The waits' deadline is AdapterExecDeadline's:
 * a cleanup gives up after collegedb.cleanup_timeout, or at once on a
 * pending cancel or termination; a COMMIT after statement_timeout.  See
 * adapter.h.
 */
static bool
pg_exec(void *h, int nsetup, const char *const *setup, const char *sql,
		int nparams, const CdParam *params, int flags, CdRowSink *sink,
		int64 *rows_affected, CdRemoteError *err)
{
	PgHandle   *handle = h;
	bool		interruptible;
	TimestampTz deadline = AdapterExecDeadline(flags, &interruptible);
	CdPollResult result = CD_POLL_FAILED;

	*rows_affected = 0;
	if (!pg_send(h, nsetup, setup, sql, nparams, params, flags, err))
		return false;
	PG_TRY();
	{
		while ((result = pg_poll(h, sink, rows_affected, err)) == CD_POLL_READ ||
			   result == CD_POLL_WRITE)
		{
			if (!PgHandleWait(handle, result == CD_POLL_READ ?
							  WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE, deadline, interruptible))
			{
				AdapterSetGaveUp(err, flags);
				result = CD_POLL_FAILED;
				break;
			}
		}
	}
	PG_CATCH();
	{
		if (PQstatus(handle->conn) == CONNECTION_OK &&
			PQtransactionStatus(handle->conn) == PQTRANS_ACTIVE)
			PgCancel(h, CollegeCleanupTimeout);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return result == CD_POLL_DONE;
}

/*
 * What add_shard creates on a PostgreSQL shard: the tombstone table, and
 * collegedb_guard(key), which takes the key's shared advisory lock (a mover
 * takes it exclusively) and fails with SQLSTATE CD0M1
 * (ERRCODE_CD_GUARD_MOVED), naming the destination, when the key has moved
 * away.  The guard's locks are bounded (src/README.md, "The guard's lock
 * footprint"): the first CD_GUARD_KEY_LOCKS keys of a shard transaction
 * take their own lock, counted in a transaction-local setting (rolled back
 * with a guard's savepoint, as its lock is); the next one takes
 * collegedb_tombstones in SHARE mode instead, which conflicts with the
 * ROW EXCLUSIVE lock a mover takes (lock_table_sql) before it reads any row,
 * and covers every later key of the transaction.
 */
static const char *const pg_shard_ddl[] = {
	"CREATE TABLE IF NOT EXISTS collegedb_tombstones ("
	"table_name text NOT NULL, shard_key text NOT NULL, moved_to text NOT NULL, "
	"move_id bigint, moved_at timestamptz NOT NULL DEFAULT now(), "
	"PRIMARY KEY (table_name, shard_key))",
	"CREATE INDEX IF NOT EXISTS collegedb_tombstones_key ON collegedb_tombstones (shard_key)",
	"CREATE OR REPLACE FUNCTION collegedb_guard(k text) RETURNS void LANGUAGE plpgsql AS $cd$"
	" DECLARE dest text; n int;"
	" BEGIN"
	"  n := coalesce(nullif(current_setting('collegedb_guard.keys', true), ''), '0')::int;"
	"  IF n < " CppAsString2(CD_GUARD_KEY_LOCKS) " THEN"
	"   PERFORM pg_advisory_xact_lock_shared(hashtextextended('collegedb:' || k, 0));"
	"   PERFORM set_config('collegedb_guard.keys', (n + 1)::text, true);"
	"  ELSIF n = " CppAsString2(CD_GUARD_KEY_LOCKS) " THEN"
	"   LOCK TABLE collegedb_tombstones IN SHARE MODE;"
	"   PERFORM set_config('collegedb_guard.keys', (n + 1)::text, true);"
	"  END IF;"
	"  SELECT moved_to INTO dest FROM collegedb_tombstones WHERE shard_key = k LIMIT 1;"
	"  IF dest IS NOT NULL THEN"
	"   RAISE EXCEPTION 'key moved to shard %', dest USING ERRCODE = '" CD_GUARD_MOVED_SQLSTATE "', DETAIL = dest;"
	"  END IF;"
	" END $cd$",
	/* the guard of a batch: the same locks, one lookup of every key */
	"CREATE OR REPLACE FUNCTION collegedb_guard_keys(ks text[]) RETURNS text LANGUAGE plpgsql AS $cd$"
	" DECLARE n int; k text; dest text;"
	" BEGIN"
	"  n := coalesce(nullif(current_setting('collegedb_guard.keys', true), ''), '0')::int;"
	"  IF n <= " CppAsString2(CD_GUARD_KEY_LOCKS) " THEN"
	"   FOREACH k IN ARRAY ks LOOP"
	"    EXIT WHEN n > " CppAsString2(CD_GUARD_KEY_LOCKS) ";"
	"    IF n < " CppAsString2(CD_GUARD_KEY_LOCKS) " THEN"
	"     PERFORM pg_advisory_xact_lock_shared(hashtextextended('collegedb:' || k, 0));"
	"    ELSE"
	"     LOCK TABLE collegedb_tombstones IN SHARE MODE;"
	"    END IF;"
	"    n := n + 1;"
	"   END LOOP;"
	"   PERFORM set_config('collegedb_guard.keys', n::text, true);"
	"  END IF;"
	"  SELECT moved_to INTO dest FROM collegedb_tombstones WHERE shard_key = ANY (ks) LIMIT 1;"
	"  RETURN dest;"
	" END $cd$",
	NULL
};

/*
 * The shard-side tables of topology groups (see adapter.h), keyed in
 * byte order.
 */
static const char *const pg_topology_ddl[] = {
	"CREATE TABLE IF NOT EXISTS collegedb_topology ("
	"group_name text COLLATE \"C\" PRIMARY KEY, version bigint NOT NULL, snapshot jsonb)",
	"CREATE TABLE IF NOT EXISTS collegedb_topology_state ("
	"group_name text COLLATE \"C\" NOT NULL, channel text COLLATE \"C\" NOT NULL, "
	"version bigint NOT NULL, value jsonb, PRIMARY KEY (group_name, channel))",
	NULL
};

/*
 * Two-phase commit on PostgreSQL: PREPARE TRANSACTION, which needs
 * max_prepared_transactions above 0 on the shard's server.  A shard
 * server's prepared transactions are those of its database.
 */
static const char *const pg_prepare[] = {"PREPARE TRANSACTION '%s'", NULL};

static const CdTwoPhaseSql pg_two_phase = {
	.prepare = pg_prepare,
	.commit_prepared = "COMMIT PREPARED '%s'",
	.rollback_prepared = "ROLLBACK PREPARED '%s'",
	.list_prepared = "SELECT gid FROM pg_catalog.pg_prepared_xacts "
	"WHERE database = pg_catalog.current_database()",
	.missing_sqlstate = "42704",
	.check = "SELECT CASE WHEN pg_catalog.current_setting('max_prepared_transactions')::int = 0 "
	"THEN 'max_prepared_transactions is 0 on the shard''s server.' END",
};

/*
 * PostgreSQL computes what PostgreSQL computes: every immutable built-in
 * operator and function of the front's types.  Text comparisons are still
 * written under "C" where they order, since the shard's database may sort
 * by another collation than the front's.
 */
static const CdExprRules pg_expr_rules = {
	.builtin = true,
	.text_equal = "%1$s = %2$s",
	.text_compare = "%1$s %3$s %2$s COLLATE \"C\"",
	.text_like = "%1$s %3$s %2$s",
	.store_checked = true,
	.agg_bool_and = "bool_and(%s)",
	.agg_bool_or = "bool_or(%s)",
	.nulls_order = true,
	.text_order_by = "%s COLLATE \"C\"",
};

const CdAdapter CdPostgresAdapter = {
	.name = "postgres",
	.display_name = "PostgreSQL",
	.a_name = "a PostgreSQL",
	.caps = {
		.transactions = true,
		.savepoints = true,
		.returning = true,
		.two_phase = true,
		.pipelining = true,
		.schemas = true,
		.login = true,
	},
	.connect = PgConnect,
	.exec = pg_exec,
	.send = pg_send,
	.send_rows = pg_send_rows,
	.poll = pg_poll,
	.socket = pg_socket,
	.cancel = PgCancel,
	.close = PgClose,
	.session_id = PgSessionId,
	.option_ok = PgOptionOk,
	.check_options = PgCheckOptions,
	.valid_options = PgValidOptions,
	.lexer = &pg_lexer_rules,
	.max_params = PG_MAX_PARAMS,
	.max_key_length = 0,
	/* at READ COMMITTED, the session's default (PG_SESSION_SETUP) */
	.sql_begin = "BEGIN",
	CD_SQL_STANDARD_TRANSACTION_CONTROL,
	.quote_ident = AdapterQuoteStandardIdent,
	.shard_ddl = pg_shard_ddl,
	.sql_begin_write = "BEGIN",
	.guard_setup = PG_GUARD_SQL,
	.guard_savepoint = "SAVEPOINT collegedb_guard",
	.guard_release = "RELEASE SAVEPOINT collegedb_guard",
	.guard_rollback_to = "ROLLBACK TO SAVEPOINT collegedb_guard",
	.guard_keys_sql = "SELECT collegedb_guard_keys($1::text[])",
	.guard_keys_array = true,
	.guard_keys_probe = "SELECT to_regprocedure('collegedb_guard_keys(text[])') IS NOT NULL",
	.lock_key_sql = "SELECT pg_advisory_xact_lock(hashtextextended('collegedb:' || $1, 0))",
	.lock_all_sql = "LOCK TABLE collegedb_tombstones IN SHARE MODE",
	.truncate_fmt = "TRUNCATE %s",
	.truncate_options = true,
	.insert_do_nothing = " ON CONFLICT DO NOTHING",
	.rows_sql = "COPY %s (%s) FROM STDIN",
	.import_sql = "SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), "
	"(i.indkey IS NOT NULL AND a.attnum = i.indkey[0])::int, a.attnotnull::int, n.nspname "
	"FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
	"JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped "
	"LEFT JOIN pg_index i ON i.indrelid = c.oid AND i.indisprimary "
	"WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'f') "
	"AND c.relname NOT LIKE 'collegedb\\_%' "
	"ORDER BY c.relname COLLATE \"C\", a.attnum",
	.lock_table_sql = "LOCK TABLE collegedb_tombstones IN ROW EXCLUSIVE MODE",
	.lock_keys_sql = "SELECT k FROM unnest($1::text[]) WITH ORDINALITY AS u(k, o) "
	"WHERE NOT pg_try_advisory_xact_lock(hashtextextended('collegedb:' || k, 0)) ORDER BY o",
	.two_phase_sql = &pg_two_phase,
	.row_identity = "ctid",
	.row_identity_match = "ctid = CAST(%1$s AS tid) AND CAST(%2$s AS bigint) IS NULL",
	.row_lock_clause = " FOR UPDATE",
	.size_sql = "SELECT pg_database_size(current_database()) AS size",
	/* reltuples scaled to the pages the table has now, as the planner does */
	.row_estimate_sql = "SELECT CASE WHEN c.reltuples < 0 THEN NULL "
	"WHEN c.relpages > 0 THEN c.reltuples / c.relpages * "
	"(pg_relation_size(c.oid) / current_setting('block_size')::int) "
	"ELSE c.reltuples END AS estimate, "
	"pg_relation_size(c.oid) / current_setting('block_size')::int AS pages "
	"FROM pg_catalog.pg_class c WHERE c.oid = pg_catalog.to_regclass("
	"CASE WHEN $2::text IS NULL THEN quote_ident($1::text) "
	"ELSE quote_ident($2::text) || '.' || quote_ident($1::text) END)",
	.key_match = "%1$s = $%2$d",
	.key_list_sql = " = ANY($%d)",
	/* pg_locks is cluster-wide and needs no privilege; so is pg_blocking_pids */
	.lock_waits_sql = "SELECT DISTINCT w.pid AS waiter, b.pid AS blocker "
	"FROM pg_catalog.pg_locks w, "
	"LATERAL unnest(pg_catalog.pg_blocking_pids(w.pid)) AS b(pid) "
	"WHERE NOT w.granted",
	.topology_ddl = pg_topology_ddl,
	.topology_publish = AdapterUpsertTopology,
	.topology_put_state = AdapterUpsertTopologyState,
	.expr_rules = &pg_expr_rules,
};
