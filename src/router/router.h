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
#include "catalog/slotmaps.h"
#include "adapters/adapter.h"
#include "remote/remote.h"

typedef enum CdRouteSource
{
	CD_ROUTE_MAPPING = 0,		/* the key's stored mapping */
	CD_ROUTE_ALLOCATED,			/* a new mapping, saved now */
	CD_ROUTE_STRATEGY,			/* unmapped read: the strategy's pick, unsaved */
	CD_ROUTE_EXCEPTION,			/* computed placement: the key's exception */
	CD_ROUTE_COMPUTED,			/* computed placement: owners by epoch */
	CD_ROUTE_SLOT				/* slots strategy: the slot's shard */
} CdRouteSource;

/*
 * A routing decision: the shards to try, in order.  Only computed
 * placement without an exception gives more than one (the key's owner
 * under each epoch, newest first, without duplicates), and the slots
 * strategy while the key's slot moves (its target, then its source).
 */
typedef struct CdRoute
{
	const CdShard *shard;		/* candidates[0] */
	CdRouteSource source;
	int			ncandidates;
	const CdShard **candidates;
	int		   *epochs;			/* computed: the newest epoch of each */
	int32		slot;			/* slots strategy: the key's slot; else -1 */
} CdRoute;

extern void RouterInit(void);
extern void AllocateInit(void);

/* this backend's routing counters (collegedb.cache_stats) */
extern uint64 RouterCacheHits;
extern uint64 RouterCacheMisses;
extern uint64 RouterCatalogReads;
extern uint64 RouterSharedHits;
extern uint64 RouterSharedMisses;

extern CdRoute RouterResolve(const char *key, int key_len, bool for_write, bool save);
extern CdRoute RouterResolveBatched(const char *key, int key_len, bool *is_new,
									 bool *unchecked);
extern void RouterFindExceptions(int n, char *const *keys, const int *key_lens,
								 const CdShard **owners);
extern int64 RouterMapKeysInPlace(void);
extern void RouterSaveNewKeys(int n, char *const *keys, const int *key_lens,
							  const CdShard *const *picked, const CdShard **owners);
extern bool RouterFindMapping(const char *key, int key_len, const CdShard **shard);
extern char *RouterStoredKey(const char *key, int key_len);
extern const char *RouterSourceName(CdRouteSource source);

/* allocate.c */
extern const CdShard *RouterAllocate(CdStrategy strategy, const char *key, int key_len,
									 bool take_ticket);
extern bool RouterShardTakesKeys(const CdShard *shard);
extern bool RouterShardEligible(const CdShard *shard, const char *operation, const char *key);
extern bool RouterShardSize(const CdShard *shard, bool fresh, int64 *size);
extern bool RouterUnderSizeLimit(const CdShard *shard);
extern bool RouterAnyShardTakesKeys(void);
extern bool RouterAnyShardEligible(void);

/* router.c, computed placement */
extern void RouterRecordException(const char *key, int key_len, const CdShard *shard);

/* computed.c */
extern int	RouterComputedCandidates(const char *key, int key_len,
									 const CdShard **candidates, int *epochs);
extern int	RouterPublishEligibility(List **eligible, bool *published);

/* slotroute.c */
extern int32 RouterSlotOf(const char *key, int key_len, const CdSlotMap **map);
extern void RouterSlotWaitForWriters(int32 slot);
extern CdRoute RouterSlotRoute(const char *key, int key_len, bool for_write);
extern const char *RouterSlotHome(const char *key, int key_len);
extern bool RouterSlotSendsTo(const char *key, int key_len, const char *shard);

/* locate.c */
#define ROUTER_MAX_HOPS 4

/* one step of a key's tombstone trail (RouterFollowOne) */
typedef struct RouterTrailStep
{
	const CdShard *shard;		/* in: where to look; out: where it leads */
	const char *key;
	int			key_len;
	int			hops;
	char	   *moved_to;		/* out: NULL when there is no tombstone */
} RouterTrailStep;

extern int	RouterProbeKey(const char *key, int key_len, const CdShard *const *shards, int n);
extern const CdShard *RouterTombstoneHop(const char *moved_to, int hops);
extern const CdShard *RouterFollowTombstones(const CdShard *shard, const char *key,
											 int key_len, int *hops);
extern void RouterFollowOne(void *arg);
extern const CdShard *RouterLocateKey(const char *key);

/* routed.c */
extern int64 RouterExecute(const char *key, int key_len, const char *sql,
						   int nparams, const CdParam *params,
						   CdRowSink *sink, bool is_write);
extern int64 RouterExecuteDialects(const char *key, int key_len, const char *const *sql,
								   int nparams, const CdParam *params,
								   CdRowSink *sink, bool is_write);
extern int64 RouterReadMissed(const CdRoute *route, const char *key, int key_len,
							  const char *const *sql, int nparams, const CdParam *params,
							  CdRowSink *sink);

#endif							/* COLLEGEDB_ROUTER_H */
