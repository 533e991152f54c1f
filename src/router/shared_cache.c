/*-------------------------------------------------------------------------
 *
 * shared_cache.c
 *	  The second level of the mapping cache: key mappings shared by every
 *	  backend of the front, so that a new connection's first read of a key
 *	  another backend read recently costs no catalog read.
 *
 * It exists only when collegedb is preloaded and
 * collegedb.shared_mapping_cache_size is above 0; otherwise every function
 * here is a no-op and the router behaves as with its backend cache alone.
 *
 * The entries are keyed by (database, SHA-256 of the key), so databases
 * never share one, and hold the shard name, when the row was read from the
 * mapping table (the TTL counts from there) and the generation it was read
 * under.  They live in 16 partitions, each a fixed-size shared hash table
 * of its own under an LWLock of the tranche "collegedb mapping cache"; the
 * first byte of the digest picks the partition.  A full partition first
 * drops its entries of older generations, and if that frees less than an
 * eighth of it, an arbitrary further eighth (in bucket order, which is the
 * order of the hash: at random as to keys), so it never grows.
 *
 * Invalidation is one shared generation counter.  The backend that changed
 * the mapping table or the settings bumps it when its transaction commits,
 * as soon as the change is visible (router.c): every later reader, also a
 * backend started after that commit, which never receives the
 * invalidation, then ignores what was published before.  On a hot standby,
 * where changes arrive by replay, every backend bumps it in its relcache
 * callback for those tables instead, and every backend does on a reset of
 * its invalidation queue.  An entry is valid only while its generation is
 * the current one.  The counter serves the whole server:
 * a change in one database makes every database's entries stale, which
 * costs one catalog read per key afterwards and keeps the rule simple.  A
 * reader notes the generation before it scans the mapping table and
 * publishes what it read only if, under the partition's lock, the counter
 * has not moved: a scan that saw the row before a change can therefore not
 * be published after the change's bump.  What publishes, and what not, is
 * decided by the router.
 *
 * A hot standby cannot rely on the counter alone: a change replayed while
 * no backend runs (or before any processes the invalidation) bumps
 * nothing, and a backend started later never receives that invalidation.
 * So an entry published during recovery also records the replay position
 * its reader noted before the scan (SharedCacheGeneration), and a standby
 * uses it only while nothing was replayed since: the scan saw at least
 * the catalog as of that position, and an unchanged position means no
 * mapping (or anything else) changed after it.  An idle standby keeps its
 * cache; one that replays constantly reads the catalog, as without it.
 * Entries published during recovery are never used once the server is
 * promoted, nor a primary's by a standby.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "access/xlogrecovery.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/hsearch.h"

#include "collegedb.h"
#include "router/shared_cache.h"

#define SHARED_CACHE_PARTITIONS 16
#define SHARED_CACHE_TRANCHE "collegedb mapping cache"

typedef struct SharedCacheKey
{
	Oid			database;
	uint8		digest[PG_SHA256_DIGEST_LENGTH];
} SharedCacheKey;

typedef struct SharedCacheEntry
{
	SharedCacheKey key;			/* hash key */
	char		shard[NAMEDATALEN]; /* "": the key has no mapping */
	TimestampTz fetched_at;
	uint64		generation;
	bool		in_recovery;	/* published during recovery, at ... */
	XLogRecPtr	replayed;		/* ... this replay position */
} SharedCacheEntry;

typedef struct SharedCacheState
{
	pg_atomic_uint64 generation;
} SharedCacheState;

static SharedCacheState *state = NULL;

/* during recovery: the replay position this backend's reader noted last */
static XLogRecPtr noted_replay = InvalidXLogRecPtr;
static HTAB *partitions[SHARED_CACHE_PARTITIONS];
static LWLockPadded *locks = NULL;

/*
 * partition_size is how many entries one partition holds: the setting
 * split evenly, rounded up.
 */
static long
partition_size(void)
{
	return (CollegeSharedMappingCacheSize + SHARED_CACHE_PARTITIONS - 1) / SHARED_CACHE_PARTITIONS;
}

static Size
shared_cache_size(void)
{
	return add_size(MAXALIGN(sizeof(SharedCacheState)),
					mul_size(SHARED_CACHE_PARTITIONS,
							 hash_estimate_size(partition_size(), sizeof(SharedCacheEntry))));
}

/*
 * shared_cache_init creates or attaches to the partitions; called from
 * shmem.c's startup hook, holding AddinShmemInitLock.
 */
static void
shared_cache_init(void)
{
	bool		found;
	HASHCTL		ctl;

	state = ShmemInitStruct(SHARED_CACHE_TRANCHE, sizeof(SharedCacheState), &found);
	if (!found)
		pg_atomic_init_u64(&state->generation, 1);
	locks = GetNamedLWLockTranche(SHARED_CACHE_TRANCHE);
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(SharedCacheKey);
	ctl.entrysize = sizeof(SharedCacheEntry);
	for (int i = 0; i < SHARED_CACHE_PARTITIONS; i++)
	{
		char		name[64];

		snprintf(name, sizeof(name), "%s %d", SHARED_CACHE_TRANCHE, i);
		partitions[i] = ShmemInitHash(name, partition_size(), partition_size(), &ctl,
									  HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);
	}
}

/*
 * SharedCacheInit registers the shared cache's part of shared memory when
 * collegedb is being preloaded with a cache size above 0.
 */
void
SharedCacheInit(void)
{
	if (!process_shared_preload_libraries_in_progress || CollegeSharedMappingCacheSize <= 0)
		return;
	ShmemRegister(SHARED_CACHE_TRANCHE, SHARED_CACHE_PARTITIONS, shared_cache_size,
				  shared_cache_init);
}

/*
 * SharedCacheEnabled says whether this backend has the shared cache.
 */
bool
SharedCacheEnabled(void)
{
	return state != NULL;
}

/*
 * SharedCacheGeneration returns the current generation: what a reader
 * notes before it scans the mapping table, to publish with what it read.
 * During recovery it also notes the replay position, for SharedCachePut.
 */
uint64
SharedCacheGeneration(void)
{
	if (state == NULL)
		return 0;
	noted_replay = RecoveryInProgress() ? GetXLogReplayRecPtr(NULL) : InvalidXLogRecPtr;
	pg_memory_barrier();
	return pg_atomic_read_u64(&state->generation);
}

/*
 * SharedCacheInvalidate makes every entry of every database stale.
 */
void
SharedCacheInvalidate(void)
{
	if (state != NULL)
		pg_atomic_fetch_add_u64(&state->generation, 1);
}

static void
make_key(SharedCacheKey *key, const uint8 *digest)
{
	memset(key, 0, sizeof(*key));
	key->database = MyDatabaseId;
	memcpy(key->digest, digest, PG_SHA256_DIGEST_LENGTH);
}

/*
 * SharedCacheGet copies the key's shard name (NAMEDATALEN bytes, "" for a
 * cached absence) and when it was read from the mapping table; false when
 * the shared cache has no valid entry for the key.  The caller checks the
 * age.
 */
bool
SharedCacheGet(const uint8 *digest, char *shard, TimestampTz *fetched_at)
{
	int			p = digest[0] % SHARED_CACHE_PARTITIONS;
	SharedCacheKey key;
	SharedCacheEntry *entry;
	bool		found = false;

	bool		in_recovery;
	XLogRecPtr	replayed = InvalidXLogRecPtr;

	if (state == NULL)
		return false;
	in_recovery = RecoveryInProgress();
	if (in_recovery)
		replayed = GetXLogReplayRecPtr(NULL);
	make_key(&key, digest);
	LWLockAcquire(&locks[p].lock, LW_SHARED);
	entry = hash_search(partitions[p], &key, HASH_FIND, NULL);
	if (entry != NULL && entry->generation == pg_atomic_read_u64(&state->generation) &&
		entry->in_recovery == in_recovery &&
		(!in_recovery || entry->replayed == replayed))
	{
		strlcpy(shard, entry->shard, NAMEDATALEN);
		*fetched_at = entry->fetched_at;
		found = true;
	}
	LWLockRelease(&locks[p].lock);
	return found;
}

/*
 * evict frees room in a full partition, holding its lock exclusively:
 * every entry of an older generation goes, and if that is less than an
 * eighth of the partition, arbitrary entries until an eighth is free.
 */
static void
evict(HTAB *partition, uint64 generation)
{
	long		quota = Max(partition_size() / 8, 1);
	long		removed = 0;
	HASH_SEQ_STATUS status;
	SharedCacheEntry *entry;

	hash_seq_init(&status, partition);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		if (entry->generation != generation)
		{
			hash_search(partition, &entry->key, HASH_REMOVE, NULL);
			removed++;
		}
	}
	if (removed >= quota)
		return;
	hash_seq_init(&status, partition);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		hash_search(partition, &entry->key, HASH_REMOVE, NULL);
		if (++removed >= quota)
		{
			hash_seq_term(&status);
			break;
		}
	}
}

/*
 * SharedCachePut publishes that the key maps to 'shard' ("": has no
 * mapping), as read from the mapping table at 'fetched_at' by a scan that
 * began under 'generation'; nothing when the generation has moved since.
 */
void
SharedCachePut(const uint8 *digest, const char *shard, TimestampTz fetched_at,
			   uint64 generation)
{
	int			p = digest[0] % SHARED_CACHE_PARTITIONS;
	SharedCacheKey key;
	SharedCacheEntry *entry;

	if (state == NULL)
		return;
	make_key(&key, digest);
	LWLockAcquire(&locks[p].lock, LW_EXCLUSIVE);
	if (pg_atomic_read_u64(&state->generation) != generation)
	{
		LWLockRelease(&locks[p].lock);
		return;
	}
	entry = hash_search(partitions[p], &key, HASH_ENTER_NULL, NULL);
	if (entry == NULL)
	{
		evict(partitions[p], generation);
		entry = hash_search(partitions[p], &key, HASH_ENTER_NULL, NULL);
	}
	if (entry != NULL)
	{
		strlcpy(entry->shard, shard, NAMEDATALEN);
		entry->fetched_at = fetched_at;
		entry->generation = generation;
		entry->in_recovery = !XLogRecPtrIsInvalid(noted_replay);
		entry->replayed = noted_replay;
	}
	LWLockRelease(&locks[p].lock);
}

/*
 * SharedCacheEntries returns how many entries the shared cache holds, of
 * every database and generation; -1 without the shared cache.
 */
int64
SharedCacheEntries(void)
{
	int64		n = 0;

	if (state == NULL)
		return -1;
	for (int i = 0; i < SHARED_CACHE_PARTITIONS; i++)
	{
		LWLockAcquire(&locks[i].lock, LW_SHARED);
		n += hash_get_num_entries(partitions[i]);
		LWLockRelease(&locks[i].lock);
	}
	return n;
}
