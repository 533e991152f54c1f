/*-------------------------------------------------------------------------
 *
 * exec_funcs.c
 *	  SQL functions that run statements on named shards: run_on_shard,
 *	  all_on_shard and run_on_all.
 *
 * These are thin wrappers: the remote layer checks the statement, joins
 * the front transaction and converts values.  run_on_all and fanout reach
 * every shard at once and report a shard's failure as a row; fanout's
 * body serves fanout_group too (topology_funcs.c).  Whether a
 * statement writes is each shard's dialect's call: run_on_all classifies
 * it per shard, and fanout refuses it unless every dialect of the read set
 * proves it a read.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "funcapi.h"
#include "utils/builtins.h"

#include "remote/fanout.h"
#include "remote/remote.h"
#include "sqlfuncs/sqlfuncs.h"

PG_FUNCTION_INFO_V1(collegedb_run_on_shard);
PG_FUNCTION_INFO_V1(collegedb_all_on_shard);
PG_FUNCTION_INFO_V1(collegedb_run_on_all);
PG_FUNCTION_INFO_V1(collegedb_fanout);

/*
 * collegedb_run_on_shard runs a statement on one shard and returns the
 * number of rows it affected (or returned).
 */
Datum
collegedb_run_on_shard(PG_FUNCTION_ARGS)
{
	char	   *name = ArgText(fcinfo, 0, "shard name");
	char	   *sql = ArgText(fcinfo, 1, "statement");
	const CdShard *shard = ShardLookup(name);
	int			nparams;
	CdParam    *params = ValuesFromVariadic(fcinfo, 2, &nparams);

	PG_RETURN_INT64(RemoteExecute(shard, sql, nparams, params, NULL,
								  RemoteStatementWritesOn(shard, sql)));
}

/*
 * collegedb_all_on_shard runs a statement on one shard and returns its
 * rows as jsonb objects.
 */
Datum
collegedb_all_on_shard(PG_FUNCTION_ARGS)
{
	char	   *name = ArgText(fcinfo, 0, "shard name");
	char	   *sql = ArgText(fcinfo, 1, "statement");
	const CdShard *shard = ShardLookup(name);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			nparams;
	CdParam    *params = ValuesFromVariadic(fcinfo, 2, &nparams);
	JsonbRowSink sink;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	JsonbRowSinkInit(&sink, rsinfo->setResult, rsinfo->setDesc);
	(void) RemoteExecute(shard, sql, nparams, params, &sink.base,
						 RemoteStatementWritesOn(shard, sql));
	return (Datum) 0;
}

/*
 * collegedb_run_on_all runs a statement on every registered shard at once
 * (see remote/fanout.c) and returns one row per shard, in name order:
 * failures are data, and a failed shard's part is undone on that shard
 * alone.  So the statement is no atomic transaction: outside a
 * transaction block each shard's part commits as soon as it succeeded (a
 * DDL statement on several SQLite shards, which cannot take part in one
 * two-phase commit together, works); inside one, it commits with the
 * front transaction.
 */
Datum
collegedb_run_on_all(PG_FUNCTION_ARGS)
{
	char	   *sql = ArgText(fcinfo, 0, "statement");
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	List	   *all;
	CdFanoutShard *shards;
	int			n = 0;
	ListCell   *lc;

	InitMaterializedSRF(fcinfo, 0);
	all = ShardList();
	shards = palloc0(sizeof(CdFanoutShard) * Max(list_length(all), 1));
	foreach(lc, all)
		shards[n++].shard = lfirst(lc);

	/* a shard whose server is gone is reported, not asked */
	{
		CdFanoutShard *reachable = palloc0(sizeof(CdFanoutShard) * Max(n, 1));
		int			m = 0;

		for (int i = 0; i < n; i++)
			if (OidIsValid(shards[i].shard->serverid))
				reachable[m++] = shards[i];
		/* outside a block each shard's part commits at once, below */
		FanoutRun(reachable, m, sql, 0, NULL,
				  IsTransactionBlock() ? CD_FANOUT_BY_DIALECT : CD_FANOUT_EACH_COMMITS);
		for (int i = 0, j = 0; i < n; i++)
		{
			if (OidIsValid(shards[i].shard->serverid))
				shards[i] = reachable[j++];
			else
				shards[i].error = psprintf("shard \"%s\" has no collegedb server any more",
										   shards[i].shard->name);
		}
		if (!IsTransactionBlock())
			for (int i = 0; i < m; i++)
				if (reachable[i].ok)
					RemoteCommitNow(reachable[i].shard);
	}

	for (int i = 0; i < n; i++)
	{
		Datum		values[4];
		bool		nulls[4] = {false, false, !shards[i].ok, shards[i].ok};

		values[0] = CStringGetTextDatum(shards[i].shard->name);
		values[1] = BoolGetDatum(shards[i].ok);
		values[2] = Int64GetDatum(shards[i].rows);
		values[3] = shards[i].ok ? (Datum) 0 : CStringGetTextDatum(shards[i].error);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * SqlfuncsFanout runs a read on the 'n' shards of 'set' at once and returns
 * in fcinfo's result set (shard, value, error) each row tagged with its
 * shard; a shard that fails, times out or cannot be reached yields one row
 * with its error instead.  The statement's parameters are the arguments
 * from 'first' on; 'what' names the function in the refusal of a write.
 */
void
SqlfuncsFanout(FunctionCallInfo fcinfo, const char *what, const CdShard **set, int n,
			   const char *sql, int first)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			nparams;
	CdParam    *params;
	CdFanoutShard *shards;
	JsonbRowSink *sinks;

	if (RemoteStatementWrites(set, n, sql))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("collegedb.%s runs only statements that read", what),
				 errdetail("A statement is a read when the lexical rules of every shard's dialect show it reads only; this one may write."),
				 errhint("Use collegedb.run_on_all() to write on every shard.")));
	params = ValuesFromVariadic(fcinfo, first, &nparams);
	InitMaterializedSRF(fcinfo, 0);

	shards = palloc0(sizeof(CdFanoutShard) * Max(n, 1));
	sinks = palloc0(sizeof(JsonbRowSink) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		JsonbRowSinkInit(&sinks[i], rsinfo->setResult, rsinfo->setDesc);
		sinks[i].tag = set[i]->name;
		shards[i].shard = set[i];
		shards[i].sink = &sinks[i].base;
	}
	FanoutRun(shards, n, sql, nparams, params, CD_FANOUT_READ);

	for (int i = 0; i < n; i++)
	{
		Datum		values[3];
		bool		nulls[3] = {false, true, false};

		if (shards[i].ok)
			continue;
		values[0] = CStringGetTextDatum(shards[i].shard->name);
		values[2] = CStringGetTextDatum(shards[i].error);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
}

/*
 * collegedb_fanout runs a read on every shard of the read set at once (see
 * SqlfuncsFanout).
 */
Datum
collegedb_fanout(PG_FUNCTION_ARGS)
{
	char	   *sql = ArgText(fcinfo, 0, "statement");
	int			n;
	const CdShard **set = ShardReadSet(&n);

	SqlfuncsFanout(fcinfo, "fanout", set, n, sql, 1);
	return (Datum) 0;
}
