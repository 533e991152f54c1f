/*-------------------------------------------------------------------------
 *
 * worker.h
 *	  Background workers: the coordinator, job runners and movers; the
 *	  journaled move of one key.
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_WORKER_H
#define COLLEGEDB_WORKER_H

#include "postgres.h"

#include "catalog/shards.h"
#include "fmgr.h"

/* coordinator.c */
extern char *CollegeWorkerDatabase;
extern char *CollegeTestPauseAfterStep;
extern void WorkerInit(void);
extern PGDLLEXPORT void collegedb_coordinator_main(Datum arg);

/* moves.c: must be called outside a transaction; each step commits */
extern int64 MoveStart(int64 job_id, const char *key, const char *source,
					   const char *target);
extern void MoveRun(int64 move_id);
extern void WorkerBegin(void);
extern void WorkerCommit(void);
extern uint64 WorkerExec(const char *sql, int nargs, Oid *types, Datum *values,
						 const char *nulls);
extern ErrorData *WorkerCatchError(MemoryContext context);

/* jobs.c */
typedef struct JobPlan
{
	int64		examined;
	int64		agreed;
	List	   *moves;			/* of JobKey * */
} JobPlan;

typedef struct JobKey
{
	char	   *key;
	const CdShard *source;
	const CdShard *target;
} JobKey;

extern JobPlan *RebalancePlan(const char *table_name);
extern void MoveEndpoints(const char *key, const char *target_name, bool force,
						  const CdShard **source, const CdShard **target);
extern const CdShard *MoveSourceOf(const char *key);
extern void JobRun(int64 job_id);
extern int64 JobLaunchAndWait(char kind, const char *table_name, const char *key,
							  const char *target, bool force, int concurrency);
extern PGDLLEXPORT void collegedb_job_main(Datum arg);
extern PGDLLEXPORT void collegedb_mover_main(Datum arg);

#endif							/* COLLEGEDB_WORKER_H */
