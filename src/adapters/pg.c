/*-------------------------------------------------------------------------
 *
 * pg.c
 *	  The PostgreSQL shard adapter, on libpq.
 *
 * Statements go out with the extended protocol (PQsendQueryParams): one
 * round trip for a statement with parameters.  Transaction-control commands
 * that must precede a statement (BEGIN, SAVEPOINT) travel with it in one
 * pipeline, so joining a remote transaction costs no extra round trip.
 * Every wait is on the socket and the process latch, so query cancel and
 * statement_timeout interrupt it; the remote query is then cancelled with
 * PQcancel before the error goes on.
 *
 * Parameters are sent in text form, typed with their built-in type OID,
 * except plain text, which is sent untyped so that the shard infers its
 * type from the context as it does for a literal; bytea goes in binary.
 * Results are read in text form, in single-row mode: each row reaches the
 * sink as it arrives, so a large result never sits whole in memory.  The
 * statement runs as send + poll, which fan-out drives for many shards at
 * once and pg_exec drives for one.
 *
 * This file does not decide about transactions or retries: the remote
 * layer (src/remote/) does.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_foreign_server.h"
#include "catalog/pg_type.h"
#include "catalog/pg_user_mapping.h"
#include "commands/defrem.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "libpq-fe.h"

#include "adapters/adapter.h"

#define PG_DEFAULT_CONNECT_TIMEOUT_MS 10000

static const char *const server_only_excluded[] = {
	"user", "password", "sslpassword", "client_encoding",
	"fallback_application_name", "replication", "dialect", NULL
};

/*
 * pg_fill_error copies a failure out of libpq: from 'res' when given,
 * else from the connection.
 */
static void
pg_fill_error(PGconn *conn, const PGresult *res, CdRemoteError *err)
{
	bool		lost = PQstatus(conn) == CONNECTION_BAD;

	if (res && PQresultStatus(res) == PGRES_FATAL_ERROR &&
		PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) != NULL)
	{
		AdapterSetError(err, PQresultErrorField(res, PG_DIAG_SQLSTATE), lost,
						PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY),
						PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL),
						PQresultErrorField(res, PG_DIAG_MESSAGE_HINT));
	}
	else
	{
		char	   *msg = pstrdup(PQerrorMessage(conn));
		size_t		len = strlen(msg);

		while (len > 0 && (msg[len - 1] == '\n' || msg[len - 1] == ' '))
			msg[--len] = '\0';
		AdapterSetError(err, lost ? "08006" : "XX000", lost,
						len ? msg : "unexpected libpq failure", NULL, NULL);
	}
}

/*
 * pg_notice_receiver forwards a shard's warnings; notices go to the server
 * log at DEBUG1 (CREATE ... IF NOT EXISTS and the like are not news).
 */
static void
pg_notice_receiver(void *arg, const PGresult *res)
{
	const char *severity = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
	const char *message = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
	const char *shard = arg;

	if (message == NULL)
		return;
	ereport(severity && strcmp(severity, "WARNING") == 0 ? WARNING : DEBUG1,
			(errmsg_internal("%s", message),
			 errcontext("shard \"%s\"", shard)));
}

/*
 * pg_wait waits until the socket is ready for 'events' (or the deadline in
 * ms passes, -1: none), servicing interrupts.  False on timeout.
 */
static bool
pg_wait(PGconn *conn, int events, TimestampTz deadline)
{
	long		timeout = -1;
	int			rc;

	if (deadline)
	{
		timeout = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
		if (timeout <= 0)
			return false;
	}
	rc = WaitLatchOrSocket(MyLatch,
						   WL_LATCH_SET | WL_EXIT_ON_PM_DEATH | events |
						   (deadline ? WL_TIMEOUT : 0),
						   PQsocket(conn), timeout, PG_WAIT_EXTENSION);
	if (rc & WL_LATCH_SET)
		ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
	return true;
}

typedef struct PgHandle
{
	PGconn	   *conn;
	char		shard[NAMEDATALEN];

	/* the statement in progress (pg_send .. pg_poll) */
	MemoryContext statement_context;
	bool		pipeline;		/* setup commands went first */
	int			queries;		/* setup commands + the statement */
	int			current;		/* whose results come next */
	bool		single_row;		/* single-row mode is on for the statement */
	bool		columns_sent;
	bool		failed;			/* err holds the first failure */
	CdValueKind *kinds;
	int64		rows;
} PgHandle;

/*
 * pg_connect opens a connection without blocking uninterruptibly, then
 * fixes the session settings collegedb relies on: ISO dates, exact floats,
 * standard strings, and UTC, the zone in which collegedb exchanges
 * zone-less timestamps with every dialect.
 */
static void *
pg_connect(const CdConnInfo *info, CdRemoteError *err)
{
	const char **keywords = palloc(sizeof(char *) * (info->noptions + 4));
	const char **values = palloc(sizeof(char *) * (info->noptions + 4));
	int			n = 0;
	int			timeout_ms = PG_DEFAULT_CONNECT_TIMEOUT_MS;
	TimestampTz deadline;
	PgHandle   *handle;
	PGconn	   *conn;
	PostgresPollingStatusType poll = PGRES_POLLING_WRITING;
	PGresult   *res;

	for (int i = 0; i < info->noptions; i++)
	{
		keywords[n] = info->options[i].keyword;
		values[n] = info->options[i].value;
		if (strcmp(keywords[n], "connect_timeout") == 0)
			timeout_ms = Max(atoi(values[n]), 1) * 1000;
		n++;
	}
	keywords[n] = "fallback_application_name";
	values[n++] = "collegedb";
	keywords[n] = "client_encoding";
	values[n++] = GetDatabaseEncodingName();
	keywords[n] = NULL;
	values[n] = NULL;

	conn = PQconnectStartParams(keywords, values, false);
	if (conn == NULL)
	{
		AdapterSetError(err, "08001", true, "out of memory in libpq", NULL, NULL);
		return NULL;
	}
	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);

	PG_TRY();
	{
		while (PQstatus(conn) != CONNECTION_BAD && poll != PGRES_POLLING_OK &&
			   poll != PGRES_POLLING_FAILED)
		{
			if (!pg_wait(conn, poll == PGRES_POLLING_READING ?
						 WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE, deadline))
				break;
			poll = PQconnectPoll(conn);
		}
	}
	PG_CATCH();
	{
		PQfinish(conn);
		PG_RE_THROW();
	}
	PG_END_TRY();

	if (poll != PGRES_POLLING_OK || PQstatus(conn) != CONNECTION_OK)
	{
		if (poll != PGRES_POLLING_FAILED && PQstatus(conn) != CONNECTION_BAD)
			AdapterSetError(err, "08001", true, "timeout expired", NULL, NULL);
		else
		{
			pg_fill_error(conn, NULL, err);
			memcpy(err->sqlstate, "08001", 6);
		}
		PQfinish(conn);
		return NULL;
	}

	/* postgres_fdw's rule: see remote/connection.c */
	if (info->require_password && !PQconnectionUsedPassword(conn))
	{
		PQfinish(conn);
		AdapterSetError(err, "2F003", true, "password is required",
						"Non-superuser cannot connect if the server does not request a password.",
						"Target server's authentication method must be changed or set the password_required=false in the user mapping attributes.");
		return NULL;
	}

	handle = malloc(sizeof(PgHandle));
	if (handle == NULL)
	{
		PQfinish(conn);
		AdapterSetError(err, "53200", true, "out of memory", NULL, NULL);
		return NULL;
	}
	memset(handle, 0, sizeof(PgHandle));
	handle->conn = conn;
	strlcpy(handle->shard, info->shard, NAMEDATALEN);
	PQsetNoticeReceiver(conn, pg_notice_receiver, handle->shard);

	/* one round trip at connect time, blocking is acceptable here */
	res = PQexec(conn, "SET datestyle = ISO; SET intervalstyle = postgres; "
				 "SET extra_float_digits = 3; SET standard_conforming_strings = on; "
				 "SET timezone = 'UTC'");
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
	{
		pg_fill_error(conn, res, err);
		memcpy(err->sqlstate, "08001", 6);
		err->connection_lost = true;
		PQclear(res);
		PQfinish(conn);
		free(handle);
		return NULL;
	}
	PQclear(res);

	/* sends never block: pg_poll flushes what is left */
	if (PQsetnonblocking(conn, 1) != 0)
	{
		pg_fill_error(conn, NULL, err);
		PQfinish(conn);
		free(handle);
		return NULL;
	}
	return handle;
}

static void
pg_close(void *h)
{
	PgHandle   *handle = h;

	if (handle == NULL)
		return;
	PQfinish(handle->conn);
	if (handle->statement_context)
		MemoryContextDelete(handle->statement_context);
	free(handle);
}

/*
 * pg_cancel asks the shard to cancel the running statement.
 */
static void
pg_cancel(void *h)
{
	PgHandle   *handle = h;
	PGcancel   *cancel = PQgetCancel(handle->conn);
	char		errbuf[256];

	if (cancel)
	{
		(void) PQcancel(cancel, errbuf, sizeof(errbuf));
		PQfreeCancel(cancel);
	}
}

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
 * pg_deliver hands the rows of a result (one row in single-row mode) to
 * the sink, sending the column names first, once per statement.
 */
static void
pg_deliver(PgHandle *handle, PGresult *res, CdRowSink *sink)
{
	int			ncols = PQnfields(res);
	int			nrows = PQntuples(res);
	CdCell	   *cells = palloc(sizeof(CdCell) * Max(ncols, 1));
	unsigned char **unescaped = palloc0(sizeof(unsigned char *) * Max(ncols, 1));

	if (!handle->columns_sent)
	{
		const char **names = palloc(sizeof(char *) * Max(ncols, 1));

		handle->kinds = MemoryContextAlloc(handle->statement_context,
										   sizeof(CdValueKind) * Max(ncols, 1));
		for (int c = 0; c < ncols; c++)
		{
			names[c] = PQfname(res, c);
			handle->kinds[c] = pg_kind(PQftype(res, c));
		}
		handle->columns_sent = true;
		if (sink)
			sink->columns(sink, ncols, names);
	}
	if (sink == NULL)
		return;

	PG_TRY();
	{
		for (int r = 0; r < nrows; r++)
		{
			for (int c = 0; c < ncols; c++)
			{
				cells[c].kind = handle->kinds[c];
				cells[c].isnull = PQgetisnull(res, r, c);
				cells[c].data = PQgetvalue(res, r, c);
				cells[c].len = PQgetlength(res, r, c);
				if (cells[c].kind == CD_VALUE_BYTES && !cells[c].isnull)
				{
					size_t		len;

					unescaped[c] = PQunescapeBytea((unsigned char *) cells[c].data, &len);
					if (unescaped[c] == NULL)
						ereport(ERROR,
								(errcode(ERRCODE_OUT_OF_MEMORY),
								 errmsg("out of memory")));
					cells[c].data = (char *) unescaped[c];
					cells[c].len = len;
				}
			}
			sink->row(sink, ncols, cells);
			for (int c = 0; c < ncols; c++)
			{
				if (unescaped[c])
					PQfreemem(unescaped[c]);
				unescaped[c] = NULL;
			}
		}
	}
	PG_CATCH();
	{
		for (int c = 0; c < ncols; c++)
			if (unescaped[c])
				PQfreemem(unescaped[c]);
		PG_RE_THROW();
	}
	PG_END_TRY();
}

/*
 * pg_send starts the setup commands and the statement without waiting:
 * one pipeline when there are setup commands, and single-row mode for the
 * statement, so that rows reach the sink as they arrive and no result is
 * ever held whole in memory.  See adapter.h.
 */
static bool
pg_send(void *h, int nsetup, const char *const *setup, const char *sql,
		int nparams, const CdParam *params, CdRemoteError *err)
{
	PgHandle   *handle = h;
	PGconn	   *conn = handle->conn;
	Oid		   *types = palloc(sizeof(Oid) * Max(nparams, 1));
	const char **values = palloc(sizeof(char *) * Max(nparams, 1));
	int		   *lengths = palloc(sizeof(int) * Max(nparams, 1));
	int		   *formats = palloc(sizeof(int) * Max(nparams, 1));
	bool		sent = true;

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

	if (handle->statement_context == NULL)
		handle->statement_context = AllocSetContextCreate(TopMemoryContext,
														  "collegedb pg statement",
														  ALLOCSET_SMALL_SIZES);
	MemoryContextReset(handle->statement_context);
	handle->pipeline = nsetup > 0;
	handle->queries = nsetup + 1;
	handle->current = 0;
	handle->single_row = false;
	handle->columns_sent = false;
	handle->rows = 0;
	handle->failed = false;
	handle->kinds = NULL;

	if (handle->pipeline)
	{
		sent = PQenterPipelineMode(conn);
		for (int i = 0; sent && i < nsetup; i++)
			sent = PQsendQueryParams(conn, setup[i], 0, NULL, NULL, NULL, NULL, 0);
	}
	if (sent)
		sent = PQsendQueryParams(conn, sql, nparams, types, values, lengths, formats, 0);
	if (sent && handle->pipeline)
		sent = PQpipelineSync(conn);
	if (sent && !handle->pipeline)
		handle->single_row = PQsetSingleRowMode(conn);
	if (!sent)
	{
		pg_fill_error(conn, NULL, err);
		return false;
	}
	return true;
}

/*
 * pg_poll makes progress on the statement started by pg_send without
 * blocking: flushes what is left to send, reads what has arrived, and
 * hands complete rows to the sink.  See adapter.h.
 */
static CdPollResult
pg_poll(void *h, CdRowSink *sink, int64 *rows_affected, CdRemoteError *err)
{
	PgHandle   *handle = h;
	PGconn	   *conn = handle->conn;
	int			flush = PQflush(conn);

	if (flush < 0 || !PQconsumeInput(conn))
	{
		pg_fill_error(conn, NULL, err);
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

		/* in a pipeline, single-row mode is set when the statement's turn comes */
		if (last && handle->pipeline && !handle->single_row)
			handle->single_row = PQsetSingleRowMode(conn);

		res = PQgetResult(conn);
		if (res == NULL)
		{
			if (PQstatus(conn) == CONNECTION_BAD)
			{
				pg_fill_error(conn, NULL, err);
				return CD_POLL_FAILED;
			}
			handle->current++;
			if (handle->current == handle->queries && !handle->pipeline)
				break;
			continue;
		}

		st = PQresultStatus(res);
		PG_TRY();
		{
			if ((st == PGRES_SINGLE_TUPLE || st == PGRES_TUPLES_OK) && last && !handle->failed)
			{
				pg_deliver(handle, res, sink);
				handle->rows += PQntuples(res);
			}
			else if (st == PGRES_COMMAND_OK && last && !handle->failed)
			{
				char	   *n = PQcmdTuples(res);

				handle->rows = n[0] ? strtoi64(n, NULL, 10) : 0;
			}
			else if ((st == PGRES_FATAL_ERROR || st == PGRES_BAD_RESPONSE) && !handle->failed)
			{
				pg_fill_error(conn, res, err);
				handle->failed = true;
			}
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
	if (handle->failed)
		return CD_POLL_FAILED;
	*rows_affected = handle->rows;
	return CD_POLL_DONE;
}

/*
 * pg_exec runs a statement to completion: pg_send, then pg_poll while
 * waiting on the socket and the latch, so that a cancel or
 * statement_timeout interrupts it; the shard's query is then cancelled
 * before the error goes on.  See adapter.h.
 */
static bool
pg_exec(void *h, int nsetup, const char *const *setup, const char *sql,
		int nparams, const CdParam *params, CdRowSink *sink,
		int64 *rows_affected, CdRemoteError *err)
{
	PgHandle   *handle = h;
	CdPollResult result = CD_POLL_FAILED;

	*rows_affected = 0;
	if (!pg_send(h, nsetup, setup, sql, nparams, params, err))
		return false;
	PG_TRY();
	{
		while ((result = pg_poll(h, sink, rows_affected, err)) == CD_POLL_READ ||
			   result == CD_POLL_WRITE)
			pg_wait(handle->conn, result == CD_POLL_READ ? WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE, 0);
	}
	PG_CATCH();
	{
		if (PQstatus(handle->conn) == CONNECTION_OK &&
			PQtransactionStatus(handle->conn) == PQTRANS_ACTIVE)
			pg_cancel(h);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return result == CD_POLL_DONE;
}

/*
 * pg_option_ok accepts libpq's connection keywords on servers (but not the
 * credentials, which belong in user mappings, nor the ones collegedb
 * sets itself) and the credentials on user mappings.
 */
static bool
pg_option_ok(const char *keyword, Oid catalog)
{
	PQconninfoOption *defs;
	bool		ok = false;

	if (catalog == UserMappingRelationId)
		return strcmp(keyword, "user") == 0 || strcmp(keyword, "password") == 0 ||
			strcmp(keyword, "sslpassword") == 0;
	if (catalog != ForeignServerRelationId)
		return false;
	for (int i = 0; server_only_excluded[i]; i++)
		if (strcmp(keyword, server_only_excluded[i]) == 0)
			return false;

	defs = PQconndefaults();
	if (defs == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	for (PQconninfoOption *o = defs; o->keyword; o++)
	{
		if (strcmp(o->keyword, keyword) == 0 && strchr(o->dispchar, 'D') == NULL)
		{
			ok = true;
			break;
		}
	}
	PQconninfoFree(defs);
	return ok;
}

/*
 * pg_check_options checks what libpq would only find at connect time.
 */
static void
pg_check_options(List *options, Oid catalog)
{
	ListCell   *lc;

	foreach(lc, options)
	{
		DefElem    *def = lfirst(lc);

		if (strcmp(def->defname, "connect_timeout") == 0 ||
			strcmp(def->defname, "port") == 0)
		{
			char	   *v = defGetString(def);
			char	   *end;
			long		n = strtol(v, &end, 10);

			if (*v == '\0' || *end != '\0' || n < 0 || n > 65535)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("invalid value for option \"%s\": \"%s\"", def->defname, v)));
		}
	}
}

static char *
pg_valid_options(Oid catalog)
{
	if (catalog == UserMappingRelationId)
		return pstrdup("user, password, sslpassword");
	return pstrdup("the libpq connection keywords (host, port, dbname, sslmode, connect_timeout, ...) except user, password and client_encoding");
}

/*
 * pg_quote_ident double-quotes an identifier, doubling embedded quotes.
 */
static char *
pg_quote_ident(const char *ident)
{
	return AdapterQuoteIdent(ident, '"');
}

/*
 * What add_shard creates on a PostgreSQL shard: the tombstone table, and
 * collegedb_guard(key), which takes the key's shared advisory lock (a mover
 * takes it exclusively) and fails with SQLSTATE CD0M1, naming the
 * destination, when the key has moved away.
 */
static const char *const pg_shard_ddl[] = {
	"CREATE TABLE IF NOT EXISTS collegedb_tombstones ("
	"table_name text NOT NULL, shard_key text NOT NULL, moved_to text NOT NULL, "
	"move_id bigint, moved_at timestamptz NOT NULL DEFAULT now(), "
	"PRIMARY KEY (table_name, shard_key))",
	"CREATE INDEX IF NOT EXISTS collegedb_tombstones_key ON collegedb_tombstones (shard_key)",
	"CREATE OR REPLACE FUNCTION collegedb_guard(k text) RETURNS void LANGUAGE plpgsql AS $cd$"
	" DECLARE dest text;"
	" BEGIN"
	"  PERFORM pg_advisory_xact_lock_shared(hashtextextended('collegedb:' || k, 0));"
	"  SELECT moved_to INTO dest FROM collegedb_tombstones WHERE shard_key = k LIMIT 1;"
	"  IF dest IS NOT NULL THEN"
	"   RAISE EXCEPTION 'key moved to shard %', dest USING ERRCODE = 'CD0M1', DETAIL = dest;"
	"  END IF;"
	" END $cd$",
	NULL
};

const CdAdapter CdPostgresAdapter = {
	.dialect = CD_DIALECT_POSTGRES,
	.name = "postgres",
	.connect = pg_connect,
	.exec = pg_exec,
	.send = pg_send,
	.poll = pg_poll,
	.socket = pg_socket,
	.cancel = pg_cancel,
	.close = pg_close,
	.option_ok = pg_option_ok,
	.check_options = pg_check_options,
	.valid_options = pg_valid_options,
	.sql_begin = "BEGIN",
	.sql_commit = "COMMIT",
	.sql_rollback = "ROLLBACK",
	.sql_savepoint = "SAVEPOINT s%d",
	.sql_release = "RELEASE SAVEPOINT s%d",
	.sql_rollback_to = "ROLLBACK TO SAVEPOINT s%d",
	.quote_ident = pg_quote_ident,
	.shard_ddl = pg_shard_ddl,
	.sql_begin_write = "BEGIN",
	.guard_setup = "SELECT collegedb_guard(%s)",
	.lock_key_sql = "SELECT pg_advisory_xact_lock(hashtextextended('collegedb:' || $1, 0))",
	.size_sql = "SELECT pg_database_size(current_database()) AS size",
	.key_match = "%1$s = $%2$d",
};
