/*-------------------------------------------------------------------------
 *
 * move_funcs.c
 *	  SQL functions that move keys: reassign_shard, rebalance,
 *	  schedule_rebalance, move_slot, schedule_move_slot, wait_for_job.
 *
 * The work itself happens in background workers (src/worker/), each
 * journal step committed on its own; these functions check their
 * arguments, hand the job over, and wait for it or not.  A dry-run
 * rebalance only reads, so it runs here.  The jobs run as the role that
 * asked for them (its user mappings reach the shards); the job tables are
 * read and written by catalog/journal.c, with the catalog owner's rights.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "commands/dbcommands.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "catalog/catalog.h"
#include "catalog/config.h"
#include "catalog/journal.h"
#include "catalog/mappings.h"
#include "cd_errcodes.h"
#include "collegedb.h"
#include "remote/tombstones.h"
#include "router/router.h"
#include "sqlfuncs/sqlfuncs.h"
#include "worker/jobs.h"
#include "worker/progress.h"
#include "worker/launcher.h"
#include "worker/slot_moves.h"

PG_FUNCTION_INFO_V1(collegedb_reassign_shard);
PG_FUNCTION_INFO_V1(collegedb_rebalance);
PG_FUNCTION_INFO_V1(collegedb_schedule_rebalance);
PG_FUNCTION_INFO_V1(collegedb_move_slot);
PG_FUNCTION_INFO_V1(collegedb_schedule_move_slot);
PG_FUNCTION_INFO_V1(collegedb_wait_for_job);


/*
 * move_job_detail says, for a failed reassign_shard, what became of the
 * job's move.
 */
static char *
move_job_detail(int64 job_id)
{
	int64		id;
	char	   *step;
	int			attempts;
	bool		abandoned;

	if (!JournalLastMoveOfJob(job_id, &id, &step, &attempts, &abandoned))
		return NULL;
	if (strcmp(step, "failed") == 0)
		return psprintf("Move " INT64_FORMAT " failed; the key stays where it was.", id);
	if (abandoned)
		return psprintf("Move " INT64_FORMAT " gave up after %d attempts; the coordinator removes the target's copy of the key, and the key stays where it was.",
						id, attempts);
	if (strcmp(step, "journaled") == 0 || strcmp(step, "copied") == 0)
		return psprintf("Move " INT64_FORMAT " stays at step %s, the key where it was; the coordinator tries it again (%d of at most %d attempts made).",
						id, step, attempts, CollegeMoveMaxAttempts);
	if (strcmp(step, "done") != 0)
		return psprintf("Move " INT64_FORMAT " is past the source step (%s): the coordinator finishes it.",
						id, step);
	return NULL;
}

/*
 * ensure_job_succeeded reads how a job the caller waited for ended, and
 * raises JOB_FAILED unless it is done (or, with 'cancelled_ok', cancelled):
 * also when its worker died before the job ended.
 */
static void
ensure_job_succeeded(int64 id, char kind, bool cancelled_ok, Jsonb **result)
{
	char	   *state;
	char	   *error;

	if (!JournalJobOutcome(id, &state, result, &error))
		ereport(ERROR,
				(errcode(ERRCODE_CD_JOB_FAILED),
				 errmsg("job " INT64_FORMAT " vanished", id)));
	if (strcmp(state, "failed") == 0)
	{
		char	   *detail = kind == 'm' ? move_job_detail(id) : NULL;

		ereport(ERROR,
				(errcode(ERRCODE_CD_JOB_FAILED),
				 errmsg("job " INT64_FORMAT " failed: %s", id, error ? error : "unknown error"),
				 detail ? errdetail("%s", detail) : 0,
				 errhint("See collegedb.jobs and collegedb.moves.")));
	}
	if (strcmp(state, "queued") == 0 || strcmp(state, "running") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_CD_JOB_FAILED),
				 errmsg("the background worker of job " INT64_FORMAT " exited before the job ended", id),
				 errdetail("The job is still %s; the coordinator resumes it.", state),
				 errhint("The server log says why the worker exited; collegedb.jobs shows how the job goes on.")));
	if (strcmp(state, "cancelled") == 0 && !cancelled_ok)
		ereport(ERROR,
				(errcode(ERRCODE_CD_JOB_FAILED),
				 errmsg("job " INT64_FORMAT " was cancelled", id)));
	if ((kind == 'm' || kind == 's') && *result == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CD_JOB_FAILED),
				 errmsg("job " INT64_FORMAT " ended without a result", id)));
}

/*
 * ensure_not_moving raises MOVE_IN_PROGRESS when a live process runs a move
 * of the key (an interrupted one is taken over by the job instead).
 */
static void
ensure_not_moving(const char *key)
{
	int64		id;
	int			pid;

	if (JournalLiveMove(RouterStoredKey(key, strlen(key)), &id, &pid))
		ereport(ERROR,
				(errcode(ERRCODE_CD_MOVE_IN_PROGRESS),
				 errmsg("key \"%s\" is already being moved", key),
				 errdetail("Move " INT64_FORMAT " is running in process %d.", id, pid),
				 errhint("Wait for it (collegedb.moves), or terminate that process to hand the move over.")));
}

/*
 * record_key returns the key whose rows a reassign_shard of 'key' moves:
 * the key itself, or for a lookup key the primary key of its record (known
 * only without hash_mappings: otherwise the move is refused).
 */
static char *
record_key(const char *key)
{
	char	   *record;
	bool		lookup;

	if (!MappingRecordOf(RouterStoredKey(key, strlen(key)), &record, &lookup) || !lookup)
		return (char *) key;
	if (ConfigGet()->hash_mappings)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("key \"%s\" is a lookup key", key),
				 errdetail("The rows of a record move with its primary key, which collegedb keeps only hashed (hash_mappings is on)."),
				 errhint("Reassign the record's primary key; its lookup keys follow.")));
	ereport(NOTICE,
			(errmsg("key \"%s\" is a lookup key of record \"%s\": moving the record", key, record)));
	return record;
}

static void
ensure_concurrency(FunctionCallInfo fcinfo, int arg)
{
	if (!PG_ARGISNULL(arg) && PG_GETARG_INT32(arg) <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("concurrency must be positive")));
}

/*
 * collegedb_reassign_shard moves one key (and the rows of every registered
 * table under it) to 'target', waiting for the move; returns its journal
 * entry as jsonb.
 */
Datum
collegedb_reassign_shard(PG_FUNCTION_ARGS)
{
	char	   *key = ArgText(fcinfo, 0, "key");
	char	   *target = ArgText(fcinfo, 1, "target shard");
	bool		force = PG_ARGISNULL(2) ? false : PG_GETARG_BOOL(2);
	Jsonb	   *result;
	int64		id;

	const CdShard *from;
	const CdShard *to;

	CatalogEnsureWritable(gettext_noop("cannot move a key on a hot standby"));
	/* the job checks again; here the errors keep their own codes */
	key = record_key(key);
	ensure_not_moving(key);
	MoveEndpoints(key, target, force, &from, &to);
	TombstoneEnsureKeyFits(from, key, strlen(key), true);
	TombstoneEnsureKeyFits(to, key, strlen(key), true);
	if (ShardIs(from, to))
	{
		StringInfoData same;

		initStringInfo(&same);
		appendStringInfoString(&same, "{\"moved\": false, \"shard\": ");
		escape_json(&same, to->name);
		appendStringInfoChar(&same, '}');
		PG_RETURN_DATUM(DirectFunctionCall1(jsonb_in, CStringGetDatum(same.data)));
	}
	id = JobLaunchAndWait('m', NULL, key, target, force, 0, -1);
	ensure_job_succeeded(id, 'm', false, &result);
	PG_RETURN_JSONB_P(result);
}

/*
 * collegedb_rebalance moves every key of a registered table whose shard is
 * not its target (see jobs.c), waiting for the job; a dry run only counts.
 */
Datum
collegedb_rebalance(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *table_name = ArgText(fcinfo, 0, "table name");
	bool		dry_run = PG_ARGISNULL(1) ? false : PG_GETARG_BOOL(1);
	Datum		values[4];
	bool		nulls[4] = {false, false, false, false};

	if (!dry_run)
		CatalogEnsureWritable(gettext_noop("cannot rebalance on a hot standby"));
	ensure_concurrency(fcinfo, 2);
	InitMaterializedSRF(fcinfo, 0);
	if (dry_run)
	{
		JobPlan    *plan = RebalancePlan(table_name, 0);

		values[0] = Int64GetDatum(plan->examined);
		values[1] = Int64GetDatum(plan->agreed);
		values[2] = Int64GetDatum(plan->moves);
		values[3] = DirectFunctionCall1(jsonb_in, CStringGetDatum("[]"));
	}
	else
	{
		int64		id;
		Jsonb	   *result;
		CdCatalogRows rows;
		bool		isnull;

		/* the plan's checks, here, so that errors come with their own codes */
		RebalanceCheck(table_name);
		id = JobLaunchAndWait('r', table_name, NULL, NULL, false,
							  PG_ARGISNULL(2) ? 0 : PG_GETARG_INT32(2), -1);
		ensure_job_succeeded(id, 'r', true, &result);
		JournalRebalanceResult(id, &rows);
		for (int i = 0; i < 4; i++)
			values[i] = CatalogValue(&rows, 0, i + 1, &isnull);
	}
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	return (Datum) 0;
}

/*
 * ensure_coordinator refuses to schedule a job ('function') in a database
 * where no coordinator runs them; 'instead' runs it at once.
 */
static void
ensure_coordinator(const char *function, const char *instead)
{
	EnsurePreloaded(function);
	if (!LauncherServesDatabase())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("no coordinator runs scheduled jobs in database \"%s\"",
						get_database_name(MyDatabaseId)),
				 errdetail("collegedb.database restricts the coordinators to database \"%s\".",
						   CollegeWorkerDatabase),
				 errhint("Run %s here, or set collegedb.database to this database (or to nothing, for every database) and reload.",
						 instead)));
}

/*
 * slot_arg reads move_slot's arguments and checks the move (errors with
 * their own codes, before any job exists).
 */
static int32
slot_arg(FunctionCallInfo fcinfo, char **target)
{
	int32		slot;
	const char *source;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("slot must not be null")));
	slot = PG_GETARG_INT32(0);
	*target = ArgText(fcinfo, 1, "target shard");
	(void) SlotMoveCheck(slot, *target, &source);
	return slot;
}

/*
 * collegedb_move_slot moves every key of a slot to 'target' and installs
 * the next slot map version with the slot there (worker/slot_moves.c),
 * waiting for the job; returns the new snapshot.
 */
Datum
collegedb_move_slot(PG_FUNCTION_ARGS)
{
	char	   *target;
	int32		slot;
	Jsonb	   *result;
	int64		id;

	CatalogEnsureWritable(gettext_noop("cannot move a slot on a hot standby"));
	slot = slot_arg(fcinfo, &target);
	id = JobLaunchAndWait('s', NULL, NULL, target, false, 0, slot);
	ensure_job_succeeded(id, 's', false, &result);
	PG_RETURN_JSONB_P(result);
}

/*
 * collegedb_schedule_move_slot queues a slot's move for the coordinator
 * and returns its job id at once.
 */
Datum
collegedb_schedule_move_slot(PG_FUNCTION_ARGS)
{
	char	   *target;
	int32		slot;
	int64		id;

	CatalogEnsureWritable(gettext_noop("cannot schedule a slot move on a hot standby"));
	ensure_coordinator("collegedb.schedule_move_slot()", "collegedb.move_slot()");
	slot = slot_arg(fcinfo, &target);
	id = JournalInsertJob("move_slot", NULL, NULL, NULL, target, false, 0, GetUserId(), false);
	JournalSetJobSlot(id, slot);
	PG_RETURN_INT64(id);
}

/*
 * collegedb_schedule_rebalance queues a rebalance for the coordinator and
 * returns its job id at once.
 */
Datum
collegedb_schedule_rebalance(PG_FUNCTION_ARGS)
{
	char	   *table_name = ArgText(fcinfo, 0, "table name");

	CatalogEnsureWritable(gettext_noop("cannot schedule a rebalance on a hot standby"));
	ensure_coordinator("collegedb.schedule_rebalance()", "collegedb.rebalance()");
	ensure_concurrency(fcinfo, 1);
	RebalanceCheck(table_name);
	PG_RETURN_INT64(JournalInsertJob("rebalance", table_name, NULL, NULL, NULL, false,
									 PG_ARGISNULL(1) ? 0 : PG_GETARG_INT32(1),
									 GetUserId(), false));
}

/*
 * ArgDeadline returns when a wait whose timeout is interval argument 'n'
 * ends, counted from now; 0 (no end) for a NULL timeout.
 */
TimestampTz
ArgDeadline(FunctionCallInfo fcinfo, int n)
{
	if (PG_ARGISNULL(n))
		return 0;
	return DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
												   TimestampTzGetDatum(GetCurrentTimestamp()),
												   PG_GETARG_DATUM(n)));
}

/*
 * SqlfuncsPause waits 'ms' milliseconds between two looks of a waiting
 * function, or less when the latch is set; a cancel ends the wait.
 */
void
SqlfuncsPause(int ms)
{
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 ms, PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
}

/*
 * collegedb_wait_for_job waits until a job has ended and returns its row of
 * collegedb.jobs; when the timeout passes first, it fails with
 * query_canceled, naming the job and its state.  Each look takes a new
 * snapshot (in READ COMMITTED), so the job's progress is seen, and
 * reported about once a second (worker/progress.c).
 */
Datum
collegedb_wait_for_job(PG_FUNCTION_ARGS)
{
	int64		id = PG_GETARG_INT64(0);
	TimestampTz deadline = ArgDeadline(fcinfo, 1);
	TupleDesc	desc;
	HeapTuple	tuple = NULL;
	TimestampTz report_at = JobProgressStart();

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "wait_for_job must return a row");
	for (;;)
	{
		char	   *state;

		/* the job's own row: collegedb.jobs counts its keys, once at the end */
		state = JournalJobState(id);
		if (state == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("job " INT64_FORMAT " does not exist", id)));
		if (strcmp(state, "queued") != 0 && strcmp(state, "running") != 0)
		{
			CdCatalogRows rows;

			if (!JournalJobView(id, &rows))
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_OBJECT),
						 errmsg("job " INT64_FORMAT " does not exist", id)));
			tuple = rows.rows[0];
			break;
		}
		if (strcmp(state, "queued") == 0)
		{
			bool		no_slot;
			char	   *problem = LauncherCoordinatorProblem(&no_slot);

			/* a job that no worker can run fails the wait at once */
			if (no_slot)
				ereport(ERROR,
						(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
						 errmsg("job " INT64_FORMAT " is queued, and no coordinator can run it", id),
						 errdetail("%s.", problem),
						 errhint("Raise max_worker_processes (or run fewer databases with collegedb), then restart the server.")));
		}
		if (deadline && GetCurrentTimestamp() >= deadline)
		{
			bool		queued = strcmp(state, "queued") == 0;

			ereport(ERROR,
					(errcode(ERRCODE_QUERY_CANCELED),
					 errmsg("timed out waiting for job " INT64_FORMAT, id),
					 errdetail("The job is still %s.", state),
					 queued ?
					 errhint(LauncherCoordinatorRuns() ?
							 "The coordinator runs queued jobs one at a time, oldest first; see collegedb.jobs." :
							 "No coordinator runs in this database now: collegedb must be in shared_preload_libraries, and collegedb.database empty or naming this database.") :
					 errhint("Wait again, or cancel it with collegedb.cancel_job().")));
		}
		JobProgressReport(id, &report_at);
		SqlfuncsPause(100);
	}
	PG_RETURN_DATUM(heap_copy_tuple_as_datum(tuple, BlessTupleDesc(desc)));
}
