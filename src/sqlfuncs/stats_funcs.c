/*-------------------------------------------------------------------------
 *
 * stats_funcs.c
 *	  SQL functions about shards' load and health: shard_stats,
 *	  database_size and shard_health_list (the view shard_health).
 *
 * Key counts come from stored mappings only (keys placed by computed
 * placement have none, as seed 001 says); sizes are measured on the shard
 * in its dialect, under the connect and statement timeouts in force, and a
 * shard that cannot tell has no size, never an error.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"

#include "catalog/config.h"
#include "catalog/mappings.h"
#include "catalog/shards.h"
#include "collegedb.h"
#include "remote/remote.h"
#include "router/router.h"
#include "sqlfuncs/sqlfuncs.h"

PG_FUNCTION_INFO_V1(collegedb_shard_stats);
PG_FUNCTION_INFO_V1(collegedb_database_size);
PG_FUNCTION_INFO_V1(collegedb_shard_health_list);

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

/*
 * open_connections counts this backend's open connections to 'shard'
 * (one per local user).
 */
static int
open_connections(const CdConnectionStatus *list, int n, const char *shard)
{
	int			count = 0;

	for (int i = 0; i < n; i++)
		if (strcmp(list[i].shard, shard) == 0)
			count++;
	return count;
}

#define HEALTH_COLUMNS 14

/*
 * collegedb_shard_health_list returns one row per registered shard: its
 * size first (measuring it may be the contact that tells whether it is
 * reachable; a failure leaves the size NULL and is recorded), then what
 * the activity table knows of its contacts and statements, this
 * backend's connections to it, its stored key count (NULL under computed
 * placement, where keys have no row) and its state.
 */
Datum
collegedb_shard_health_list(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	bool		computed = ConfigGet()->computed;
	HTAB	   *counts;
	List	   *names = NIL;
	CdConnectionStatus *conns;
	int			nconns;
	ListCell   *lc;

	InitMaterializedSRF(fcinfo, 0);
	counts = computed ? NULL : key_counts();
	foreach(lc, ShardList())
		names = lappend(names, pstrdup(((CdShard *) lfirst(lc))->name));

	foreach(lc, names)
	{
		const CdShard *shard = ShardLookupOptional(lfirst(lc));
		Datum		values[HEALTH_COLUMNS];
		bool		nulls[HEALTH_COLUMNS];
		ShardHealth health;
		KeyCount   *count;
		int64		size = 0;
		bool		known;
		bool		sized;

		if (shard == NULL)
			continue;
		memset(nulls, 0, sizeof(nulls));
		sized = OidIsValid(shard->serverid) && RouterShardSize(shard, false, &size);
		known = ActivityShardHealth(shard->name, &health);
		conns = ConnectionStatusList(&nconns);

		values[0] = CStringGetTextDatum(shard->name);
		values[1] = CStringGetTextDatum(AdapterDialectName(shard->dialect));
		/* reachable: the last contact succeeded; NULL: never tried */
		nulls[2] = !known || (health.last_ok == 0 && health.last_error_at == 0);
		values[2] = BoolGetDatum(health.last_ok > health.last_error_at);
		nulls[3] = health.last_ok == 0;
		values[3] = TimestampTzGetDatum((TimestampTz) health.last_ok);
		nulls[4] = health.last_error_at == 0;
		values[4] = CStringGetTextDatum(health.last_error);
		nulls[5] = health.last_error_at == 0;
		values[5] = TimestampTzGetDatum((TimestampTz) health.last_error_at);
		values[6] = Int32GetDatum(open_connections(conns, nconns, shard->name));
		values[7] = Int64GetDatum((int64) health.statements);
		values[8] = Int64GetDatum((int64) health.errors);
		values[9] = CStringGetTextDatum(ShmemIsPreloaded() ? "server" : "backend");
		nulls[10] = !sized;
		values[10] = Int64GetDatum(size);
		count = counts ? hash_search(counts, shard->name, HASH_FIND, NULL) : NULL;
		nulls[11] = computed;
		values[11] = Int64GetDatum(count ? count->count : 0);
		values[12] = CStringGetTextDatum(ShardDrainName(shard->drain));
		values[13] = BoolGetDatum(shard->writable);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
