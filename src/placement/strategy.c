/*-------------------------------------------------------------------------
 *
 * strategy.c
 *	  Picks the shard of a new key (DESIGN.md 4.2, 4.3): first the shards
 *	  that take new keys, then the strategy's choice among them.
 *
 * Candidates are the registered shards that are active and writable, in
 * name order (C collation), which is the order round-robin and jump count
 * in.  No registered shard is NO_SHARDS; none that takes keys is
 * NO_ELIGIBLE_SHARD.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/pg_prng.h"
#include "mb/pg_wchar.h"

#include "cd_errcodes.h"
#include "placement/hash.h"
#include "placement/strategy.h"

/*
 * candidates returns the shards that take new keys, in name order.
 */
static const CdShard **
candidates(int *count)
{
	List	   *all = ShardList();
	const CdShard **out;
	ListCell   *lc;
	int			n = 0;

	if (all == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_CD_NO_SHARDS),
				 errmsg("no shards are registered"),
				 errhint("Register one with collegedb.add_shard().")));

	out = palloc(sizeof(CdShard *) * list_length(all));
	foreach(lc, all)
	{
		const CdShard *shard = lfirst(lc);

		if (OidIsValid(shard->serverid) && shard->writable &&
			shard->drain == CD_DRAIN_ACTIVE)
			out[n++] = shard;
	}
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_CD_NO_ELIGIBLE_SHARD),
				 errmsg("no shard can take new keys"),
				 errdetail("Every registered shard is draining, retired or not writable."),
				 errhint("Make a shard writable and active with collegedb.set_shard_state().")));
	*count = n;
	return out;
}

/*
 * rendezvous_pick returns the candidate with the highest rendezvous score.
 */
static const CdShard *
rendezvous_pick(const CdShard **shards, int n, const char *key, int key_len)
{
	const char **names = palloc(sizeof(char *) * n);
	const char *utf8 = pg_server_to_any(key, key_len, PG_UTF8);

	for (int i = 0; i < n; i++)
		names[i] = pg_server_to_any(shards[i]->name, strlen(shards[i]->name), PG_UTF8);
	return shards[PlacementRendezvousOwner(utf8, utf8 == key ? key_len : strlen(utf8),
										   names, n)];
}

/*
 * PlacementAllocate returns the shard 'strategy' picks for a new key.
 */
const CdShard *
PlacementAllocate(CdStrategy strategy, const char *key, int key_len)
{
	int			n;
	const CdShard **shards = candidates(&n);

	switch (strategy)
	{
		case CD_STRATEGY_HASH:
			return rendezvous_pick(shards, n, key, key_len);
		case CD_STRATEGY_RANDOM:
			return shards[pg_prng_uint64_range(&pg_global_prng_state, 0, n - 1)];
		case CD_STRATEGY_JUMP:
			{
				const char *utf8 = pg_server_to_any(key, key_len, PG_UTF8);

				return shards[PlacementJumpBucket(utf8, utf8 == key ? key_len : strlen(utf8), n)];
			}
		default:
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("strategy \"%s\" is not implemented yet", ConfigStrategyName(strategy))));
	}
	return NULL;
}
