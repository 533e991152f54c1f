/*-------------------------------------------------------------------------
 *
 * shmem.c
 *	  collegedb's shared memory: per-shard activity counters shared by every
 *	  backend, and the check that collegedb was preloaded.
 *
 * It also holds the round-robin strategy's counters, one per database, so
 * that new keys split exactly across every backend of the front.  Other
 * subsystems (the launcher's table of coordinators) register their own
 * Size/Init pair and LWLock tranche with ShmemRegister while preloading:
 * this file serves every layer and calls none.
 *
 * Shared memory exists only when collegedb is in shared_preload_libraries.
 * Everything that needs it calls EnsurePreloaded() first, which fails with
 * a hint naming the setting.  Counters are atomics in a fixed-size shared
 * hash table (collegedb.max_shards entries); a backend remembers where its
 * shards' entries are, so counting a statement takes no lock once warm.
 *
 * Each shard's entry also says when a statement or connection last
 * succeeded there and when one last failed, with what message (the health
 * of a shard, collegedb.shard_health): the time of the last success is an
 * atomic, the last error is under the entry's spinlock, taken only when
 * something failed or is read.  Without preload the same entries live in
 * the backend's own memory: the view then shows what this backend saw.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "collegedb.h"

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

/* one round-robin counter per database: each has its own configuration */
#define ROUND_ROBIN_SLOTS 64

typedef struct RoundRobinSlot
{
	Oid			database;		/* InvalidOid: free */
	pg_atomic_uint64 next;
} RoundRobinSlot;

typedef struct CollegeSharedState
{
	LWLock	   *lock;			/* protects inserts into the activity hash
								 * and the claiming of round-robin slots */
	RoundRobinSlot round_robin[ROUND_ROBIN_SLOTS];
	/* two-phase commit activity, for the coordinators' recovery passes */
	pg_atomic_uint64 two_phase_begun;	/* front transactions that began it */
	pg_atomic_uint32 two_phase_running; /* of those, not ended yet */
	pg_atomic_uint32 two_phase_unclean; /* one ended by abort or a failure */
} CollegeSharedState;

/* a subsystem's part of shared memory (ShmemRegister) */
typedef struct ShmemPart
{
	const char *tranche;		/* its LWLock tranche, or NULL */
	int			nlocks;			/* how many locks the tranche has */
	Size		(*size) (void);
	void		(*init) (void);
} ShmemPart;

#define MAX_SHMEM_PARTS 4

static ShmemPart parts[MAX_SHMEM_PARTS];
static int	nparts = 0;

static bool preloaded = false;
static CollegeSharedState *shared_state = NULL;
static HTAB *shared_activity = NULL;
static HTAB *local_activity = NULL;	/* of LocalActivity */
static HTAB *backend_activity = NULL;	/* without preload: the entries */

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void collegedb_shmem_request(void);
static void collegedb_shmem_startup(void);
static void record_contact(ShardActivityEntry *entry, const char *error);

/*
 * ShmemInit installs the shared-memory hooks when collegedb is being
 * preloaded; otherwise it does nothing, and EnsurePreloaded() explains.
 */
void
ShmemInit(void)
{
	if (!process_shared_preload_libraries_in_progress)
		return;

	preloaded = true;
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = collegedb_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = collegedb_shmem_startup;
}

/*
 * ShmemRegister adds a subsystem's part of shared memory: 'size' says how
 * much it needs, 'init' creates or attaches to it (holding
 * AddinShmemInitLock), 'tranche' (or NULL) names an LWLock tranche of
 * 'nlocks' locks it gets.  Only while preloading, before the hooks run.
 */
void
ShmemRegister(const char *tranche, int nlocks, Size (*size) (void), void (*init) (void))
{
	if (nparts >= MAX_SHMEM_PARTS)
		elog(ERROR, "too many collegedb shared memory parts");
	parts[nparts].tranche = tranche;
	parts[nparts].nlocks = nlocks;
	parts[nparts].size = size;
	parts[nparts].init = init;
	nparts++;
}

static Size
shared_size(void)
{
	Size		size = add_size(MAXALIGN(sizeof(CollegeSharedState)),
								hash_estimate_size(CollegeMaxShards, sizeof(ShardActivityEntry)));

	for (int i = 0; i < nparts; i++)
		size = add_size(size, parts[i].size());
	return size;
}

static void
collegedb_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(shared_size());
	RequestNamedLWLockTranche("collegedb", 1);
	for (int i = 0; i < nparts; i++)
		if (parts[i].tranche)
			RequestNamedLWLockTranche(parts[i].tranche, parts[i].nlocks);
}

/*
 * collegedb_shmem_startup creates or attaches to the shared state.
 */
static void
collegedb_shmem_startup(void)
{
	bool		found;
	HASHCTL		ctl;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	shared_state = ShmemInitStruct("collegedb state", sizeof(CollegeSharedState), &found);
	if (!found)
	{
		shared_state->lock = &(GetNamedLWLockTranche("collegedb"))->lock;
		for (int i = 0; i < ROUND_ROBIN_SLOTS; i++)
		{
			shared_state->round_robin[i].database = InvalidOid;
			pg_atomic_init_u64(&shared_state->round_robin[i].next, 0);
		}
		pg_atomic_init_u64(&shared_state->two_phase_begun, 0);
		pg_atomic_init_u32(&shared_state->two_phase_running, 0);
		pg_atomic_init_u32(&shared_state->two_phase_unclean, 0);
	}

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = NAMEDATALEN;
	ctl.entrysize = sizeof(ShardActivityEntry);
	shared_activity = ShmemInitHash("collegedb shard activity",
									CollegeMaxShards, CollegeMaxShards,
									&ctl, HASH_ELEM | HASH_STRINGS);
	for (int i = 0; i < nparts; i++)
		parts[i].init();
	LWLockRelease(AddinShmemInitLock);
}

/*
 * ShmemIsPreloaded says whether this backend has collegedb's shared memory.
 */
bool
ShmemIsPreloaded(void)
{
	return preloaded && shared_state != NULL;
}

/*
 * EnsurePreloaded fails unless collegedb was loaded through
 * shared_preload_libraries; 'what' names the feature that needs it.
 */
void
EnsurePreloaded(const char *what)
{
	if (!ShmemIsPreloaded())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s requires collegedb to be loaded through shared_preload_libraries", what),
				 errhint("Add collegedb to shared_preload_libraries in postgresql.conf and restart the server.")));
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

	LWLockAcquire(shared_state->lock, LW_EXCLUSIVE);
	entry = hash_search(shared_activity, key, HASH_ENTER_NULL, &found);
	if (entry && !found)
		entry_init(entry);
	LWLockRelease(shared_state->lock);
	if (entry == NULL)
		return NULL;

	local = hash_search(local_activity, key, HASH_ENTER, NULL);
	local->entry = entry;
	return entry;
}

/*
 * ShmemCountStatement counts one statement sent to 'shard' and records the
 * contact: 'error' NULL when it succeeded, else its message.  Without
 * preload it counts in this backend only; when the table is full, not at
 * all.
 */
void
ShmemCountStatement(const char *shard, const char *error)
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
 * ShmemRecordContact records that talking to 'shard' outside a statement
 * (connecting, committing) succeeded now ('error' NULL) or failed with
 * 'error', which counts as an error.
 */
void
ShmemRecordContact(const char *shard, const char *error)
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
 * ShmemShardHealth copies what is known of 'shard''s contacts and
 * counters; false when nothing was ever recorded for it.
 */
bool
ShmemShardHealth(const char *shard, ShardHealth *out)
{
	char		key[NAMEDATALEN];
	ShardActivityEntry *entry;

	memset(out, 0, sizeof(*out));
	strlcpy(key, shard, NAMEDATALEN);
	if (!ShmemIsPreloaded())
		entry = backend_activity ? hash_search(backend_activity, key, HASH_FIND, NULL) : NULL;
	else
	{
		LWLockAcquire(shared_state->lock, LW_SHARED);
		entry = hash_search(shared_activity, key, HASH_FIND, NULL);
		LWLockRelease(shared_state->lock);
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
 * ShmemActivitySnapshot copies every shard's counters into a palloc'd
 * array; *count gets its length.
 */
ShardActivity *
ShmemActivitySnapshot(int *count)
{
	HASH_SEQ_STATUS status;
	ShardActivityEntry *entry;
	ShardActivity *out;
	int			n = 0;

	EnsurePreloaded("collegedb.shard_activity()");

	LWLockAcquire(shared_state->lock, LW_SHARED);
	out = palloc0(sizeof(ShardActivity) * Max(hash_get_num_entries(shared_activity), 1));
	hash_seq_init(&status, shared_activity);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		strlcpy(out[n].shard, entry->shard, NAMEDATALEN);
		out[n].statements = pg_atomic_read_u64(&entry->statements);
		out[n].errors = pg_atomic_read_u64(&entry->errors);
		n++;
	}
	LWLockRelease(shared_state->lock);
	*count = n;
	return out;
}

/*
 * round_robin_slot returns this database's round-robin counter, claiming a
 * free one the first time.
 */
static RoundRobinSlot *
round_robin_slot(void)
{
	RoundRobinSlot *slot = NULL;

	EnsurePreloaded("the round-robin strategy");
	for (int i = 0; i < ROUND_ROBIN_SLOTS && slot == NULL; i++)
		if (shared_state->round_robin[i].database == MyDatabaseId)
			slot = &shared_state->round_robin[i];
	if (slot == NULL)
	{
		LWLockAcquire(shared_state->lock, LW_EXCLUSIVE);
		for (int i = 0; i < ROUND_ROBIN_SLOTS && slot == NULL; i++)
		{
			RoundRobinSlot *s = &shared_state->round_robin[i];

			if (s->database == MyDatabaseId || s->database == InvalidOid)
			{
				s->database = MyDatabaseId;
				slot = s;
			}
		}
		LWLockRelease(shared_state->lock);
		if (slot == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("too many databases use the round-robin strategy"),
					 errdetail("The server keeps %d round-robin counters.", ROUND_ROBIN_SLOTS)));
	}
	return slot;
}

/*
 * ShmemRoundRobinTicket returns this database's next round-robin number,
 * shared by every backend, and advances it.
 */
uint64
ShmemRoundRobinTicket(void)
{
	return pg_atomic_fetch_add_u64(&round_robin_slot()->next, 1);
}

/*
 * ShmemRoundRobinPeek returns the number the next ticket will have,
 * without taking it: what explaining a decision (route(), shard_for_key())
 * may use, since it must not change the split.
 */
uint64
ShmemRoundRobinPeek(void)
{
	return pg_atomic_read_u64(&round_robin_slot()->next);
}

/*
 * ShmemTwoPhaseBegin notes that a front transaction begins two-phase
 * commit: it may leave prepared transactions on shards.  It counts as
 * running before it counts as begun, so that a coordinator that sees it
 * begun and not running knows it ended.  A no-op without preload (there
 * is no coordinator then).
 */
void
ShmemTwoPhaseBegin(void)
{
	if (shared_state == NULL)
		return;
	pg_atomic_fetch_add_u32(&shared_state->two_phase_running, 1);
	pg_atomic_fetch_add_u64(&shared_state->two_phase_begun, 1);
}

/*
 * ShmemTwoPhaseEnd notes that such a transaction ended; 'clean' false when
 * it aborted or a participant's commit failed, so that something may be
 * left prepared for recovery.  The flag is set before the transaction
 * stops counting as running.
 */
void
ShmemTwoPhaseEnd(bool clean)
{
	if (shared_state == NULL)
		return;
	if (!clean)
		pg_atomic_write_u32(&shared_state->two_phase_unclean, 1);
	pg_atomic_fetch_sub_u32(&shared_state->two_phase_running, 1);
}

/*
 * ShmemTwoPhaseQuiet reads, in this order, how many transactions began
 * two-phase commit (*begun), whether any is still running, and whether
 * one ended uncleanly since the last call (clearing that flag): true when
 * none runs and none ended uncleanly.  A recovery pass that starts after
 * a quiet reading and finds nothing to do leaves nothing behind of the
 * first *begun transactions.
 */
bool
ShmemTwoPhaseQuiet(uint64 *begun)
{
	bool		running;
	bool		unclean;

	*begun = 0;
	if (shared_state == NULL)
		return false;
	*begun = pg_atomic_read_u64(&shared_state->two_phase_begun);
	pg_memory_barrier();
	running = pg_atomic_read_u32(&shared_state->two_phase_running) > 0;
	unclean = pg_atomic_exchange_u32(&shared_state->two_phase_unclean, 0) != 0;
	return !running && !unclean;
}
