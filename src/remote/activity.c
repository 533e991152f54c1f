/*-------------------------------------------------------------------------
 *
 * activity.c
 *	  What the front's backends share about their remote work: per-shard
 *	  activity counters and health, and two-phase commit's counters for the
 *	  coordinators' recovery passes.
 *
 * Counters are atomics in a fixed-size shared hash table
 * (collegedb.max_shards entries); a backend remembers where its shards'
 * entries are, so counting a statement takes no lock once warm.  Each
 * shard's entry also says when a statement or connection last succeeded
 * there and when one last failed, with what message (the health of a
 * shard, collegedb.shard_health): the time of the last success is an
 * atomic, the last error is under the entry's spinlock, taken only when
 * something failed or is read.  Without preload the same entries live in
 * the backend's own memory: the view then shows what this backend saw.
 *
 * The part is registered with common/shmem.c by ActivityInit, while
 * preloading.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "collegedb.h"
#include "remote/remote.h"

#define ACTIVITY_TRANCHE "collegedb activity"

typedef struct ShardActivityEntry
{
	char		shard[NAMEDATALEN]; /* hash key */
	pg_atomic_uint64 statements;
	pg_atomic_uint64 errors;
	pg_atomic_uint64 last_ok;	/* TimestampTz; 0: never */
	slock_t		mutex;			/* protects the last error */
	TimestampTz last_error_at;	/* 0: never */
	char		last_error[CD_HEALTH_ERROR_LEN];
} ShardActivityEntry;

typedef struct LocalActivity
{
	char		shard[NAMEDATALEN]; /* hash key */
	ShardActivityEntry *entry;	/* in shared memory */
} LocalActivity;

typedef struct ActivityState
{
	LWLock	   *lock;			/* protects inserts into the activity hash */
	/* two-phase commit activity, for the coordinators' recovery passes */
	pg_atomic_uint64 two_phase_begun;	/* front transactions that began it */
	pg_atomic_uint32 two_phase_running; /* of those, not ended yet */
	pg_atomic_uint32 two_phase_unclean; /* one ended by abort or a failure */
} ActivityState;

static ActivityState *activity = NULL;
static HTAB *activity_hash = NULL;
static HTAB *local_activity = NULL;	/* of LocalActivity */
static HTAB *backend_activity = NULL;	/* without preload: the entries */

static void record_contact(ShardActivityEntry *entry, const char *error);

static Size
activity_shmem_size(void)
{
	return add_size(MAXALIGN(sizeof(ActivityState)),
					hash_estimate_size(CollegeMaxShards, sizeof(ShardActivityEntry)));
}

/* holding AddinShmemInitLock */
static void
activity_shmem_init(void)
{
	bool		found;
	HASHCTL		ctl;

	activity = ShmemInitStruct("collegedb activity", sizeof(ActivityState), &found);
	if (!found)
	{
		activity->lock = &(GetNamedLWLockTranche(ACTIVITY_TRANCHE))->lock;
		pg_atomic_init_u64(&activity->two_phase_begun, 0);
		pg_atomic_init_u32(&activity->two_phase_running, 0);
		pg_atomic_init_u32(&activity->two_phase_unclean, 0);
	}
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = NAMEDATALEN;
	ctl.entrysize = sizeof(ShardActivityEntry);
	activity_hash = ShmemInitHash("collegedb shard activity",
								  CollegeMaxShards, CollegeMaxShards,
								  &ctl, HASH_ELEM | HASH_STRINGS);
}

/*
 * ActivityInit registers the activity's part of shared memory (only while
 * preloading).
 */
void
ActivityInit(void)
{
	ShmemRegister(ACTIVITY_TRANCHE, 1, activity_shmem_size, activity_shmem_init);
}

/*
 * entry_init clears a new entry of the activity table.
 */
static void
entry_init(ShardActivityEntry *entry)
{
	pg_atomic_init_u64(&entry->statements, 0);
	pg_atomic_init_u64(&entry->errors, 0);
	pg_atomic_init_u64(&entry->last_ok, 0);
	SpinLockInit(&entry->mutex);
	entry->last_error_at = 0;
	entry->last_error[0] = '\0';
}

/*
 * by_shard_name creates a backend-lifetime hash table of 'entrysize'
 * entries keyed by shard name.
 */
static HTAB *
by_shard_name(const char *name, Size entrysize)
{
	HASHCTL		ctl;

	ctl.keysize = NAMEDATALEN;
	ctl.entrysize = entrysize;
	ctl.hcxt = TopMemoryContext;
	return hash_create(name, 32, &ctl, HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
}

/*
 * backend_entry finds (creating) a shard's entry in this backend's own
 * table, used without preload.
 */
static ShardActivityEntry *
backend_entry(const char *key)
{
	ShardActivityEntry *entry;
	bool		found;

	if (backend_activity == NULL)
		backend_activity = by_shard_name("collegedb backend activity",
										 sizeof(ShardActivityEntry));
	entry = hash_search(backend_activity, key, HASH_ENTER, &found);
	if (!found)
		entry_init(entry);
	return entry;
}

/*
 * activity_entry finds (creating if needed) the shared counters of a shard;
 * NULL when the table is full.  Without preload, this backend's own.
 */
static ShardActivityEntry *
activity_entry(const char *shard)
{
	char		key[NAMEDATALEN];
	LocalActivity *local;
	ShardActivityEntry *entry;
	bool		found;

	if (!ShmemIsPreloaded())
	{
		strlcpy(key, shard, NAMEDATALEN);
		return backend_entry(key);
	}
	if (local_activity == NULL)
		local_activity = by_shard_name("collegedb local activity", sizeof(LocalActivity));

	strlcpy(key, shard, NAMEDATALEN);
	local = hash_search(local_activity, key, HASH_FIND, NULL);
	if (local)
		return local->entry;

	LWLockAcquire(activity->lock, LW_EXCLUSIVE);
	entry = hash_search(activity_hash, key, HASH_ENTER_NULL, &found);
	if (entry && !found)
		entry_init(entry);
	LWLockRelease(activity->lock);
	if (entry == NULL)
		return NULL;

	local = hash_search(local_activity, key, HASH_ENTER, NULL);
	local->entry = entry;
	return entry;
}

/*
 * ActivityCountStatement counts one statement sent to 'shard' and records the
 * contact: 'error' NULL when it succeeded, else its message.  Without
 * preload it counts in this backend only; when the table is full, not at
 * all.
 */
void
ActivityCountStatement(const char *shard, const char *error)
{
	ShardActivityEntry *entry = activity_entry(shard);

	if (entry == NULL)
		return;
	pg_atomic_fetch_add_u64(&entry->statements, 1);
	if (error)
		pg_atomic_fetch_add_u64(&entry->errors, 1);
	record_contact(entry, error);
}

/*
 * ActivityRecordContact records that talking to 'shard' outside a statement
 * (connecting, committing) succeeded now ('error' NULL) or failed with
 * 'error', which counts as an error.
 */
void
ActivityRecordContact(const char *shard, const char *error)
{
	ShardActivityEntry *entry = activity_entry(shard);

	if (entry == NULL)
		return;
	if (error)
		pg_atomic_fetch_add_u64(&entry->errors, 1);
	record_contact(entry, error);
}

/*
 * record_contact notes a success or the failure 'error' now in 'entry'.
 */
static void
record_contact(ShardActivityEntry *entry, const char *error)
{
	TimestampTz now = GetCurrentTimestamp();

	if (error == NULL)
	{
		pg_atomic_write_u64(&entry->last_ok, (uint64) now);
		return;
	}
	SpinLockAcquire(&entry->mutex);
	entry->last_error_at = now;
	strlcpy(entry->last_error, error, CD_HEALTH_ERROR_LEN);
	SpinLockRelease(&entry->mutex);
}

/*
 * ActivityShardHealth copies what is known of 'shard''s contacts and
 * counters; false when nothing was ever recorded for it.
 */
bool
ActivityShardHealth(const char *shard, ShardHealth *out)
{
	char		key[NAMEDATALEN];
	ShardActivityEntry *entry;

	memset(out, 0, sizeof(*out));
	strlcpy(key, shard, NAMEDATALEN);
	if (!ShmemIsPreloaded())
		entry = backend_activity ? hash_search(backend_activity, key, HASH_FIND, NULL) : NULL;
	else
	{
		LWLockAcquire(activity->lock, LW_SHARED);
		entry = hash_search(activity_hash, key, HASH_FIND, NULL);
		LWLockRelease(activity->lock);
	}
	if (entry == NULL)
		return false;
	out->shared = ShmemIsPreloaded();
	out->statements = pg_atomic_read_u64(&entry->statements);
	out->errors = pg_atomic_read_u64(&entry->errors);
	out->last_ok = (TimestampTz) pg_atomic_read_u64(&entry->last_ok);
	SpinLockAcquire(&entry->mutex);
	out->last_error_at = entry->last_error_at;
	strlcpy(out->last_error, entry->last_error, CD_HEALTH_ERROR_LEN);
	SpinLockRelease(&entry->mutex);
	return true;
}

/*
 * ActivitySnapshot copies every shard's counters into a palloc'd
 * array; *count gets its length.
 */
ShardActivity *
ActivitySnapshot(int *count)
{
	HASH_SEQ_STATUS status;
	ShardActivityEntry *entry;
	ShardActivity *out;
	int			n = 0;

	EnsurePreloaded("collegedb.shard_activity()");

	LWLockAcquire(activity->lock, LW_SHARED);
	out = palloc0(sizeof(ShardActivity) * Max(hash_get_num_entries(activity_hash), 1));
	hash_seq_init(&status, activity_hash);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		strlcpy(out[n].shard, entry->shard, NAMEDATALEN);
		out[n].statements = pg_atomic_read_u64(&entry->statements);
		out[n].errors = pg_atomic_read_u64(&entry->errors);
		n++;
	}
	LWLockRelease(activity->lock);
	*count = n;
	return out;
}

/*
 * ActivityTwoPhaseBegin notes that a front transaction begins two-phase
 * commit: it may leave prepared transactions on shards.  It counts as
 * running before it counts as begun, so that a coordinator that sees it
 * begun and not running knows it ended.  A no-op without preload (there
 * is no coordinator then).
 */
void
ActivityTwoPhaseBegin(void)
{
	if (activity == NULL)
		return;
	pg_atomic_fetch_add_u32(&activity->two_phase_running, 1);
	pg_atomic_fetch_add_u64(&activity->two_phase_begun, 1);
}

/*
 * ActivityTwoPhaseEnd notes that such a transaction ended; 'clean' false when
 * it aborted or a participant's commit failed, so that something may be
 * left prepared for recovery.  The flag is set before the transaction
 * stops counting as running.
 */
void
ActivityTwoPhaseEnd(bool clean)
{
	if (activity == NULL)
		return;
	if (!clean)
		pg_atomic_write_u32(&activity->two_phase_unclean, 1);
	pg_atomic_fetch_sub_u32(&activity->two_phase_running, 1);
}

/*
 * ActivityTwoPhaseQuiet reads, in this order, how many transactions began
 * two-phase commit (*begun), whether any is still running, and whether
 * one ended uncleanly since the last call (clearing that flag): true when
 * none runs and none ended uncleanly.  A recovery pass that starts after
 * a quiet reading and finds nothing to do leaves nothing behind of the
 * first *begun transactions.
 */
bool
ActivityTwoPhaseQuiet(uint64 *begun)
{
	bool		running;
	bool		unclean;

	*begun = 0;
	if (activity == NULL)
		return false;
	*begun = pg_atomic_read_u64(&activity->two_phase_begun);
	pg_memory_barrier();
	running = pg_atomic_read_u32(&activity->two_phase_running) > 0;
	unclean = pg_atomic_exchange_u32(&activity->two_phase_unclean, 0) != 0;
	return !running && !unclean;
}
