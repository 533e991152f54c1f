/*-------------------------------------------------------------------------
 *
 * config_funcs.c
 *	  collegedb.configure(): the persistent settings.
 *
 * The checks and the update of collegedb.config are the PL/pgSQL function
 * collegedb.apply_settings() (in the extension script), run by ConfigApply
 * with the catalog owner's rights.  configure() itself is C and SECURITY INVOKER
 * for one reason: it must know who calls it.  The eligibility predicate is
 * code its configurer chose, and it runs as that role (see
 * RouterShardEligible); a SECURITY DEFINER function sees only its owner,
 * and the session's outer role is not the caller when another role's
 * SECURITY DEFINER function calls configure().  Here GetUserId() is the
 * role whose rights are in force, which must be allowed to execute the
 * predicate, and which is recorded with it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"

#include "catalog/catalog.h"
#include "catalog/config.h"
#include "cd_errcodes.h"
#include "router/router.h"
#include "sqlfuncs/sqlfuncs.h"

PG_FUNCTION_INFO_V1(collegedb_configure);

/* configure()'s arguments, in order, and apply_settings()'s after them */
#define CONFIGURE_NARGS 13
#define CONFIGURE_ARG_ELIGIBLE 10

static const Oid configure_types[CONFIGURE_NARGS + 1] = {
	TEXTOID,					/* strategy */
	TEXTOID,					/* read_strategy */
	TEXTOID,					/* write_strategy */
	TEXTOID,					/* placement */
	TEXTOID,					/* target_region */
	BOOLOID,					/* allocate_on_read */
	BOOLOID,					/* hash_mappings */
	INT8OID,					/* max_shard_size */
	INTERVALOID,				/* size_cache_ttl */
	INTERVALOID,				/* mapping_cache_ttl */
	REGPROCEDUREOID,			/* eligible */
	INT4OID,					/* migration_concurrency */
	BOOLOID,					/* region_prefixed_keys */
	REGROLEOID					/* eligible_owner (apply_settings only) */
};

/*
 * collegedb_configure checks and stores the given settings (NULL leaves a
 * setting as it is).  A new eligibility predicate must be executable by
 * the calling role, which is recorded as the role it runs as.  Switching
 * to computed placement publishes the first epoch, as the caller.
 */
Datum
collegedb_configure(PG_FUNCTION_ARGS)
{
	Oid			caller = GetUserId();
	Oid			types[CONFIGURE_NARGS + 1];
	Datum		values[CONFIGURE_NARGS + 1];
	char		nulls[CONFIGURE_NARGS + 2];

	CatalogEnsureWritable(gettext_noop("cannot change settings on a hot standby"));
	if (!PG_ARGISNULL(CONFIGURE_ARG_ELIGIBLE))
	{
		Oid			predicate = PG_GETARG_OID(CONFIGURE_ARG_ELIGIBLE);

		if (pg_proc_aclcheck(predicate, caller, ACL_EXECUTE) != ACLCHECK_OK)
			aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_FUNCTION, get_func_name(predicate));
	}

	for (int i = 0; i < CONFIGURE_NARGS; i++)
	{
		types[i] = configure_types[i];
		values[i] = PG_ARGISNULL(i) ? (Datum) 0 : PG_GETARG_DATUM(i);
		nulls[i] = PG_ARGISNULL(i) ? 'n' : ' ';
	}
	types[CONFIGURE_NARGS] = configure_types[CONFIGURE_NARGS];
	values[CONFIGURE_NARGS] = ObjectIdGetDatum(caller);
	nulls[CONFIGURE_NARGS] = PG_ARGISNULL(CONFIGURE_ARG_ELIGIBLE) ? 'n' : ' ';
	nulls[CONFIGURE_NARGS + 1] = '\0';

	/* switching to computed placement publishes epoch 1 (or the next one) */
	if (ConfigApply(CONFIGURE_NARGS + 1, types, values, nulls))
	{
		List	   *eligible;
		bool		published;

		CommandCounterIncrement();
		(void) RouterPublishEligibility(&eligible, &published);
	}
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(collegedb_keep_placements);

/* a column of a collegedb.config row, as text (NULL when null) */
static char *
config_value(HeapTuple row, TupleDesc desc, const char *column)
{
	return SPI_getvalue(row, desc, SPI_fnumber(desc, column));
}

/* the strategy a config row uses for reads or writes */
static char *
config_strategy(HeapTuple row, TupleDesc desc, const char *side)
{
	char	   *s = config_value(row, desc, side);

	return s ? s : config_value(row, desc, "strategy");
}

static bool
leaves(const char *before, const char *after, const char *rule)
{
	return strcmp(before, rule) == 0 && strcmp(after, rule) != 0;
}

/*
 * collegedb_keep_placements is the trigger after an update of
 * collegedb.config: when the update leaves computed placement or the slots
 * strategy (for reads or for writes), rules that place keys without
 * mapping rows, the keys of the registered tables get mappings to where
 * they are (RouterMapKeysInPlace) before anything routes by the new rule.
 */
Datum
collegedb_keep_placements(PG_FUNCTION_ARGS)
{
	TriggerData *trig = (TriggerData *) fcinfo->context;
	TupleDesc	desc;
	HeapTuple	old_row,
				new_row;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_BY_UPDATE(trig->tg_event) ||
		!TRIGGER_FIRED_FOR_ROW(trig->tg_event) || !TRIGGER_FIRED_AFTER(trig->tg_event))
		elog(ERROR, "collegedb_keep_placements must be an AFTER UPDATE row trigger");
	desc = RelationGetDescr(trig->tg_relation);
	old_row = trig->tg_trigtuple;
	new_row = trig->tg_newtuple;

	if (!leaves(config_value(old_row, desc, "placement"),
				config_value(new_row, desc, "placement"), "computed") &&
		!leaves(config_strategy(old_row, desc, "read_strategy"),
				config_strategy(new_row, desc, "read_strategy"), "slots") &&
		!leaves(config_strategy(old_row, desc, "write_strategy"),
				config_strategy(new_row, desc, "write_strategy"), "slots"))
		return PointerGetDatum(NULL);

	/* the mappings are written in the stored form the settings had */
	if (strcmp(config_value(old_row, desc, "hash_mappings"),
			   config_value(new_row, desc, "hash_mappings")) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot change hash_mappings while leaving computed placement or the slots strategy"),
				 errhint("Change hash_mappings in a configure() call of its own.")));
	(void) RouterMapKeysInPlace();
	return PointerGetDatum(NULL);
}
