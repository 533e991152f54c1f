/*-------------------------------------------------------------------------
 *
 * collegedb.h
 *	  Declarations every layer shares: the names of the extension's
 *	  objects, the GUC variables (guc.c) and shared memory (shmem.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_H
#define COLLEGEDB_H

#include "postgres.h"

#include "datatype/timestamp.h"

#define COLLEGEDB_SCHEMA		"collegedb"
#define COLLEGEDB_FDW_NAME		"collegedb"
/*
 * the extension version whose catalog this library reads and writes: the
 * Makefile's EXTVERSION, which also names the install script
 */
#ifndef COLLEGEDB_VERSION
#error "COLLEGEDB_VERSION is set by the Makefile (EXTVERSION)"
#endif

/* collegedb.commit_protocol */
typedef enum CdCommitProtocol
{
	CD_COMMIT_2PC,
	CD_COMMIT_SEQUENTIAL
} CdCommitProtocol;

/* guc.c: every GUC, read by every layer */
extern bool CollegeAllowMultiShardModify;
extern bool CollegeBestEffort;
extern int	CollegeCleanupTimeout;
extern int	CollegeCommitProtocol;
extern char *CollegeWorkerDatabase;
extern bool CollegeDeadlockDetection;
extern bool CollegeDebug;
extern int	CollegeFanoutConcurrency;
extern bool CollegeFanoutPartial;
extern int	CollegeFanoutTimeout;
extern int	CollegeInsertBatchBytes;
extern int	CollegeInsertBatchRows;
extern bool CollegeInsertByCopy;
extern int	CollegeInsertProgress;
extern int	CollegeMaxShards;
extern int	CollegeMoveLease;
extern int	CollegeJobMaxDeaths;
extern int	CollegeMoveMaxAttempts;
/* keys a mover moves at once (worker/move_batches.c); the bound keeps its
 * statements' parameters under every dialect's limit */
#define CD_MOVE_BATCH_KEYS_MAX 10000
extern int	CollegeMoveBatchKeys;
extern int	CollegeMoveBatchTime;
extern bool CollegeProgressNotices;
extern int	CollegeRecoveryInterval;
extern int	CollegeRemoteEstimateCache;
extern bool CollegeSemiJoinKeyLists;
extern int	CollegeSharedMappingCacheSize;
extern char *CollegeTargetRegion;
extern char *CollegeTestPauseAfterDelivery;
extern char *CollegeTestPauseCommit;
extern char *CollegeTestPauseAfterStep;
extern char *CollegeTestPauseInStep;
extern int	CollegeTopologyTimeout;
extern void GucInit(void);

/* common/shmem.c: shared memory, serving every layer */
extern void ShmemInit(void);
extern void ShmemRegister(const char *tranche, int nlocks, Size (*size) (void),
						  void (*init) (void));
extern bool ShmemIsPreloaded(void);
extern void EnsurePreloaded(const char *what);

/*
 * common/waits.c: what each backend publishes for the detection of
 * deadlocks across shards (remote/deadlock.c).  A backend publishes at
 * most CD_WAITS_MAX_SESSIONS shard sessions.
 */
#define CD_WAITS_MAX_SESSIONS 32
#define CD_WAITS_DETAIL_LEN 512

typedef struct CdWaitsSession
{
	Oid			serverid;		/* the shard's foreign server */
	int64		session;		/* the shard's id of the session */
} CdWaitsSession;

/* a copy of one backend's slot (WaitsSnapshot) */
typedef struct CdWaitsBackend
{
	int			index;			/* its slot */
	int			pid;
	uint64		xact;			/* its top-level transaction's number */
	TimestampTz xact_start;
	TimestampTz wait_start;		/* 0: not waiting for a shard */
	int			nsessions;
	CdWaitsSession sessions[CD_WAITS_MAX_SESSIONS];
} CdWaitsBackend;

extern void WaitsInit(void);
extern void WaitsSessionOpened(Oid serverid, int64 session);
extern void WaitsSessionClosed(Oid serverid, int64 session);
extern void WaitsBegin(void);
extern void WaitsEnd(bool answered, bool may_raise);
extern bool WaitsVictimPending(void);
extern bool WaitsRaisedVictim(void);
extern CdWaitsBackend *WaitsSnapshot(Oid database, int *n);
extern bool WaitsChooseVictim(int index, int pid, uint64 xact, const char *detail);

#endif							/* COLLEGEDB_H */
