/*-------------------------------------------------------------------------
 *
 * move_batches.c
 *	  A batch of a job's keys, all with the same source and target, moved
 *	  together through the journaled move protocol of moves.c
 *	  (src/README.md, "Batched moves"): one statement per table and step
 *	  for the whole batch instead of one per key.
 *
 * Each key keeps its own collegedb.move row, and every step moves all the
 * batch's rows to the step's state in one statement of the step's own
 * front transaction, so that each key's row says exactly what a one-key
 * move at that step would have done: the per-key machinery of moves.c
 * (MoveRun, the coordinator's recovery of a move whose worker died)
 * finishes any key a batch did not, from the step its row is at.
 *
 *	  journaled    the batch's rows, inserted in one statement
 * Keys leave a MySQL shard one by one (its adapter has no lock_keys_sql).
 *
 *	  copied       validated: each key still on the source (others are
 *	               left out); the target's stale rows of the keys removed
 *	  source_done  in one source transaction: the keys' locks taken in
 *	               byte order (on PostgreSQL tried without waiting: a key
 *	               whose lock a writer holds is left out), then the table
 *	               lock; one lookup of the keys' tombstones (a key with one
 *	               is left out: its own move committed this step); per
 *	               table one read of the keys' rows streamed into the
 *	               target's multi-row INSERTs; the target commits; then one
 *	               tombstone INSERT and one DELETE per table, the DELETE
 *	               removing exactly as many rows as were copied (otherwise
 *	               the step fails and the source keeps everything)
 *	  done         the keys' mappings pointed at the target in one
 *	               statement each (MappingPointMany), the rows ended and
 *	               the job's keys settled
 *
 * A key left out, or every key of a step that failed, is handed back to
 * the caller (movers.c), which moves it alone: its move row, held by this
 * process, is taken over by MoveStart and run from its step.  A step is
 * tried again at once after a deadlock or serialization failure on a
 * shard, a few times, before its keys go alone.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "catalog/journal.h"
#include "catalog/mappings.h"
#include "catalog/tables.h"
#include "cd_errcodes.h"
#include "collegedb.h"
#include "remote/remote.h"
#include "remote/tombstones.h"
#include "router/router.h"
#include "worker/move_batches.h"
#include "worker/move_shards.h"
#include "worker/moves.h"
#include "worker/unit.h"

/* how many times a batch's step that hit a deadlock on a shard is tried */
#define BATCH_DEADLOCK_ATTEMPTS 3

typedef struct Batch
{
	int64		job_id;
	const char *source;
	const char *target;
	int			n;
	char	  **keys;			/* as given, sorted byte-wise */
	char	  **stored;
	int64	   *ids;			/* 0: never journaled here */
	int64	   *generations;
	bool	   *in;				/* still in the batch */
	bool	   *done;
	bool	   *started;		/* journaled by the batch */
} Batch;

/* the batch's keys still in it, as arrays, in the caller's memory */
typedef struct BatchView
{
	int			n;
	int		   *at;				/* index into the batch */
	char	  **keys;
	char	  **stored;
	int64	   *ids;
	int64	   *generations;
} BatchView;

static void
view_of(const Batch *b, BatchView *v)
{
	v->n = 0;
	v->at = palloc(sizeof(int) * b->n);
	v->keys = palloc(sizeof(char *) * b->n);
	v->stored = palloc(sizeof(char *) * b->n);
	v->ids = palloc(sizeof(int64) * b->n);
	v->generations = palloc(sizeof(int64) * b->n);
	for (int i = 0; i < b->n; i++)
	{
		if (!b->in[i])
			continue;
		v->at[v->n] = i;
		v->keys[v->n] = b->keys[i];
		v->stored[v->n] = b->stored[i];
		v->ids[v->n] = b->ids[i];
		v->generations[v->n] = b->generations[i];
		v->n++;
	}
}

/*
 * lock_rows locks the rows of the batch's moves at 'step' that this
 * process still holds, leaving the others out, and returns the view of
 * the keys still in.
 */
static void
lock_rows(Batch *b, const char *step, BatchView *v)
{
	bool	   *held;

	view_of(b, v);
	held = palloc(sizeof(bool) * Max(v->n, 1));
	JournalLockMoves(v->n, v->ids, v->generations, step, held);
	for (int i = 0; i < v->n; i++)
		if (!held[i])
			b->in[v->at[i]] = false;
	view_of(b, v);
}

/*
 * step_journal journals the batch's keys that fit both shards' tombstones;
 * the others, and keys with an unfinished move already, go alone.
 */
static void
step_journal(Batch *b)
{
	const CdShard *source = ShardLookup(b->source);
	const CdShard *target = ShardLookup(b->target);
	BatchView	v;
	/* a dialect that cannot lock a batch's keys lets them go one by one */
	bool		batches = AdapterForDialect(source->dialect)->lock_keys_sql != NULL;

	for (int i = 0; i < b->n; i++)
		b->in[i] = batches &&
			TombstoneKeyFits(source, b->keys[i], strlen(b->keys[i])) &&
			TombstoneKeyFits(target, b->keys[i], strlen(b->keys[i]));
	view_of(b, &v);
	if (v.n == 0)
		return;
	JournalStartMoves(b->job_id, v.n, v.stored, v.keys, b->source, b->target, v.ids);
	for (int i = 0; i < v.n; i++)
	{
		b->ids[v.at[i]] = v.ids[i];
		b->generations[v.at[i]] = 1;
		b->in[v.at[i]] = v.ids[i] > 0;
		b->started[v.at[i]] = v.ids[i] > 0;
	}
}

/*
 * step_validate leaves out the keys that are no longer on the source (the
 * one-key validation ends their moves) and removes the target's stale
 * rows of the others.
 */
static void
step_validate(Batch *b)
{
	const CdShard *source = ShardLookup(b->source);
	const CdShard *target = ShardLookup(b->target);
	BatchView	v;
	ListCell   *lc;

	lock_rows(b, "journaled", &v);
	for (int i = 0; i < v.n; i++)
		if (!ShardIs(RouterLocateKey(v.keys[i]), source))
			b->in[v.at[i]] = false;
	view_of(b, &v);
	if (v.n == 0)
		return;
	foreach(lc, RegisteredTables())
		(void) MoveDeleteKeysRows(target, lfirst(lc), v.n, v.keys);
	JournalSetSteps(v.n, v.ids, v.generations, "copied");
}

/* leave_out takes the keys named in 'rows' (column 0) out of the batch */
static void
leave_out(Batch *b, const BatchView *v, List *rows, bool capture)
{
	ListCell   *lc;

	foreach(lc, rows)
	{
		const char *key = capture ? ((CdParam *) lfirst(lc))[0].str : lfirst(lc);

		for (int i = 0; key && i < v->n; i++)
			if (strcmp(v->keys[i], key) == 0)
				b->in[v->at[i]] = false;
	}
}

/*
 * step_source moves the batch's rows: see the file header.
 */
static void
step_source(Batch *b)
{
	const CdShard *source = ShardLookup(b->source);
	const CdShard *target = ShardLookup(b->target);
	List	   *tables = RegisteredTables();
	int64	   *copied = palloc0(sizeof(int64) * list_length(tables));
	List	   *moved;
	BatchView	locked;
	BatchView	v;
	int			t;
	ListCell   *lc;

	lock_rows(b, "copied", &v);
	if (v.n == 0)
		return;

	/* both shards' transactions in name order, as a one-key move's */
	if (strcmp(target->name, source->name) < 0)
		TombstoneDropKeys(target, v.n, v.keys, false);
	leave_out(b, &v, TombstoneLockKeys(source, v.n, v.keys), false);
	view_of(b, &locked);
	MovePauseForTests(true, v.ids[0], "source_lock");

	/* a key whose move committed this step already goes on alone */
	moved = TombstoneFindKeys(source, locked.n, locked.keys);
	leave_out(b, &locked, moved, true);
	view_of(b, &v);
	if (v.n == 0)
	{
		if (locked.n > 0)
			TombstoneDropKeys(source, locked.n, locked.keys, true);
		return;
	}

	if (strcmp(target->name, source->name) >= 0)
		TombstoneDropKeys(target, v.n, v.keys, false);
	t = 0;
	foreach(lc, tables)
	{
		(void) MoveDeleteKeysRows(target, lfirst(lc), v.n, v.keys);
		copied[t++] = MoveCopyKeysRows(source, target, lfirst(lc), v.n, v.keys);
	}

	/* the target commits first, as in a one-key move (see moves.c) */
	RemoteCommitNow(target);
	MovePauseForTests(true, v.ids[0], "source");

	/* the placeholders of keys left out, the stale tombstones of the rest */
	if (locked.n > v.n)
		TombstoneDropKeys(source, locked.n, locked.keys, true);
	TombstoneDropKeys(source, v.n, v.keys, false);
	t = 0;
	foreach(lc, tables)
	{
		CdTable    *table = lfirst(lc);
		int64		deleted;

		TombstoneWriteKeys(source, table, v.n, v.keys, target->name, v.ids);
		deleted = MoveDeleteKeysRows(source, table, v.n, v.keys);
		if (deleted != copied[t])
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("the source's rows of a batch of %d keys in table \"%s\" changed during the batch's move",
							v.n, table->name),
					 errdetail("The batch copied " INT64_FORMAT " rows to shard \"%s\" and would have deleted " INT64_FORMAT " on shard \"%s\"; nothing was deleted, and the keys move alone.",
							   copied[t], target->name, deleted, source->name)));
		t++;
	}
	JournalSetSteps(v.n, v.ids, v.generations, "source_done");
}

/*
 * step_map points the batch's keys at the target (a key without a
 * mapping gets one, except under the slots strategy when its slot leads
 * to the target anyway, as in a one-key move) and ends their moves.
 */
static void
step_map(Batch *b)
{
	char		mapped[NAMEDATALEN];
	char	  **point;
	int			npoint = 0;
	BatchView	v;

	lock_rows(b, "source_done", &v);
	if (v.n == 0)
		return;
	point = palloc(sizeof(char *) * v.n);
	for (int i = 0; i < v.n; i++)
		if (MappingFind(v.stored[i], mapped) ||
			!RouterSlotSendsTo(v.keys[i], strlen(v.keys[i]), b->target))
			point[npoint++] = v.stored[i];
	if (npoint > 0)
		MappingPointMany(npoint, point, b->target);
	JournalEndMoves(b->job_id, v.n, v.ids, v.generations, v.stored);
	for (int i = 0; i < v.n; i++)
		b->done[v.at[i]] = true;
}

/*
 * run_step runs one step of the batch in a unit of its own; false when it
 * failed (then its keys go alone), after retries of a deadlock.
 */
static bool
run_step(Batch *b, void (*step) (Batch *), const char *name)
{
	MemoryContext caller = CurrentMemoryContext;
	MemoryContext context = AllocSetContextCreate(caller, "collegedb move batch step",
												  ALLOCSET_DEFAULT_SIZES);
	bool	   *in_before = palloc(sizeof(bool) * b->n);
	bool		ok = false;

	memcpy(in_before, b->in, sizeof(bool) * b->n);
	for (int attempt = 1;; attempt++)
	{
		ErrorData  *edata = NULL;

		MemoryContextSwitchTo(context);
		PG_TRY();
		{
			WorkerBegin();
			pgstat_report_activity(STATE_RUNNING,
								   psprintf("collegedb move batch of %d keys: %s", b->n, name));
			step(b);
			WorkerCommit();
			pgstat_report_activity(STATE_IDLE, NULL);
			ok = true;
		}
		PG_CATCH();
		{
			edata = WorkerCatchError(caller);
		}
		PG_END_TRY();
		MemoryContextSwitchTo(caller);
		MemoryContextReset(context);
		if (ok)
			break;
		/* a step that failed changed nothing of the front's: as before */
		memcpy(b->in, in_before, sizeof(bool) * b->n);
		if ((edata->sqlerrcode == ERRCODE_T_R_DEADLOCK_DETECTED ||
			 edata->sqlerrcode == ERRCODE_T_R_SERIALIZATION_FAILURE) &&
			attempt < BATCH_DEADLOCK_ATTEMPTS)
		{
			elog(LOG, "collegedb: a move batch retries its step %s after: %s",
				 name, RemoteErrorText(edata));
			pg_usleep(50000L * attempt);
			continue;
		}
		ereport(LOG,
				(errmsg("collegedb: a move batch of %d keys from \"%s\" to \"%s\" failed at step %s; its keys move alone: %s",
						b->n, b->source, b->target, name, RemoteErrorText(edata))));
		FreeErrorData(edata);
		break;
	}
	MemoryContextDelete(context);
	pfree(in_before);
	if (ok)
		MovePauseForTests(false, b->ids[0], name);
	return ok;
}

/*
 * MoveBatch moves a job's claimed keys (sorted byte-wise, all from
 * 'source' to 'target') as one batch, outside a transaction; done[i]
 * says whether key i moved.  A key not done is for the caller to move
 * alone: when started[i], the batch journaled its move, held by this
 * process at the step it reached, and it must be finished even if the
 * job is cancelled.  Returns how long the source step took, in
 * milliseconds (the time writers of the batch's keys may have waited), or
 * -1 when the batch did not reach it.
 */
long
MoveBatch(int64 job_id, int n, const CdJobKeyRow *keys, bool *done, bool *started)
{
	Batch		b;
	long		source_ms = -1;

	b.job_id = job_id;
	b.source = keys[0].source;
	b.target = keys[0].target;
	b.n = n;
	b.keys = palloc(sizeof(char *) * n);
	b.stored = palloc(sizeof(char *) * n);
	b.ids = palloc0(sizeof(int64) * n);
	b.generations = palloc0(sizeof(int64) * n);
	b.in = palloc0(sizeof(bool) * n);
	b.done = done;
	b.started = started;
	for (int i = 0; i < n; i++)
	{
		b.keys[i] = keys[i].key;
		b.stored[i] = keys[i].stored;
		done[i] = false;
		started[i] = false;
	}
	if (strcmp(b.source, b.target) == 0)
		return -1;
	if (run_step(&b, step_journal, "journaled") &&
		run_step(&b, step_validate, "copied"))
	{
		TimestampTz source_start = GetCurrentTimestamp();
		bool		ok = run_step(&b, step_source, "source_done");

		source_ms = TimestampDifferenceMilliseconds(source_start, GetCurrentTimestamp());
		if (ok)
			(void) run_step(&b, step_map, "done");
	}
	pfree(b.keys);
	pfree(b.stored);
	pfree(b.ids);
	pfree(b.generations);
	pfree(b.in);
	return source_ms;
}
