/*-------------------------------------------------------------------------
 *
 * sqlite_errors.c
 *	  The SQLite adapter's errors: result codes mapped to SQLSTATEs, the
 *	  sandbox's refusals, and how a failed call on a connection ends.
 *
 * SQLite says little about a failure: one result code for nearly every
 * compile error, and a message.  This file turns both into SQLSTATE +
 * message + detail + hint (CdRemoteError), copied before any handle is
 * freed, and it is the one place that does.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sqlite3.h>

#include "miscadmin.h"

#include "adapters/sqlite_internal.h"

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

/*
 * SqliteResultCodeName names a result code for an error detail.
 */
const char *
SqliteResultCodeName(int rc)
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
		detail = psprintf("SQLite reported %s.", SqliteResultCodeName(rc));

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
 * SqliteDenied fills *err for something the sandbox refuses: SQLSTATE
 * 42501, naming what.
 */
void
SqliteDenied(const char *what, CdRemoteError *err)
{
	AdapterSetError(err, "42501", false,
					psprintf("SQLite shards do not allow %s", what),
					"collegedb runs statements on SQLite shards in a sandbox.",
					"See the Security section of collegedb's README for what statements may do on SQLite shards.");
}

/*
 * SqliteFail finishes a failed call on an open connection: it fills *err
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
bool
SqliteFail(SqliteConn *conn, int rc, sqlite3_stmt *stmt, CdRemoteError *err)
{
	bool		lost;

	sqlite_set_error(conn->db, rc, err);
	if (conn->sandbox.denied[0] != '\0')
		SqliteDenied(conn->sandbox.denied, err);

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
