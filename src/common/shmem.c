/*-------------------------------------------------------------------------
 *
 * shmem.c
 *	  collegedb's shared memory: the check that collegedb was preloaded, and
 *	  the one pair of hooks through which every subsystem gets its part.
 *
 * A subsystem that shares state between backends (the shards' activity and
 * two-phase commit's counters in remote/activity.c, the round-robin
 * counters in router/allocate.c, the shared mapping cache, the launcher's
 * table of coordinators) registers its own Size/Init pair, and its own
 * LWLock tranche if it needs one, with ShmemRegister while collegedb is
 * being preloaded; the hooks below request and initialise every part.
 * This file owns no part itself: it serves every layer and calls none.
 *
 * Shared memory exists only when collegedb is in shared_preload_libraries.
 * Everything that needs it calls EnsurePreloaded() first, which fails with
 * a hint naming the setting.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "collegedb.h"

/* a subsystem's part of shared memory (ShmemRegister) */
typedef struct ShmemPart
{
	const char *tranche;		/* its LWLock tranche, or NULL */
	int			nlocks;			/* how many locks the tranche has */
	Size		(*size) (void);
	void		(*init) (void);
} ShmemPart;

#define MAX_SHMEM_PARTS 8

static ShmemPart parts[MAX_SHMEM_PARTS];
static int	nparts = 0;

static bool preloaded = false;	/* the hooks are installed */
static bool attached = false;	/* the parts exist (inherited by children) */

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void collegedb_shmem_request(void);
static void collegedb_shmem_startup(void);

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
 * 'nlocks' locks it gets.  Only while preloading, before the hooks run;
 * outside of it, a no-op (the subsystem then finds ShmemIsPreloaded false).
 */
void
ShmemRegister(const char *tranche, int nlocks, Size (*size) (void), void (*init) (void))
{
	if (!process_shared_preload_libraries_in_progress)
		return;
	if (nparts >= MAX_SHMEM_PARTS)
		elog(ERROR, "too many collegedb shared memory parts");
	parts[nparts].tranche = tranche;
	parts[nparts].nlocks = nlocks;
	parts[nparts].size = size;
	parts[nparts].init = init;
	nparts++;
}

static void
collegedb_shmem_request(void)
{
	Size		size = 0;

	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	for (int i = 0; i < nparts; i++)
	{
		size = add_size(size, parts[i].size());
		if (parts[i].tranche)
			RequestNamedLWLockTranche(parts[i].tranche, parts[i].nlocks);
	}
	RequestAddinShmemSpace(size);
}

/*
 * collegedb_shmem_startup creates or attaches to every part.
 */
static void
collegedb_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	for (int i = 0; i < nparts; i++)
		parts[i].init();
	LWLockRelease(AddinShmemInitLock);
	attached = true;
}

/*
 * ShmemIsPreloaded says whether this backend has collegedb's shared memory.
 */
bool
ShmemIsPreloaded(void)
{
	return preloaded && attached;
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
