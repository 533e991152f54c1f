/*-------------------------------------------------------------------------
 *
 * route_funcs.c
 *	  SQL functions that route a keyed statement: run, all, all_json,
 *	  first, the lookup-key reads, and the functions that explain a
 *	  routing decision (shard_for_key, route, mapping_key, cache_stats).
 *
 * Thin wrappers: the router picks the shard, the remote layer runs the
 * statement.  A statement is a write unless every dialect of the
 * registered shards proves it reads only (see RemoteStatementWrites: the
 * key's shard, or one its tombstones lead to, may speak any of them); a
 * write of an unmapped key saves its mapping in the current transaction.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "funcapi.h"
#include "nodes/plannodes.h"
#include "tcop/pquery.h"
#include "utils/portal.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/uuid.h"
#include "common/sha2.h"

#include "catalog/mappings.h"
#include "catalog/tables.h"
#include "remote/fanout.h"
#include "remote/remote.h"
#include "router/router.h"
#include "router/shared_cache.h"
#include "sqlfuncs/sqlfuncs.h"

PG_FUNCTION_INFO_V1(collegedb_run);
PG_FUNCTION_INFO_V1(collegedb_all);
PG_FUNCTION_INFO_V1(collegedb_all_json);
PG_FUNCTION_INFO_V1(collegedb_first);
PG_FUNCTION_INFO_V1(collegedb_first_by_lookup_key);
PG_FUNCTION_INFO_V1(collegedb_all_by_lookup_key);
PG_FUNCTION_INFO_V1(collegedb_shard_for_key);
PG_FUNCTION_INFO_V1(collegedb_route);
PG_FUNCTION_INFO_V1(collegedb_mapping_key);
PG_FUNCTION_INFO_V1(collegedb_mapping_id);
PG_FUNCTION_INFO_V1(collegedb_cache_stats);

/*
 * A routed call: the key, the statement and its parameters.
 */
typedef struct RoutedCall
{
	text	   *key;
	char	   *sql;
	bool		is_write;
	int			nparams;
	CdParam    *params;
} RoutedCall;

/*
 * routed_call reads the common arguments.
 */
static RoutedCall
routed_call(FunctionCallInfo fcinfo)
{
	RoutedCall	call;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("key must not be null")));
	call.key = PG_GETARG_TEXT_PP(0);
	call.sql = ArgText(fcinfo, 1, "statement");
	call.is_write = RemoteStatementWrites(NULL, 0, call.sql);
	call.params = ValuesFromVariadic(fcinfo, 2, &call.nparams);
	return call;
}

/*
 * call_is_statement says whether this call is the whole front statement:
 * the portal running is one SELECT without FROM, WHERE or subplans whose
 * only output column is this very call, with constants and parameters as
 * its arguments, and not a holdable cursor (run at commit).  Nothing of
 * the statement then runs after the call returns but sending its one
 * value.
 */
static bool
call_is_statement(FunctionCallInfo fcinfo)
{
	Portal		portal = ActivePortal;
	PlannedStmt *stmt;
	Plan	   *plan;
	TargetEntry *tle;
	ListCell   *lc;

	if (portal == NULL || list_length(portal->stmts) != 1 ||
		(portal->cursorOptions & CURSOR_OPT_HOLD) || fcinfo->flinfo->fn_expr == NULL)
		return false;
	stmt = linitial(portal->stmts);
	if (!IsA(stmt, PlannedStmt) || stmt->commandType != CMD_SELECT ||
		stmt->utilityStmt != NULL || stmt->hasModifyingCTE || stmt->subplans != NIL)
		return false;
	plan = stmt->planTree;
	if (plan == NULL || !IsA(plan, Result) || plan->lefttree != NULL ||
		plan->qual != NIL || plan->initPlan != NIL ||
		((Result *) plan)->resconstantqual != NULL ||
		list_length(plan->targetlist) != 1)
		return false;
	tle = linitial_node(TargetEntry, plan->targetlist);
	if ((Node *) tle->expr != fcinfo->flinfo->fn_expr || !IsA(tle->expr, FuncExpr))
		return false;
	foreach(lc, ((FuncExpr *) tle->expr)->args)
	{
		Node	   *arg = lfirst(lc);

		if (!IsA(arg, Const) && !(IsA(arg, Param) && ((Param *) arg)->paramkind == PARAM_EXTERN))
			return false;
	}
	return true;
}

/*
 * run_routed routes and runs a call, streaming rows to 'sink'.  A write
 * that is the whole front statement may commit on its shard in one round
 * trip (RemoteMayCommitAlone).
 */
static int64
run_routed(FunctionCallInfo fcinfo, CdRowSink *sink)
{
	RoutedCall	call = routed_call(fcinfo);
	bool		alone = call.is_write && call_is_statement(fcinfo);
	int64		rows;

	RemoteMayCommitAlone(alone);
	rows = RouterExecute(VARDATA_ANY(call.key), VARSIZE_ANY_EXHDR(call.key), call.sql,
						 call.nparams, call.params, sink, call.is_write);
	RemoteMayCommitAlone(false);
	return rows;
}

/*
 * routed_json runs a routed statement, storing its rows as jsonb in
 * 'store', or with 'store' NULL keeping only the first; returns the first.
 */
static Jsonb *
routed_json(FunctionCallInfo fcinfo, Tuplestorestate *store, TupleDesc desc)
{
	JsonbRowSink sink;

	JsonbRowSinkInit(&sink, store, desc);
	(void) run_routed(fcinfo, &sink.base);
	return sink.first;
}

/*
 * collegedb_run routes a statement by key and returns the rows affected.
 */
Datum
collegedb_run(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(run_routed(fcinfo, NULL));
}

/*
 * collegedb_all routes a statement by key and returns its rows as records
 * of the caller's column definition list.
 */
Datum
collegedb_all(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	RecordRowSink sink;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	RecordRowSinkInit(&sink, rsinfo->setResult, rsinfo->setDesc);
	(void) run_routed(fcinfo, &sink.base);
	return (Datum) 0;
}

/*
 * A read whose rows come back as jsonb: into 'store', or with 'store' NULL
 * only the first, which it returns (routed_json, lookup_key_read).
 */
typedef Jsonb *(*JsonRead) (FunctionCallInfo fcinfo, Tuplestorestate *store, TupleDesc desc);

/*
 * json_rows returns every row of 'read' as a set of jsonb.
 */
static Datum
json_rows(FunctionCallInfo fcinfo, JsonRead read)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	(void) read(fcinfo, rsinfo->setResult, rsinfo->setDesc);
	return (Datum) 0;
}

/*
 * json_first returns the first row of 'read', NULL when there is none.
 */
static Datum
json_first(FunctionCallInfo fcinfo, JsonRead read)
{
	Jsonb	   *first = read(fcinfo, NULL, NULL);

	if (first == NULL)
		PG_RETURN_NULL();
	PG_RETURN_JSONB_P(first);
}

/*
 * collegedb_all_json routes a statement by key and returns its rows as
 * jsonb objects; collegedb_first returns the first one, NULL when there is
 * none.
 */
Datum
collegedb_all_json(PG_FUNCTION_ARGS)
{
	return json_rows(fcinfo, routed_json);
}

Datum
collegedb_first(PG_FUNCTION_ARGS)
{
	return json_first(fcinfo, routed_json);
}

/*
 * lookup_key_read runs a read for a lookup key: on its mapped shard first;
 * when that finds no row, or there is no mapping, on every other shard at
 * once (a shard that fails then fails the read: the answer would be
 * incomplete).  Never creates a mapping.  With 'store' NULL, returns the
 * first row (the mapped shard's, else in shard name order).
 */
static Jsonb *
lookup_key_read(FunctionCallInfo fcinfo, Tuplestorestate *store, TupleDesc desc)
{
	text	   *key;
	char	   *sql;
	int			nparams;
	CdParam    *params;
	const CdShard *mapped = NULL;
	JsonbRowSink sink;
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("lookup key must not be null")));
	key = PG_GETARG_TEXT_PP(0);
	sql = ArgText(fcinfo, 1, "statement");
	if (RemoteStatementWrites(NULL, 0, sql))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("lookup-key reads run only statements that read"),
				 errhint("Use collegedb.run() to write by key.")));
	params = ValuesFromVariadic(fcinfo, 2, &nparams);
	JsonbRowSinkInit(&sink, store, desc);

	if (RouterFindMapping(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key), &mapped))
	{
		(void) RemoteExecute(mapped, sql, nparams, params, &sink.base, false);
		if (sink.rows > 0)
			return sink.first;
	}

	/* no mapping or no match there: every other shard, at once */
	{
		int			n;
		const CdShard **set = ShardReadSet(&n);
		CdFanoutShard *shards = palloc0(sizeof(CdFanoutShard) * Max(n, 1));
		JsonbRowSink *sinks = palloc0(sizeof(JsonbRowSink) * Max(n, 1));
		int			m = 0;

		for (int i = 0; i < n; i++)
		{
			if (ShardIs(set[i], mapped))
				continue;
			JsonbRowSinkInit(&sinks[m], store, desc);
			shards[m].shard = set[i];
			shards[m].sink = &sinks[m].base;
			m++;
		}
		FanoutRun(shards, m, sql, nparams, params, CD_FANOUT_READ);
		for (int i = 0; i < m; i++)
			if (!shards[i].ok)
				FanoutRaise(&shards[i], sql, NULL);
		/* the first row, in shard name order */
		for (int i = 0; i < m; i++)
			if (sinks[i].first != NULL)
				return sinks[i].first;
	}
	return sink.first;
}

Datum
collegedb_first_by_lookup_key(PG_FUNCTION_ARGS)
{
	return json_first(fcinfo, lookup_key_read);
}

Datum
collegedb_all_by_lookup_key(PG_FUNCTION_ARGS)
{
	return json_rows(fcinfo, lookup_key_read);
}

/*
 * collegedb_shard_for_key returns the shard a read (or a write) of the key
 * would go to, saving nothing.
 */
Datum
collegedb_shard_for_key(PG_FUNCTION_ARGS)
{
	text	   *key = PG_GETARG_TEXT_PP(0);
	bool		for_write = PG_ARGISNULL(1) ? false : PG_GETARG_BOOL(1);
	CdRoute		route = RouterResolve(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key),
									  for_write, false);

	PG_RETURN_TEXT_P(cstring_to_text(route.shard->name));
}

/*
 * collegedb_route explains where a read of the key goes and why: one row
 * per shard it would try, in order.  Under computed placement 'epoch' is
 * the newest epoch that puts the key on the shard, and 'has_key' says
 * whether the shard holds the key in a registered table (NULL when no
 * table is registered; also for the two shards of a slot that moves).
 * Under the slots strategy 'slot' is the key's slot (NULL otherwise).
 */
Datum
collegedb_route(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	text	   *key = PG_GETARG_TEXT_PP(0);
	CdRoute		route = RouterResolve(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key),
									  false, false);
	bool		probe = route.source == CD_ROUTE_COMPUTED || route.ncandidates > 1;
	int			found = probe ? RouterProbeKey(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key),
											  route.candidates, route.ncandidates) : -1;
	bool		have_tables = probe && RegisteredTables() != NIL;

	InitMaterializedSRF(fcinfo, 0);
	for (int i = 0; i < route.ncandidates; i++)
	{
		Datum		values[6];
		bool		nulls[6] = {false, false, false,
			route.epochs == NULL || route.source == CD_ROUTE_SLOT, !have_tables,
		route.slot < 0};
		const CdShard *shard = route.candidates[i];
		int			hops = 0;

		/* a stale mapping: where the key's tombstones lead */
		if (!probe && AnyRegisteredTable())
			shard = RouterFollowTombstones(shard, VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key), &hops);
		values[0] = CStringGetTextDatum(shard->name);
		values[1] = CStringGetTextDatum(hops > 0 ? "tombstone" : RouterSourceName(route.source));
		values[2] = Int32GetDatum(hops);
		values[3] = Int32GetDatum(route.epochs ? route.epochs[i] : 0);
		values[4] = BoolGetDatum(found == i);
		values[5] = Int32GetDatum(route.slot);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * collegedb_mapping_key returns the form in which the mapping store keeps
 * a key under the current settings.
 */
Datum
collegedb_mapping_key(PG_FUNCTION_ARGS)
{
	text	   *key = PG_GETARG_TEXT_PP(0);

	PG_RETURN_TEXT_P(cstring_to_text(RouterStoredKey(VARDATA_ANY(key),
													 VARSIZE_ANY_EXHDR(key))));
}

/*
 * collegedb_mapping_id returns a key's id in the mapping store: the first
 * 128 bits of the SHA-256 of its UTF-8 bytes, whatever the settings.
 */
Datum
collegedb_mapping_id(PG_FUNCTION_ARGS)
{
	text	   *key = PG_GETARG_TEXT_PP(0);
	uint8		digest[PG_SHA256_DIGEST_LENGTH];
	pg_uuid_t  *id = palloc(sizeof(pg_uuid_t));

	StaticAssertStmt(MAPPING_ID_LEN == UUID_LEN, "a key id is a uuid");
	MappingDigest(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key), digest);
	memcpy(id->data, digest, UUID_LEN);
	PG_RETURN_UUID_P(id);
}

/*
 * collegedb_cache_stats returns this backend's mapping cache counters, its
 * shared cache counters and how many entries the shared cache holds (NULL
 * without it).  Under the 0.1 declaration only the first three columns.
 */
Datum
collegedb_cache_stats(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Datum		values[6];
	bool		nulls[6] = {false, false, false, false, false, false};
	int64		entries = SharedCacheEntries();

	InitMaterializedSRF(fcinfo, 0);
	if (rsinfo->setDesc->natts > lengthof(values))
		elog(ERROR, "collegedb.cache_stats() is declared with too many columns");
	values[0] = Int64GetDatum((int64) RouterCacheHits);
	values[1] = Int64GetDatum((int64) RouterCacheMisses);
	values[2] = Int64GetDatum((int64) RouterCatalogReads);
	values[3] = Int64GetDatum((int64) RouterSharedHits);
	values[4] = Int64GetDatum((int64) RouterSharedMisses);
	values[5] = Int64GetDatum(entries);
	nulls[5] = entries < 0;
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	return (Datum) 0;
}
