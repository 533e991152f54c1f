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

/* guc.c */
extern bool CollegeAllowMultiShardModify;
extern bool CollegeBestEffort;
extern int	CollegeCleanupTimeout;
extern bool CollegeFanoutPartial;
extern bool CollegeDebug;
extern int	CollegeMaxShards;
extern char *CollegeTargetRegion;
extern int	CollegeFanoutConcurrency;
extern int	CollegeFanoutTimeout;
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
