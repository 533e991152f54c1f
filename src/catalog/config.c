/*-------------------------------------------------------------------------
 *
 * config.c
 *	  Reads the one row of collegedb.config into a backend-local copy.
 *
 * Settings are written by collegedb.apply_settings() (in the extension
 * script), which ConfigApply runs for collegedb.configure(), and read on
 * every routed statement, so they are cached until the table's trigger
 * invalidates them (see catalog.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "catalog/catalog.h"
#include "catalog/config.h"

/* Attribute numbers of collegedb.config, in the order of the script */
enum
{
	Anum_config_id = 1,
	Anum_config_strategy,
	Anum_config_read_strategy,
	Anum_config_write_strategy,
	Anum_config_placement,
	Anum_config_target_region,
	Anum_config_allocate_on_read,
	Anum_config_hash_mappings,
	Anum_config_max_shard_size,
	Anum_config_size_cache_ttl,
	Anum_config_mapping_cache_ttl,
	Anum_config_eligible,
	Anum_config_migration_concurrency,
	Anum_config_region_prefixed_keys,
	/* added by collegedb--0.1--0.2.sql (issue 14) */
	Anum_config_eligible_owner,
	Natts_config = Anum_config_eligible_owner
};

static const char *const strategy_names[] = {
	[CD_STRATEGY_HASH] = "hash",
	[CD_STRATEGY_ROUND_ROBIN] = "round-robin",
	[CD_STRATEGY_RANDOM] = "random",
	[CD_STRATEGY_LOCATION] = "location",
	[CD_STRATEGY_JUMP] = "jump",
	[CD_STRATEGY_SLOTS] = "slots",
};

static CdConfig config;
static bool config_valid = false;

static void
config_relcache_callback(Datum arg, Oid relid)
{
	if (CatalogRelidIs(CD_REL_CONFIG, relid))
		config_valid = false;
}

/*
 * ConfigInit registers the cache's invalidation callback.
 */
void
ConfigInit(void)
{
	CacheRegisterRelcacheCallback(config_relcache_callback, (Datum) 0);
}

bool
ConfigParseStrategy(const char *name, CdStrategy *strategy)
{
	for (int i = 0; i < lengthof(strategy_names); i++)
	{
		if (strcmp(name, strategy_names[i]) == 0)
		{
			*strategy = (CdStrategy) i;
			return true;
		}
	}
	return false;
}

const char *
ConfigStrategyName(CdStrategy strategy)
{
	return strategy_names[strategy];
}

static int64
interval_ms(Datum d)
{
	Interval   *iv = DatumGetIntervalP(d);

	return iv->time / 1000 + (int64) iv->day * 86400000 +
		(int64) iv->month * 30 * 86400000;
}

static CdStrategy
strategy_of(Datum d)
{
	CdStrategy	s = CD_STRATEGY_HASH;

	(void) ConfigParseStrategy(TextDatumGetCString(d), &s);
	return s;
}

/*
 * load_config reads the settings row; a missing row means the defaults.
 */
static void
load_config(void)
{
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tuple;
	Snapshot	snapshot = CatalogReadSnapshot();

	memset(&config, 0, sizeof(config));
	config.hash_mappings = true;
	config.size_cache_ttl_ms = 30000;
	config.mapping_cache_ttl_ms = 30000;
	config.migration_concurrency = 25;

	rel = table_open(CatalogRelid(CD_REL_CONFIG), AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, snapshot, 0, NULL);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		TupleDesc	desc = RelationGetDescr(rel);
		int			natts = Max(desc->natts, Natts_config);
		Datum	   *v = palloc0(sizeof(Datum) * natts);
		bool	   *n = palloc(sizeof(bool) * natts);

		/* columns a not yet updated table lacks read as null */
		memset(n, true, sizeof(bool) * natts);
		heap_deform_tuple(tuple, desc, v, n);
		config.strategy = strategy_of(v[Anum_config_strategy - 1]);
		config.read_strategy = n[Anum_config_read_strategy - 1] ? config.strategy :
			strategy_of(v[Anum_config_read_strategy - 1]);
		config.write_strategy = n[Anum_config_write_strategy - 1] ? config.strategy :
			strategy_of(v[Anum_config_write_strategy - 1]);
		config.computed = strcmp(TextDatumGetCString(v[Anum_config_placement - 1]), "computed") == 0;
		if (!n[Anum_config_target_region - 1])
			strlcpy(config.target_region,
					TextDatumGetCString(v[Anum_config_target_region - 1]),
					sizeof(config.target_region));
		config.allocate_on_read = DatumGetBool(v[Anum_config_allocate_on_read - 1]);
		config.hash_mappings = DatumGetBool(v[Anum_config_hash_mappings - 1]);
		config.max_shard_size = n[Anum_config_max_shard_size - 1] ? 0 :
			DatumGetInt64(v[Anum_config_max_shard_size - 1]);
		config.size_cache_ttl_ms = interval_ms(v[Anum_config_size_cache_ttl - 1]);
		config.mapping_cache_ttl_ms = interval_ms(v[Anum_config_mapping_cache_ttl - 1]);
		config.eligible = n[Anum_config_eligible - 1] ? InvalidOid :
			DatumGetObjectId(v[Anum_config_eligible - 1]);
		config.migration_concurrency = DatumGetInt32(v[Anum_config_migration_concurrency - 1]);
		config.region_prefixed_keys = DatumGetBool(v[Anum_config_region_prefixed_keys - 1]);
		config.eligible_owner = n[Anum_config_eligible_owner - 1] ? InvalidOid :
			DatumGetObjectId(v[Anum_config_eligible_owner - 1]);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	CatalogReleaseSnapshot(snapshot);
	config_valid = true;
}

/*
 * ConfigGet returns the current settings.
 */
const CdConfig *
ConfigGet(void)
{
	if (!config_valid)
		load_config();
	return &config;
}

/*
 * ConfigApply checks and stores settings: collegedb.apply_settings() with
 * configure()'s 'nargs' arguments (NULL leaves a setting as it is) and the
 * role the predicate runs as.  Returns whether placement switched to
 * computed, which then needs its first epoch.
 */
bool
ConfigApply(int nargs, const Oid *types, const Datum *values, const char *nulls)
{
	StringInfoData sql;
	CdCatalogRows rows;
	bool		isnull;
	Datum		switched;

	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT collegedb.apply_settings(");
	for (int i = 1; i <= nargs; i++)
		appendStringInfo(&sql, "%s$%d", i > 1 ? ", " : "", i);
	appendStringInfoChar(&sql, ')');
	(void) CatalogExec(sql.data, nargs, types, values, nulls, false, &rows);
	switched = CatalogValue(&rows, 0, 1, &isnull);
	return !isnull && DatumGetBool(switched);
}
