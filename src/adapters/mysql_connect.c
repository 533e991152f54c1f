/*-------------------------------------------------------------------------
 *
 * mysql_connect.c
 *	  The MySQL adapter's connections: the non-blocking handshake and
 *	  session set-up, waits on the socket and the latch, KILL QUERY, close.
 *
 * Every wait goes through the client library's non-blocking API and a
 * latch wait on the connection's socket, so that query cancel,
 * statement_timeout and postmaster death are noticed; an interrupt during
 * a statement cancels it server-side with KILL QUERY sent over a
 * short-lived second connection, itself non-blocking and bounded.  Every
 * session runs in strict SQL mode.  Under the password rule a connection
 * authenticates with the mapping's password only (no Unix socket, password
 * plugins only, never the environment's MYSQL_PWD).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>
#include <sys/socket.h>

#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "adapters/mysql_internal.h"
#include "collegedb.h"

static bool cd_mysql_library_ready = false;

static void MysqlCheckForInterrupts(CdMysqlConn *kill);
static void MysqlCloseHandle(MYSQL *m, bool midway);

/* ----------------------------------------------------------------
 *		waiting and cancelling
 * ----------------------------------------------------------------
 */

/*
 * MysqlWait waits for what a suspended non-blocking call on 'm' asked for
 * ('status', MYSQL_WAIT_* flags) and returns the events that occurred, to
 * be passed to the matching _cont function, or -1 when the caller should
 * give up: 'deadline' (0: none) passed, or (not 'interruptible') a cancel
 * or termination is pending.  'interruptible': interrupts are serviced
 * meanwhile, and when one throws, 'kill' (if given) has its statement
 * killed on the server first; otherwise it never throws.
 */
int
MysqlWait(MYSQL *m, int status, CdMysqlConn *kill, bool interruptible,
		  TimestampTz deadline)
{
	pgsocket	sock = mysql_get_socket(m);
	int			events = WL_LATCH_SET | WL_EXIT_ON_PM_DEATH;
	TimestampTz lib_deadline = 0;

	if (sock != PGINVALID_SOCKET)
	{
		if (status & (MYSQL_WAIT_READ | MYSQL_WAIT_EXCEPT))
			events |= WL_SOCKET_READABLE;
		if (status & MYSQL_WAIT_WRITE)
			events |= WL_SOCKET_WRITEABLE;
	}
	if (status & MYSQL_WAIT_TIMEOUT)
		lib_deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
												   mysql_get_timeout_value_ms(m));
	if (lib_deadline != 0 || deadline != 0)
		events |= WL_TIMEOUT;

	/* nothing to wait for: let the library go on and fail */
	if ((events & (WL_SOCKET_MASK | WL_TIMEOUT)) == 0)
		return status;

	for (;;)
	{
		long		timeout = -1;
		int			rc;
		int			happened = 0;

		if (interruptible)
			MysqlCheckForInterrupts(kill);
		else if (AdapterStopWaiting())
			return -1;

		if (events & WL_TIMEOUT)
		{
			TimestampTz now = GetCurrentTimestamp();

			/* ours first: it names the timeout in the error */
			if (deadline != 0 && now >= deadline)
				return -1;
			if (lib_deadline != 0 && now >= lib_deadline)
				return MYSQL_WAIT_TIMEOUT;
			if (lib_deadline != 0 && (deadline == 0 || lib_deadline < deadline))
				timeout = TimestampDifferenceMilliseconds(now, lib_deadline);
			else
				timeout = TimestampDifferenceMilliseconds(now, deadline);
		}

		WaitsBegin();
		rc = WaitLatchOrSocket(MyLatch, events, sock, timeout,
							   PG_WAIT_EXTENSION);
		if (rc & WL_LATCH_SET)
			ResetLatch(MyLatch);
		if (rc & WL_SOCKET_READABLE)
			happened |= (status & MYSQL_WAIT_READ) ? MYSQL_WAIT_READ : MYSQL_WAIT_EXCEPT;
		if (rc & WL_SOCKET_WRITEABLE)
			happened |= MYSQL_WAIT_WRITE;
		/* a victim's error comes from MysqlCheckForInterrupts, above */
		WaitsEnd(happened != 0, false);
		if (happened != 0)
			return happened;
		/* latch or timeout: check interrupts and the clock again */
	}
}

/*
 * MysqlConnectHandle runs the non-blocking handshake of 'm' with the
 * parameters 'p' until it is done: true when connected, false on a
 * failure (in the handle) or, with *gave_up set, when MysqlWait gave up.
 */
static bool
MysqlConnectHandle(MYSQL *m, const CdMysqlParams *p, bool interruptible,
				   TimestampTz deadline, bool *gave_up)
{
	MYSQL	   *ret = NULL;

	/*
	 * CLIENT_FOUND_ROWS makes UPDATE report the rows it matched, as
	 * PostgreSQL does, rather than only those it changed.  No
	 * CLIENT_MULTI_STATEMENTS: a second command in a statement is a syntax
	 * error on the server.  The password is never NULL: libmariadb would
	 * then read MYSQL_PWD from the server's environment.
	 */
	int			status = mysql_real_connect_start(&ret, m, p->host, p->user,
												  p->password ? p->password : "",
												  p->dbname, p->port, p->socket,
												  CLIENT_FOUND_ROWS);

	*gave_up = false;
	while (status != 0)
	{
		status = MysqlWait(m, status, NULL, interruptible, deadline);
		if (status < 0)
		{
			*gave_up = true;
			return false;
		}
		status = mysql_real_connect_cont(&ret, m, status);
	}
	if (ret == NULL)
		return false;

	/*
	 * libmariadb switches the socket to blocking mode for the TLS handshake
	 * and leaves it so: TLS reads in the non-blocking API would then block
	 * in the library (seen with 3.3).  Plain connections use MSG_DONTWAIT
	 * and do not care.
	 */
	(void) pg_set_noblock(mysql_get_socket(m));
	return true;
}

/*
 * MysqlQueryHandle runs mysql_real_query on 'm' without blocking; returns
 * its result (0 on success), or -1 when MysqlWait gave up.  'kill': see
 * MysqlWait.
 */
static int
MysqlQueryHandle(MYSQL *m, const char *sql, size_t len, CdMysqlConn *kill,
				 bool interruptible, TimestampTz deadline)
{
	int			ret = 1;
	int			status;

	status = mysql_real_query_start(&ret, m, sql, len);
	while (status != 0)
	{
		status = MysqlWait(m, status, kill, interruptible, deadline);
		if (status < 0)
			return -1;
		status = mysql_real_query_cont(&ret, m, status);
	}
	return ret;
}

/*
 * MysqlCancelQuery asks the server to stop the statement running on
 * 'conn' by sending KILL QUERY over a second connection with the same
 * parameters, driven without blocking and given up after 'timeout_ms' (or
 * at once on a pending cancel or termination).  It runs while an error is
 * being thrown, so it must not throw itself.
 */
void
MysqlCancelQuery(CdMysqlConn *conn, int timeout_ms)
{
	const CdMysqlParams *p = &conn->params;
	unsigned long thread_id = mysql_thread_id(conn->mysql);
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   Max(timeout_ms, 1));
	unsigned int timeout = Max(timeout_ms / 1000, 1);
	MYSQL	   *c;
	bool		gave_up;
	char		sql[64];

	if (thread_id == 0)
		return;
	c = mysql_init(NULL);
	if (c == NULL)
		return;
	if (mysql_options(c, MYSQL_OPT_NONBLOCK, 0) == 0 &&
		MysqlApplyOptions(c, p, timeout) &&
		MysqlConnectHandle(c, p, false, deadline, &gave_up))
	{
		snprintf(sql, sizeof(sql), "KILL QUERY %lu", thread_id);
		(void) MysqlQueryHandle(c, sql, strlen(sql), NULL, false, deadline);
	}
	MysqlCloseHandle(c, true);
}

/*
 * MysqlCheckForInterrupts services pending interrupts; when one throws
 * while a statement is in flight on 'kill', the statement is killed on the
 * server (within collegedb.cleanup_timeout) before the error goes on.
 */
static void
MysqlCheckForInterrupts(CdMysqlConn *kill)
{
	if (!INTERRUPTS_PENDING_CONDITION() && !WaitsVictimPending())
		return;
	if (kill == NULL)
	{
		CHECK_FOR_INTERRUPTS();
		WaitsEnd(false, true);
		return;
	}
	PG_TRY();
	{
		CHECK_FOR_INTERRUPTS();
		WaitsEnd(false, true);
	}
	PG_CATCH();
	{
		MysqlCancelQuery(kill, CollegeCleanupTimeout);
		PG_RE_THROW();
	}
	PG_END_TRY();
}

/*
 * MysqlCloseHandle closes a client handle; 'midway' says a command may be
 * half sent or half answered, and then the socket is shut down first, so
 * that closing (which sends COM_QUIT) cannot wait for a shard that stopped
 * reading.
 */
static void
MysqlCloseHandle(MYSQL *m, bool midway)
{
	if (m == NULL)
		return;
	if (midway && mysql_get_socket(m) != PGINVALID_SOCKET)
		(void) shutdown(mysql_get_socket(m), SHUT_RDWR);
	mysql_close(m);
}

/* ----------------------------------------------------------------
 *		connect and close
 * ----------------------------------------------------------------
 */

/*
 * MysqlConnFree closes the connection and releases the handle.  A result
 * still being streamed is let go without reading the rest of it (its
 * handle is cleared first: freeing it would read to the end), and a
 * connection in the middle of a statement has its socket shut down before
 * it is closed.  The prepared statements' handles go after the
 * connection, which leaves them without one: closing them then sends
 * nothing.
 */
static void
MysqlConnFree(CdMysqlConn *conn)
{
	if (conn == NULL)
		return;
	if (conn->res != NULL)
	{
		conn->res->handle = NULL;
		mysql_free_result(conn->res);
		conn->res = NULL;
	}
	MysqlCloseHandle(conn->mysql, conn->midway);
	MysqlPreparedFree(conn);
	MysqlParamsFree(&conn->params);
	if (conn->context != NULL)
		MemoryContextDelete(conn->context);
	free(conn);
}

/*
 * MysqlConnectFailed fills *err for a connection attempt that ended
 * without a client-library error of its own, and frees the handle.
 */
static void *
MysqlConnectFailed(CdMysqlConn *conn, const CdConnInfo *info,
				   CdRemoteError *err, const char *sqlstate, const char *detail)
{
	char	   *message = psprintf("could not connect to MySQL shard \"%s\"",
								   info->shard);

	AdapterSetError(err, sqlstate, true, message, detail, NULL);
	pfree(message);
	MysqlConnFree(conn);
	return NULL;
}

/*
 * The session settings collegedb relies on: UTC (see MysqlEmitParam) and
 * strict SQL mode, so that no value (a key above all) is silently cut or
 * changed, without NO_BACKSLASH_ESCAPES, so that the server reads
 * backslashes in literals as the adapter's lexer does.
 */
#define CD_MYSQL_SESSION_SETUP \
	"SET time_zone = '+00:00', sql_mode = CONCAT_WS(',', NULLIF(TRIM(BOTH ',' FROM " \
	"REPLACE(CONCAT(',', @@SESSION.sql_mode, ','), ',NO_BACKSLASH_ESCAPES,', ',')), ''), " \
	"'STRICT_ALL_TABLES')"

/*
 * MysqlUsesSocket says whether libmariadb would connect over a Unix
 * socket: a socket option, or no host or "localhost".
 */
static bool
MysqlUsesSocket(const CdMysqlParams *p)
{
	return p->socket != NULL || p->host == NULL || strcmp(p->host, "localhost") == 0;
}

/*
 * MysqlConnect opens a connection to a shard: non-blocking handshake under
 * an overall connect_timeout (DNS resolution, inside the library, is the
 * one step that can still block), then the session settings collegedb
 * relies on.  Any failure is 08001 naming the shard.
 *
 * Under the password rule (CdConnInfo.require_password) the connection
 * authenticates with the mapping's password only: never over a Unix socket
 * (where the server can authenticate the front's operating-system user,
 * unix_socket authentication), and only with password-based client
 * authentication plugins.
 */
void *
MysqlConnect(const CdConnInfo *info, CdRemoteError *err)
{
	CdMysqlConn *conn;
	TimestampTz deadline;
	bool		connected = false;
	bool		timed_out = false;
	int			setup_rc = 0;
	unsigned int timeout;

	if (!cd_mysql_library_ready)
	{
		if (mysql_library_init(0, NULL, NULL) != 0)
		{
			char	   *message = psprintf("could not connect to MySQL shard \"%s\"",
										   info->shard);

			AdapterSetError(err, "08001", true, message,
							"The MySQL client library could not be initialized.", NULL);
			pfree(message);
			return NULL;
		}
		cd_mysql_library_ready = true;
	}

	conn = calloc(1, sizeof(CdMysqlConn));
	if (conn == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	if (!MysqlParamsFromInfo(info, &conn->params) ||
		(conn->mysql = mysql_init(NULL)) == NULL)
	{
		MysqlConnFree(conn);
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	}

	if (conn->params.password_only && MysqlUsesSocket(&conn->params))
	{
		MysqlConnFree(conn);
		AdapterSetError(err, "2F003", true, "password is required",
						"Non-superuser cannot connect to a MySQL shard over a Unix socket, where the server may authenticate the front's operating-system user.",
						"Connect over TCP (a host other than localhost), or have a superuser set password_required=false in the user mapping attributes.");
		return NULL;
	}

	/* the library multiplies by 1000 into an int */
	timeout = (unsigned int) Min(conn->params.connect_timeout, INT_MAX / 1000);
	if (mysql_options(conn->mysql, MYSQL_OPT_NONBLOCK, 0) != 0 ||
		!MysqlApplyOptions(conn->mysql, &conn->params, timeout))
		return MysqlConnectFailed(conn, info, err, "08001",
								  "The MySQL client library rejected a connection option.");

	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
										   (int64) conn->params.connect_timeout * 1000);

	PG_TRY();
	{
		connected = MysqlConnectHandle(conn->mysql, &conn->params, true, deadline,
									   &timed_out);
		if (connected)
			setup_rc = MysqlQueryHandle(conn->mysql, CD_MYSQL_SESSION_SETUP,
										strlen(CD_MYSQL_SESSION_SETUP), NULL, true,
										deadline);
		timed_out |= setup_rc < 0;
	}
	PG_CATCH();
	{
		MysqlConnFree(conn);
		PG_RE_THROW();
	}
	PG_END_TRY();

	if (timed_out)
	{
		char	   *detail = psprintf(conn->params.connect_timeout == 1 ?
									  "The connection timed out after %d second." :
									  "The connection timed out after %d seconds.",
									  conn->params.connect_timeout);

		return MysqlConnectFailed(conn, info, err, "08001", detail);
	}
	if (!connected || setup_rc != 0)
	{
		MysqlSetError(err, conn->mysql, info->shard);
		MysqlConnFree(conn);
		return NULL;
	}
	if (conn->params.ssl_mode == CD_MYSQL_SSL_REQUIRED &&
		mysql_get_ssl_cipher(conn->mysql) == NULL)
		return MysqlConnectFailed(conn, info, err, "08001",
								  "The server does not support TLS, which ssl_mode \"required\" demands.");

	conn->context = AllocSetContextCreate(TopMemoryContext, "collegedb mysql statement",
										  ALLOCSET_SMALL_SIZES);
	conn->row_context = AllocSetContextCreate(conn->context, "collegedb mysql row",
											  ALLOCSET_DEFAULT_SIZES);
	return conn;
}

/*
 * MysqlClose closes a connection; NULL is a no-op.  A statement
 * interrupted mid-flight leaves the library's coroutine suspended: closing
 * discards it.
 */
void
MysqlClose(void *handle)
{
	MysqlConnFree((CdMysqlConn *) handle);
}

/*
 * MysqlSessionId is the connection's thread id, as INNODB_TRX shows it.
 */
int64
MysqlSessionId(void *handle)
{
	return (int64) mysql_thread_id(((CdMysqlConn *) handle)->mysql);
}
