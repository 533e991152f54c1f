/*-------------------------------------------------------------------------
 *
 * coordinator.c
 *	  A coordinator: recovers interrupted moves and runs scheduled jobs, in
 *	  one database.
 *
 * The launcher (launcher.c) starts one for every database that takes
 * connections.  A coordinator whose database has no collegedb says so to
 * the launcher and exits at once; so does one whose extension is dropped.
 * Twice a second, or when woken, it (unless a restore of its catalog is
 * under way: JournalRestoring)
 *	- takes over every unfinished move whose holder is gone (its process
 *	  no longer exists: it died, or the server restarted) once the move's
 *	  retry is due, and runs it from the step its journal reached; a move
 *	  that gave up has the target's copy of its key removed instead;
 *	- leaves a move whose holder is alive to it, however long its step
 *	  takes, saying so in the log once when the move is past its lease;
 *	- requeues a running job whose worker is gone, and runs the oldest
 *	  queued job (schedule_rebalance), as the role that scheduled it;
 *	- delivers the topology groups' snapshots and state values that are
 *	  due (outbox.c), sleeping no longer than until the next one is due.
 *	- when it starts and every collegedb.recovery_interval, resolves the
 *	  prepared transactions that two-phase commit left on the shards
 *	  (remote/recovery.c), skipping the pass while nothing can have been
 *	  left since one that found nothing; while it runs a move or a job,
 *	  which may wait for one of them, a resolver worker does that instead
 *	  (resolver.c).
 * One transaction per unit of work; an error is logged and recorded, and
 * the loop goes on.  SIGHUP reloads the configuration; a coordinator that
 * collegedb.database no longer allows exits.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/dbcommands.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "catalog/catalog.h"
#include "catalog/journal.h"
#include "collegedb.h"
#include "worker/coordinator.h"
#include "worker/jobs.h"
#include "worker/launcher.h"
#include "worker/moves.h"
#include "worker/outbox.h"
#include "worker/resolver.h"
#include "worker/unit.h"

typedef struct Pending
{
	int64		id;
	Oid			owner;
} Pending;

/* moves past their lease whose live holder was already reported */
static List *warned = NIL;

/*
 * warn_once logs, once per move and holder, that a live mover is past its
 * lease: it keeps the move (only a holder that is gone loses it).
 */
static void
warn_once(int64 id, int64 generation, int pid)
{
	ListCell   *lc;
	MemoryContext old;
	int64	   *entry;

	foreach(lc, warned)
	{
		int64	   *w = lfirst(lc);

		if (w[0] == id && w[1] == generation)
			return;
	}
	ereport(LOG,
			(errmsg("collegedb coordinator: move " INT64_FORMAT " is past its lease, and its mover (pid %d) is still at work: it keeps the move",
					id, pid),
			 errhint("A move changes hands only when its worker is gone; terminate the worker to hand it over.")));
	old = MemoryContextSwitchTo(TopMemoryContext);
	if (list_length(warned) >= 1000)
	{
		list_free_deep(warned);
		warned = NIL;
	}
	entry = palloc(sizeof(int64) * 2);
	entry[0] = id;
	entry[1] = generation;
	warned = lappend(warned, entry);
	MemoryContextSwitchTo(old);
}

typedef enum WorkFound
{
	WORK_FOUND,
	WORK_NO_EXTENSION,
	WORK_NOT_SERVED,
	WORK_RESTORING
} WorkFound;

/* the restore of the catalog that this coordinator waits for was logged */
static bool restore_logged = false;

/*
 * restoring says whether a restore of the catalog is under way (see
 * JournalRestoring), logging when the coordinator starts and stops
 * waiting for it.
 */
static bool
restoring(void)
{
	bool		now = JournalRestoring();

	if (now != restore_logged)
	{
		char	   *database = get_database_name(MyDatabaseId);

		if (now)
			ereport(LOG,
					(errmsg("collegedb coordinator: the catalog of database \"%s\" is being restored; jobs and moves wait for the restore to end",
							database),
					 errdetail("collegedb.job or collegedb.move holds ids that its sequence has not handed out; a restore sets the sequences after the rows of every table.")));
		else
			ereport(LOG,
					(errmsg("collegedb coordinator: the restore of database \"%s\" has set the catalog's sequences; jobs and moves go on",
							database)));
		restore_logged = now;
	}
	return now;
}

/*
 * find_work lists the moves to take over and the job to run, in one
 * transaction.
 */
static WorkFound
find_work(List **moves, Pending *job)
{
	MemoryContext caller = CurrentMemoryContext;
	ListCell   *lc;

	job->id = 0;
	*moves = NIL;
	WorkerBegin();
	if (!OidIsValid(get_extension_oid("collegedb", true)))
	{
		WorkerCommit();
		return WORK_NO_EXTENSION;
	}
	/* the library serves only its own version of the catalog */
	if (!CatalogExtensionIsCurrent())
	{
		WorkerCommit();
		ereport(LOG,
				(errmsg("collegedb coordinator: the extension in this database is not version %s; waiting for ALTER EXTENSION collegedb UPDATE",
						COLLEGEDB_VERSION)));
		return WORK_NO_EXTENSION;
	}
	if (!LauncherServesDatabase())
	{
		WorkerCommit();
		return WORK_NOT_SERVED;
	}

	/*
	 * pg_restore loads collegedb.job and collegedb.move before the shards
	 * and registered tables: a job or move taken over then fails for want
	 * of them.  Nothing is taken over until the restore has ended (the
	 * requeue of orphan jobs checks it in its own statement).
	 */
	if (restoring())
	{
		WorkerCommit();
		return WORK_RESTORING;
	}

	/* a running job whose worker is gone starts over (agreed keys are skipped) */
	JournalRequeueOrphanJobs();

	foreach(lc, JournalUnfinishedMoves())
	{
		CdUnfinishedMove *u = lfirst(lc);

		if (u->alive && u->pid != 0)
		{
			if (u->expired)
				warn_once(u->id, u->generation, u->pid);
		}
		else if (u->due)
		{
			MemoryContext old = MemoryContextSwitchTo(caller);
			Pending    *p = palloc(sizeof(Pending));

			p->id = u->id;
			p->owner = u->owner;
			*moves = lappend(*moves, p);
			MemoryContextSwitchTo(old);
		}
	}

	if (!JournalNextQueuedJob(&job->id, &job->owner))
		job->id = 0;

	/*
	 * A restore that began after the check above may have loaded the job
	 * or moves just read, and not yet their shards: checked again, after
	 * the reads (a restore that has ended since loaded everything).
	 */
	if (restoring())
	{
		list_free_deep(*moves);
		*moves = NIL;
		job->id = 0;
		WorkerCommit();
		return WORK_RESTORING;
	}
	WorkerCommit();
	return WORK_FOUND;
}

/*
 * resume_move takes over a move whose holder is gone and runs it (or, when
 * it gave up, cleans it up); a move another process took first is left.
 */
static void
resume_move(int64 move_id)
{
	int64		generation;
	bool		abandoned = false;

	WorkerBegin();
	generation = JournalTakeMove(move_id);
	if (generation > 0)
		abandoned = JournalMoveAbandoned(move_id);
	WorkerCommit();
	if (generation == 0)
		return;
	if (abandoned)
	{
		elog(LOG, "collegedb coordinator: cleaning up after move " INT64_FORMAT, move_id);
		MoveCleanUp(move_id, generation);
		return;
	}
	elog(LOG, "collegedb coordinator: resuming move " INT64_FORMAT, move_id);
	MoveRun(move_id, generation);
}

/*
 * as_owner runs a unit of work as the role that asked for it (its user
 * mappings reach the shards), logging an error rather than dying of it.
 */
static void
as_owner(Oid owner, void (*work) (int64), int64 id, bool is_job)
{
	MemoryContext context = CurrentMemoryContext;
	Oid			save_userid;
	int			save_sec;

	GetUserIdAndSecContext(&save_userid, &save_sec);
	SetUserIdAndSecContext(owner, save_sec | SECURITY_LOCAL_USERID_CHANGE);
	PG_TRY();
	{
		work(id);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(context);
		EmitErrorReport();
		FlushErrorState();
		AbortCurrentTransaction();
		if (is_job)
			elog(LOG, "collegedb coordinator: job " INT64_FORMAT " did not finish; it will be retried", id);
		else
			elog(LOG, "collegedb coordinator: move " INT64_FORMAT " did not finish; it will be retried", id);
	}
	PG_END_TRY();
	SetUserIdAndSecContext(save_userid, save_sec);
}

/*
 * collegedb_coordinator_main is a coordinator's loop; its database comes
 * from the launcher (the main argument, and its slot in bgw_extra).
 */
void
collegedb_coordinator_main(Datum arg)
{
	Oid			database = DatumGetObjectId(arg);
	int			slot;
	MemoryContext loop_context;
	BackgroundWorkerHandle *resolver = NULL;
	TimestampTz resolver_tried = 0;
	ResolverState recovery;
	bool		resolver_runs;

	memcpy(&slot, MyBgworkerEntry->bgw_extra, sizeof(slot));
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	if (!LauncherClaimSlot(slot, database))
		proc_exit(0);
	BackgroundWorkerInitializeConnectionByOid(database, InvalidOid, 0);
	WorkerSettleLoop("collegedb coordinator");

	memset(&recovery, 0, sizeof(recovery));
	loop_context = AllocSetContextCreate(TopMemoryContext, "collegedb coordinator loop",
										 ALLOCSET_DEFAULT_SIZES);
	for (;;)
	{
		List	   *moves;
		Pending		job;
		WorkFound	found;
		ListCell   *lc;
		MemoryContext old;
		long		next_delivery;

		old = WorkerLoopTop(loop_context);
		found = find_work(&moves, &job);
		if (found == WORK_NO_EXTENSION)
		{
			LauncherNoExtension();
			proc_exit(0);
		}
		if (found == WORK_NOT_SERVED)
			proc_exit(0);
		if (found == WORK_RESTORING)
		{
			/* no delivery or recovery either: their rows are half loaded */
			MemoryContextSwitchTo(old);
			pgstat_report_activity(STATE_IDLE, NULL);
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 500, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			continue;
		}

		/*
		 * The prepared transactions two-phase commit left: while a move or
		 * a job runs here, which may wait for one of them, the resolver's
		 * (resolver.c), started before that work; otherwise this loop's
		 * own, below.  A pass runs at once when the loop takes them back.
		 */
		if (moves != NIL || job.id > 0)
			resolver_runs = ResolverEnsure(&resolver, &resolver_tried);
		else
		{
			if (ResolverStop(&resolver))
				memset(&recovery, 0, sizeof(recovery));
			resolver_runs = false;
		}
		foreach(lc, moves)
		{
			Pending    *p = lfirst(lc);

			as_owner(p->owner, resume_move, p->id, false);
		}
		if (job.id > 0)
			as_owner(job.owner, JobRun, job.id, true);
		next_delivery = OutboxDeliver();
		if (!resolver_runs)
			ResolverTick(&recovery);
		MemoryContextSwitchTo(old);
		pgstat_report_activity(STATE_IDLE, NULL);

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 job.id > 0 ? 0 : next_delivery < 0 ? 500 : Min(next_delivery, 500),
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
