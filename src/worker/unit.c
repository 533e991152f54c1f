/*-------------------------------------------------------------------------
 *
 * unit.c
 *	  A background worker's unit of work, as worker_spi does it: one
 *	  transaction each, begun and committed here, an error caught and
 *	  cleared so that the worker can record it and go on; and the
 *	  description of collegedb's dynamic workers.
 *
 * The units themselves (a step of a move, a key of a job, a look for
 * work) are the other files of worker/.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "postmaster/interrupt.h"
#include "pgstat.h"
#include "storage/lmgr.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "worker/unit.h"

/*
 * The memory context that was current when the unit began: committing or
 * aborting a transaction leaves TopMemoryContext current, and a worker
 * loop that went on there would leak into it (or keep pointers into the
 * transaction's memory without noticing); the unit's end switches back.
 */
static MemoryContext unit_caller_context = NULL;

/*
 * WorkerBegin starts a transaction for one unit of a worker's work, with a
 * snapshot.  It first takes a share lock on the extension itself, which
 * DROP EXTENSION locks before anything else: a worker and a DROP EXTENSION
 * then wait for each other's transaction instead of deadlocking on the
 * catalog tables, which they would lock in different orders.
 */
void
WorkerBegin(void)
{
	Oid			extension;

	unit_caller_context = CurrentMemoryContext;
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	extension = get_extension_oid("collegedb", true);
	if (OidIsValid(extension))
		LockDatabaseObject(ExtensionRelationId, extension, 0, AccessShareLock);
	PushActiveSnapshot(GetTransactionSnapshot());
}

/*
 * WorkerCommit commits it (the shards' remote transactions commit first)
 * and makes the context current that was when it began: whatever the unit
 * allocated in the transaction's memory is gone, so a caller must copy
 * what it keeps (or read counts) before this.
 */
void
WorkerCommit(void)
{
	PopActiveSnapshot();
	CommitTransactionCommand();
	if (unit_caller_context != NULL)
		MemoryContextSwitchTo(unit_caller_context);
	unit_caller_context = NULL;
}

/*
 * WorkerAbort rolls the unit's transaction back (the shards' remote
 * transactions too) and makes the context current that was when it began.
 */
void
WorkerAbort(void)
{
	AbortCurrentTransaction();
	if (unit_caller_context != NULL)
		MemoryContextSwitchTo(unit_caller_context);
	unit_caller_context = NULL;
}

/*
 * WorkerSetLocal sets an integer setting until the GUC nest level that the
 * caller opened (NewGUCNestLevel) is popped (AtEOXact_GUC), or the
 * transaction ends.
 */
void
WorkerSetLocal(const char *name, int value)
{
	char		buf[32];

	snprintf(buf, sizeof(buf), "%d", value);
	(void) set_config_option(name, buf, PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
}

/*
 * WorkerCatchError, in a PG_CATCH block, takes the error into 'context',
 * clears it and aborts the transaction, so that the caller can record the
 * error in a new one.
 */
ErrorData *
WorkerCatchError(MemoryContext context)
{
	ErrorData  *edata;

	MemoryContextSwitchTo(context);
	edata = CopyErrorData();
	FlushErrorState();
	AbortCurrentTransaction();
	/* the abort leaves TopMemoryContext current */
	MemoryContextSwitchTo(context);
	unit_caller_context = NULL;
	return edata;
}

/*
 * WorkerDescribe fills in a dynamic worker of collegedb's: it connects to a
 * database once recovery has finished, runs 'function', shows as 'type'
 * (tests find workers by it), is never restarted, and notifies the process
 * that starts it.
 */
void
WorkerDescribe(BackgroundWorker *worker, const char *function, const char *type,
			   const char *name)
{
	memset(worker, 0, sizeof(*worker));
	worker->bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker->bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker->bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(worker->bgw_library_name, BGW_MAXLEN, "collegedb");
	snprintf(worker->bgw_function_name, BGW_MAXLEN, "%s", function);
	snprintf(worker->bgw_name, BGW_MAXLEN, "%s", name);
	snprintf(worker->bgw_type, BGW_MAXLEN, "%s", type);
	worker->bgw_notify_pid = MyProcPid;
}

/*
 * WorkerSettleLoop sets up a connected worker that loops over short units
 * of work (the coordinator, the resolver): its name in pg_stat_activity,
 * no lock wait forever, and READ COMMITTED, since recovery reads each
 * decision with a snapshot of its own.
 */
void
WorkerSettleLoop(const char *appname)
{
	pgstat_report_appname(appname);
	SetConfigOption("lock_timeout", "60s", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("default_transaction_isolation", "read committed", PGC_SUSET, PGC_S_OVERRIDE);
}

/*
 * WorkerLoopTop begins one turn of a worker's loop: interrupts, a pending
 * configuration reload, and 'loop_context' emptied and made current (the
 * context that was is returned, for the turn's end).
 */
MemoryContext
WorkerLoopTop(MemoryContext loop_context)
{
	CHECK_FOR_INTERRUPTS();
	if (ConfigReloadPending)
	{
		ConfigReloadPending = false;
		ProcessConfigFile(PGC_SIGHUP);
	}
	MemoryContextReset(loop_context);
	return MemoryContextSwitchTo(loop_context);
}

/*
 * WorkerConnect sets a job or mover worker up: signals, and a connection
 * to the database as the role whose user mappings the job uses.
 */
void
WorkerConnect(Oid database, Oid owner)
{
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(database, owner, 0);
	/* a worker must not hang on a lock forever */
	SetConfigOption("lock_timeout", "60s", PGC_SUSET, PGC_S_OVERRIDE);
}
