/*-------------------------------------------------------------------------
 *
 * slot_moves.c
 *	  Moves a slot to another shard (collegedb.move_slot): every
 *	  key of the slot, for every registered table, with the journaled move
 *	  protocol, then the next version of the slot map with the slot on its
 *	  new shard.
 *
 * A move_slot job
 *	  1. records the slot's move (collegedb.slot_move: source, target, job),
 *	     committed on its own.  From then on the router gives the slot's
 *	     keys two candidates, the target first (router/slotroute.c): a
 *	     key not moved yet is found on the source and written there
 *	     (guarded), a moved one follows its tombstone, and a new key is
 *	     written to the target, so that nothing new lands on the shard the
 *	     slot leaves.
 *	  2. scans the source's registered tables for the keys of the slot (the
 *	     shards cannot compute fnv1a32 of a key's ordered-binary form, so
 *	     the front computes each key's slot as the keys stream by) that
 *	     have no mapping (a mapped key follows its mapping, not its slot),
 *	     records them in collegedb.job_key and moves them, 'concurrency'
 *	     at a time (worker/movers.c; each key's move is journaled and
 *	     recovers as any key move does, and needs no mapping: the slot's
 *	     route already leads to the target).  It scans again, until a scan
 *	     finds no key of the slot on the source (a key written there by a
 *	     statement routed before step 1 committed is found by the next
 *	     scan), at most SLOT_MOVE_ROUNDS times.  Before the first scan it
 *	     waits until every front transaction that wrote a key of the slot
 *	     routed by the slot before step 1 committed has ended (the slot's
 *	     lock, router/slotroute.c): it may have written a new key of the
 *	     slot to the source under the map alone, and commit it later; and
 *	     it resolves the prepared transactions two-phase commit left on
 *	     the source (settle_in_doubt), since such a writer's front
 *	     transaction may have ended while its row is still prepared there.
 *	  3. installs the next map version with the slot on the target and
 *	     ends the slot's move, in one transaction.
 *
 * Every step can run again: a job whose worker died is queued again by
 * the coordinator and starts over at 1, which finds the slot's move it
 * recorded; a slot that is on the target already (the new version was
 * installed before the crash) ends the job with the installed snapshot.
 * A job that fails or is cancelled leaves the slot moving (its keys keep
 * both candidates, so each is found); move_slot to the same target
 * finishes it.  An empty slot only gets the new version.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "catalog/journal.h"
#include "catalog/mappings.h"
#include "catalog/slotmaps.h"
#include "catalog/tables.h"
#include "cd_errcodes.h"
#include "placement/slots.h"
#include "remote/remote.h"
#include "router/router.h"
#include "worker/movers.h"
#include "worker/slot_moves.h"
#include "worker/unit.h"

/* how many times the source is scanned for keys of the slot that moved in */
#define SLOT_MOVE_ROUNDS 5

/*
 * SlotMoveCheck checks a move of 'slot' to 'target' and returns the map in
 * force, with in *source the shard the slot is on now (where an unfinished
 * move of the slot comes from).  No map is TOPOLOGY_UNAVAILABLE, a slot
 * out of range invalid_parameter_value, a target that is not registered
 * SHARD_NOT_FOUND and one that takes no keys NO_ELIGIBLE_SHARD; a slot
 * that is moving elsewhere is MOVE_IN_PROGRESS.
 */
const CdSlotMap *
SlotMoveCheck(int32 slot, const char *target, const char **source)
{
	const CdSlotMap *map = SlotMapCurrent();
	const CdShard *to;
	const CdSlotMove *move;

	if (map == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CD_TOPOLOGY_UNAVAILABLE),
				 errmsg("no slot map is installed"),
				 errhint("Install one with collegedb.initialize_shard_map().")));
	if (slot < 0 || slot >= map->slots)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("slot %d does not exist: the installed map has %s",
						slot, SlotSpanText(0, map->slots))));
	to = ShardLookup(target);
	if (!RouterShardTakesKeys(to))
		ereport(ERROR,
				(errcode(ERRCODE_CD_NO_ELIGIBLE_SHARD),
				 errmsg("shard \"%s\" does not take keys", target),
				 errhint("Slots move only to active, writable shards.")));
	move = SlotMoveFind(slot);
	if (move != NULL && strcmp(move->target, target) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_CD_MOVE_IN_PROGRESS),
				 errmsg("slot %d is moving from shard \"%s\" to shard \"%s\"",
						slot, move->source, move->target),
				 errhint("Finish that move first: collegedb.move_slot(%d, '%s').",
						 slot, move->target)));
	*source = move ? pstrdup(move->source) : pstrdup(PlacementSlotShard(map, slot));
	return map;
}

/*
 * settle_in_doubt resolves the prepared transactions that two-phase commit
 * left on the slot's source, before its keys are scanned.  A writer of a
 * new key of the slot whose COMMIT PREPARED on the source failed has ended
 * on the front, releasing the slot's lock, while its row is still prepared
 * there: invisible to the scans, it would be committed by recovery after
 * the slot left the shard, and lost to reads.  A recovery pass commits (or
 * rolls back) what the front decided; what it cannot decide on the source
 * fails the job, which can be run again.
 */
static void
settle_in_doubt(int32 slot, const char *source)
{
	ListCell   *lc;

	foreach(lc, RecoveryRun(true))
	{
		CdInDoubt  *row = lfirst(lc);

		if (strcmp(row->shard, source) != 0 ||
			strcmp(row->action, "committed") == 0 ||
			strcmp(row->action, "rolled back") == 0 ||
			strcmp(row->action, "gone") == 0 ||
			strcmp(row->action, "in progress") == 0)
			continue;
		ereport(ERROR,
				(errcode(ERRCODE_CD_JOB_FAILED),
				 errmsg("slot %d cannot move while shard \"%s\" holds an undecided prepared transaction",
						slot, source),
				 errdetail("Recovery reported %s%s%s%s.", row->action,
						   row->gid ? " for " : "", row->gid ? row->gid : "",
						   row->error ? psprintf(": %s", row->error) : ""),
				 errhint("Resolve it (collegedb.prepared_transactions shows it), then move the slot again.")));
	}
}

/*
 * begin_move records the slot's move under this job (or takes over the
 * one recorded by an earlier run of it, or by a job that ended); returns
 * its source, or NULL with the installed snapshot in *snapshot when the
 * slot is on the target already.
 */
static char *
begin_move(int64 job_id, int32 slot, const char *target, char **snapshot)
{
	const char *source;
	const CdSlotMove *move;

	/* one installer at a time: the lock is held to the commit */
	(void) SlotMapLockNewest();
	(void) SlotMoveCheck(slot, target, &source);
	move = SlotMoveFind(slot);
	if (move != NULL && move->job_id != 0 && move->job_id != job_id)
	{
		char	   *state;
		Jsonb	   *result;
		char	   *error;

		if (JournalJobOutcome(move->job_id, &state, &result, &error) &&
			(strcmp(state, "queued") == 0 || strcmp(state, "running") == 0))
			ereport(ERROR,
					(errcode(ERRCODE_CD_MOVE_IN_PROGRESS),
					 errmsg("slot %d is being moved by job " INT64_FORMAT, slot, move->job_id),
					 errhint("Wait for it with collegedb.wait_for_job()."),
					 errdetail("The job is %s.", state)));
	}
	if (move == NULL && strcmp(source, target) == 0)
	{
		*snapshot = PlacementSlotMapSnapshot(SlotMapCurrent());
		return NULL;
	}
	SlotMoveInsert(slot, source, target, job_id);
	return pstrdup(source);
}

/* a sink that keeps the keys of one slot, as they stream by */
typedef struct SlotKeySink
{
	CdRowSink	base;
	int32		slot;
	int32		slots;
	MemoryContext context;
	List	   *keys;			/* of char * */
} SlotKeySink;

static void
slot_key_columns(CdRowSink *self, int ncols, const char *const *names)
{
}

static void
slot_key_row(CdRowSink *self, int ncols, const CdCell *cells)
{
	SlotKeySink *sink = (SlotKeySink *) self;

	if (cells[0].isnull || cells[0].kind == CD_VALUE_NULL)
		return;
	if (PlacementKeySlot(cells[0].data, cells[0].len, sink->slots) == sink->slot)
	{
		MemoryContext old = MemoryContextSwitchTo(sink->context);

		sink->keys = lappend(sink->keys, pnstrdup(cells[0].data, cells[0].len));
		MemoryContextSwitchTo(old);
	}
}

static int
compare_keys(const ListCell *a, const ListCell *b)
{
	return strcmp(lfirst(a), lfirst(b));
}

/*
 * plan_round records in collegedb.job_key the keys of the slot found on
 * the source, in any registered table, without a mapping; returns how
 * many.
 */
static int
plan_round(int64 job_id, int32 slot, const char *source, const char *target)
{
	const CdShard *from = ShardLookup(source);
	const CdAdapter *adapter = AdapterForDialect(from->dialect);
	SlotKeySink sink;
	List	   *keys = NIL;
	const char *previous = NULL;
	ListCell   *lc;

	memset(&sink, 0, sizeof(sink));
	sink.base.columns = slot_key_columns;
	sink.base.row = slot_key_row;
	sink.slot = slot;
	sink.slots = SlotMapCurrent()->slots;
	sink.context = CurrentMemoryContext;
	foreach(lc, RegisteredTables())
	{
		CdTable    *table = lfirst(lc);

		/* in the source's dialect: identifiers quote differently */
		(void) RemoteExecuteInternal(from, psprintf("SELECT DISTINCT %s FROM %s",
													adapter->quote_ident(table->key_column),
													adapter->quote_ident(table->name)),
									 0, NULL, &sink.base, false);
	}

	list_sort(sink.keys, compare_keys);
	foreach(lc, sink.keys)
	{
		char	   *key = lfirst(lc);
		const CdShard *mapped;
		CdJobKeyRow *k;

		if (previous && strcmp(previous, key) == 0)
			continue;
		previous = key;
		/* a key with a mapping lives where its mapping says */
		if (RouterFindMapping(key, strlen(key), &mapped))
			continue;
		k = palloc(sizeof(CdJobKeyRow));
		k->stored = RouterStoredKey(key, strlen(key));
		k->key = key;
		k->source = source;
		k->target = target;
		keys = lappend(keys, k);
	}
	if (keys != NIL)
	{
		JournalForgetPendingJobKeys(job_id);
		JournalAddJobKeys(job_id, keys);
	}
	return list_length(keys);
}

/*
 * install_version installs the next map version with the slot on the
 * target (unless the newest has it there already) and ends the slot's
 * move; returns the snapshot in force.
 */
static char *
install_version(int32 slot, const char *target)
{
	CdSlotMap  *newest = SlotMapLockNewest();
	CdSlotMap  *next;

	if (newest == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CD_TOPOLOGY_UNAVAILABLE),
				 errmsg("no slot map is installed")));
	if (SlotMoveFind(slot) != NULL)
		SlotMoveDelete(slot);
	if (strcmp(PlacementSlotShard(newest, slot), target) == 0)
		return PlacementSlotMapSnapshot(newest);
	next = PlacementSlotMapWith(newest, slot, target);
	next->version = newest->version + 1;
	next->digest = PlacementSlotMapDigest(next);
	SlotMapInsert(next, PlacementSlotRangesJson(next));
	return PlacementSlotMapSnapshot(next);
}

/*
 * SlotMoveRun moves 'slot' to 'target' under job 'job_id' (see the file
 * header) and returns the new snapshot, in TopMemoryContext; NULL when
 * the job was cancelled.  Must be called outside a transaction.
 */
char *
SlotMoveRun(int64 job_id, int32 slot, const char *target, int concurrency)
{
	MemoryContext caller = CurrentMemoryContext;
	MemoryContext context = AllocSetContextCreate(CurrentMemoryContext,
												  "collegedb slot move",
												  ALLOCSET_DEFAULT_SIZES);
	char	   *snapshot = NULL;
	char	   *source;
	char	   *result;

	MemoryContextSwitchTo(context);
	WorkerBegin();
	source = begin_move(job_id, slot, target, &snapshot);
	if (source == NULL)
		snapshot = MemoryContextStrdup(TopMemoryContext, snapshot);
	else
		source = MemoryContextStrdup(caller, source);
	WorkerCommit();
	if (source == NULL)
	{
		MemoryContextSwitchTo(caller);
		MemoryContextDelete(context);
		return snapshot;
	}

	/*
	 * A transaction that routed a new key of the slot to the source before
	 * the slot's move was recorded may commit it there after any scan; once
	 * every such transaction has ended, the scans find all of the slot's keys.
	 */
	WorkerBegin();
	RouterSlotWaitForWriters(slot);
	WorkerCommit();
	WorkerBegin();
	settle_in_doubt(slot, source);
	WorkerCommit();

	for (int round = 1;; round++)
	{
		int			nkeys;
		bool		goes_on;
		char	   *error;

		MemoryContextReset(context);
		MemoryContextSwitchTo(context);
		WorkerBegin();
		goes_on = JournalJobGoesOn(job_id);
		nkeys = goes_on ? plan_round(job_id, slot, source, target) : 0;
		WorkerCommit();
		if (!goes_on)
		{
			MemoryContextSwitchTo(caller);
			MemoryContextDelete(context);
			return NULL;
		}
		if (nkeys == 0)
			break;
		if (round > SLOT_MOVE_ROUNDS)
		{
			WorkerBegin();
			/* the error is read after the commit: into the move's context */
			MemoryContextSwitchTo(context);
			(void) JournalJobKeysLeft(job_id, &error);
			WorkerCommit();
			ereport(ERROR,
					(errcode(ERRCODE_CD_JOB_FAILED),
					 errmsg("%d keys of slot %d are still on shard \"%s\" after %d rounds of moves",
							nkeys, slot, source, SLOT_MOVE_ROUNDS),
					 error ? errdetail("One failed with: %s", error) : 0,
					 errhint("The slot stays moving (every key is found); move_slot(%d, '%s') again finishes it.",
							 slot, target)));
		}
		MemoryContextSwitchTo(caller);
		JobMoveKeys(job_id, concurrency, nkeys);
	}

	MemoryContextSwitchTo(context);
	WorkerBegin();
	result = MemoryContextStrdup(TopMemoryContext, install_version(slot, target));
	WorkerCommit();
	MemoryContextSwitchTo(caller);
	MemoryContextDelete(context);
	return result;
}
