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
#include "utils/builtins.h"
#include "utils/jsonb.h"

#include "catalog/tables.h"
#include "remote/fanout.h"
#include "remote/remote.h"
#include "router/router.h"
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
PG_FUNCTION_INFO_V1(collegedb_cache_stats);

extern uint64 RouterCacheHits;
extern uint64 RouterCacheMisses;
extern uint64 RouterCatalogReads;

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
 * run_routed routes and runs a call, streaming rows to 'sink'.
 */
static int64
run_routed(FunctionCallInfo fcinfo, CdRowSink *sink)
{
	RoutedCall	call = routed_call(fcinfo);

	return RouterExecute(VARDATA_ANY(call.key), VARSIZE_ANY_EXHDR(call.key), call.sql,
						 call.nparams, call.params, sink, call.is_write);
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
 * collegedb_all_json routes a statement by key and returns its rows as
 * jsonb objects; collegedb_first returns the first one, NULL when there is
 * none.
 */
Datum
collegedb_all_json(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	(void) routed_json(fcinfo, rsinfo->setResult, rsinfo->setDesc);
	return (Datum) 0;
}

Datum
collegedb_first(PG_FUNCTION_ARGS)
{
	Jsonb	   *first = routed_json(fcinfo, NULL, NULL);

	if (first == NULL)
		PG_RETURN_NULL();
	PG_RETURN_JSONB_P(first);
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
	Jsonb	   *first = lookup_key_read(fcinfo, NULL, NULL);

	if (first == NULL)
		PG_RETURN_NULL();
	PG_RETURN_JSONB_P(first);
}

Datum
collegedb_all_by_lookup_key(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	(void) lookup_key_read(fcinfo, rsinfo->setResult, rsinfo->setDesc);
	return (Datum) 0;
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
 * table is registered).
 */
Datum
collegedb_route(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	text	   *key = PG_GETARG_TEXT_PP(0);
	CdRoute		route = RouterResolve(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key),
									  false, false);
	bool		probe = route.source == CD_ROUTE_COMPUTED;
	int			found = probe ? RouterProbeKey(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key),
											  route.candidates, route.ncandidates) : -1;
	bool		have_tables = probe && RegisteredTables() != NIL;

	InitMaterializedSRF(fcinfo, 0);
	for (int i = 0; i < route.ncandidates; i++)
	{
		Datum		values[5];
		bool		nulls[5] = {false, false, false, route.epochs == NULL, !have_tables};
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
 * collegedb_cache_stats returns this backend's mapping cache counters.
 */
Datum
collegedb_cache_stats(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};

	InitMaterializedSRF(fcinfo, 0);
	values[0] = Int64GetDatum((int64) RouterCacheHits);
	values[1] = Int64GetDatum((int64) RouterCacheMisses);
	values[2] = Int64GetDatum((int64) RouterCatalogReads);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	return (Datum) 0;
}
