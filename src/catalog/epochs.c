/*-------------------------------------------------------------------------
 *
 * epochs.c
 *	  Reads the epochs of computed placement into a backend-local cache,
 *	  and appends new ones.
 *
 * An epoch is the sorted list of the shards that were eligible when it
 * was published; epochs are numbered from 1 and never change (the table's
 * constraints and trigger refuse edits and gaps).  The cache, newest epoch
 * first, is dropped by the table's invalidation trigger (see catalog.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_type.h"
#include "access/xact.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "catalog/catalog.h"
#include "catalog/epochs.h"

#define Anum_epoch_epoch	1
#define Anum_epoch_shards	2

static MemoryContext epoch_context = NULL;
static List *epochs = NIL;		/* of CdEpoch *, newest first */
static bool epochs_valid = false;

static void
epoch_relcache_callback(Datum arg, Oid relid)
{
	if (CatalogRelidIs(CD_REL_EPOCH, relid))
		epochs_valid = false;
}

/*
 * EpochInit registers the cache's invalidation callback.
 */
void
EpochInit(void)
{
	CacheRegisterRelcacheCallback(epoch_relcache_callback, (Datum) 0);
}

static int
epoch_newest_first(const ListCell *a, const ListCell *b)
{
	const CdEpoch *ea = lfirst(a);
	const CdEpoch *eb = lfirst(b);

	return (ea->number < eb->number) - (ea->number > eb->number);
}

static void
load_epochs(void)
{
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tuple;
	Snapshot	snapshot = CatalogReadSnapshot();

	if (epoch_context == NULL)
		epoch_context = AllocSetContextCreate(CacheMemoryContext,
											  "collegedb epoch cache",
											  ALLOCSET_SMALL_SIZES);
	MemoryContextReset(epoch_context);
	epochs = NIL;

	rel = table_open(CatalogRelid(CD_REL_EPOCH), AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, snapshot, 0, NULL);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		bool		isnull;
		int32		number = DatumGetInt32(heap_getattr(tuple, Anum_epoch_epoch,
														RelationGetDescr(rel), &isnull));
		ArrayType  *arr = DatumGetArrayTypeP(heap_getattr(tuple, Anum_epoch_shards,
														  RelationGetDescr(rel), &isnull));
		Datum	   *elems;
		int			n;
		MemoryContext old;
		CdEpoch    *epoch;

		deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, NULL, &n);
		old = MemoryContextSwitchTo(epoch_context);
		epoch = palloc(sizeof(CdEpoch));
		epoch->number = number;
		epoch->nshards = n;
		epoch->shards = palloc(sizeof(char *) * Max(n, 1));
		epoch->shards_utf8 = palloc(sizeof(char *) * Max(n, 1));
		for (int i = 0; i < n; i++)
		{
			epoch->shards[i] = TextDatumGetCString(elems[i]);
			epoch->shards_utf8[i] = pg_server_to_any(epoch->shards[i],
													 strlen(epoch->shards[i]), PG_UTF8);
		}
		epochs = lappend(epochs, epoch);
		MemoryContextSwitchTo(old);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	CatalogReleaseSnapshot(snapshot);

	list_sort(epochs, epoch_newest_first);
	epochs_valid = true;
}

/*
 * EpochList returns the published epochs, newest first (NIL when none).
 * The list belongs to the cache.
 */
List *
EpochList(void)
{
	if (!epochs_valid)
		load_epochs();
	return epochs;
}

/*
 * EpochInsert publishes epoch 'number' with the given sorted shards.
 */
void
EpochInsert(int number, const char *const *shards, int nshards)
{
	Datum	   *elems = palloc(sizeof(Datum) * Max(nshards, 1));
	Oid			types[2] = {INT4OID, TEXTARRAYOID};
	Datum		values[2];

	for (int i = 0; i < nshards; i++)
		elems[i] = CStringGetTextDatum(shards[i]);
	values[0] = Int32GetDatum(number);
	values[1] = PointerGetDatum(construct_array(elems, nshards, TEXTOID, -1, false, TYPALIGN_INT));

	(void) CatalogExec("INSERT INTO collegedb.epoch (epoch, shards) VALUES ($1, $2)",
					   2, types, values, NULL, false, NULL);
	CommandCounterIncrement();
}
