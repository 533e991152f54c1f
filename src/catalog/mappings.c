/*-------------------------------------------------------------------------
 *
 * mappings.c
 *	  The mapping store (collegedb.mapping): a key's mapping read through
 *	  the primary-key index, and every write of the table by collegedb's C
 *	  code, one function per purpose with its conflict rule.
 *
 * Callers name keys by their stored form (RouterStoredKey); the table keys
 * its rows by the key's id, the first 128 bits of the key's SHA-256 (the
 * stored form itself, in hex, with hash_mappings; without, the key is kept
 * beside its id), and names shards by number (ShardNumber).  The
 * conversions happen here.
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
#include "common/cryptohash.h"
#include "common/sha2.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"
#include "utils/resowner.h"
#include "utils/uuid.h"

#include "catalog/catalog.h"
#include "catalog/config.h"
#include "catalog/mappings.h"
#include "catalog/shards.h"

/* Attribute numbers of collegedb.mapping, in the order of the script */
#define Anum_mapping_key	1
#define Anum_mapping_shard	2
#define Anum_mapping_record 3
#define Anum_mapping_keys	4
#define Anum_mapping_name	5

static SPIPlanPtr insert_plan = NULL;
static SPIPlanPtr insert_many_plan = NULL;
static SPIPlanPtr find_many_plan = NULL;
static SPIPlanPtr any_plan = NULL;

/* a mapping row a statement returned: the key's id, shard name and name */
typedef struct CdFoundKey
{
	pg_uuid_t	id;				/* the hash key */
	const char *shard;
	const char *name;			/* NULL with hash_mappings */
} CdFoundKey;

/*
 * MappingDigest computes the SHA-256 of the key's UTF-8 bytes, with one
 * digest context for the backend's life, initialised again for each key
 * instead of made and freed per key.  It belongs to a resource owner of
 * its own, which no transaction's end releases.
 */
void
MappingDigest(const char *key, int key_len, uint8 *digest)
{
	static pg_cryptohash_ctx *ctx = NULL;
	const char *utf8 = pg_server_to_any(key, key_len, PG_UTF8);

	if (ctx == NULL)
	{
		static ResourceOwner owner = NULL;
		ResourceOwner saved = CurrentResourceOwner;

		if (owner == NULL)
			owner = ResourceOwnerCreate(NULL, "collegedb key digest");
		CurrentResourceOwner = owner;
		ctx = pg_cryptohash_create(PG_SHA256);
		CurrentResourceOwner = saved;
		if (ctx == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory")));
	}
	if (pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) utf8,
							 utf8 == key ? key_len : strlen(utf8)) < 0 ||
		pg_cryptohash_final(ctx, digest, PG_SHA256_DIGEST_LENGTH) < 0)
		elog(ERROR, "could not compute SHA-256: %s", pg_cryptohash_error(ctx));
}

/*
 * stored_id sets *id to the id of the key whose stored form is 'stored'.
 */
static void
stored_id(const char *stored, pg_uuid_t *id)
{
	if (ConfigGet()->hash_mappings)
	{
		size_t		len = strlen(stored);

		if (len != 2 * UUID_LEN || strspn(stored, "0123456789abcdef") != len)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("\"%s\" is not a stored key", stored),
					 errdetail("With hash_mappings a stored key is %d lowercase hexadecimal digits.",
							   2 * UUID_LEN)));
		(void) hex_decode(stored, len, (char *) id->data);
	}
	else
	{
		uint8		digest[PG_SHA256_DIGEST_LENGTH];

		MappingDigest(stored, strlen(stored), digest);
		memcpy(id->data, digest, UUID_LEN);
	}
}

/*
 * shard_name returns the name of the shard number a mapping row holds.
 */
static const char *
shard_name(int number)
{
	const char *name = ShardNumberName(number);

	if (name == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("a mapping names shard number %d, which collegedb.shard_number does not know",
						number)));
	return name;
}

/*
 * check_name refuses a mapping row found for a key other than 'stored':
 * without hash_mappings the row keeps its key's name, and a second key
 * with the same id (see collegedb.mapping) must not take the first one's
 * placement.
 */
static void
check_name(const char *stored, const char *name)
{
	if (name != NULL && strcmp(name, stored) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNIQUE_VIOLATION),
				 errmsg("keys \"%s\" and \"%s\" have the same id in the mapping store",
						stored, name),
				 errdetail("Their SHA-256 digests agree in the first 128 bits.")));
}

/*
 * uuid_array returns the ids of n stored keys as a uuid[] datum.
 */
static Datum
uuid_array(int n, char *const *stored_keys)
{
	Datum	   *ids = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
	{
		pg_uuid_t  *id = palloc(sizeof(pg_uuid_t));

		stored_id(stored_keys[i], id);
		ids[i] = UUIDPGetDatum(id);
	}
	return PointerGetDatum(construct_array(ids, n, UUIDOID, UUID_LEN, false, TYPALIGN_CHAR));
}

/*
 * name_array returns the names the rows of n stored keys keep (NULL with
 * hash_mappings: none) as a text[] datum; *isnull says which.
 */
static Datum
name_array(int n, char *const *stored_keys, bool *isnull)
{
	Datum	   *names;

	*isnull = ConfigGet()->hash_mappings;
	if (*isnull)
		return (Datum) 0;
	names = palloc(sizeof(Datum) * Max(n, 1));
	for (int i = 0; i < n; i++)
		names[i] = CStringGetTextDatum(stored_keys[i]);
	return PointerGetDatum(construct_array(names, n, TEXTOID, -1, false, TYPALIGN_INT));
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
	Snapshot	snapshot;
	pg_uuid_t	id;
	bool		found = false;

	stored_id(stored_key, &id);
	snapshot = CatalogReadSnapshot();
	rel = table_open(CatalogRelid(CD_REL_MAPPING), AccessShareLock);
	ScanKeyInit(&skey, Anum_mapping_key, BTEqualStrategyNumber, F_UUID_EQ,
				UUIDPGetDatum(&id));
	scan = systable_beginscan(rel, CatalogRelid(CD_REL_MAPPING_PKEY), true,
							  snapshot, 1, &skey);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		TupleDesc	desc = RelationGetDescr(rel);
		bool		isnull;
		Datum		number = heap_getattr(tuple, Anum_mapping_shard, desc, &isnull);
		Datum		name = heap_getattr(tuple, Anum_mapping_name, desc, &isnull);

		if (!isnull)
			check_name(stored_key, TextDatumGetCString(name));
		strlcpy(shard, shard_name(DatumGetInt16(number)), NAMEDATALEN);
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
 * found_keys returns the (key, shard, name) rows of a statement as a hash
 * table by key id (CdFoundKey entries), in the current memory context.
 */
static HTAB *
found_keys(const CdCatalogRows *rows)
{
	HASHCTL		ctl;
	HTAB	   *hash;

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(pg_uuid_t);
	ctl.entrysize = sizeof(CdFoundKey);
	ctl.hcxt = CurrentMemoryContext;
	hash = hash_create("collegedb mappings by id", Max(rows->count, 16), &ctl,
					   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	for (uint64 r = 0; r < rows->count; r++)
	{
		bool		isnull;
		pg_uuid_t  *id = DatumGetUUIDP(CatalogValue(rows, r, 1, &isnull));
		CdFoundKey *entry = hash_search(hash, id, HASH_ENTER, NULL);

		entry->shard = shard_name(DatumGetInt16(CatalogValue(rows, r, 2, &isnull)));
		(void) CatalogValue(rows, r, 3, &isnull);
		entry->name = isnull ? NULL : CatalogText(rows, r, 3);
	}
	return hash;
}

/*
 * found_shard returns the shard of the stored key's row in 'found' (see
 * found_keys), NULL when it has none there.
 */
static const char *
found_shard(HTAB *found, const char *stored_key)
{
	pg_uuid_t	id;
	CdFoundKey *entry;

	stored_id(stored_key, &id);
	entry = hash_search(found, &id, HASH_FIND, NULL);
	if (entry == NULL)
		return NULL;
	check_name(stored_key, entry->name);
	return entry->shard;
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
	Oid			types[1] = {UUIDARRAYOID};
	Datum		args[1];
	CdCatalogRows rows;
	HTAB	   *found;

	args[0] = uuid_array(n, stored_keys);
	(void) CatalogExecPlan(&find_many_plan,
						   "SELECT key, shard, name FROM collegedb.mapping WHERE key = ANY ($1::uuid[])",
						   1, types, args, NULL, false, &rows);
	found = found_keys(&rows);
	for (int i = 0; i < n; i++)
	{
		const char *shard = found_shard(found, stored_keys[i]);

		strlcpy(shards + i * NAMEDATALEN, shard ? shard : "", NAMEDATALEN);
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
	Oid			types[3] = {UUIDOID, INT2OID, TEXTOID};
	Datum		args[3];
	char		nulls[4] = "   ";
	pg_uuid_t	id;

	stored_id(stored_key, &id);
	args[0] = UUIDPGetDatum(&id);
	args[1] = Int16GetDatum(ShardNumber(shard));
	if (ConfigGet()->hash_mappings)
		nulls[2] = 'n';
	else
		args[2] = CStringGetTextDatum(stored_key);
	if (CatalogExecPlan(&insert_plan,
						"INSERT INTO collegedb.mapping (key, shard, name) "
						"VALUES ($1, $2, $3) ON CONFLICT (key) DO NOTHING",
						3, types, args, nulls, false, NULL) == 1)
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
	Datum	   *numbers = palloc(sizeof(Datum) * n);
	Oid			types[3] = {UUIDARRAYOID, INT2ARRAYOID, TEXTARRAYOID};
	Datum		args[3];
	char		nulls[4] = "   ";
	bool		no_names;
	CdCatalogRows rows;
	HTAB	   *saved;
	const char *last = NULL;
	int16		last_number = 0;

	for (int i = 0; i < n; i++)
	{
		/* a batch's keys mostly go to few shards: look each up once in a row */
		if (last == NULL || strcmp(last, shards[i]) != 0)
		{
			last = shards[i];
			last_number = ShardNumber(last);
		}
		numbers[i] = Int16GetDatum(last_number);
	}
	args[0] = uuid_array(n, stored_keys);
	args[1] = PointerGetDatum(construct_array(numbers, n, INT2OID, 2, true, TYPALIGN_SHORT));
	args[2] = name_array(n, stored_keys, &no_names);
	if (no_names)
		nulls[2] = 'n';
	(void) CatalogExecPlan(&insert_many_plan,
						   "INSERT INTO collegedb.mapping (key, shard, name) "
						   "SELECT k, s, n FROM unnest($1::uuid[], $2::int2[], $3::text[]) AS u(k, s, n) "
						   "ON CONFLICT (key) DO NOTHING RETURNING key, shard, name",
						   3, types, args, nulls, false, &rows);

	/* what the statement inserted, by key id */
	saved = found_keys(&rows);
	for (int i = 0; i < n; i++)
	{
		const char *shard = found_shard(saved, stored_keys[i]);

		if (shard)
			strlcpy(owners + i * NAMEDATALEN, shard, NAMEDATALEN);
		else if (!MappingFind(stored_keys[i], owners + i * NAMEDATALEN))
			elog(ERROR, "mapping of a conflicting key vanished");
	}
	hash_destroy(saved);
}

/*
 * MappingPoint points a key at 'shard' after a move: the key's record and
 * every lookup key of it, or, for a key without a mapping, a new one
 * (under computed placement: an exception).  This is the move's rule: the
 * move decides, whatever was there.
 */
void
MappingPoint(const char *stored_key, const char *shard)
{
	char	   *keys[1] = {unconstify(char *, stored_key)};

	MappingPointMany(1, keys, shard);
}

/*
 * MappingPointMany is MappingPoint for 'n' stored keys (a batched move):
 * each key's record, primary row and lookup keys, points at 'shard', and
 * a key without a mapping gets one; one statement for each.
 */
void
MappingPointMany(int n, char *const *stored_keys, const char *shard)
{
	Oid			types[3] = {UUIDARRAYOID, INT2OID, TEXTARRAYOID};
	Datum		args[3];
	char		nulls[4] = "   ";
	bool		no_names;

	args[0] = uuid_array(n, stored_keys);
	args[1] = Int16GetDatum(ShardNumber(shard));
	args[2] = name_array(n, stored_keys, &no_names);
	if (no_names)
		nulls[2] = 'n';
	/* the records' rows: primary rows by key, lookup keys by the record index */
	(void) CatalogExec("WITH r AS (SELECT DISTINCT coalesce(record, key) AS id FROM collegedb.mapping "
					   "WHERE key = ANY ($1::uuid[])) "
					   "UPDATE collegedb.mapping m SET shard = $2 FROM r "
					   "WHERE m.key = r.id AND m.shard <> $2",
					   3, types, args, nulls, false, NULL);
	(void) CatalogExec("WITH r AS (SELECT DISTINCT coalesce(record, key) AS id FROM collegedb.mapping "
					   "WHERE key = ANY ($1::uuid[])) "
					   "UPDATE collegedb.mapping m SET shard = $2 FROM r "
					   "WHERE m.record = r.id AND m.shard <> $2",
					   3, types, args, nulls, false, NULL);
	/* keys without a row; one inserted meanwhile by an allocation yields */
	(void) CatalogExec("INSERT INTO collegedb.mapping (key, shard, name) "
					   "SELECT k, $2, n FROM unnest($1::uuid[], $3::text[]) AS u(k, n) "
					   "WHERE NOT EXISTS (SELECT 1 FROM collegedb.mapping m WHERE m.key = u.k) "
					   "ON CONFLICT (key) DO UPDATE SET shard = EXCLUDED.shard",
					   3, types, args, nulls, false, NULL);
}

/*
 * MappingAnyOnShard says whether any key is mapped to 'shard'.
 */
bool
MappingAnyOnShard(const char *shard)
{
	Oid			types[1] = {INT2OID};
	Datum		args[1] = {Int16GetDatum(ShardNumber(shard))};

	return CatalogExec("SELECT 1 FROM collegedb.mapping WHERE shard = $1 LIMIT 1",
					   1, types, args, NULL, false, NULL) > 0;
}

/*
 * MappingRecordOf reads the record a stored key belongs to: false when the
 * key has no mapping; *is_lookup says whether it is a lookup key of
 * another record.  The record, in its stored form, is palloc'd.
 */
bool
MappingRecordOf(const char *stored_key, char **record, bool *is_lookup)
{
	Oid			types[1] = {UUIDOID};
	Datum		args[1];
	pg_uuid_t	id;
	CdCatalogRows rows;
	bool		isnull;

	stored_id(stored_key, &id);
	args[0] = UUIDPGetDatum(&id);
	if (CatalogExec("SELECT collegedb.stored_key(r.key, r.name), m.record IS NOT NULL "
					"FROM collegedb.mapping m "
					"JOIN collegedb.mapping r ON r.key = coalesce(m.record, m.key) "
					"WHERE m.key = $1",
					1, types, args, NULL, true, &rows) != 1)
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

		c->shard = pstrdup(shard_name(DatumGetInt16(CatalogValue(&rows, i, 1, &isnull))));
		c->count = DatumGetInt64(CatalogValue(&rows, i, 2, &isnull));
		counts = lappend(counts, c);
	}
	return counts;
}
