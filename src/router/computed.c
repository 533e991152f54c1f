/*-------------------------------------------------------------------------
 *
 * computed.c
 *	  Computed placement (DESIGN.md 4.5): a key's owners under the
 *	  published epochs, and the publication of new epochs.
 *
 * A key without an exception belongs to its rendezvous owner under each
 * epoch; the owners, newest epoch first and without duplicates, are where
 * it may live.  publish appends an epoch when the set of eligible shards
 * (active, writable, accepted by the predicate with operation "publish")
 * differs from the newest epoch's; with no eligible shard nothing is
 * published and the cluster stays read-only for new keys.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "mb/pg_wchar.h"

#include "catalog/config.h"
#include "catalog/epochs.h"
#include "cd_errcodes.h"
#include "placement/hash.h"
#include "router/router.h"

/*
 * RouterComputedCandidates fills 'candidates' (and the epoch each came
 * from) with the registered shards that own the key under each epoch,
 * newest first, and returns how many.  Room for one entry per registered
 * shard is enough.
 */
int
RouterComputedCandidates(const char *key, int key_len, const CdShard **candidates,
						 int *epochs)
{
	const char *utf8 = pg_server_to_any(key, key_len, PG_UTF8);
	size_t		utf8_len = utf8 == key ? key_len : strlen(utf8);
	List	   *all = EpochList();
	int			n = 0;
	ListCell   *lc;

	if (all == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_CD_TOPOLOGY_UNAVAILABLE),
				 errmsg("computed placement has no published epoch"),
				 errhint("Make a shard eligible and run collegedb.publish_eligibility().")));

	foreach(lc, all)
	{
		CdEpoch    *epoch = lfirst(lc);
		int			owner = PlacementRendezvousOwner(utf8, utf8_len, epoch->shards_utf8,
													 epoch->nshards);
		const CdShard *shard = ShardLookupOptional(epoch->shards[owner]);
		bool		seen = false;

		/* a shard dropped since cannot be asked */
		if (shard == NULL || !OidIsValid(shard->serverid))
			continue;
		for (int i = 0; i < n && !seen; i++)
			seen = ShardIs(candidates[i], shard);
		if (!seen)
		{
			epochs[n] = epoch->number;
			candidates[n++] = shard;
		}
	}
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_CD_SHARD_NOT_FOUND),
				 errmsg("every shard that owned the key under the published epochs is gone")));
	return n;
}

/*
 * RouterPublishEligibility evaluates which shards are eligible now and,
 * under computed placement, publishes a new epoch when that set differs
 * from the newest epoch's.  Returns the newest epoch's number (0 outside
 * computed placement) and the eligible names in *eligible.
 */
int
RouterPublishEligibility(List **eligible, bool *published)
{
	const CdConfig *config = ConfigGet();
	List	   *names = NIL;
	List	   *all = ShardList();
	List	   *epochs;
	CdEpoch    *newest;
	const char **array;
	int			n;
	bool		same;
	ListCell   *lc;

	*published = false;
	foreach(lc, all)
	{
		const CdShard *shard = lfirst(lc);

		if (RouterShardTakesKeys(shard) && RouterShardEligible(shard, "publish", NULL))
			names = lappend(names, pstrdup(shard->name));
	}
	*eligible = names;
	if (!config->computed)
		return 0;

	epochs = EpochList();
	newest = epochs != NIL ? linitial(epochs) : NULL;
	n = list_length(names);
	if (n == 0)
		return newest ? newest->number : 0;

	/* ShardList is in name order, and so is every epoch */
	same = newest != NULL && newest->nshards == n;
	for (int i = 0; same && i < n; i++)
		same = strcmp(newest->shards[i], list_nth(names, i)) == 0;
	if (same)
		return newest->number;

	array = palloc(sizeof(char *) * n);
	for (int i = 0; i < n; i++)
		array[i] = list_nth(names, i);
	EpochInsert(newest ? newest->number + 1 : 1, array, n);
	*published = true;
	return newest ? newest->number + 1 : 1;
}
