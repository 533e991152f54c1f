/*-------------------------------------------------------------------------
 *
 * guc.c
 *	  Every collegedb.* GUC, defined in one place, in alphabetical order.
 *
 * Persistent settings live in a catalog row (collegedb.configure); GUCs are
 * per-session overrides and server-level sizing.  Secrets are never GUCs.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "miscadmin.h"
#include "utils/guc.h"

#include "cd_errcodes.h"
#include "collegedb.h"
#include "placement/regions.h"

bool		CollegeAllowMultiShardModify = false;
bool		CollegeBestEffort = false;
int			CollegeCleanupTimeout = 30000;
int			CollegeCommitProtocol = CD_COMMIT_2PC;
char	   *CollegeWorkerDatabase = NULL;
bool		CollegeDeadlockDetection = true;
bool		CollegeDebug = false;
int			CollegeFanoutConcurrency = 8;
bool		CollegeFanoutPartial = false;
int			CollegeFanoutTimeout = 10000;
int			CollegeInsertBatchBytes = 1024 * 1024;
int			CollegeInsertBatchRows = 5000;
bool		CollegeInsertByCopy = true;
int			CollegeInsertProgress = 0;
int			CollegeMaxShards = 256;
int			CollegeMoveLease = 30;
int			CollegeJobMaxDeaths = 3;
int			CollegeMoveMaxAttempts = 8;
int			CollegeMoveBatchKeys = 1000;
int			CollegeMoveBatchTime = 100;
bool		CollegeProgressNotices = true;
int			CollegeRecoveryInterval = 10000;
int			CollegeRemoteEstimateCache = 10000;
bool		CollegeSemiJoinKeyLists = true;
int			CollegeSharedMappingCacheSize = 65536;
char	   *CollegeTargetRegion = NULL;
char	   *CollegeTestPauseAfterDelivery = NULL;
char	   *CollegeTestPauseCommit = NULL;
char	   *CollegeTestPauseAfterStep = NULL;
char	   *CollegeTestPauseInStep = NULL;
int			CollegeTopologyTimeout = 10000;

static const struct config_enum_entry commit_protocol_options[] = {
	{"2pc", CD_COMMIT_2PC, false},
	{"sequential", CD_COMMIT_SEQUENTIAL, false},
	{NULL, 0, false}
};

/*
 * check_target_region accepts an empty value or one of the region codes;
 * anything else is INVALID_REGION_HINT.
 */
static bool
check_target_region(char **newval, void **extra, GucSource source)
{
	if (*newval == NULL || (*newval)[0] == '\0' || RegionIndex(*newval) >= 0)
		return true;
	GUC_check_errcode(ERRCODE_CD_INVALID_REGION_HINT);
	GUC_check_errmsg("invalid region \"%s\"", *newval);
	GUC_check_errhint("Valid regions are: wnam, enam, sam, weur, eeur, apac, apac-ne, apac-se, oc, afr, me.");
	return false;
}

/*
 * GucInit defines the GUCs and reserves the collegedb. prefix.
 */
void
GucInit(void)
{
	DefineCustomBoolVariable("collegedb.allow_multi_shard_modify",
							 "Lets UPDATE and DELETE on a sharded foreign table without key equality reach every shard.",
							 NULL,
							 &CollegeAllowMultiShardModify,
							 false,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("collegedb.best_effort",
							 "Makes a read whose tombstone trail cannot be followed return no rows instead of failing.",
							 NULL,
							 &CollegeBestEffort,
							 false,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("collegedb.cleanup_timeout",
							"Sets how long abort-time cleanup waits for a shard.",
							"A shard that does not answer the ROLLBACK (or the cancel request) of an aborting transaction within this time has its connection closed.",
							&CollegeCleanupTimeout,
							30000, 1, INT_MAX,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomEnumVariable("collegedb.commit_protocol",
							 "Sets how a transaction that wrote on several shards commits.",
							 "2pc: two-phase commit (prepare every shard, record the decision in the front, then commit them; at most one SQLite shard, as the last participant). sequential: each shard commits in turn, so a failure midway leaves some committed.",
							 &CollegeCommitProtocol,
							 CD_COMMIT_2PC,
							 commit_protocol_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomStringVariable("collegedb.database",
							   "Restricts the coordinator workers to one database.",
							   "Empty (the default): every database that has the extension gets a coordinator, which recovers interrupted moves and runs scheduled jobs there.",
							   &CollegeWorkerDatabase,
							   "",
							   PGC_SIGHUP,
							   0,
							   NULL, NULL, NULL);

	DefineCustomBoolVariable("collegedb.deadlock_detection",
							 "Detects deadlocks across shards and cancels one of their transactions.",
							 "When a backend has waited for a shard longer than deadlock_timeout, the coordinator builds the wait-for graph from every shard's lock waits and cancels the youngest waiting transaction of a cycle with SQLSTATE 40P01.",
							 &CollegeDeadlockDetection,
							 true,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("collegedb.debug",
							 "Reports collegedb's routing decisions as LOG messages.",
							 NULL,
							 &CollegeDebug,
							 false,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("collegedb.fanout_concurrency",
							"Sets how many shards a fan-out queries at once.",
							NULL,
							&CollegeFanoutConcurrency,
							8, 1, 1024,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("collegedb.fanout_partial",
							 "Lets a scan of every shard go on without the shards that fail, with a WARNING naming them.",
							 NULL,
							 &CollegeFanoutPartial,
							 false,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("collegedb.fanout_timeout",
							"Sets how long a fan-out waits for each shard.",
							"A shard slower than this is cancelled and reported as a timeout; 0 waits without limit.",
							&CollegeFanoutTimeout,
							10000, 0, INT_MAX,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("collegedb.insert_batch_bytes",
							"Sets how many bytes of rows an INSERT or COPY into a sharded foreign table buffers per shard before it sends them.",
							NULL,
							&CollegeInsertBatchBytes,
							1024 * 1024, 1024, 64 * 1024 * 1024,
							PGC_USERSET,
							GUC_UNIT_BYTE,
							NULL, NULL, NULL);

	DefineCustomIntVariable("collegedb.insert_batch_rows",
							"Sets how many rows an INSERT or COPY into a sharded foreign table buffers per shard before it sends them.",
							"1 sends every row by itself.  Rows go one by one anyway with RETURNING, ON CONFLICT, row triggers after the insert, and for a key with several candidate shards.",
							&CollegeInsertBatchRows,
							5000, 1, 100000,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("collegedb.insert_by_copy",
							 "Sends the batched rows of an INSERT or COPY into a sharded foreign table to PostgreSQL shards by COPY.",
							 "Off: as multi-row INSERTs, which apply the shard table's rules (COPY does not).",
							 &CollegeInsertByCopy,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("collegedb.insert_progress",
							"Sets how often an INSERT or COPY into a sharded foreign table reports, as a NOTICE, how many rows it has sent.",
							"0 reports nothing.  COPY shows in pg_stat_progress_copy anyway.",
							&CollegeInsertProgress,
							0, 0, INT_MAX,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("collegedb.job_max_deaths",
							"Sets how many times a job's worker may die before the job stays failed.",
							"A worker killed or crashed while it ran the job is a death; collegedb.retry_job() runs a failed job again.",
							&CollegeJobMaxDeaths,
							3, 1, 1000,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	/* a server-start setting can only be defined while preloading */
	if (process_shared_preload_libraries_in_progress)
		DefineCustomIntVariable("collegedb.max_shards",
								"Sets how many shards the shared activity counters can track.",
								"Needs collegedb in shared_preload_libraries; takes effect at server start.",
								&CollegeMaxShards,
								256, 1, 65536,
								PGC_POSTMASTER,
								0,
								NULL, NULL, NULL);

	DefineCustomIntVariable("collegedb.move_lease",
							"Sets how long a move's lease lasts between two of its steps.",
							"Only shown in collegedb.moves and logged when a live mover is past it: a move changes hands only when its worker is gone.",
							&CollegeMoveLease,
							30, 1, 86400,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("collegedb.move_max_attempts",
							"Sets how many times a failing move is tried before it stays failed.",
							"Retries wait 1 s, 2 s, 4 s, ... (at most 5 minutes); a move past source_done is retried until it finishes.",
							&CollegeMoveMaxAttempts,
							8, 1, 1000,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("collegedb.move_batch_keys",
							"Sets how many keys with the same source and target a mover of a job moves at once.",
							"Each batch goes through the journaled move protocol together: one copy, tombstone write, delete and mapping update per table; 1 moves keys one by one.",
							&CollegeMoveBatchKeys,
							1000, 1, CD_MOVE_BATCH_KEYS_MAX,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("collegedb.move_batch_time",
							"Sets how long a batch of moves may hold its keys' writers on the source.",
							"A mover sizes its next batch (up to collegedb.move_batch_keys keys) so that its source step, during which writers of its keys wait, takes about this long; 0 sizes batches by collegedb.move_batch_keys alone.",
							&CollegeMoveBatchTime,
							100, 0, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("collegedb.progress_notices",
							 "Makes wait_for_job and the synchronous rebalance and move_slot report a running job's progress as a NOTICE about once a second.",
							 NULL,
							 &CollegeProgressNotices,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("collegedb.recovery_interval",
							"Sets how often the coordinator resolves prepared transactions left on the shards.",
							"The coordinator also does it when it starts, and skips it while no transaction used two-phase commit since a pass that found nothing; collegedb.recover_prepared_transactions() does it on demand.",
							&CollegeRecoveryInterval,
							10000, 100, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("collegedb.remote_estimate_cache",
							"Sets how long the shards' own row estimates of a table never ANALYZEd are kept.",
							"The planner asks each shard of such a table for its statistics; 0 asks at every planning.",
							&CollegeRemoteEstimateCache,
							10000, 0, INT_MAX,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("collegedb.semi_join_key_lists",
							 "Reads a sharded table's rows for \"key IN (SELECT ...)\" by the list of keys, one statement per shard.",
							 "The subquery is evaluated first, once; off plans the condition as a semi join (a keyed read per key, or a scan of every shard).",
							 &CollegeSemiJoinKeyLists,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	if (process_shared_preload_libraries_in_progress)
		DefineCustomIntVariable("collegedb.shared_mapping_cache_size",
								"Sets how many key mappings the mapping cache shared by every backend holds.",
								"Needs collegedb in shared_preload_libraries; takes effect at server start. About 145 bytes of shared memory per entry; 0 turns the shared cache off.",
								&CollegeSharedMappingCacheSize,
								65536, 0, 16777216,
								PGC_POSTMASTER,
								0,
								NULL, NULL, NULL);

	DefineCustomStringVariable("collegedb.target_region",
							   "Overrides the target_region setting of the location strategy in this session.",
							   "Empty means the setting applies.",
							   &CollegeTargetRegion,
							   "",
							   PGC_USERSET,
							   0,
							   check_target_region, NULL, NULL);

	DefineCustomStringVariable("collegedb.test_pause_after_delivery",
							   "For tests only: stops the coordinator between the shards' commits of a delivery of this topology group and the outbox's, until it is killed or the setting changes.",
							   NULL,
							   &CollegeTestPauseAfterDelivery,
							   "",
							   PGC_SIGHUP,
							   GUC_NOT_IN_SAMPLE | GUC_NO_SHOW_ALL | GUC_SUPERUSER_ONLY,
							   NULL, NULL, NULL);

	DefineCustomStringVariable("collegedb.test_pause_after_step",
							   "For tests only: stops movers after this journal step.",
							   NULL,
							   &CollegeTestPauseAfterStep,
							   "",
							   PGC_SIGHUP,
							   GUC_NOT_IN_SAMPLE | GUC_NO_SHOW_ALL | GUC_SUPERUSER_ONLY,
							   NULL, NULL, NULL);

	DefineCustomStringVariable("collegedb.test_pause_commit",
							   "For tests only: stops a backend committing a multi-shard transaction at this step until it is killed or the file collegedb_resume_commit appears in the data directory.",
							   "'prepared': every preparable shard is prepared; 'last_committed': the last participant committed; 'decided': the front committed its decision; 'between_commits': one prepared shard committed (under commit_protocol 'sequential': one writer committed).",
							   &CollegeTestPauseCommit,
							   "",
							   PGC_SUSET,
							   GUC_NOT_IN_SAMPLE | GUC_NO_SHOW_ALL | GUC_SUPERUSER_ONLY,
							   NULL, NULL, NULL);

	DefineCustomStringVariable("collegedb.test_pause_in_step",
							   "For tests only: stops movers inside the source step ('source_lock': once the key is locked; 'source': once the target committed its copy) until they are killed.",
							   NULL,
							   &CollegeTestPauseInStep,
							   "",
							   PGC_SIGHUP,
							   GUC_NOT_IN_SAMPLE | GUC_NO_SHOW_ALL | GUC_SUPERUSER_ONLY,
							   NULL, NULL, NULL);

	DefineCustomIntVariable("collegedb.topology_timeout",
							"Sets how long one delivery of a topology group to a member may take.",
							"A member slower than this is cancelled and tried again later; the other members do not wait for it.",
							&CollegeTopologyTimeout,
							10000, 1, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	MarkGUCPrefixReserved("collegedb");
}
