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
#include "catalog/tables.h"
#include "fmgr.h"
#include "postmaster/bgworker.h"

/* launcher.c */
extern char *CollegeWorkerDatabase;
extern Size LauncherShmemSize(void);
extern void LauncherShmemInit(void);
extern void LauncherInit(void);
extern void LauncherWake(Oid database);
extern void LauncherNoticeDatabase(void);
extern bool LauncherServesDatabase(void);
extern bool LauncherCoordinatorRuns(void);
extern bool LauncherClaimSlot(int index, Oid database);
extern void LauncherNoExtension(void);
extern void LauncherWakeCoordinator(Oid database);
extern PGDLLEXPORT void collegedb_launcher_main(Datum arg);

/* coordinator.c */
extern void WorkerInit(void);
extern void WorkerDescribe(BackgroundWorker *worker, const char *function,
						   const char *type, const char *name);
extern PGDLLEXPORT void collegedb_coordinator_main(Datum arg);

/* outbox.c: topology deliveries; OutboxDeliver outside a transaction */
extern int	CollegeTopologyTimeout;
extern char *CollegeTestPauseAfterDelivery;
extern long OutboxDeliver(void);
extern void OutboxWakeAtCommit(void);

/* moves.c: must be called outside a transaction; each step commits */
extern int	CollegeMoveLease;
extern int	CollegeMoveMaxAttempts;
extern char *CollegeTestPauseAfterStep;
extern char *CollegeTestPauseInStep;
extern int64 MoveStart(int64 job_id, const char *key, const char *source,
					   const char *target, int64 *generation, bool *adopted,
					   int64 *busy);
extern void MoveWaitWhileHeld(int64 move_id);
extern int64 MoveTake(int64 move_id);
extern void MoveRun(int64 move_id, int64 generation);
extern void MoveCleanUp(int64 move_id, int64 generation);
extern void WorkerBegin(void);
extern void WorkerCommit(void);
extern uint64 WorkerExec(const char *sql, int nargs, Oid *types, Datum *values,
						 const char *nulls);
extern ErrorData *WorkerCatchError(MemoryContext context);

/*
 * WORKER_RETRY_DELAY is SQL for how long a unit of work that failed n times
 * waits before it is tried again, 'attempts' being a column that holds n
 * (read before it is incremented): min(1 s * 2^n, 300 s), jittered in
 * [d/2, d) so that retries spread out.
 */
#define WORKER_RETRY_DELAY(attempts) \
	"least(300, power(2, " attempts ")) * (0.5 + random() / 2) * interval '1 second'"

/*
 * MOVE_REDACT_KEY is SQL that writes, in an error text bound for a catalog
 * table, the quoted key as its stored form (with hash_mappings the key
 * itself is never kept); raw and stored are column expressions.
 */
#define MOVE_REDACT_KEY(msg, raw, stored) \
	"CASE WHEN " raw " IS NULL OR " raw " = " stored " THEN " msg \
	" ELSE replace(" msg ", '\"' || " raw " || '\"', '\"' || " stored " || '\"') END"

/* move_shards.c: in the shards' open remote transactions */
extern void MoveEnsureKeyFits(const CdShard *shard, const char *key);
extern void MoveLockKey(const CdShard *shard, const char *key);
extern char *MoveFindTombstone(const CdShard *shard, const char *key);
extern void MoveDropTombstones(const CdShard *shard, const char *key, bool placeholder_only);
extern void MoveWriteTombstone(const CdShard *shard, const CdTable *table,
							   const char *key, const char *moved_to, int64 move_id);
extern int64 MoveDeleteKeyRows(const CdShard *shard, const CdTable *table,
							   const char *key);
extern int64 MoveCopyKeyRows(const CdShard *source, const CdShard *target,
							 const CdTable *table, const char *key);

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
