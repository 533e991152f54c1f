/*-------------------------------------------------------------------------
 *
 * shard_funcs.c
 *	  SQL functions that register shards and change their state:
 *	  add_shard, drop_shard, set_shard_state.
 *
 * Checks come first, with their own SQLSTATEs, so that the catalog's
 * constraints are only a backstop; rows are written through SPI with
 * arguments; the table's trigger makes every backend drop its cached
 * copy.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/array.h"
#include "foreign/foreign.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/jsonb.h"

#include "access/xact.h"
#include "catalog/catalog.h"
#include "catalog/config.h"
#include "catalog/epochs.h"
#include "catalog/shards.h"
#include "catalog/topology.h"
#include "router/router.h"
#include "placement/regions.h"
#include "cd_errcodes.h"
#include "remote/remote.h"
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
 * SqlfuncsCatalogRun runs one catalog statement with arguments, with the
 * catalog owner's rights (an administrator holds none on the tables), and
 * returns the number of rows it processed; with 'first' given, the first
 * column of its first row (copied into the caller's memory context), NULL
 * when there is none.
 */
uint64
SqlfuncsCatalogRun(const char *sql, int nargs, Oid *types, Datum *values,
				   const char *nulls, NullableDatum *first)
{
	int			rc;
	uint64		processed;
	CdCatalogAccess access;

	CatalogAccessBegin(&access);
	SPI_connect();
	rc = SPI_execute_with_args(sql, nargs, types, values, nulls, false, 0);
	if (rc < 0)
		elog(ERROR, "SPI_execute_with_args failed: %s", SPI_result_code_string(rc));
	processed = SPI_processed;
	if (first)
	{
		first->isnull = true;
		first->value = (Datum) 0;
		if (processed > 0 && SPI_tuptable != NULL)
		{
			Form_pg_attribute att = TupleDescAttr(SPI_tuptable->tupdesc, 0);

			first->value = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
										 1, &first->isnull);
			if (!first->isnull)
				first->value = SPI_datumTransfer(first->value, att->attbyval, att->attlen);
		}
	}
	SPI_finish();
	CatalogAccessEnd(&access);
	return processed;
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
	const CdAdapter *adapter;
	Oid			types[5] = {TEXTOID, TEXTOID, FLOAT8OID, TEXTOID, JSONBOID};
	Datum		values[5];
	char		nulls[6] = "     ";

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
				 errhint("A shard server has a dialect option: postgres, sqlite or mysql.")));
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
	adapter = AdapterForDialect(shard.dialect);
	for (const char *const *ddl = adapter->shard_ddl; *ddl; ddl++)
		(void) RemoteExecuteInternal(&shard, *ddl, 0, NULL, NULL, true);
	for (const char *const *ddl = adapter->topology_ddl; *ddl; ddl++)
		(void) RemoteExecuteInternal(&shard, *ddl, 0, NULL, NULL, true);

	values[0] = CStringGetTextDatum(name);
	values[1] = PG_ARGISNULL(1) ? (Datum) 0 : PG_GETARG_DATUM(1);
	nulls[1] = PG_ARGISNULL(1) ? 'n' : ' ';
	values[2] = Float8GetDatum(priority);
	values[3] = PG_ARGISNULL(3) ? (Datum) 0 : PG_GETARG_DATUM(3);
	nulls[3] = PG_ARGISNULL(3) ? 'n' : ' ';
	values[4] = PG_ARGISNULL(4) ? DirectFunctionCall1(jsonb_in, CStringGetDatum("{}")) :
		PG_GETARG_DATUM(4);
	SqlfuncsCatalogRun("INSERT INTO collegedb.shard (name, region, priority, physical_id, tags) "
					   "VALUES ($1, $2, $3, $4, $5)", 5, types, values, nulls, NULL);
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
	Oid			types[1] = {TEXTOID};
	Datum		values[1];

	if (ShardLookupOptional(name) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CD_SHARD_NOT_FOUND),
				 errmsg("shard \"%s\" is not registered", name)));

	values[0] = CStringGetTextDatum(name);
	if (!force &&
		SqlfuncsCatalogRun("SELECT 1 FROM collegedb.mapping WHERE shard = $1 LIMIT 1",
						   1, types, values, NULL, NULL) > 0)
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
	TopologyForgetShard(name);
	SqlfuncsCatalogRun("DELETE FROM collegedb.shard WHERE name = $1", 1, types, values, NULL, NULL);
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
	Oid			types[7] = {TEXTOID, BOOLOID, TEXTOID, JSONBOID, TEXTOID, FLOAT8OID, TEXTOID};
	Datum		values[7];
	char		nulls[8] = "       ";
	CdDrain		drain;

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

	values[0] = CStringGetTextDatum(name);
	for (int i = 1; i < 7; i++)
	{
		values[i] = PG_ARGISNULL(i) ? (Datum) 0 : PG_GETARG_DATUM(i);
		nulls[i] = PG_ARGISNULL(i) ? 'n' : ' ';
	}
	SqlfuncsCatalogRun("UPDATE collegedb.shard SET "
					   "writable = coalesce($2, writable), drain = coalesce($3, drain), "
					   "tags = coalesce($4, tags), region = coalesce($5, region), "
					   "priority = coalesce($6, priority), physical_id = coalesce($7, physical_id) "
					   "WHERE name = $1", 7, types, values, nulls, NULL);
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
	int			epoch = RouterPublishEligibility(&eligible, &published);
	Datum	   *elems = palloc(sizeof(Datum) * Max(list_length(eligible), 1));
	Datum		values[3];
	bool		nulls[3] = {false, false, false};
	int			n = 0;
	ListCell   *lc;

	InitMaterializedSRF(fcinfo, 0);
	foreach(lc, eligible)
		elems[n++] = CStringGetTextDatum(lfirst(lc));
	values[0] = PointerGetDatum(construct_array(elems, n, TEXTOID, -1, false, TYPALIGN_INT));
	values[1] = BoolGetDatum(published);
	values[2] = Int32GetDatum(epoch);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	return (Datum) 0;
}
