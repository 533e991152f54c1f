/*-------------------------------------------------------------------------
 *
 * moves.c
 *	  The journaled move of one key from one shard to another
 *	  (src/README.md, "Moves"), run by background workers, each step
 *	  committed before the next.
 *
 *	  journaled    the move is recorded, held by the process that runs it
 *	  copied       validated: the source still holds the key, the key fits
 *	               both shards' tombstones, the target is reachable and
 *	               holds none of the key's rows.  Nothing of the key is
 *	               visible on the target yet.
 *	  source_done  in one source transaction holding the key's lock (the
 *	               one guarded writers take): the source is checked for
 *	               the key's tombstone again, the key's rows stream to the
 *	               target in batches (the target's stale rows and tombstone
 *	               of the key go in the same target transaction), the
 *	               target commits, then the tombstones are written and the
 *	               rows deleted, each DELETE removing exactly as many rows
 *	               as were copied (otherwise the step fails and the source
 *	               keeps everything)
 *	  mapped       the front maps the key (and its lookup keys) to the
 *	               target, or records an exception under computed placement
 *	  done
 *
 * Ownership.  A move is held by one process at a time: the one whose pid
 * and start time are in lease_pid / lease_backend_start.  A process takes
 * a move (MoveStart, JournalTakeMove) only when its holder is no longer alive, and
 * taking it bumps the move's generation.  Every step's front transaction
 * first locks the move's row with the generation it took (no row: the move
 * changed hands, and the step stops having changed nothing) and keeps that
 * lock to its commit, and the shards' remote transactions commit in the
 * front's pre-commit, while the lock is held: an attempt that lost the
 * move can apply none of its effects.  The lease (lease_until) is renewed
 * at every step for the views, and never decides anything: a step that
 * waits a long time for the key's lock, or copies many rows, keeps its
 * move.  To hand a stuck move over, terminate its worker.
 *
 * Failures.  A step that meets a deadlock or a serialization failure on a
 * shard is tried again at once (a few times).  Any other failure is
 * recorded with its error and the move is retried later by the
 * coordinator, after 1 s, 2 s, 4 s, ... (at most 5 minutes, with jitter),
 * up to collegedb.move_max_attempts attempts.  A move that gives up before
 * source_done has the target's partial copy of the key removed, once the
 * source shows (under the key's lock) that it still owns the key, and ends
 * failed; until that clean-up has happened it stays "abandoned" in its
 * step.  A move at source_done or later is never failed: it can only roll
 * forward, and is retried until it can.
 *
 * Each step is idempotent, so after a crash at any point the move resumes
 * from its journaled step: a source step that had committed is recognised
 * by its tombstone.  The key is readable at every instant: from the source
 * until its tombstone commits, then through the tombstone, then through
 * the mapping.
 *
 * What this file does not do: choose keys or targets (jobs.c), decide
 * which worker runs a move (coordinator.c), build the shards' statements
 * (move_shards.c for the key's rows, remote/tombstones.c for its lock and
 * tombstones), write the journal's rows (catalog/journal.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/json.h"
#include "utils/memutils.h"

#include "catalog/journal.h"
#include "catalog/mappings.h"
#include "catalog/tables.h"
#include "cd_errcodes.h"
#include "collegedb.h"
#include "remote/remote.h"
#include "remote/tombstones.h"
#include "router/router.h"
#include "worker/moves.h"
#include "worker/move_shards.h"
#include "worker/unit.h"

/* how many times a step that hit a deadlock on a shard is tried at once */
#define MOVE_DEADLOCK_ATTEMPTS 4

static List *
tables_to_move(void)
{
	List	   *tables = RegisteredTables();

	if (tables == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("no table is registered, so there are no rows to move"),
				 errhint("Register the tables that hold keys with collegedb.register_table().")));
	return tables;
}

/*
 * row_counts renders {"table": rows, ...}.
 */
static char *
row_counts(List *tables, const int64 *rows)
{
	StringInfoData buf;
	int			i = 0;
	ListCell   *lc;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	foreach(lc, tables)
	{
		if (i)
			appendStringInfoString(&buf, ", ");
		escape_json(&buf, ((CdTable *) lfirst(lc))->name);
		appendStringInfo(&buf, ": " INT64_FORMAT, rows[i]);
		i++;
	}
	appendStringInfoChar(&buf, '}');
	return buf.data;
}

/*
 * MovePauseForTests stops a mover until the worker is killed, when the
 * test-only setting collegedb.test_pause_in_step ('inside') or
 * collegedb.test_pause_after_step names 'step'.
 */
void
MovePauseForTests(bool inside, int64 move_id, const char *step)
{
	const char *setting = inside ? CollegeTestPauseInStep : CollegeTestPauseAfterStep;

	if (setting == NULL || strcmp(setting, step) != 0)
		return;
	if (inside)
		elog(LOG, "collegedb: move " INT64_FORMAT " paused inside step %s", move_id, step);
	else
		elog(LOG, "collegedb: move " INT64_FORMAT " paused after step %s", move_id, step);
	for (;;)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 1000, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * step_validate checks a journaled move before anything is written: the
 * key must still be on the planned source (a rebalance plans all its keys
 * first, and one may have moved since: copying from the planned source
 * would copy nothing and wipe the key's rows), it must fit both shards,
 * and the target must be reachable; the target's stale rows of the key
 * (left by an earlier failed move) are removed, committed with the step.
 * A key that is on the target already ends the move with nothing moved,
 * also when the target is the source itself: the target's "stale" rows
 * would be the key's own, and its tombstone would point at its own shard.
 */
static void
step_validate(CdMoveRow *m)
{
	const CdShard *now = RouterLocateKey(m->raw_key);
	ListCell   *lc;

	if (ShardIs(now, m->target))
	{
		JournalEndMove(m, false, NULL, "{}");
		return;
	}
	if (!ShardIs(now, m->source))
	{
		JournalEndMove(m, true, psprintf("the key is on shard \"%s\" now, not on \"%s\"; nothing was moved",
										 now->name, m->source->name), "{}");
		return;
	}
	TombstoneEnsureKeyFits(m->source, m->raw_key, strlen(m->raw_key), true);
	TombstoneEnsureKeyFits(m->target, m->raw_key, strlen(m->raw_key), true);
	foreach(lc, tables_to_move())
		(void) MoveDeleteKeyRows(m->target, lfirst(lc), m->raw_key);
	JournalSetStep(m, "copied", NULL);
}

/*
 * step_source moves the rows: see the file header.  A source step that
 * committed before a crash is recognised by its tombstone, found after the
 * key's lock is held.
 */
static void
step_source(CdMoveRow *m)
{
	List	   *tables = tables_to_move();
	int64	   *copied = palloc0(sizeof(int64) * list_length(tables));
	char	   *moved_to;
	int			i;
	ListCell   *lc;

	TombstoneEnsureKeyFits(m->source, m->raw_key, strlen(m->raw_key), true);
	TombstoneEnsureKeyFits(m->target, m->raw_key, strlen(m->raw_key), true);

	/*
	 * Open both shards' transactions in name order, so that movers crossing
	 * each other (one from a to b, one from b to a) cannot wait for each
	 * other: SQLite takes its write lock at a transaction's first write.
	 * The target's first write removes its stale tombstone of the key (the
	 * key lived there once), together with the rows that replace it.
	 */
	if (strcmp(m->target->name, m->source->name) < 0)
		TombstoneDrop(m->target, m->raw_key, false);
	TombstoneLockKey(m->source, m->raw_key);
	MovePauseForTests(true, m->id, "source_lock");

	moved_to = TombstoneFind(m->source, m->raw_key);
	if (moved_to != NULL)
	{
		TombstoneDrop(m->source, m->raw_key, true);
		if (strcmp(moved_to, m->target->name) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_CD_MOVE_IN_PROGRESS),
					 errmsg("the key has moved from shard \"%s\" to \"%s\" since move " INT64_FORMAT " began",
							m->source->name, moved_to, m->id)));
		/* the source step committed before the journal could say so */
		JournalSetStep(m, "source_done", NULL);
		return;
	}

	if (strcmp(m->target->name, m->source->name) >= 0)
		TombstoneDrop(m->target, m->raw_key, false);
	i = 0;
	foreach(lc, tables)
	{
		(void) MoveDeleteKeyRows(m->target, lfirst(lc), m->raw_key);
		copied[i++] = MoveCopyKeyRows(m->source, m->target, lfirst(lc), m->raw_key);
	}

	/*
	 * The target commits first, then (in the front's pre-commit, with the
	 * journal) the source.  Between the two commits, one round trip, the
	 * key's rows are on both shards: a routed statement still reaches them
	 * once (the source holds the key's lock, and reads go by mapping), but a
	 * scan of every shard can see them twice.  Two-phase commit would not
	 * close that window: two servers never commit at one instant, and a
	 * prepared transaction's rows only become visible at its own commit.
	 * If the front dies here, the target keeps its copy until the move
	 * resumes (and replaces it) or gives up (and removes it); routing sends
	 * the key's statements to the source meanwhile (RouterResolve).
	 */
	RemoteCommitNow(m->target);
	MovePauseForTests(true, m->id, "source");

	TombstoneDrop(m->source, m->raw_key, false);
	i = 0;
	foreach(lc, tables)
	{
		CdTable    *table = lfirst(lc);
		int64		deleted;

		TombstoneWrite(m->source, table, m->raw_key, m->target->name, m->id);
		deleted = MoveDeleteKeyRows(m->source, table, m->raw_key);
		if (deleted != copied[i])
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("the source's rows of the key in table \"%s\" changed during move " INT64_FORMAT,
							table->name, m->id),
					 errdetail("The move copied " INT64_FORMAT " rows to shard \"%s\" and would have deleted " INT64_FORMAT " on shard \"%s\"; nothing was deleted.",
							   copied[i], m->target->name, deleted, m->source->name),
					 errhint("A statement that bypasses collegedb's guard (run_on_shard, or a client of the shard) wrote the key's rows during the move.")));
		i++;
	}
	JournalSetStep(m, "source_done", row_counts(tables, copied));
}

/*
 * step_map points the key (and every lookup key of its record) at the
 * target; a key without a mapping gets one (under computed placement: an
 * exception), except under the slots strategy when its slot leads to the
 * target anyway (a slot's move, or a rebalance to the slot's shard).
 */
static void
step_map(CdMoveRow *m)
{
	char		mapped[NAMEDATALEN];

	if (MappingFind(m->key, mapped) ||
		!RouterSlotSendsTo(m->raw_key, strlen(m->raw_key), m->target->name))
		MappingPoint(m->key, m->target->name);
	JournalSetStep(m, "mapped", NULL);
}

/*
 * scrub_target removes the target's copy of the key, when the source shows
 * under the key's lock that it still owns the key; true when it did, false
 * when the source step turns out to have committed (then the move rolls
 * forward: source_done).
 */
static bool
scrub_target(CdMoveRow *m)
{
	char	   *moved_to;
	ListCell   *lc;

	TombstoneLockKey(m->source, m->raw_key);
	moved_to = TombstoneFind(m->source, m->raw_key);
	TombstoneDrop(m->source, m->raw_key, true);
	if (moved_to != NULL && strcmp(moved_to, m->target->name) == 0)
	{
		JournalSetStep(m, "source_done", NULL);
		return false;
	}
	if (moved_to != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("shard \"%s\" has a tombstone of the key to shard \"%s\"; the target's copy is left alone",
						m->source->name, moved_to)));
	foreach(lc, tables_to_move())
		(void) MoveDeleteKeyRows(m->target, lfirst(lc), m->raw_key);
	RemoteCommitNow(m->target);
	return true;
}

/*
 * MoveStart journals a move of 'key' (in the caller's transaction) and
 * returns its id, held by this process (*generation).  An unfinished move
 * of the key whose holder is gone is taken over instead (*adopted; it may
 * go elsewhere than 'target').  One whose holder is alive is
 * MOVE_IN_PROGRESS, or, when 'busy' is given, returns 0 with that move's
 * id in *busy.  A key too long for either shard is refused here.
 */
int64
MoveStart(int64 job_id, const char *key, const char *source, const char *target,
		  int64 *generation, bool *adopted, int64 *busy)
{
	/* a move onto its own source would delete the rows it copies */
	if (strcmp(source, target) == 0)
		elog(ERROR, "move of a key from shard \"%s\" to itself", source);
	TombstoneEnsureKeyFits(ShardLookup(source), key, strlen(key), true);
	TombstoneEnsureKeyFits(ShardLookup(target), key, strlen(key), true);
	return JournalStartMove(job_id, RouterStoredKey(key, strlen(key)), key, source, target,
							generation, adopted, busy);
}

typedef enum MoveOutcome
{
	MOVE_OUTCOME_DONE,
	MOVE_OUTCOME_FAILED,
	MOVE_OUTCOME_TAKEN_OVER
} MoveOutcome;

/*
 * move_steps runs a move's remaining steps, one transaction each; returns
 * how it ended, and for a failed move its error in *failure.
 */
static MoveOutcome
move_steps(int64 move_id, int64 generation, char **failure)
{
	MemoryContext caller = CurrentMemoryContext;
	MemoryContext context = AllocSetContextCreate(CurrentMemoryContext,
												  "collegedb move",
												  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(context);
	MoveOutcome outcome = MOVE_OUTCOME_DONE;

	for (;;)
	{
		CdMoveRow	m;
		const char *done_step;

		WorkerBegin();
		if (!JournalLoadMove(move_id, generation, &m))
		{
			WorkerCommit();
			outcome = MOVE_OUTCOME_TAKEN_OVER;
			break;
		}
		pgstat_report_activity(STATE_RUNNING, psprintf("collegedb move " INT64_FORMAT ": %s", move_id, m.step));
		if (strcmp(m.step, "journaled") == 0)
			step_validate(&m), done_step = "copied";
		else if (strcmp(m.step, "copied") == 0)
			step_source(&m), done_step = "source_done";
		else if (strcmp(m.step, "source_done") == 0)
			step_map(&m), done_step = "mapped";
		else if (strcmp(m.step, "mapped") == 0)
			JournalEndMove(&m, false, NULL, NULL), done_step = "done";
		else
		{
			if (strcmp(m.step, "failed") == 0)
			{
				*failure = JournalMoveError(move_id);
				*failure = MemoryContextStrdup(caller, *failure ? *failure : "the move failed");
				outcome = MOVE_OUTCOME_FAILED;
			}
			WorkerCommit();
			break;
		}
		WorkerCommit();
		pgstat_report_activity(STATE_IDLE, NULL);
		MovePauseForTests(false, move_id, done_step);
		MemoryContextReset(context);
	}
	MemoryContextSwitchTo(old);
	MemoryContextDelete(context);
	return outcome;
}

/*
 * settle_failure runs, in a transaction of its own, what follows a failed
 * attempt that still holds the move: after a failed source step the
 * target's copy (if it committed one) is removed, and a move that gave up
 * and is clean ends failed.  Its own errors are only logged: the
 * coordinator tries again.
 */
static void
settle_failure(int64 move_id, int64 generation)
{
	MemoryContext context = CurrentMemoryContext;

	PG_TRY();
	{
		CdMoveRow	m;

		WorkerBegin();
		if (!JournalLoadMove(move_id, generation, &m))
			;					/* changed hands */
		else if (strcmp(m.step, "copied") == 0)
		{
			/* the source step ran: the target may hold a copy */
			if (scrub_target(&m) && m.abandoned)
				JournalEndMove(&m, true, NULL, NULL);
		}
		else if (strcmp(m.step, "journaled") == 0 && m.abandoned)
		{
			/* validation only removes rows: the target holds nothing of ours */
			JournalEndMove(&m, true, NULL, NULL);
		}
		WorkerCommit();
	}
	PG_CATCH();
	{
		ErrorData  *edata = WorkerCatchError(context);

		ereport(LOG,
				(errmsg("collegedb: could not remove the target's copy of the key of move " INT64_FORMAT ": %s",
						move_id, RemoteErrorText(edata))));
	}
	PG_END_TRY();
}

/*
 * record_failure records a failed attempt: its error, one more attempt,
 * when to retry, and whether the move gives up; then settles it and lets
 * the move go (its holder is gone, for the coordinator).
 */
static void
record_failure(int64 move_id, int64 generation, const char *message)
{
	WorkerBegin();
	JournalRecordFailure(move_id, generation, message);
	WorkerCommit();

	settle_failure(move_id, generation);

	WorkerBegin();
	JournalReleaseMove(move_id, generation);
	WorkerCommit();
}

/*
 * MoveRun carries a journaled move, held by this process with 'generation',
 * through its remaining steps, one transaction each.  Must be called
 * outside a transaction; errors go to the caller with the move left at the
 * last committed step and scheduled for a retry (see the file header).
 */
void
MoveRun(int64 move_id, int64 generation)
{
	MemoryContext caller = CurrentMemoryContext;
	char	   *failure = NULL;
	MoveOutcome outcome = MOVE_OUTCOME_DONE;

	for (int attempt = 1;; attempt++)
	{
		ErrorData  *edata = NULL;

		PG_TRY();
		{
			outcome = move_steps(move_id, generation, &failure);
		}
		PG_CATCH();
		{
			edata = WorkerCatchError(caller);
		}
		PG_END_TRY();
		if (edata == NULL)
			break;

		/*
		 * A deadlock or serialization failure on a shard (InnoDB's gap locks
		 * between movers): the step starts again from the last committed
		 * one, at once, a few times.
		 */
		if ((edata->sqlerrcode == ERRCODE_T_R_SERIALIZATION_FAILURE ||
			 edata->sqlerrcode == ERRCODE_T_R_DEADLOCK_DETECTED) &&
			attempt < MOVE_DEADLOCK_ATTEMPTS)
		{
			elog(LOG, "collegedb: move " INT64_FORMAT " retries after: %s", move_id, RemoteErrorText(edata));
			pg_usleep(50000L * attempt);
			continue;
		}
		record_failure(move_id, generation, RemoteErrorText(edata));
		MemoryContextSwitchTo(caller);
		ReThrowError(edata);
	}
	if (outcome == MOVE_OUTCOME_TAKEN_OVER)
		ereport(ERROR,
				(errcode(ERRCODE_CD_MOVE_IN_PROGRESS),
				 errmsg("move " INT64_FORMAT " was taken over by another worker", move_id)));
	if (outcome == MOVE_OUTCOME_FAILED)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s", failure)));
}

/*
 * MoveCleanUp finishes a move that gave up (held by this process with
 * 'generation'): removes the target's copy of the key and ends it failed,
 * or rolls it forward when its source step turns out to have committed.
 * Errors are recorded for the next try.
 */
void
MoveCleanUp(int64 move_id, int64 generation)
{
	MemoryContext caller = CurrentMemoryContext;
	ErrorData  *edata = NULL;

	PG_TRY();
	{
		settle_failure(move_id, generation);
	}
	PG_CATCH();
	{
		edata = WorkerCatchError(caller);
	}
	PG_END_TRY();

	WorkerBegin();
	JournalRetryLater(move_id, generation, edata ? RemoteErrorText(edata) : NULL);
	WorkerCommit();
}

/*
 * MoveWaitWhileHeld waits, outside a transaction, until a move is no
 * longer run by a live process (it ended, or its holder is gone and it can
 * be taken over); -1: a move that was not found, waited for briefly.
 * Interruptible.
 */
void
MoveWaitWhileHeld(int64 move_id)
{
	for (;;)
	{
		bool		held;

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 100, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (move_id < 0)
			return;
		WorkerBegin();
		held = JournalMoveHeld(move_id);
		WorkerCommit();
		if (!held)
			return;
	}
}
