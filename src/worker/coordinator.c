/*-------------------------------------------------------------------------
 *
 * coordinator.c
 *	  The coordinator background worker: recovers interrupted moves and
 *	  runs scheduled jobs.
 *
 * Registered when collegedb is preloaded, it connects to the database
 * named by collegedb.database (one coordinator per server) and, twice a
 * second or when woken:
 *	- resumes every move that is not finished and whose worker is gone
 *	  (its lease expired, or its process no longer exists: after a crash
 *	  or a restart of the server), from the step its journal reached;
 *	- requeues a running job whose worker is gone, and runs the oldest
 *	  queued job (schedule_rebalance), as the role that scheduled it.
 * One transaction per unit of work; an error is logged and recorded, and
 * the loop goes on.  SIGHUP reloads the configuration; a change of
 * collegedb.database restarts the worker.  Without the extension in that
 * database it waits.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "collegedb.h"
#include "worker/worker.h"

char	   *CollegeWorkerDatabase = NULL;
char	   *CollegeTestPauseAfterStep = NULL;

/*
 * WorkerInit registers the coordinator; only while preloading.
 */
void
WorkerInit(void)
{
	BackgroundWorker worker;

	if (!process_shared_preload_libraries_in_progress)
		return;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 1;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "collegedb");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "collegedb_coordinator_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "collegedb coordinator");
	snprintf(worker.bgw_type, BGW_MAXLEN, "collegedb coordinator");
	RegisterBackgroundWorker(&worker);
}

typedef struct Pending
{
	int64		id;
	Oid			owner;
} Pending;

/*
 * find_work lists the moves to resume and the job to run, in one
 * transaction; false when the extension is not installed here.
 */
static bool
find_work(List **moves, Pending *job)
{
	MemoryContext caller = CurrentMemoryContext;

	job->id = 0;
	*moves = NIL;
	WorkerBegin();
	if (!OidIsValid(get_namespace_oid("collegedb", true)) ||
		!OidIsValid(get_relname_relid("move", get_namespace_oid("collegedb", true))))
	{
		WorkerCommit();
		return false;
	}

	/* a running job whose worker is gone starts over (agreed keys are skipped) */
	if (SPI_execute("UPDATE collegedb.job SET state = 'queued' WHERE state = 'running' AND "
					"NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = lease_pid)",
					false, 0) < 0)
		elog(ERROR, "could not requeue orphaned jobs");

	if (SPI_execute("SELECT m.id, coalesce(j.owner, 10) FROM collegedb.move m "
					"LEFT JOIN collegedb.job j ON j.id = m.job_id "
					"WHERE m.step NOT IN ('done', 'failed') AND (m.lease_until IS NULL "
					"OR m.lease_until < now() OR NOT EXISTS "
					"(SELECT 1 FROM pg_stat_activity a WHERE a.pid = m.lease_pid)) ORDER BY m.id",
					false, 0) < 0)
		elog(ERROR, "could not look for interrupted moves");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		MemoryContext old = MemoryContextSwitchTo(caller);
		Pending    *p = palloc(sizeof(Pending));

		p->id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
		p->owner = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));
		*moves = lappend(*moves, p);
		MemoryContextSwitchTo(old);
	}

	if (SPI_execute("SELECT id, owner FROM collegedb.job WHERE state = 'queued' "
					"ORDER BY id LIMIT 1", false, 0) < 0)
		elog(ERROR, "could not look for queued jobs");
	if (SPI_processed > 0)
	{
		bool		isnull;

		job->id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
		job->owner = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	}
	WorkerCommit();
	return true;
}

/*
 * as_owner runs a unit of work as the role that asked for it (its user
 * mappings reach the shards), logging an error rather than dying of it.
 */
static void
as_owner(Oid owner, void (*work) (int64), int64 id, const char *what)
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
		elog(LOG, "collegedb coordinator: %s %ld did not finish; it will be retried", what, (long) id);
	}
	PG_END_TRY();
	SetUserIdAndSecContext(save_userid, save_sec);
}

/*
 * collegedb_coordinator_main is the coordinator's loop.
 */
void
collegedb_coordinator_main(Datum arg)
{
	MemoryContext loop_context;
	char	   *database;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	database = pstrdup(CollegeWorkerDatabase ? CollegeWorkerDatabase : "postgres");
	BackgroundWorkerInitializeConnection(database, NULL, 0);
	pgstat_report_appname("collegedb coordinator");
	SetConfigOption("lock_timeout", "60s", PGC_SUSET, PGC_S_OVERRIDE);

	loop_context = AllocSetContextCreate(TopMemoryContext, "collegedb coordinator loop",
										 ALLOCSET_DEFAULT_SIZES);
	for (;;)
	{
		List	   *moves;
		Pending		job;
		ListCell   *lc;
		MemoryContext old;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			if (strcmp(database, CollegeWorkerDatabase ? CollegeWorkerDatabase : "postgres") != 0)
			{
				elog(LOG, "collegedb coordinator: collegedb.database changed; restarting");
				proc_exit(1);
			}
		}

		MemoryContextReset(loop_context);
		old = MemoryContextSwitchTo(loop_context);
		if (find_work(&moves, &job))
		{
			foreach(lc, moves)
			{
				Pending    *p = lfirst(lc);

				elog(LOG, "collegedb coordinator: resuming move %ld", (long) p->id);
				as_owner(p->owner, MoveRun, p->id, "move");
			}
			if (job.id > 0)
				as_owner(job.owner, JobRun, job.id, "job");
		}
		MemoryContextSwitchTo(old);
		pgstat_report_activity(STATE_IDLE, NULL);

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 job.id > 0 ? 0 : 500, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
