/*-------------------------------------------------------------------------
 *
 * movers.c
 *	  The keys of a job (collegedb.job_key) moved by several workers at
 *	  once: the job's own and dynamic "collegedb mover" workers, each
 *	  claiming one pending key at a time (FOR UPDATE SKIP LOCKED) and moving
 *	  it with the journaled move protocol (moves.c).
 *
 * A failure is recorded with its key and the others go on; a cancel is
 * noticed between keys, so no key is left half-moved.  A key that another
 * live process is moving is waited for, an interrupted move of it taken
 * over.  Which keys a job moves is its own business (jobs.c for a
 * rebalance, slot_moves.c for a slot).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "utils/memutils.h"

#include "catalog/journal.h"
#include "cd_errcodes.h"
#include "collegedb.h"
#include "remote/remote.h"
#include "router/router.h"
#include "worker/move_batches.h"
#include "worker/movers.h"
#include "worker/moves.h"
#include "worker/unit.h"

/*
 * current_source returns (a copy of) the name of the shard the key lives
 * on now, in a transaction of its own.
 */
static char *
current_source(const char *key, MemoryContext context)
{
	char	   *name;

	WorkerBegin();
	name = MemoryContextStrdup(context, RouterLocateKey(key)->name);
	WorkerCommit();
	return name;
}

/* how often a job starts over on a key that other movers keep moving */
#define MOVE_ONE_ROUNDS 4

/*
 * move_one moves one key to 'target' under the current job; errors go to
 * the caller.  A move of the key that another live process runs (the
 * coordinator retrying it, another job) is waited for; an interrupted one
 * is taken over and finished; either way the key then goes on from where
 * it is, unless it is at 'target' already.
 */
static void
move_one(int64 job_id, const char *key, const char *source, const char *target)
{
	MemoryContext context = CurrentMemoryContext;

	for (int round = 1;; round++)
	{
		int64		move_id;
		int64		generation = 0;
		int64		busy = 0;
		bool		adopted;
		bool		goes_on;

		WorkerBegin();
		move_id = MoveStart(job_id, key, source, target, &generation, &adopted,
							round < MOVE_ONE_ROUNDS ? &busy : NULL);
		WorkerCommit();
		if (move_id == 0)
			MoveWaitWhileHeld(busy);
		else
		{
			MoveRun(move_id, generation);
			if (!adopted)
				return;
		}
		source = current_source(key, context);
		if (strcmp(source, target) == 0)
			return;
		/* a cancelled job starts no other move of the key */
		WorkerBegin();
		goes_on = JournalJobGoesOn(job_id);
		WorkerCommit();
		if (!goes_on)
			ereport(ERROR,
					(errcode(ERRCODE_QUERY_CANCELED),
					 errmsg("the job was cancelled before the key reached shard \"%s\"", target)));
		if (round >= MOVE_ONE_ROUNDS)
			ereport(ERROR,
					(errcode(ERRCODE_CD_MOVE_IN_PROGRESS),
					 errmsg("other moves of the key kept it from shard \"%s\"", target)));
	}
}

/*
 * move_alone moves one claimed key with the one-key protocol and records
 * how it ended.
 */
static void
move_alone(int64 job_id, const CdJobKeyRow *k, MemoryContext context)
{
	PG_TRY();
	{
		move_one(job_id, k->key, k->source, k->target);
		WorkerBegin();
		JournalSettleJobKey(job_id, k->stored, true, NULL, 0);
		WorkerCommit();
	}
	PG_CATCH();
	{
		ErrorData  *edata = WorkerCatchError(context);

		WorkerBegin();
		JournalSettleJobKey(job_id, k->stored, false, RemoteErrorText(edata), 0);
		WorkerCommit();
	}
	PG_END_TRY();
}

/* the keys of a mover's first batch, before it knows how long one takes */
#define MOVER_FIRST_BATCH 100

/*
 * next_batch sizes a mover's next batch from its last: n keys whose source
 * step took 'ms' milliseconds (-1: not reached).  It aims at
 * collegedb.move_batch_time, at most doubling or halving the size at a
 * time, between two keys and collegedb.move_batch_keys.
 */
static int
next_batch(int n, long ms, int current)
{
	double		size;

	if (CollegeMoveBatchTime <= 0 || ms < 0)
		return current;
	size = ms > 0 ? (double) n * CollegeMoveBatchTime / ms : 2.0 * n;
	size = Max(Min(size, 2.0 * n), n / 2.0);
	return (int) Max(Min(size, (double) CollegeMoveBatchKeys), 2.0);
}

/*
 * claim_and_move claims the job's pending keys, up to
 * collegedb.move_batch_keys at a time with the same source and target,
 * and moves them, as a batch (move_batches.c) and alone those the batch
 * did not move, recording each outcome, until none is left or the job is
 * cancelled.
 */
static void
claim_and_move(int64 job_id)
{
	MemoryContext caller = CurrentMemoryContext;
	MemoryContext context = AllocSetContextCreate(CurrentMemoryContext,
												  "collegedb mover",
												  ALLOCSET_DEFAULT_SIZES);
	MemoryContext key_context = AllocSetContextCreate(context,
													  "collegedb mover key",
													  ALLOCSET_DEFAULT_SIZES);
	char	   *after = pstrdup("");	/* in the caller's memory */
	bool		from_start = true;
	int			batch = Min(CollegeMoveBatchKeys, MOVER_FIRST_BATCH);

	for (;;)
	{
		int			max = CollegeMoveBatchTime > 0 ? Min(batch, CollegeMoveBatchKeys) :
			CollegeMoveBatchKeys;
		CdJobKeyRow *keys;
		bool	   *done;
		bool	   *started;
		int			n;
		MemoryContext old;

		/* each batch's work, its errors included, lives until the next */
		MemoryContextSwitchTo(context);
		MemoryContextReset(context);
		key_context = AllocSetContextCreate(context, "collegedb mover key",
											ALLOCSET_DEFAULT_SIZES);
		keys = palloc(sizeof(CdJobKeyRow) * max);
		done = palloc0(sizeof(bool) * max);
		started = palloc0(sizeof(bool) * max);
		WorkerBegin();
		old = MemoryContextSwitchTo(context);
		if (!JournalJobGoesOn(job_id))
			n = 0;
		else
		{
			char	   *last = NULL;

			/* after the last claim; from the start once nothing is after it */
			n = JournalClaimJobKeys(job_id, max, after, keys, &last);
			if (n == 0 && !from_start)
				n = JournalClaimJobKeys(job_id, max, "", keys, &last);
			if (n > 0)
			{
				pfree(after);
				after = MemoryContextStrdup(caller, last);
				from_start = false;
			}
		}
		MemoryContextSwitchTo(old);
		WorkerCommit();
		if (n == 0)
			break;

		if (n > 1)
			batch = next_batch(n, MoveBatch(job_id, n, keys, done, started), batch);
		for (int i = 0; i < n; i++)
		{
			if (done[i])
				continue;
			/* a cancel is noticed between keys; a started move is finished */
			if (i > 0 && !started[i])
			{
				bool		goes_on;

				WorkerBegin();
				goes_on = JournalJobGoesOn(job_id);
				if (!goes_on)
					JournalUnclaimJobKey(job_id, keys[i].stored);
				WorkerCommit();
				if (!goes_on)
					continue;
			}
			MemoryContextSwitchTo(key_context);
			move_alone(job_id, &keys[i], key_context);
			MemoryContextSwitchTo(context);
			MemoryContextReset(key_context);
		}
	}
	/* a unit's end may have left the mover context current */
	MemoryContextSwitchTo(caller);
	MemoryContextDelete(context);
	pfree(after);
}

/*
 * launch_movers starts up to n dynamic mover workers for a job; returns
 * their handles (fewer when the server has no free worker slot).
 */
static List *
launch_movers(int64 job_id, int n)
{
	List	   *handles = NIL;

	for (int i = 0; i < n; i++)
	{
		BackgroundWorker worker;
		BackgroundWorkerHandle *handle;
		Oid			ids[2] = {MyDatabaseId, GetUserId()};

		WorkerDescribe(&worker, "collegedb_mover_main", "collegedb mover",
					   psprintf("collegedb mover for job " INT64_FORMAT, job_id));
		worker.bgw_main_arg = Int64GetDatum(job_id);
		memcpy(worker.bgw_extra, ids, sizeof(ids));
		if (!RegisterDynamicBackgroundWorker(&worker, &handle))
			break;
		handles = lappend(handles, handle);
	}
	return handles;
}

/*
 * JobMoveKeys moves the job's pending keys (collegedb.job_key), 'nkeys' of
 * them, with up to 'concurrency' workers: this one and dynamic movers.
 * Returns when no key is pending or the job is cancelled.
 */
void
JobMoveKeys(int64 job_id, int concurrency, int nkeys)
{
	List	   *movers = launch_movers(job_id, Min(concurrency, nkeys) - 1);
	ListCell   *lc;

	claim_and_move(job_id);
	foreach(lc, movers)
		(void) WaitForBackgroundWorkerShutdown(lfirst(lc));
}

/*
 * collegedb_mover_main is one of a job's extra movers (a rebalance's, a slot
 * move's).
 */
void
collegedb_mover_main(Datum arg)
{
	Oid			ids[2];

	memcpy(ids, MyBgworkerEntry->bgw_extra, sizeof(ids));
	WorkerConnect(ids[0], ids[1]);
	pgstat_report_appname("collegedb mover");
	claim_and_move(DatumGetInt64(arg));
	proc_exit(0);
}

