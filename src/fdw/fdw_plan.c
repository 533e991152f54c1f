/*-------------------------------------------------------------------------
 *
 * fdw_plan.c
 *	  Planning scans and modifications of collegedb foreign tables: which
 *	  quals go to the shards, which key routes them, and what the plan
 *	  keeps for execution.
 *
 * A qual "key = constant or parameter" (or "key = ANY(array)", or IN, also
 * IN ($1, $2, ...) under a generic plan, whose list the scan evaluates at
 * execution) routes the scan to the key's shard(s); without one the scan
 * reaches every shard of the read set.  Of the other quals, those deparse.c can
 * send go to the shards, the rest is evaluated in the front.  The rows are
 * estimated from ANALYZE's statistics (analyze.c), else from the shards'
 * own (estimate.c), else guessed.
 *
 * UPDATE and DELETE go to the shards whole (direct modification) when
 * every qual and every new value can go there; with key equality they
 * route like a scan; without it they are CROSS_SHARD_UNSUPPORTED unless
 * collegedb.allow_multi_shard_modify.  The key column cannot change.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "commands/defrem.h"
#include "foreign/foreign.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/appendinfo.h"
#include "optimizer/clauses.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/planmain.h"
#include "optimizer/restrictinfo.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "catalog/shards.h"
#include "cd_errcodes.h"
#include "collegedb.h"
#include "fdw/fdw.h"

/*
 * key_list_at_execution says whether 'node' is a list of keys that only
 * execution knows, "IN ($1, $2, ...)" under a generic plan (an ArrayExpr of
 * parameters, or of anything else evaluated once per scan): no column of
 * any relation, nothing volatile, no subquery.  The scan evaluates it as
 * it evaluates a parameter, and routes its elements as a constant list's.
 */
static bool
key_list_at_execution(Node *node)
{
	if (!IsA(node, ArrayExpr) || ((ArrayExpr *) node)->multidims)
		return false;
	return !contain_var_clause(node) && !contain_volatile_functions(node) &&
		!contain_subplans(node) && !contain_agg_clause(node) &&
		!contain_window_function(node);
}

/*
 * key_value returns the key value(s) a qual routes by: "key = x" with x a
 * constant or parameter (either side), or "key = ANY(array)".
 */
static Expr *
key_value(Expr *clause, CdForeignTable *table, Index relid, bool *is_array)
{
	if (table->key_attno == 0)
		return NULL;
	if (IsA(clause, OpExpr))
	{
		OpExpr	   *op = (OpExpr *) clause;
		Node	   *l,
				   *r;

		if (list_length(op->args) != 2 || strcmp(get_opname(op->opno), "=") != 0)
			return NULL;
		l = strip_implicit_coercions(linitial(op->args));
		r = strip_implicit_coercions(lsecond(op->args));
		if (IsA(r, Var) && !IsA(l, Var))
		{
			Node	   *t = l;

			l = r;
			r = t;
		}
		if (IsA(l, Var) && ((Var *) l)->varno == relid && ((Var *) l)->varattno == table->key_attno &&
			((Var *) l)->varlevelsup == 0 && (IsA(r, Const) || IsA(r, Param)) &&
			!(IsA(r, Const) && ((Const *) r)->constisnull))
		{
			*is_array = false;
			return (Expr *) r;
		}
	}
	else if (IsA(clause, ScalarArrayOpExpr))
	{
		ScalarArrayOpExpr *saop = (ScalarArrayOpExpr *) clause;
		Node	   *l = strip_implicit_coercions(linitial(saop->args));
		Node	   *r = lsecond(saop->args);

		if (saop->useOr && strcmp(get_opname(saop->opno), "=") == 0 &&
			IsA(l, Var) && ((Var *) l)->varno == relid && ((Var *) l)->varattno == table->key_attno &&
			((Var *) l)->varlevelsup == 0 &&
			(IsA(r, Const) || IsA(r, Param) || key_list_at_execution(r)))
		{
			*is_array = true;
			return (Expr *) r;
		}
	}
	return NULL;
}

/*
 * collegedb_get_rel_size sorts the rel's quals into those that go to the
 * shards and those evaluated here, finds the routing key, and estimates
 * the rows.
 */
void
collegedb_get_rel_size(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid)
{
	FdwRelInfo *info = palloc0(sizeof(FdwRelInfo));
	double		tuples;
	ListCell   *lc;

	info->table = FdwTableInfo(foreigntableid);
	foreach(lc, baserel->baserestrictinfo)
	{
		RestrictInfo *ri = lfirst(lc);
		bool		is_array;
		Expr	   *key;

		if (info->key_expr == NULL &&
			(key = key_value(ri->clause, info->table, baserel->relid, &is_array)) != NULL)
		{
			/* routing enforces it: each key's statement asks for that key */
			info->key_expr = key;
			info->key_is_array = is_array;
		}
		else
		{
			/*
			 * A qual goes to the shards whose dialect computes it as
			 * PostgreSQL does; unless every dialect does, the front checks it
			 * too (the key's shard, and each shard a tombstone leads to, may
			 * speak any dialect).
			 */
			uint32		dialects = DeparseDialects((Node *) ri->clause, info->table,
												   baserel->relid);

			if (dialects != 0)
				info->remote_conds = lappend(info->remote_conds, ri);
			if (dialects != DeparseAllDialects())
				info->local_conds = lappend(info->local_conds, ri);
		}
	}
	baserel->fdw_private = info;
	if (info->key_expr)
		baserel->rows = info->key_is_array ? 10 : 1;
	else if (baserel->tuples >= 0 && baserel->pages > 0)
	{
		/* ANALYZE sampled every shard (analyze.c): its count and statistics */
		set_baserel_size_estimates(root, baserel);
	}
	else if (FdwRemoteRows(info->table, &tuples))
	{
		/* never ANALYZEd: the shards' own statistics (estimate.c) */
		baserel->tuples = tuples;
		set_baserel_size_estimates(root, baserel);
	}
	else
		baserel->rows = 1000;
}

void
collegedb_get_paths(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid)
{
	FdwRelInfo *info = baserel->fdw_private;
	Cost		startup = 10;
	Cost		total = info->key_expr ? 100 : 1000 + baserel->rows * 10;

	add_path(baserel, (Path *) create_foreignscan_path(root, baserel, NULL, baserel->rows,
													   startup, total, NIL, baserel->lateral_relids,
													   NULL, NIL));
	FdwAddKeyedJoinPaths(root, baserel, info);
}

/*
 * private_list builds a scan's fdw_private (see FdwScanPrivate).
 */
static List *
private_list(FdwDeparse *d, int key_param, bool key_is_array, bool returning, bool set_processed,
			 bool for_modify)
{
	List	   *out = NIL;

	out = lappend(out, DeparseTexts(d));
	out = lappend(out, makeInteger(key_param));
	out = lappend(out, makeBoolean(key_is_array));
	out = lappend(out, makeBoolean(returning));
	out = lappend(out, makeBoolean(set_processed));
	out = lappend(out, key_is_array && key_param > 0 ? DeparseKeySplit(d) : NIL);
	out = lappend(out, makeBoolean(for_modify));
	return out;
}

/*
 * pushed_limit returns the row limit a scan can send to its shard: a
 * constant LIMIT (plus OFFSET) without ORDER BY, grouping or other
 * relations, on a scan that reaches one shard with every qual sent along;
 * -1 when there is none.
 */
static int64
pushed_limit(PlannerInfo *root, RelOptInfo *baserel, FdwRelInfo *info, List *local)
{
	Query	   *parse = root->parse;
	int64		limit;

	if (parse->commandType != CMD_SELECT || parse->limitCount == NULL ||
		parse->sortClause || parse->groupClause || parse->groupingSets ||
		parse->distinctClause || parse->hasAggs || parse->hasWindowFuncs ||
		parse->hasTargetSRFs || parse->setOperations || parse->rowMarks ||
		root->hasHavingQual || parse->limitOption != LIMIT_OPTION_COUNT ||
		bms_membership(root->all_baserels) != BMS_SINGLETON || local != NIL)
		return -1;
	if (info->table->shard == NULL && (info->key_expr == NULL || info->key_is_array))
		return -1;
	if (!IsA(parse->limitCount, Const) || ((Const *) parse->limitCount)->constisnull)
		return -1;
	limit = DatumGetInt64(((Const *) parse->limitCount)->constvalue);
	if (parse->limitOffset)
	{
		if (!IsA(parse->limitOffset, Const) || ((Const *) parse->limitOffset)->constisnull)
			return -1;
		limit += DatumGetInt64(((Const *) parse->limitOffset)->constvalue);
	}
	return Max(limit, 0);
}

/*
 * rows_modified_here says whether the scan fetches the rows of an UPDATE or
 * DELETE that may run row by row (when it cannot go to the shards whole,
 * collegedb_plan_direct_modify replaces the scan's statement).
 */
static bool
rows_modified_here(PlannerInfo *root, RelOptInfo *baserel)
{
	CmdType		op = root->parse->commandType;

	/* the target itself, or a foreign partition or child of it */
	return (op == CMD_UPDATE || op == CMD_DELETE) &&
		(baserel->relid == (Index) root->parse->resultRelation ||
		 bms_is_member(baserel->relid, root->all_result_relids));
}

/*
 * collegedb_get_plan builds the scan: SELECT the columns the query uses
 * (NULL for the others), WHERE the remote quals and the key, one text per
 * dialect.  The scan of an UPDATE's or DELETE's target also selects each
 * row's identity on its shard and locks the rows it returns, in the
 * shard's write transaction (row_modify.c).
 */
ForeignScan *
collegedb_get_plan(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid,
				   ForeignPath *best_path, List *tlist, List *scan_clauses,
				   Plan *outer_plan)
{
	FdwRelInfo *info = baserel->fdw_private;
	List	   *params = NIL;
	List	   *local = extract_actual_clauses(info->local_conds, false);
	Expr	   *join_key = FdwKeyedJoinValue(best_path);
	Bitmapset  *used = NULL;
	FdwDeparse	d;
	int			key_param;
	int64		limit;
	bool		for_modify = rows_modified_here(root, baserel);

	/* a keyed read per outer row: the join's conditions are checked here */
	if (join_key)
		local = list_concat(local,
							extract_actual_clauses(best_path->path.param_info->ppi_clauses, false));

	pull_varattnos((Node *) baserel->reltarget->exprs, baserel->relid, &used);
	pull_varattnos((Node *) local, baserel->relid, &used);
	if (bms_is_member(0 - FirstLowInvalidHeapAttributeNumber, used))
		used = NULL;			/* a whole-row reference */
	else if (used == NULL)
		used = bms_make_singleton(0 - FirstLowInvalidHeapAttributeNumber); /* no column */
	/* a list of keys: each row says which key it answers (fdw_keys.c) */
	if (used != NULL && info->key_is_array && info->table->key_attno > 0)
		used = bms_add_member(used, info->table->key_attno - FirstLowInvalidHeapAttributeNumber);

	DeparseInit(&d, info->table, baserel->relid, &params);
	DeparseSelect(&d, used, for_modify);
	key_param = DeparseWhere(&d, info->remote_conds, join_key ? join_key : info->key_expr, false);
	limit = pushed_limit(root, baserel, info, local);
	if (limit >= 0)
		DeparseLimit(&d, limit);
	if (for_modify)
		DeparseRowLock(&d);

	return make_foreignscan(tlist, local, baserel->relid, params,
							private_list(&d, key_param, info->key_is_array, false, false,
										 for_modify),
							NIL, NIL, outer_plan);
}

/*
 * is_key_var says whether 'node' is the key column of relation 'relid'.
 */
static bool
is_key_var(Node *node, Index relid, CdForeignTable *table)
{
	node = strip_implicit_coercions(node);
	return IsA(node, Var) && ((Var *) node)->varno == relid &&
		((Var *) node)->varattno == table->key_attno && ((Var *) node)->varlevelsup == 0;
}

/*
 * joined_on_key says whether the rows of relation 'relid' are joined to
 * another relation of the statement by equality of the key column ("UPDATE
 * t ... FROM l WHERE t.key = l.x"): each row an UPDATE or DELETE then
 * changes is routed by its own key, as a row of "key = x" is.
 */
static bool
joined_on_key(PlannerInfo *root, Index relid, CdForeignTable *table)
{
	ListCell   *lc,
			   *lc2;

	if (table->key_attno == 0)
		return false;
	foreach(lc, root->eq_classes)
	{
		EquivalenceClass *ec = lfirst(lc);
		bool		key = false,
					other = false;

		foreach(lc2, ec->ec_members)
		{
			EquivalenceMember *em = lfirst(lc2);

			if (is_key_var((Node *) em->em_expr, relid, table))
				key = true;
			else if (!bms_is_empty(em->em_relids) && !bms_is_member(relid, em->em_relids))
				other = true;
		}
		if (key && other)
			return true;
	}
	foreach(lc, root->simple_rel_array[relid]->joininfo)
	{
		Expr	   *clause = ((RestrictInfo *) lfirst(lc))->clause;
		OpExpr	   *op = (OpExpr *) clause;

		if (!IsA(clause, OpExpr) || list_length(op->args) != 2 ||
			strcmp(get_opname(op->opno), "=") != 0)
			continue;
		if ((is_key_var(linitial(op->args), relid, table) &&
			 !bms_is_member(relid, pull_varnos(root, lsecond(op->args)))) ||
			(is_key_var(lsecond(op->args), relid, table) &&
			 !bms_is_member(relid, pull_varnos(root, linitial(op->args)))))
			return true;
	}
	return false;
}

/*
 * ensure_key_or_multi_shard refuses an UPDATE or DELETE of a sharded table
 * without key equality (with a constant, or a join on the key), which would
 * reach every shard, unless collegedb.allow_multi_shard_modify is on.
 */
static void
ensure_key_or_multi_shard(PlannerInfo *root, Index relid, CmdType op, FdwRelInfo *info)
{
	if (info->key_expr != NULL || info->table->shard != NULL || CollegeAllowMultiShardModify)
		return;
	if (root && joined_on_key(root, relid, info->table))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_CD_CROSS_SHARD_UNSUPPORTED),
			 errmsg("%s on a sharded table needs key equality",
					op == CMD_UPDATE ? "UPDATE" : "DELETE"),
			 errdetail("Without a condition on \"%s\" the statement would reach every shard.",
					   get_attname(info->table->relid, info->table->key_attno, false)),
			 errhint("Add the key to the WHERE clause, or SET collegedb.allow_multi_shard_modify = on.")));
}

/*
 * collegedb_plan_direct_modify sends an UPDATE or DELETE to the shards
 * whole, when every qual and new value can go there.
 */
bool
collegedb_plan_direct_modify(PlannerInfo *root, ModifyTable *plan,
							 Index resultRelation, int subplan_index)
{
	CmdType		op = plan->operation;
	Plan	   *subplan = outerPlan(plan);
	ForeignScan *fscan;
	RelOptInfo *rel;
	FdwRelInfo *info;
	List	   *params = NIL;
	FdwDeparse	d;
	int			key_param;
	bool		returning = plan->returningLists != NIL;
	uint32		reach;
	ListCell   *lc;

	if (op != CMD_UPDATE && op != CMD_DELETE)
		return false;
	if (subplan == NULL || !IsA(subplan, ForeignScan))
		return false;
	fscan = (ForeignScan *) subplan;
	if (fscan->scan.scanrelid != resultRelation)
		return false;
	rel = root->simple_rel_array[resultRelation];
	info = rel->fdw_private;
	/* a qual left to the front must be one some dialect takes: the others then refuse */
	foreach(lc, info->local_conds)
	{
		if (!list_member_ptr(info->remote_conds, lfirst(lc)))
			return false;
	}

	DeparseInit(&d, info->table, resultRelation, &params);
	DeparseModify(&d, op);

	if (op == CMD_UPDATE)
	{
		List	   *tlist;
		List	   *attrs;
		ListCell   *lc2;
		bool		first = true;

		get_translated_update_targetlist(root, resultRelation, &tlist, &attrs);
		forboth(lc, tlist, lc2, attrs)
		{
			TargetEntry *tle = lfirst(lc);
			AttrNumber	attno = lfirst_int(lc2);

			FdwEnsureKeyUnchanged(info->table, attno);
			DeparseAppend(&d, first ? " SET " : ", ");
			DeparseColumn(&d, attno);
			DeparseAppend(&d, " = ");
			(void) DeparseExpr((Node *) tle->expr, &d, true);
			first = false;
		}
	}
	key_param = DeparseWhere(&d, info->remote_conds, info->key_expr, true);

	/*
	 * A shard the statement may reach whose dialect cannot take it whole, or
	 * cannot return the rows it changed: the statement runs row by row
	 * (row_modify.c), its new values and conditions computed here.
	 */
	reach = FdwFleetDialects(info->table);
	for (int i = 0; i < AdapterCount(); i++)
	{
		if ((reach & (1u << i)) &&
			(d.failed[i] || (returning && !AdapterForDialect(i)->caps.returning)))
			return false;
	}
	ensure_key_or_multi_shard(root, resultRelation, op, info);
	if (returning)
		DeparseReturning(&d);

	fscan->scan.plan.qual = NIL;	/* every text that is sent has them all */
	fscan->operation = op;
	fscan->resultRelation = resultRelation;
	fscan->fdw_exprs = params;
	fscan->fdw_private = private_list(&d, key_param, info->key_is_array, returning,
									  plan->canSetTag, false);
	return true;
}

/*
 * collegedb_plan_modify plans the row-by-row path: INSERT, and an UPDATE or
 * DELETE that could not go to the shards whole (row_modify.c), under the
 * same rule of key equality as a whole one.
 */
List *
collegedb_plan_modify(PlannerInfo *root, ModifyTable *plan,
					  Index resultRelation, int subplan_index)
{
	if (plan->operation != CMD_INSERT)
	{
		RelOptInfo *rel = root->simple_rel_array[resultRelation];
		FdwRelInfo *info = rel ? rel->fdw_private : NULL;

		if (info)
			ensure_key_or_multi_shard(root, resultRelation, plan->operation, info);
		return RowModifyPlan(root, plan, resultRelation);
	}
	/* DO UPDATE needs an arbiter index, which no foreign table has */
	if (plan->onConflictAction == ONCONFLICT_UPDATE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("INSERT ... ON CONFLICT DO UPDATE is not supported on collegedb foreign tables"),
				 errhint("Use ON CONFLICT DO NOTHING, or collegedb.run() with the shard's own statement.")));
	return NIL;
}
