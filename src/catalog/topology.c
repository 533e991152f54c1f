/*-------------------------------------------------------------------------
 *
 * topology.c
 *	  The catalog of topology groups (collegedb.topology_group, _member,
 *	  _channel, _state and the outbox, _delivery): every statement
 *	  collegedb's C code runs on it.
 *
 * The writers of the groups, their members, channels and values are the
 * extension script's PL/pgSQL functions (topology_apply, topology_remove,
 * topology_set_channel), which check a draft and change the catalog and
 * the outbox together; this file runs them in the caller's transaction,
 * with the caller as the role that staged the deliveries.  The coordinator
 * (worker/outbox.c) reads what is due here and records how each delivery
 * went.  Every statement goes through CatalogExec (the catalog owner's
 * rights); nothing is cached: these are not the paths of a routed
 * statement.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/snapmgr.h"

#include "catalog/catalog.h"
#include "catalog/topology.h"

/*
 * The outbox's row of a delivery ($1 to $4, and the condition 'also'),
 * unless a writer holds it locked.
 */
#define DELIVERY_ROW(also) \
	"d.ctid = (SELECT x.ctid FROM collegedb.topology_delivery x " \
	"WHERE x.group_name = $1 AND x.kind = $2 AND x.channel = $3 AND x.member = $4 " also \
	" FOR UPDATE SKIP LOCKED)"

static Datum
text_or_null(const char *s, char *null)
{
	*null = s ? ' ' : 'n';
	return s ? CStringGetTextDatum(s) : (Datum) 0;
}

static Datum
jsonb_or_null(Jsonb *j, char *null)
{
	*null = j ? ' ' : 'n';
	return j ? JsonbPGetDatum(j) : (Datum) 0;
}

/*
 * first_column runs one statement on the topology catalog with 'arg' as
 * $1 and returns the first column of the rows it returns, as strings in
 * the caller's memory context.
 */
static List *
first_column(const char *sql, const char *arg)
{
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(arg)};
	CdCatalogRows rows;
	List	   *result = NIL;

	(void) CatalogExec(sql, 1, types, values, NULL, false, &rows);
	for (uint64 i = 0; i < rows.count; i++)
		result = lappend(result, CatalogText(&rows, i, 1));
	return result;
}

/*
 * run_writer runs one of the script's writers of groups, 'sql', with the
 * 'nargs' arguments given and the caller as the last one, $<nargs + 1>
 * (the role whose user mappings deliver what it stages), and returns its
 * result.
 */
static Datum
run_writer(const char *sql, int nargs, const Oid *types, const Datum *values,
		   const char *nulls, Oid caller, bool *isnull)
{
	Oid			t[4];
	Datum		v[4];
	char		n[5] = "    ";
	CdCatalogRows rows;

	Assert(nargs < 4);
	for (int i = 0; i < nargs; i++)
	{
		t[i] = types[i];
		v[i] = values[i];
		n[i] = nulls[i];
	}
	t[nargs] = REGROLEOID;
	v[nargs] = ObjectIdGetDatum(caller);
	(void) CatalogExec(sql, nargs + 1, t, v, n, false, &rows);
	return CatalogValue(&rows, 0, 1, isnull);
}

/*
 * TopologyApply applies a draft of group 'group' (members, states; NULL
 * keeps what is there) and returns {"group", "version", "changed"}; the
 * script's topology_apply checks it.
 */
Jsonb *
TopologyApply(const char *group, Jsonb *members, Jsonb *states, Oid caller)
{
	Oid			types[3] = {TEXTOID, JSONBOID, JSONBOID};
	Datum		values[3];
	char		nulls[3];
	bool		isnull;
	Datum		result;

	values[0] = text_or_null(group, &nulls[0]);
	values[1] = jsonb_or_null(members, &nulls[1]);
	values[2] = jsonb_or_null(states, &nulls[2]);
	result = run_writer("SELECT collegedb.topology_apply($1, $2, $3, $4)", 3, types, values,
						nulls, caller, &isnull);
	return isnull ? NULL : DatumGetJsonbPCopy(result);
}

/*
 * TopologyRemove deletes a group (the script's topology_remove); false
 * when it did not exist.
 */
bool
TopologyRemove(const char *group, Oid caller)
{
	Oid			types[1] = {TEXTOID};
	char		nulls[1];
	Datum		values[1] = {text_or_null(group, &nulls[0])};
	bool		isnull;
	Datum		result = run_writer("SELECT collegedb.topology_remove($1, $2)", 1, types, values,
									nulls, caller, &isnull);

	return !isnull && DatumGetBool(result);
}

/*
 * TopologySetChannel defines a state channel or changes the role it
 * reaches (the script's topology_set_channel).
 */
void
TopologySetChannel(const char *channel, const char *members, Oid caller)
{
	Oid			types[2] = {TEXTOID, TEXTOID};
	Datum		values[2];
	char		nulls[2];
	bool		isnull;

	values[0] = text_or_null(channel, &nulls[0]);
	values[1] = text_or_null(members, &nulls[1]);
	(void) run_writer("SELECT collegedb.topology_set_channel($1, $2, $3)", 2, types, values,
					  nulls, caller, &isnull);
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
	CdCatalogRows rows;

	/* a read-only statement runs on the active snapshot: the latest one */
	PushActiveSnapshot(snapshot);
	(void) CatalogExec("SELECT d.xmin FROM collegedb.topology_delivery d WHERE d.group_name = $1",
					   1, types, values, NULL, true, &rows);
	PopActiveSnapshot();
	CatalogReleaseSnapshot(snapshot);

	*staged_here = false;
	for (uint64 i = 0; i < rows.count && !*staged_here; i++)
	{
		bool		isnull;
		Datum		xmin = CatalogValue(&rows, i, 1, &isnull);

		*staged_here = !isnull &&
			TransactionIdIsCurrentTransactionId(DatumGetTransactionId(xmin));
	}
	return (int64) rows.count;
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

/*
 * TopologyDueDeliveries reads at most 'limit' deliveries that are due
 * (CdTopologyDelivery), ordered by owner, member, group, kind and channel,
 * into the caller's memory context; *next_ms is how long until the next
 * one after them falls due (-1: none).  The backoff is the member's: a row
 * staged for a member whose failed rows wait for their retry waits with
 * them.
 */
List *
TopologyDueDeliveries(int limit, long *next_ms)
{
	Oid			types[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(limit)};
	CdCatalogRows rows;
	List	   *due = NIL;
	bool		isnull;

	(void) CatalogExec("SELECT d.group_name, d.kind, d.channel, d.member, d.version, d.payload, "
					   "d.owner::oid, d.attempts "
					   "FROM collegedb.topology_delivery d WHERE d.next_attempt_at <= now() "
					   "AND NOT EXISTS (SELECT 1 FROM collegedb.topology_delivery w "
					   "WHERE w.member = d.member AND w.attempts > 0 AND w.next_attempt_at > now()) "
					   "ORDER BY d.owner::oid, d.member, d.group_name, d.kind, d.channel "
					   "LIMIT $1", 1, types, values, NULL, false, &rows);
	for (uint64 i = 0; i < rows.count; i++)
	{
		CdTopologyDelivery *d = palloc0(sizeof(CdTopologyDelivery));
		Datum		payload;

		d->group_name = CatalogText(&rows, i, 1);
		d->kind = CatalogText(&rows, i, 2);
		d->channel = CatalogText(&rows, i, 3);
		d->member = CatalogText(&rows, i, 4);
		d->version = DatumGetInt64(CatalogValue(&rows, i, 5, &isnull));
		payload = CatalogValue(&rows, i, 6, &isnull);
		d->payload = isnull ? NULL : DatumGetJsonbPCopy(payload);
		d->owner = DatumGetObjectId(CatalogValue(&rows, i, 7, &isnull));
		d->attempts = DatumGetInt32(CatalogValue(&rows, i, 8, &isnull));
		due = lappend(due, d);
	}

	*next_ms = -1;
	if (CatalogExec("SELECT ceil(extract(epoch FROM min(d.next_attempt_at) - clock_timestamp()) * 1000)::bigint "
					"FROM collegedb.topology_delivery d WHERE d.next_attempt_at > now()",
					0, NULL, NULL, NULL, false, &rows) == 1)
	{
		Datum		ms = CatalogValue(&rows, 0, 1, &isnull);

		if (!isnull)
			*next_ms = (long) Max(DatumGetInt64(ms), 0);
	}
	return due;
}

/*
 * delivery_key fills the first four arguments of the statements that
 * find a delivery's row.
 */
static void
delivery_key(const CdTopologyDelivery *d, Datum *values)
{
	values[0] = CStringGetTextDatum(d->group_name);
	values[1] = CStringGetTextDatum(d->kind);
	values[2] = CStringGetTextDatum(d->channel);
	values[3] = CStringGetTextDatum(d->member);
}

/*
 * TopologyDelivered removes a delivered row from the outbox, if it still
 * holds the version delivered: a newer value staged meanwhile stays.
 */
void
TopologyDelivered(const CdTopologyDelivery *d)
{
	Oid			types[5] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT8OID};
	Datum		values[5];

	delivery_key(d, values);
	values[4] = Int64GetDatum(d->version);
	(void) CatalogExec("DELETE FROM collegedb.topology_delivery d WHERE "
					   DELIVERY_ROW("AND x.version = $5"), 5, types, values, NULL, false, NULL);
}

/*
 * TopologyDeliveryFailed counts a failed attempt of a delivery, keeps its
 * error for the view collegedb.topology_outbox and puts its next attempt
 * off (CATALOG_RETRY_DELAY).
 */
void
TopologyDeliveryFailed(const CdTopologyDelivery *d, const char *error)
{
	Oid			types[5] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID};
	Datum		values[5];

	delivery_key(d, values);
	values[4] = CStringGetTextDatum(error);
	(void) CatalogExec("UPDATE collegedb.topology_delivery d SET attempts = d.attempts + 1, "
					   "next_attempt_at = clock_timestamp() + " CATALOG_RETRY_DELAY("d.attempts") ", "
					   "last_error = $5 WHERE " DELIVERY_ROW(""), 5, types, values, NULL, false, NULL);
}
