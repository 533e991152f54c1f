/*-------------------------------------------------------------------------
 *
 * pg_prepared.c
 *	  The PostgreSQL adapter's prepared statements: a bounded cache, per
 *	  connection, of the statements it has prepared on the shard.
 *
 * A statement sent without a name is parsed, analysed and planned by the
 * shard every time; a named one only once, and after a few executions the
 * shard may keep a generic plan.  So pg.c prepares each statement text
 * with parameters (the texts that repeat: one without parameters often
 * carries its values as literals, as collegedb's own two-phase commands
 * do) the first time it sends it on a connection (PQsendPrepare, in the same
 * pipeline as its first execution: no extra round trip) and executes it
 * by name after that.  An entry is the text and its parameter types (the
 * types are part of what the shard prepared); its name on the shard is
 * collegedb_p<n>, n never reused on the connection.
 *
 * The cache belongs to the handle and dies with it, so a reconnect starts
 * empty, as the new session on the shard does.  It holds at most
 * PG_PREPARED_MAX entries; when it is full it is emptied, and the next
 * Parse goes after PG_DEALLOCATE_OWN_SQL in its pipeline, which drops the
 * statements named collegedb_p<n> and leaves the caller's own.  A routed
 * DISCARD or DEALLOCATE (the caller's own session commands) is never
 * prepared and empties the cache once it ran, with PG_DEALLOCATE_OWN_SQL
 * to follow; pg.c also drops an entry whose execution the shard refused
 * because the statement is gone or its plan's result type changed
 * (SQLSTATE 26000, 0A000).  A caller's statement that names a prepared
 * statement collegedb_... is refused (PgPreparedCheck), so that a
 * caller's PREPARE, EXECUTE or DEALLOCATE never meets the cache's.
 *
 * An entry is 'ready' only once the shard answered its Parse: a pipeline
 * that failed before it leaves the entry unprepared, to be prepared again
 * under a new name.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "utils/memutils.h"

#include "adapters/pg_internal.h"

/*
 * PgPreparedCheck looks at a caller's statement by the shape the remote
 * layer's checks gave it already (AdapterScan remembers the last text it
 * classified, so this is no second scan).  It refuses one that names a
 * prepared statement called collegedb_..., the prefix of the cache's
 * names: EXECUTE collegedb_p1 would run whatever the cache prepared under
 * that name, DEALLOCATE collegedb_p1 drop it behind the cache's back.  Any
 * name a caller could choose can be typed as a quoted identifier, so the
 * prefix is reserved instead (SQLSTATE 42939, as PostgreSQL reserves
 * pg_).  *forgets says whether the statement may drop the session's
 * prepared statements (DISCARD ALL, DEALLOCATE ...).
 */
bool
PgPreparedCheck(const CdAdapter *adapter, const char *sql, bool *forgets,
				CdRemoteError *err)
{
	CdStatementShape shape = AdapterScan(adapter, sql);

	*forgets = strcmp(shape.first_word, "discard") == 0 ||
		strcmp(shape.first_word, "deallocate") == 0;
	if (!shape.statement_name_reserved)
		return true;
	AdapterRefuse(err, "42939",
				  "prepared statement names starting with \"collegedb_\" are reserved",
				  "collegedb prepares its own statements on the shard's connection under such names.");
	return false;
}

/*
 * prepared_hash hashes a statement text and its parameter types.
 */
static uint32
prepared_hash(const char *sql, size_t len, int nparams, const Oid *types)
{
	uint32		h = hash_bytes((const unsigned char *) sql, (int) len);

	if (nparams > 0)
		h = hash_combine(h, hash_bytes((const unsigned char *) types,
									   (int) (sizeof(Oid) * nparams)));
	return h;
}

/*
 * PgPreparedForgetAll empties the cache; with 'deallocate', the next
 * prepare is preceded by PG_DEALLOCATE_OWN_SQL, for statements that may still
 * exist on the shard.
 */
void
PgPreparedForgetAll(PgHandle *handle, bool deallocate)
{
	handle->nprepared = 0;
	if (handle->prepared_context)
		MemoryContextReset(handle->prepared_context);
	if (deallocate)
		handle->deallocate_pending = true;
}

/*
 * PgPreparedForget drops one entry (its statement may still exist on the
 * shard under its name, which is never used again).
 */
void
PgPreparedForget(PgHandle *handle, PgPrepared *entry)
{
	for (int i = 0; i < handle->nprepared; i++)
	{
		if (handle->prepared[i] != entry)
			continue;
		handle->prepared[i] = handle->prepared[--handle->nprepared];
		pfree(entry->sql);
		if (entry->types)
			pfree(entry->types);
		pfree(entry);
		return;
	}
}

/*
 * PgPreparedMakeRoom empties the cache when 'n' more entries would not
 * fit, so that the lookups of one pipeline that follow never empty it
 * under each other's entries.
 */
void
PgPreparedMakeRoom(PgHandle *handle, int n)
{
	if (handle->nprepared + n > PG_PREPARED_MAX)
		PgPreparedForgetAll(handle, true);
}

/*
 * PgPreparedLookup returns the cache entry of 'sql' with 'types', adding
 * one (not ready: pg.c prepares it) when there is none; it
 * takes a new name for one whose Parse never reached the shard.  Emptying
 * a full cache sets deallocate_pending.
 */
PgPrepared *
PgPreparedLookup(PgHandle *handle, const char *sql, int nparams, const Oid *types)
{
	size_t		len = strlen(sql);
	uint32		hash = prepared_hash(sql, len, nparams, types);
	PgPrepared *entry;
	MemoryContext old;

	for (int i = 0; i < handle->nprepared; i++)
	{
		entry = handle->prepared[i];
		if (entry->hash != hash || entry->nparams != nparams ||
			strcmp(entry->sql, sql) != 0 ||
			(nparams > 0 && memcmp(entry->types, types, sizeof(Oid) * nparams) != 0))
			continue;
		if (entry->ready)
			return entry;
		/* the last Parse never reached the shard: a new name */
		entry->number = ++handle->prepared_number;
		return entry;
	}

	if (handle->prepared_context == NULL)
		handle->prepared_context = AllocSetContextCreate(TopMemoryContext,
														 "collegedb pg prepared",
														 ALLOCSET_DEFAULT_SIZES);
	if (handle->nprepared == PG_PREPARED_MAX)
		PgPreparedForgetAll(handle, true);	/* PgPreparedMakeRoom avoids it */

	old = MemoryContextSwitchTo(handle->prepared_context);
	entry = palloc0(sizeof(PgPrepared));
	entry->hash = hash;
	entry->nparams = nparams;
	entry->sql = pnstrdup(sql, len);
	if (nparams > 0)
	{
		entry->types = palloc(sizeof(Oid) * nparams);
		memcpy(entry->types, types, sizeof(Oid) * nparams);
	}
	entry->number = ++handle->prepared_number;
	MemoryContextSwitchTo(old);
	handle->prepared[handle->nprepared++] = entry;
	return entry;
}

/*
 * PgPreparedName writes an entry's name on the shard into 'name'
 * (PG_PREPARED_NAME_LEN bytes).
 */
void
PgPreparedName(const PgPrepared *entry, char *name)
{
	snprintf(name, PG_PREPARED_NAME_LEN, "collegedb_p%d", entry->number);
}

/*
 * PgPreparedFree frees the cache with the handle.
 */
void
PgPreparedFree(PgHandle *handle)
{
	if (handle->prepared_context)
		MemoryContextDelete(handle->prepared_context);
	handle->prepared_context = NULL;
	handle->nprepared = 0;
}
