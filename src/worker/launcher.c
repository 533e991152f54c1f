/*-------------------------------------------------------------------------
 *
 * launcher.c
 *	  The launcher: one coordinator per database that has the extension.
 *
 * A static background worker, "collegedb launcher", registered when
 * collegedb is preloaded and started once recovery has finished (so a
 * standby runs none until it is promoted).  It connects to no database:
 * it lists the databases from the shared catalog pg_database and keeps one
 * dynamic "collegedb coordinator" (coordinator.c) for each that takes
 * connections and is not a template.  A coordinator that finds no
 * extension in its database says so here and exits; the launcher probes
 * that database again every LAUNCHER_PROBE_INTERVAL, and at once when
 * woken.  A coordinator that dies otherwise is restarted, after 1 s, 2 s,
 * 4 s, ... (at most a minute) while it keeps dying.
 *
 * Wakes come from CREATE EXTENSION and ALTER EXTENSION UPDATE (the script
 * calls collegedb.wake_launcher()) and from any backend that reads the
 * extension's catalog in a database without a live coordinator
 * (LauncherNoticeDatabase); both take effect when that backend's
 * transaction ends, so that the coordinator sees what it committed.
 * collegedb.database, when set, restricts the coordinators to that one
 * database.
 *
 * A coordinator is a connection to its database, and DROP DATABASE,
 * ALTER DATABASE RENAME or SET TABLESPACE, and CREATE DATABASE ... TEMPLATE
 * refuse to run while another session is connected: a utility hook stops
 * the coordinator first and keeps it stopped until the statement ends.
 *
 * The table of coordinators lives in shared memory (shmem.c reserves it);
 * it is what the launcher, the coordinators and the backends share.  This
 * file does not recover moves or run jobs: coordinator.c does.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>
#include <unistd.h>

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "catalog/catalog.h"
#include "collegedb.h"
#include "worker/launcher.h"
#include "worker/unit.h"

PG_FUNCTION_INFO_V1(collegedb_wake_launcher);
PG_FUNCTION_INFO_V1(collegedb_coordinator_status);

/* how many databases the launcher can keep a coordinator for */
#define LAUNCHER_SLOTS 64

/* how often a database without the extension is probed again */
#define LAUNCHER_PROBE_INTERVAL_MS 60000

/* the longest wait before a dying coordinator is started again */
#define LAUNCHER_MAX_BACKOFF_MS 60000

/* how long a DROP DATABASE waits for the database's coordinator to exit */
#define LAUNCHER_HOLD_WAIT_MS 10000

typedef enum SlotState
{
	SLOT_START = 0,				/* start a coordinator once retry_at passed */
	SLOT_RUNNING,				/* one was started */
	SLOT_IDLE					/* it found no extension: probe at retry_at */
} SlotState;

typedef struct CoordinatorSlot
{
	Oid			database;		/* InvalidOid: free */
	NameData	name;
	SlotState	state;
	pid_t		pid;			/* the coordinator, once it runs */
	Latch	   *latch;			/* and its latch */
	bool		no_extension;	/* it exits because there is no extension */
	bool		rewake;			/* woken while it ran: start again at once */
	bool		seen;			/* in the launcher's last list of databases */
	int			failures;		/* deaths in a row */
	bool		no_worker;		/* its last start found no free worker slot */
	TimestampTz retry_at;
	pid_t		held_by;		/* a backend that needs the database alone */
} CoordinatorSlot;

typedef struct LauncherShared
{
	LWLock	   *lock;
	pid_t		launcher_pid;
	Latch	   *latch;
	bool		rescan;			/* list the databases again now */
	bool		full;			/* a database found no room in the table */
	CoordinatorSlot slots[LAUNCHER_SLOTS];
} LauncherShared;


static LauncherShared *launcher = NULL;
static Oid	wake_at_end = InvalidOid;	/* this backend's pending wake */
static bool rescan_at_end = false;	/* and a pending list of the databases */
static ProcessUtility_hook_type prev_process_utility = NULL;

static void launcher_xact_callback(XactEvent event, void *arg);
static void launcher_process_utility(PlannedStmt *pstmt, const char *queryString,
									 bool readOnlyTree, ProcessUtilityContext context,
									 ParamListInfo params, QueryEnvironment *queryEnv,
									 DestReceiver *dest, QueryCompletion *qc);

/*
 * launcher_shmem_size is the size of the coordinator table.
 */
static Size
launcher_shmem_size(void)
{
	return MAXALIGN(sizeof(LauncherShared));
}

/*
 * launcher_shmem_init creates or attaches to the coordinator table; called
 * from shmem.c's startup hook, holding AddinShmemInitLock.
 */
static void
launcher_shmem_init(void)
{
	bool		found;

	launcher = ShmemInitStruct("collegedb launcher", sizeof(LauncherShared), &found);
	if (!found)
	{
		memset(launcher, 0, sizeof(LauncherShared));
		launcher->lock = &(GetNamedLWLockTranche("collegedb launcher"))->lock;
	}
}

/*
 * LauncherInit registers the launcher, its part of shared memory, the
 * transaction callback that sends wakes and the utility hook that stops a
 * coordinator for the statements that need its database alone; only while
 * preloading.
 */
void
LauncherInit(void)
{
	BackgroundWorker worker;

	if (!process_shared_preload_libraries_in_progress)
		return;

	ShmemRegister("collegedb launcher", 1, launcher_shmem_size, launcher_shmem_init);
	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 5;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "collegedb");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "collegedb_launcher_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "collegedb launcher");
	snprintf(worker.bgw_type, BGW_MAXLEN, "collegedb launcher");
	RegisterBackgroundWorker(&worker);

	RegisterXactCallback(launcher_xact_callback, NULL);
	prev_process_utility = ProcessUtility_hook;
	ProcessUtility_hook = launcher_process_utility;
	/* a backend that finds collegedb in its database wakes the coordinator */
	CatalogOnFirstUse(LauncherNoticeDatabase);
}

/*
 * process_alive says whether a process of the server still runs; pids
 * recorded in the table are cleared when their process exits cleanly, and
 * a crash reinitializes shared memory, so a live pid is the recorded one.
 */
static bool
process_alive(pid_t pid)
{
	return pid != 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

static CoordinatorSlot *
find_slot(Oid database)
{
	for (int i = 0; i < LAUNCHER_SLOTS; i++)
		if (launcher->slots[i].database == database)
			return &launcher->slots[i];
	return NULL;
}

static void
set_latch_locked(void)
{
	if (launcher->latch)
		SetLatch(launcher->latch);
}

/*
 * LauncherWake asks the launcher to start 'database''s coordinator now (if
 * it has none), or, for InvalidOid, to list the databases again.
 */
void
LauncherWake(Oid database)
{
	CoordinatorSlot *slot;

	if (!ShmemIsPreloaded() || launcher == NULL)
		return;
	LWLockAcquire(launcher->lock, LW_EXCLUSIVE);
	slot = OidIsValid(database) ? find_slot(database) : NULL;
	if (slot == NULL)
		launcher->rescan = true;
	else if (slot->state == SLOT_RUNNING)
		slot->rewake = true;
	else
	{
		slot->state = SLOT_START;
		slot->retry_at = 0;
	}
	set_latch_locked();
	LWLockRelease(launcher->lock);
}

/*
 * LauncherWakeAtEnd wakes the launcher for this database when the current
 * transaction ends, committed or not: a coordinator started before then
 * would not see what the transaction created.
 */
static void
wake_at_end_of_xact(void)
{
	if (ShmemIsPreloaded())
		wake_at_end = MyDatabaseId;
}

static void
launcher_xact_callback(XactEvent event, void *arg)
{
	if (!OidIsValid(wake_at_end) && !rescan_at_end)
		return;
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT)
	{
		Oid			database = wake_at_end;

		wake_at_end = InvalidOid;
		if (OidIsValid(database))
			LauncherWake(database);
		if (rescan_at_end)
			LauncherWake(InvalidOid);
		rescan_at_end = false;
	}
}

/*
 * collegedb_wake_launcher starts this database's coordinator when the
 * calling transaction ends (the extension scripts call it).
 */
Datum
collegedb_wake_launcher(PG_FUNCTION_ARGS)
{
	wake_at_end_of_xact();
	PG_RETURN_VOID();
}

/*
 * LauncherServesDatabase says whether collegedb.database lets a
 * coordinator run in the current database.
 */
bool
LauncherServesDatabase(void)
{
	char	   *name;

	if (CollegeWorkerDatabase == NULL || CollegeWorkerDatabase[0] == '\0')
		return true;
	name = get_database_name(MyDatabaseId);
	return name != NULL && strcmp(name, CollegeWorkerDatabase) == 0;
}

/*
 * LauncherNoticeDatabase is called when a backend finds the extension's
 * catalog in its database: when no coordinator runs there, the launcher is
 * woken (at the end of the transaction).  It reads the table only.
 */
void
LauncherNoticeDatabase(void)
{
	CoordinatorSlot *slot;
	bool		running;

	if (!ShmemIsPreloaded() || launcher == NULL || !IsUnderPostmaster ||
		!OidIsValid(MyDatabaseId))
		return;
	LWLockAcquire(launcher->lock, LW_SHARED);
	slot = find_slot(MyDatabaseId);
	running = slot != NULL && slot->state == SLOT_RUNNING;
	LWLockRelease(launcher->lock);
	if (!running && LauncherServesDatabase())
		wake_at_end_of_xact();
}

/*
 * LauncherCoordinatorSummary says, for messages, whether a coordinator runs
 * in the current database now.
 */
bool
LauncherCoordinatorRuns(void)
{
	CoordinatorSlot *slot;
	bool		running;

	if (!ShmemIsPreloaded() || launcher == NULL)
		return false;
	LWLockAcquire(launcher->lock, LW_SHARED);
	slot = find_slot(MyDatabaseId);
	running = slot != NULL && slot->state == SLOT_RUNNING && process_alive(slot->pid);
	LWLockRelease(launcher->lock);
	return running;
}

/*
 * LauncherCoordinatorPid returns the pid of the current database's running
 * coordinator, 0 when none runs.
 */
pid_t
LauncherCoordinatorPid(void)
{
	CoordinatorSlot *slot;
	pid_t		pid = 0;

	if (!ShmemIsPreloaded() || launcher == NULL)
		return 0;
	LWLockAcquire(launcher->lock, LW_SHARED);
	slot = find_slot(MyDatabaseId);
	if (slot != NULL && slot->state == SLOT_RUNNING && process_alive(slot->pid))
		pid = slot->pid;
	LWLockRelease(launcher->lock);
	return pid;
}

/*
 * LauncherCoordinatorProblem says, in a sentence (palloc'd), why no
 * coordinator can run the current database's jobs, naming the setting to
 * change; NULL when one runs, or may be starting.  *no_slot (when given)
 * says whether the server lacks a worker slot or the launcher a place.
 */
char *
LauncherCoordinatorProblem(bool *no_slot)
{
	CoordinatorSlot *slot;
	bool		no_worker;
	bool		full;

	if (no_slot)
		*no_slot = false;
	if (!ShmemIsPreloaded() || launcher == NULL)
		return pstrdup("collegedb is not in shared_preload_libraries, so no coordinator runs queued jobs");
	if (!LauncherServesDatabase())
		return psprintf("collegedb.database is \"%s\", so no coordinator runs queued jobs in this database",
						CollegeWorkerDatabase);
	LWLockAcquire(launcher->lock, LW_SHARED);
	slot = find_slot(MyDatabaseId);
	no_worker = slot != NULL && slot->no_worker && !process_alive(slot->pid);
	full = slot == NULL && launcher->full;
	LWLockRelease(launcher->lock);
	if (no_slot)
		*no_slot = no_worker || full;
	if (no_worker)
		return psprintf("no background worker slot is free for this database's coordinator, so no job runs here: "
						"raise max_worker_processes (now %d)", max_worker_processes);
	if (full)
		return psprintf("the launcher keeps coordinators for at most %d databases, and this one has none",
						LAUNCHER_SLOTS);
	return NULL;
}

/*
 * collegedb_coordinator_status is LauncherCoordinatorProblem for SQL (the
 * detail column of collegedb.jobs).
 */
Datum
collegedb_coordinator_status(PG_FUNCTION_ARGS)
{
	char	   *problem = LauncherCoordinatorProblem(NULL);

	if (problem == NULL)
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(cstring_to_text(problem));
}

/* ---------------------------------------------------------------------
 * The coordinators' side
 * --------------------------------------------------------------------- */

static int	my_slot = -1;

static void
coordinator_detach(int code, Datum arg)
{
	CoordinatorSlot *slot;

	if (my_slot < 0 || launcher == NULL)
		return;
	LWLockAcquire(launcher->lock, LW_EXCLUSIVE);
	slot = &launcher->slots[my_slot];
	if (slot->pid == MyProcPid)
	{
		slot->pid = 0;
		slot->latch = NULL;
	}
	set_latch_locked();
	LWLockRelease(launcher->lock);
	my_slot = -1;
}

/*
 * LauncherClaimSlot makes this process the coordinator of slot 'index'
 * for 'database'; false when it must not run (another coordinator of the
 * database is alive, the slot was given to another database, or a backend
 * needs the database alone).
 */
bool
LauncherClaimSlot(int index, Oid database)
{
	CoordinatorSlot *slot;
	bool		ok;

	if (launcher == NULL || index < 0 || index >= LAUNCHER_SLOTS)
		return false;
	LWLockAcquire(launcher->lock, LW_EXCLUSIVE);
	slot = &launcher->slots[index];
	ok = slot->database == database &&
		!(slot->pid != 0 && slot->pid != MyProcPid && process_alive(slot->pid)) &&
		!process_alive(slot->held_by);
	if (ok)
	{
		slot->pid = MyProcPid;
		slot->latch = &MyProc->procLatch;
		slot->no_extension = false;
	}
	LWLockRelease(launcher->lock);
	if (ok)
	{
		my_slot = index;
		before_shmem_exit(coordinator_detach, (Datum) 0);
	}
	return ok;
}

/*
 * LauncherWakeCoordinator sets the latch of 'database''s coordinator, if
 * one runs: it looks for work at once instead of at its next round.
 */
void
LauncherWakeCoordinator(Oid database)
{
	CoordinatorSlot *slot;

	if (!ShmemIsPreloaded() || launcher == NULL)
		return;
	LWLockAcquire(launcher->lock, LW_SHARED);
	slot = find_slot(database);
	if (slot != NULL && slot->latch != NULL && process_alive(slot->pid))
		SetLatch(slot->latch);
	LWLockRelease(launcher->lock);
}

/*
 * LauncherNoExtension records, before the coordinator exits, that its
 * database has no extension (so the launcher probes it only now and then).
 */
void
LauncherNoExtension(void)
{
	if (my_slot < 0 || launcher == NULL)
		return;
	LWLockAcquire(launcher->lock, LW_EXCLUSIVE);
	launcher->slots[my_slot].no_extension = true;
	LWLockRelease(launcher->lock);
}

/* ---------------------------------------------------------------------
 * Statements that need a database alone
 * --------------------------------------------------------------------- */

/*
 * exclusive_database returns the database that a utility statement cannot
 * run on while any other session is connected to it, InvalidOid for other
 * statements.
 */
static Oid
exclusive_database(Node *parsetree)
{
	const char *name = NULL;
	ListCell   *lc;

	switch (nodeTag(parsetree))
	{
		case T_DropdbStmt:
			name = ((DropdbStmt *) parsetree)->dbname;
			break;
		case T_RenameStmt:
			if (((RenameStmt *) parsetree)->renameType == OBJECT_DATABASE)
				name = ((RenameStmt *) parsetree)->subname;
			break;
		case T_CreatedbStmt:
			foreach(lc, ((CreatedbStmt *) parsetree)->options)
			{
				DefElem    *def = lfirst(lc);

				if (strcmp(def->defname, "template") == 0 && def->arg != NULL)
					name = defGetString(def);
			}
			break;
		case T_AlterDatabaseStmt:
			foreach(lc, ((AlterDatabaseStmt *) parsetree)->options)
				if (strcmp(((DefElem *) lfirst(lc))->defname, "tablespace") == 0)
					name = ((AlterDatabaseStmt *) parsetree)->dbname;
			break;
		default:
			break;
	}
	return name ? get_database_oid(name, true) : InvalidOid;
}

/*
 * hold_database stops 'database''s coordinator and keeps the launcher from
 * starting one until release_database; waits (boundedly) for it to exit.
 * False when the launcher keeps no coordinator there.
 */
static bool
hold_database(Oid database)
{
	CoordinatorSlot *slot;
	pid_t		pid;
	TimestampTz deadline;

	LWLockAcquire(launcher->lock, LW_EXCLUSIVE);
	slot = find_slot(database);
	if (slot == NULL)
	{
		LWLockRelease(launcher->lock);
		return false;
	}
	slot->held_by = MyProcPid;
	pid = slot->pid;
	LWLockRelease(launcher->lock);
	if (pid != 0)
		(void) kill(pid, SIGTERM);

	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), LAUNCHER_HOLD_WAIT_MS);
	for (;;)
	{
		bool		gone;

		LWLockAcquire(launcher->lock, LW_SHARED);
		gone = slot->database != database || !process_alive(slot->pid);
		LWLockRelease(launcher->lock);
		if (gone || GetCurrentTimestamp() >= deadline)
			break;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 10, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	return true;
}

static void
release_database(Oid database)
{
	CoordinatorSlot *slot;

	LWLockAcquire(launcher->lock, LW_EXCLUSIVE);
	slot = find_slot(database);
	if (slot != NULL && slot->held_by == MyProcPid)
	{
		slot->held_by = 0;
		if (slot->state != SLOT_RUNNING)
		{
			slot->state = SLOT_START;
			slot->retry_at = 0;
		}
	}
	set_latch_locked();
	LWLockRelease(launcher->lock);
	/* a database the statement created is seen once it commits */
	rescan_at_end = true;
}

static void
next_process_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
					 ProcessUtilityContext context, ParamListInfo params,
					 QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	if (prev_process_utility)
		prev_process_utility(pstmt, queryString, readOnlyTree, context, params,
							 queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
								queryEnv, dest, qc);
}

/*
 * launcher_process_utility stops the coordinator of a database that the
 * statement needs alone, and lets the launcher start it again afterwards.
 */
static void
launcher_process_utility(PlannedStmt *pstmt, const char *queryString,
						 bool readOnlyTree, ProcessUtilityContext context,
						 ParamListInfo params, QueryEnvironment *queryEnv,
						 DestReceiver *dest, QueryCompletion *qc)
{
	Oid			database = InvalidOid;

	if (launcher != NULL && pstmt->utilityStmt != NULL)
		database = exclusive_database(pstmt->utilityStmt);
	if (OidIsValid(database) && hold_database(database))
	{
		PG_TRY();
		{
			next_process_utility(pstmt, queryString, readOnlyTree, context, params,
								 queryEnv, dest, qc);
		}
		PG_FINALLY();
		{
			release_database(database);
		}
		PG_END_TRY();
		return;
	}
	next_process_utility(pstmt, queryString, readOnlyTree, context, params, queryEnv,
						 dest, qc);
}

/* ---------------------------------------------------------------------
 * The launcher's loop
 * --------------------------------------------------------------------- */

typedef struct DatabaseEntry
{
	Oid			oid;
	NameData	name;
} DatabaseEntry;

/*
 * list_databases returns the databases that take connections and are not
 * templates (a coordinator connected to a template would make CREATE
 * DATABASE fail), read from the shared catalog.
 */
static List *
list_databases(MemoryContext context)
{
	List	   *result = NIL;
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tuple;

	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while ((tuple = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tuple);
		MemoryContext old;
		DatabaseEntry *entry;

		if (!db->datallowconn || db->datistemplate)
			continue;
#ifdef DATCONNLIMIT_INVALID_DB
		if (db->datconnlimit == DATCONNLIMIT_INVALID_DB)
			continue;
#endif
		old = MemoryContextSwitchTo(context);
		entry = palloc(sizeof(DatabaseEntry));
		entry->oid = db->oid;
		entry->name = db->datname;
		result = lappend(result, entry);
		MemoryContextSwitchTo(old);
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	PopActiveSnapshot();
	CommitTransactionCommand();
	return result;
}

/*
 * sync_slots gives every listed database a slot and frees the slots of
 * databases that are gone (once their coordinator is gone too).
 */
static void
sync_slots(List *databases, BackgroundWorkerHandle **handles)
{
	static bool warned_full = false;
	ListCell   *lc;

	LWLockAcquire(launcher->lock, LW_EXCLUSIVE);
	launcher->full = false;
	for (int i = 0; i < LAUNCHER_SLOTS; i++)
		launcher->slots[i].seen = false;
	foreach(lc, databases)
	{
		DatabaseEntry *db = lfirst(lc);
		CoordinatorSlot *slot = find_slot(db->oid);

		if (slot == NULL)
		{
			slot = find_slot(InvalidOid);
			if (slot == NULL)
			{
				if (!warned_full)
					ereport(LOG,
							(errmsg("collegedb launcher: no room for a coordinator of database \"%s\"",
									NameStr(db->name)),
							 errdetail("The launcher keeps coordinators for at most %d databases.",
									   LAUNCHER_SLOTS)));
				warned_full = true;
				launcher->full = true;
				continue;
			}
			memset(slot, 0, sizeof(*slot));
			slot->database = db->oid;
			slot->state = SLOT_START;
		}
		slot->name = db->name;
		slot->seen = true;
	}
	for (int i = 0; i < LAUNCHER_SLOTS; i++)
	{
		CoordinatorSlot *slot = &launcher->slots[i];

		if (OidIsValid(slot->database) && !slot->seen &&
			handles[i] == NULL && !process_alive(slot->pid))
			memset(slot, 0, sizeof(*slot));
	}
	LWLockRelease(launcher->lock);
}

/*
 * start_coordinator starts the coordinator of slot 'i'; false when the
 * server has no free worker slot.
 */
static bool
start_coordinator(int i, BackgroundWorkerHandle **handle)
{
	BackgroundWorker worker;
	CoordinatorSlot *slot = &launcher->slots[i];

	WorkerDescribe(&worker, "collegedb_coordinator_main", "collegedb coordinator",
				   psprintf("collegedb coordinator of %s", NameStr(slot->name)));
	worker.bgw_main_arg = ObjectIdGetDatum(slot->database);
	memcpy(worker.bgw_extra, &i, sizeof(i));
	return RegisterDynamicBackgroundWorker(&worker, handle);
}

static bool
restricted_away(const CoordinatorSlot *slot)
{
	return CollegeWorkerDatabase != NULL && CollegeWorkerDatabase[0] != '\0' &&
		strcmp(NameStr(slot->name), CollegeWorkerDatabase) != 0;
}

/*
 * tend_slots starts, restarts and stops coordinators; returns how long the
 * launcher may sleep before something is due.
 */
static long
tend_slots(BackgroundWorkerHandle **handles)
{
	static bool warned_no_worker = false;
	TimestampTz now = GetCurrentTimestamp();
	long		sleep_ms = 1000;

	for (int i = 0; i < LAUNCHER_SLOTS; i++)
	{
		CoordinatorSlot *slot = &launcher->slots[i];
		bool		running;
		bool		start = false;

		LWLockAcquire(launcher->lock, LW_EXCLUSIVE);
		if (!OidIsValid(slot->database))
		{
			LWLockRelease(launcher->lock);
			continue;
		}
		if (handles[i] != NULL)
		{
			pid_t		pid;

			running = GetBackgroundWorkerPid(handles[i], &pid) != BGWH_STOPPED;
		}
		else
			running = process_alive(slot->pid);	/* one started by a previous launcher */

		if (slot->state == SLOT_RUNNING && !running)
		{
			/* it ended: why? */
			if (handles[i] != NULL)
				pfree(handles[i]);
			handles[i] = NULL;
			slot->pid = 0;
			slot->latch = NULL;
			if (slot->no_extension)
			{
				slot->state = SLOT_IDLE;
				slot->failures = 0;
				slot->retry_at = slot->rewake ? now :
					TimestampTzPlusMilliseconds(now, LAUNCHER_PROBE_INTERVAL_MS);
			}
			else
			{
				slot->failures++;
				slot->state = SLOT_START;
				slot->retry_at = TimestampTzPlusMilliseconds(now,
															 Min(LAUNCHER_MAX_BACKOFF_MS, 1000L << Min(slot->failures - 1, 10)));
			}
			slot->no_extension = false;
			slot->rewake = false;
		}
		else if (running && slot->state != SLOT_RUNNING)
			slot->state = SLOT_RUNNING;

		if (running && (restricted_away(slot) || !slot->seen))
		{
			if (handles[i] != NULL)
				TerminateBackgroundWorker(handles[i]);
			else if (slot->pid != 0)
				(void) kill(slot->pid, SIGTERM);
		}
		else if (!running && slot->state != SLOT_RUNNING && slot->seen &&
				 !restricted_away(slot))
		{
			if (process_alive(slot->held_by))
				;				/* a DROP DATABASE or the like is under way */
			else if (now >= slot->retry_at)
				start = true;
			else
				sleep_ms = Min(sleep_ms, (long) ((slot->retry_at - now) / 1000) + 1);
		}
		LWLockRelease(launcher->lock);

		if (start)
		{
			BackgroundWorkerHandle *handle;

			if (start_coordinator(i, &handle))
			{
				LWLockAcquire(launcher->lock, LW_EXCLUSIVE);
				slot->state = SLOT_RUNNING;
				slot->no_extension = false;
				slot->rewake = false;
				slot->no_worker = false;
				LWLockRelease(launcher->lock);
				handles[i] = handle;
				warned_no_worker = false;
			}
			else
			{
				if (!warned_no_worker)
					ereport(LOG,
							(errmsg("collegedb launcher: no free background worker slot for the coordinator of database \"%s\"",
									NameStr(slot->name)),
							 errhint("Raise max_worker_processes.")));
				warned_no_worker = true;
				LWLockAcquire(launcher->lock, LW_EXCLUSIVE);
				slot->no_worker = true;
				slot->retry_at = TimestampTzPlusMilliseconds(now, 5000);
				LWLockRelease(launcher->lock);
			}
		}
	}
	return Max(sleep_ms, 1);
}

/*
 * collegedb_launcher_main is the launcher's loop.
 */
void
collegedb_launcher_main(Datum arg)
{
	BackgroundWorkerHandle *handles[LAUNCHER_SLOTS] = {0};
	MemoryContext loop_context;
	TimestampTz next_scan = 0;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	/* no database: pg_database is a shared catalog */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("collegedb launcher");

	LWLockAcquire(launcher->lock, LW_EXCLUSIVE);
	launcher->launcher_pid = MyProcPid;
	launcher->latch = &MyProc->procLatch;
	LWLockRelease(launcher->lock);

	loop_context = AllocSetContextCreate(TopMemoryContext, "collegedb launcher loop",
										 ALLOCSET_DEFAULT_SIZES);
	for (;;)
	{
		TimestampTz now;
		bool		rescan;
		long		sleep_ms;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		now = GetCurrentTimestamp();
		LWLockAcquire(launcher->lock, LW_EXCLUSIVE);
		rescan = launcher->rescan || now >= next_scan;
		launcher->rescan = false;
		LWLockRelease(launcher->lock);
		if (rescan)
		{
			MemoryContextReset(loop_context);
			sync_slots(list_databases(loop_context), handles);
			next_scan = TimestampTzPlusMilliseconds(now, LAUNCHER_PROBE_INTERVAL_MS);
		}
		sleep_ms = tend_slots(handles);

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 sleep_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
