/*-------------------------------------------------------------------------
 *
 * shards.c
 *	  Reads the catalog table collegedb.shard into a backend-local cache.
 *
 * The routing path looks shards up by name on every statement, so the
 * table is read once and kept in "collegedb shard cache" under
 * CacheMemoryContext.  A change to the table invalidates it in every
 * backend (see catalog.c); so does a change of a foreign server (ALTER
 * SERVER ... OPTIONS, DROP SERVER), since a shard's dialect lives in the
 * server's options.
 *
 * Writes to the table are here too (ShardInsert, ShardDelete,
 * ShardUpdateState), through CatalogExec; the SQL functions of
 * sqlfuncs/shard_funcs.c check their arguments and call them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "catalog/pg_foreign_server.h"
#include "commands/defrem.h"
#include "foreign/foreign.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "catalog/catalog.h"
#include "catalog/shards.h"
#include "cd_errcodes.h"
#include "collegedb.h"

static MemoryContext shard_cache_context = NULL;
static List *shard_cache = NIL;	/* of CdShard *, sorted by name */
static bool shard_cache_valid = false;

/* collegedb.shard_number, read with the shards: the name of each number */
static char **number_names = NULL;	/* [0 .. max_number], NULL: unused */
static int	max_number = 0;

static void shard_server_callback(Datum arg, int cacheid, uint32 hashvalue);

/*
 * ShardCatalogInit registers the invalidation callbacks of the cache.
 */
void
ShardCatalogInit(void)
{
	CatalogCacheRegister(CD_REL_SHARD, &shard_cache_valid);
	CatalogCacheRegister(CD_REL_SHARD_NUMBER, &shard_cache_valid);
	CacheRegisterSyscacheCallback(FOREIGNSERVEROID, shard_server_callback, (Datum) 0);
}

static void
shard_server_callback(Datum arg, int cacheid, uint32 hashvalue)
{
	shard_cache_valid = false;
}

/*
 * ShardServerDialect returns the dialect of a collegedb foreign server;
 * *is_shard is false for a server without a 'dialect' option (the router),
 * and then the result means nothing.
 * The server must belong to the collegedb wrapper.
 */
CdDialect
ShardServerDialect(Oid serverid, bool *is_shard)
{
	ForeignServer *server = GetForeignServer(serverid);
	ForeignDataWrapper *fdw = GetForeignDataWrapper(server->fdwid);
	ListCell   *lc;

	if (strcmp(fdw->fdwname, COLLEGEDB_FDW_NAME) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("server \"%s\" is not a collegedb server", server->servername),
				 errdetail("It uses foreign-data wrapper \"%s\".", fdw->fdwname),
				 errhint("Create the shard with CREATE SERVER ... FOREIGN DATA WRAPPER collegedb OPTIONS (dialect '...').")));

	foreach(lc, server->options)
	{
		DefElem    *def = lfirst(lc);
		CdDialect	dialect;

		if (strcmp(def->defname, "dialect") == 0)
		{
			/* the validator admitted it, so it parses */
			if (!AdapterParseDialect(defGetString(def), &dialect))
				elog(ERROR, "server \"%s\" has an invalid dialect", server->servername);
			*is_shard = true;
			return dialect;
		}
	}
	*is_shard = false;
	return 0;
}

static int
shard_name_cmp(const ListCell *a, const ListCell *b)
{
	const CdShard *sa = lfirst(a);
	const CdShard *sb = lfirst(b);

	return strcmp(sa->name, sb->name);
}

/*
 * load_numbers reads collegedb.shard_number into the cache's context.
 */
static void
load_numbers(Snapshot snapshot)
{
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tuple;
	MemoryContext old = MemoryContextSwitchTo(shard_cache_context);
	int			size = 16;

	number_names = palloc0(sizeof(char *) * size);
	max_number = 0;
	rel = table_open(CatalogRelid(CD_REL_SHARD_NUMBER), AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, snapshot, 0, NULL);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		bool		isnull;
		int			number = DatumGetInt16(heap_getattr(tuple, 1, RelationGetDescr(rel), &isnull));
		Datum		name = heap_getattr(tuple, 2, RelationGetDescr(rel), &isnull);

		if (number <= 0)
			continue;
		if (number >= size)
		{
			int			grown = Max(size * 2, number + 1);

			number_names = repalloc(number_names, sizeof(char *) * grown);
			memset(number_names + size, 0, sizeof(char *) * (grown - size));
			size = grown;
		}
		number_names[number] = TextDatumGetCString(name);
		max_number = Max(max_number, number);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	MemoryContextSwitchTo(old);
}

/*
 * load_shards reads collegedb.shard into the cache.
 */
static void
load_shards(void)
{
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tuple;
	MemoryContext old;
	Snapshot	snapshot;

	/*
	 * The shards handed out before stay valid until the end of the
	 * transaction: callers hold them across statements that may process
	 * an invalidation (a mover's step, a fan-out).
	 */
	if (shard_cache_context != NULL)
		MemoryContextSetParent(shard_cache_context, TopTransactionContext);
	shard_cache_context = AllocSetContextCreate(CacheMemoryContext,
												"collegedb shard cache",
												ALLOCSET_SMALL_SIZES);
	shard_cache = NIL;

	snapshot = CatalogReadSnapshot();
	rel = table_open(CatalogRelid(CD_REL_SHARD), AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, snapshot, 0, NULL);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		Datum		values[Natts_shard];
		bool		nulls[Natts_shard];
		CdShard    *shard;
		ForeignServer *server;
		char	   *name;

		heap_deform_tuple(tuple, RelationGetDescr(rel), values, nulls);
		name = TextDatumGetCString(values[Anum_shard_name - 1]);
		server = GetForeignServerByName(name, true);

		old = MemoryContextSwitchTo(shard_cache_context);
		shard = palloc0(sizeof(CdShard));
		strlcpy(shard->name, name, NAMEDATALEN);
		shard->serverid = InvalidOid;
		if (server)
		{
			bool		is_shard;
			CdDialect	dialect = ShardServerDialect(server->serverid, &is_shard);

			if (is_shard)
			{
				shard->serverid = server->serverid;
				shard->dialect = dialect;
			}
		}
		shard->physical_id = nulls[Anum_shard_physical_id - 1] ? NULL :
			TextDatumGetCString(values[Anum_shard_physical_id - 1]);
		shard->writable = DatumGetBool(values[Anum_shard_writable - 1]);
		(void) ShardParseDrain(TextDatumGetCString(values[Anum_shard_drain - 1]),
							   &shard->drain);
		shard->tags = DatumGetJsonbPCopy(values[Anum_shard_tags - 1]);
		shard->region = nulls[Anum_shard_region - 1] ? NULL :
			TextDatumGetCString(values[Anum_shard_region - 1]);
		shard->priority = DatumGetFloat8(values[Anum_shard_priority - 1]);
		shard_cache = lappend(shard_cache, shard);
		MemoryContextSwitchTo(old);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	load_numbers(snapshot);
	CatalogReleaseSnapshot(snapshot);

	list_sort(shard_cache, shard_name_cmp);
	shard_cache_valid = true;
}

/*
 * ShardList returns every registered shard, sorted by name (C order).  The
 * list belongs to the cache: do not modify it, and do not keep it across
 * commands.
 */
List *
ShardList(void)
{
	if (!shard_cache_valid)
		load_shards();
	return shard_cache;
}

/*
 * ShardListNonEmpty is ShardList for a caller that needs a shard: none
 * registered is NO_SHARDS.
 */
List *
ShardListNonEmpty(void)
{
	List	   *all = ShardList();

	if (all == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_CD_NO_SHARDS),
				 errmsg("no shards are registered"),
				 errhint("Register one with collegedb.add_shard().")));
	return all;
}

/*
 * ShardReadSet returns the shards a read reaches: every registered shard
 * that still has its server (active, draining and retired alike), in name
 * order, as a palloc'd array.
 */
const CdShard **
ShardReadSet(int *count)
{
	List	   *all = ShardList();
	const CdShard **out = palloc(sizeof(CdShard *) * Max(list_length(all), 1));
	int			n = 0;
	ListCell   *lc;

	foreach(lc, all)
	{
		const CdShard *shard = lfirst(lc);

		if (OidIsValid(shard->serverid))
			out[n++] = shard;
	}
	*count = n;
	return out;
}

/*
 * ShardNumber returns the number of shard name 'name' in the mapping store
 * (see collegedb.shard_number); a name never registered has none, which
 * is an internal error here: callers pass registered shards.
 */
int16
ShardNumber(const char *name)
{
	if (!shard_cache_valid)
		load_shards();
	for (int i = 1; i <= max_number; i++)
		if (number_names[i] && strcmp(number_names[i], name) == 0)
			return (int16) i;
	elog(ERROR, "shard \"%s\" has no number", name);
	return 0;					/* keep compiler quiet */
}

/*
 * ShardNumberName returns the shard name that 'number' stands for, or NULL
 * for a number never given out.  The string belongs to the cache (see
 * ShardList).
 */
const char *
ShardNumberName(int number)
{
	if (!shard_cache_valid)
		load_shards();
	return number > 0 && number <= max_number ? number_names[number] : NULL;
}

/*
 * ShardLookupOptional returns the registered shard 'name', or NULL.
 */
const CdShard *
ShardLookupOptional(const char *name)
{
	ListCell   *lc;

	foreach(lc, ShardList())
	{
		CdShard    *shard = lfirst(lc);

		if (strcmp(shard->name, name) == 0)
			return shard;
	}
	return NULL;
}

/*
 * ShardLookup returns the registered shard 'name', whose server must still
 * exist; SHARD_NOT_FOUND otherwise.
 */
const CdShard *
ShardLookup(const char *name)
{
	const CdShard *shard = ShardLookupOptional(name);

	if (shard == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CD_SHARD_NOT_FOUND),
				 errmsg("shard \"%s\" is not registered", name),
				 errhint("Register a collegedb server with collegedb.add_shard().")));
	if (!OidIsValid(shard->serverid))
		ereport(ERROR,
				(errcode(ERRCODE_CD_SHARD_NOT_FOUND),
				 errmsg("shard \"%s\" has no collegedb server any more", name),
				 errdetail("The foreign server was dropped or lost its dialect option."),
				 errhint("Recreate the server, or remove the shard with collegedb.drop_shard('%s', force => true).", name)));
	return shard;
}

/*
 * ShardParseDrain maps a drain state name to its enum.
 */
bool
ShardParseDrain(const char *name, CdDrain *drain)
{
	if (strcmp(name, "active") == 0)
		*drain = CD_DRAIN_ACTIVE;
	else if (strcmp(name, "draining") == 0)
		*drain = CD_DRAIN_DRAINING;
	else if (strcmp(name, "retired") == 0)
		*drain = CD_DRAIN_RETIRED;
	else
		return false;
	return true;
}

const char *
ShardDrainName(CdDrain drain)
{
	switch (drain)
	{
		case CD_DRAIN_ACTIVE:
			return "active";
		case CD_DRAIN_DRAINING:
			return "draining";
		case CD_DRAIN_RETIRED:
			return "retired";
	}
	return "active";
}

/*
 * ShardInsert registers shard 'name' (its server exists), active and
 * writable; NULL 'region', 'physical_id' and 'tags' leave them unset
 * (tags: {}).
 */
void
ShardInsert(const char *name, const char *region, double priority,
			const char *physical_id, Jsonb *tags)
{
	Oid			types[5] = {TEXTOID, TEXTOID, FLOAT8OID, TEXTOID, JSONBOID};
	Datum		values[5];
	char		nulls[6] = "     ";

	values[0] = CStringGetTextDatum(name);
	values[1] = region ? CStringGetTextDatum(region) : (Datum) 0;
	nulls[1] = region ? ' ' : 'n';
	values[2] = Float8GetDatum(priority);
	values[3] = physical_id ? CStringGetTextDatum(physical_id) : (Datum) 0;
	nulls[3] = physical_id ? ' ' : 'n';
	values[4] = tags ? JsonbPGetDatum(tags) :
		DirectFunctionCall1(jsonb_in, CStringGetDatum("{}"));
	(void) CatalogExec("INSERT INTO collegedb.shard (name, region, priority, physical_id, tags) "
					   "VALUES ($1, $2, $3, $4, $5)", 5, types, values, nulls, false, NULL);

	/*
	 * A new name gets the next number; the lock makes concurrent additions
	 * take turns, and a name registered before keeps its number.
	 */
	if (CatalogExecTexts(NULL, "SELECT 1 FROM collegedb.shard_number WHERE name = $1",
						 1, &name, false, NULL) == 0)
	{
		(void) CatalogExec("LOCK TABLE collegedb.shard_number IN SHARE ROW EXCLUSIVE MODE",
						   0, NULL, NULL, NULL, false, NULL);
		(void) CatalogExecTexts(NULL, "INSERT INTO collegedb.shard_number (number, name) "
								"SELECT coalesce(max(number), 0) + 1, $1 FROM collegedb.shard_number "
								"ON CONFLICT (name) DO NOTHING",
								1, &name, false, NULL);
	}
}

/*
 * ShardDelete unregisters shard 'name'.
 */
void
ShardDelete(const char *name)
{
	(void) CatalogExecTexts(NULL, "DELETE FROM collegedb.shard WHERE name = $1",
							1, &name, false, NULL);
}

/*
 * ShardUpdateState changes the fields of shard 'name''s state that
 * 'change' sets (see CdShardChange).
 */
void
ShardUpdateState(const char *name, const CdShardChange *change)
{
	Oid			types[7] = {TEXTOID, BOOLOID, TEXTOID, JSONBOID, TEXTOID, FLOAT8OID, TEXTOID};
	Datum		values[7];
	char		nulls[8] = "       ";

	values[0] = CStringGetTextDatum(name);
	values[1] = BoolGetDatum(change->writable);
	nulls[1] = change->set_writable ? ' ' : 'n';
	values[2] = change->drain ? CStringGetTextDatum(change->drain) : (Datum) 0;
	nulls[2] = change->drain ? ' ' : 'n';
	values[3] = change->tags ? JsonbPGetDatum(change->tags) : (Datum) 0;
	nulls[3] = change->tags ? ' ' : 'n';
	values[4] = change->region ? CStringGetTextDatum(change->region) : (Datum) 0;
	nulls[4] = change->region ? ' ' : 'n';
	values[5] = Float8GetDatum(change->priority);
	nulls[5] = change->set_priority ? ' ' : 'n';
	values[6] = change->physical_id ? CStringGetTextDatum(change->physical_id) : (Datum) 0;
	nulls[6] = change->physical_id ? ' ' : 'n';
	(void) CatalogExec("UPDATE collegedb.shard SET "
					   "writable = coalesce($2, writable), drain = coalesce($3, drain), "
					   "tags = coalesce($4, tags), region = coalesce($5, region), "
					   "priority = coalesce($6, priority), physical_id = coalesce($7, physical_id) "
					   "WHERE name = $1", 7, types, values, nulls, false, NULL);
}
