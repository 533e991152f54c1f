/*-------------------------------------------------------------------------
 *
 * fdw.h
 *	  Sharded foreign tables: what the planner and the executor share.
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_FDW_H
#define COLLEGEDB_FDW_H

#include "postgres.h"

#include "commands/explain.h"
#include "foreign/fdwapi.h"
#include "lib/stringinfo.h"
#include "nodes/pathnodes.h"

#include "adapters/adapter.h"
#include "remote/remote.h"

/*
 * A collegedb foreign table: on the router server "collegedb" a sharded
 * table routed by its key column; on a shard's own server a plain table of
 * that one shard.
 */
typedef struct CdForeignTable
{
	Oid			relid;
	char	   *name;			/* remote table name */
	char	   *schema;			/* remote schema, or NULL */
	char	   *shard;			/* a shard's own server: its name; else NULL */
	AttrNumber	key_attno;		/* 0 on a shard's own table without key_column */
	int			natts;
	char	  **columns;		/* remote name per attribute; NULL if dropped */
	bool		remote_estimate;	/* option use_remote_estimate (estimate.c) */
} CdForeignTable;

/* table.c */
extern CdForeignTable *FdwTableInfo(Oid relid);
extern List *FdwTableShards(const CdForeignTable *table);

/* what planning learns about a base relation (baserel->fdw_private) */
typedef struct FdwRelInfo
{
	CdForeignTable *table;
	List	   *remote_conds;	/* RestrictInfos that go to the shards */
	List	   *local_conds;	/* RestrictInfos evaluated in the front */
	Expr	   *key_expr;		/* the key's value(s), or NULL */
	bool		key_is_array;
} FdwRelInfo;

/* deparse.c: a statement's text, built for every dialect at once */
typedef struct FdwDeparse
{
	StringInfoData sql[CD_MAX_DIALECTS];
	Index		relid;
	CdForeignTable *table;
	List	  **params;			/* fdw_exprs */
	int			key_start[CD_MAX_DIALECTS]; /* where "col" = $k of the key begins */
	int			key_end[CD_MAX_DIALECTS];	/* and ends, in each text */
	int			nconds[CD_MAX_DIALECTS];	/* WHERE conditions written */
	bool		failed[CD_MAX_DIALECTS];	/* cannot say it all: no text */
	List	   *list_owners;	/* IN lists written out (shippable.c) */
	List	   *list_elements;	/* and their elements, as Consts */
} FdwDeparse;

extern void DeparseInit(FdwDeparse *d, CdForeignTable *table, Index relid, List **params);
extern void DeparseAppend(FdwDeparse *d, const char *text);
extern void DeparseColumn(FdwDeparse *d, AttrNumber attno);
extern bool DeparseExpr(Node *node, FdwDeparse *d, bool assignment);
extern uint32 DeparseDialects(Node *node, CdForeignTable *table, Index relid);
extern uint32 DeparseAllDialects(void);
extern int	DeparseWhere(FdwDeparse *d, List *remote_conds, Expr *key_expr, bool required);
extern void DeparseSelect(FdwDeparse *d, Bitmapset *used, bool row_identity);
extern void DeparseRowLock(FdwDeparse *d);
extern void DeparseModify(FdwDeparse *d, CmdType op);
extern void DeparseLimit(FdwDeparse *d, int64 limit);
extern void DeparseReturning(FdwDeparse *d);
extern List *DeparseTexts(FdwDeparse *d);
extern void DeparseTextsOf(List *texts, const char **sql);
extern List *DeparseKeySplit(FdwDeparse *d);
extern void DeparseRowsInto(const CdForeignTable *table, int ncols, const AttrNumber *attnums,
							const char **sql);
extern void DeparseInsert(const CdForeignTable *table, int ncols, const AttrNumber *attnums,
						  bool do_nothing, const char **sql);
extern char *FdwQualifiedName(const CdForeignTable *table, const CdAdapter *adapter);
extern char *FdwColumnList(const CdForeignTable *table, const CdAdapter *adapter,
						   Bitmapset *used);

/* shippable.c: what each dialect computes as PostgreSQL does */
extern CdTypeFamily ShippableFamily(Oid type);
extern int	ShippableParam(FdwDeparse *d, Expr *expr);
extern bool ShippableDeparse(Node *node, FdwDeparse *d, CdDialect dialect, bool assignment,
							 StringInfo out);
extern uint32 FdwFleetDialects(const CdForeignTable *table);
extern void FdwEnsureSendable(const char *const *sql, const CdForeignTable *table);
extern const char *FdwExplainText(const char *sql);

/* The indexes of a scan's fdw_private list */
enum FdwScanPrivate
{
	FdwPrivSql = 0,				/* List of the statement's text per dialect */
	FdwPrivKeyParam,			/* 1-based param of the key, 0: none */
	FdwPrivKeyArray,			/* the key param is an array of keys */
	FdwPrivReturning,			/* direct modify: rows come back */
	FdwPrivSetProcessed,		/* direct modify: counts for the command */
	FdwPrivKeySplit,			/* key array: where " = $k" is, per dialect */
	FdwPrivForModify,			/* fetches rows to update or delete one by one */
	FdwPrivCount
};

/* fdw_plan.c */
extern void collegedb_get_rel_size(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid);
extern void collegedb_get_paths(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid);
extern ForeignScan *collegedb_get_plan(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid,
									   ForeignPath *best_path, List *tlist, List *scan_clauses,
									   Plan *outer_plan);
extern bool collegedb_plan_direct_modify(PlannerInfo *root, ModifyTable *plan,
										 Index resultRelation, int subplan_index);
extern List *collegedb_plan_modify(PlannerInfo *root, ModifyTable *plan,
								   Index resultRelation, int subplan_index);

/*
 * What a scan, direct modification or insert measured: its statements per
 * shard, and for fan-outs how long they took and how long the slowest
 * shard kept the others waiting, summed over every run.
 */
typedef struct FdwObserved
{
	CdRemoteObserver *observer; /* NULL: not instrumented */
	int64		fanouts;
	int			fanout_shards;	/* of the last one */
	double		fanout_ms;
	double		alone_ms;		/* the slowest shard alone, after the others */
	char		slowest[NAMEDATALEN];	/* of the last fan-out */
} FdwObserved;

/* upper.c: aggregates computed on the shards, combined on the front */
extern void collegedb_get_upper_paths(PlannerInfo *root, UpperRelationKind stage,
									  RelOptInfo *input_rel, RelOptInfo *output_rel,
									  void *extra);
extern ForeignScan *collegedb_get_any_plan(PlannerInfo *root, RelOptInfo *rel, Oid foreigntableid,
										   ForeignPath *best_path, List *tlist,
										   List *scan_clauses, Plan *outer_plan);
extern void collegedb_begin_any_scan(ForeignScanState *node, int eflags);
extern TupleTableSlot *collegedb_iterate_any(ForeignScanState *node);
extern void collegedb_rescan_any(ForeignScanState *node);
extern void collegedb_end_any_scan(ForeignScanState *node);
extern void collegedb_explain_any_scan(ForeignScanState *node, ExplainState *es);

/* shard_run.c: what a failed shard does to a scan */
struct CdFanoutShard;
extern int64 FdwFanoutResult(const struct CdFanoutShard *shards, int n, bool is_write);

/* explain.c */
extern void FdwObservedInit(FdwObserved *o, EState *estate);
extern CdRowSink *FdwObservedSink(FdwObserved *o, CdRowSink *inner, const CdShard *shard);
extern void FdwObservedFanout(FdwObserved *o, const struct CdFanoutShard *shards, int n,
							  instr_time start);
extern void FdwExplainObserved(FdwObserved *o, ExplainState *es);
extern void FdwExplainTargets(ForeignScan *plan, CdForeignTable *table, ExplainState *es);

/* fdw_exec.c */
extern void FdwRowIdentity(const char *text, ItemPointer tid);
extern void FdwRowIdentityParams(ItemPointer tid, CdParam *as_tid, CdParam *as_int);
extern void collegedb_begin_scan(ForeignScanState *node, int eflags);
extern TupleTableSlot *collegedb_iterate(ForeignScanState *node);
extern void collegedb_rescan(ForeignScanState *node);
extern void collegedb_end_scan(ForeignScanState *node);
extern void collegedb_begin_direct_modify(ForeignScanState *node, int eflags);
extern TupleTableSlot *collegedb_iterate_direct_modify(ForeignScanState *node);
extern void collegedb_end_direct_modify(ForeignScanState *node);
extern void collegedb_explain_scan(ForeignScanState *node, ExplainState *es);
/*
 * What a modification's ri_FdwState is: every state of insert.c and
 * row_modify.c starts with its kind.
 */
typedef enum FdwModifyKind
{
	FDW_MODIFY_INSERT = 1,
	FDW_MODIFY_ROWS
} FdwModifyKind;

/* row_modify.c */
extern void collegedb_add_update_targets(PlannerInfo *root, Index rtindex,
										 RangeTblEntry *target_rte, Relation target_relation);
extern void FdwEnsureKeyUnchanged(const CdForeignTable *table, AttrNumber attno);
extern List *RowModifyPlan(PlannerInfo *root, ModifyTable *plan, Index resultRelation);
extern void RowModifyBegin(ModifyTableState *mtstate, ResultRelInfo *rinfo, List *fdw_private);
extern TupleTableSlot *collegedb_exec_row_modify(EState *estate, ResultRelInfo *rinfo,
												 TupleTableSlot *slot, TupleTableSlot *planSlot);
extern void RowModifyExplain(ResultRelInfo *rinfo, List *fdw_private, ExplainState *es);

/* insert.c */
extern void collegedb_begin_modify(ModifyTableState *mtstate, ResultRelInfo *rinfo,
								   List *fdw_private, int subplan_index, int eflags);
extern void collegedb_begin_foreign_insert(ModifyTableState *mtstate, ResultRelInfo *rinfo);
extern TupleTableSlot *collegedb_exec_insert(EState *estate, ResultRelInfo *rinfo,
											 TupleTableSlot *slot, TupleTableSlot *planSlot);
extern int	collegedb_batch_size(ResultRelInfo *rinfo);
extern TupleTableSlot **collegedb_exec_batch_insert(EState *estate, ResultRelInfo *rinfo,
													TupleTableSlot **slots,
													TupleTableSlot **planSlots, int *numSlots);
extern void collegedb_end_modify(EState *estate, ResultRelInfo *rinfo);
extern void collegedb_end_foreign_insert(EState *estate, ResultRelInfo *rinfo);

/* truncate.c */
extern void collegedb_exec_truncate(List *rels, DropBehavior behavior, bool restart_seqs);

/* join_paths.c */
extern void FdwAddKeyedJoinPaths(PlannerInfo *root, RelOptInfo *rel, FdwRelInfo *info);
extern Expr *FdwKeyedJoinValue(ForeignPath *path);

/* estimate.c */
extern bool FdwRemoteRows(const CdForeignTable *table, double *rows);
extern void FdwForgetRemoteRows(Oid relid);

/* semijoin.c */
extern void FdwSemiJoinInit(void);

/* import.c */
extern List *collegedb_import_schema(ImportForeignSchemaStmt *stmt, Oid serverOid);

/* analyze.c */
extern bool collegedb_analyze(Relation rel, AcquireSampleRowsFunc *func, BlockNumber *totalpages);
extern void collegedb_explain_modify(ModifyTableState *mtstate, ResultRelInfo *rinfo,
									 List *fdw_private, int subplan_index, ExplainState *es);

/* modify_keys.c */
extern int64 FdwWriteKeys(const char *const *sql, List *split, int nparams, CdParam *params,
						  char **keys, Datum *values, int nkeys, Oid type, CdRowSink *sink);

/* fdw_keys.c */
extern char *FdwKeyText(Datum value, Oid type);
extern char **FdwDistinctKeys(Datum *keys, bool *keynulls, int nkeys, Oid type);
extern bool FdwKeysGroupable(int nparams, int key_param, List *split);
extern char *FdwGroupedKeyText(const char *sql, List *split, int dialect, int first, int n);
extern int64 FdwReadKeys(const char *const *sql, List *split, int nparams, CdParam *params,
						 char **keys, Datum *values, int nkeys, Oid type,
						 CdForeignTable *table, RecordRowSink *sink);

#endif							/* COLLEGEDB_FDW_H */
