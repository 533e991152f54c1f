/*-------------------------------------------------------------------------
 *
 * exec_funcs.c
 *	  SQL functions that run statements on named shards: run_on_shard,
 *	  all_on_shard and run_on_all.
 *
 * These are thin wrappers: the remote layer checks the statement, joins
 * the front transaction and converts values.  run_on_all runs each shard
 * in its own subtransaction, so that one shard's failure is reported as a
 * row and undone on that shard alone.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/resowner.h"

#include "remote/remote.h"
#include "sqlfuncs/sqlfuncs.h"

PG_FUNCTION_INFO_V1(collegedb_run_on_shard);
PG_FUNCTION_INFO_V1(collegedb_all_on_shard);
PG_FUNCTION_INFO_V1(collegedb_run_on_all);

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
								  !StatementIsRead(sql)));
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
						 !StatementIsRead(sql));
	return (Datum) 0;
}

/*
 * collegedb_run_on_all runs a statement on every registered shard, one
 * subtransaction each, and returns one row per shard: failures are data.
 */
Datum
collegedb_run_on_all(PG_FUNCTION_ARGS)
{
	char	   *sql = ArgText(fcinfo, 0, "statement");
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	bool		is_write = !StatementIsRead(sql);
	MemoryContext caller_context;
	ResourceOwner caller_owner = CurrentResourceOwner;
	List	   *names = NIL;
	ListCell   *lc;

	InitMaterializedSRF(fcinfo, 0);
	caller_context = CurrentMemoryContext;

	/* the cache may be rebuilt while we run: take the names first */
	foreach(lc, ShardList())
		names = lappend(names, pstrdup(((CdShard *) lfirst(lc))->name));

	foreach(lc, names)
	{
		char	   *name = lfirst(lc);
		Datum		values[4];
		bool		nulls[4] = {false, false, false, true};

		values[0] = CStringGetTextDatum(name);
		BeginInternalSubTransaction(NULL);
		MemoryContextSwitchTo(caller_context);
		PG_TRY();
		{
			int64		rows = RemoteExecute(ShardLookup(name), sql, 0, NULL, NULL, is_write);

			ReleaseCurrentSubTransaction();
			MemoryContextSwitchTo(caller_context);
			CurrentResourceOwner = caller_owner;
			values[1] = BoolGetDatum(true);
			values[2] = Int64GetDatum(rows);
		}
		PG_CATCH();
		{
			ErrorData  *edata;

			MemoryContextSwitchTo(caller_context);
			edata = CopyErrorData();
			FlushErrorState();
			RollbackAndReleaseCurrentSubTransaction();
			MemoryContextSwitchTo(caller_context);
			CurrentResourceOwner = caller_owner;
			values[1] = BoolGetDatum(false);
			nulls[2] = true;
			values[3] = CStringGetTextDatum(edata->message);
			nulls[3] = false;
			FreeErrorData(edata);
		}
		PG_END_TRY();
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
