/*-------------------------------------------------------------------------
 *
 * stats_funcs.c
 *	  SQL functions about shards' load: shard_stats and database_size.
 *
 * Key counts come from stored mappings only (keys placed by computed
 * placement have none, as seed 001 says); sizes are measured on the shard
 * in its dialect.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"

#include "catalog/mappings.h"
#include "catalog/shards.h"
#include "router/router.h"
#include "sqlfuncs/sqlfuncs.h"

PG_FUNCTION_INFO_V1(collegedb_shard_stats);
PG_FUNCTION_INFO_V1(collegedb_database_size);

typedef struct KeyCount
{
	char		shard[NAMEDATALEN];
	int64		count;
} KeyCount;

/*
 * key_counts returns the number of stored mappings per shard name.
 */
static HTAB *
key_counts(void)
{
	HASHCTL		ctl;
	HTAB	   *counts;
	ListCell   *lc;

	ctl.keysize = NAMEDATALEN;
	ctl.entrysize = sizeof(KeyCount);
	ctl.hcxt = CurrentMemoryContext;
	counts = hash_create("collegedb key counts", 16, &ctl,
						 HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	foreach(lc, MappingCounts())
	{
		CdMappingCount *c = lfirst(lc);
		char		name[NAMEDATALEN];
		KeyCount   *entry;

		strlcpy(name, c->shard, NAMEDATALEN);
		entry = hash_search(counts, name, HASH_ENTER, NULL);
		entry->count = c->count;
	}
	return counts;
}

/*
 * collegedb_shard_stats returns, per registered shard, its stored key
 * count, its size, its state, and whether it takes new keys now (state,
 * eligibility predicate and size limit).
 */
Datum
collegedb_shard_stats(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	HTAB	   *counts;
	List	   *names = NIL;
	ListCell   *lc;

	InitMaterializedSRF(fcinfo, 0);
	counts = key_counts();
	foreach(lc, ShardList())
		names = lappend(names, pstrdup(((CdShard *) lfirst(lc))->name));

	foreach(lc, names)
	{
		const CdShard *shard = ShardLookupOptional(lfirst(lc));
		KeyCount   *count;
		Datum		values[6];
		bool		nulls[6] = {false, false, false, false, false, false};
		int64		size = 0;
		bool		has_server;

		if (shard == NULL)
			continue;
		has_server = OidIsValid(shard->serverid);
		count = hash_search(counts, shard->name, HASH_FIND, NULL);
		values[0] = CStringGetTextDatum(shard->name);
		values[1] = Int64GetDatum(count ? count->count : 0);
		nulls[2] = !has_server || !RouterShardSize(shard, false, &size);
		values[2] = Int64GetDatum(size);
		values[3] = BoolGetDatum(shard->writable);
		values[4] = CStringGetTextDatum(ShardDrainName(shard->drain));
		values[5] = BoolGetDatum(RouterShardTakesKeys(shard) &&
								 RouterShardEligible(shard, "allocate", NULL) &&
								 RouterUnderSizeLimit(shard));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * collegedb_database_size measures one shard's size now, in bytes; NULL
 * when the shard cannot tell.
 */
Datum
collegedb_database_size(PG_FUNCTION_ARGS)
{
	const CdShard *shard = ShardLookup(ArgText(fcinfo, 0, "shard name"));
	int64		size;

	if (!RouterShardSize(shard, true, &size))
		PG_RETURN_NULL();
	PG_RETURN_INT64(size);
}
