/*-------------------------------------------------------------------------
 *
 * pg_connect.c
 *	  The PostgreSQL adapter's connections: start-up, session set-up and
 *	  waits without ever blocking uninterruptibly, the cancel request, close;
 *	  and libpq's failures as CdRemoteError.
 *
 * Every wait, from the connection's start-up and session set-up to the
 * last result, is on the socket and the process latch: query cancel,
 * termination and statement_timeout interrupt it.  Waits that cannot
 * service interrupts (abort-time cleanup, the cancel request itself) have
 * a deadline (collegedb.cleanup_timeout) and give up at once when a cancel
 * or a termination is pending.  libpq's PQcancel blocks without a bound,
 * so a cancel request goes over a short-lived second connection, without
 * blocking, as pg_cancel_backend() of the shard's backend.
 *
 * Under the password rule (see adapter.h) libpq is kept away from the
 * server's own credentials: no password file, no default client
 * certificate, no GSSAPI encryption with the server's tickets, and the
 * connection is refused unless the shard asked for the mapping's password.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "adapters/pg_internal.h"
#include "collegedb.h"

#define PG_DEFAULT_CONNECT_TIMEOUT_MS 10000

/* the socket's position in a handle's wait set (PgHandleWait) */
#define PG_WAIT_SOCKET_POS 2

/*
 * A path that can never exist (a file below /dev/null): libpq ignores a
 * password file or client certificate that is not there, silently.
 */
#define PG_NOWHERE "/dev/null/collegedb-none"

/*
 * The session settings collegedb relies on, sent once per connection.
 * READ COMMITTED, whatever the shard's default, for every transaction (a
 * statement's own implicit one too): the move protocol needs each
 * statement after a lock wait to see what committed meanwhile (a mover's
 * copy after a writer's commit, a writer's tombstone check after a
 * mover's).
 */
#define PG_SESSION_SETUP \
	"SET datestyle = ISO; SET intervalstyle = postgres; " \
	"SET extra_float_digits = 3; SET standard_conforming_strings = on; " \
	"SET timezone = 'UTC'; SET default_transaction_isolation = 'read committed'"

/*
 * PgFillError copies a failure out of libpq: from 'res' when given,
 * else from the connection.
 */
void
PgFillError(PGconn *conn, const PGresult *res, CdRemoteError *err)
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
 * PgWait waits until the socket is ready for 'events', the latch is set
 * or 'deadline' (0: none) passes.  'interruptible': services interrupts
 * (may throw); otherwise it never throws and refuses to wait once a cancel
 * or termination is pending.  False when the caller should give up: the
 * deadline passed, or (not interruptible) an interrupt is pending.
 */
bool
PgWait(PGconn *conn, int events, TimestampTz deadline, bool interruptible)
{
	int			rc;

	if ((!interruptible && AdapterStopWaiting()) || AdapterDeadlinePassed(deadline))
		return false;
	WaitsBegin();
	rc = WaitLatchOrSocket(MyLatch,
						   WL_LATCH_SET | WL_EXIT_ON_PM_DEATH | events |
						   (deadline ? WL_TIMEOUT : 0),
						   PQsocket(conn), AdapterWaitTimeout(deadline),
						   PG_WAIT_EXTENSION);
	if (rc & WL_LATCH_SET)
		ResetLatch(MyLatch);
	if (interruptible)
		CHECK_FOR_INTERRUPTS();
	WaitsEnd((rc & WL_SOCKET_MASK) != 0, interruptible);
	return true;
}

/*
 * PgHandleWait is PgWait on a connection that is up, with the handle's
 * own wait set: created at its first wait (the process latch, postmaster
 * death and the socket, whose socket stays the same for the handle's
 * life), and only modified when the socket's events change, instead of
 * an epoll set made and closed for every wait.
 */
bool
PgHandleWait(PgHandle *handle, int events, TimestampTz deadline, bool interruptible)
{
	WaitEvent	event;
	int			rc;

	if ((!interruptible && AdapterStopWaiting()) || AdapterDeadlinePassed(deadline))
		return false;
	if (handle->wait_set == NULL)
	{
		WaitEventSet *set = CreateWaitEventSet(TopMemoryContext, 3);

		AddWaitEventToSet(set, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
		AddWaitEventToSet(set, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
		AddWaitEventToSet(set, events, PQsocket(handle->conn), NULL, NULL);
		handle->wait_set = set;
		handle->wait_events = events;
	}
	else if (handle->wait_events != events)
	{
		ModifyWaitEvent(handle->wait_set, PG_WAIT_SOCKET_POS, events, NULL);
		handle->wait_events = events;
	}
	WaitsBegin();
	rc = WaitEventSetWait(handle->wait_set, AdapterWaitTimeout(deadline), &event, 1,
						  PG_WAIT_EXTENSION);
	if (rc > 0 && (event.events & WL_LATCH_SET))
		ResetLatch(MyLatch);
	if (interruptible)
		CHECK_FOR_INTERRUPTS();
	WaitsEnd(rc > 0 && (event.events & WL_SOCKET_MASK) != 0, interruptible);
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
		if (!PgWait(conn, poll == PGRES_POLLING_READING ?
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
			PgFillError(conn, NULL, err);
		return false;
	}
	for (;;)
	{
		int			flush = PQflush(conn);
		PGresult   *res;

		if (flush < 0 || (flush == 0 && !PQconsumeInput(conn)))
		{
			if (err)
				PgFillError(conn, NULL, err);
			return false;
		}
		if (flush > 0 || PQisBusy(conn))
		{
			if (!PgWait(conn, flush > 0 ? WL_SOCKET_WRITEABLE : WL_SOCKET_READABLE,
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
				PgFillError(conn, res, err);
			ok = false;
		}
		PQclear(res);
	}
}

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
	if (handle->wait_set)
		FreeWaitEventSet(handle->wait_set);
	PgPreparedFree(handle);
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
 * PgConnect opens a connection without ever blocking uninterruptibly
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
void *
PgConnect(const CdConnInfo *info, CdRemoteError *err)
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
				PgFillError(conn, NULL, err);
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
			PgFillError(conn, NULL, err);
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

void
PgClose(void *h)
{
	pg_free_handle((PgHandle *) h);
}

/*
 * PgSessionId is the shard backend's pid, as pg_locks shows it.
 */
int64
PgSessionId(void *h)
{
	return PQbackendPID(((PgHandle *) h)->conn);
}

/*
 * PgCancel asks the shard to cancel the running statement, within
 * 'timeout_ms' and without throwing.  libpq's PQcancel would block without
 * a bound on a shard host that stopped answering, so the request goes as
 * pg_cancel_backend() over a second connection with the same options,
 * driven without blocking; the shard allows it, since it comes from the
 * same role.
 */
void
PgCancel(void *h, int timeout_ms)
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
