/*-------------------------------------------------------------------------
 *
 * sqlite_stmtcache.c
 *	  The SQLite adapter's per-connection cache of prepared statements.
 *
 * A statement run again on the same connection skips SQLite's parser and
 * code generator: the adapter looks its text up here and, when found,
 * binds and steps the sqlite3_stmt it prepared before.  The cache is
 * bounded (CD_SQLITE_STMT_CACHE_SIZE entries, the least recently used
 * one finalized to make room) and lives in the connection's malloc'd
 * handle; SqliteStmtCacheClear finalizes everything before the
 * connection closes.
 *
 * An entry's key is the statement's text as the caller sent it (before
 * $n became ?n) and whether it runs as one of collegedb's own statements:
 * the sandbox's authorizer decides at prepare time, and again when SQLite
 * prepares a statement anew after a schema change, by that flag, so a
 * statement prepared for collegedb is never stepped for a caller.
 *
 * Only the adapter's exec decides what is worth caching; this file only
 * keeps entries.  Nothing here throws, so the adapter may call it while
 * cleaning up after an error.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"

#include "adapters/sqlite_internal.h"

/*
 * SqliteStmtCacheLookup returns the entry of 'sql' prepared with the
 * sandbox's 'internal' flag, marked as just used, or NULL.
 */
SqliteCachedStmt *
SqliteStmtCacheLookup(SqliteStmtCache *cache, const char *sql, bool internal)
{
	uint32		hash = hash_bytes((const unsigned char *) sql, strlen(sql));

	for (int i = 0; i < CD_SQLITE_STMT_CACHE_SIZE; i++)
	{
		SqliteCachedStmt *entry = &cache->entries[i];

		if (entry->sql != NULL && entry->hash == hash &&
			entry->internal == internal && strcmp(entry->sql, sql) == 0)
		{
			entry->last_use = ++cache->clock;
			return entry;
		}
	}
	return NULL;
}

/*
 * SqliteStmtCacheAdd keeps 'stmt', prepared from 'sql' with the sandbox's
 * 'internal' flag and taking parameters up to $max_param, finalizing the
 * least recently used entry when the cache is full.  Returns the new entry,
 * or NULL when there was no memory for its key: the caller then keeps
 * 'stmt' and finalizes it itself.
 */
SqliteCachedStmt *
SqliteStmtCacheAdd(SqliteStmtCache *cache, const char *sql, bool internal,
				   int max_param, sqlite3_stmt *stmt)
{
	SqliteCachedStmt *victim = &cache->entries[0];
	char	   *key;

	for (int i = 0; i < CD_SQLITE_STMT_CACHE_SIZE; i++)
	{
		SqliteCachedStmt *entry = &cache->entries[i];

		if (entry->sql == NULL)
		{
			victim = entry;
			break;
		}
		if (entry->last_use < victim->last_use)
			victim = entry;
	}

	key = strdup(sql);
	if (key == NULL)
		return NULL;
	if (victim->sql != NULL)
		sqlite3_finalize(SqliteStmtCacheDetach(victim));

	victim->sql = key;
	victim->hash = hash_bytes((const unsigned char *) sql, strlen(sql));
	victim->internal = internal;
	victim->max_param = max_param;
	victim->stmt = stmt;
	victim->last_use = ++cache->clock;
	return victim;
}

/*
 * SqliteStmtCacheRelease makes a cached statement ready for its next use:
 * reset (so it holds no read or write position in the database) and its
 * parameters unbound.  Reset repeats the error of a failed step, which the
 * caller has read by then.
 */
void
SqliteStmtCacheRelease(SqliteCachedStmt *entry)
{
	(void) sqlite3_reset(entry->stmt);
	(void) sqlite3_clear_bindings(entry->stmt);
}

/*
 * SqliteStmtCacheDetach takes an entry out of the cache and returns its
 * statement, which the caller now owns and must finalize.
 */
sqlite3_stmt *
SqliteStmtCacheDetach(SqliteCachedStmt *entry)
{
	sqlite3_stmt *stmt = entry->stmt;

	free(entry->sql);
	memset(entry, 0, sizeof(SqliteCachedStmt));
	return stmt;
}

/*
 * SqliteStmtCacheClear finalizes every cached statement, before the
 * connection closes.
 */
void
SqliteStmtCacheClear(SqliteStmtCache *cache)
{
	for (int i = 0; i < CD_SQLITE_STMT_CACHE_SIZE; i++)
	{
		if (cache->entries[i].sql != NULL)
			sqlite3_finalize(SqliteStmtCacheDetach(&cache->entries[i]));
	}
	cache->clock = 0;
}
