/*-------------------------------------------------------------------------
 *
 * journal.h
 *	  The journal of moves and jobs (collegedb.move, collegedb.job,
 *	  collegedb.job_key): every read and write of collegedb's C code
 *	  (catalog/journal.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_CATALOG_JOURNAL_H
#define COLLEGEDB_CATALOG_JOURNAL_H

#include "postgres.h"

#include "nodes/pg_list.h"
#include "utils/jsonb.h"

#include "catalog/catalog.h"
#include "catalog/shards.h"

/* a move's row, as the attempt that holds it reads it */
typedef struct CdMoveRow
{
	int64		id;
	int64		generation;
	int64		job_id;			/* 0: none */
	char	   *key;			/* the stored form */
	char	   *raw_key;		/* the key itself */
	const CdShard *source;		/* NULL once the move ended */
	const CdShard *target;
	char	   *step;
	bool		abandoned;
} CdMoveRow;

/* an unfinished move, as the coordinator sees it */
typedef struct CdUnfinishedMove
{
	int64		id;
	Oid			owner;			/* the role of its job */
	int64		generation;
	int			pid;			/* its holder, 0: none */
	bool		alive;			/* the holder still runs */
	bool		expired;		/* past its lease */
	bool		due;			/* its retry is due */
} CdUnfinishedMove;

/* what a job is to do */
typedef struct CdJobRow
{
	char	   *kind;			/* "move", "rebalance" or "move_slot" */
	char	   *table_name;
	char	   *key;			/* the key itself */
	char	   *target;
	bool		force;
	int			concurrency;
	int32		slot;			/* move_slot: the slot; else -1 */
} CdJobRow;

/* a key of a job */
typedef struct CdJobKeyRow
{
	char	   *stored;
	char	   *key;
	const char *source;
	const char *target;
} CdJobKeyRow;

/* moves */
extern bool JournalLoadMove(int64 move_id, int64 generation, CdMoveRow *m);
extern void JournalSetStep(const CdMoveRow *m, const char *step, const char *rows);
extern void JournalEndMove(const CdMoveRow *m, bool failed, const char *error, const char *rows);
extern int64 JournalTakeMove(int64 move_id);
extern int64 JournalStartMove(int64 job_id, const char *stored, const char *key,
							  const char *source, const char *target, int64 *generation,
							  bool *adopted, int64 *busy);
extern char *JournalMoveError(int64 move_id);
extern void JournalRecordFailure(int64 move_id, int64 generation, const char *message);
extern void JournalRetryLater(int64 move_id, int64 generation, const char *error);
extern void JournalReleaseMove(int64 move_id, int64 generation);
extern bool JournalMoveHeld(int64 move_id);
extern void JournalStartMoves(int64 job_id, int n, char *const *stored, char *const *keys,
							  const char *source, const char *target, int64 *ids);
extern void JournalLockMoves(int n, const int64 *ids, const int64 *generations,
							 const char *step, bool *held);
extern void JournalSetSteps(int n, const int64 *ids, const int64 *generations,
							const char *step);
extern void JournalEndMoves(int64 job_id, int n, const int64 *ids, const int64 *generations,
							char *const *stored);
extern bool JournalMoveAbandoned(int64 move_id);
extern bool JournalLiveMove(const char *stored, int64 *move_id, int *pid);
extern List *JournalUnfinishedMoves(void);
extern bool JournalAnyMoveBeforeSource(void);
extern char *JournalMovingSource(const char *stored);
extern char *JournalMoveResult(int64 move_id);
extern bool JournalLastMoveOfJob(int64 job_id, int64 *move_id, char **step, int *attempts,
								 bool *abandoned);

/* jobs */
extern int64 JournalInsertJob(const char *kind, const char *table_name, const char *stored,
							  const char *key, const char *target, bool force, int concurrency,
							  Oid owner, bool running);
extern bool JournalStartJob(int64 job_id, CdJobRow *job);
extern void JournalFinishJob(int64 job_id, const char *state, const char *result,
							 const char *error);
extern void JournalSetJobResult(int64 job_id, const char *result);
extern void JournalSetJobSlot(int64 job_id, int32 slot);
extern int64 JournalJobKeysLeft(int64 job_id, char **error);
extern void JournalRequeueOrphanJobs(void);
extern bool JournalRestoring(void);
extern void JournalRequeueJob(int64 job_id);
extern bool JournalNextQueuedJob(int64 *job_id, Oid *owner);
extern bool JournalJobGoesOn(int64 job_id);
extern bool JournalJobOutcome(int64 job_id, char **state, Jsonb **result, char **error);
extern bool JournalJobView(int64 job_id, CdCatalogRows *rows);
extern char *JournalJobState(int64 job_id);
extern bool JournalJobProgress(int64 job_id, int64 *done, int64 *planned, double *rate,
							   double *left);
extern void JournalRebalanceResult(int64 job_id, CdCatalogRows *rows);

/* the keys of jobs */
extern void JournalForgetPendingJobKeys(int64 job_id);
extern void JournalAddJobKeys(int64 job_id, List *keys);
extern int64 JournalCountJobKeys(int64 job_id);
extern void JournalAnalyzeJobKeys(void);
extern int	JournalClaimJobKeys(int64 job_id, int max, const char *after, CdJobKeyRow *keys,
								char **last);
extern void JournalUnclaimJobKey(int64 job_id, const char *stored);
extern void JournalSettleJobKey(int64 job_id, const char *stored, bool moved,
								const char *error, int64 move_id);

#endif							/* COLLEGEDB_CATALOG_JOURNAL_H */
