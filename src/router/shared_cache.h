/*-------------------------------------------------------------------------
 *
 * shared_cache.h
 *	  The second level of the mapping cache, in shared memory: key digest
 *	  -> shard name, shared by every backend of the front.
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_ROUTER_SHARED_CACHE_H
#define COLLEGEDB_ROUTER_SHARED_CACHE_H

#include "postgres.h"

#include "common/sha2.h"
#include "datatype/timestamp.h"

extern void SharedCacheInit(void);
extern bool SharedCacheEnabled(void);
extern uint64 SharedCacheGeneration(void);
extern void SharedCacheInvalidate(void);
extern bool SharedCacheGet(const uint8 *digest, char *shard, TimestampTz *fetched_at);
extern void SharedCachePut(const uint8 *digest, const char *shard, TimestampTz fetched_at,
						   uint64 generation);
extern int64 SharedCacheEntries(void);

#endif							/* COLLEGEDB_ROUTER_SHARED_CACHE_H */
