/*-------------------------------------------------------------------------
 *
 * topn.c
 *	  ORDER BY ... LIMIT n of a sharded foreign table read on every shard:
 *	  each shard sorts and keeps its first n rows, the front sorts the at
 *	  most n rows per shard again and the plan's Limit takes its n (as
 *	  postgres_fdw's add_foreign_ordered_paths, for many shards).
 *
 * Pushed only when every condition goes to every shard (nothing filtered
 * on the front could drop a shard's row from its n), the query has no
 * grouping, DISTINCT, window or locking clause, and every sort key is an
 * expression every dialect of the fleet computes and orders exactly as
 * PostgreSQL does (text only when the front sorts under "C", written in
 * the dialect's byte order: each shard has its own collation).
 * NULLs sort where PostgreSQL sorts them, written as the dialect can.
 * Moves are fenced as for aggregates (upper_exec.c): the shards' rows carry
 * their key, and a moving key's rows from the shard it does not live on are
 * dropped, so that no row comes twice.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/stratnum.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "optimizer/planmain.h"
#include "optimizer/tlist.h"
#include "storage/lmgr.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/pg_locale.h"
#include "utils/tuplesort.h"

#include "fdw/upper.h"
#include "remote/fanout.h"

/* the marker that starts a top-N plan's fdw_private */
#define TOPN_MARK "topn"

/* The indexes of a top-N scan's fdw_private list */
enum TopnPrivate
{
	TopnPrivMark = 0,
	TopnPrivTexts,				/* per dialect */
	TopnPrivColumns,			/* sort keys: their output columns (1-based) */
	TopnPrivOperators,
	TopnPrivCollations,
	TopnPrivNullsFirst,
	TopnPrivRelid
};

typedef struct TopnScanState
{
	CdForeignTable *table;
	const char *texts[CD_MAX_DIALECTS];
	TupleDesc	desc;
	FmgrInfo   *inputs;
	Oid		   *ioparams;
	TupleTableSlot *row_slot;
	TupleTableSlot *sorted_slot;	/* what the sort gives back */
	Tuplesortstate *sort;
	MemoryContext row_cxt;
	bool		fetched;
	FdwShardRun run;			/* the shards, and how the last run went */
} TopnScanState;

typedef struct TopnSink
{
	CdRowSink	base;
	TopnScanState *st;
	const CdShard *shard;
} TopnSink;

/* a sort key as the planner gave it */
typedef struct TopnKey
{
	Expr	   *expr;
	Oid			sortop;
	Oid			collation;
	bool		desc;
	bool		nulls_first;
} TopnKey;

/*
 * key_of finds the pathkey's expression on the table and checks that every
 * dialect of the fleet orders it as PostgreSQL does.
 */
static bool
key_of(PathKey *pk, RelOptInfo *rel, FdwRelInfo *info, uint32 fleet, TopnKey *key)
{
	EquivalenceClass *ec = pk->pk_eclass;
	ListCell   *lc;
	uint32		ships;
	CdTypeFamily family;

	if (ec->ec_has_volatile)
		return false;
	key->expr = NULL;
	foreach(lc, ec->ec_members)
	{
		EquivalenceMember *em = lfirst(lc);

		if (!em->em_is_child && bms_equal(em->em_relids, rel->relids))
		{
			key->expr = em->em_expr;
			key->sortop = get_opfamily_member(pk->pk_opfamily, em->em_datatype,
											  em->em_datatype, pk->pk_strategy);
			break;
		}
	}
	if (key->expr == NULL || !OidIsValid(key->sortop))
		return false;
	key->collation = ec->ec_collation;
	key->desc = pk->pk_strategy == BTGreaterStrategyNumber;
	key->nulls_first = pk->pk_nulls_first;
	family = ShippableFamily(exprType((Node *) key->expr));
	if (family == CD_FAMILY_OTHER)
		return false;
	/* text: only where the front sorts in byte order, and every dialect can */
	if (family == CD_FAMILY_TEXT && (!OidIsValid(key->collation) || !lc_collate_is_c(key->collation)))
		return false;
	ships = DeparseDialects((Node *) key->expr, info->table, rel->relid);
	for (int i = 0; i < AdapterCount(); i++)
	{
		const CdExprRules *rules = AdapterForDialect(i)->expr_rules;

		if (!(fleet & (1u << i)))
			continue;
		if (!(ships & (1u << i)))
			return false;
		if (family == CD_FAMILY_TEXT ? rules->text_order_by == NULL :
			!(rules->builtin || (rules->compare & CD_FAMILY_BIT(family))))
			return false;
	}
	return true;
}

/*
 * order_item appends one sort key in a dialect's text.
 */
static void
order_item(StringInfo out, const char *expr, const TopnKey *key, const CdExprRules *rules)
{
	const char *dir = key->desc ? "DESC" : "ASC";

	if (ShippableFamily(exprType((Node *) key->expr)) == CD_FAMILY_TEXT)
		expr = psprintf(rules->text_order_by, expr);

	if (rules->nulls_order)
		appendStringInfo(out, "%s %s NULLS %s", expr, dir, key->nulls_first ? "FIRST" : "LAST");
	else
		appendStringInfo(out, "(%s IS NULL) %s, %s %s", expr, key->nulls_first ? "DESC" : "ASC",
						 expr, dir);
}

/*
 * topn_texts writes each dialect's "SELECT <columns>, <key> FROM t WHERE
 * ... ORDER BY ... LIMIT n".
 */
static List *
topn_texts(FdwDeparse *d, FdwRelInfo *info, List *tlist, TopnKey *keys, int nkeys, int64 limit)
{
	StringInfoData orders[CD_MAX_DIALECTS];
	ListCell   *lc;

	for (int i = 0; i < AdapterCount(); i++)
	{
		const CdAdapter *adapter = AdapterForDialect(i);
		StringInfoData cols;
		bool		first = true;

		initStringInfo(&cols);
		foreach(lc, tlist)
		{
			appendStringInfoString(&cols, first ? "" : ", ");
			if (!ShippableDeparse((Node *) ((TargetEntry *) lfirst(lc))->expr, d, i, false, &cols))
				d->failed[i] = true;
			first = false;
		}
		initStringInfo(&orders[i]);
		for (int k = 0; k < nkeys; k++)
		{
			StringInfoData expr;

			initStringInfo(&expr);
			if (!ShippableDeparse((Node *) keys[k].expr, d, i, false, &expr))
				d->failed[i] = true;
			appendStringInfoString(&orders[i], k ? ", " : " ORDER BY ");
			order_item(&orders[i], expr.data, &keys[k], adapter->expr_rules);
		}
		appendStringInfo(&d->sql[i], "SELECT %s, %s FROM %s", cols.data,
						 adapter->quote_ident(d->table->columns[d->table->key_attno - 1]),
						 FdwQualifiedName(d->table, adapter));
	}
	(void) DeparseWhere(d, info->remote_conds, NULL, true);
	for (int i = 0; i < AdapterCount(); i++)
		appendStringInfo(&d->sql[i], "%s LIMIT " INT64_FORMAT, orders[i].data, limit);
	return DeparseTexts(d);
}

/*
 * TopnPaths offers, for the ordering of one sharded table read on every
 * shard under a LIMIT, a scan that sorts and limits on each shard.
 */
void
TopnPaths(PlannerInfo *root, RelOptInfo *input_rel, RelOptInfo *output_rel, uint32 fleet)
{
	Query	   *query = root->parse;
	FdwRelInfo *info = input_rel->fdw_private;
	PathTarget *target = root->upper_targets[UPPERREL_ORDERED];
	List	   *tlist = NIL;
	List	   *vars;
	TopnKey    *keys;
	int			nkeys = list_length(root->sort_pathkeys);
	List	   *columns = NIL,
			   *operators = NIL,
			   *collations = NIL,
			   *nulls_first = NIL,
			   *params = NIL;
	ListCell   *lc;
	FdwDeparse	d;
	int64		limit;
	ForeignPath *path;
	int			k = 0;

	if (input_rel->reloptkind != RELOPT_BASEREL || info == NULL || fleet == 0 ||
		info->table->shard != NULL || info->key_expr != NULL || info->local_conds != NIL ||
		info->table->key_attno == 0 || query->groupClause || query->hasAggs ||
		query->distinctClause || query->hasWindowFuncs || query->hasTargetSRFs ||
		query->rowMarks || query->setOperations || root->hasHavingQual ||
		root->limit_tuples <= 0 || root->limit_tuples > 100000 || nkeys == 0 ||
		!pathkeys_contained_in(root->sort_pathkeys, root->query_pathkeys))
		return;
	keys = palloc0(sizeof(TopnKey) * nkeys);
	foreach(lc, root->sort_pathkeys)
	{
		if (!key_of(lfirst(lc), input_rel, info, fleet, &keys[k++]))
			return;
	}
	/* the scan returns the columns the output and the sort keys use */
	vars = pull_var_clause((Node *) target->exprs, PVC_RECURSE_PLACEHOLDERS);
	for (k = 0; k < nkeys; k++)
		vars = list_concat(vars, pull_var_clause((Node *) keys[k].expr, PVC_RECURSE_PLACEHOLDERS));
	foreach(lc, vars)
	{
		Var		   *var = lfirst(lc);

		if (!IsA(var, Var) || var->varno != input_rel->relid || var->varattno <= 0)
			return;
	}
	tlist = add_to_flat_tlist(NIL, vars);
	for (k = 0; k < nkeys; k++)
	{
		TargetEntry *tle = tlist_member(keys[k].expr, tlist);

		if (tle == NULL)
		{
			tlist = lappend(tlist, makeTargetEntry(keys[k].expr, list_length(tlist) + 1, NULL, false));
			tle = llast(tlist);
		}
		columns = lappend_int(columns, tle->resno);
		operators = lappend_int(operators, keys[k].sortop);
		collations = lappend_int(collations, keys[k].collation);
		nulls_first = lappend_int(nulls_first, keys[k].nulls_first);
	}
	limit = (int64) ceil(root->limit_tuples);
	DeparseInit(&d, info->table, input_rel->relid, &params);
	path = create_foreign_upper_path(root, output_rel, target,
									 (double) limit * 2, 10, 10 + limit + input_rel->rows * 0.01,
									 root->sort_pathkeys, NULL,
									 list_make5(makeString(TOPN_MARK),
												topn_texts(&d, info, tlist, keys, nkeys, limit),
												columns, operators, collations));
	path->fdw_private = lappend(path->fdw_private, nulls_first);
	path->fdw_private = lappend(path->fdw_private, makeInteger(info->table->relid));
	path->fdw_private = lappend(path->fdw_private, tlist);
	path->fdw_private = lappend(path->fdw_private, params);
	add_path(output_rel, (Path *) path);
}

/*
 * TopnPlan is the plan of a TopnPaths path: its scan list is the columns the
 * shards return.
 */
ForeignScan *
TopnPlan(ForeignPath *best_path, List *tlist, Plan *outer_plan)
{
	List	   *private = list_copy(best_path->fdw_private);
	List	   *params = llast(private);
	List	   *scan_tlist;

	private = list_delete_last(private);
	scan_tlist = llast(private);
	private = list_delete_last(private);
	return make_foreignscan(tlist, NIL, 0, params, private, scan_tlist, NIL, outer_plan);
}

/*
 * TopnIs says whether an upper scan is a top-N one.
 */
bool
TopnIs(ForeignScan *plan)
{
	return IsA(linitial(plan->fdw_private), String);
}

static void
topn_sink_columns(CdRowSink *self, int ncols, const char *const *names)
{
	TopnSink   *sink = (TopnSink *) self;

	if (ncols != sink->st->desc->natts + 1)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("the shard returned %d columns for a sorted read of %d",
						ncols, sink->st->desc->natts + 1)));
}

/* topn_sink_row sorts a shard's row in with the others */
static void
topn_sink_row(CdRowSink *self, int ncols, const CdCell *cells)
{
	TopnSink   *sink = (TopnSink *) self;
	TopnScanState *st = sink->st;
	TupleTableSlot *slot = st->row_slot;
	MemoryContext old;

	if (UpperDropped(st->run.drops, sink->shard, &cells[st->desc->natts]))
		return;
	old = MemoryContextSwitchTo(st->row_cxt);
	ExecClearTuple(slot);
	for (int i = 0; i < st->desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(st->desc, i);

		slot->tts_values[i] = ValuesCellToDatum(&cells[i], att->atttypid, att->atttypmod,
												&st->inputs[i], st->ioparams[i],
												&slot->tts_isnull[i]);
	}
	ExecStoreVirtualTuple(slot);
	tuplesort_puttupleslot(st->sort, slot);
	MemoryContextSwitchTo(old);
	MemoryContextReset(st->row_cxt);
}

void
TopnBeginScan(ForeignScanState *node, int eflags)
{
	ForeignScan *plan = (ForeignScan *) node->ss.ps.plan;
	TopnScanState *st = palloc0(sizeof(TopnScanState));

	node->fdw_state = st;
	st->table = FdwTableInfo(intVal(list_nth(plan->fdw_private, TopnPrivRelid)));
	DeparseTextsOf(list_nth(plan->fdw_private, TopnPrivTexts), st->texts);
	st->desc = node->ss.ss_ScanTupleSlot->tts_tupleDescriptor;
	st->inputs = palloc0(sizeof(FmgrInfo) * Max(st->desc->natts, 1));
	st->ioparams = palloc0(sizeof(Oid) * Max(st->desc->natts, 1));
	for (int i = 0; i < st->desc->natts; i++)
	{
		Oid			input;

		getTypeInputInfo(TupleDescAttr(st->desc, i)->atttypid, &input, &st->ioparams[i]);
		fmgr_info(input, &st->inputs[i]);
	}
	st->row_slot = MakeSingleTupleTableSlot(st->desc, &TTSOpsVirtual);
	st->sorted_slot = MakeSingleTupleTableSlot(st->desc, &TTSOpsMinimalTuple);
	st->row_cxt = AllocSetContextCreate(CurrentMemoryContext, "collegedb sorted row",
										ALLOCSET_DEFAULT_SIZES);
	FdwShardRunInit(&st->run, node);
}

/* a shard's sink: its rows go into the sort */
static CdRowSink *
sink_for(void *arg, int i, const CdShard *shard)
{
	TopnSink   *sink = palloc0(sizeof(TopnSink));

	sink->base.columns = topn_sink_columns;
	sink->base.row = topn_sink_row;
	sink->st = arg;
	sink->shard = shard;
	return &sink->base;
}

/*
 * topn_fetch reads every shard's first rows at once into the sort.
 */
static void
topn_fetch(ForeignScanState *node, TopnScanState *st)
{
	List	   *private = ((ForeignScan *) node->ss.ps.plan)->fdw_private;
	int			nkeys = list_length(list_nth(private, TopnPrivColumns));
	AttrNumber *columns = palloc(sizeof(AttrNumber) * nkeys);
	Oid		   *operators = palloc(sizeof(Oid) * nkeys);
	Oid		   *collations = palloc(sizeof(Oid) * nkeys);
	bool	   *nulls_first = palloc(sizeof(bool) * nkeys);

	for (int k = 0; k < nkeys; k++)
	{
		columns[k] = list_nth_int(list_nth(private, TopnPrivColumns), k);
		operators[k] = list_nth_int(list_nth(private, TopnPrivOperators), k);
		collations[k] = list_nth_int(list_nth(private, TopnPrivCollations), k);
		nulls_first[k] = list_nth_int(list_nth(private, TopnPrivNullsFirst), k);
	}
	if (st->sort)
		tuplesort_end(st->sort);
	st->sort = tuplesort_begin_heap(st->desc, nkeys, columns, operators, collations,
									nulls_first, work_mem, NULL, TUPLESORT_NONE);
	/* the key in each row drops a moving key's rows: one text serves */
	FdwRunShards(node, &st->run, st->table, st->texts, st->texts, sink_for, st);
	tuplesort_performsort(st->sort);
}

TupleTableSlot *
TopnIterate(ForeignScanState *node)
{
	TopnScanState *st = node->fdw_state;
	TupleTableSlot *slot = node->ss.ss_ScanTupleSlot;

	if (!st->fetched)
	{
		/* the sort and what EXPLAIN ANALYZE shows live as long as the scan */
		MemoryContext old = MemoryContextSwitchTo(node->ss.ps.state->es_query_cxt);

		topn_fetch(node, st);
		st->fetched = true;
		MemoryContextSwitchTo(old);
	}
	if (!tuplesort_gettupleslot(st->sort, true, false, st->sorted_slot, NULL))
		return ExecClearTuple(slot);
	return ExecCopySlot(slot, st->sorted_slot);
}

void
TopnRescan(ForeignScanState *node)
{
	((TopnScanState *) node->fdw_state)->fetched = false;
}

void
TopnEndScan(ForeignScanState *node)
{
	TopnScanState *st = node->fdw_state;

	if (st == NULL)
		return;
	if (st->sort)
		tuplesort_end(st->sort);
	ExecDropSingleTupleTableSlot(st->row_slot);
	ExecDropSingleTupleTableSlot(st->sorted_slot);
	MemoryContextDelete(st->row_cxt);
}

void
TopnExplain(ForeignScanState *node, ExplainState *es)
{
	ForeignScan *plan = (ForeignScan *) node->ss.ps.plan;
	TopnScanState *st = node->fdw_state;

	FdwExplainShardRun(st ? &st->run : NULL, "all shards, sorted and limited on each",
					   list_nth(plan->fdw_private, TopnPrivTexts), es);
}
