/*-------------------------------------------------------------------------
 *
 * sqlite_connect.c
 *	  The SQLite adapter's connections: opening a shard's database file
 *	  with its settings and sandbox, and closing it.
 *
 * Lock waits and long statements stop when PostgreSQL has a cancel or
 * termination pending: the busy and progress handlers installed here only
 * tell SQLite to give up; the error is raised by the caller once every
 * SQLite resource is released, never from inside an SQLite callback.
 *
 * A file that does not exist is created, except on a hot standby of the
 * front: there a missing file means the standby runs on another host than
 * the primary's file, and an empty one would hide the shard's keys.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>
#include <sys/stat.h>

#include <sqlite3.h>

#include "access/xlog.h"
#include "miscadmin.h"
#include "utils/timestamp.h"

#include "adapters/sqlite_internal.h"

/* default for the busy_timeout server option, in milliseconds */
#define CD_SQLITE_DEFAULT_BUSY_TIMEOUT	5000

/* virtual-machine steps between two looks at PostgreSQL's interrupts */
#define CD_SQLITE_PROGRESS_STEPS	1000

static const char *const sqlite_journal_modes[] = {
	"delete", "truncate", "persist", "memory", "wal", "off", NULL
};

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
 * SqliteParseBusyTimeout parses a busy_timeout value: an integer number
 * of milliseconds, zero or more.  False when it is not one.
 */
bool
SqliteParseBusyTimeout(const char *value, int *result)
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
 * SqliteJournalMode returns the canonical (lower-case) spelling of a
 * journal_mode value, NULL if it is not one SQLite knows.  Only these
 * spellings are ever pasted into a PRAGMA.
 */
const char *
SqliteJournalMode(const char *value)
{
	for (const char *const *m = sqlite_journal_modes; *m; m++)
		if (pg_strcasecmp(value, *m) == 0)
			return *m;
	return NULL;
}

/*
 * SqliteDatabaseProblem returns why 'path' cannot be a shard's database
 * file on its face, NULL when it can.  SQLite would happily make an empty
 * name or ":memory:" a private temporary database, which loses the shard's
 * data at every reconnect.
 */
const char *
SqliteDatabaseProblem(const char *path)
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
 * sqlite_missing_on_standby returns a detail when the front is a hot
 * standby and the shard's file is not there: a standby on another host
 * than the primary has no copy of the primary's SQLite files, and creating
 * an empty one would make every key of the shard read as absent.  NULL
 * otherwise (the file is opened, for reads and writes, as on the primary).
 */
static char *
sqlite_missing_on_standby(const char *path)
{
	struct stat st;

	if (!RecoveryInProgress() || stat(path, &st) == 0 || errno != ENOENT)
		return NULL;
	return pstrdup("The front is a hot standby and the file does not exist on this host: a standby uses a SQLite shard only where it sees the primary's file at the same path, and never creates it.");
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
		detail = psprintf("SQLite reported %s: %s.", SqliteResultCodeName(rc),
						  sqlite3_errmsg(conn->db));
	else if (detail == NULL)
		detail = psprintf("SQLite reported %s: %s.", SqliteResultCodeName(rc),
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
		*detail = psprintf("SQLite reported %s: %s.", SqliteResultCodeName(rc),
						   sqlite3_errmsg(conn->db));
	if (stmt != NULL)
		sqlite3_finalize(stmt);
	pfree(sql);
	return rc;
}

/*
 * SqliteConnect opens the shard's database file and prepares the
 * connection: extended result codes, interruptible lock waits and
 * statements, foreign keys, the journal mode, then the sandbox.  It reads the
 * file's header once so that a file that is not a database fails here, as
 * a connection failure, rather than at the first statement.
 */
void *
SqliteConnect(const CdConnInfo *info, CdRemoteError *err)
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
			if (!SqliteParseBusyTimeout(opt->value, &busy_timeout))
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
			journal_mode = SqliteJournalMode(opt->value);
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
	if ((problem = SqliteDatabaseProblem(database)) != NULL)
	{
		sqlite_connect_error(NULL, database, SQLITE_CANTOPEN, problem, err);
		return NULL;
	}
	if ((detail = sqlite_missing_directory(database)) != NULL)
	{
		sqlite_connect_error(NULL, database, SQLITE_CANTOPEN, detail, err);
		return NULL;
	}

	if ((detail = sqlite_missing_on_standby(database)) != NULL)
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
						 SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX |
						 (RecoveryInProgress() ? 0 : SQLITE_OPEN_CREATE), NULL);
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
 * SqliteClose finalizes the cached statements, closes the database and
 * frees the handle.  Every other statement is finalized before exec
 * returns, so close_v2 has nothing to defer.
 */
void
SqliteClose(void *handle)
{
	SqliteConn *conn = (SqliteConn *) handle;

	if (conn == NULL)
		return;
	SqliteStmtCacheClear(&conn->stmts);
	sqlite3_close_v2(conn->db);
	free(conn);
}
