/*-------------------------------------------------------------------------
 *
 * upper.c
 *	  Planning aggregates of a sharded foreign table on the shards: each
 *	  shard computes its partial groups (count, sum, min, max, the sum and
 *	  count of avg, bool_and, bool_or), the front combines them
 *	  (upper_exec.c), as PostgreSQL's partial aggregation and Citus's
 *	  master query do.  The model is postgres_fdw's add_foreign_grouping_paths
 *	  and foreign_grouping_ok; no code is taken from it.
 *
 * An aggregate is pushed only when every condition of the scan goes to
 * every shard (nothing filtered on the front), every grouping expression
 * and aggregate argument is one the shippability rule sends to every
 * dialect of the fleet, each aggregate is one its dialect computes exactly
 * as PostgreSQL does (CdExprRules: integer sums everywhere, numeric and
 * bigint sums only where the dialect's arithmetic is exact, min and max of
 * the families it compares exactly, never over text or floats whose
 * summation order matters), and grouping is by values that every dialect
 * compares for equality exactly (text keys only on PostgreSQL).  HAVING
 * stays on the front, on the combined groups.  A GROUP BY without
 * aggregates, and a DISTINCT that is all the query does above the scan,
 * are groupings without aggregates: each shard returns its distinct
 * groups, the front merges them.  Everything else is planned as before:
 * the front aggregates the scan's rows.
 *
 * This file also holds the callbacks that tell a base-table scan from an
 * aggregate scan (scanrelid 0) and hand each to its executor.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/planmain.h"
#include "optimizer/tlist.h"
#include "utils/lsyscache.h"

#include "catalog/shards.h"
#include "fdw/fdw.h"
#include "fdw/upper.h"

/* what a plan of an aggregate knows while it is built */
typedef struct UpperBuild
{
	FdwRelInfo *info;
	Index		relid;
	uint32		fleet;			/* dialects of the registered shards */
	List	   *tlist;			/* fdw_scan_tlist */
	List	   *groups;			/* the grouping expressions, in tlist order */
	List	   *group_eqops;
	List	   *aggs;			/* Aggrefs */
	List	   *kinds;			/* UpperAggKind per Aggref */
} UpperBuild;

/*
 * upper_fleet_dialects returns the dialects of the registered shards (a
 * mask, as DeparseAllDialects): only they must compute what is pushed.
 */
static uint32
upper_fleet_dialects(void)
{
	uint32		mask = 0;
	ListCell   *lc;

	foreach(lc, ShardList())
		mask |= 1u << ((CdShard *) lfirst(lc))->dialect;
	return mask;
}

/*
 * agg_kind names a built-in aggregate that can be computed in parts, or
 * returns false.
 */
static bool
agg_kind(Aggref *agg, UpperAggKind *kind)
{
	const char *name;

	if (agg->aggfnoid >= FirstGenbkiObjectId || agg->aggfilter != NULL ||
		agg->aggdistinct != NIL || agg->aggorder != NIL || agg->aggvariadic ||
		agg->aggkind != AGGKIND_NORMAL || agg->aggsplit != AGGSPLIT_SIMPLE ||
		list_length(agg->args) > 1 || agg->agglevelsup != 0)
		return false;
	name = get_func_name(agg->aggfnoid);
	if (strcmp(name, "count") == 0)
		*kind = UPPER_COUNT;
	else if (strcmp(name, "sum") == 0)
		*kind = UPPER_SUM;
	else if (strcmp(name, "min") == 0)
		*kind = UPPER_MIN;
	else if (strcmp(name, "max") == 0)
		*kind = UPPER_MAX;
	else if (strcmp(name, "avg") == 0)
		*kind = UPPER_AVG;
	else if (strcmp(name, "bool_and") == 0 || strcmp(name, "every") == 0)
		*kind = UPPER_AND;
	else if (strcmp(name, "bool_or") == 0)
		*kind = UPPER_OR;
	else
		return false;
	return agg->aggstar ? *kind == UPPER_COUNT : list_length(agg->args) == 1;
}

/*
 * agg_exact says whether a dialect computes the aggregate of values of
 * 'family' exactly as PostgreSQL does.
 */
static bool
agg_exact(UpperAggKind kind, CdTypeFamily family, const CdExprRules *rules)
{
	uint32		bit = CD_FAMILY_BIT(family);

	switch (kind)
	{
		case UPPER_COUNT:
			return true;
		case UPPER_SUM:
		case UPPER_AVG:
			if (family == CD_FAMILY_INT2 || family == CD_FAMILY_INT4)
				return rules->builtin || (rules->compare & bit);
			if (family == CD_FAMILY_INT8 || family == CD_FAMILY_NUMERIC)
				return rules->builtin || (rules->arith & bit);
			return false;		/* floats: the order of the sum shows */
		case UPPER_MIN:
		case UPPER_MAX:
			if (family == CD_FAMILY_TEXT || family == CD_FAMILY_OTHER)
				return false;	/* collations; types without a family */
			return rules->builtin || (rules->compare & bit);
		case UPPER_AND:
			return family == CD_FAMILY_BOOL && rules->agg_bool_and != NULL;
		case UPPER_OR:
			return family == CD_FAMILY_BOOL && rules->agg_bool_or != NULL;
	}
	return false;
}

/*
 * group_exact says whether a dialect groups values of the expression's
 * family as PostgreSQL does: by exact equality (text only where the
 * dialect is PostgreSQL, under a deterministic collation).
 */
static bool
group_exact(Node *expr, const CdExprRules *rules)
{
	CdTypeFamily family = ShippableFamily(exprType(expr));

	if (family == CD_FAMILY_OTHER)
		return false;
	if (family == CD_FAMILY_TEXT)
		return rules->builtin && OidIsValid(exprCollation(expr)) &&
			get_collation_isdeterministic(exprCollation(expr));
	if (family == CD_FAMILY_FLOAT4 || family == CD_FAMILY_FLOAT8)
		return false;			/* -0 and 0, NaN */
	return rules->builtin || (rules->compare & CD_FAMILY_BIT(family));
}

/*
 * every_dialect says whether each dialect of the fleet takes 'expr' (the
 * shippability rule) and passes 'check'.
 */
static bool
every_dialect(UpperBuild *b, Node *expr, bool (*check) (Node *, const CdExprRules *))
{
	uint32		ships = DeparseDialects(expr, b->info->table, b->relid);

	for (int i = 0; i < AdapterCount(); i++)
	{
		if (!(b->fleet & (1u << i)))
			continue;
		if (!(ships & (1u << i)) || (check && !check(expr, AdapterForDialect(i)->expr_rules)))
			return false;
	}
	return true;
}

/*
 * add_agg adds an Aggref to the scan's output when every dialect of the
 * fleet computes it in parts exactly.
 */
static bool
add_agg(UpperBuild *b, Aggref *agg)
{
	UpperAggKind kind;
	Node	   *arg = NULL;

	if (list_member(b->aggs, agg))
		return true;
	if (!agg_kind(agg, &kind))
		return false;
	if (!agg->aggstar)
	{
		arg = (Node *) ((TargetEntry *) linitial(agg->args))->expr;
		if (!every_dialect(b, arg, NULL))
			return false;
	}
	for (int i = 0; i < AdapterCount(); i++)
	{
		if ((b->fleet & (1u << i)) &&
			!agg_exact(kind, arg ? ShippableFamily(exprType(arg)) : CD_FAMILY_OTHER,
					   AdapterForDialect(i)->expr_rules))
			return false;
	}
	b->aggs = lappend(b->aggs, agg);
	b->kinds = lappend_int(b->kinds, kind);
	b->tlist = lappend(b->tlist, makeTargetEntry((Expr *) agg, list_length(b->tlist) + 1,
												 NULL, false));
	return true;
}

/*
 * add_aggs_of adds every Aggref of an expression that is not a grouping
 * expression; a plain column outside any aggregate refuses the pushdown
 * (it can only be a grouping column, which is in the output already).
 */
static bool
add_aggs_of(UpperBuild *b, Node *expr)
{
	List	   *parts = pull_var_clause(expr, PVC_INCLUDE_AGGREGATES);
	ListCell   *lc;

	foreach(lc, parts)
	{
		Node	   *part = lfirst(lc);

		if (IsA(part, Aggref))
		{
			if (!add_agg(b, (Aggref *) part))
				return false;
		}
		else if (!tlist_member((Expr *) part, b->tlist))
			return false;
	}
	return true;
}

/*
 * grouping_ok sorts the grouping target into grouping expressions (those
 * of 'clauses': the query's GROUP BY, or its DISTINCT) and aggregates the
 * shards can compute, as postgres_fdw's foreign_grouping_ok.
 */
static bool
grouping_ok(UpperBuild *b, PathTarget *target, List *clauses, List *having)
{
	ListCell   *lc;
	int			i = 0;

	foreach(lc, target->exprs)
	{
		Expr	   *expr = lfirst(lc);
		Index		ref = get_pathtarget_sortgroupref(target, i++);
		SortGroupClause *sgc;

		if (ref == 0 || (sgc = get_sortgroupref_clause_noerr(ref, clauses)) == NULL)
			continue;
		if (!sgc->hashable || !every_dialect(b, (Node *) expr, group_exact))
			return false;
		b->groups = lappend(b->groups, expr);
		b->group_eqops = lappend_oid(b->group_eqops, sgc->eqop);
		b->tlist = lappend(b->tlist, makeTargetEntry(expr, list_length(b->tlist) + 1, NULL, false));
	}
	i = 0;
	foreach(lc, target->exprs)
	{
		Index		ref = get_pathtarget_sortgroupref(target, i++);

		if (ref != 0 && get_sortgroupref_clause_noerr(ref, clauses) != NULL)
			continue;
		if (!add_aggs_of(b, lfirst(lc)))
			return false;
	}
	return add_aggs_of(b, (Node *) having);
}

/*
 * distinct_only says whether the query's DISTINCT is all there is to do
 * above the scan (no grouping, aggregates, windows, set-returning
 * functions in the target, or DISTINCT ON): then it is a grouping by the
 * DISTINCT columns without aggregates, which the shards can do.
 */
static bool
distinct_only(PlannerInfo *root)
{
	Query	   *query = root->parse;

	return query->distinctClause != NIL && !query->hasDistinctOn && query->groupClause == NIL &&
		!query->hasAggs && !query->hasWindowFuncs && !query->hasTargetSRFs &&
		!root->hasHavingQual && query->groupingSets == NIL;
}

/*
 * collegedb_get_upper_paths offers a scan that aggregates on the shards for
 * the grouping of one sharded foreign table read on every shard, or for
 * its DISTINCT: each shard returns its distinct groups, the front merges
 * them (the same key's rows live on one shard, but equal values of other
 * columns do not).
 */
void
collegedb_get_upper_paths(PlannerInfo *root, UpperRelationKind stage,
						  RelOptInfo *input_rel, RelOptInfo *output_rel, void *extra)
{
	GroupPathExtraData *gextra = extra;
	FdwRelInfo *info = input_rel->fdw_private;
	UpperBuild *b;
	List	   *having;
	ForeignPath *path;
	PathTarget *target;
	double		groups;

	if (stage == UPPERREL_ORDERED && output_rel->fdw_private == NULL)
	{
		output_rel->fdw_private = info;
		TopnPaths(root, input_rel, output_rel, upper_fleet_dialects());
		return;
	}
	if ((stage != UPPERREL_GROUP_AGG && !(stage == UPPERREL_DISTINCT && distinct_only(root))) ||
		input_rel->reloptkind != RELOPT_BASEREL || info == NULL || output_rel->fdw_private != NULL)
		return;
	if (info->table->shard != NULL || info->key_expr != NULL || info->local_conds != NIL ||
		info->table->key_attno == 0 || root->parse->groupingSets != NIL ||
		(stage == UPPERREL_GROUP_AGG && gextra->patype != PARTITIONWISE_AGGREGATE_NONE))
		return;
	b = palloc0(sizeof(UpperBuild));
	b->info = info;
	b->relid = input_rel->relid;
	b->fleet = upper_fleet_dialects();
	having = stage == UPPERREL_GROUP_AGG ? (List *) gextra->havingQual : NIL;
	/* the DISTINCT rel's own target is empty: the planner keeps it here */
	target = stage == UPPERREL_GROUP_AGG ? output_rel->reltarget :
		root->upper_targets[UPPERREL_DISTINCT];
	if (b->fleet == 0 ||
		!grouping_ok(b, target,
					 stage == UPPERREL_GROUP_AGG ? root->parse->groupClause :
					 root->parse->distinctClause, having) ||
		(b->aggs == NIL && b->groups == NIL))
		return;

	groups = b->groups == NIL ? 1 : Max(input_rel->rows / 10, 1);
	output_rel->fdw_private = b;
	path = create_foreign_upper_path(root, output_rel, target, groups,
									 10, 10 + groups + input_rel->rows * 0.01,
									 NIL, NULL, list_make1(having));
	add_path(output_rel, (Path *) path);
}

/*
 * upper_plan builds the aggregate scan: one statement per dialect that
 * aggregates on the shard, one that reads the same parts row by row (used
 * while moves are in flight, upper_exec.c), and what the front needs to
 * combine them.
 */
static ForeignScan *
upper_plan(PlannerInfo *root, RelOptInfo *rel, ForeignPath *best_path, List *tlist,
		   Plan *outer_plan)
{
	UpperBuild *b = rel->fdw_private;
	List	   *having = linitial(best_path->fdw_private);
	List	   *params = NIL;
	List	   *private;
	FdwDeparse	d;

	DeparseInit(&d, b->info->table, b->relid, &params);
	private = UpperDeparse(&d, b->info, b->groups, b->group_eqops, b->aggs, b->kinds);
	return make_foreignscan(tlist, having, 0, params, private, b->tlist, NIL, outer_plan);
}

ForeignScan *
collegedb_get_any_plan(PlannerInfo *root, RelOptInfo *rel, Oid foreigntableid,
					   ForeignPath *best_path, List *tlist, List *scan_clauses,
					   Plan *outer_plan)
{
	if (rel->reloptkind == RELOPT_UPPER_REL && linitial(best_path->fdw_private) != NULL &&
		IsA(linitial(best_path->fdw_private), String))
		return TopnPlan(best_path, tlist, outer_plan);
	if (rel->reloptkind == RELOPT_UPPER_REL)
		return upper_plan(root, rel, best_path, tlist, outer_plan);
	return collegedb_get_plan(root, rel, foreigntableid, best_path, tlist, scan_clauses,
							  outer_plan);
}

/*
 * The executor's callbacks: an aggregate or top-N scan has no relation of
 * its own (scanrelid 0); a top-N plan's fdw_private starts with a String.
 */
typedef enum ScanKind
{
	SCAN_ROWS,
	SCAN_AGGREGATE,
	SCAN_TOPN
} ScanKind;

static ScanKind
scan_kind(ForeignScanState *node)
{
	ForeignScan *plan = (ForeignScan *) node->ss.ps.plan;

	if (plan->scan.scanrelid != 0)
		return SCAN_ROWS;
	return TopnIs(plan) ? SCAN_TOPN : SCAN_AGGREGATE;
}

void
collegedb_begin_any_scan(ForeignScanState *node, int eflags)
{
	switch (scan_kind(node))
	{
		case SCAN_ROWS:
			collegedb_begin_scan(node, eflags);
			break;
		case SCAN_AGGREGATE:
			UpperBeginScan(node, eflags);
			break;
		case SCAN_TOPN:
			TopnBeginScan(node, eflags);
			break;
	}
}

TupleTableSlot *
collegedb_iterate_any(ForeignScanState *node)
{
	switch (scan_kind(node))
	{
		case SCAN_AGGREGATE:
			return UpperIterate(node);
		case SCAN_TOPN:
			return TopnIterate(node);
		default:
			return collegedb_iterate(node);
	}
}

void
collegedb_rescan_any(ForeignScanState *node)
{
	switch (scan_kind(node))
	{
		case SCAN_ROWS:
			collegedb_rescan(node);
			break;
		case SCAN_AGGREGATE:
			UpperRescan(node);
			break;
		case SCAN_TOPN:
			TopnRescan(node);
			break;
	}
}

void
collegedb_end_any_scan(ForeignScanState *node)
{
	switch (scan_kind(node))
	{
		case SCAN_ROWS:
			collegedb_end_scan(node);
			break;
		case SCAN_AGGREGATE:
			UpperEndScan(node);
			break;
		case SCAN_TOPN:
			TopnEndScan(node);
			break;
	}
}

void
collegedb_explain_any_scan(ForeignScanState *node, ExplainState *es)
{
	switch (scan_kind(node))
	{
		case SCAN_ROWS:
			collegedb_explain_scan(node, es);
			break;
		case SCAN_AGGREGATE:
			UpperExplain(node, es);
			break;
		case SCAN_TOPN:
			TopnExplain(node, es);
			break;
	}
}
