/*-------------------------------------------------------------------------
 *
 * sqlite.c
 *	  The SQLite adapter: shards that are SQLite database files opened in
 *	  the backend itself.
 *
 * This file opens and closes SQLite databases, validates the server
 * options of SQLite shards, runs one statement at a time with $n
 * parameters rewritten to SQLite's ?n, streams the rows to a CdRowSink and
 * maps SQLite result codes to SQLSTATEs.  Waits (for another connection's
 * lock) and long statements stop when PostgreSQL has a cancel or
 * termination pending: the busy and progress handlers only tell SQLite to
 * give up, and the error is raised here once every SQLite resource is
 * released, never from inside an SQLite callback.
 *
 * It does not cache connections, track transaction nesting, retry or add
 * the shard's name to errors: the remote layer (src/remote/) does.  Every
 * connection runs in the sandbox of sqlite_sandbox.c (no extensions, no
 * other files, no pointers, no hand-written schema, tight limits, an
 * allow-list authorizer), and a statement the remote layer runs as a read
 * must be one by SQLite's own parser (sqlite3_stmt_readonly).
 *
 * sqlite3.h is included by the SQLite adapter's files and nowhere else.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <sys/stat.h>

#include <sqlite3.h>

#include "catalog/pg_foreign_server.h"
#include "catalog/pg_user_mapping.h"
#include "commands/defrem.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "adapters/adapter.h"
#include "adapters/lexer.h"
#include "adapters/sqlite_sandbox.h"

/* default for the busy_timeout server option, in milliseconds */
#define CD_SQLITE_DEFAULT_BUSY_TIMEOUT	5000

/* virtual-machine steps between two looks at PostgreSQL's interrupts */
#define CD_SQLITE_PROGRESS_STEPS	1000

/* room for the text of one integer or float cell */
#define CD_SQLITE_NUMBUF		32

/*
 * SqliteConn is the handle behind the adapter's void *.  It is malloc'd:
 * it outlives transactions and memory contexts.
 */
typedef struct SqliteConn
{
	sqlite3    *db;
	int			busy_timeout;	/* milliseconds */
	TimestampTz busy_start;		/* when the current lock wait began */
	bool		interrupted;	/* a handler gave up for a PG interrupt */
	bool		in_transaction; /* a transaction was open before the call */
	bool		transaction_lost;	/* SQLite rolled it back on its own */
	SqliteSandbox sandbox;		/* the authorizer's state */
} SqliteConn;

/* what a result column's declared type adds to its values' storage class */
typedef enum SqliteColumnHint
{
	CD_SQLITE_COLUMN_PLAIN = 0,
	CD_SQLITE_COLUMN_BOOL,
	CD_SQLITE_COLUMN_JSON
} SqliteColumnHint;

static const char *const sqlite_journal_modes[] = {
	"delete", "truncate", "persist", "memory", "wal", "off", NULL
};

static const char *const sqlite_server_options[] = {
	"database", "busy_timeout", "journal_mode", NULL
};

static const char *const sqlite_user_mapping_options[] = {
	"user", "password", NULL
};

static const char *const sqlite_read_words[] = {
	"select", "values", "with", "explain", NULL
};
static const char *const sqlite_write_words[] = {
	"insert", "update", "delete", "into", NULL
};
static const char *const sqlite_transaction_words[] = {
	"begin", "commit", "end", "rollback", "savepoint", "release", NULL
};

static const CdLexerRules sqlite_lexer_rules = {
	.backtick_idents = true,
	.bracket_idents = true,
	.strings_are_names = true,
	.read_words = sqlite_read_words,
	.write_words = sqlite_write_words,
	.transaction_words = sqlite_transaction_words,
};

/*
 * Names of the result codes we are likely to report, for error details.
 * Extended codes not listed fall back to their primary code's name.
 */
typedef struct SqliteCodeName
{
	int			code;
	const char *name;
} SqliteCodeName;

#define CODE(c) { c, #c }
static const SqliteCodeName sqlite_code_names[] = {
	CODE(SQLITE_ERROR),
	CODE(SQLITE_INTERNAL),
	CODE(SQLITE_PERM),
	CODE(SQLITE_ABORT),
	CODE(SQLITE_BUSY),
	CODE(SQLITE_LOCKED),
	CODE(SQLITE_NOMEM),
	CODE(SQLITE_READONLY),
	CODE(SQLITE_INTERRUPT),
	CODE(SQLITE_IOERR),
	CODE(SQLITE_CORRUPT),
	CODE(SQLITE_NOTFOUND),
	CODE(SQLITE_FULL),
	CODE(SQLITE_CANTOPEN),
	CODE(SQLITE_PROTOCOL),
	CODE(SQLITE_EMPTY),
	CODE(SQLITE_SCHEMA),
	CODE(SQLITE_TOOBIG),
	CODE(SQLITE_CONSTRAINT),
	CODE(SQLITE_MISMATCH),
	CODE(SQLITE_MISUSE),
	CODE(SQLITE_NOLFS),
	CODE(SQLITE_AUTH),
	CODE(SQLITE_FORMAT),
	CODE(SQLITE_RANGE),
	CODE(SQLITE_NOTADB),
	CODE(SQLITE_CONSTRAINT_CHECK),
	CODE(SQLITE_CONSTRAINT_COMMITHOOK),
	CODE(SQLITE_CONSTRAINT_DATATYPE),
	CODE(SQLITE_CONSTRAINT_FOREIGNKEY),
	CODE(SQLITE_CONSTRAINT_FUNCTION),
	CODE(SQLITE_CONSTRAINT_NOTNULL),
	CODE(SQLITE_CONSTRAINT_PINNED),
	CODE(SQLITE_CONSTRAINT_PRIMARYKEY),
	CODE(SQLITE_CONSTRAINT_ROWID),
	CODE(SQLITE_CONSTRAINT_TRIGGER),
	CODE(SQLITE_CONSTRAINT_UNIQUE),
	CODE(SQLITE_CONSTRAINT_VTAB),
	CODE(SQLITE_BUSY_RECOVERY),
	CODE(SQLITE_BUSY_SNAPSHOT),
	CODE(SQLITE_BUSY_TIMEOUT),
	CODE(SQLITE_LOCKED_SHAREDCACHE),
	CODE(SQLITE_LOCKED_VTAB),
	CODE(SQLITE_READONLY_RECOVERY),
	CODE(SQLITE_READONLY_CANTLOCK),
	CODE(SQLITE_READONLY_ROLLBACK),
	CODE(SQLITE_READONLY_DBMOVED),
	CODE(SQLITE_READONLY_CANTINIT),
	CODE(SQLITE_READONLY_DIRECTORY),
	CODE(SQLITE_CANTOPEN_NOTEMPDIR),
	CODE(SQLITE_CANTOPEN_ISDIR),
	CODE(SQLITE_CANTOPEN_FULLPATH),
	CODE(SQLITE_CANTOPEN_CONVPATH),
	CODE(SQLITE_CANTOPEN_SYMLINK),
	CODE(SQLITE_CORRUPT_VTAB),
	CODE(SQLITE_CORRUPT_SEQUENCE),
	CODE(SQLITE_CORRUPT_INDEX),
	CODE(SQLITE_ABORT_ROLLBACK),
	CODE(SQLITE_IOERR_READ),
	CODE(SQLITE_IOERR_SHORT_READ),
	CODE(SQLITE_IOERR_WRITE),
	CODE(SQLITE_IOERR_FSYNC),
	CODE(SQLITE_IOERR_TRUNCATE),
	CODE(SQLITE_IOERR_FSTAT),
	CODE(SQLITE_IOERR_LOCK),
	CODE(SQLITE_IOERR_NOMEM),
	CODE(SQLITE_IOERR_ACCESS),
	CODE(SQLITE_IOERR_DELETE),
	CODE(SQLITE_IOERR_SHMOPEN),
	CODE(SQLITE_IOERR_SHMSIZE),
	CODE(SQLITE_IOERR_SHMLOCK),
	CODE(SQLITE_IOERR_SHMMAP),
	CODE(SQLITE_IOERR_CORRUPTFS),
	{0, NULL}
};
#undef CODE

/*
 * Substrings of SQLITE_ERROR messages that tell which error it is.  SQLite
 * gives one result code to nearly every failure to compile a statement and
 * to a few run-time failures; the message is all there is to go on.  The
 * first match wins.
 */
typedef struct SqliteMessageState
{
	const char *fragment;
	const char *sqlstate;
} SqliteMessageState;

static const SqliteMessageState sqlite_message_states[] = {
	{"syntax error", "42601"},
	{"incomplete input", "42601"},
	{"unrecognized token", "42601"},
	{"values were supplied", "42601"},	/* INSERT with too many values */
	{"no such table", "42P01"},
	{"no such view", "42P01"},
	{"no such column", "42703"},
	{"has no column named", "42703"},
	{"ambiguous column name", "42702"},
	{"already exists", "42P07"},
	{"no such index", "42704"},
	{"no such trigger", "42704"},
	{"no such function", "42883"},
	{"wrong number of arguments to function", "42883"},
	{"no such savepoint", "3B001"},
	{"no transaction is active", "25P01"},
	{"within a transaction", "25001"},
	{"too many SQL variables", "54023"},
	{"integer overflow", "22003"},
	{"malformed JSON", "22P02"},
	{NULL, NULL}
};

/*
 * Everything else SQLite reports as SQLITE_ERROR: it is SQLite's "SQL
 * error or missing database" code and comes overwhelmingly from compiling
 * the statement, so the syntax-error-or-access-rule-violation class is the
 * least surprising home.
 */
#define CD_SQLITE_ERROR_DEFAULT_STATE	"42000"

static void *sqlite_connect(const CdConnInfo *info, CdRemoteError *err);
static bool sqlite_exec(void *handle, int nsetup, const char *const *setup,
						const char *sql, int nparams, const CdParam *params,
						int flags, CdRowSink *sink, int64 *rows_affected,
						CdRemoteError *err);
static void sqlite_close(void *handle);
static bool sqlite_option_ok(const char *keyword, Oid catalog);
static void sqlite_check_options(List *options, Oid catalog);
static char *sqlite_valid_options(Oid catalog);
static char *sqlite_quote_ident(const char *ident);
static CdStatementShape sqlite_scan(const char *sql);

/*
 * sqlite_interrupt_wanted tells whether PostgreSQL has a cancel or a
 * termination pending that CHECK_FOR_INTERRUPTS would act on right now.
 *
 * Other pending interrupts (barriers, memory-context logging) are left for
 * later: stopping SQLite for them would turn into a spurious cancel.  So
 * are interrupts while they are held off (e.g. while aborting a
 * transaction), since nothing could raise them.  Safe in SQLite callbacks.
 */
static inline bool
sqlite_interrupt_wanted(void)
{
	return InterruptPending &&
		(QueryCancelPending || ProcDiePending) &&
		INTERRUPTS_CAN_BE_PROCESSED();
}

/*
 * sqlite_busy_handler waits for a lock held by another connection, in
 * short sleeps, up to the server's busy_timeout.  It gives up at once when
 * PostgreSQL wants to cancel; it must never throw.
 */
static int
sqlite_busy_handler(void *arg, int count)
{
	SqliteConn *conn = (SqliteConn *) arg;
	TimestampTz now = GetCurrentTimestamp();

	if (count == 0)
		conn->busy_start = now;
	if (sqlite_interrupt_wanted())
	{
		conn->interrupted = true;
		return 0;
	}
	if (TimestampDifferenceExceeds(conn->busy_start, now, conn->busy_timeout))
		return 0;

	/* a signal cuts the sleep short, so a cancel is seen within a step */
	pg_usleep(count < 10 ? 1000L : 10000L);
	return 1;
}

/*
 * sqlite_progress_handler stops a running statement when PostgreSQL wants
 * to cancel; SQLite then returns SQLITE_INTERRUPT.  It must never throw.
 */
static int
sqlite_progress_handler(void *arg)
{
	SqliteConn *conn = (SqliteConn *) arg;

	if (sqlite_interrupt_wanted())
	{
		conn->interrupted = true;
		return 1;
	}
	return 0;
}

/*
 * sqlite_code_name names a result code for an error detail.
 */
static const char *
sqlite_code_name(int rc)
{
	for (const SqliteCodeName *c = sqlite_code_names; c->name; c++)
		if (c->code == rc)
			return c->name;
	for (const SqliteCodeName *c = sqlite_code_names; c->name; c++)
		if (c->code == (rc & 0xFF))
			return psprintf("%s (extended code %d)", c->name, rc);
	return psprintf("%d", rc);
}

/*
 * sqlite_sqlstate maps an extended result code, and for the generic
 * SQLITE_ERROR its message, to a SQLSTATE.
 */
static const char *
sqlite_sqlstate(int rc, const char *message)
{
	switch (rc)
	{
		case SQLITE_CONSTRAINT_UNIQUE:
		case SQLITE_CONSTRAINT_PRIMARYKEY:
			return "23505";
		case SQLITE_CONSTRAINT_NOTNULL:
			return "23502";
		case SQLITE_CONSTRAINT_FOREIGNKEY:
			return "23503";
		case SQLITE_CONSTRAINT_CHECK:
			return "23514";
		case SQLITE_CONSTRAINT_DATATYPE:
			/* a STRICT table refused the value's type */
			return "42804";
	}

	switch (rc & 0xFF)
	{
		case SQLITE_ERROR:
			if (message)
			{
				for (const SqliteMessageState *m = sqlite_message_states;
					 m->fragment; m++)
					if (strstr(message, m->fragment) != NULL)
						return m->sqlstate;
			}
			return CD_SQLITE_ERROR_DEFAULT_STATE;
		case SQLITE_CONSTRAINT:
			return "23000";
		case SQLITE_BUSY:
		case SQLITE_LOCKED:
			return "55P03";
		case SQLITE_READONLY:
			return "25006";
		case SQLITE_CANTOPEN:
			return "08006";
		case SQLITE_FULL:
			return "53100";
		case SQLITE_CORRUPT:
		case SQLITE_NOTADB:
			return "XX001";
		case SQLITE_TOOBIG:
			return "54000";
		case SQLITE_MISMATCH:
			return "42804";
		case SQLITE_RANGE:
			return "42P02";
		case SQLITE_AUTH:
		case SQLITE_PERM:
			return "42501";
		case SQLITE_NOMEM:
			return "53200";
		case SQLITE_IOERR:
			return "58030";
		case SQLITE_INTERRUPT:
			return "57014";
		default:
			return "XX000";
	}
}

/*
 * sqlite_set_error fills *err from a failed SQLite call: SQLSTATE, SQLite's
 * own message, the result code's name as detail.  It copies everything
 * (AdapterSetError pstrdups) so the caller may finalize or close right
 * after.  With 'db' NULL the generic text of the code is the message.
 */
static void
sqlite_set_error(sqlite3 *db, int rc, CdRemoteError *err)
{
	const char *message;
	const char *sqlstate;
	char	   *detail = NULL;
	const char *hint = NULL;

	message = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
	sqlstate = sqlite_sqlstate(rc, message);

	/* plain SQLITE_ERROR adds nothing to its message */
	if (rc != SQLITE_ERROR)
		detail = psprintf("SQLite reported %s.", sqlite_code_name(rc));

	switch (rc & 0xFF)
	{
		case SQLITE_BUSY:
		case SQLITE_LOCKED:
			hint = "Another connection holds a lock on the SQLite database; "
				"retry, or raise the server's busy_timeout option.";
			break;
	}

	AdapterSetError(err, sqlstate, (rc & 0xFF) == SQLITE_CANTOPEN,
					message, detail, hint);
}

/*
 * sqlite_denied fills *err for something the sandbox refuses: SQLSTATE
 * 42501, naming what.
 */
static void
sqlite_denied(const char *what, CdRemoteError *err)
{
	AdapterSetError(err, "42501", false,
					psprintf("SQLite shards do not allow %s", what),
					"collegedb runs statements on SQLite shards in a sandbox.",
					"See the Security section of collegedb's README for what statements may do on SQLite shards.");
}

/*
 * sqlite_fail finishes a failed call on an open connection: it fills *err
 * (before anything is freed), finalizes 'stmt' (may be NULL) and, when
 * one of our handlers stopped SQLite for a PostgreSQL interrupt, lets
 * CHECK_FOR_INTERRUPTS raise PostgreSQL's own cancel or termination error.
 * Returns false for the caller to return.
 *
 * SQLite rolls back the whole open transaction on some failures
 * (interrupts, a full disk, I/O errors, some lock failures).  The error
 * itself keeps its identity (the detail says so); the connection remembers
 * it, and refuses every command but ROLLBACK until then (see sqlite_exec),
 * so that nothing meant for the lost transaction runs in autocommit.
 */
static bool
sqlite_fail(SqliteConn *conn, int rc, sqlite3_stmt *stmt, CdRemoteError *err)
{
	bool		lost;

	sqlite_set_error(conn->db, rc, err);
	if (conn->sandbox.denied[0] != '\0')
		sqlite_denied(conn->sandbox.denied, err);

	if (stmt != NULL)
		sqlite3_finalize(stmt);

	lost = conn->in_transaction && sqlite3_get_autocommit(conn->db);
	if (lost)
		conn->transaction_lost = true;

	if (conn->interrupted)
	{
		conn->interrupted = false;
		CHECK_FOR_INTERRUPTS();
		/* the interrupt went away in the meantime; still report a cancel */
		AdapterSetError(err, "57014", false,
						"canceling statement due to an interrupt",
						NULL, NULL);
	}

	if (lost)
	{
		if (err->detail == NULL)
			err->detail = pstrdup("SQLite rolled back the open transaction.");
		else
			err->detail = psprintf("%s SQLite rolled back the open transaction.",
								   err->detail);
	}
	return false;
}

/*
 * sqlite_parse_busy_timeout parses a busy_timeout value: an integer number
 * of milliseconds, zero or more.  False when it is not one.
 */
static bool
sqlite_parse_busy_timeout(const char *value, int *result)
{
	char	   *end;
	long		v;

	errno = 0;
	v = strtol(value, &end, 10);
	if (end == value || *end != '\0' || errno != 0 || v < 0 || v > INT_MAX)
		return false;
	*result = (int) v;
	return true;
}

/*
 * sqlite_journal_mode returns the canonical (lower-case) spelling of a
 * journal_mode value, NULL if it is not one SQLite knows.  Only these
 * spellings are ever pasted into a PRAGMA.
 */
static const char *
sqlite_journal_mode(const char *value)
{
	for (const char *const *m = sqlite_journal_modes; *m; m++)
		if (pg_strcasecmp(value, *m) == 0)
			return *m;
	return NULL;
}

/*
 * sqlite_database_problem returns why 'path' cannot be a shard's database
 * file on its face, NULL when it can.  SQLite would happily make an empty
 * name or ":memory:" a private temporary database, which loses the shard's
 * data at every reconnect.
 */
static const char *
sqlite_database_problem(const char *path)
{
	if (path[0] == '\0')
		return "The database file name is empty.";
	if (strcmp(path, ":memory:") == 0)
		return "An in-memory database would lose the shard's data when the connection closes.";
	return NULL;
}

/*
 * sqlite_missing_directory returns a detail naming the directory of 'path'
 * when it does not exist or is not a directory, NULL otherwise.  SQLite
 * would only say "unable to open database file".
 */
static char *
sqlite_missing_directory(const char *path)
{
	const char *slash = strrchr(path, '/');
	char	   *dir;
	struct stat st;

	if (slash == NULL)
		return NULL;			/* relative to the data directory */
	dir = slash == path ? pstrdup("/") : pnstrdup(path, slash - path);

	if (stat(dir, &st) != 0)
	{
		if (errno == ENOENT || errno == ENOTDIR)
			return psprintf("Directory \"%s\" does not exist.", dir);
		return NULL;			/* let SQLite say what is wrong */
	}
	if (!S_ISDIR(st.st_mode))
		return psprintf("\"%s\" is not a directory.", dir);
	return NULL;
}

/*
 * sqlite_connect_error fills *err for a failure while connecting, with
 * SQLSTATE 08006 whatever SQLite said (the caller cannot use the shard
 * either way), and releases the half-open connection.
 */
static void
sqlite_connect_error(SqliteConn *conn, const char *database, int rc,
					 const char *detail, CdRemoteError *err)
{
	char	   *message = psprintf("could not open SQLite database \"%s\"",
								   database);

	if (detail == NULL && conn != NULL && conn->db != NULL)
		detail = psprintf("SQLite reported %s: %s.", sqlite_code_name(rc),
						  sqlite3_errmsg(conn->db));
	else if (detail == NULL)
		detail = psprintf("SQLite reported %s: %s.", sqlite_code_name(rc),
						  sqlite3_errstr(rc));

	AdapterSetError(err, "08006", true, message, detail, NULL);

	if (conn != NULL)
	{
		bool		interrupted = conn->interrupted;

		sqlite3_close_v2(conn->db);
		free(conn);
		if (interrupted)
		{
			CHECK_FOR_INTERRUPTS();
			AdapterSetError(err, "57014", true,
							"canceling statement due to an interrupt",
							NULL, NULL);
		}
	}
}

/*
 * sqlite_apply_journal_mode sets the journal mode and checks that SQLite
 * took it: it silently keeps the old mode when it cannot switch (e.g. to
 * WAL on a file system without shared memory).  Returns an SQLite result
 * code; on failure *detail says why (read before the statement is
 * finalized).
 */
static int
sqlite_apply_journal_mode(SqliteConn *conn, const char *mode, char **detail)
{
	char	   *sql = psprintf("PRAGMA journal_mode = %s", mode);
	sqlite3_stmt *stmt = NULL;
	int			rc;

	rc = sqlite3_prepare_v3(conn->db, sql, -1, 0, &stmt, NULL);
	if (rc == SQLITE_OK && stmt != NULL)
	{
		rc = sqlite3_step(stmt);
		if (rc == SQLITE_ROW)
		{
			const char *got = (const char *) sqlite3_column_text(stmt, 0);

			if (got == NULL || pg_strcasecmp(got, mode) != 0)
			{
				*detail = psprintf("SQLite kept journal_mode \"%s\" instead of \"%s\".",
								   got ? got : "", mode);
				rc = SQLITE_ERROR;
			}
			else
				rc = SQLITE_OK;
		}
		else if (rc == SQLITE_DONE)
			rc = SQLITE_OK;
	}
	if (rc != SQLITE_OK && *detail == NULL)
		*detail = psprintf("SQLite reported %s: %s.", sqlite_code_name(rc),
						   sqlite3_errmsg(conn->db));
	if (stmt != NULL)
		sqlite3_finalize(stmt);
	pfree(sql);
	return rc;
}

/*
 * sqlite_connect opens the shard's database file and prepares the
 * connection: extended result codes, interruptible lock waits and
 * statements, foreign keys, the journal mode, then the sandbox.  It reads the
 * file's header once so that a file that is not a database fails here, as
 * a connection failure, rather than at the first statement.
 */
static void *
sqlite_connect(const CdConnInfo *info, CdRemoteError *err)
{
	const char *database = NULL;
	const char *journal_mode = NULL;
	int			busy_timeout = CD_SQLITE_DEFAULT_BUSY_TIMEOUT;
	const char *problem;
	char	   *detail;
	SqliteConn *conn;
	int			rc;

	for (int i = 0; i < info->noptions; i++)
	{
		const CdConnOption *opt = &info->options[i];

		if (opt->from_user_mapping)
			continue;			/* user and password mean nothing here */
		if (strcmp(opt->keyword, "database") == 0)
			database = opt->value;
		else if (strcmp(opt->keyword, "busy_timeout") == 0)
		{
			if (!sqlite_parse_busy_timeout(opt->value, &busy_timeout))
			{
				AdapterSetError(err, "08006", true,
								psprintf("invalid value for option \"busy_timeout\": \"%s\"",
										 opt->value),
								NULL, NULL);
				return NULL;
			}
		}
		else if (strcmp(opt->keyword, "journal_mode") == 0)
		{
			journal_mode = sqlite_journal_mode(opt->value);
			if (journal_mode == NULL)
			{
				AdapterSetError(err, "08006", true,
								psprintf("invalid value for option \"journal_mode\": \"%s\"",
										 opt->value),
								NULL, NULL);
				return NULL;
			}
		}
	}

	if (database == NULL)
	{
		AdapterSetError(err, "08006", true,
						psprintf("SQLite shard \"%s\" has no \"database\" option",
								 info->shard ? info->shard : "?"),
						NULL, NULL);
		return NULL;
	}
	if ((problem = sqlite_database_problem(database)) != NULL)
	{
		sqlite_connect_error(NULL, database, SQLITE_CANTOPEN, problem, err);
		return NULL;
	}
	if ((detail = sqlite_missing_directory(database)) != NULL)
	{
		sqlite_connect_error(NULL, database, SQLITE_CANTOPEN, detail, err);
		return NULL;
	}

	conn = (SqliteConn *) malloc(sizeof(SqliteConn));
	if (conn == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	memset(conn, 0, sizeof(SqliteConn));
	conn->busy_timeout = busy_timeout;

	rc = sqlite3_open_v2(database, &conn->db,
						 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
						 SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK)
	{
		sqlite_connect_error(conn, database, rc, NULL, err);
		return NULL;
	}

	sqlite3_extended_result_codes(conn->db, 1);
	sqlite3_busy_handler(conn->db, sqlite_busy_handler, conn);
	sqlite3_progress_handler(conn->db, CD_SQLITE_PROGRESS_STEPS,
							 sqlite_progress_handler, conn);

	/* reading the schema cookie reads the header: NOTADB shows here */
	rc = sqlite3_exec(conn->db, "PRAGMA schema_version", NULL, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(conn->db, "PRAGMA foreign_keys = ON",
						  NULL, NULL, NULL);
	detail = NULL;
	if (rc == SQLITE_OK && journal_mode != NULL)
		rc = sqlite_apply_journal_mode(conn, journal_mode, &detail);
	else if (rc == SQLITE_OK)
	{
		/*
		 * Without a journal_mode option: WAL, so that the many backends that
		 * share a shard's file do not block each other's reads and commits.
		 * A file system that cannot do WAL keeps the file's mode.
		 */
		(void) sqlite_apply_journal_mode(conn, "wal", &detail);
		detail = NULL;
	}
	if (rc != SQLITE_OK)
	{
		sqlite_connect_error(conn, database, rc, detail, err);
		return NULL;
	}

	/*
	 * Only now: defensive mode refuses journal_mode = off, which the server
	 * options allow on purpose.  A connection SQLite does not fully
	 * sandbox is not used.
	 */
	{
		const char *step = NULL;

		rc = SqliteSandboxApply(conn->db, &conn->sandbox, &step);
		if (rc != SQLITE_OK)
		{
			sqlite_connect_error(conn, database, rc,
								 psprintf("SQLite refused the sandbox setting %s.", step),
								 err);
			return NULL;
		}
	}

	return conn;
}

/*
 * sqlite_close closes the database and frees the handle.  Statements are
 * always finalized before exec returns, so close_v2 has nothing to defer.
 */
static void
sqlite_close(void *handle)
{
	SqliteConn *conn = (SqliteConn *) handle;

	if (conn == NULL)
		return;
	sqlite3_close_v2(conn->db);
	free(conn);
}

/*
 * sqlite_idle_rollback tells whether 'sql' is a ROLLBACK with no
 * transaction open.  SQLite rolls back by itself after some errors and
 * would then fail the remote layer's ROLLBACK; ROLLBACK of nothing is
 * harmless, so it succeeds instead (PostgreSQL only warns).
 */
static bool
sqlite_idle_rollback(SqliteConn *conn, const char *sql)
{
	return pg_strcasecmp(sql, "ROLLBACK") == 0 &&
		sqlite3_get_autocommit(conn->db) != 0;
}

/*
 * sqlite_emit_placeholder writes $n as ?n, so that SQLite binds parameter
 * number n wherever it appears.
 */
static void
sqlite_emit_placeholder(StringInfo out, int n, void *arg)
{
	appendStringInfo(out, "?%d", n);
}

/*
 * sqlite_tail_is_empty tells whether what follows the first statement is
 * nothing but whitespace, semicolons and comments.
 */
static bool
sqlite_tail_is_empty(const char *p)
{
	while (p != NULL && *p != '\0')
	{
		if (isspace((unsigned char) *p) || *p == ';')
			p++;
		else if (p[0] == '-' && p[1] == '-')
		{
			p = strchr(p, '\n');
		}
		else if (p[0] == '/' && p[1] == '*')
		{
			p = strstr(p + 2, "*/");	/* unterminated: runs to the end */
			if (p != NULL)
				p += 2;
		}
		else
			return false;
	}
	return true;
}

/*
 * sqlite_bind_numeric binds an exact decimal as SQLite would store it if
 * it were typed in the statement: an integer when it is one that fits, a
 * double when that loses nothing (at most 15 significant digits), text
 * otherwise (also NaN and the infinities).
 */
static int
sqlite_bind_numeric(sqlite3_stmt *stmt, int index, const CdParam *p)
{
	char	   *text = pnstrdup(p->str ? p->str : "", p->len);
	const char *s = text;
	bool		has_point = false;
	int			ndigits = 0;
	int			first_nonzero = -1;
	int			last_nonzero = -1;
	int			rc;

	if (*s == '+' || *s == '-')
		s++;
	for (; *s; s++)
	{
		if (*s == '.' && !has_point)
			has_point = true;
		else if (isdigit((unsigned char) *s))
		{
			if (*s != '0')
			{
				if (first_nonzero < 0)
					first_nonzero = ndigits;
				last_nonzero = ndigits;
			}
			ndigits++;
		}
		else
			break;
	}

	if (*s == '\0' && ndigits > 0)
	{
		char	   *end;

		if (!has_point)
		{
			int64		v;

			errno = 0;
			v = strtoi64(text, &end, 10);
			if (errno == 0 && *end == '\0')
			{
				rc = sqlite3_bind_int64(stmt, index, v);
				pfree(text);
				return rc;
			}
		}
		if (first_nonzero < 0 || last_nonzero - first_nonzero + 1 <= 15)
		{
			double		d = strtod(text, &end);

			if (*end == '\0' && isfinite(d))
			{
				rc = sqlite3_bind_double(stmt, index, d);
				pfree(text);
				return rc;
			}
		}
	}

	rc = sqlite3_bind_text(stmt, index, text, p->len, SQLITE_TRANSIENT);
	pfree(text);
	return rc;
}

/*
 * sqlite_bind_param binds one parameter according to its kind.  Data is
 * always copied (SQLITE_TRANSIENT): it need not outlive this call.
 */
static int
sqlite_bind_param(sqlite3_stmt *stmt, int index, const CdParam *p)
{
	const char *str = p->str ? p->str : "";

	switch (p->kind)
	{
		case CD_VALUE_NULL:
			return sqlite3_bind_null(stmt, index);
		case CD_VALUE_BOOL:
			return sqlite3_bind_int(stmt, index, p->bval ? 1 : 0);
		case CD_VALUE_INT:
			return sqlite3_bind_int64(stmt, index, p->ival);
		case CD_VALUE_FLOAT:
			/* SQLite would turn a NaN into NULL; keep it a value */
			if (isnan(p->fval))
				return sqlite3_bind_text(stmt, index, "NaN", 3, SQLITE_STATIC);
			return sqlite3_bind_double(stmt, index, p->fval);
		case CD_VALUE_NUMERIC:
			return sqlite_bind_numeric(stmt, index, p);
		case CD_VALUE_BYTES:
			/* a NULL pointer would bind NULL, not an empty blob */
			if (p->len == 0 || p->str == NULL)
				return sqlite3_bind_zeroblob(stmt, index, 0);
			return sqlite3_bind_blob(stmt, index, p->str, p->len,
									 SQLITE_TRANSIENT);
		case CD_VALUE_TIMESTAMPTZ:
			{
				char	   *text = psprintf("%.*s+00:00", p->len, str);
				int			rc;

				rc = sqlite3_bind_text(stmt, index, text, -1, SQLITE_TRANSIENT);
				pfree(text);
				return rc;
			}
		case CD_VALUE_TEXT:
		case CD_VALUE_JSON:
		case CD_VALUE_DATE:
		case CD_VALUE_TIME:
		case CD_VALUE_TIMESTAMP:
		case CD_VALUE_UUID:
			return sqlite3_bind_text(stmt, index, str, p->len, SQLITE_TRANSIENT);
	}
	elog(ERROR, "unexpected collegedb value kind %d", (int) p->kind);
	return SQLITE_MISUSE;		/* keep compiler quiet */
}

/*
 * sqlite_format_double writes the shortest decimal text that reads back
 * as 'd', in PostgreSQL's float8 input syntax.
 */
static int
sqlite_format_double(double d, char *buf, size_t size)
{
	if (isnan(d))
		return snprintf(buf, size, "NaN");
	if (isinf(d))
		return snprintf(buf, size, d > 0 ? "Infinity" : "-Infinity");
	snprintf(buf, size, "%.15g", d);
	if (strtod(buf, NULL) != d)
		snprintf(buf, size, "%.17g", d);
	return strlen(buf);
}

/*
 * sqlite_column_hint reads a result column's declared type: BOOL/BOOLEAN
 * and JSON/JSONB columns refine what the storage class says.
 */
static SqliteColumnHint
sqlite_column_hint(sqlite3_stmt *stmt, int col)
{
	const char *decl = sqlite3_column_decltype(stmt, col);

	if (decl == NULL)
		return CD_SQLITE_COLUMN_PLAIN;
	if (pg_strcasecmp(decl, "BOOL") == 0 || pg_strcasecmp(decl, "BOOLEAN") == 0)
		return CD_SQLITE_COLUMN_BOOL;
	if (pg_strcasecmp(decl, "JSON") == 0 || pg_strcasecmp(decl, "JSONB") == 0)
		return CD_SQLITE_COLUMN_JSON;
	return CD_SQLITE_COLUMN_PLAIN;
}

/*
 * sqlite_fill_cells turns the current row into cells.  Integer and float
 * text goes to 'numbuf' (CD_SQLITE_NUMBUF bytes per column); text and blobs
 * point into SQLite's own buffers, valid until the next step.
 */
static void
sqlite_fill_cells(sqlite3_stmt *stmt, int ncols, const SqliteColumnHint *hints,
				  CdCell *cells, char *numbuf)
{
	for (int i = 0; i < ncols; i++)
	{
		CdCell	   *cell = &cells[i];
		char	   *buf = numbuf + (Size) i * CD_SQLITE_NUMBUF;

		cell->isnull = false;
		switch (sqlite3_column_type(stmt, i))
		{
			case SQLITE_INTEGER:
				{
					sqlite3_int64 v = sqlite3_column_int64(stmt, i);

					if (hints[i] == CD_SQLITE_COLUMN_BOOL && (v == 0 || v == 1))
					{
						cell->kind = CD_VALUE_BOOL;
						cell->data = v ? "t" : "f";
						cell->len = 1;
					}
					else
					{
						cell->kind = CD_VALUE_INT;
						cell->len = snprintf(buf, CD_SQLITE_NUMBUF, INT64_FORMAT,
											 (int64) v);
						cell->data = buf;
					}
					break;
				}
			case SQLITE_FLOAT:
				cell->kind = CD_VALUE_FLOAT;
				cell->len = sqlite_format_double(sqlite3_column_double(stmt, i),
												 buf, CD_SQLITE_NUMBUF);
				cell->data = buf;
				break;
			case SQLITE_TEXT:
				{
					const unsigned char *text = sqlite3_column_text(stmt, i);

					cell->kind = hints[i] == CD_SQLITE_COLUMN_JSON ?
						CD_VALUE_JSON : CD_VALUE_TEXT;
					cell->data = text ? (const char *) text : "";
					cell->len = sqlite3_column_bytes(stmt, i);
					break;
				}
			case SQLITE_BLOB:
				{
					const void *blob = sqlite3_column_blob(stmt, i);

					cell->kind = CD_VALUE_BYTES;
					cell->data = blob ? (const char *) blob : "";
					cell->len = sqlite3_column_bytes(stmt, i);
					break;
				}
			default:			/* SQLITE_NULL */
				cell->isnull = true;
				cell->kind = CD_VALUE_NULL;
				cell->data = NULL;
				cell->len = 0;
				break;
		}
	}
}

/*
 * sqlite_step_all steps 'stmt' to the end, sending the column names once
 * (when the statement has columns and ran) and every row to 'sink', in a
 * row context reset after each row.  Returns the last step's result code
 * and the row count in *nrows.  May throw (sink callbacks, interrupts); the
 * caller finalizes then.
 */
static int
sqlite_step_all(sqlite3_stmt *stmt, CdRowSink *sink, int64 *nrows)
{
	int			ncols = sqlite3_column_count(stmt);
	bool		columns_sent = false;
	SqliteColumnHint *hints = NULL;
	CdCell	   *cells = NULL;
	char	   *numbuf = NULL;
	MemoryContext row_context = NULL;
	int			rc;

	if (sink != NULL && ncols > 0)
	{
		row_context = AllocSetContextCreate(CurrentMemoryContext,
											"collegedb sqlite row",
											ALLOCSET_DEFAULT_SIZES);
		hints = palloc(sizeof(SqliteColumnHint) * ncols);
		cells = palloc(sizeof(CdCell) * ncols);
		numbuf = palloc((Size) ncols * CD_SQLITE_NUMBUF);
		for (int i = 0; i < ncols; i++)
			hints[i] = sqlite_column_hint(stmt, i);
	}

	*nrows = 0;
	for (;;)
	{
		rc = sqlite3_step(stmt);
		if (rc != SQLITE_ROW && rc != SQLITE_DONE)
			break;

		if (sink != NULL && ncols > 0 && !columns_sent)
		{
			const char **names = palloc(sizeof(char *) * ncols);

			for (int i = 0; i < ncols; i++)
			{
				const char *name = sqlite3_column_name(stmt, i);

				names[i] = name ? name : "?column?";
			}
			sink->columns(sink, ncols, names);
			pfree(names);
			columns_sent = true;
		}
		if (rc == SQLITE_DONE)
			break;

		(*nrows)++;
		if (sink != NULL && ncols > 0)
		{
			sqlite_fill_cells(stmt, ncols, hints, cells, numbuf);
			AdapterDeliverRow(sink, ncols, cells, row_context);
		}
		CHECK_FOR_INTERRUPTS();
	}

	if (hints != NULL)
	{
		pfree(hints);
		pfree(cells);
		pfree(numbuf);
		MemoryContextDelete(row_context);
	}
	return rc;
}

/*
 * sqlite_exec runs the setup commands, then 'sql' with its parameters,
 * streaming rows to 'sink'.  See adapter.h for the contract.
 *
 * The setup commands are collegedb's own; the statement is too only with
 * CD_EXEC_INTERNAL, else the sandbox refuses what a routed statement may
 * not do.  A statement run as a read (CD_EXEC_READ) must be one by
 * SQLite's own parser.  The statement is checked to be exactly one
 * command by SQLite's parser too (the tail it leaves), not by the lexer,
 * because only SQLite knows that the semicolons inside CREATE TRIGGER ...
 * BEGIN ... END do not end the statement.
 */
static bool
sqlite_exec(void *handle, int nsetup, const char *const *setup,
			const char *sql, int nparams, const CdParam *params, int flags,
			CdRowSink *sink, int64 *rows_affected, CdRemoteError *err)
{
	SqliteConn *conn = (SqliteConn *) handle;
	sqlite3_stmt *stmt = NULL;
	const char *tail = NULL;
	CdStatementShape shape;
	StringInfoData buf;
	int			nbound;
	int64		nrows = 0;
	sqlite3_int64 total_before;
	int			rc;

	if (rows_affected)
		*rows_affected = 0;
	conn->interrupted = false;
	SqliteSandboxBegin(&conn->sandbox, true);
	/* before the setup commands: a refusal must leave the transaction as it was */
	if (AdapterTooManyParams(nparams, CD_SQLITE_MAX_VARIABLES, "an SQLite", err))
		return false;

	/*
	 * After SQLite rolled back a transaction on its own, only a ROLLBACK
	 * brings caller and database back in step.  Anything else is refused as
	 * a lost connection, which makes the remote layer give up on it.
	 */
	if (conn->transaction_lost)
	{
		if (pg_strcasecmp(nsetup > 0 ? setup[0] : sql, "ROLLBACK") != 0)
		{
			AdapterSetError(err, "40000", true,
							"SQLite rolled back the open transaction",
							"An earlier failure ended the transaction on the shard.",
							NULL);
			return false;
		}
		conn->transaction_lost = false;
	}

	for (int i = 0; i < nsetup; i++)
	{
		conn->in_transaction = !sqlite3_get_autocommit(conn->db);
		if (sqlite_idle_rollback(conn, setup[i]))
			continue;
		rc = sqlite3_exec(conn->db, setup[i], NULL, NULL, NULL);
		if (rc != SQLITE_OK)
			return sqlite_fail(conn, rc, NULL, err);
	}

	conn->in_transaction = !sqlite3_get_autocommit(conn->db);
	if (sqlite_idle_rollback(conn, sql))
		return true;

	SqliteSandboxBegin(&conn->sandbox, (flags & CD_EXEC_INTERNAL) != 0);

	initStringInfo(&buf);
	shape = LexerScan(sql, &sqlite_lexer_rules, &buf, sqlite_emit_placeholder, NULL);
	if (shape.max_param > nparams)
	{
		AdapterSetError(err, "42P02", false,
						psprintf("there is no parameter $%d", shape.max_param),
						NULL, NULL);
		return false;
	}

	/*
	 * ALTER TABLE ... RENAME TO collegedb_x would slip a table in where
	 * collegedb expects its own; the authorizer sees only the old name.
	 */
	if (!conn->sandbox.internal && strcmp(shape.first_word, "alter") == 0 &&
		shape.names_reserved)
	{
		sqlite_denied("ALTER naming an object collegedb_... (names starting with collegedb_ are collegedb's)",
					  err);
		return false;
	}

	rc = sqlite3_prepare_v3(conn->db, buf.data, buf.len + 1, 0, &stmt, &tail);
	if (rc != SQLITE_OK)
		return sqlite_fail(conn, rc, stmt, err);
	if (stmt == NULL)
	{
		AdapterSetError(err, "42601", false, "empty statement", NULL, NULL);
		return false;
	}
	if (!sqlite_tail_is_empty(tail))
	{
		sqlite3_finalize(stmt);
		AdapterSetError(err, "42601", false,
						"cannot run more than one command in a statement",
						NULL, "Send each command separately.");
		return false;
	}
	if ((flags & CD_EXEC_READ) && !sqlite3_stmt_readonly(stmt))
	{
		sqlite3_finalize(stmt);
		AdapterSetError(err, "25006", false,
						"statement writes, but it was sent to the SQLite shard as a read",
						"SQLite's parser finds that the statement changes the database.",
						NULL);
		return false;
	}

	/* SQLite's own ?, :name or @name parameters count too */
	nbound = sqlite3_bind_parameter_count(stmt);
	if (nbound > nparams)
	{
		sqlite3_finalize(stmt);
		AdapterSetError(err, "42P02", false,
						psprintf("there is no parameter $%d", nbound),
						NULL, NULL);
		return false;
	}
	for (int i = 0; i < nbound; i++)
	{
		rc = sqlite_bind_param(stmt, i + 1, &params[i]);
		if (rc != SQLITE_OK)
			return sqlite_fail(conn, rc, stmt, err);
	}

	total_before = sqlite3_total_changes64(conn->db);

	PG_TRY();
	{
		rc = sqlite_step_all(stmt, sink, &nrows);
	}
	PG_CATCH();
	{
		sqlite3_finalize(stmt);
		PG_RE_THROW();
	}
	PG_END_TRY();

	if (rc != SQLITE_DONE)
		return sqlite_fail(conn, rc, stmt, err);

	/*
	 * A statement with a result (SELECT, PRAGMA, INSERT ... RETURNING)
	 * counts its rows.  Otherwise, sqlite3_changes64 keeps the count of the
	 * last INSERT, UPDATE or DELETE across other statements: DDL must not
	 * report that stale count.
	 */
	if (rows_affected)
	{
		if (sqlite3_column_count(stmt) > 0 || sqlite3_stmt_readonly(stmt))
			*rows_affected = nrows;
		else if (sqlite3_total_changes64(conn->db) == total_before)
			*rows_affected = 0;
		else
			*rows_affected = sqlite3_changes64(conn->db);
	}

	sqlite3_finalize(stmt);
	pfree(buf.data);
	return true;
}

/*
 * sqlite_option_ok tells whether 'keyword' is an option of SQLite shards
 * for 'catalog'.  A user mapping cannot know its server's dialect when it
 * is validated, so user and password are accepted there and ignored.
 */
static bool
sqlite_option_ok(const char *keyword, Oid catalog)
{
	const char *const *list;

	if (catalog == ForeignServerRelationId)
		list = sqlite_server_options;
	else if (catalog == UserMappingRelationId)
		list = sqlite_user_mapping_options;
	else
		return false;

	for (; *list; list++)
		if (strcmp(keyword, *list) == 0)
			return true;
	return false;
}

/*
 * sqlite_valid_options lists the option keywords for 'catalog', for hints.
 */
static char *
sqlite_valid_options(Oid catalog)
{
	const char *const *list;
	StringInfoData buf;

	if (catalog == ForeignServerRelationId)
		list = sqlite_server_options;
	else if (catalog == UserMappingRelationId)
		list = sqlite_user_mapping_options;
	else
		return pstrdup("");

	initStringInfo(&buf);
	for (; *list; list++)
		appendStringInfo(&buf, "%s%s", buf.len > 0 ? ", " : "", *list);
	return buf.data;
}

/*
 * sqlite_check_options validates an SQLite server's options when it is
 * created or altered: known names, sane values, a database file.  It does
 * not look at the file system: the file, even its directory, may be
 * created later.
 */
static void
sqlite_check_options(List *options, Oid catalog)
{
	bool		have_database = false;
	ListCell   *lc;

	foreach(lc, options)
	{
		DefElem    *def = lfirst_node(DefElem, lc);
		const char *value;

		if (!sqlite_option_ok(def->defname, catalog))
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
					 errmsg("invalid option \"%s\" for an SQLite shard",
							def->defname),
					 errhint("Valid options in this context are: %s.",
							 sqlite_valid_options(catalog))));

		if (catalog != ForeignServerRelationId)
			continue;

		value = defGetString(def);
		if (strcmp(def->defname, "database") == 0)
		{
			const char *problem = sqlite_database_problem(value);

			if (problem != NULL)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("invalid value for option \"database\": \"%s\"",
								value),
						 errdetail("%s", problem),
						 errhint("Give the path of the shard's database file.")));
			have_database = true;
		}
		else if (strcmp(def->defname, "busy_timeout") == 0)
		{
			int			ms;

			if (!sqlite_parse_busy_timeout(value, &ms))
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("invalid value for option \"busy_timeout\": \"%s\"",
								value),
						 errdetail("The value must be a whole number of milliseconds, zero or more.")));
		}
		else if (strcmp(def->defname, "journal_mode") == 0)
		{
			if (sqlite_journal_mode(value) == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("invalid value for option \"journal_mode\": \"%s\"",
								value),
						 errhint("Valid values are delete, truncate, persist, memory, wal and off.")));
		}
	}

	if (catalog == ForeignServerRelationId && !have_database)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
				 errmsg("option \"database\" is required for an SQLite shard"),
				 errhint("Give the path of the shard's database file, as in OPTIONS (dialect 'sqlite', database '/var/lib/collegedb/b.db').")));
}

/*
 * sqlite_scan classifies a statement by SQLite's lexical rules.
 */
static CdStatementShape
sqlite_scan(const char *sql)
{
	return LexerScan(sql, &sqlite_lexer_rules, NULL, NULL, NULL);
}

/*
 * sqlite_quote_ident quotes an identifier the SQL-standard way SQLite
 * understands: in double quotes, embedded double quotes doubled.
 */
static char *
sqlite_quote_ident(const char *ident)
{
	return AdapterQuoteIdent(ident, '"');
}

/*
 * What add_shard creates on an SQLite shard: the tombstone table and an
 * index on its key.  Writers are serialized by SQLite's write lock, which
 * a write transaction takes at BEGIN IMMEDIATE.
 */
static const char *const sqlite_shard_ddl[] = {
	"CREATE TABLE IF NOT EXISTS collegedb_tombstones ("
	"table_name TEXT NOT NULL, "
	"shard_key TEXT NOT NULL, "
	"moved_to TEXT NOT NULL, "
	"move_id INTEGER, "
	"moved_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')), "
	"PRIMARY KEY (table_name, shard_key))",
	"CREATE INDEX IF NOT EXISTS collegedb_tombstones_key ON collegedb_tombstones (shard_key)",
	NULL
};

/*
 * The shard-side tables of topology groups (see adapter.h); TEXT compares
 * in byte order (BINARY).
 */
static const char *const sqlite_topology_ddl[] = {
	"CREATE TABLE IF NOT EXISTS collegedb_topology ("
	"group_name TEXT NOT NULL PRIMARY KEY, version INTEGER NOT NULL, snapshot TEXT)",
	"CREATE TABLE IF NOT EXISTS collegedb_topology_state ("
	"group_name TEXT NOT NULL, channel TEXT NOT NULL, version INTEGER NOT NULL, value TEXT, "
	"PRIMARY KEY (group_name, channel))",
	NULL
};

const CdAdapter CdSqliteAdapter = {
	.dialect = CD_DIALECT_SQLITE,
	.name = "sqlite",

	.connect = sqlite_connect,
	.exec = sqlite_exec,
	.close = sqlite_close,

	.scan = sqlite_scan,
	.max_params = CD_SQLITE_MAX_VARIABLES,
	.max_key_length = 0,

	.option_ok = sqlite_option_ok,
	.check_options = sqlite_check_options,
	.valid_options = sqlite_valid_options,

	.sql_begin = "BEGIN",
	.sql_commit = "COMMIT",
	.sql_rollback = "ROLLBACK",
	.sql_savepoint = "SAVEPOINT s%d",
	.sql_release = "RELEASE SAVEPOINT s%d",
	.sql_rollback_to = "ROLLBACK TO SAVEPOINT s%d",

	.quote_ident = sqlite_quote_ident,
	.shard_ddl = sqlite_shard_ddl,
	.sql_begin_write = "BEGIN IMMEDIATE",
	.guard_query = "SELECT moved_to FROM collegedb_tombstones WHERE shard_key = $1 LIMIT 1",
	.lock_key_sql = "SELECT count(*) FROM collegedb_tombstones WHERE shard_key = $1",
	.size_sql = "SELECT page_count * page_size AS size FROM pragma_page_count(), pragma_page_size()",
	.key_match = "%1$s = $%2$d COLLATE BINARY",
	.topology_ddl = sqlite_topology_ddl,
	.topology_publish = AdapterUpsertTopology,
	.topology_put_state = AdapterUpsertTopologyState,
};
