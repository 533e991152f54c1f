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
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/interrupt.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "catalog/shards.h"
#include "collegedb.h"
#include "remote/fanout.h"
#include "remote/remote.h"
#include "worker/worker.h"

int			CollegeTopologyTimeout = 10000;
char	   *CollegeTestPauseAfterDelivery = NULL;

/* how many deliveries one pass takes at most */
#define OUTBOX_BATCH 1000

/* one row of the outbox */
typedef struct Delivery
{
	char	   *group_name;
	char	   *kind;
	char	   *channel;		/* "" for a snapshot */
	char	   *member;
	int64		version;
	Oid			owner;
	int			attempts;
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

static Datum
spi_datum(int row, int col, bool *isnull)
{
	return SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col, isnull);
}

/*
 * load_due reads the deliveries that are due, by owner and member, into
 * 'context'; *next_ms is how long until the next one falls due (-1: none
 * left after these).
 */
static List *
load_due(MemoryContext context, long *next_ms)
{
	List	   *rows = NIL;
	MemoryContext old;
	bool		isnull;

	WorkerExec("SELECT d.group_name, d.kind, d.channel, d.member, d.version, d.payload, "
			   "d.owner::oid, d.attempts "
			   "FROM collegedb.topology_delivery d WHERE d.next_attempt_at <= now() "
			   "ORDER BY d.owner::oid, d.member, d.group_name, d.kind, d.channel "
			   "LIMIT " CppAsString2(OUTBOX_BATCH), 0, NULL, NULL, NULL);
	old = MemoryContextSwitchTo(context);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		Delivery   *d = palloc0(sizeof(Delivery));
		Datum		payload;
		bool		no_payload;
		int			p = 0;

		d->group_name = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
		d->kind = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2);
		d->channel = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 3);
		d->member = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 4);
		d->version = DatumGetInt64(spi_datum(i, 5, &isnull));
		payload = spi_datum(i, 6, &no_payload);
		d->owner = DatumGetObjectId(spi_datum(i, 7, &isnull));
		d->attempts = DatumGetInt32(spi_datum(i, 8, &isnull));
		d->snapshot = strcmp(d->kind, "snapshot") == 0;

		/* snapshot: group, version, snapshot; state: group, channel, version, value */
		ValuesToParam(CStringGetTextDatum(d->group_name), false, TEXTOID, &d->params[p++]);
		if (!d->snapshot)
			ValuesToParam(CStringGetTextDatum(d->channel), false, TEXTOID, &d->params[p++]);
		ValuesToParam(Int64GetDatum(d->version), false, INT8OID, &d->params[p++]);
		ValuesToParam(no_payload ? (Datum) 0 : PointerGetDatum(DatumGetJsonbPCopy(payload)),
					  no_payload, JSONBOID, &d->params[p++]);
		d->nparams = p;
		rows = lappend(rows, d);
	}
	MemoryContextSwitchTo(old);

	*next_ms = -1;
	if (WorkerExec("SELECT ceil(extract(epoch FROM min(d.next_attempt_at) - clock_timestamp()) * 1000)::bigint "
				   "FROM collegedb.topology_delivery d WHERE d.next_attempt_at > now()",
				   0, NULL, NULL, NULL) == 1)
	{
		Datum		ms = spi_datum(0, 1, &isnull);

		if (!isnull)
			*next_ms = (long) Max(DatumGetInt64(ms), 0);
	}
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

		if (m == NULL || m->owner != d->owner || strcmp(m->name, d->member) != 0)
		{
			m = palloc0(sizeof(Member));
			m->name = d->member;
			m->owner = d->owner;
			m->step = -1;
			members = lappend(members, m);
		}
		m->attempts = Max(m->attempts, d->attempts);
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
			m->error = pstrdup(out->error ? out->error : "unknown error");
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
 * set_local sets a GUC until the nest level 'AtEOXact_GUC' pops.
 */
static void
set_local(const char *name, int value)
{
	char		buf[32];

	snprintf(buf, sizeof(buf), "%d", value);
	(void) set_config_option(name, buf, PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
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
	set_local("collegedb.fanout_timeout", CollegeTopologyTimeout);
	set_local("collegedb.cleanup_timeout", Max(Min(CollegeCleanupTimeout, CollegeTopologyTimeout), 1));
	set_local("collegedb.fanout_concurrency", Min(Max(n, CollegeFanoutConcurrency), 1024));
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

			if (d->ok && strcmp(d->group_name, CollegeTestPauseAfterDelivery) == 0)
				group = d->group_name;
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
 * delivery_key fills the first four arguments of the statements that
 * find a delivery's row.
 */
static void
delivery_key(const Delivery *d, Datum *values)
{
	values[0] = CStringGetTextDatum(d->group_name);
	values[1] = CStringGetTextDatum(d->kind);
	values[2] = CStringGetTextDatum(d->channel);
	values[3] = CStringGetTextDatum(d->member);
}

/* the row of a delivery, unless a writer holds it */
#define DELIVERY_ROW \
	"d.ctid = (SELECT x.ctid FROM collegedb.topology_delivery x " \
	"WHERE x.group_name = $1 AND x.kind = $2 AND x.channel = $3 AND x.member = $4 %s " \
	"FOR UPDATE SKIP LOCKED)"

/*
 * record writes the outcome of a pass's deliveries to the outbox, in a
 * transaction of its own.
 */
static void
record(List *members)
{
	Oid			done_types[5] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT8OID};
	Oid			failed_types[5] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID};
	char	   *done_sql = psprintf("DELETE FROM collegedb.topology_delivery d WHERE " DELIVERY_ROW,
									"AND x.version = $5");
	char	   *failed_sql = psprintf("UPDATE collegedb.topology_delivery d SET attempts = d.attempts + 1, "
									  "next_attempt_at = clock_timestamp() + %s, last_error = $5 WHERE "
									  DELIVERY_ROW, WORKER_RETRY_DELAY("d.attempts"), "");
	ListCell   *lc;
	ListCell   *dc;

	WorkerBegin();
	foreach(lc, members)
	{
		Member	   *m = lfirst(lc);

		foreach(dc, m->deliveries)
		{
			Delivery   *d = lfirst(dc);
			Datum		values[5];

			delivery_key(d, values);
			if (d->ok)
			{
				values[4] = Int64GetDatum(d->version);
				WorkerExec(done_sql, 5, done_types, values, NULL);
				continue;
			}
			values[4] = CStringGetTextDatum(m->error ? m->error : "not attempted");
			WorkerExec(failed_sql, 5, failed_types, values, NULL);
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
				m->error = edata->message;
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
				(errmsg("collegedb coordinator: topology delivery failed: %s", edata->message)));
		next_ms = 1000;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(context);
	pgstat_report_activity(STATE_IDLE, NULL);
	return next_ms;
}
