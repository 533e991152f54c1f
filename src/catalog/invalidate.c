/*-------------------------------------------------------------------------
 *
 * invalidate.c
 *	  The trigger that turns changes of collegedb's catalog tables into
 *	  cache invalidations for every backend (see catalog.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/trigger.h"
#include "fmgr.h"
#include "utils/inval.h"
#include "utils/rel.h"

#include "catalog/catalog.h"
#include "catalog/config.h"

PG_FUNCTION_INFO_V1(collegedb_invalidate_cache);

/* whether this transaction changed the mapping table or the settings */
static bool mappings_changed = false;

/*
 * CatalogTakeMappingsChanged says whether the transaction changed the
 * mapping table or the settings (through their trigger) since the last
 * call, and forgets it.  The router asks at the end of every transaction.
 */
bool
CatalogTakeMappingsChanged(void)
{
	bool		changed = mappings_changed;

	mappings_changed = false;
	return changed;
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
	 * With the argument 'computed', only under computed placement or the
	 * slots strategy: there the router caches the absence of a mapping (an
	 * exception), so a new mapping row matters; otherwise nobody caches
	 * absences.
	 */
	if (trigdata->tg_trigger->tgnargs > 0 &&
		strcmp(trigdata->tg_trigger->tgargs[0], "computed") == 0 &&
		!ConfigCachesAbsence(ConfigGet()))
		return PointerGetDatum(NULL);
	if (CatalogRelidIs(CD_REL_MAPPING, RelationGetRelid(trigdata->tg_relation)) ||
		CatalogRelidIs(CD_REL_CONFIG, RelationGetRelid(trigdata->tg_relation)))
		mappings_changed = true;
	CacheInvalidateRelcache(trigdata->tg_relation);
	return PointerGetDatum(NULL);
}
