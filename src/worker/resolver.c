/*-------------------------------------------------------------------------
 *
 * resolver.c
 *	  The resolver: a database's recovery passes of two-phase commit
 *	  (remote/recovery.c), in a worker of their own beside the coordinator.
 *
 * A prepared transaction keeps its locks on its shard until it is
 * resolved, key locks included, and a move of such a key waits for them.
 * When the coordinator itself runs that move (one it took over after a
 * crash, or a scheduled job's), a recovery pass in the coordinator's own
 * loop would only come after the move, which waits for the pass: neither
 * would end.  So while the coordinator runs moves or jobs, the passes run
 * in a dynamic "collegedb resolver" worker, which the coordinator starts
 * before that work (ResolverEnsure) and stops once its loop is idle again
 * (ResolverStop), and which waits for nothing but the shards' answers.
 * It also exits when its coordinator is gone (the launcher's table no
 * longer names it), when the extension is gone or of another version, or
 * when collegedb.database no longer serves the database.  When no worker
 * slot is free for a resolver, the coordinator runs its passes itself,
 * as it does while idle, and tries to start one again later.
 *
 * A pass runs at a loop's first tick and every
 * collegedb.recovery_interval, skipped while nothing can have been left
 * since a pass that found nothing (ResolverTick).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "catalog/catalog.h"
#include "catalog/decisions.h"
#include "collegedb.h"
#include "remote/remote.h"
#include "worker/launcher.h"
#include "worker/resolver.h"
#include "worker/unit.h"

/* how often a coordinator tries again to start a resolver that is missing */
#define RESOLVER_RETRY_MS 1000

/*
 * run_pass runs one pass of the resolver's (a recovery pass of two-phase
 * commit, a pass of deadlock detection) in its own transaction, logging an
 * error rather than dying of it (a shard that is down is retried at the
 * next pass), and then closes its shard connections: a pass every few
 * seconds does not need them kept, and a shard restarted meanwhile is
 * reached afresh.  Returns what the pass returned, false after an error.
 */
static bool
run_pass(bool (*pass) (void))
{
	MemoryContext context = CurrentMemoryContext;
	bool		result = false;

	PG_TRY();
	{
		WorkerBegin();
		result = pass();
		WorkerCommit();
		/* no shard connection is held between passes */
		(void) ConnectionDisconnectAll();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(context);
		EmitErrorReport();
		FlushErrorState();
		AbortCurrentTransaction();
		(void) ConnectionDisconnectAll();
		result = false;
	}
	PG_END_TRY();
	return result;
}

/* a recovery pass: true when it found nothing */
static bool
recover_prepared(void)
{
	return RecoveryRun(true) == NIL && DecisionList() == NIL;
}

/* a pass of the detection of deadlocks across shards (remote/deadlock.c) */
static bool
detect_deadlocks(void)
{
	DeadlockRun();
	return true;
}

/*
 * ResolverTick runs a pass of deadlock detection at every tick when one
 * is due, and a recovery pass when one is due: at the first tick, then
 * every collegedb.recovery_interval unless the last pass found nothing
 * and no transaction has begun two-phase commit since that pass's quiet
 * reading (each pass opens a connection to every shard).
 */
void
ResolverTick(ResolverState *state)
{
	uint64		begun;
	bool		quiet;

	if (DeadlockDue())
		(void) run_pass(detect_deadlocks);
	if (state->last_pass != 0 &&
		!TimestampDifferenceExceeds(state->last_pass, GetCurrentTimestamp(),
									CollegeRecoveryInterval))
		return;
	quiet = ActivityTwoPhaseQuiet(&begun);
	if (!state->recovered_all || !quiet || begun != state->recovered_begun)
	{
		state->recovered_all = run_pass(recover_prepared) && quiet;
		state->recovered_begun = begun;
	}
	state->last_pass = GetCurrentTimestamp();
}

/*
 * ResolverEnsure, in a coordinator, starts its resolver when none runs
 * (the first call, or the last one exited); false when none runs and none
 * could be started, so that the coordinator runs the ticks itself.
 */
bool
ResolverEnsure(BackgroundWorkerHandle **handle, TimestampTz *last_try)
{
	BackgroundWorker worker;
	MemoryContext old;
	bool		started;
	pid_t		pid;

	if (*handle != NULL)
	{
		if (GetBackgroundWorkerPid(*handle, &pid) != BGWH_STOPPED)
			return true;
		pfree(*handle);
		*handle = NULL;
	}
	if (*last_try != 0 &&
		!TimestampDifferenceExceeds(*last_try, GetCurrentTimestamp(), RESOLVER_RETRY_MS))
		return false;
	*last_try = GetCurrentTimestamp();
	WorkerDescribe(&worker, "collegedb_resolver_main", "collegedb resolver",
				   "collegedb resolver");
	worker.bgw_main_arg = ObjectIdGetDatum(MyDatabaseId);
	memcpy(worker.bgw_extra, &MyProcPid, sizeof(MyProcPid));
	/* the handle outlives the caller's loop iteration */
	old = MemoryContextSwitchTo(TopMemoryContext);
	started = RegisterDynamicBackgroundWorker(&worker, handle);
	MemoryContextSwitchTo(old);
	if (!started)
	{
		*handle = NULL;
		return false;
	}
	return true;
}

/*
 * ResolverStop, in a coordinator, stops its resolver; true when one was
 * running (or starting).
 */
bool
ResolverStop(BackgroundWorkerHandle **handle)
{
	if (*handle == NULL)
		return false;
	TerminateBackgroundWorker(*handle);
	pfree(*handle);
	*handle = NULL;
	return true;
}

/*
 * still_wanted says whether this resolver goes on: its coordinator still
 * serves the database, and the database has this version of collegedb.
 */
static bool
still_wanted(pid_t coordinator)
{
	bool		wanted;

	if (LauncherCoordinatorPid() != coordinator)
		return false;
	WorkerBegin();
	wanted = OidIsValid(get_extension_oid("collegedb", true)) &&
		CatalogExtensionIsCurrent() && LauncherServesDatabase();
	WorkerCommit();
	return wanted;
}

/*
 * collegedb_resolver_main is a resolver's loop; its database comes from
 * the coordinator (the main argument), and so does the coordinator's pid
 * (bgw_extra).
 */
void
collegedb_resolver_main(Datum arg)
{
	Oid			database = DatumGetObjectId(arg);
	pid_t		coordinator;
	ResolverState state;
	MemoryContext loop_context;

	memcpy(&coordinator, MyBgworkerEntry->bgw_extra, sizeof(coordinator));
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(database, InvalidOid, 0);
	WorkerSettleLoop("collegedb resolver");

	memset(&state, 0, sizeof(state));
	loop_context = AllocSetContextCreate(TopMemoryContext, "collegedb resolver loop",
										 ALLOCSET_DEFAULT_SIZES);
	for (;;)
	{
		MemoryContext old = WorkerLoopTop(loop_context);

		if (!still_wanted(coordinator))
			proc_exit(0);
		ResolverTick(&state);
		MemoryContextSwitchTo(old);
		pgstat_report_activity(STATE_IDLE, NULL);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 Min(CollegeRecoveryInterval, 500), PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
