/*-------------------------------------------------------------------------
 *
 * topology.c
 *	  Reads the catalog of topology groups for the functions that route
 *	  and wait within a group, and keeps it consistent when a shard is
 *	  dropped.
 *
 * The groups, their members, the channels, the state values and the
 * outbox (collegedb.topology_*) are written by the extension script's
 * PL/pgSQL functions, which topology_update and its siblings run with the
 * owner's rights (sqlfuncs/topology_funcs.c), and by the coordinator as it
 * delivers (worker/outbox.c).  Nothing here is cached: these are not the
 * paths of a routed statement, and every call reads the tables, through
 * SPI with the owner's rights (see catalog.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"

#include "catalog/catalog.h"
#include "catalog/topology.h"

/*
 * first_column runs one statement on the topology catalog with 'arg' as
 * $1, with the owner's rights, and returns the first column of the rows it
 * returns, as strings in the caller's memory context.
 */
static List *
first_column(const char *sql, const char *arg)
{
	MemoryContext caller = CurrentMemoryContext;
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(arg)};
	List	   *result = NIL;
	CdCatalogAccess access;

	CatalogAccessBegin(&access);
	SPI_connect();
	if (SPI_execute_with_args(sql, 1, types, values, NULL, false, 0) < 0)
		elog(ERROR, "could not read the topology catalog for \"%s\"", arg);
	for (uint64 i = 0; SPI_tuptable != NULL && i < SPI_processed; i++)
	{
		MemoryContext old = MemoryContextSwitchTo(caller);

		result = lappend(result, SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	CatalogAccessEnd(&access);
	return result;
}

/*
 * TopologyReadSet returns the names of a group's read set (its active and
 * draining members) in name order, in the caller's memory context;
 * *exists says whether the group exists (has members) at all.
 */
List *
TopologyReadSet(const char *group, bool *exists)
{
	List	   *names = first_column("SELECT m.shard FROM collegedb.topology_member m "
									 "WHERE m.group_name = $1 ORDER BY m.shard COLLATE \"C\"",
									 group);

	*exists = names != NIL;
	return names;
}

/*
 * TopologyPending counts the group's deliveries still in the outbox, as
 * the latest snapshot shows them (whatever the isolation level: a waiter
 * must see the coordinator's progress); *staged_here says whether the
 * current transaction wrote any of them, which no coordinator can see
 * before it commits.
 */
int64
TopologyPending(const char *group, bool *staged_here)
{
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(group)};
	Snapshot	snapshot = CatalogReadSnapshot();
	SPIPlanPtr	plan;
	int64		pending;
	CdCatalogAccess access;

	*staged_here = false;
	CatalogAccessBegin(&access);
	SPI_connect();
	plan = SPI_prepare("SELECT d.xmin FROM collegedb.topology_delivery d WHERE d.group_name = $1",
					   1, types);
	if (plan == NULL ||
		SPI_execute_snapshot(plan, values, NULL, snapshot, InvalidSnapshot,
							 true, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the outbox of topology group \"%s\"", group);
	pending = (int64) SPI_processed;
	for (uint64 i = 0; i < SPI_processed && !*staged_here; i++)
	{
		bool		isnull;
		Datum		xmin = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);

		*staged_here = !isnull &&
			TransactionIdIsCurrentTransactionId(DatumGetTransactionId(xmin));
	}
	SPI_finish();
	CatalogAccessEnd(&access);
	CatalogReleaseSnapshot(snapshot);
	return pending;
}

/*
 * TopologyForgetShard is called before a shard is unregistered: it
 * refuses while the shard is a member of a group (the group's readers and
 * writers would lose it without a new version), and cancels what is
 * still to be delivered to it (a removed snapshot it can no longer get).
 */
void
TopologyForgetShard(const char *shard)
{
	List	   *groups = first_column("SELECT m.group_name FROM collegedb.topology_member m "
									  "WHERE m.shard = $1 ORDER BY m.group_name COLLATE \"C\" LIMIT 1",
									  shard);

	if (groups != NIL)
		ereport(ERROR,
				(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
				 errmsg("cannot drop shard \"%s\" because it is a member of topology group \"%s\"",
						shard, (char *) linitial(groups)),
				 errhint("Leave it out of the group's members with collegedb.topology_update(), or delete the group with collegedb.topology_delete().")));
	(void) first_column("DELETE FROM collegedb.topology_delivery d WHERE d.member = $1", shard);
}
