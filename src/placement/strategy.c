/*-------------------------------------------------------------------------
 *
 * strategy.c
 *	  The strategies (src/README.md, "Placement"): which of the shards
 *	  that may take a new key gets it.
 *
 * The caller (router/allocate.c) has already filtered the shards by state,
 * eligibility predicate and size, and passes them in name order (C
 * collation), the order round-robin and jump count in.  Picks depend only
 * on their inputs (random draws from the backend's generator; round-robin
 * gets its ticket from the caller), so nothing here does I/O.
 *
 *	  hash         the highest rendezvous score (hash.c)
 *	  round-robin  shard number ticket mod n
 *	  random       uniform
 *	  location     the smallest (distance to the target region + 1) /
 *	               priority among shards with a region; no target, or no
 *	               shard with a region: hash
 *	  jump         jump consistent hash over the n shards
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/pg_prng.h"
#include "mb/pg_wchar.h"

#include "placement/hash.h"
#include "placement/regions.h"
#include "placement/strategy.h"

/*
 * rendezvous_pick returns the shard with the highest rendezvous score.
 */
static const CdShard *
rendezvous_pick(const CdShard *const *shards, int n, const CdPickContext *ctx)
{
	const char **names = palloc(sizeof(char *) * n);

	for (int i = 0; i < n; i++)
		names[i] = pg_server_to_any(shards[i]->name, strlen(shards[i]->name), PG_UTF8);
	return shards[PlacementRendezvousOwner(ctx->key, ctx->key_len, names, n)];
}

/*
 * location_pick returns the shard nearest the target region, priority
 * shrinking the distance; NULL when no shard has a region or no target is
 * set.
 */
static const CdShard *
location_pick(const CdShard *const *shards, int n, const CdPickContext *ctx)
{
	const CdShard *best = NULL;
	double		best_score = 0;
	int			target;

	if (ctx->target_region == NULL || (target = RegionIndex(ctx->target_region)) < 0)
		return NULL;
	for (int i = 0; i < n; i++)
	{
		int			region;
		double		score;

		if (shards[i]->region == NULL || (region = RegionIndex(shards[i]->region)) < 0)
			continue;
		score = (RegionDistance(target, region) + 1) / shards[i]->priority;
		if (best == NULL || score < best_score)
		{
			best = shards[i];
			best_score = score;
		}
	}
	return best;
}

/*
 * PlacementPick returns the shard 'strategy' gives a new key, among the
 * 'n' (> 0) shards in name order.
 */
const CdShard *
PlacementPick(CdStrategy strategy, const CdShard *const *shards, int n,
			  const CdPickContext *ctx)
{
	const CdShard *pick;

	Assert(n > 0);
	switch (strategy)
	{
		case CD_STRATEGY_HASH:
			return rendezvous_pick(shards, n, ctx);
		case CD_STRATEGY_ROUND_ROBIN:
			return shards[ctx->ticket % n];
		case CD_STRATEGY_RANDOM:
			return shards[pg_prng_uint64_range(&pg_global_prng_state, 0, n - 1)];
		case CD_STRATEGY_LOCATION:
			pick = location_pick(shards, n, ctx);
			return pick ? pick : rendezvous_pick(shards, n, ctx);
		case CD_STRATEGY_JUMP:
			return shards[PlacementJumpBucket(ctx->key, ctx->key_len, n)];
		case CD_STRATEGY_SLOTS:
			/* a key's slot names its shard: router/slotroute.c, never a pick */
			elog(ERROR, "the slots strategy does not pick among shards");
	}
	return NULL;
}
