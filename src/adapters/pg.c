/*-------------------------------------------------------------------------
 *
 * pg.c
 *	  The PostgreSQL shard adapter, on libpq.
 *
 * Statements go out with the extended protocol (PQsendQueryParams): one
 * round trip for a statement with parameters.  Transaction-control commands
 * that must precede a statement (BEGIN, SAVEPOINT) travel with it in one
 * pipeline, so joining a remote transaction costs no extra round trip.  A
 * send that fails midway leaves the pipeline in a state nothing can finish
 * (no Sync went out), so it counts as a lost connection.
 *
 * Every wait, from the connection's start-up and session set-up to the
 * last result, is on the socket and the process latch: query cancel,
 * termination and statement_timeout interrupt it, and the shard's query is
 * then cancelled.  Waits that cannot service interrupts (abort-time
 * cleanup, the cancel request itself) have a deadline
 * (collegedb.cleanup_timeout) and give up at once when a cancel or a
 * termination is pending.  libpq's PQcancel blocks without a bound, so a
 * cancel request goes over a short-lived second connection, without
 * blocking, as pg_cancel_backend() of the shard's backend.
 *
 * Parameters are sent in text form, typed with their built-in type OID,
 * except plain text, which is sent untyped so that the shard infers its
 * type from the context as it does for a literal; bytea goes in binary.
 * Results are read in text form, in single-row mode: each row reaches the
 * sink as it arrives, in a memory context reset after each row, so a large
 * result never sits whole in memory.  The statement runs as send + poll,
 * which fan-out drives for many shards at once and pg_exec drives for one.
 *
 * Under the password rule (see adapter.h) libpq is kept away from the
 * server's own credentials: no password file, no default client
 * certificate, no GSSAPI encryption with the server's tickets, and the
 * connection is refused unless the shard asked for the mapping's password.
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
#include "adapters/lexer.h"
#include "collegedb.h"

#define PG_DEFAULT_CONNECT_TIMEOUT_MS 10000

/* the protocol's limit: the parameter count travels as a 16-bit integer */
#define PG_MAX_PARAMS 65535

/*
 * A path that can never exist (a file below /dev/null): libpq ignores a
 * password file or client certificate that is not there, silently.
 */
#define PG_NOWHERE "/dev/null/collegedb-none"

/* the session settings collegedb relies on, sent once per connection */
#define PG_SESSION_SETUP \
	"SET datestyle = ISO; SET intervalstyle = postgres; " \
	"SET extra_float_digits = 3; SET standard_conforming_strings = on; " \
	"SET timezone = 'UTC'"

static const char *const server_only_excluded[] = {
	"user", "password", "sslpassword", "client_encoding",
	"fallback_application_name", "replication", "dialect", NULL
};

static const char *const pg_read_words[] = {
	"select", "values", "table", "show", "explain", "with", NULL
};
static const char *const pg_write_words[] = {
	"insert", "update", "delete", "merge", "into", NULL
};
static const char *const pg_transaction_words[] = {
	"begin", "start", "commit", "end", "rollback", "abort", "savepoint",
	"release", "prepare", NULL
};

static const CdLexerRules pg_lexer_rules = {
	.nested_comments = true,
	.dollar_quotes = true,
	.e_strings = true,
	.read_words = pg_read_words,
	.write_words = pg_write_words,
	.transaction_words = pg_transaction_words,
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
 * pg_gave_up fills *err for a wait of the connection's start-up that
 * ended without an answer (see also AdapterSetGaveUp).
 */
static void
pg_gave_up(CdRemoteError *err)
{
	if (AdapterStopWaiting())
		AdapterSetGaveUp(err, CD_EXEC_CLEANUP);
	else
		AdapterSetError(err, "08001", true, "timeout expired", NULL, NULL);
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
 * pg_wait waits until the socket is ready for 'events', the latch is set
 * or 'deadline' (0: none) passes.  'interruptible': services interrupts
 * (may throw); otherwise it never throws and refuses to wait once a cancel
 * or termination is pending.  False when the caller should give up: the
 * deadline passed, or (not interruptible) an interrupt is pending.
 */
static bool
pg_wait(PGconn *conn, int events, TimestampTz deadline, bool interruptible)
{
	int			rc;

	if ((!interruptible && AdapterStopWaiting()) || AdapterDeadlinePassed(deadline))
		return false;
	rc = WaitLatchOrSocket(MyLatch,
						   WL_LATCH_SET | WL_EXIT_ON_PM_DEATH | events |
						   (deadline ? WL_TIMEOUT : 0),
						   PQsocket(conn), AdapterWaitTimeout(deadline),
						   PG_WAIT_EXTENSION);
	if (rc & WL_LATCH_SET)
		ResetLatch(MyLatch);
	if (interruptible)
		CHECK_FOR_INTERRUPTS();
	return true;
}

/*
 * pg_connect_poll drives a connection started with PQconnectStartParams
 * until it is up or failed: true when it is up.  *timed_out tells a wait
 * that gave up.
 */
static bool
pg_connect_poll(PGconn *conn, TimestampTz deadline, bool interruptible,
				bool *timed_out)
{
	PostgresPollingStatusType poll = PGRES_POLLING_WRITING;

	*timed_out = false;
	while (PQstatus(conn) != CONNECTION_BAD && poll != PGRES_POLLING_OK &&
		   poll != PGRES_POLLING_FAILED)
	{
		if (!pg_wait(conn, poll == PGRES_POLLING_READING ?
					 WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE, deadline, interruptible))
		{
			*timed_out = true;
			return false;
		}
		poll = PQconnectPoll(conn);
	}
	return poll == PGRES_POLLING_OK && PQstatus(conn) == CONNECTION_OK;
}

/*
 * pg_simple_query runs a parameterless command string (several commands
 * allowed) on a non-blocking connection and waits for all its results:
 * true when every command succeeded.  *err gets the first failure (left
 * alone when 'err' is NULL).
 */
static bool
pg_simple_query(PGconn *conn, const char *sql, TimestampTz deadline,
				bool interruptible, CdRemoteError *err)
{
	bool		ok = true;

	if (!PQsendQuery(conn, sql))
	{
		if (err)
			pg_fill_error(conn, NULL, err);
		return false;
	}
	for (;;)
	{
		int			flush = PQflush(conn);
		PGresult   *res;

		if (flush < 0 || (flush == 0 && !PQconsumeInput(conn)))
		{
			if (err)
				pg_fill_error(conn, NULL, err);
			return false;
		}
		if (flush > 0 || PQisBusy(conn))
		{
			if (!pg_wait(conn, flush > 0 ? WL_SOCKET_WRITEABLE : WL_SOCKET_READABLE,
						 deadline, interruptible))
			{
				if (err)
					pg_gave_up(err);
				return false;
			}
			continue;
		}
		res = PQgetResult(conn);
		if (res == NULL)
			return ok;
		if (PQresultStatus(res) != PGRES_COMMAND_OK &&
			PQresultStatus(res) != PGRES_TUPLES_OK && ok)
		{
			if (err)
				pg_fill_error(conn, res, err);
			ok = false;
		}
		PQclear(res);
	}
}

typedef struct PgHandle
{
	PGconn	   *conn;
	char		shard[NAMEDATALEN];

	/* the connection's keywords and values, malloc'd, for cancel requests */
	char	  **keywords;
	char	  **values;

	/* the statement in progress (pg_send .. pg_poll) */
	MemoryContext statement_context;	/* reset by each pg_send */
	MemoryContext row_context;	/* reset after each row */
	bool		pipeline;		/* setup commands went first */
	int			queries;		/* setup commands + the statement */
	int			current;		/* whose results come next */
	bool		single_row;		/* single-row mode is on for the statement */
	bool		columns_sent;
	bool		failed;			/* err holds the first failure */
	bool		is_commit;		/* the statement is the remote COMMIT */
	int			ncols;
	CdValueKind *kinds;
	CdCell	   *cells;
	unsigned char **unescaped;	/* PQunescapeBytea buffers of the row */
	int64		rows;
} PgHandle;

/*
 * pg_free_handle closes the connection and frees the handle, wiping the
 * copy of the password.
 */
static void
pg_free_handle(PgHandle *handle)
{
	if (handle == NULL)
		return;
	if (handle->conn)
		PQfinish(handle->conn);
	if (handle->keywords)
	{
		for (int i = 0; handle->keywords[i]; i++)
		{
			if (handle->values[i] && strcmp(handle->keywords[i], "password") == 0)
				explicit_bzero(handle->values[i], strlen(handle->values[i]));
			free(handle->keywords[i]);
			free(handle->values[i]);
		}
		free(handle->keywords);
		free(handle->values);
	}
	if (handle->statement_context)
		MemoryContextDelete(handle->statement_context);
	free(handle);
}

/*
 * pg_keep_options copies the connection's keywords and values into the
 * handle (malloc'd), for the connections that send cancel requests; they
 * name themselves "collegedb cancel".  False when out of memory.
 */
static bool
pg_keep_options(PgHandle *handle, const char *const *keywords,
				const char *const *values, int n)
{
	handle->keywords = calloc(n + 1, sizeof(char *));
	handle->values = calloc(n + 1, sizeof(char *));
	if (handle->keywords == NULL || handle->values == NULL)
		return false;
	for (int i = 0; i < n; i++)
	{
		const char *value = values[i];

		if (strcmp(keywords[i], "fallback_application_name") == 0)
			value = "collegedb cancel";
		handle->keywords[i] = strdup(keywords[i]);
		handle->values[i] = value ? strdup(value) : NULL;
		if (handle->keywords[i] == NULL || (value && handle->values[i] == NULL))
			return false;
	}
	return true;
}

/*
 * pg_connect opens a connection without ever blocking uninterruptibly
 * (start-up, authentication and the session set-up all wait on the latch,
 * under connect_timeout), then fixes the session settings collegedb relies
 * on: ISO dates, exact floats, standard strings, and UTC, the zone in
 * which collegedb exchanges zone-less timestamps with every dialect.
 *
 * Under the password rule the connection may use nothing of the server's
 * own: the password file and the default client certificate point
 * nowhere, GSSAPI encryption is off unless the server options ask for it,
 * and the shard must have asked for the mapping's password.
 */
static void *
pg_connect(const CdConnInfo *info, CdRemoteError *err)
{
	const char **keywords = palloc(sizeof(char *) * (info->noptions + 7));
	const char **values = palloc(sizeof(char *) * (info->noptions + 7));
	int			n = 0;
	int			timeout_ms = PG_DEFAULT_CONNECT_TIMEOUT_MS;
	bool		has_sslcert = false;
	bool		has_sslkey = false;
	bool		has_gssencmode = false;
	TimestampTz deadline;
	PgHandle   *handle;
	PGconn	   *conn;
	bool		up;
	bool		timed_out = false;
	bool		setup_ok = false;

	for (int i = 0; i < info->noptions; i++)
	{
		const char *k = info->options[i].keyword;

		/* under the rule the mapping's password is the only credential */
		if (info->require_password && strcmp(k, "passfile") == 0)
			continue;
		keywords[n] = k;
		values[n] = info->options[i].value;
		if (strcmp(k, "connect_timeout") == 0)
			timeout_ms = Max(atoi(values[n]), 1) * 1000;
		has_sslcert |= strcmp(k, "sslcert") == 0;
		has_sslkey |= strcmp(k, "sslkey") == 0;
		has_gssencmode |= strcmp(k, "gssencmode") == 0;
		n++;
	}
	keywords[n] = "fallback_application_name";
	values[n++] = "collegedb";
	keywords[n] = "client_encoding";
	values[n++] = GetDatabaseEncodingName();
	if (info->require_password)
	{
		keywords[n] = "passfile";
		values[n++] = PG_NOWHERE;
		if (!has_sslcert)
		{
			keywords[n] = "sslcert";
			values[n++] = PG_NOWHERE;
		}
		if (!has_sslkey)
		{
			keywords[n] = "sslkey";
			values[n++] = PG_NOWHERE;
		}
		if (!has_gssencmode)
		{
			keywords[n] = "gssencmode";
			values[n++] = "disable";
		}
	}
	keywords[n] = NULL;
	values[n] = NULL;

	handle = calloc(1, sizeof(PgHandle));
	if (handle == NULL || !pg_keep_options(handle, keywords, values, n))
	{
		pg_free_handle(handle);
		AdapterSetError(err, "53200", true, "out of memory", NULL, NULL);
		return NULL;
	}
	strlcpy(handle->shard, info->shard, NAMEDATALEN);

	conn = PQconnectStartParams(keywords, values, false);
	if (conn == NULL)
	{
		pg_free_handle(handle);
		AdapterSetError(err, "08001", true, "out of memory in libpq", NULL, NULL);
		return NULL;
	}
	handle->conn = conn;
	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);

	PG_TRY();
	{
		up = pg_connect_poll(conn, deadline, true, &timed_out);
		/* postgres_fdw's rule: see remote/connection.c */
		if (up && info->require_password && !PQconnectionUsedPassword(conn))
			up = false;
		else if (up)
		{
			/* sends never block from here on: pg_poll flushes what is left */
			PQsetNoticeReceiver(conn, pg_notice_receiver, handle->shard);
			if (PQsetnonblocking(conn, 1) == 0)
				setup_ok = pg_simple_query(conn, PG_SESSION_SETUP, deadline, true, err);
			else
				pg_fill_error(conn, NULL, err);
		}
	}
	PG_CATCH();
	{
		pg_free_handle(handle);
		PG_RE_THROW();
	}
	PG_END_TRY();

	if (!up)
	{
		if (timed_out)
			AdapterSetError(err, "08001", true, "timeout expired", NULL, NULL);
		else if (PQstatus(conn) == CONNECTION_OK)
			AdapterSetError(err, "2F003", true, "password is required",
							"Non-superuser cannot connect if the server does not request a password.",
							"Target server's authentication method must be changed or set the password_required=false in the user mapping attributes.");
		else
		{
			pg_fill_error(conn, NULL, err);
			memcpy(err->sqlstate, "08001", 6);
		}
		pg_free_handle(handle);
		return NULL;
	}
	if (!setup_ok)
	{
		memcpy(err->sqlstate, "08001", 6);
		err->connection_lost = true;
		pg_free_handle(handle);
		return NULL;
	}
	return handle;
}

static void
pg_close(void *h)
{
	pg_free_handle((PgHandle *) h);
}

/*
 * pg_cancel asks the shard to cancel the running statement, within
 * 'timeout_ms' and without throwing.  libpq's PQcancel would block without
 * a bound on a shard host that stopped answering, so the request goes as
 * pg_cancel_backend() over a second connection with the same options,
 * driven without blocking; the shard allows it, since it comes from the
 * same role.
 */
static void
pg_cancel(void *h, int timeout_ms)
{
	PgHandle   *handle = h;
	int			pid = PQbackendPID(handle->conn);
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   Max(timeout_ms, 1));
	PGconn	   *c;
	bool		timed_out;
	char		sql[64];

	if (pid == 0 || handle->keywords == NULL)
		return;
	c = PQconnectStartParams((const char *const *) handle->keywords,
							 (const char *const *) handle->values, false);
	if (c == NULL)
		return;
	if (pg_connect_poll(c, deadline, false, &timed_out) && PQsetnonblocking(c, 1) == 0)
	{
		snprintf(sql, sizeof(sql), "SELECT pg_catalog.pg_cancel_backend(%d)", pid);
		(void) pg_simple_query(c, sql, deadline, false, NULL);
	}
	PQfinish(c);
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
	PGconn	   *conn = handle->conn;
	MemoryContext old;
	Oid		   *types;
	const char **values;
	int		   *lengths;
	int		   *formats;
	bool		sent = true;

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

	handle->pipeline = nsetup > 0;
	handle->queries = nsetup + 1;
	handle->current = 0;
	handle->single_row = false;
	handle->columns_sent = false;
	handle->rows = 0;
	handle->failed = false;
	handle->is_commit = (flags & CD_EXEC_COMMIT) != 0;
	handle->ncols = 0;
	handle->kinds = NULL;
	handle->cells = NULL;
	handle->unescaped = NULL;

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
		/*
		 * Part of it may be queued, or on the wire, without the Sync that
		 * would end the pipeline: nothing can bring this connection back in
		 * step (a ROLLBACK would wait forever), so it is lost.
		 */
		pg_fill_error(conn, NULL, err);
		err->connection_lost = true;
		if (strncmp(err->sqlstate, "08", 2) != 0)
			memcpy(err->sqlstate, "08006", 6);
		return false;
	}
	return true;
}

/*
 * pg_poll makes progress on the statement started by pg_send without
 * blocking: flushes what is left to send, reads what has arrived, and
 * hands complete rows to the sink.  A COMMIT that the shard answers with
 * ROLLBACK (its transaction had failed) is a failure.  See adapter.h.
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
			if (!pg_wait(handle->conn, result == CD_POLL_READ ?
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
			pg_cancel(h, CollegeCleanupTimeout);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return result == CD_POLL_DONE;
}

/*
 * pg_scan classifies a statement by PostgreSQL's lexical rules.
 */
static CdStatementShape
pg_scan(const char *sql)
{
	return LexerScan(sql, &pg_lexer_rules, NULL, NULL, NULL);
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
	.scan = pg_scan,
	.max_params = PG_MAX_PARAMS,
	.max_key_length = 0,
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
	.topology_ddl = pg_topology_ddl,
	.topology_publish = AdapterUpsertTopology,
	.topology_put_state = AdapterUpsertTopologyState,
};
