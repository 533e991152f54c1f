/*-------------------------------------------------------------------------
 *
 * outbox.c
 *	  The coordinator's delivery of topology groups: each group's snapshot
 *	  to the members of its read set, each state channel's value to the
 *	  members of the channel's role, from the outbox
 *	  (collegedb.topology_delivery) that topology_update and its siblings
 *	  fill in their callers' transactions.
 *
 * A pass takes the deliveries that are due, by the role that staged them
 * (its user mappings reach the shards) and by member, and runs each
 * member's deliveries as one sequence of statements in one fan-out
 * (remote/fanout.c): every member at once, each on its own connection, each
 * statement in the shard's autocommit, at most collegedb.topology_timeout
 * long.  A member's sequence goes on as soon as its previous statement
 * ended, so a member that hangs holds up no other member's deliveries.
 * Connecting is not asynchronous, nor is a statement on an SQLite file
 * (it runs in this process), so members start in this order: those whose
 * statements are sent without waiting (PostgreSQL, MySQL) and whose
 * connection is open, then those that never failed, those that failed
 * before, and the SQLite files last: a member that stopped answering is
 * connected to, and a file's lock waited for, after everyone else's first
 * statement is on the wire.
 *
 * The adapters' statements (topology_publish, topology_put_state) write a
 * row only when its version is newer than the one the shard holds, in one
 * statement: a delivery repeated after a crash between the shard's commit
 * and the outbox's changes nothing, nor does one that arrives late, behind
 * a newer one.  Afterwards, in a transaction of its own, a delivered row
 * leaves the outbox only if it still holds the version delivered (a newer
 * value staged meanwhile stays), and a failed member's rows count an
 * attempt and wait min(1 s * 2^(n-1), 300 s), jittered in [d/2, d), with
 * the error kept for the view collegedb.topology_outbox.  Rows a writer
 * holds locked are left for the next pass, so the coordinator never waits
 * for an application's transaction.
 *
 * Before its first delivery to a shard, a coordinator creates the
 * shard-side tables there (shards registered before 0.2 lack them), and
 * again after any failure on that shard.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/interrupt.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "catalog/shards.h"
#include "catalog/topology.h"
#include "collegedb.h"
#include "remote/fanout.h"
#include "remote/remote.h"
#include "worker/launcher.h"
#include "worker/outbox.h"
#include "worker/unit.h"

/* how many deliveries one pass takes at most */
#define OUTBOX_BATCH 1000

/* one row of the outbox, with the statement's parameters, and how it went */
typedef struct Delivery
{
	CdTopologyDelivery row;
	bool		snapshot;
	CdParam		params[4];
	int			nparams;
	bool		ok;
} Delivery;

/* one member's deliveries of a pass, and how they went */
typedef struct Member
{
	char	   *name;
	Oid			owner;
	int			attempts;		/* the most any of its rows has had */
	List	   *deliveries;		/* of Delivery *, in order */
	const CdShard *shard;		/* NULL: not registered, or no server */
	bool		connected;		/* its connection is open */
	bool		synchronous;	/* its statements run in this process */
	int			nddl;			/* shard-side DDL statements to run first */
	int			step;			/* the statement sent last; -1 before */
	char	   *error;			/* why it failed */
} Member;

/* the shards whose shard-side tables this coordinator has created */
static List *ensured = NIL;

static bool wake_registered = false;
static bool wake_pending = false;

/*
 * outbox_xact_callback wakes the coordinator when a transaction that
 * staged deliveries commits.
 */
static void
outbox_xact_callback(XactEvent event, void *arg)
{
	if (!wake_pending)
		return;
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT)
		LauncherWakeCoordinator(MyDatabaseId);
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT ||
		event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT ||
		event == XACT_EVENT_PREPARE)
		wake_pending = false;
}

/*
 * OutboxWakeAtCommit makes the database's coordinator look at the outbox
 * as soon as the current transaction commits (otherwise it would at its
 * next round, within half a second).
 */
void
OutboxWakeAtCommit(void)
{
	if (!wake_registered)
	{
		RegisterXactCallback(outbox_xact_callback, NULL);
		wake_registered = true;
	}
	wake_pending = true;
}

static bool
is_ensured(Oid serverid)
{
	return list_member_oid(ensured, serverid);
}

static void
set_ensured(Oid serverid, bool yes)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

	if (yes)
		ensured = list_append_unique_oid(ensured, serverid);
	else
		ensured = list_delete_oid(ensured, serverid);
	MemoryContextSwitchTo(old);
}

/*
 * load_due reads the deliveries that are due into 'context', with their
 * statements' parameters; *next_ms is how long until the next one falls
 * due (-1: none left after these).
 */
static List *
load_due(MemoryContext context, long *next_ms)
{
	MemoryContext old = MemoryContextSwitchTo(context);
	List	   *due = TopologyDueDeliveries(OUTBOX_BATCH, next_ms);
	List	   *rows = NIL;
	ListCell   *lc;

	foreach(lc, due)
	{
		Delivery   *d = palloc0(sizeof(Delivery));
		CdTopologyDelivery *row = lfirst(lc);
		int			p = 0;

		d->row = *row;
		d->snapshot = strcmp(row->kind, "snapshot") == 0;
		/* snapshot: group, version, snapshot; state: group, channel, version, value */
		ValuesToParam(CStringGetTextDatum(row->group_name), false, TEXTOID, &d->params[p++]);
		if (!d->snapshot)
			ValuesToParam(CStringGetTextDatum(row->channel), false, TEXTOID, &d->params[p++]);
		ValuesToParam(Int64GetDatum(row->version), false, INT8OID, &d->params[p++]);
		ValuesToParam(row->payload ? JsonbPGetDatum(row->payload) : (Datum) 0,
					  row->payload == NULL, JSONBOID, &d->params[p++]);
		d->nparams = p;
		rows = lappend(rows, d);
	}
	MemoryContextSwitchTo(old);
	return rows;
}

/*
 * members_of groups a pass's deliveries (ordered by owner and member) into
 * members.
 */
static List *
members_of(List *rows)
{
	List	   *members = NIL;
	Member	   *m = NULL;
	ListCell   *lc;

	foreach(lc, rows)
	{
		Delivery   *d = lfirst(lc);

		if (m == NULL || m->owner != d->row.owner || strcmp(m->name, d->row.member) != 0)
		{
			m = palloc0(sizeof(Member));
			m->name = d->row.member;
			m->owner = d->row.owner;
			m->step = -1;
			members = lappend(members, m);
		}
		m->attempts = Max(m->attempts, d->row.attempts);
		m->deliveries = lappend(m->deliveries, d);
	}
	return members;
}

/*
 * start_order sorts one owner's members as they are started (see the
 * file's header).
 */
static int
start_order(const ListCell *a, const ListCell *b)
{
	const Member *x = lfirst(a);
	const Member *y = lfirst(b);

	if (x->synchronous != y->synchronous)
		return x->synchronous ? 1 : -1;
	if (x->connected != y->connected)
		return x->connected ? -1 : 1;
	if ((x->attempts > 0) != (y->attempts > 0))
		return x->attempts > 0 ? 1 : -1;
	return strcmp(x->name, y->name);
}

/*
 * member_advance moves a member to its next statement: first the
 * shard-side DDL when it is needed, then each delivery.  With 'out'
 * holding the outcome of the statement sent last, a failure ends the
 * member's sequence (its other deliveries wait for its retry).  Returns
 * whether there is a next statement, set in 'out'.
 */
static bool
member_advance(Member *m, CdFanoutShard *out)
{
	const CdAdapter *adapter = AdapterForDialect(m->shard->dialect);
	Delivery   *d;

	if (m->step >= 0)
	{
		if (!out->ok)
		{
			/* a connection's failure says why in its detail */
			m->error = out->detail ?
				psprintf("%s: %s", out->error ? out->error : "unknown error", out->detail) :
				pstrdup(out->error ? out->error : "unknown error");
			set_ensured(m->shard->serverid, false);
			return false;
		}
		if (m->step >= m->nddl)
			((Delivery *) list_nth(m->deliveries, m->step - m->nddl))->ok = true;
		else if (m->step == m->nddl - 1)
			set_ensured(m->shard->serverid, true);
	}
	m->step++;
	if (m->step < m->nddl)
	{
		out->sql = adapter->topology_ddl[m->step];
		out->nparams = 0;
		out->params = NULL;
		return true;
	}
	if (m->step - m->nddl >= list_length(m->deliveries))
		return false;
	d = list_nth(m->deliveries, m->step - m->nddl);
	out->sql = d->snapshot ? adapter->topology_publish : adapter->topology_put_state;
	out->nparams = d->nparams;
	out->params = d->params;
	return true;
}

static bool
member_next(CdFanoutShard *self)
{
	return member_advance((Member *) self->arg, self);
}

/*
 * deliver sends the deliveries of 'members' (one owner's, current role
 * that owner) in one fan-out, in a transaction of its own: the shards'
 * statements commit on their own, and nothing is recorded yet.
 */
static void
deliver(List *members, MemoryContext context)
{
	CdFanoutShard *shards = MemoryContextAllocZero(context, sizeof(CdFanoutShard) *
												   Max(list_length(members), 1));
	List	   *reachable = NIL;
	int			n = 0;
	int			nest;
	ListCell   *lc;
	MemoryContext old;

	WorkerBegin();
	old = MemoryContextSwitchTo(context);
	foreach(lc, members)
	{
		Member	   *m = lfirst(lc);
		const CdShard *shard = ShardLookupOptional(m->name);
		CdShard    *copy;

		if (shard == NULL || !OidIsValid(shard->serverid))
		{
			m->error = psprintf(shard == NULL ? "shard \"%s\" is not registered" :
								"shard \"%s\" has no collegedb server any more", m->name);
			continue;
		}
		/* the shard cache may be rebuilt while the shards work */
		copy = palloc(sizeof(CdShard));
		*copy = *shard;
		m->shard = copy;
		m->connected = ConnectionIsOpen(copy);
		m->synchronous = AdapterForDialect(copy->dialect)->send == NULL;
		if (!is_ensured(copy->serverid))
			for (const char *const *ddl = AdapterForDialect(copy->dialect)->topology_ddl; *ddl; ddl++)
				m->nddl++;
		reachable = lappend(reachable, m);
	}
	list_sort(reachable, start_order);
	foreach(lc, reachable)
	{
		Member	   *m = lfirst(lc);

		shards[n].shard = m->shard;
		shards[n].next = member_next;
		shards[n].arg = m;
		(void) member_advance(m, &shards[n]);
		n++;
	}

	/* every member at once, each statement bounded, a timed-out cancel too */
	nest = NewGUCNestLevel();
	WorkerSetLocal("collegedb.fanout_timeout", CollegeTopologyTimeout);
	WorkerSetLocal("collegedb.cleanup_timeout", Max(Min(CollegeCleanupTimeout, CollegeTopologyTimeout), 1));
	WorkerSetLocal("collegedb.fanout_concurrency", Min(Max(n, CollegeFanoutConcurrency), 1024));
	FanoutRun(shards, n, NULL, 0, NULL, CD_FANOUT_AUTOCOMMIT);
	AtEOXact_GUC(true, nest);
	MemoryContextSwitchTo(old);
	WorkerCommit();
}

/*
 * pause_for_tests stops the coordinator, when the test-only setting
 * collegedb.test_pause_after_delivery names a group of this pass that a
 * shard took a delivery of, between the shards' commits and the outbox's:
 * until it is killed, or the setting no longer names the group.
 */
static void
pause_for_tests(List *members)
{
	const char *group = NULL;
	ListCell   *lc;
	ListCell   *dc;

	if (CollegeTestPauseAfterDelivery == NULL || CollegeTestPauseAfterDelivery[0] == '\0')
		return;
	foreach(lc, members)
		foreach(dc, ((Member *) lfirst(lc))->deliveries)
		{
			Delivery   *d = lfirst(dc);

			if (d->ok && strcmp(d->row.group_name, CollegeTestPauseAfterDelivery) == 0)
				group = d->row.group_name;
		}
	if (group == NULL)
		return;
	elog(LOG, "collegedb coordinator: delivery of topology group \"%s\" paused after the shards answered",
		 group);
	while (CollegeTestPauseAfterDelivery != NULL &&
		   strcmp(CollegeTestPauseAfterDelivery, group) == 0)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 100, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
	}
}

/*
 * record writes the outcome of a pass's deliveries to the outbox, in a
 * transaction of its own.
 */
static void
record(List *members)
{
	ListCell   *lc;
	ListCell   *dc;

	WorkerBegin();
	foreach(lc, members)
	{
		Member	   *m = lfirst(lc);

		foreach(dc, m->deliveries)
		{
			Delivery   *d = lfirst(dc);

			if (d->ok)
				TopologyDelivered(&d->row);
			else
				TopologyDeliveryFailed(&d->row, m->error ? m->error : "not attempted");
		}
		if (m->error)
			ereport(LOG,
					(errmsg("collegedb coordinator: could not deliver topology to shard \"%s\" (attempt %d): %s",
							m->name, m->attempts + 1, m->error)));
	}
	WorkerCommit();
}

/*
 * deliver_as runs one owner's deliveries as that role and records how
 * they went; an error of the front fails every delivery not done yet.
 */
static void
deliver_as(Oid owner, List *members, MemoryContext context)
{
	Oid			save_userid;
	int			save_sec;

	GetUserIdAndSecContext(&save_userid, &save_sec);
	SetUserIdAndSecContext(owner, save_sec | SECURITY_LOCAL_USERID_CHANGE);
	PG_TRY();
	{
		deliver(members, context);
		MemoryContextSwitchTo(context);
	}
	PG_CATCH();
	{
		ErrorData  *edata = WorkerCatchError(context);
		ListCell   *lc;

		SetUserIdAndSecContext(owner, save_sec | SECURITY_LOCAL_USERID_CHANGE);
		foreach(lc, members)
		{
			Member	   *m = lfirst(lc);

			if (m->error == NULL)
				m->error = RemoteErrorText(edata);
		}
	}
	PG_END_TRY();
	SetUserIdAndSecContext(save_userid, save_sec);
	pause_for_tests(members);
	record(members);
}

/*
 * OutboxDeliver makes one delivery pass in the current database and
 * returns how long the coordinator may sleep before the next one is due
 * (0: look again at once; -1: nothing is waiting).  Errors are logged, and
 * the pass ends; it never throws but for termination.
 */
long
OutboxDeliver(void)
{
	MemoryContext context = CurrentMemoryContext;
	List	   *members = NIL;
	long		next_ms = -1;
	ListCell   *lc;

	PG_TRY();
	{
		List	   *rows;

		WorkerBegin();
		rows = load_due(context, &next_ms);
		WorkerCommit();
		MemoryContextSwitchTo(context);
		members = members_of(rows);
		while (members != NIL)
		{
			Oid			owner = ((Member *) linitial(members))->owner;
			List	   *own = NIL;

			foreach(lc, members)
			{
				if (((Member *) lfirst(lc))->owner == owner)
					own = lappend(own, lfirst(lc));
				else
					break;
			}
			members = list_copy_tail(members, list_length(own));
			deliver_as(owner, own, context);
			MemoryContextSwitchTo(context);
			next_ms = 0;
		}
	}
	PG_CATCH();
	{
		ErrorData  *edata = WorkerCatchError(context);

		ereport(LOG,
				(errmsg("collegedb coordinator: topology delivery failed: %s", RemoteErrorText(edata))));
		next_ms = 1000;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(context);
	pgstat_report_activity(STATE_IDLE, NULL);
	return next_ms;
}
