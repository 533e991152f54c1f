/*-------------------------------------------------------------------------
 *
 * collegedb.h
 *	  Declarations shared by collegedb's modules: the module init entry
 *	  points, GUC variables and the names of the extension's objects.
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_H
#define COLLEGEDB_H

#include "postgres.h"

#define COLLEGEDB_SCHEMA		"collegedb"
#define COLLEGEDB_FDW_NAME		"collegedb"
/* the extension version whose catalog this library reads and writes */
#define COLLEGEDB_VERSION		"0.2"

/* guc.c: every GUC, read by every layer */
extern bool CollegeAllowMultiShardModify;
extern bool CollegeBestEffort;
extern int	CollegeCleanupTimeout;
extern char *CollegeWorkerDatabase;
extern bool CollegeDebug;
extern int	CollegeFanoutConcurrency;
extern bool CollegeFanoutPartial;
extern int	CollegeFanoutTimeout;
extern int	CollegeMaxShards;
extern int	CollegeMoveLease;
extern int	CollegeMoveMaxAttempts;
extern char *CollegeTargetRegion;
extern char *CollegeTestPauseAfterStep;
extern char *CollegeTestPauseInStep;
extern void GucInit(void);

/* shmem.c */
extern void ShmemInit(void);
extern bool ShmemIsPreloaded(void);
extern void EnsurePreloaded(const char *what);
extern void ShmemCountStatement(const char *shard, bool failed);
extern uint64 ShmemRoundRobinTicket(void);
extern uint64 ShmemRoundRobinPeek(void);

/* remote/connection.c */
extern void ConnectionInit(void);

/* catalog/shards.c */
extern void ShardCatalogInit(void);

#endif							/* COLLEGEDB_H */
