/*-------------------------------------------------------------------------
 *
 * sqlite_internal.h
 *	  What the SQLite adapter's files share: the connection handle and the
 *	  functions of sqlite_connect.c, sqlite_errors.c, sqlite_values.c,
 *	  sqlite_stmtcache.c and sqlite_options.c.  Only those files and
 *	  sqlite.c include it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_SQLITE_INTERNAL_H
#define COLLEGEDB_SQLITE_INTERNAL_H

#include "postgres.h"

#include <sqlite3.h>

#include "datatype/timestamp.h"
#include "nodes/pg_list.h"

#include "adapters/adapter.h"
#include "adapters/sqlite_sandbox.h"

/* how many prepared statements one connection keeps (sqlite_stmtcache.c) */
#define CD_SQLITE_STMT_CACHE_SIZE	64

/* room for the text of one integer or float cell */
#define CD_SQLITE_NUMBUF		32

/*
 * SqliteCachedStmt is one prepared statement kept for reuse: 'sql' (the
 * caller's text, malloc'd; NULL for a free slot) and the sandbox's
 * 'internal' flag are its key.
 */
typedef struct SqliteCachedStmt
{
	char	   *sql;
	uint32		hash;			/* of sql */
	bool		internal;
	int			max_param;		/* the highest $n in sql */
	uint64		last_use;		/* the cache's clock when last used */
	sqlite3_stmt *stmt;
} SqliteCachedStmt;

typedef struct SqliteStmtCache
{
	SqliteCachedStmt entries[CD_SQLITE_STMT_CACHE_SIZE];
	uint64		clock;
} SqliteStmtCache;

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
	SqliteStmtCache stmts;		/* statements prepared for reuse */
} SqliteConn;

/* what a result column's declared type adds to its values' storage class */
typedef enum SqliteColumnHint
{
	CD_SQLITE_COLUMN_PLAIN = 0,
	CD_SQLITE_COLUMN_BOOL,
	CD_SQLITE_COLUMN_JSON
} SqliteColumnHint;

/* sqlite_connect.c */
extern void *SqliteConnect(const CdConnInfo *info, CdRemoteError *err);
extern void SqliteClose(void *handle);
extern bool SqliteParseBusyTimeout(const char *value, int *result);
extern const char *SqliteJournalMode(const char *value);
extern const char *SqliteDatabaseProblem(const char *path);

/* sqlite_errors.c */
extern const char *SqliteResultCodeName(int rc);
extern void SqliteDenied(const char *what, CdRemoteError *err);
extern bool SqliteFail(SqliteConn *conn, int rc, sqlite3_stmt *stmt, CdRemoteError *err);

/* sqlite_values.c */
extern int	SqliteBindParam(sqlite3_stmt *stmt, int index, const CdParam *p);
extern SqliteColumnHint SqliteReadColumnHint(sqlite3_stmt *stmt, int col);
extern void SqliteFillCells(sqlite3_stmt *stmt, int ncols, const SqliteColumnHint *hints,
							CdCell *cells, char *numbuf);

/* sqlite_stmtcache.c */
extern SqliteCachedStmt *SqliteStmtCacheLookup(SqliteStmtCache *cache, const char *sql,
											   bool internal);
extern SqliteCachedStmt *SqliteStmtCacheAdd(SqliteStmtCache *cache, const char *sql,
											bool internal, int max_param, sqlite3_stmt *stmt);
extern void SqliteStmtCacheRelease(SqliteCachedStmt *entry);
extern sqlite3_stmt *SqliteStmtCacheDetach(SqliteCachedStmt *entry);
extern void SqliteStmtCacheClear(SqliteStmtCache *cache);

/* sqlite_options.c */
extern bool SqliteOptionOk(const char *keyword, Oid catalog);
extern void SqliteCheckOptions(List *options, Oid catalog);
extern char *SqliteValidOptions(Oid catalog);

#endif							/* COLLEGEDB_SQLITE_INTERNAL_H */
