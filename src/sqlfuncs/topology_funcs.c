/*-------------------------------------------------------------------------
 *
 * topology_funcs.c
 *	  SQL functions of topology groups written in C: the writers
 *	  (topology_update, topology_delete, topology_define_channel),
 *	  topology_wait, topology_coordinator and fanout_group.
 *
 * The writers check nothing themselves: they hand their arguments and
 * their caller to the catalog (catalog/topology.c), whose writers check
 * the draft and change the groups and the outbox in the caller's
 * transaction, with the catalog owner's rights.  Being C, they know their
 * caller, whose user mappings the coordinator uses to deliver what they
 * staged, and they wake the coordinator when the transaction commits.
 * The reading functions that need no shard (topology_snapshot,
 * topology_members, topology_shard_for_key) are SQL in the script.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "miscadmin.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "catalog/catalog.h"
#include "catalog/shards.h"
#include "catalog/topology.h"
#include "cd_errcodes.h"
#include "sqlfuncs/sqlfuncs.h"
#include "worker/outbox.h"

PG_FUNCTION_INFO_V1(collegedb_topology_update);
PG_FUNCTION_INFO_V1(collegedb_topology_delete);
PG_FUNCTION_INFO_V1(collegedb_topology_define_channel);
PG_FUNCTION_INFO_V1(collegedb_topology_wait);
PG_FUNCTION_INFO_V1(collegedb_topology_coordinator);
PG_FUNCTION_INFO_V1(collegedb_fanout_group);

/* how often topology_wait looks at the outbox */
#define TOPOLOGY_WAIT_POLL_MS 50

/*
 * arg_text_or_null returns argument 'n' as a C string, NULL for a NULL.
 */
static char *
arg_text_or_null(FunctionCallInfo fcinfo, int n)
{
	return PG_ARGISNULL(n) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(n));
}

/*
 * collegedb_topology_update applies a draft (members, states; NULL keeps
 * what is there) to a group and returns {"group", "version", "changed"};
 * the coordinator is woken when the transaction commits.
 */
Datum
collegedb_topology_update(PG_FUNCTION_ARGS)
{
	Jsonb	   *result;

	CatalogEnsureWritable(gettext_noop("cannot update a topology group on a hot standby"));
	result = TopologyApply(arg_text_or_null(fcinfo, 0),
						   PG_ARGISNULL(1) ? NULL : PG_GETARG_JSONB_P(1),
						   PG_ARGISNULL(2) ? NULL : PG_GETARG_JSONB_P(2),
						   GetUserId());
	OutboxWakeAtCommit();
	if (result == NULL)
		PG_RETURN_NULL();
	PG_RETURN_JSONB_P(result);
}

/*
 * collegedb_topology_delete drops a group's members and state values,
 * cancels its pending deliveries and stages the removal of its published
 * snapshot; false when the group did not exist.
 */
Datum
collegedb_topology_delete(PG_FUNCTION_ARGS)
{
	bool		removed;

	CatalogEnsureWritable(gettext_noop("cannot delete a topology group on a hot standby"));
	removed = TopologyRemove(arg_text_or_null(fcinfo, 0), GetUserId());
	OutboxWakeAtCommit();
	PG_RETURN_BOOL(removed);
}

/*
 * collegedb_topology_define_channel defines a state channel, or changes
 * the role of members it reaches ('write' or 'read').
 */
Datum
collegedb_topology_define_channel(PG_FUNCTION_ARGS)
{
	CatalogEnsureWritable(gettext_noop("cannot define a topology channel on a hot standby"));
	TopologySetChannel(arg_text_or_null(fcinfo, 0), arg_text_or_null(fcinfo, 1), GetUserId());
	OutboxWakeAtCommit();
	PG_RETURN_VOID();
}

/*
 * collegedb_topology_wait waits until no delivery of the group is left in
 * the outbox (every member holds the group's current version and values)
 * and returns true; false when the timeout passes first.  Deliveries the
 * calling transaction staged are refused: no coordinator sees them before
 * it commits.
 */
Datum
collegedb_topology_wait(PG_FUNCTION_ARGS)
{
	char	   *group = ArgText(fcinfo, 0, "group name");
	TimestampTz deadline = ArgDeadline(fcinfo, 1);

	for (;;)
	{
		bool		staged_here;

		if (TopologyPending(group, &staged_here) == 0)
			PG_RETURN_BOOL(true);
		if (staged_here)
			ereport(ERROR,
					(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
					 errmsg("cannot wait for deliveries of topology group \"%s\" that this transaction staged",
							group),
					 errdetail("The coordinator delivers them once the transaction commits."),
					 errhint("Commit first, then wait.")));
		if (deadline && GetCurrentTimestamp() >= deadline)
			PG_RETURN_BOOL(false);
		SqlfuncsPause(TOPOLOGY_WAIT_POLL_MS);
	}
}

/*
 * collegedb_topology_coordinator identifies this front as the coordinator
 * of its groups: the cluster's system identifier and the database.
 */
Datum
collegedb_topology_coordinator(PG_FUNCTION_ARGS)
{
	char	   *database = get_database_name(MyDatabaseId);
	StringInfoData json;

	initStringInfo(&json);
	appendStringInfo(&json, "{\"system_identifier\": \"" UINT64_FORMAT "\", \"database\": ",
					 GetSystemIdentifier());
	escape_json(&json, database ? database : "");
	appendStringInfoChar(&json, '}');
	PG_RETURN_DATUM(DirectFunctionCall1(jsonb_in, CStringGetDatum(json.data)));
}

/*
 * collegedb_fanout_group runs a read on every member of a group's read set
 * at once, as collegedb.fanout does on every shard.
 */
Datum
collegedb_fanout_group(PG_FUNCTION_ARGS)
{
	char	   *group = ArgText(fcinfo, 0, "group name");
	char	   *sql = ArgText(fcinfo, 1, "statement");
	bool		exists;
	List	   *names = TopologyReadSet(group, &exists);
	const CdShard **set = palloc(sizeof(CdShard *) * Max(list_length(names), 1));
	int			n = 0;
	ListCell   *lc;

	if (!exists)
		ereport(ERROR,
				(errcode(ERRCODE_CD_TOPOLOGY_UNAVAILABLE),
				 errmsg("topology group \"%s\" does not exist", group)));
	/* as collegedb.fanout, a member whose server is gone is not asked */
	foreach(lc, names)
	{
		const CdShard *shard = ShardLookupOptional(lfirst(lc));

		if (shard != NULL && OidIsValid(shard->serverid))
			set[n++] = shard;
	}
	SqlfuncsFanout(fcinfo, "fanout_group", set, n, sql, 2);
	return (Datum) 0;
}
