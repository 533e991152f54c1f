/*-------------------------------------------------------------------------
 *
 * router.c
 *	  Decides which shard a key goes to (src/README.md, "Placement"): the
 *	  key's mapping when it has one, else a new allocation by the
 *	  strategy, or under computed placement its owners by epoch.
 *
 * Mappings are cached per backend in "collegedb mapping cache", keyed by
 * the SHA-256 of the key, so a warm routed statement reads no catalog
 * table.  The cache is dropped when the mapping table's trigger sends an
 * invalidation (an update or delete of any mapping, through any collegedb
 * function), when the settings change, and when a transaction that saved
 * mappings rolls back (the rows it cached are gone).  An entry older than
 * mapping_cache_ttl is re-read, which bounds how long a change made behind
 * collegedb's back can go unnoticed.  The absence of a mapping is cached
 * only where the trigger also reports new mappings (computed placement,
 * the slots strategy).
 *
 * When collegedb is preloaded, a second level shared by every backend
 * (shared_cache.c) sits between this cache and the mapping table: a miss
 * here looks there, and a mapping read from the table is published there,
 * so a new connection starts warm.  The same invalidations make it stale
 * (the relcache callback bumps its generation).  It only ever holds
 * committed rows: a transaction that has written anything (it has an XID:
 * it may have allocated, moved or deleted a mapping, and may roll back)
 * neither publishes there nor reads from there.
 *
 * The strategies themselves are in placement/; tombstone hops come with
 * the moves.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "common/sha2.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "catalog/catalog.h"
#include "catalog/config.h"
#include "catalog/journal.h"
#include "catalog/mappings.h"
#include "catalog/tables.h"
#include "cd_errcodes.h"
#include "collegedb.h"
#include "router/router.h"
#include "router/shared_cache.h"

/* beyond this many entries the cache starts over */
#define MAPPING_CACHE_MAX_ENTRIES 100000

typedef struct MappingCacheEntry
{
	uint8		digest[PG_SHA256_DIGEST_LENGTH];	/* hash key */
	char		shard[NAMEDATALEN];
	TimestampTz fetched_at;
} MappingCacheEntry;

static MemoryContext cache_context = NULL;
static HTAB *mapping_cache = NULL;
static bool saved_in_xact = false;

static CdRoute resolve(const char *key, int key_len, bool for_write, bool save, bool *defer,
					   bool *unchecked);

uint64		RouterCacheHits = 0;
uint64		RouterCacheMisses = 0;
uint64		RouterCatalogReads = 0;
uint64		RouterSharedHits = 0;
uint64		RouterSharedMisses = 0;

static void
reset_cache(void)
{
	mapping_cache = NULL;
	if (cache_context)
		MemoryContextReset(cache_context);
}

/* whether any move is before its source step's commit: -1 unknown */
static int	moves_known = -1;
static Oid	move_relid = InvalidOid;

static void
router_relcache_callback(Datum arg, Oid relid)
{
	if (CatalogRelidIs(CD_REL_MAPPING, relid) || CatalogRelidIs(CD_REL_CONFIG, relid))
	{
		reset_cache();

		/*
		 * On a primary the backend that made the change makes the shared
		 * cache stale at its commit (router_xact_callback): a receiver doing
		 * it again, whenever it gets to the message, would only throw away
		 * entries published after the change.  A standby's changes come
		 * from replay, which runs no callback here, and a reset of the
		 * queue may have lost any message.
		 */
		if (relid == InvalidOid || RecoveryInProgress())
			SharedCacheInvalidate();
	}
	if (relid == InvalidOid || relid == move_relid || !OidIsValid(move_relid) ||
		CatalogRelidIs(CD_REL_CONFIG, relid))
		moves_known = -1;
	if (relid == InvalidOid)
		move_relid = InvalidOid;
}

/*
 * router_xact_callback forgets what a rolled-back transaction cached, and
 * makes the shared cache stale when a transaction that changed mappings
 * commits.  The commit callbacks run once the change is visible and
 * before its invalidation is sent: bumping the generation here, and not
 * only when some backend processes that invalidation, keeps a backend
 * that starts later (which never sees the invalidation) from a mapping a
 * reader published from a scan that began before the commit.
 */
static void
router_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
	{
		if (saved_in_xact)
			reset_cache();
		saved_in_xact = false;
		(void) CatalogTakeMappingsChanged();
	}
	else if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT ||
			 event == XACT_EVENT_PREPARE)
	{
		saved_in_xact = false;
		if (CatalogTakeMappingsChanged() && event != XACT_EVENT_PREPARE)
			SharedCacheInvalidate();
	}
}

static void
router_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB && saved_in_xact)
		reset_cache();
}

/*
 * RouterInit registers the cache's invalidation callbacks and, while
 * preloading, the shared cache's part of shared memory.
 */
void
RouterInit(void)
{
	SharedCacheInit();
	AllocateInit();
	CacheRegisterRelcacheCallback(router_relcache_callback, (Datum) 0);
	RegisterXactCallback(router_xact_callback, NULL);
	RegisterSubXactCallback(router_subxact_callback, NULL);
}

static HTAB *
get_cache(void)
{
	HASHCTL		ctl;

	if (mapping_cache)
		return mapping_cache;
	if (cache_context == NULL)
		cache_context = AllocSetContextCreate(CacheMemoryContext,
											  "collegedb mapping cache",
											  ALLOCSET_DEFAULT_SIZES);
	ctl.keysize = PG_SHA256_DIGEST_LENGTH;
	ctl.entrysize = sizeof(MappingCacheEntry);
	ctl.hcxt = cache_context;
	mapping_cache = hash_create("collegedb mapping cache", 256, &ctl,
								HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	return mapping_cache;
}

static char *
stored_form(const char *key, int key_len, const uint8 *digest)
{
	char	   *hex;

	if (!ConfigGet()->hash_mappings)
		return pnstrdup(key, key_len);
	hex = palloc(MAPPING_ID_LEN * 2 + 1);
	hex[hex_encode((const char *) digest, MAPPING_ID_LEN, hex)] = '\0';
	return hex;
}

/*
 * RouterStoredKey returns the form in which collegedb keeps a key: its id
 * in the mapping store (the first 128 bits of the SHA-256 of its UTF-8
 * bytes) in lowercase hex, or the key itself when hash_mappings is off.
 */
char *
RouterStoredKey(const char *key, int key_len)
{
	uint8		digest[PG_SHA256_DIGEST_LENGTH];

	MappingDigest(key, key_len, digest);
	return stored_form(key, key_len, digest);
}

/*
 * cache_put caches in this backend that the key maps to 'shard' ("": has
 * no mapping), as read from the mapping table at 'fetched_at'.
 */
static void
cache_put(const uint8 *digest, const char *shard, TimestampTz fetched_at)
{
	HTAB	   *cache = get_cache();
	MappingCacheEntry *entry;

	if (ConfigGet()->mapping_cache_ttl_ms == 0)
		return;
	if (hash_get_num_entries(cache) >= MAPPING_CACHE_MAX_ENTRIES)
	{
		reset_cache();
		cache = get_cache();
	}
	entry = hash_search(cache, digest, HASH_ENTER, NULL);
	strlcpy(entry->shard, shard, NAMEDATALEN);
	entry->fetched_at = fetched_at;
}

/*
 * may_share says whether this transaction may use the shared cache: not
 * once it has written anything.  Then what it reads from the mapping table
 * (a row, or a row's absence) may be its own uncommitted work, which no
 * other backend may see, and what the shared cache holds may be the
 * committed state its own work replaced.
 */
static bool
may_share(void)
{
	return SharedCacheEnabled() && !saved_in_xact &&
		!TransactionIdIsValid(GetTopTransactionIdIfAny());
}

/*
 * find_mapping returns the shard name the key is mapped to, from the cache
 * when fresh, else from the shared cache when fresh, else from the mapping
 * store; NULL when unmapped.  Under computed placement and the slots
 * strategy the absence of a mapping (an exception) is cached too: there
 * the mapping table's trigger also reports new rows.  Without 'fill' (a
 * bulk load's keys, most of them seen once) what it reads is not cached,
 * and the shared cache is not asked: filling and evicting both caches
 * for every row of a load costs more than the load's own work.  Without
 * 'probe' the mapping store is not read either (placement_needs_no_probe):
 * NULL then means only that the key is not cached.
 */
static const char *
find_mapping(const char *key, int key_len, const uint8 *digest, char *buf, bool fill,
			 bool probe)
{
	const CdConfig *config = ConfigGet();
	TimestampTz now = GetCurrentStatementStartTimestamp();
	int64		ttl = (int64) config->mapping_cache_ttl_ms * 1000;
	MappingCacheEntry *entry;
	TimestampTz fetched_at;
	uint64		generation = 0;
	bool		share;
	bool		found;

	entry = hash_search(get_cache(), digest, HASH_FIND, NULL);
	if (entry != NULL && now - entry->fetched_at < ttl)
	{
		RouterCacheHits++;
		return entry->shard[0] ? entry->shard : NULL;
	}
	RouterCacheMisses++;
	share = ttl > 0 && may_share() && fill;
	if (share)
	{
		if (SharedCacheGet(digest, buf, &fetched_at) && now - fetched_at < ttl)
		{
			RouterSharedHits++;
			cache_put(digest, buf, fetched_at);
			return buf[0] ? buf : NULL;
		}
		RouterSharedMisses++;
		/* the generation before the scan: a change processed since drops it */
		generation = SharedCacheGeneration();
	}
	if (!probe)
		return NULL;
	RouterCatalogReads++;
	found = MappingFind(stored_form(key, key_len, digest), buf);
	if (!found && !ConfigCachesAbsence(config))
		return NULL;
	if (!found)
		buf[0] = '\0';
	if (fill)
		cache_put(digest, buf, now);
	if (share)
		SharedCachePut(digest, buf, now, generation);
	return found ? buf : NULL;
}

/*
 * RouterFindMapping looks up the key's mapping without allocating; false
 * when it has none.  A mapping to a shard that is no longer registered is
 * SHARD_NOT_FOUND.
 */
bool
RouterFindMapping(const char *key, int key_len, const CdShard **shard)
{
	uint8		digest[PG_SHA256_DIGEST_LENGTH];
	char		buf[NAMEDATALEN];
	const char *name;

	MappingDigest(key, key_len, digest);
	name = find_mapping(key, key_len, digest, buf, true, true);
	if (name == NULL)
		return false;
	*shard = ShardLookup(name);
	return true;
}

/*
 * single_route makes a route to one shard.
 */
static CdRoute
single_route(const CdShard *shard, CdRouteSource source)
{
	CdRoute		route;

	route.shard = shard;
	route.source = source;
	route.ncandidates = 1;
	route.candidates = palloc(sizeof(CdShard *));
	route.candidates[0] = shard;
	route.epochs = NULL;
	route.slot = -1;
	return route;
}

/*
 * narrow_to_moving_source keeps, of a route with several candidates
 * (computed placement, or a slot that moves), only the source of
 * an unfinished move of the key that has not passed its source step: the
 * key lives there until then, whatever another candidate holds (a move
 * interrupted between the target's commit and the source's leaves a copy
 * on the target until it resumes, and the target is usually the newest
 * owner, tried first).  One indexed catalog read, only for keys with
 * several candidates, and only while some move is at one of those steps:
 * whether any is, is cached until collegedb.move changes (its trigger sends
 * an invalidation under computed placement and the slots strategy).
 */
static void
narrow_to_moving_source(CdRoute *route, const char *stored)
{
	char	   *source = NULL;

	if (moves_known == 0)
		return;
	RouterCatalogReads++;
	if (moves_known < 0)
	{
		if (!OidIsValid(move_relid))
			move_relid = get_relname_relid("move", get_namespace_oid(COLLEGEDB_SCHEMA, false));
		moves_known = JournalAnyMoveBeforeSource();
	}
	if (moves_known > 0)
		source = JournalMovingSource(stored);
	if (source == NULL)
		return;
	for (int i = 0; i < route->ncandidates; i++)
	{
		if (strcmp(route->candidates[i]->name, source) == 0)
		{
			route->candidates[0] = route->candidates[i];
			route->epochs[0] = route->epochs[i];
			route->ncandidates = 1;
			return;
		}
	}
}

/*
 * RouterResolve returns where a key's statement goes.  A mapped key goes
 * to its mapping (under computed placement: its exception).  Under computed
 * placement any other key goes to its owners by epoch.  Under the slots
 * strategy it goes to its slot's shard (slotroute.c), saving nothing.
 * Otherwise an unmapped key gets the strategy's pick among the shards that take new
 * keys (the write strategy for writes, the read strategy for reads); with
 * 'save', a write (or, with allocate_on_read, a read) saves that pick as the
 * key's mapping in the current transaction.
 */
CdRoute
RouterResolve(const char *key, int key_len, bool for_write, bool save)
{
	return resolve(key, key_len, for_write, save, NULL, NULL);
}

/*
 * RouterResolveBatched is RouterResolve of a write (for_write and save)
 * for a row that waits in a batch (fdw/insert.c): a new key under KV
 * placement gets the write strategy's pick, taking a round-robin turn as a
 * saved pick does, but its mapping is not saved yet: *is_new says so, and
 * the caller saves the batch's new keys with RouterSaveNewKeys before it
 * sends their rows.
 */
CdRoute
RouterResolveBatched(const char *key, int key_len, bool *is_new, bool *unchecked)
{
	*is_new = false;
	*unchecked = false;
	return resolve(key, key_len, true, true, is_new, unchecked);
}

/*
 * RouterSaveNewKeys saves the mappings of n new keys (RouterResolveBatched
 * said is_new) to the shards picked for them, in one statement
 * (MappingInsertMany), with MappingInsert's rule: a key that has a
 * mapping by now (a concurrent writer's, or an earlier row's of the same
 * batch) keeps it.  owners[i] is the shard key i maps to afterwards; a row
 * whose owner is not the shard picked for it must go there instead.
 */
void
RouterSaveNewKeys(int n, char *const *keys, const int *key_lens,
				  const CdShard *const *picked, const CdShard **owners)
{
	char	  **stored;
	const char **shards;
	char	   *names;
	uint8	   *digests;

	if (n == 0)
		return;
	stored = palloc(sizeof(char *) * n);
	shards = palloc(sizeof(char *) * n);
	names = palloc(NAMEDATALEN * n);
	digests = palloc(PG_SHA256_DIGEST_LENGTH * n);
	for (int i = 0; i < n; i++)
	{
		MappingDigest(keys[i], key_lens[i], digests + i * PG_SHA256_DIGEST_LENGTH);
		stored[i] = stored_form(keys[i], key_lens[i], digests + i * PG_SHA256_DIGEST_LENGTH);
		shards[i] = picked[i]->name;
	}
	MappingInsertMany(n, stored, shards, names);
	saved_in_xact = true;
	/* not cached, as find_mapping without fill: a load's keys come once */
	for (int i = 0; i < n; i++)
	{
		owners[i] = strcmp(names + i * NAMEDATALEN, picked[i]->name) == 0 ?
			picked[i] : ShardLookup(names + i * NAMEDATALEN);
	}
}

/*
 * RouterFindExceptions looks up, under computed placement, the exceptions
 * of n keys that RouterResolveBatched left unchecked, in one statement
 * (MappingFindMany): owners[i] is the shard key i lives on instead of its
 * computed owner, or NULL.  A row whose key has one goes there instead.
 */
void
RouterFindExceptions(int n, char *const *keys, const int *key_lens, const CdShard **owners)
{
	char	  **stored;
	char	   *names;
	uint8		digest[PG_SHA256_DIGEST_LENGTH];

	if (n == 0)
		return;
	if (!MappingAny())
	{
		/* the table holds only exceptions, which are few, and often none */
		for (int i = 0; i < n; i++)
			owners[i] = NULL;
		return;
	}
	stored = palloc(sizeof(char *) * n);
	names = palloc(NAMEDATALEN * n);
	for (int i = 0; i < n; i++)
	{
		MappingDigest(keys[i], key_lens[i], digest);
		stored[i] = stored_form(keys[i], key_lens[i], digest);
	}
	MappingFindMany(n, stored, names);
	for (int i = 0; i < n; i++)
		owners[i] = names[i * NAMEDATALEN] ? ShardLookup(names + i * NAMEDATALEN) : NULL;
}

/*
 * placement_needs_no_probe says whether a batched write may place a key
 * without first reading its mapping: when the write strategy's pick
 * depends on the key and the shard list alone (hash, jump; no eligibility
 * predicate, no size limit, some shard takes keys), picking for a key
 * that is mapped already costs nothing and changes nothing.  The batch's
 * one INSERT of the new mappings (RouterSaveNewKeys) keeps an existing
 * mapping and reports its shard, and the row goes there, as after a probe.
 * Placement is the same as one row at a time, without one index probe a
 * row.
 */
static bool
placement_needs_no_probe(const CdConfig *config)
{
	ListCell   *lc;

	if (config->computed ||
		(config->write_strategy != CD_STRATEGY_HASH &&
		 config->write_strategy != CD_STRATEGY_JUMP) ||
		OidIsValid(config->eligible) || config->max_shard_size > 0)
		return false;
	foreach(lc, ShardListNonEmpty())
		if (RouterShardTakesKeys(lfirst(lc)))
			return true;
	return false;
}

/*
 * resolve is RouterResolve; with 'defer' (a batched write), a new key's
 * mapping is not saved but *defer set, and under computed placement the
 * key's exception is not looked up but *unchecked set
 * (RouterResolveBatched).
 */
static CdRoute
resolve(const char *key, int key_len, bool for_write, bool save, bool *defer,
		bool *unchecked)
{
	const CdConfig *config = ConfigGet();
	uint8		digest[PG_SHA256_DIGEST_LENGTH];
	char		buf[NAMEDATALEN];
	const char *name;
	CdRoute		route;
	/* a batched computed key's exception is the batch's to look up */
	bool		exception_later = defer != NULL && unchecked != NULL && config->computed;

	if (!exception_later)
	{
		MappingDigest(key, key_len, digest);
		name = find_mapping(key, key_len, digest, buf, defer == NULL,
							defer == NULL || !placement_needs_no_probe(config));
		if (name != NULL)
			return single_route(ShardLookup(name),
								config->computed ? CD_ROUTE_EXCEPTION : CD_ROUTE_MAPPING);
	}

	if (config->computed)
	{
		int			nshards = list_length(ShardList());

		route.source = CD_ROUTE_COMPUTED;
		route.slot = -1;
		route.candidates = palloc(sizeof(CdShard *) * Max(nshards, 1));
		route.epochs = palloc(sizeof(int) * Max(nshards, 1));
		route.ncandidates = RouterComputedCandidates(key, key_len, route.candidates,
													 route.epochs);
		if (exception_later)
			*unchecked = true;
		else if (route.ncandidates > 1 && AnyRegisteredTable())
			narrow_to_moving_source(&route, stored_form(key, key_len, digest));
		route.shard = route.candidates[0];
		return route;
	}

	/* the slots strategy: the slot's shard, and no mapping saved */
	if ((for_write ? config->write_strategy : config->read_strategy) == CD_STRATEGY_SLOTS)
	{
		route = RouterSlotRoute(key, key_len, for_write);
		if (route.ncandidates > 1 && AnyRegisteredTable())
			narrow_to_moving_source(&route, stored_form(key, key_len, digest));
		route.shard = route.candidates[0];
		if (CollegeDebug)
			elog(LOG, "collegedb: key routed to shard \"%s\" (slot %d)", route.shard->name,
				 route.slot);
		return route;
	}

	/*
	 * A hot standby cannot save a mapping: a read there routes by the
	 * strategy and saves nothing, and a write, which must save what it
	 * allocates, is refused before anything reaches a shard.
	 */
	save = save && (for_write || (config->allocate_on_read && !RecoveryInProgress()));
	if (save)
		CatalogEnsureWritable(gettext_noop("cannot place a new key on a hot standby"));
	route = single_route(RouterAllocate(for_write ? config->write_strategy : config->read_strategy,
										key, key_len, save),
						 CD_ROUTE_STRATEGY);
	if (save && defer)
	{
		*defer = true;
		route.source = CD_ROUTE_ALLOCATED;
	}
	else if (save)
	{
		MappingInsert(stored_form(key, key_len, digest), route.shard->name, buf);
		saved_in_xact = true;
		cache_put(digest, buf, GetCurrentStatementStartTimestamp());
		route = single_route(ShardLookup(buf), CD_ROUTE_ALLOCATED);
	}
	if (CollegeDebug)
		elog(LOG, "collegedb: key routed to shard \"%s\" (%s)", route.shard->name,
			 RouterSourceName(route.source));
	return route;
}

/*
 * RouterRecordException saves, under computed placement, that a key lives
 * on 'shard' rather than where the newest epoch puts it, so that the next
 * statement goes straight there.  A hot standby records nothing: the
 * exception is only a shortcut, and its next statement probes again.
 */
void
RouterRecordException(const char *key, int key_len, const CdShard *shard)
{
	uint8		digest[PG_SHA256_DIGEST_LENGTH];
	char		owner[NAMEDATALEN];

	if (RecoveryInProgress())
		return;
	MappingDigest(key, key_len, digest);
	MappingInsert(stored_form(key, key_len, digest), shard->name, owner);
	saved_in_xact = true;
	cache_put(digest, owner, GetCurrentStatementStartTimestamp());
}

const char *
RouterSourceName(CdRouteSource source)
{
	switch (source)
	{
		case CD_ROUTE_MAPPING:
			return "mapping";
		case CD_ROUTE_ALLOCATED:
			return "allocated";
		case CD_ROUTE_STRATEGY:
			return "strategy";
		case CD_ROUTE_EXCEPTION:
			return "exception";
		case CD_ROUTE_COMPUTED:
			return "computed";
		case CD_ROUTE_SLOT:
			return "slot";
	}
	return "strategy";
}
