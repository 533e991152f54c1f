/*-------------------------------------------------------------------------
 *
 * join_paths.c
 *	  Keyed reads for a join on the key: a sharded foreign table joined to
 *	  another relation by "key = <the other relation's value>" is read, for
 *	  each outer row, by that key, on the key's shard only.
 *
 * For each join condition that equates the table's key column with an
 * expression of other relations (an equivalence, as "JOIN t USING (id)"
 * makes, or a plain join clause), a parameterized path is offered: the
 * planner runs it inside a nested loop, and the executor re-runs the scan
 * with each outer row's value as its key (fdw_exec.c rescans; the outer
 * Vars become nestloop parameters of the plan's fdw_exprs).  The cost is
 * that of one keyed read per outer row, so the planner prefers it to a
 * scan of every shard while the outer side is small, and a hash join over
 * the full scan when it is large.  The join's other conditions are checked
 * in the front on the rows that come back.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "optimizer/restrictinfo.h"
#include "utils/lsyscache.h"

#include "fdw/fdw.h"

/*
 * The cost of one keyed read, per outer row: a round trip, about what a
 * scan of every shard spends on 100 rows (0.15 ms against 1.5 us a row,
 * measured over two PostgreSQL shards; fdw_plan.c costs a full scan at 10
 * a row).  A nested loop of keyed reads wins while the outer side has
 * fewer rows than about a hundredth of the table.
 */
#define KEYED_READ_STARTUP 10
#define KEYED_READ_TOTAL 1000

/* generate_implied_equalities_for_column's test: the key column's member */
static bool
is_key_member(PlannerInfo *root, RelOptInfo *rel, EquivalenceClass *ec,
			  EquivalenceMember *em, void *arg)
{
	FdwRelInfo *info = arg;
	Expr	   *e = em->em_expr;

	while (IsA(e, RelabelType))
		e = ((RelabelType *) e)->arg;
	return IsA(e, Var) && ((Var *) e)->varno == rel->relid &&
		((Var *) e)->varattno == info->table->key_attno && ((Var *) e)->varlevelsup == 0;
}

/*
 * outer_key_value returns the other side of a join clause "key = expr"
 * when expr belongs to other relations only, is not volatile and has the
 * key column's type; NULL otherwise.
 */
static Expr *
outer_key_value(RestrictInfo *rinfo, RelOptInfo *rel, FdwRelInfo *info)
{
	OpExpr	   *op = (OpExpr *) rinfo->clause;
	Node	   *l,
			   *r;
	Oid			key_type;

	if (!IsA(op, OpExpr) || list_length(op->args) != 2 ||
		strcmp(get_opname(op->opno), "=") != 0 || !rinfo->can_join)
		return NULL;
	l = strip_implicit_coercions(linitial(op->args));
	r = strip_implicit_coercions(lsecond(op->args));
	if (bms_is_subset(rinfo->right_relids, rel->relids))
	{
		Node	   *t = l;

		l = r;
		r = t;
	}
	if (!IsA(l, Var) || ((Var *) l)->varno != rel->relid ||
		((Var *) l)->varattno != info->table->key_attno || ((Var *) l)->varlevelsup != 0)
		return NULL;
	key_type = get_atttype(info->table->relid, info->table->key_attno);
	if (bms_overlap(pull_varnos(NULL, r), rel->relids) ||
		contain_volatile_functions(r) || exprType(r) != key_type)
		return NULL;
	return (Expr *) r;
}

/* offers the keyed-read path of one join clause */
static void
add_keyed_path(PlannerInfo *root, RelOptInfo *rel, RestrictInfo *rinfo, Expr *outer)
{
	Relids		required = bms_union(bms_difference(rinfo->clause_relids, rel->relids),
									 rel->lateral_relids);
	ParamPathInfo *ppi;

	if (bms_is_empty(required))
		return;
	ppi = get_baserel_parampathinfo(root, rel, required);
	add_path(rel, (Path *) create_foreignscan_path(root, rel, NULL, Max(ppi->ppi_rows, 1),
												   KEYED_READ_STARTUP, KEYED_READ_TOTAL, NIL,
												   required, NULL, list_make1(outer)));
}

/*
 * FdwAddKeyedJoinPaths offers, for a sharded table read without key
 * equality of its own, one keyed-read path per join condition on the key.
 */
void
FdwAddKeyedJoinPaths(PlannerInfo *root, RelOptInfo *rel, FdwRelInfo *info)
{
	List	   *clauses;
	ListCell   *lc;

	if (info->table->shard != NULL || info->key_expr != NULL || info->table->key_attno == 0)
		return;
	clauses = generate_implied_equalities_for_column(root, rel, is_key_member, info,
													 rel->lateral_referencers);
	clauses = list_concat(clauses, list_copy(rel->joininfo));
	foreach(lc, clauses)
	{
		RestrictInfo *rinfo = lfirst(lc);
		Expr	   *outer = outer_key_value(rinfo, rel, info);

		if (outer != NULL)
			add_keyed_path(root, rel, rinfo, outer);
	}
}

/*
 * FdwKeyedJoinValue returns the outer value a keyed-read path routes by,
 * or NULL for any other path.
 */
Expr *
FdwKeyedJoinValue(ForeignPath *path)
{
	if (path->path.param_info == NULL || path->fdw_private == NIL)
		return NULL;
	return linitial(path->fdw_private);
}
