/*-------------------------------------------------------------------------
 *
 * mappings.h
 *	  Reads and writes of the mapping store (catalog table collegedb.mapping).
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_CATALOG_MAPPINGS_H
#define COLLEGEDB_CATALOG_MAPPINGS_H

#include "postgres.h"

#include "nodes/pg_list.h"

typedef struct CdMappingCount
{
	char	   *shard;
	int64		count;
} CdMappingCount;

/* the bytes of a key's SHA-256 that make its id in the mapping store */
#define MAPPING_ID_LEN 16

extern void MappingDigest(const char *key, int key_len, uint8 *digest);
extern bool MappingFind(const char *stored_key, char *shard);
extern bool MappingAny(void);
extern void MappingFindMany(int n, char *const *stored_keys, char *shards);
extern void MappingInsert(const char *stored_key, const char *shard, char *owner);
extern void MappingInsertMany(int n, char *const *stored_keys, const char *const *shards,
							  char *owners);
extern void MappingPoint(const char *stored_key, const char *shard);
extern void MappingPointMany(int n, char *const *stored_keys, const char *shard);
extern bool MappingAnyOnShard(const char *shard);
extern bool MappingRecordOf(const char *stored_key, char **record, bool *is_lookup);
extern List *MappingCounts(void);

#endif							/* COLLEGEDB_CATALOG_MAPPINGS_H */
