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
extern bool CollegeDebug;
extern int	CollegeFanoutConcurrency;
extern bool CollegeFanoutPartial;
extern int	CollegeFanoutTimeout;
extern int	CollegeInsertBatchBytes;
extern int	CollegeInsertBatchRows;
extern int	CollegeInsertProgress;
extern int	CollegeMaxShards;
extern int	CollegeMoveLease;
extern int	CollegeJobMaxDeaths;
extern int	CollegeMoveMaxAttempts;
/* keys a mover moves at once (worker/move_batches.c); the bound keeps its
 * statements' parameters under every dialect's limit */
#define CD_MOVE_BATCH_KEYS_MAX 10000
extern int	CollegeMoveBatchKeys;
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

#endif							/* COLLEGEDB_H */
