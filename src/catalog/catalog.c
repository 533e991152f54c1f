/*-------------------------------------------------------------------------
 *
 * catalog.c
 *	  Finds collegedb's catalog tables by cached OID, and turns changes to
 *	  them into cache invalidations for every backend.
 *
 * The tables are created by the extension script in schema collegedb.
 * Their OIDs are looked up once and forgotten when any of them gets a
 * relcache invalidation (which DROP EXTENSION sends).  A statement-level
 * trigger on each table (collegedb.invalidate_cache) queues a relcache
 * invalidation of the table when its rows change: every backend sees it at
 * its next statement, this one at its next command, and an aborted change
 * sends nothing.  The caches themselves live beside their readers
 * (shards.c, config.c, router/mapping_cache.c).
 *
 * The tables belong to the role that created the extension, and nobody
 * else holds a privilege on them: roles granted collegedb's functions
 * reach them only through those functions.  Reads by index scan check no
 * privilege; statements through SPI do, so every SPI statement on a
 * catalog table runs between CatalogAccessBegin and CatalogAccessEnd, with
 * the owner's rights and a search_path that only holds pg_catalog (the
 * statements name their tables with the schema; operators and functions
 * must not resolve to the caller's objects while the owner's rights are
 * in force).  Remote work never happens in between: shard connections
 * always use the calling role's user mapping.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "commands/trigger.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "catalog/catalog.h"
#include "catalog/config.h"
#include "collegedb.h"
#include "worker/worker.h"

PG_FUNCTION_INFO_V1(collegedb_invalidate_cache);

static const char *const rel_names[CD_REL_COUNT] = {
	[CD_REL_SHARD] = "shard",
	[CD_REL_CONFIG] = "config",
	[CD_REL_MAPPING] = "mapping",
	[CD_REL_MAPPING_PKEY] = "mapping_pkey",
	[CD_REL_EPOCH] = "epoch",
	[CD_REL_TABLES] = "registered_table",
};

static Oid	rel_oids[CD_REL_COUNT];
static Oid	catalog_owner = InvalidOid;

static void
catalog_relcache_callback(Datum arg, Oid relid)
{
	for (int i = 0; i < CD_REL_COUNT; i++)
	{
		if (relid == InvalidOid || relid == rel_oids[i])
		{
			memset(rel_oids, 0, sizeof(rel_oids));
			catalog_owner = InvalidOid;
			return;
		}
	}
}

/*
 * CatalogInit registers the callback that forgets the cached OIDs.
 */
void
CatalogInit(void)
{
	CacheRegisterRelcacheCallback(catalog_relcache_callback, (Datum) 0);
}

/*
 * CatalogRelid returns the OID of one of collegedb's catalog relations;
 * fails clearly when the extension is not installed in this database.
 */
Oid
CatalogRelid(CdCatalogRel rel)
{
	if (!OidIsValid(rel_oids[rel]))
	{
		Oid			nsp = get_namespace_oid(COLLEGEDB_SCHEMA, true);
		Oid			relid = OidIsValid(nsp) ? get_relname_relid(rel_names[rel], nsp) : InvalidOid;

		if (!OidIsValid(relid))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("extension \"collegedb\" is not installed in this database"),
					 errhint("Run CREATE EXTENSION collegedb.")));
		/* the first use since the cache was reset: is the database served? */
		if (!memcmp(rel_oids, (Oid[CD_REL_COUNT]) {0}, sizeof(rel_oids)))
			LauncherNoticeDatabase();
		rel_oids[rel] = relid;
	}
	return rel_oids[rel];
}

/*
 * CatalogRelidIs says, without any lookup (so it is safe in invalidation
 * callbacks), whether 'relid' is the cached OID of 'rel'; InvalidOid (all
 * relations) always matches.
 */
bool
CatalogRelidIs(CdCatalogRel rel, Oid relid)
{
	return relid == InvalidOid || !OidIsValid(rel_oids[rel]) || relid == rel_oids[rel];
}

/*
 * CatalogReadSnapshot returns a registered snapshot for reading catalog
 * rows: the latest one, so routing follows every committed change (and the
 * current transaction's own) whatever the isolation level.
 */
Snapshot
CatalogReadSnapshot(void)
{
	return RegisterSnapshot(GetLatestSnapshot());
}

void
CatalogReleaseSnapshot(Snapshot snapshot)
{
	UnregisterSnapshot(snapshot);
}

/*
 * CatalogOwner returns the owner of collegedb's catalog tables: the role
 * that created the extension.
 */
Oid
CatalogOwner(void)
{
	if (!OidIsValid(catalog_owner))
	{
		Oid			relid = CatalogRelid(CD_REL_SHARD);
		HeapTuple	tp = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));

		if (!HeapTupleIsValid(tp))
			elog(ERROR, "cache lookup failed for relation %u", relid);
		catalog_owner = ((Form_pg_class) GETSTRUCT(tp))->relowner;
		ReleaseSysCache(tp);
	}
	return catalog_owner;
}

/*
 * CatalogAccessBegin gives the SPI statements that follow the catalog
 * owner's rights, with search_path = pg_catalog, pg_temp, until
 * CatalogAccessEnd.  The owner's rights end with the (sub)transaction if
 * an error comes first.
 */
void
CatalogAccessBegin(CdCatalogAccess *save)
{
	Oid			owner = CatalogOwner();

	GetUserIdAndSecContext(&save->userid, &save->sec_context);
	SetUserIdAndSecContext(owner, save->sec_context |
						   SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	save->nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
}

/*
 * CatalogAccessEnd returns to the caller's rights and search_path.
 */
void
CatalogAccessEnd(const CdCatalogAccess *save)
{
	AtEOXact_GUC(false, save->nestlevel);
	SetUserIdAndSecContext(save->userid, save->sec_context);
}

/*
 * collegedb_invalidate_cache is the statement-level trigger on collegedb's
 * catalog tables: it queues a relcache invalidation of the table.
 */
Datum
collegedb_invalidate_cache(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("collegedb.invalidate_cache() must be called as a trigger")));

	/*
	 * With the argument 'computed', only under computed placement: there the
	 * router caches the absence of an exception, so a new mapping row
	 * matters; under KV placement nobody caches absences.
	 */
	if (trigdata->tg_trigger->tgnargs > 0 &&
		strcmp(trigdata->tg_trigger->tgargs[0], "computed") == 0 &&
		!ConfigGet()->computed)
		return PointerGetDatum(NULL);
	CacheInvalidateRelcache(trigdata->tg_relation);
	return PointerGetDatum(NULL);
}
