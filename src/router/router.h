/*-------------------------------------------------------------------------
 *
 * router.h
 *	  Key -> shard: the mapping cache, the mapping store and allocation.
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_ROUTER_H
#define COLLEGEDB_ROUTER_H

#include "postgres.h"

#include "catalog/config.h"
#include "catalog/shards.h"

typedef enum CdRouteSource
{
	CD_ROUTE_MAPPING = 0,		/* the key's stored mapping */
	CD_ROUTE_ALLOCATED,			/* a new mapping, saved now */
	CD_ROUTE_STRATEGY			/* unmapped read: the strategy's pick, unsaved */
} CdRouteSource;

typedef struct CdRoute
{
	const CdShard *shard;
	CdRouteSource source;
} CdRoute;

extern void RouterInit(void);
extern CdRoute RouterResolve(const char *key, int key_len, bool for_write, bool save);
extern bool RouterFindMapping(const char *key, int key_len, const CdShard **shard);
extern char *RouterStoredKey(const char *key, int key_len);
extern const char *RouterSourceName(CdRouteSource source);

/* allocate.c */
extern const CdShard *RouterAllocate(CdStrategy strategy, const char *key, int key_len);
extern bool RouterShardTakesKeys(const CdShard *shard);
extern bool RouterShardEligible(const CdShard *shard, const char *operation, const char *key);
extern bool RouterShardSize(const CdShard *shard, bool fresh, int64 *size);
extern bool RouterUnderSizeLimit(const CdShard *shard);

#endif							/* COLLEGEDB_ROUTER_H */
