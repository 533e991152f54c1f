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
extern int	CollegeMoveMaxAttempts;
extern bool CollegeProgressNotices;
extern int	CollegeRecoveryInterval;
extern int	CollegeSharedMappingCacheSize;
extern char *CollegeTargetRegion;
extern char *CollegeTestPauseAfterDelivery;
extern char *CollegeTestPauseCommit;
extern char *CollegeTestPauseAfterStep;
extern char *CollegeTestPauseInStep;
extern int	CollegeTopologyTimeout;
extern void GucInit(void);

/* shmem.c: shared memory, serving every layer */
typedef struct ShardActivity
{
	char		shard[NAMEDATALEN];
	uint64		statements;
	uint64		errors;
} ShardActivity;

/* what ShmemShardHealth tells of one shard */
#define CD_HEALTH_ERROR_LEN 256

typedef struct ShardHealth
{
	bool		shared;			/* every backend's (preloaded), or this one's */
	uint64		statements;
	uint64		errors;
	int64		last_ok;		/* TimestampTz; 0: never */
	int64		last_error_at;	/* TimestampTz; 0: never */
	char		last_error[CD_HEALTH_ERROR_LEN];
} ShardHealth;

extern void ShmemInit(void);
extern void ShmemRegister(const char *tranche, int nlocks, Size (*size) (void),
						  void (*init) (void));
extern bool ShmemIsPreloaded(void);
extern void EnsurePreloaded(const char *what);
extern void ShmemCountStatement(const char *shard, const char *error);
extern void ShmemRecordContact(const char *shard, const char *error);
extern bool ShmemShardHealth(const char *shard, ShardHealth *out);
extern ShardActivity *ShmemActivitySnapshot(int *count);
extern void ShmemTwoPhaseBegin(void);
extern void ShmemTwoPhaseEnd(bool clean);
extern bool ShmemTwoPhaseQuiet(uint64 *begun);
extern uint64 ShmemRoundRobinTicket(void);
extern uint64 ShmemRoundRobinPeek(void);

#endif							/* COLLEGEDB_H */
