/*-------------------------------------------------------------------------
 *
 * jobs.h
 *	  Jobs: a single move (reassign_shard) or a rebalance of a table, run
 *	  by background workers (worker/jobs.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_WORKER_JOBS_H
#define COLLEGEDB_WORKER_JOBS_H

#include "postgres.h"

#include "fmgr.h"
#include "nodes/pg_list.h"

#include "catalog/shards.h"

typedef struct JobPlan
{
	int64		examined;
	int64		agreed;
	int64		moves;
} JobPlan;

extern void RebalanceCheck(const char *table_name);
extern JobPlan *RebalancePlan(const char *table_name, int64 job_id);
extern void MoveEndpoints(const char *key, const char *target_name, bool force,
						  const CdShard **source, const CdShard **target);
extern void JobRun(int64 job_id);
extern int64 JobLaunchAndWait(char kind, const char *table_name, const char *key,
							  const char *target, bool force, int concurrency, int32 slot);
extern PGDLLEXPORT void collegedb_job_main(Datum arg);

#endif							/* COLLEGEDB_WORKER_JOBS_H */
