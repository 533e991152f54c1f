/*-------------------------------------------------------------------------
 *
 * mappings.c
 *	  Reads a key's mapping through the primary-key index and saves new
 *	  mappings.
 *
 * Reading uses an index scan with the latest snapshot, no SPI, so that a
 * cache miss costs one index probe.  Saving goes through one SPI plan,
 * prepared once per backend: INSERT ... ON CONFLICT DO NOTHING, which waits
 * for a concurrent inserter of the same key and then yields to it, so two
 * sessions writing the same new key end with one mapping and both use it.
 * Lookup-key management lives in the extension script (SQL functions).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"

#include "catalog/catalog.h"
#include "catalog/mappings.h"

/* Attribute numbers of collegedb.mapping, in the order of the script */
#define Anum_mapping_key	1
#define Anum_mapping_record 2
#define Anum_mapping_shard	3

static SPIPlanPtr insert_plan = NULL;

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
	table_close(rel, AccessShareLock);
	CatalogReleaseSnapshot(snapshot);
	return found;
}

/*
 * MappingInsert saves the mapping stored_key -> shard in the current
 * transaction, unless the key already has one; either way 'owner' gets
 * the shard the key now maps to.
 */
void
MappingInsert(const char *stored_key, const char *shard, char *owner)
{
	Datum		values[2];
	int			rc;
	uint64		inserted;
	CdCatalogAccess access;

	/* a routing role holds no privilege on the table: see catalog.c */
	CatalogAccessBegin(&access);
	SPI_connect();
	if (insert_plan == NULL)
	{
		Oid			types[2] = {TEXTOID, TEXTOID};
		SPIPlanPtr	plan = SPI_prepare("INSERT INTO collegedb.mapping (key, record, shard) "
									   "VALUES ($1, $1, $2) ON CONFLICT (key) DO NOTHING",
									   2, types);

		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		SPI_keepplan(plan);
		insert_plan = plan;
	}
	values[0] = CStringGetTextDatum(stored_key);
	values[1] = CStringGetTextDatum(shard);
	rc = SPI_execute_plan(insert_plan, values, NULL, false, 0);
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "SPI_execute_plan failed: %s", SPI_result_code_string(rc));
	inserted = SPI_processed;
	SPI_finish();
	CatalogAccessEnd(&access);

	if (inserted == 1)
		strlcpy(owner, shard, NAMEDATALEN);
	else if (!MappingFind(stored_key, owner))
		elog(ERROR, "mapping of a conflicting key vanished");
}
