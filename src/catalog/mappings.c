/*-------------------------------------------------------------------------
 *
 * mappings.c
 *	  The mapping store (collegedb.mapping): a key's mapping read through
 *	  the primary-key index, and every write of the table by collegedb's C
 *	  code, one function per purpose with its conflict rule.
 *
 * Reading uses an index scan with the latest snapshot, no SPI, so that a
 * cache miss costs one index probe.  Two writers, two rules: allocation
 * (MappingInsert: the first writer of a new key wins, so two sessions
 * writing the same new key end with one mapping and both use it; for a
 * batch of keys at once, MappingInsertMany) and a move (MappingPoint: the
 * move's target wins).  Lookup-key management and
 * set_mapping live in the extension script (SQL functions).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"

#include "catalog/catalog.h"
#include "catalog/mappings.h"

/* Attribute numbers of collegedb.mapping, in the order of the script */
#define Anum_mapping_key	1
#define Anum_mapping_record 2
#define Anum_mapping_shard	3

static SPIPlanPtr insert_plan = NULL;
static SPIPlanPtr insert_many_plan = NULL;
static SPIPlanPtr find_many_plan = NULL;
static SPIPlanPtr any_plan = NULL;

/* a key MappingInsertMany inserted, and its shard */
typedef struct CdSavedKey
{
	char	   *key;			/* the hash key: a pointer to the string */
	char	   *shard;
} CdSavedKey;

/*
 * string_ptr_hash and string_ptr_match hash and compare CdSavedKey's key
 * by the string it points to.
 */
static uint32
string_ptr_hash(const void *key, Size keysize)
{
	const char *s = *(const char *const *) key;

	return DatumGetUInt32(hash_any((const unsigned char *) s, strlen(s)));
}

static int
string_ptr_match(const void *a, const void *b, Size keysize)
{
	return strcmp(*(const char *const *) a, *(const char *const *) b);
}

/*
 * MappingFind looks a stored key up; on success copies its shard name
 * (NAMEDATALEN bytes) into 'shard'.
 */
bool
MappingFind(const char *stored_key, char *shard)
{
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData skey;
	HeapTuple	tuple;
	Snapshot	snapshot = CatalogReadSnapshot();
	bool		found = false;

	rel = table_open(CatalogRelid(CD_REL_MAPPING), AccessShareLock);
	ScanKeyInit(&skey, Anum_mapping_key, BTEqualStrategyNumber, F_TEXTEQ,
				CStringGetTextDatum(stored_key));
	scan = systable_beginscan(rel, CatalogRelid(CD_REL_MAPPING_PKEY), true,
							  snapshot, 1, &skey);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		bool		isnull;
		Datum		d = heap_getattr(tuple, Anum_mapping_shard, RelationGetDescr(rel), &isnull);

		text_to_cstring_buffer(DatumGetTextPP(d), shard, NAMEDATALEN);
		found = true;
	}
	systable_endscan(scan);
	/* the lock stays to the end of the transaction: the next probe, a bulk
	 * load's next row, finds it held instead of taking it again */
	table_close(rel, NoLock);
	CatalogReleaseSnapshot(snapshot);
	return found;
}

/*
 * shards_by_key returns the (key, shard) rows of a statement as a hash
 * table by stored key (CdSavedKey entries), in the current memory context.
 */
static HTAB *
shards_by_key(const CdCatalogRows *rows)
{
	HASHCTL		ctl;
	HTAB	   *hash;

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(char *);
	ctl.entrysize = sizeof(CdSavedKey);
	ctl.hash = string_ptr_hash;
	ctl.match = string_ptr_match;
	ctl.hcxt = CurrentMemoryContext;
	hash = hash_create("collegedb shards by key", Max(rows->count, 16), &ctl,
					   HASH_ELEM | HASH_FUNCTION | HASH_COMPARE | HASH_CONTEXT);
	for (uint64 r = 0; r < rows->count; r++)
	{
		char	   *key = CatalogText(rows, r, 1);
		CdSavedKey *entry = hash_search(hash, &key, HASH_ENTER, NULL);

		entry->shard = CatalogText(rows, r, 2);
	}
	return hash;
}

/*
 * MappingAny says whether the mapping table has a row (a new snapshot).
 */
bool
MappingAny(void)
{
	return CatalogExecPlan(&any_plan, "SELECT 1 FROM collegedb.mapping LIMIT 1",
						   0, NULL, NULL, NULL, false, NULL) > 0;
}

/*
 * MappingFindMany looks n stored keys up in one statement: shards (n times
 * NAMEDATALEN bytes) gets each one's shard name, or "" when it has no
 * mapping.
 */
void
MappingFindMany(int n, char *const *stored_keys, char *shards)
{
	Datum	   *keys = palloc(sizeof(Datum) * n);
	Oid			types[1] = {TEXTARRAYOID};
	Datum		args[1];
	CdCatalogRows rows;
	HTAB	   *found;

	for (int i = 0; i < n; i++)
		keys[i] = CStringGetTextDatum(stored_keys[i]);
	args[0] = PointerGetDatum(construct_array(keys, n, TEXTOID, -1, false, TYPALIGN_INT));
	(void) CatalogExecPlan(&find_many_plan,
						   "SELECT key, shard FROM collegedb.mapping WHERE key = ANY ($1::text[])",
						   1, types, args, NULL, false, &rows);
	found = shards_by_key(&rows);
	for (int i = 0; i < n; i++)
	{
		char	   *key = stored_keys[i];
		CdSavedKey *entry = hash_search(found, &key, HASH_FIND, NULL);

		strlcpy(shards + i * NAMEDATALEN, entry ? entry->shard : "", NAMEDATALEN);
	}
	hash_destroy(found);
}

/*
 * MappingInsert saves the mapping stored_key -> shard in the current
 * transaction, unless the key already has one; either way 'owner' gets
 * the shard the key now maps to.  This is the allocation's rule: the first
 * writer of a new key wins (INSERT ... ON CONFLICT DO NOTHING waits for a
 * concurrent inserter of the key, then yields to it).
 */
void
MappingInsert(const char *stored_key, const char *shard, char *owner)
{
	const char *args[2] = {stored_key, shard};

	if (CatalogExecTexts(&insert_plan,
						 "INSERT INTO collegedb.mapping (key, record, shard) "
						 "VALUES ($1, $1, $2) ON CONFLICT (key) DO NOTHING",
						 2, args, false, NULL) == 1)
		strlcpy(owner, shard, NAMEDATALEN);
	else if (!MappingFind(stored_key, owner))
		elog(ERROR, "mapping of a conflicting key vanished");
}

/*
 * MappingInsertMany is MappingInsert for n keys in one statement (a batch
 * of a bulk load): each stored_keys[i] -> shards[i] is saved unless the key
 * has a mapping already, and owners + i * NAMEDATALEN gets the shard key i
 * maps to afterwards.  A key listed twice is saved once, with its first
 * shard, and both get that one.  A conflicting key that the statement did
 * not insert is read back with the latest snapshot (a concurrent inserter
 * committed it after the statement began).
 */
void
MappingInsertMany(int n, char *const *stored_keys, const char *const *shards, char *owners)
{
	Datum	   *keys = palloc(sizeof(Datum) * n);
	Datum	   *names = palloc(sizeof(Datum) * n);
	Oid			types[2] = {TEXTARRAYOID, TEXTARRAYOID};
	Datum		args[2];
	CdCatalogRows rows;
	HTAB	   *saved;

	for (int i = 0; i < n; i++)
	{
		keys[i] = CStringGetTextDatum(stored_keys[i]);
		names[i] = CStringGetTextDatum(shards[i]);
	}
	args[0] = PointerGetDatum(construct_array(keys, n, TEXTOID, -1, false, TYPALIGN_INT));
	args[1] = PointerGetDatum(construct_array(names, n, TEXTOID, -1, false, TYPALIGN_INT));
	(void) CatalogExecPlan(&insert_many_plan,
						   "INSERT INTO collegedb.mapping (key, record, shard) "
						   "SELECT k, k, s FROM unnest($1::text[], $2::text[]) AS u(k, s) "
						   "ON CONFLICT (key) DO NOTHING RETURNING key, shard",
						   2, types, args, NULL, false, &rows);

	/* what the statement inserted, by stored key */
	saved = shards_by_key(&rows);
	for (int i = 0; i < n; i++)
	{
		char	   *key = stored_keys[i];
		CdSavedKey *entry = hash_search(saved, &key, HASH_FIND, NULL);

		if (entry)
			strlcpy(owners + i * NAMEDATALEN, entry->shard, NAMEDATALEN);
		else if (!MappingFind(stored_keys[i], owners + i * NAMEDATALEN))
			elog(ERROR, "mapping of a conflicting key vanished");
	}
	hash_destroy(saved);
}

/*
 * MappingPoint points a key at 'shard' after a move: the key's record and
 * every lookup key of it, or, for a key without a mapping, a new one
 * (under computed placement: an exception).  This is the move's rule: the
 * move decides, whatever was there (INSERT ... ON CONFLICT DO UPDATE).
 */
void
MappingPoint(const char *stored_key, const char *shard)
{
	const char *args[2] = {stored_key, shard};

	/* the record's rows: its primary row by key, its lookup keys by the
	 * record index (which holds only those), each found by an index */
	if (CatalogExecTexts(NULL, "UPDATE collegedb.mapping m SET shard = $2 WHERE m.key IN ("
						 "SELECT r.record FROM collegedb.mapping r WHERE r.key = $1 "
						 "UNION ALL SELECT l.key FROM collegedb.mapping r "
						 "JOIN collegedb.mapping l ON l.record = r.record AND l.key <> l.record "
						 "WHERE r.key = $1)",
						 2, args, false, NULL) == 0)
		(void) CatalogExecTexts(NULL, "INSERT INTO collegedb.mapping (key, record, shard) "
								"VALUES ($1, $1, $2) "
								"ON CONFLICT (key) DO UPDATE SET shard = EXCLUDED.shard",
								2, args, false, NULL);
}

/*
 * MappingPointMany is MappingPoint for 'n' stored keys (a batched move):
 * each key's record, primary row and lookup keys, points at 'shard', and
 * a key without a mapping gets one; one statement for each.
 */
void
MappingPointMany(int n, char *const *stored_keys, const char *shard)
{
	Datum	   *keys = palloc(sizeof(Datum) * Max(n, 1));
	Oid			types[2] = {TEXTARRAYOID, TEXTOID};
	Datum		args[2];

	for (int i = 0; i < n; i++)
		keys[i] = CStringGetTextDatum(stored_keys[i]);
	args[0] = PointerGetDatum(construct_array(keys, n, TEXTOID, -1, false, TYPALIGN_INT));
	args[1] = CStringGetTextDatum(shard);
	(void) CatalogExec("WITH r AS (SELECT DISTINCT record FROM collegedb.mapping WHERE key = ANY ($1::text[])) "
					   "UPDATE collegedb.mapping m SET shard = $2 FROM r "
					   "WHERE m.key = r.record AND m.record = r.record AND m.shard IS DISTINCT FROM $2",
					   2, types, args, NULL, false, NULL);
	(void) CatalogExec("WITH r AS (SELECT DISTINCT record FROM collegedb.mapping WHERE key = ANY ($1::text[])) "
					   "UPDATE collegedb.mapping m SET shard = $2 FROM r "
					   "WHERE m.record = r.record AND m.key <> m.record AND m.shard IS DISTINCT FROM $2",
					   2, types, args, NULL, false, NULL);
	(void) CatalogExec("INSERT INTO collegedb.mapping (key, record, shard) "
					   "SELECT k, k, $2 FROM unnest($1::text[]) AS u(k) "
					   "WHERE NOT EXISTS (SELECT 1 FROM collegedb.mapping m WHERE m.key = u.k) "
					   "ON CONFLICT (key) DO UPDATE SET shard = EXCLUDED.shard",
					   2, types, args, NULL, false, NULL);
}

/*
 * MappingAnyOnShard says whether any key is mapped to 'shard'.
 */
bool
MappingAnyOnShard(const char *shard)
{
	return CatalogExecTexts(NULL, "SELECT 1 FROM collegedb.mapping WHERE shard = $1 LIMIT 1",
							1, &shard, false, NULL) > 0;
}

/*
 * MappingRecordOf reads the record a stored key belongs to: false when the
 * key has no mapping; *is_lookup says whether it is a lookup key of
 * another record.  The record is palloc'd.
 */
bool
MappingRecordOf(const char *stored_key, char **record, bool *is_lookup)
{
	CdCatalogRows rows;
	bool		isnull;

	if (CatalogExecTexts(NULL, "SELECT record, record <> key FROM collegedb.mapping WHERE key = $1",
						 1, &stored_key, true, &rows) != 1)
		return false;
	*record = CatalogText(&rows, 0, 1);
	*is_lookup = DatumGetBool(CatalogValue(&rows, 0, 2, &isnull));
	return true;
}

/*
 * MappingCounts returns how many keys are mapped to each shard, as a List
 * of CdMappingCount (shards without keys are not in it).
 */
List *
MappingCounts(void)
{
	CdCatalogRows rows;
	List	   *counts = NIL;

	(void) CatalogExec("SELECT shard, count(*) FROM collegedb.mapping GROUP BY shard",
					   0, NULL, NULL, NULL, true, &rows);
	for (uint64 i = 0; i < rows.count; i++)
	{
		CdMappingCount *c = palloc(sizeof(CdMappingCount));
		bool		isnull;

		c->shard = CatalogText(&rows, i, 1);
		c->count = DatumGetInt64(CatalogValue(&rows, i, 2, &isnull));
		counts = lappend(counts, c);
	}
	return counts;
}
