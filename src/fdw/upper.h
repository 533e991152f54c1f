/*-------------------------------------------------------------------------
 *
 * upper.h
 *	  Aggregates computed on the shards: what upper.c (planning) and
 *	  upper_exec.c (execution) share.
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_UPPER_H
#define COLLEGEDB_UPPER_H

#include "catalog/shards.h"
#include "portability/instr_time.h"
#include "fdw/fdw.h"

/* the aggregates computed in parts */
typedef enum UpperAggKind
{
	UPPER_COUNT = 0,
	UPPER_SUM,
	UPPER_MIN,
	UPPER_MAX,
	UPPER_AVG,					/* two parts: the sum and the count */
	UPPER_AND,
	UPPER_OR
} UpperAggKind;

/* The indexes of an aggregate scan's fdw_private list */
enum UpperPrivate
{
	UpperPrivPushed = 0,		/* per dialect: the statement aggregating there */
	UpperPrivRows,				/* per dialect: its parts row by row, and the key */
	UpperPrivTypes,				/* the parts' types (Integer) */
	UpperPrivTypmods,			/* and typmods */
	UpperPrivGroups,			/* how many parts are grouping values */
	UpperPrivEqops,				/* their equality operators */
	UpperPrivKinds,				/* UpperAggKind per aggregate */
	UpperPrivParts,				/* each aggregate's first part */
	UpperPrivRelid,				/* the foreign table */
	UpperPrivCount
};

extern List *UpperDeparse(FdwDeparse *d, FdwRelInfo *info, List *groups, List *group_eqops,
						  List *aggs, List *kinds);
/* shard_run.c: a statement per dialect on every shard, fenced */
typedef struct FdwShardRun
{
	List	   *param_exprs;
	List	   *param_types;
	List	   *drops;			/* moving keys' rows not to read (UpperFence) */
	bool		moving;			/* moves were in flight: 'moving' texts ran */
	bool		done;
	int			nshards;
	const CdShard **shards;
	int64	   *rows;
	double	   *ms;
	instr_time	start;
} FdwShardRun;

extern void FdwShardRunInit(FdwShardRun *run, ForeignScanState *node);
extern void FdwRunShards(ForeignScanState *node, FdwShardRun *run, const CdForeignTable *table,
						 const char *const *texts, const char *const *moving,
						 CdRowSink *(*sink_for) (void *arg, int i, const CdShard *shard),
						 void *arg);
extern void FdwExplainShardRun(const FdwShardRun *run, const char *how, List *texts,
							   ExplainState *es);

extern Oid	UpperFence(List **drops);
extern bool UpperDropped(List *drops, const CdShard *shard, const CdCell *key);
extern void UpperBeginScan(ForeignScanState *node, int eflags);
extern TupleTableSlot *UpperIterate(ForeignScanState *node);
extern void UpperRescan(ForeignScanState *node);
extern void UpperEndScan(ForeignScanState *node);
extern void UpperExplain(ForeignScanState *node, ExplainState *es);

/* topn.c: ORDER BY ... LIMIT on every shard */
extern void TopnPaths(PlannerInfo *root, RelOptInfo *input_rel, RelOptInfo *output_rel,
					  uint32 fleet);
extern ForeignScan *TopnPlan(ForeignPath *best_path, List *tlist, Plan *outer_plan);
extern bool TopnIs(ForeignScan *plan);
extern void TopnBeginScan(ForeignScanState *node, int eflags);
extern TupleTableSlot *TopnIterate(ForeignScanState *node);
extern void TopnRescan(ForeignScanState *node);
extern void TopnEndScan(ForeignScanState *node);
extern void TopnExplain(ForeignScanState *node, ExplainState *es);

#endif							/* COLLEGEDB_UPPER_H */
