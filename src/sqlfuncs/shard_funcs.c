/*-------------------------------------------------------------------------
 *
 * shard_funcs.c
 *	  SQL functions that register shards and change their state:
 *	  add_shard, drop_shard, set_shard_state.
 *
 * Checks come first, with their own SQLSTATEs, so that the catalog's
 * constraints are only a backstop; the rows are written by
 * catalog/shards.c; the table's trigger makes every backend drop its
 * cached copy.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "foreign/foreign.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/jsonb.h"

#include "catalog/catalog.h"
#include "catalog/config.h"
#include "catalog/epochs.h"
#include "catalog/mappings.h"
#include "catalog/shards.h"
#include "catalog/slotmaps.h"
#include "catalog/topology.h"
#include "cd_errcodes.h"
#include "placement/regions.h"
#include "remote/remote.h"
#include "remote/tombstones.h"
#include "router/router.h"
#include "sqlfuncs/sqlfuncs.h"

PG_FUNCTION_INFO_V1(collegedb_add_shard);
PG_FUNCTION_INFO_V1(collegedb_drop_shard);
PG_FUNCTION_INFO_V1(collegedb_set_shard_state);
PG_FUNCTION_INFO_V1(collegedb_publish_eligibility);

/*
 * publish_if_computed publishes a new epoch after a change of the shards,
 * when placement is computed and the eligible set changed.
 */
static void
publish_if_computed(void)
{
	List	   *eligible;
	bool		published;

	CommandCounterIncrement();
	if (ConfigGet()->computed)
		(void) RouterPublishEligibility(&eligible, &published);
}

/*
 * ArgText returns text argument 'n' as a C string, failing with a message
 * naming 'what' when it is NULL.
 */
char *
ArgText(FunctionCallInfo fcinfo, int n, const char *what)
{
	if (PG_ARGISNULL(n))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", what)));
	return text_to_cstring(PG_GETARG_TEXT_PP(n));
}

static void
ensure_valid_priority(double priority)
{
	if (!(priority > 0) || isinf(priority))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("shard priority must be a positive number")));
}

static void
ensure_valid_tags(Jsonb *tags)
{
	if (!JB_ROOT_IS_OBJECT(tags))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("shard tags must be a JSON object")));
}

/*
 * warn_if_cannot_prepare warns when a shard whose dialect has two-phase
 * commit cannot prepare transactions (a PostgreSQL server with
 * max_prepared_transactions = 0): a transaction that writes on it and on
 * another shard will fail to commit.
 */
static void
warn_if_cannot_prepare(const CdShard *shard)
{
	const CdAdapter *adapter = AdapterForDialect(shard->dialect);
	CaptureRowSink found;
	const CdParam *problem;

	if (!adapter->caps.two_phase || adapter->two_phase_sql->check == NULL)
		return;
	CaptureRowSinkInit(&found);
	(void) RemoteExecuteInternal(shard, adapter->two_phase_sql->check, 0, NULL,
								 &found.base, false);
	if (found.rows == NIL)
		return;
	problem = &((CdParam *) linitial(found.rows))[0];
	if (problem->kind == CD_VALUE_NULL)
		return;
	ereport(WARNING,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("shard \"%s\" cannot prepare transactions", shard->name),
			 errdetail_internal("%s", problem->str),
			 errhint("A transaction that writes on this shard and on another one will fail to commit, unless collegedb.commit_protocol is 'sequential'.")));
}

/*
 * collegedb_add_shard registers a collegedb server as a data shard: it
 * connects, creates the shard-side tombstone table and the tables of
 * topology groups (idempotent) inside the current transaction, and records
 * the shard as active.
 */
Datum
collegedb_add_shard(PG_FUNCTION_ARGS)
{
	char	   *name = ArgText(fcinfo, 0, "shard name");
	ForeignServer *server = GetForeignServerByName(name, true);
	double		priority = PG_ARGISNULL(2) ? 1.0 : PG_GETARG_FLOAT8(2);
	bool		is_shard;
	CdShard		shard;

	CatalogEnsureWritable(gettext_noop("cannot add a shard on a hot standby"));
	if (server == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("server \"%s\" does not exist", name),
				 errhint("Create it first: CREATE SERVER \"%s\" FOREIGN DATA WRAPPER collegedb OPTIONS (dialect '...', ...).", name)));

	memset(&shard, 0, sizeof(shard));
	shard.dialect = ShardServerDialect(server->serverid, &is_shard);
	if (!is_shard)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("server \"%s\" is a collegedb router, not a shard", name),
				 errhint("A shard server has a dialect option: %s.",
						 AdapterDialectList("or"))));
	if (strlen(name) >= NAMEDATALEN)
		ereport(ERROR,
				(errcode(ERRCODE_NAME_TOO_LONG),
				 errmsg("shard name \"%s\" is too long", name)));
	if (!PG_ARGISNULL(1))
		EnsureValidRegion(text_to_cstring(PG_GETARG_TEXT_PP(1)));
	ensure_valid_priority(priority);
	if (!PG_ARGISNULL(4))
		ensure_valid_tags(PG_GETARG_JSONB_P(4));
	if (ShardLookupOptional(name) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("shard \"%s\" is already registered", name)));

	strlcpy(shard.name, name, NAMEDATALEN);
	shard.serverid = server->serverid;
	TombstonePrepareShard(&shard);
	/* the topology groups' shard-side tables, as the first delivery would */
	for (const char *const *ddl = AdapterForDialect(shard.dialect)->topology_ddl; *ddl; ddl++)
		(void) RemoteExecuteInternal(&shard, *ddl, 0, NULL, NULL, true);
	/* idempotent: committed at once, so that add_shard of several shards
	 * in one transaction is no multi-shard commit */
	RemoteCommitNow(&shard);
	warn_if_cannot_prepare(&shard);

	ShardInsert(name, PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1)),
				priority, PG_ARGISNULL(3) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(3)),
				PG_ARGISNULL(4) ? NULL : PG_GETARG_JSONB_P(4));
	publish_if_computed();
	PG_RETURN_VOID();
}

/*
 * collegedb_drop_shard unregisters a shard, refusing while keys are mapped
 * to it unless forced.  The shard's data and its foreign server stay as
 * they are.
 */
Datum
collegedb_drop_shard(PG_FUNCTION_ARGS)
{
	char	   *name = ArgText(fcinfo, 0, "shard name");
	bool		force = PG_ARGISNULL(1) ? false : PG_GETARG_BOOL(1);

	CatalogEnsureWritable(gettext_noop("cannot drop a shard on a hot standby"));
	if (ShardLookupOptional(name) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CD_SHARD_NOT_FOUND),
				 errmsg("shard \"%s\" is not registered", name)));

	if (!force && MappingAnyOnShard(name))
		ereport(ERROR,
				(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
				 errmsg("cannot drop shard \"%s\" because keys are mapped to it", name),
				 errhint("Move its keys away first (collegedb.update_mapping or a rebalance), or drop it with force => true; its keys then fail with SHARD_NOT_FOUND.")));
	if (!force && ConfigGet()->computed)
	{
		ListCell   *lc;

		foreach(lc, EpochList())
		{
			CdEpoch    *epoch = lfirst(lc);

			for (int i = 0; i < epoch->nshards; i++)
				if (strcmp(epoch->shards[i], name) == 0)
					ereport(ERROR,
							(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
							 errmsg("cannot drop shard \"%s\" because epoch %d places keys on it",
									name, epoch->number),
							 errhint("Drain it and rebalance its keys away, then drop it with force => true.")));
		}
	}
	if (!force && SlotMapCurrent() != NULL)
	{
		const CdSlotMap *map = SlotMapCurrent();

		for (int i = 0; i < map->nranges; i++)
			if (strcmp(map->ranges[i].shard, name) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
						 errmsg("cannot drop shard \"%s\" because slot map version %d puts %s on it",
								name, map->version,
								SlotSpanText(map->ranges[i].start, map->ranges[i].end)),
						 errhint("Move its slots away with collegedb.move_slot(), or drop it with force => true.")));
	}
	TopologyForgetShard(name);
	ShardDelete(name);
	publish_if_computed();
	PG_RETURN_VOID();
}

/*
 * collegedb_set_shard_state changes the given fields of a shard's state;
 * NULL arguments leave a field as it is.
 */
Datum
collegedb_set_shard_state(PG_FUNCTION_ARGS)
{
	char	   *name = ArgText(fcinfo, 0, "shard name");
	CdShardChange change;
	CdDrain		drain;

	CatalogEnsureWritable(gettext_noop("cannot change a shard's state on a hot standby"));
	if (ShardLookupOptional(name) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CD_SHARD_NOT_FOUND),
				 errmsg("shard \"%s\" is not registered", name)));
	if (!PG_ARGISNULL(2) &&
		!ShardParseDrain(text_to_cstring(PG_GETARG_TEXT_PP(2)), &drain))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid drain state \"%s\"", text_to_cstring(PG_GETARG_TEXT_PP(2))),
				 errhint("Valid drain states are active, draining and retired.")));
	if (!PG_ARGISNULL(3))
		ensure_valid_tags(PG_GETARG_JSONB_P(3));
	if (!PG_ARGISNULL(4))
		EnsureValidRegion(text_to_cstring(PG_GETARG_TEXT_PP(4)));
	if (!PG_ARGISNULL(5))
		ensure_valid_priority(PG_GETARG_FLOAT8(5));

	memset(&change, 0, sizeof(change));
	change.set_writable = !PG_ARGISNULL(1);
	change.writable = change.set_writable && PG_GETARG_BOOL(1);
	change.drain = PG_ARGISNULL(2) ? NULL : ShardDrainName(drain);
	change.tags = PG_ARGISNULL(3) ? NULL : PG_GETARG_JSONB_P(3);
	change.region = PG_ARGISNULL(4) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(4));
	change.set_priority = !PG_ARGISNULL(5);
	change.priority = change.set_priority ? PG_GETARG_FLOAT8(5) : 0;
	change.physical_id = PG_ARGISNULL(6) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(6));
	ShardUpdateState(name, &change);
	publish_if_computed();
	PG_RETURN_VOID();
}

/*
 * collegedb_publish_eligibility re-evaluates which shards are eligible
 * (state, then the predicate with operation "publish") and, under computed
 * placement, publishes a new epoch when the set changed.  Outside computed
 * placement: published false, epoch 0.
 */
Datum
collegedb_publish_eligibility(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	List	   *eligible;
	bool		published;
	int			epoch;
	Datum	   *elems;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};
	int			n = 0;
	ListCell   *lc;

	CatalogEnsureWritable(gettext_noop("cannot publish eligibility on a hot standby"));
	epoch = RouterPublishEligibility(&eligible, &published);
	elems = palloc(sizeof(Datum) * Max(list_length(eligible), 1));

	InitMaterializedSRF(fcinfo, 0);
	foreach(lc, eligible)
		elems[n++] = CStringGetTextDatum(lfirst(lc));
	values[0] = PointerGetDatum(construct_array(elems, n, TEXTOID, -1, false, TYPALIGN_INT));
	values[1] = BoolGetDatum(published);
	values[2] = Int32GetDatum(epoch);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	return (Datum) 0;
}
