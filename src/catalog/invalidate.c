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

#include "catalog/config.h"

PG_FUNCTION_INFO_V1(collegedb_invalidate_cache);

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
