/*-------------------------------------------------------------------------
 *
 * mysql.c
 *	  The MySQL/MariaDB adapter: shards reached over libmariadb.
 *
 * This file connects to MySQL and MariaDB servers, runs one statement at a
 * time with its $n parameters interpolated client-side as literals (one
 * round trip, as most MySQL drivers do; see mysql_values.c), streams the
 * result's rows to a row sink as they arrive (never the whole result in
 * memory), maps the server's and the client library's errors to SQLSTATEs,
 * and classifies statements by MySQL's lexical rules, executable comments
 * included.  The options are in mysql_options.c.
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
 * It does not cache connections, decide on retries, track transactions or
 * add error context: the remote layer (src/remote/) does.
 *
 * mysql.h clashes with PostgreSQL's headers (see mysql_internal.h), so only
 * the MySQL adapter's files include it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>
#include <math.h>
#include <sys/socket.h>

#include "catalog/pg_foreign_server.h"
#include "catalog/pg_user_mapping.h"
#include "commands/defrem.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "adapters/adapter.h"
#include "adapters/lexer.h"
#include "collegedb.h"

#include "adapters/mysql_internal.h"

/* MySQL 8 server errors that MariaDB lacks (or numbers differently) */
#define CD_MYSQL_ER_QUERY_TIMEOUT				3024	/* MySQL max_execution_time */
#define CD_MYSQL_ER_LOCK_NOWAIT					3572	/* MySQL NOWAIT */
#define CD_MYSQL_ER_CHECK_CONSTRAINT_VIOLATED	3819	/* MySQL 8.0.16+ */
#define CD_MYSQL_ER_CLIENT_INTERACTION_TIMEOUT	4031	/* MySQL 8.0.24+ only */

/*
 * MariaDB Connector/C's own client errors (CR_EVENT_CREATE_FAILED and up);
 * MySQL servers send nothing in this range.
 */
#define CD_MYSQL_CR_EXT_MIN 5000
#define CD_MYSQL_CR_EXT_MAX 5099

/* parameters one statement may have (MySQL's limit for prepared statements) */
#define CD_MYSQL_MAX_PARAMS 65535

/* the longest key collegedb_tombstones.shard_key holds, in characters */
#define CD_MYSQL_MAX_KEY_LENGTH 512


/* Where an asynchronous statement is (MysqlSend .. MysqlPoll) */
typedef enum CdMysqlPhase
{
	CD_MYSQL_QUERY = 0,			/* running setup[index], then the statement */
	CD_MYSQL_FETCH,				/* streaming the statement's rows */
	CD_MYSQL_NEXT,				/* moving to a further result (a CALL's) */
	CD_MYSQL_FETCH_EXTRA,		/* reading a further result set, to drop it */
	CD_MYSQL_DONE
} CdMysqlPhase;

/* CdMysqlConn is the adapter's connection handle, malloc'd */
typedef struct CdMysqlConn
{
	MYSQL	   *mysql;			/* owned by the client library */
	CdMysqlParams params;

	/* the statement in progress */
	CdMysqlPhase phase;
	bool		started;		/* the current _start call returned a wait */
	int			wait;			/* what it waits for (MYSQL_WAIT_*) */
	int			index;			/* which setup command, nsetup: the statement */
	int			nsetup;
	const char *const *setup;
	char	   *statement;		/* with parameters as literals, in 'context' */
	size_t		statement_len;
	int64		rows;
	bool		midway;			/* sent and not finished */

	/* the result being streamed (mysql_use_result) */
	MYSQL_RES  *res;
	int			ncols;
	MYSQL_FIELD *fields;
	CdValueKind *kinds;
	CdCell	   *cells;
	char	   *bufs;			/* CD_MYSQL_INTBUF bytes per column */

	MemoryContext context;		/* the statement's, reset by each send */
	MemoryContext row_context;	/* reset after each row */
} CdMysqlConn;


static bool cd_mysql_library_ready = false;

static const char *const mysql_read_words[] = {
	"select", "values", "table", "show", "explain", "describe", "desc", "with", NULL
};

/*
 * "lock": LOCK IN SHARE MODE; "into": SELECT ... INTO OUTFILE, DUMPFILE
 * or variables, and REPLACE INTO.  Not "replace" itself: REPLACE() is a
 * string function, and a REPLACE statement never starts with a read word.
 */
static const char *const mysql_write_words[] = {
	"insert", "update", "delete", "into", "lock", NULL
};
static const char *const mysql_transaction_words[] = {
	"begin", "start", "commit", "rollback", "savepoint", "release", "xa", NULL
};

/*
 * MySQL's lexical rules: executable comments are code (the server runs
 * /_*!50000 DELETE ... *_/), backslashes escape in literals unless the
 * session has NO_BACKSLASH_ESCAPES (collegedb's sessions do not, but a
 * routed statement can turn it on).
 */
#define MYSQL_LEXER_RULES(backslash) { \
	.backslash_escapes = (backslash), \
	.backtick_idents = true, \
	.hash_comments = true, \
	.dash_comment_space = true, \
	.executable_comments = true, \
	.read_words = mysql_read_words, \
	.write_words = mysql_write_words, \
	.transaction_words = mysql_transaction_words, \
}

static const CdLexerRules mysql_lexer_rules = MYSQL_LEXER_RULES(true);
static const CdLexerRules mysql_lexer_rules_no_backslash = MYSQL_LEXER_RULES(false);

static void MysqlCheckForInterrupts(struct CdMysqlConn *kill);
static void MysqlCloseHandle(MYSQL *m, bool midway);

/*
 * MysqlLexerRules returns the lexical rules a session follows now.
 */
static const CdLexerRules *
MysqlLexerRules(MYSQL *m)
{
	return (m->server_status & SERVER_STATUS_NO_BACKSLASH_ESCAPES) ?
		&mysql_lexer_rules_no_backslash : &mysql_lexer_rules;
}


/* ----------------------------------------------------------------
 *		errors
 * ----------------------------------------------------------------
 */

/*
 * MysqlValidSqlstate says whether a client-library SQLSTATE is worth
 * passing on: five digits or upper-case letters, and not the catch-alls
 * HY000 (general error) or 00000.
 */
static bool
MysqlValidSqlstate(const char *s)
{
	if (s == NULL || strlen(s) != 5)
		return false;
	for (int i = 0; i < 5; i++)
	{
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'A' && s[i] <= 'Z')))
			return false;
	}
	return strcmp(s, "HY000") != 0 && strcmp(s, "00000") != 0;
}

/*
 * MysqlSetError fills *err from the last error of 'm': the one place that
 * maps MySQL/MariaDB error numbers to SQLSTATEs.  With 'shard' set, the
 * failure happened while connecting and becomes 08001 naming the shard,
 * with the native message as detail.  Everything is copied out of the
 * handle (AdapterSetError pstrdups), so the caller may close it next.
 */
static void
MysqlSetError(CdRemoteError *err, MYSQL *m, const char *shard)
{
	unsigned int code = mysql_errno(m);
	const char *native = mysql_error(m);
	const char *native_state = mysql_sqlstate(m);
	const char *sqlstate = NULL;
	bool		lost = false;
	char		detail[128];

	if (native == NULL || native[0] == '\0')
		native = code == 0 ? "unknown error" : "no error message available";

	if (shard != NULL)
	{
		char	   *message = psprintf("could not connect to MySQL shard \"%s\"",
									   shard);

		AdapterSetError(err, "08001", true, message, native, NULL);
		pfree(message);
		return;
	}

	switch (code)
	{
		case ER_DUP_ENTRY:
		case ER_DUP_ENTRY_WITH_KEY_NAME:
			sqlstate = "23505"; /* unique_violation */
			break;
		case ER_ROW_IS_REFERENCED:
		case ER_NO_REFERENCED_ROW:
		case ER_ROW_IS_REFERENCED_2:
		case ER_NO_REFERENCED_ROW_2:
			sqlstate = "23503"; /* foreign_key_violation */
			break;
		case ER_BAD_NULL_ERROR:
		case ER_NO_DEFAULT_FOR_FIELD:
			sqlstate = "23502"; /* not_null_violation */
			break;
		case CD_MYSQL_ER_CHECK_CONSTRAINT_VIOLATED:
			sqlstate = "23514"; /* check_violation */
			break;
		case ER_CONSTRAINT_FAILED:
			/* MariaDB's number; MySQL 8 uses 4025 for something else */
			if (native_state && strcmp(native_state, "23000") == 0)
				sqlstate = "23514";
			break;
		case ER_PARSE_ERROR:
		case ER_EMPTY_QUERY:
			sqlstate = "42601"; /* syntax_error */
			break;
		case ER_NO_SUCH_TABLE:
		case ER_BAD_TABLE_ERROR:
		case ER_NO_SUCH_TABLE_IN_ENGINE:
			sqlstate = "42P01"; /* undefined_table */
			break;
		case ER_BAD_FIELD_ERROR:
			sqlstate = "42703"; /* undefined_column */
			break;
		case ER_TABLE_EXISTS_ERROR:
			sqlstate = "42P07"; /* duplicate_table */
			break;
		case ER_CANT_AGGREGATE_2COLLATIONS:
			sqlstate = "42P21"; /* collation_mismatch */
			break;
		case ER_DBACCESS_DENIED_ERROR:
		case ER_TABLEACCESS_DENIED_ERROR:
		case ER_COLUMNACCESS_DENIED_ERROR:
		case ER_SPECIFIC_ACCESS_DENIED_ERROR:
			sqlstate = "42501"; /* insufficient_privilege */
			break;
		case ER_BAD_DB_ERROR:
			sqlstate = "3D000"; /* invalid_catalog_name */
			break;
		case ER_DATA_TOO_LONG:
			sqlstate = "22001"; /* string_data_right_truncation */
			break;
		case ER_WARN_DATA_OUT_OF_RANGE:
		case ER_DATA_OUT_OF_RANGE:
			sqlstate = "22003"; /* numeric_value_out_of_range */
			break;
		case ER_DIVISION_BY_ZERO:
			sqlstate = "22012"; /* division_by_zero */
			break;

			/*
			 * 1366 is a value that does not parse for the column's type
			 * ("Incorrect integer value: 'abc'"), what PostgreSQL reports as
			 * invalid_text_representation; 1292 is nearly always a bad date
			 * or time ("Incorrect datetime value"), hence
			 * invalid_datetime_format.
			 */
		case ER_TRUNCATED_WRONG_VALUE_FOR_FIELD:
			sqlstate = "22P02";
			break;
		case ER_TRUNCATED_WRONG_VALUE:
			sqlstate = "22007";
			break;
		case ER_LOCK_WAIT_TIMEOUT:
		case CD_MYSQL_ER_LOCK_NOWAIT:
			sqlstate = "55P03"; /* lock_not_available */
			break;
		case ER_LOCK_DEADLOCK:
			sqlstate = "40P01"; /* deadlock_detected */
			break;
		case ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION:
		case ER_OPTION_PREVENTS_STATEMENT:
			sqlstate = "25006"; /* read_only_sql_transaction */
			break;
		case ER_QUERY_INTERRUPTED:
		case ER_STATEMENT_TIMEOUT:
		case CD_MYSQL_ER_QUERY_TIMEOUT:
			sqlstate = "57014"; /* query_canceled */
			break;
		case ER_CONNECTION_KILLED:
			/* KILL CONNECTION: the server closes the session */
			sqlstate = "57014";
			lost = true;
			break;
		case ER_SERVER_SHUTDOWN:
			sqlstate = "57P01"; /* admin_shutdown */
			lost = true;
			break;
		case CD_MYSQL_ER_CLIENT_INTERACTION_TIMEOUT:
			/* MariaDB uses 4031 for a missing trigger */
			if (!mariadb_connection(m))
			{
				sqlstate = "08006";
				lost = true;
			}
			break;
		case CR_CONNECTION_ERROR:
		case CR_CONN_HOST_ERROR:
		case CR_UNKNOWN_HOST:
		case CR_SERVER_GONE_ERROR:
		case CR_SERVER_LOST:
		case CR_SERVER_LOST_EXTENDED:
			sqlstate = "08006"; /* connection_failure */
			lost = true;
			break;
		case CR_OUT_OF_MEMORY:
			sqlstate = "53200"; /* out_of_memory */
			lost = true;
			break;
		default:
			break;
	}

	/*
	 * Any other client-library error (out of sync, malformed packet, ...)
	 * leaves the handle in a state we cannot vouch for.
	 */
	if ((code >= CR_MIN_ERROR && code <= CR_MAX_ERROR) ||
		(code >= CD_MYSQL_CR_EXT_MIN && code <= CD_MYSQL_CR_EXT_MAX))
		lost = true;

	if (sqlstate == NULL)
		sqlstate = MysqlValidSqlstate(native_state) ? native_state : "XX000";

	if (native_state != NULL && strlen(native_state) == 5)
		snprintf(detail, sizeof(detail), "MySQL error %u (SQLSTATE %s).",
				 code, native_state);
	else
		snprintf(detail, sizeof(detail), "MySQL error %u.", code);

	AdapterSetError(err, sqlstate, lost, native, detail, NULL);
}


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
static int
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

		rc = WaitLatchOrSocket(MyLatch, events, sock, timeout,
							   PG_WAIT_EXTENSION);
		if (rc & WL_LATCH_SET)
			ResetLatch(MyLatch);
		if (rc & WL_SOCKET_READABLE)
			happened |= (status & MYSQL_WAIT_READ) ? MYSQL_WAIT_READ : MYSQL_WAIT_EXCEPT;
		if (rc & WL_SOCKET_WRITEABLE)
			happened |= MYSQL_WAIT_WRITE;
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
static void
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
	if (!INTERRUPTS_PENDING_CONDITION())
		return;
	if (kill == NULL)
	{
		CHECK_FOR_INTERRUPTS();
		return;
	}
	PG_TRY();
	{
		CHECK_FOR_INTERRUPTS();
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
 * it is closed.
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
static void *
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
static void
MysqlClose(void *handle)
{
	MysqlConnFree((CdMysqlConn *) handle);
}

/*
 * MysqlColumns reads the row description of the result being streamed,
 * into the statement's context, and sends the column names to the sink.
 */
static void
MysqlColumns(CdMysqlConn *conn, CdRowSink *sink)
{
	MemoryContext old = MemoryContextSwitchTo(conn->context);
	int			ncols = (int) mysql_num_fields(conn->res);
	const char **names = palloc(sizeof(char *) * Max(ncols, 1));

	conn->ncols = ncols;
	conn->fields = mysql_fetch_fields(conn->res);
	conn->kinds = palloc(sizeof(CdValueKind) * Max(ncols, 1));
	conn->cells = palloc(sizeof(CdCell) * Max(ncols, 1));
	conn->bufs = palloc((Size) CD_MYSQL_INTBUF * Max(ncols, 1));
	for (int i = 0; i < ncols; i++)
	{
		names[i] = conn->fields[i].name;
		conn->kinds[i] = MysqlColumnKind(&conn->fields[i]);
	}
	MemoryContextSwitchTo(old);
	if (sink != NULL)
		sink->columns(sink, ncols, names);
}

/*
 * MysqlDeliverRow hands the row just fetched to the sink, in the row
 * context.  Reads client memory only.  May throw (from the sink).
 */
static void
MysqlDeliverRow(CdMysqlConn *conn, MYSQL_ROW row, CdRowSink *sink)
{
	unsigned long *lengths = mysql_fetch_lengths(conn->res);

	for (int i = 0; i < conn->ncols; i++)
		MysqlCell(&conn->cells[i], &conn->fields[i], conn->kinds[i], row[i], lengths[i],
				  conn->bufs + (Size) i * CD_MYSQL_INTBUF);
	AdapterDeliverRow(sink, conn->ncols, conn->cells, conn->row_context);
}

/*
 * MysqlSend builds the statement, with its parameters as literals, and
 * starts the first command (a setup command, or the statement) without
 * waiting.  The placeholders are found by the lexical rules the session
 * follows now: a routed statement may have turned NO_BACKSLASH_ESCAPES on,
 * and a literal must end where the server thinks it does.  By those rules,
 * a statement the remote layer runs as a read must still be one.  A bad
 * parameter, or more than MySQL takes, fails before anything is sent.  See
 * adapter.h.
 */
static bool
MysqlSend(void *handle, int nsetup, const char *const *setup,
		  const char *sql, int nparams, const CdParam *params, int flags,
		  CdRemoteError *err)
{
	CdMysqlConn *conn = (CdMysqlConn *) handle;
	CdMysqlParamState st;
	CdStatementShape shape;
	StringInfoData buf;
	MemoryContext old;

	if (conn->midway || conn->res != NULL)
	{
		AdapterSetError(err, "08006", true,
						"the MySQL connection is in the middle of an earlier statement",
						NULL, NULL);
		return false;
	}
	if (AdapterTooManyParams(nparams, CD_MYSQL_MAX_PARAMS, "a MySQL", err))
		return false;

	MemoryContextReset(conn->row_context);
	MemoryContextResetOnly(conn->context);
	old = MemoryContextSwitchTo(conn->context);
	memset(&st, 0, sizeof(st));
	st.mysql = conn->mysql;
	st.nparams = nparams;
	st.params = params;
	initStringInfo(&buf);
	shape = LexerScan(sql, MysqlLexerRules(conn->mysql), &buf, MysqlEmitParam, &st);
	MemoryContextSwitchTo(old);
	if (st.failed)
	{
		AdapterRefuse(err, st.sqlstate, st.message, NULL);
		return false;
	}
	if ((flags & CD_EXEC_READ) && !shape.read_only)
	{
		AdapterRefuse(err, "25006",
					  "statement writes, but it was sent to the MySQL shard as a read",
					  "The session's NO_BACKSLASH_ESCAPES mode makes the statement's literals end elsewhere, and then it may write.");
		return false;
	}

	conn->phase = CD_MYSQL_QUERY;
	conn->started = false;
	conn->index = 0;
	conn->nsetup = nsetup;
	conn->setup = setup;
	conn->statement = buf.data;
	conn->statement_len = buf.len;
	conn->rows = 0;
	conn->ncols = 0;
	conn->midway = true;
	return true;
}

static CdPollResult
MysqlWaitResult(int status)
{
	return (status & MYSQL_WAIT_WRITE) ? CD_POLL_WRITE : CD_POLL_READ;
}

/*
 * MysqlFetch streams the rows of conn->res to 'sink' (NULL: drops them)
 * as far as it can without blocking: one round trip per command (the
 * protocol, without multi-statements, which stay off so that a statement
 * is exactly one command), then the rows as they arrive, never the whole
 * result in client memory.  Returns CD_POLL_DONE once the result ended
 * (and is freed), the wait it needs, or CD_POLL_FAILED.
 */
static CdPollResult
MysqlFetch(CdMysqlConn *conn, CdRowSink *sink, CdRemoteError *err)
{
	for (;;)
	{
		MYSQL_ROW	row = NULL;
		int			status;

		if (!conn->started)
			status = mysql_fetch_row_start(&row, conn->res);
		else
			status = mysql_fetch_row_cont(&row, conn->res, conn->wait);
		if ((conn->started = status != 0))
		{
			conn->wait = status;
			return MysqlWaitResult(status);
		}
		if (row == NULL)
		{
			/* the end, or an error packet: either way nothing is left to read */
			bool		failed = mysql_errno(conn->mysql) != 0;

			if (failed)
				MysqlSetError(err, conn->mysql, NULL);
			mysql_free_result(conn->res);
			conn->res = NULL;
			return failed ? CD_POLL_FAILED : CD_POLL_DONE;
		}
		conn->rows++;
		if (sink != NULL)
			MysqlDeliverRow(conn, row, sink);
	}
}

/*
 * MysqlPoll advances the statement as far as it can without blocking:
 * the setup commands and the statement, then its rows, streamed (see
 * MysqlFetch); a CALL's further results are read and dropped.  Resuming a
 * suspended call when its socket is not ready yet is harmless: the library
 * suspends again.  See adapter.h.
 */
static CdPollResult
MysqlPoll(void *handle, CdRowSink *sink, int64 *rows_affected, CdRemoteError *err)
{
	CdMysqlConn *conn = (CdMysqlConn *) handle;
	MYSQL	   *m = conn->mysql;

	for (;;)
	{
		int			ret = 1;
		int			status;
		CdPollResult r;

		switch (conn->phase)
		{
			case CD_MYSQL_QUERY:
				if (!conn->started)
				{
					const char *q = conn->index < conn->nsetup ? conn->setup[conn->index] : conn->statement;
					size_t		len = conn->index < conn->nsetup ? strlen(q) : conn->statement_len;

					status = mysql_real_query_start(&ret, m, q, len);
				}
				else
					status = mysql_real_query_cont(&ret, m, conn->wait);
				if ((conn->started = status != 0))
				{
					conn->wait = status;
					return MysqlWaitResult(status);
				}
				if (ret != 0)
				{
					MysqlSetError(err, m, NULL);
					conn->midway = false;
					return CD_POLL_FAILED;
				}
				if (conn->index < conn->nsetup)
				{
					/* transaction control: no result set */
					conn->index++;
					continue;
				}
				if (mysql_field_count(m) == 0)
				{
					conn->rows = (int64) mysql_affected_rows(m);
					conn->phase = CD_MYSQL_NEXT;
					continue;
				}
				/* no I/O: the row description came with the answer */
				conn->res = mysql_use_result(m);
				if (conn->res == NULL)
				{
					MysqlSetError(err, m, NULL);
					err->connection_lost = true;
					return CD_POLL_FAILED;
				}
				MysqlColumns(conn, sink);
				conn->phase = CD_MYSQL_FETCH;
				continue;

			case CD_MYSQL_FETCH:
			case CD_MYSQL_FETCH_EXTRA:
				r = MysqlFetch(conn, conn->phase == CD_MYSQL_FETCH ? sink : NULL, err);
				if (r != CD_POLL_DONE)
				{
					if (r == CD_POLL_FAILED)
						conn->midway = false;
					return r;
				}
				conn->phase = CD_MYSQL_NEXT;
				continue;

			case CD_MYSQL_NEXT:
				if (!conn->started)
				{
					if (!mysql_more_results(m))
					{
						conn->phase = CD_MYSQL_DONE;
						continue;
					}
					status = mysql_next_result_start(&ret, m);
				}
				else
					status = mysql_next_result_cont(&ret, m, conn->wait);
				if ((conn->started = status != 0))
				{
					conn->wait = status;
					return MysqlWaitResult(status);
				}
				if (ret > 0)
				{
					MysqlSetError(err, m, NULL);
					conn->midway = false;
					return CD_POLL_FAILED;
				}
				if (ret == 0 && mysql_field_count(m) > 0)
				{
					conn->res = mysql_use_result(m);
					if (conn->res == NULL)
					{
						MysqlSetError(err, m, NULL);
						err->connection_lost = true;
						return CD_POLL_FAILED;
					}
					conn->phase = CD_MYSQL_FETCH_EXTRA;
				}
				else if (ret < 0)
					conn->phase = CD_MYSQL_DONE;
				continue;

			case CD_MYSQL_DONE:
				conn->midway = false;
				*rows_affected = conn->rows;
				return CD_POLL_DONE;
		}
	}
}

static int
MysqlSocket(void *handle)
{
	return mysql_get_socket(((CdMysqlConn *) handle)->mysql);
}

static void
MysqlCancel(void *handle, int timeout_ms)
{
	MysqlCancelQuery((CdMysqlConn *) handle, timeout_ms);
}

/*
 * MysqlExec runs a statement to completion: MysqlSend, then MysqlPoll
 * while waiting (interruptibly; an interrupt kills the statement on the
 * server before the error goes on).  The waits' deadline is
 * AdapterExecDeadline's (cleanups, COMMIT); when it passes the connection
 * is lost.  See adapter.h.
 */
static bool
MysqlExec(void *handle, int nsetup, const char *const *setup,
		  const char *sql, int nparams, const CdParam *params, int flags,
		  CdRowSink *sink, int64 *rows_affected, CdRemoteError *err)
{
	CdMysqlConn *conn = (CdMysqlConn *) handle;
	bool		interruptible;
	TimestampTz deadline = AdapterExecDeadline(flags, &interruptible);
	CdPollResult r;

	*rows_affected = 0;
	if (!MysqlSend(handle, nsetup, setup, sql, nparams, params, flags, err))
		return false;
	while ((r = MysqlPoll(handle, sink, rows_affected, err)) == CD_POLL_READ ||
		   r == CD_POLL_WRITE)
	{
		conn->wait = MysqlWait(conn->mysql, conn->wait, conn, interruptible, deadline);
		if (conn->wait < 0)
		{
			AdapterSetGaveUp(err, flags);
			return false;
		}
	}
	return r == CD_POLL_DONE;
}

/*
 * MysqlScan classifies a statement by MySQL's lexical rules (executable
 * comments are code), with backslash escapes in literals as collegedb's
 * sessions have them.
 */
static CdStatementShape
MysqlScan(const char *sql)
{
	return LexerScan(sql, &mysql_lexer_rules, NULL, NULL, NULL);
}

/* ----------------------------------------------------------------
 *		dialect text
 * ----------------------------------------------------------------
 */

/*
 * MysqlQuoteIdent quotes an identifier with backticks, doubling embedded
 * ones.
 */
static char *
MysqlQuoteIdent(const char *ident)
{
	return AdapterQuoteIdent(ident, '`');
}

/*
 * Statements after which MySQL has committed the open transaction
 * ("Statements That Cause an Implicit Commit"): they cannot take part in a
 * remote transaction.
 */
static const char *const mysql_implicit_commit[] = {
	"alter", "create", "drop", "rename", "truncate", "grant", "revoke",
	"lock", "unlock", "analyze", "optimize", "repair", "check", "cache",
	"flush", "load", "install", "uninstall", "start", "begin", NULL
};

/*
 * What add_shard creates on a MySQL shard: the tombstone table, keyed
 * (and indexed) so that a writer's locking read of a key's tombstone and a
 * mover's insert of it conflict in InnoDB.
 */
static const char *const mysql_shard_ddl[] = {
	"CREATE TABLE IF NOT EXISTS collegedb_tombstones ("
	"table_name VARCHAR(255) NOT NULL, "
	"shard_key VARCHAR(" CppAsString2(CD_MYSQL_MAX_KEY_LENGTH) ") NOT NULL, "
	"moved_to VARCHAR(255) NOT NULL, "
	"move_id BIGINT NULL, "
	"moved_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), "
	"PRIMARY KEY (shard_key, table_name)"
	") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
	NULL
};

/*
 * The shard-side tables of topology groups (see adapter.h).  utf8mb4_bin
 * pads with spaces, so the front refuses group and channel names that end
 * in one.
 */
static const char *const mysql_topology_ddl[] = {
	"CREATE TABLE IF NOT EXISTS collegedb_topology ("
	"group_name VARCHAR(255) NOT NULL PRIMARY KEY, version BIGINT NOT NULL, snapshot JSON NULL"
	") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
	"CREATE TABLE IF NOT EXISTS collegedb_topology_state ("
	"group_name VARCHAR(255) NOT NULL, channel VARCHAR(255) NOT NULL, "
	"version BIGINT NOT NULL, value JSON NULL, PRIMARY KEY (group_name, channel)"
	") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
	NULL
};

const CdAdapter CdMysqlAdapter = {
	.dialect = CD_DIALECT_MYSQL,
	.name = "mysql",

	.connect = MysqlConnect,
	.exec = MysqlExec,
	.send = MysqlSend,
	.poll = MysqlPoll,
	.socket = MysqlSocket,
	.cancel = MysqlCancel,
	.close = MysqlClose,

	.option_ok = MysqlOptionOk,
	.check_options = MysqlCheckOptions,
	.valid_options = MysqlValidOptions,

	.scan = MysqlScan,
	.max_params = CD_MYSQL_MAX_PARAMS,
	.max_key_length = CD_MYSQL_MAX_KEY_LENGTH,

	.sql_begin = "START TRANSACTION",
	.sql_commit = "COMMIT",
	.sql_rollback = "ROLLBACK",
	.sql_savepoint = "SAVEPOINT s%d",
	.sql_release = "RELEASE SAVEPOINT s%d",
	.sql_rollback_to = "ROLLBACK TO SAVEPOINT s%d",
	.implicit_commit = mysql_implicit_commit,

	.quote_ident = MysqlQuoteIdent,
	.shard_ddl = mysql_shard_ddl,
	.sql_begin_write = "START TRANSACTION",
	.guard_query = "SELECT moved_to FROM collegedb_tombstones WHERE shard_key = $1 LIMIT 1 LOCK IN SHARE MODE",
	/*
	 * A locking read of an absent row takes only a gap lock, and InnoDB's
	 * gap locks never conflict: the mover writes a placeholder tombstone
	 * instead (replaced by the real ones in the same transaction), whose
	 * insert waits for writers holding the guard's shared lock and makes
	 * later guards wait for the move's commit.
	 */
	.lock_key_sql = "INSERT INTO collegedb_tombstones (table_name, shard_key, moved_to) "
	"VALUES ('', $1, '') ON DUPLICATE KEY UPDATE moved_to = moved_to",
	.size_sql = "SELECT CAST(COALESCE(SUM(data_length + index_length), 0) AS SIGNED) AS size FROM information_schema.tables WHERE table_schema = DATABASE()",
	.key_match = "%1$s = $%2$d AND CAST(%1$s AS BINARY) = CAST($%2$d AS BINARY)",
	.topology_ddl = mysql_topology_ddl,
	/* assignments run left to right: the value first, compared with the old version */
	.topology_publish = "INSERT INTO collegedb_topology (group_name, version, snapshot) "
	"VALUES ($1, $2, $3) ON DUPLICATE KEY UPDATE "
	"snapshot = IF(VALUES(version) > version, VALUES(snapshot), snapshot), "
	"version = GREATEST(version, VALUES(version))",
	.topology_put_state = "INSERT INTO collegedb_topology_state (group_name, channel, version, value) "
	"VALUES ($1, $2, $3, $4) ON DUPLICATE KEY UPDATE "
	"value = IF(VALUES(version) > version, VALUES(value), value), "
	"version = GREATEST(version, VALUES(version))",
};
