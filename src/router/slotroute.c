/*-------------------------------------------------------------------------
 *
 * slotroute.c
 *	  The slots strategy (README.md "Slot maps"): a key without a mapping
 *	  goes to the shard of its slot in the installed slot map.
 *
 * slot = fnv1a32(ordered_binary(key)) mod slots; the newest installed map
 * names the slot's shard.  Nothing is written for such a key (no mapping
 * row, as under computed placement), and when warm nothing is read: the
 * map and the slots being moved are cached (catalog/slotmaps.c), and so is
 * the absence of a mapping (router.c).  A slot whose shard is not active
 * and writable refuses writes, naming the slot; reads still go there.
 *
 * While a slot moves (collegedb.move_slot, worker/slot_moves.c) its keys
 * have two candidates, the move's target first and its source second,
 * handled as computed placement's candidates are (routed.c): a read tries
 * the target, then the source, following tombstones; a write goes where
 * the key is found (the source for a key not moved yet, where it is
 * guarded and follows its tombstone once moved), else to the target, so
 * that no new key lands on the shard the slot is leaving; and while a
 * move of the key has not passed its source step, its statements go to
 * that move's source (RouterResolve).  A write takes the slot's lock in
 * share mode first, and the slot's move waits for those who hold it when
 * it begins: a transaction that wrote a new key of the slot to the source
 * before the move was recorded has ended before the move scans the source.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/inval.h"

#include "catalog/config.h"
#include "catalog/slotmaps.h"
#include "cd_errcodes.h"
#include "placement/slots.h"
#include "router/router.h"

/*
 * RouterSlotOf returns the key's slot under the installed map, and the map;
 * without one, the slots strategy cannot route (TOPOLOGY_UNAVAILABLE).
 */
int32
RouterSlotOf(const char *key, int key_len, const CdSlotMap **map)
{
	*map = SlotMapCurrent();
	if (*map == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CD_TOPOLOGY_UNAVAILABLE),
				 errmsg("the slots strategy has no installed slot map"),
				 errhint("Install one with collegedb.initialize_shard_map().")));
	return PlacementKeySlot(key, key_len, (*map)->slots);
}

/*
 * ensure_writable refuses a write to a slot whose shard does not take
 * writes.
 */
static void
ensure_writable(const CdShard *shard, int32 slot)
{
	if (RouterShardTakesKeys(shard))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_CD_NO_ELIGIBLE_SHARD),
			 errmsg("slot %d is on shard \"%s\", which takes no writes", slot, shard->name),
			 errdetail("The shard is %s%s.", ShardDrainName(shard->drain),
					   shard->writable ? "" : " and not writable"),
			 errhint("Move the slot with collegedb.move_slot(), or make the shard active and writable with collegedb.set_shard_state().")));
}

/*
 * The slot lock: a write routed by a slot takes it in share mode until its
 * transaction ends, before it looks whether the slot moves; a slot's move
 * takes it exclusively once, after recording the move, and so waits for
 * every transaction that may have written a new key of the slot to the
 * source under the map alone (RouterSlotWaitForWriters).  An advisory lock
 * of this database; pg_advisory_lock's own use field4 1 and 2.
 */
#define SLOT_LOCK_FIELD4 18

static void
slot_locktag(LOCKTAG *tag, int32 slot)
{
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, (uint32) slot, 0, SLOT_LOCK_FIELD4);
}

/*
 * RouterSlotWaitForWriters waits until every transaction that wrote a key
 * of 'slot' routed by the slot, before the slot's move was committed, has
 * ended (it committed or rolled back on its shard); later writes see the
 * move.  In a transaction.
 */
void
RouterSlotWaitForWriters(int32 slot)
{
	LOCKTAG		tag;

	slot_locktag(&tag, slot);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
	LockRelease(&tag, ExclusiveLock, false);
}

/*
 * RouterSlotRoute returns the route of a key without a mapping under the
 * slots strategy: its slot's shard, or while the slot moves its target
 * and its source (see the file header).
 */
CdRoute
RouterSlotRoute(const char *key, int key_len, bool for_write)
{
	const CdSlotMap *map;
	int32		slot = RouterSlotOf(key, key_len, &map);
	const CdSlotMove *move;
	CdRoute		route;

	if (for_write)
	{
		LOCKTAG		tag;

		/*
		 * Then a move recorded before the lock is seen (the file header),
		 * and the map it may have installed since: the slot count never
		 * changes, so the slot stays.  A lock held already was taken by an
		 * earlier write of this transaction, which the move waits for.
		 */
		slot_locktag(&tag, slot);
		if (LockAcquire(&tag, ShareLock, false, false) != LOCKACQUIRE_ALREADY_HELD)
		{
			AcceptInvalidationMessages();
			map = SlotMapCurrent();
		}
	}
	move = SlotMoveFind(slot);
	route.source = CD_ROUTE_SLOT;
	route.slot = slot;
	route.candidates = palloc(sizeof(CdShard *) * 2);
	route.epochs = palloc0(sizeof(int) * 2);
	if (move == NULL)
	{
		route.candidates[0] = ShardLookup(PlacementSlotShard(map, slot));
		route.ncandidates = 1;
	}
	else
	{
		route.candidates[0] = ShardLookup(move->target);
		route.candidates[1] = ShardLookup(move->source);
		route.ncandidates = 2;
	}
	if (for_write)
		ensure_writable(route.candidates[0], slot);
	route.shard = route.candidates[0];
	return route;
}

/*
 * RouterSlotHome returns the name of the shard a key without a mapping is
 * written to under the installed map: its slot's shard, or the target the
 * slot moves to.
 */
const char *
RouterSlotHome(const char *key, int key_len)
{
	const CdSlotMap *map;
	int32		slot = RouterSlotOf(key, key_len, &map);
	const CdSlotMove *move = SlotMoveFind(slot);

	return move ? move->target : PlacementSlotShard(map, slot);
}

/*
 * RouterSlotSendsTo says whether, under the slots strategy, a key without
 * a mapping is written to 'shard' by its slot: a move there needs no
 * mapping for the key.
 */
bool
RouterSlotSendsTo(const char *key, int key_len, const char *shard)
{
	if (ConfigGet()->write_strategy != CD_STRATEGY_SLOTS || SlotMapCurrent() == NULL)
		return false;
	return strcmp(RouterSlotHome(key, key_len), shard) == 0;
}
