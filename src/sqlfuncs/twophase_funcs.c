/*-------------------------------------------------------------------------
 *
 * twophase_funcs.c
 *	  SQL-callable wrappers of two-phase commit recovery:
 *	  recover_prepared_transactions() and the rows of the view
 *	  collegedb.prepared_transactions.
 *
 * The work is remote/recovery.c's; this file only refuses a transaction
 * block (the shards' COMMIT PREPARED and XA COMMIT run outside any remote
 * transaction) and returns the rows.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "funcapi.h"
#include "utils/builtins.h"

#include "catalog/catalog.h"
#include "remote/remote.h"
#include "sqlfuncs/sqlfuncs.h"

PG_FUNCTION_INFO_V1(collegedb_recover_prepared_transactions);
PG_FUNCTION_INFO_V1(collegedb_prepared_transactions_list);

/*
 * return_rows returns RecoveryRun's rows as (shard, gid, action, error).
 */
static Datum
return_rows(FunctionCallInfo fcinfo, List *rows)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ListCell   *lc;

	InitMaterializedSRF(fcinfo, 0);
	foreach(lc, rows)
	{
		CdInDoubt  *row = lfirst(lc);
		Datum		values[4];
		bool		nulls[4] = {false, row->gid == NULL, false, row->error == NULL};

		values[0] = CStringGetTextDatum(row->shard);
		values[1] = row->gid ? CStringGetTextDatum(row->gid) : (Datum) 0;
		values[2] = CStringGetTextDatum(row->action);
		values[3] = row->error ? CStringGetTextDatum(row->error) : (Datum) 0;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * collegedb_recover_prepared_transactions resolves the prepared
 * transactions this front left on the shards, now, and returns what it
 * did.
 */
Datum
collegedb_recover_prepared_transactions(PG_FUNCTION_ARGS)
{
	CatalogEnsureWritable(gettext_noop("cannot resolve prepared transactions on a hot standby"));
	PreventInTransactionBlock(true, "collegedb.recover_prepared_transactions()");
	return return_rows(fcinfo, RecoveryRun(true));
}

/*
 * collegedb_prepared_transactions_list lists the prepared transactions
 * this front left on the shards, and what recovery would do with each.
 */
Datum
collegedb_prepared_transactions_list(PG_FUNCTION_ARGS)
{
	return return_rows(fcinfo, RecoveryRun(false));
}
