/*-------------------------------------------------------------------------
 *
 * conn_funcs.c
 *	  SQL functions about this backend's shard connections and the shared
 *	  activity counters: connections, disconnect, disconnect_all,
 *	  shard_activity.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"

#include "collegedb.h"
#include "remote/remote.h"
#include "sqlfuncs/sqlfuncs.h"

PG_FUNCTION_INFO_V1(collegedb_connections);
PG_FUNCTION_INFO_V1(collegedb_disconnect);
PG_FUNCTION_INFO_V1(collegedb_disconnect_all);
PG_FUNCTION_INFO_V1(collegedb_shard_activity);

/*
 * collegedb_connections lists this backend's open shard connections.  No
 * connection string or credential is shown.
 */
Datum
collegedb_connections(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			count;
	CdConnectionStatus *list;

	InitMaterializedSRF(fcinfo, 0);
	list = ConnectionStatusList(&count);
	for (int i = 0; i < count; i++)
	{
		Datum		values[5];
		bool		nulls[5] = {false, false, false, false, false};
		char	   *user = GetUserNameFromId(list[i].userid, true);

		values[0] = CStringGetTextDatum(list[i].shard);
		values[1] = user ? CStringGetTextDatum(user) : (Datum) 0;
		nulls[1] = user == NULL;
		values[2] = CStringGetTextDatum(list[i].dialect);
		values[3] = BoolGetDatum(list[i].valid);
		values[4] = BoolGetDatum(list[i].in_transaction);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * collegedb_disconnect closes this backend's connections to one shard;
 * true when one was open.
 */
Datum
collegedb_disconnect(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));

	(void) ShardLookup(name);
	PG_RETURN_BOOL(ConnectionDisconnect(name));
}

/*
 * collegedb_disconnect_all closes every idle connection of this backend;
 * true when one was open.
 */
Datum
collegedb_disconnect_all(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(ConnectionDisconnectAll() > 0);
}

/*
 * collegedb_shard_activity returns the statements sent to each shard by
 * every backend since the server started (needs the preload).
 */
Datum
collegedb_shard_activity(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			count;
	ShardActivity *list = ActivitySnapshot(&count);

	InitMaterializedSRF(fcinfo, 0);
	for (int i = 0; i < count; i++)
	{
		Datum		values[3];
		bool		nulls[3] = {false, false, false};

		values[0] = CStringGetTextDatum(list[i].shard);
		values[1] = Int64GetDatum((int64) list[i].statements);
		values[2] = Int64GetDatum((int64) list[i].errors);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
