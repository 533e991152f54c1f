/*-------------------------------------------------------------------------
 *
 * slotmaps.c
 *	  Reads the installed slot maps (collegedb.slot_map) and the slots being
 *	  moved (collegedb.slot_move) into backend-local caches, parses a map's
 *	  ranges from jsonb, and writes both tables.
 *
 * Slot maps are versioned and never change: a new version is a new row
 * (the table's guard trigger refuses edits, deletes and gaps), and the
 * newest one is in force.  Its ranges are stored normalised (sorted by
 * start, adjacent ranges of one shard merged), so the cache keeps them as
 * they are and the router finds a slot's range by binary search.  Both
 * caches are dropped by the tables' invalidation triggers (catalog.c).
 *
 * What this file does not do: decide what a map should be (normalising,
 * the default map and the digest are placement/slots.c), or route.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/rel.h"

#include "catalog/catalog.h"
#include "catalog/slotmaps.h"

#define Anum_slot_map_version	1
#define Anum_slot_map_slots		3
#define Anum_slot_map_digest	2
#define Anum_slot_map_ranges	4

#define Anum_slot_move_slot		1
#define Anum_slot_move_source	2
#define Anum_slot_move_target	3
#define Anum_slot_move_job_id	4

static MemoryContext map_context = NULL;
static MemoryContext moves_context = NULL;
static CdSlotMap *current_map = NULL;	/* NULL: none installed */
static bool map_valid = false;
static List *slot_moves = NIL;	/* of CdSlotMove * */
static bool moves_valid = false;

/*
 * SlotMapInit makes a change of either table drop its cache.
 */
void
SlotMapInit(void)
{
	CatalogCacheRegister(CD_REL_SLOT_MAP, &map_valid);
	CatalogCacheRegister(CD_REL_SLOT_MOVE, &moves_valid);
}


/*
 * json_int reads an integral JSON number into *value; false when it is not
 * one, or out of int32 range.
 */
static bool
json_int(JsonbValue *v, int32 *value)
{
	char	   *text;
	char	   *end;
	long		n;

	if (v == NULL || v->type != jbvNumeric)
		return false;
	text = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v->val.numeric)));
	errno = 0;
	n = strtol(text, &end, 10);
	if (errno != 0 || *end != '\0' || end == text || n < PG_INT32_MIN || n > PG_INT32_MAX)
		return false;
	*value = (int32) n;
	return true;
}

static JsonbValue *
json_field(JsonbContainer *object, const char *name)
{
	return getKeyJsonValueFromContainer(object, name, strlen(name), NULL);
}

/*
 * SlotSpanText names the slots start .. end - 1 for a message: "slot 3",
 * "slots 0 to 7".
 */
char *
SlotSpanText(int32 start, int32 end)
{
	return end - start == 1 ? psprintf("slot %d", start) :
		psprintf("slots %d to %d", start, end - 1);
}

/* uncovered says that the slots start .. end - 1 are in no range */
static char *
uncovered(int32 start, int32 end)
{
	return end - start == 1 ? psprintf("slot %d is in no range", start) :
		psprintf("slots %d to %d are in no range", start, end - 1);
}

static void
bad_ranges(const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid slot map ranges: %s", detail),
			 errhint("Give a JSON array of {\"start\": s, \"end\": e, \"shard\": name} objects with exclusive ends that covers every slot once.")));
}

static int
range_by_start(const void *a, const void *b)
{
	const CdSlotRange *ra = a;
	const CdSlotRange *rb = b;

	return (ra->start > rb->start) - (ra->start < rb->start);
}

/*
 * SlotMapParse reads a map of 'slots' slots from its ranges, a jsonb array
 * of {"start", "end", "shard"} objects, and checks that they are a
 * complete, non-overlapping cover of 0 .. slots - 1 (ends exclusive);
 * anything else is invalid_parameter_value saying what is wrong.  The
 * ranges come back sorted by start, not merged, in the current memory
 * context; whether the shards exist is the caller's to check.
 */
CdSlotMap *
SlotMapParse(int32 slots, Jsonb *ranges)
{
	CdSlotMap  *map = palloc0(sizeof(CdSlotMap));
	int			n;

	if (slots < 1 || slots > SLOT_MAP_MAX_SLOTS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("slots must be between 1 and %d, not %d", SLOT_MAP_MAX_SLOTS, slots)));
	if (!JB_ROOT_IS_ARRAY(ranges) || JB_ROOT_IS_SCALAR(ranges))
		bad_ranges("ranges is not a JSON array");
	n = JB_ROOT_COUNT(ranges);
	if (n == 0)
		bad_ranges("the array is empty");

	map->slots = slots;
	map->nranges = n;
	map->ranges = palloc(sizeof(CdSlotRange) * n);
	for (int i = 0; i < n; i++)
	{
		JsonbValue *elem = getIthJsonbValueFromContainer(&ranges->root, i);
		JsonbContainer *object;
		JsonbValue *shard;
		CdSlotRange *r = &map->ranges[i];

		if (elem->type != jbvBinary || !JsonContainerIsObject(elem->val.binary.data))
			bad_ranges(psprintf("element %d is not an object", i));
		object = elem->val.binary.data;
		if (!json_int(json_field(object, "start"), &r->start) ||
			!json_int(json_field(object, "end"), &r->end))
			bad_ranges(psprintf("element %d needs integer \"start\" and \"end\"", i));
		shard = json_field(object, "shard");
		if (shard == NULL || shard->type != jbvString || shard->val.string.len == 0)
			bad_ranges(psprintf("element %d needs a shard name (a non-empty string) in \"shard\"", i));
		if (JsonContainerSize(object) != 3)
			bad_ranges(psprintf("element %d has fields other than \"start\", \"end\" and \"shard\"", i));
		r->shard = pnstrdup(shard->val.string.val, shard->val.string.len);
		if (r->start < 0 || r->end <= r->start || r->end > slots)
			bad_ranges(psprintf("element %d (start %d, end %d) is not a range within slots 0 to %d: start must be at least 0 and below end, end at most %d",
								i, r->start, r->end, slots - 1, slots));
	}

	qsort(map->ranges, n, sizeof(CdSlotRange), range_by_start);
	for (int i = 0; i < n; i++)
	{
		int32		expected = i == 0 ? 0 : map->ranges[i - 1].end;

		if (map->ranges[i].start > expected)
			bad_ranges(uncovered(expected, map->ranges[i].start));
		if (map->ranges[i].start < expected)
			bad_ranges(psprintf("ranges overlap at slot %d", map->ranges[i].start));
	}
	if (map->ranges[n - 1].end != slots)
		bad_ranges(uncovered(map->ranges[n - 1].end, slots));
	return map;
}

/*
 * parse_stored turns a stored row into a map in the cache's context.
 */
static CdSlotMap *
parse_stored(HeapTuple tuple, TupleDesc desc)
{
	bool		isnull;
	int32		version = DatumGetInt32(heap_getattr(tuple, Anum_slot_map_version, desc, &isnull));
	int32		slots = DatumGetInt32(heap_getattr(tuple, Anum_slot_map_slots, desc, &isnull));
	char	   *digest = TextDatumGetCString(heap_getattr(tuple, Anum_slot_map_digest, desc, &isnull));
	Jsonb	   *ranges = DatumGetJsonbP(heap_getattr(tuple, Anum_slot_map_ranges, desc, &isnull));
	CdSlotMap  *map = SlotMapParse(slots, ranges);

	map->version = version;
	map->digest = digest;
	return map;
}

static void
load_map(void)
{
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tuple;
	HeapTuple	newest = NULL;
	int32		newest_version = 0;
	Snapshot	snapshot = CatalogReadSnapshot();
	MemoryContext old;

	/* each cache has its own context: reloading one keeps the other valid */
	if (map_context == NULL)
		map_context = AllocSetContextCreate(CacheMemoryContext, "collegedb slot map cache",
											ALLOCSET_SMALL_SIZES);
	MemoryContextReset(map_context);
	current_map = NULL;

	rel = table_open(CatalogRelid(CD_REL_SLOT_MAP), AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, snapshot, 0, NULL);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		bool		isnull;
		int32		version = DatumGetInt32(heap_getattr(tuple, Anum_slot_map_version,
														 RelationGetDescr(rel), &isnull));

		if (version > newest_version)
		{
			if (newest)
				heap_freetuple(newest);
			newest = heap_copytuple(tuple);
			newest_version = version;
		}
	}
	systable_endscan(scan);
	if (newest)
	{
		old = MemoryContextSwitchTo(map_context);
		current_map = parse_stored(newest, RelationGetDescr(rel));
		MemoryContextSwitchTo(old);
		heap_freetuple(newest);
	}
	table_close(rel, AccessShareLock);
	CatalogReleaseSnapshot(snapshot);
	map_valid = true;
}

/*
 * SlotMapCurrent returns the slot map in force (the newest version), NULL
 * when none is installed.  It belongs to the cache.
 */
const CdSlotMap *
SlotMapCurrent(void)
{
	if (!map_valid)
		load_map();
	return current_map;
}

/*
 * SlotMapLockNewest locks the slot maps against other installers until the
 * end of the transaction and returns the newest one as committed now (NULL
 * when none is), in the current memory context.
 */
CdSlotMap *
SlotMapLockNewest(void)
{
	CdCatalogRows rows;
	CdSlotMap  *map;
	bool		isnull;

	(void) CatalogExec("LOCK TABLE collegedb.slot_map IN SHARE ROW EXCLUSIVE MODE",
					   0, NULL, NULL, NULL, false, NULL);
	if (CatalogExec("SELECT version, digest, slots, ranges FROM collegedb.slot_map "
					"ORDER BY version DESC LIMIT 1", 0, NULL, NULL, NULL, false, &rows) == 0)
		return NULL;
	map = SlotMapParse(DatumGetInt32(CatalogValue(&rows, 0, 3, &isnull)),
					   DatumGetJsonbP(CatalogValue(&rows, 0, 4, &isnull)));
	map->version = DatumGetInt32(CatalogValue(&rows, 0, 1, &isnull));
	map->digest = CatalogText(&rows, 0, 2);
	return map;
}

/*
 * SlotMapInsert installs 'map' (normalised, with its version and digest)
 * whose ranges are 'ranges_json'.
 */
void
SlotMapInsert(const CdSlotMap *map, const char *ranges_json)
{
	Oid			types[4] = {INT4OID, TEXTOID, INT4OID, TEXTOID};
	Datum		values[4];

	values[0] = Int32GetDatum(map->version);
	values[1] = CStringGetTextDatum(map->digest);
	values[2] = Int32GetDatum(map->slots);
	values[3] = CStringGetTextDatum(ranges_json);
	(void) CatalogExec("INSERT INTO collegedb.slot_map (version, digest, slots, ranges) "
					   "VALUES ($1, $2, $3, $4::jsonb)", 4, types, values, NULL, false, NULL);
	CommandCounterIncrement();
}

static void
load_moves(void)
{
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tuple;
	Snapshot	snapshot;
	MemoryContext old;

	if (moves_context == NULL)
		moves_context = AllocSetContextCreate(CacheMemoryContext, "collegedb slot move cache",
											  ALLOCSET_SMALL_SIZES);
	MemoryContextReset(moves_context);
	slot_moves = NIL;
	snapshot = CatalogReadSnapshot();
	rel = table_open(CatalogRelid(CD_REL_SLOT_MOVE), AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, snapshot, 0, NULL);
	old = MemoryContextSwitchTo(moves_context);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		TupleDesc	desc = RelationGetDescr(rel);
		bool		isnull;
		CdSlotMove *move = palloc0(sizeof(CdSlotMove));
		Datum		job;

		move->slot = DatumGetInt32(heap_getattr(tuple, Anum_slot_move_slot, desc, &isnull));
		text_to_cstring_buffer(DatumGetTextPP(heap_getattr(tuple, Anum_slot_move_source, desc, &isnull)),
							   move->source, NAMEDATALEN);
		text_to_cstring_buffer(DatumGetTextPP(heap_getattr(tuple, Anum_slot_move_target, desc, &isnull)),
							   move->target, NAMEDATALEN);
		job = heap_getattr(tuple, Anum_slot_move_job_id, desc, &isnull);
		move->job_id = isnull ? 0 : DatumGetInt64(job);
		slot_moves = lappend(slot_moves, move);
	}
	MemoryContextSwitchTo(old);
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	CatalogReleaseSnapshot(snapshot);
	moves_valid = true;
}

/*
 * SlotMoveFind returns the move of 'slot' under way, NULL when it is not
 * moving.  It belongs to the cache.
 */
const CdSlotMove *
SlotMoveFind(int32 slot)
{
	ListCell   *lc;

	if (!moves_valid)
		load_moves();
	foreach(lc, slot_moves)
		if (((CdSlotMove *) lfirst(lc))->slot == slot)
			return lfirst(lc);
	return NULL;
}

/*
 * SlotMoveAny says whether any slot is moving.
 */
bool
SlotMoveAny(void)
{
	if (!moves_valid)
		load_moves();
	return slot_moves != NIL;
}

/*
 * SlotMoveInsert records that 'slot' moves from 'source' to 'target' under
 * job 'job_id'; from the commit on, its keys route to both (router).
 */
void
SlotMoveInsert(int32 slot, const char *source, const char *target, int64 job_id)
{
	Oid			types[4] = {INT4OID, TEXTOID, TEXTOID, INT8OID};
	Datum		values[4];

	values[0] = Int32GetDatum(slot);
	values[1] = CStringGetTextDatum(source);
	values[2] = CStringGetTextDatum(target);
	values[3] = Int64GetDatum(job_id);
	(void) CatalogExec("INSERT INTO collegedb.slot_move (slot, source, target, job_id) "
					   "VALUES ($1, $2, $3, $4) ON CONFLICT (slot) DO UPDATE SET job_id = EXCLUDED.job_id",
					   4, types, values, NULL, false, NULL);
	CommandCounterIncrement();
}

/*
 * SlotMoveDelete ends the move of 'slot' (the new map version says where
 * it is now).
 */
void
SlotMoveDelete(int32 slot)
{
	Oid			types[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(slot)};

	(void) CatalogExec("DELETE FROM collegedb.slot_move WHERE slot = $1",
					   1, types, values, NULL, false, NULL);
	CommandCounterIncrement();
}
