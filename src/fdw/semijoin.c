/*-------------------------------------------------------------------------
 *
 * semijoin.c
 *	  "key IN (SELECT ...)" on a sharded foreign table as a list of keys:
 *	  one statement per shard instead of one keyed read per key.
 *
 * PostgreSQL plans "t.key IN (SELECT x FROM l)" as a semi join: a nested
 * loop of keyed reads (join_paths.c: one remote statement per key) or a
 * hash join over a scan of every shard.  The FDW API offers no batch of
 * outer rows.  When the subquery does not depend on the outer query, the
 * same condition can be written "t.key = ANY(ARRAY(SELECT x FROM l))":
 * PostgreSQL evaluates the ARRAY once (an InitPlan), and the scan routes
 * its elements as any list of keys, grouped per shard, the shards read at
 * once (fdw_keys.c).  The two forms are the same condition: x IN (q) is
 * defined as x = ANY (q), and ANY over the rows of q or over the array of
 * them gives true, false and NULL alike (no row: false; no match and a
 * NULL: NULL); a semi join never repeats a row of t, nor does ANY.
 *
 * The planner hook rewrites, before planning, each such condition that is
 * a top-level conjunct of the WHERE of a SELECT (or of a subquery or CTE
 * in it) when: the left side is the key column of a sharded table (on the
 * router server) of that query level, the operator is "=" with the
 * subquery's column exactly as its right input, and the subquery has no
 * reference to an outer level.
 *
 * A join of the key with a column of a plain local table ("l JOIN t ON
 * t.key = l.x", a WHERE, the ON of an outer join whose nullable side t
 * is) gets the condition it implies,
 * "t.key = ANY(ARRAY(SELECT l.x FROM l))", beside it, while l has fewer
 * rows than t by the planner's counts: t is then read by l's keys, one
 * statement per shard, and joined to l as before (a hash join), instead of
 * one keyed read per row of l or a scan of every shard.
 *
 * collegedb.semi_join_key_lists = off leaves both forms as they were (a
 * subquery of millions of keys routes each of them).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_class.h"
#include "foreign/foreign.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "optimizer/planner.h"
#include "optimizer/prep.h"
#include "parser/parsetree.h"
#include "rewrite/rewriteManip.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "collegedb.h"
#include "fdw/fdw.h"

static planner_hook_type prev_planner = NULL;

/*
 * is_router_key says whether 'var' is the key column of a sharded foreign
 * table of collegedb's router server, at the level of 'query'.
 */
static bool
is_router_key(Query *query, Var *var)
{
	RangeTblEntry *rte;
	Oid			fdwid;
	CdForeignTable *table;

	if (var->varlevelsup != 0 || var->varno < 1 || var->varno > list_length(query->rtable))
		return false;
	rte = rt_fetch(var->varno, query->rtable);
	if (rte->rtekind != RTE_RELATION || rte->relkind != RELKIND_FOREIGN_TABLE)
		return false;
	fdwid = get_foreign_data_wrapper_oid("collegedb", true);
	if (!OidIsValid(fdwid) ||
		GetForeignServer(GetForeignTable(rte->relid)->serverid)->fdwid != fdwid)
		return false;
	table = FdwTableInfo(rte->relid);
	return table->shard == NULL && table->key_attno != 0 && table->key_attno == var->varattno;
}

/*
 * key_in_array builds "key op ANY(ARRAY(subselect))".
 */
static Node *
key_in_array(Oid opno, Oid inputcollid, Node *key, Node *subselect, int location)
{
	SubLink    *array = makeNode(SubLink);
	ScalarArrayOpExpr *saop = makeNode(ScalarArrayOpExpr);

	array->subLinkType = ARRAY_SUBLINK;
	array->subLinkId = 0;
	array->testexpr = NULL;
	array->operName = NIL;
	array->subselect = subselect;
	array->location = location;

	saop->opno = opno;
	saop->opfuncid = get_opcode(opno);
	saop->hashfuncid = InvalidOid;
	saop->negfuncid = InvalidOid;
	saop->useOr = true;
	saop->inputcollid = inputcollid;
	saop->args = list_make2(key, array);
	saop->location = location;
	return (Node *) saop;
}

/*
 * as_key_list returns "key = ANY(ARRAY(subquery))" for a conjunct "key IN
 * (subquery)" that qualifies (see the header), else NULL.
 */
static Node *
as_key_list(Query *query, Node *clause)
{
	SubLink    *sublink = (SubLink *) clause;
	OpExpr	   *op;
	Node	   *left;
	Param	   *right;
	Oid			array_type;

	if (!IsA(clause, SubLink) || sublink->subLinkType != ANY_SUBLINK ||
		sublink->testexpr == NULL || !IsA(sublink->testexpr, OpExpr))
		return NULL;
	op = (OpExpr *) sublink->testexpr;
	if (list_length(op->args) != 2 || strcmp(get_opname(op->opno), "=") != 0)
		return NULL;
	left = linitial(op->args);
	right = lsecond(op->args);
	if (!IsA(right, Param) || right->paramkind != PARAM_SUBLINK ||
		!IsA(strip_implicit_coercions(left), Var) ||
		!is_router_key(query, (Var *) strip_implicit_coercions(left)))
		return NULL;
	/* the subquery must not read the outer query's columns */
	if (contain_vars_of_level(sublink->subselect, 1))
		return NULL;
	array_type = get_array_type(right->paramtype);
	if (!OidIsValid(array_type))
		return NULL;

	return key_in_array(op->opno, op->inputcollid, left, sublink->subselect,
						sublink->location);
}

/*
 * table_rows is the planner's row count of a relation: its ANALYZE's, else
 * for a sharded table the shards' estimate (estimate.c); -1 when unknown.
 */
static double
table_rows(Oid relid, bool sharded)
{
	HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	double		rows = -1;

	if (HeapTupleIsValid(tuple))
	{
		rows = ((Form_pg_class) GETSTRUCT(tuple))->reltuples;
		ReleaseSysCache(tuple);
	}
	if (rows < 0 && sharded && !FdwRemoteRows(FdwTableInfo(relid), &rows))
		rows = -1;
	return rows;
}

/*
 * local_keys returns, for a join condition "key = l.x" (either way round)
 * between a sharded table's key and a column of a plain local table 'l'
 * of the same query level, the condition it implies, "key = ANY(ARRAY(
 * SELECT l.x FROM l))", else NULL.  Only while l is smaller than the
 * sharded table by the planner's counts (both known): a list of keys
 * routes each of them, a scan of every shard reads each row once.  Not for
 * a table under row security (the list is read without its policies) or
 * sampled.
 */
static Node *
local_keys(Query *query, Node *clause, Relids nullable)
{
	OpExpr	   *op = (OpExpr *) clause;
	Node	   *key;
	Node	   *other;
	Var		   *key_var;
	Var		   *other_var;
	RangeTblEntry *rte;
	Oid			opno;
	Oid			array_type;
	Query	   *sub;
	RangeTblEntry *sub_rte;
	double		local_rows,
				sharded_rows;

	if (!IsA(clause, OpExpr) || list_length(op->args) != 2)
		return NULL;
	for (int side = 0; side < 2; side++)
	{
		key = list_nth(op->args, side);
		other = list_nth(op->args, 1 - side);
		key_var = (Var *) strip_implicit_coercions(key);
		other_var = (Var *) strip_implicit_coercions(other);
		if (!IsA(key_var, Var) || !IsA(other_var, Var) || other_var->varlevelsup != 0 ||
			other_var->varno == key_var->varno || other_var->varattno <= 0 ||
			(nullable != NULL && !bms_is_member(key_var->varno, nullable)) ||
			!is_router_key(query, key_var) || strcmp(get_opname(op->opno), "=") != 0)
			continue;
		rte = rt_fetch(other_var->varno, query->rtable);
		if (rte->rtekind != RTE_RELATION || rte->securityQuals != NIL || rte->tablesample ||
			(rte->relkind != RELKIND_RELATION && rte->relkind != RELKIND_MATVIEW &&
			 rte->relkind != RELKIND_PARTITIONED_TABLE))
			continue;
		opno = side == 0 ? op->opno : get_commutator(op->opno);
		array_type = get_array_type(exprType(other));
		if (!OidIsValid(opno) || !OidIsValid(array_type))
			continue;
		local_rows = table_rows(rte->relid, false);
		sharded_rows = table_rows(rt_fetch(key_var->varno, query->rtable)->relid, true);
		if (local_rows < 0 || sharded_rows < 0 || local_rows >= sharded_rows)
			continue;

		/* SELECT l.x FROM l, l as the query has it (its permissions) */
		sub = makeNode(Query);
		sub->commandType = CMD_SELECT;
		sub->querySource = QSRC_ORIGINAL;
		sub->canSetTag = true;
		sub_rte = copyObject(rte);
		sub->rtable = list_make1(sub_rte);
		sub->jointree = makeFromExpr(list_make1(makeNode(RangeTblRef)), NULL);
		((RangeTblRef *) linitial(sub->jointree->fromlist))->rtindex = 1;
		other = copyObject(other);
		ChangeVarNodes(other, other_var->varno, 1, 0);
		sub->targetList = list_make1(makeTargetEntry((Expr *) other, 1, "key", false));

		query->hasSubLinks = true;
		return key_in_array(opno, op->inputcollid, copyObject(key), (Node *) sub, -1);
	}
	return NULL;
}

/*
 * with_local_keys adds to 'quals' (a WHERE or a join's ON) the condition
 * that each join on the key with a local table implies (local_keys).  The
 * quals mean the same with it: where "key = l.x" holds, key is among l's
 * values.  'nullable' (an outer join's ON): only for a sharded table of
 * those relations, whose scan the condition then narrows; a preserved
 * side's rows are all read anyway.
 */
static Node *
with_local_keys(Query *query, Node *quals, Relids nullable)
{
	List	   *conjuncts = make_ands_implicit((Expr *) quals);
	List	   *added = NIL;
	ListCell   *lc;

	foreach(lc, conjuncts)
	{
		Node	   *implied = local_keys(query, lfirst(lc), nullable);

		if (implied != NULL)
			added = lappend(added, implied);
	}
	if (added == NIL)
		return quals;
	return (Node *) make_ands_explicit(list_concat(conjuncts, added));
}

/*
 * rewrite_joins applies with_local_keys to every WHERE and ON of a
 * query's join tree.
 */
static void
rewrite_joins(Query *query, Node *node)
{
	ListCell   *lc;

	if (node == NULL)
		return;
	if (IsA(node, FromExpr))
	{
		FromExpr   *f = (FromExpr *) node;

		foreach(lc, f->fromlist)
			rewrite_joins(query, lfirst(lc));
		f->quals = with_local_keys(query, f->quals, NULL);
	}
	else if (IsA(node, JoinExpr))
	{
		JoinExpr   *j = (JoinExpr *) node;

		rewrite_joins(query, j->larg);
		rewrite_joins(query, j->rarg);
		if (j->jointype == JOIN_INNER)
			j->quals = with_local_keys(query, j->quals, NULL);
		else if (j->jointype == JOIN_LEFT || j->jointype == JOIN_RIGHT)
		{
			Relids		nullable = get_relids_in_jointree(j->jointype == JOIN_LEFT ?
														  j->rarg : j->larg, false);

			if (!bms_is_empty(nullable))
				j->quals = with_local_keys(query, j->quals, nullable);
		}
	}
}

static void rewrite_query(Query *query);

/*
 * rewrite_quals rewrites the qualifying conjuncts of a WHERE.
 */
static Node *
rewrite_quals(Query *query, Node *quals)
{
	Node	   *key_list;
	ListCell   *lc;

	if (quals == NULL)
		return NULL;
	if (is_andclause(quals))
	{
		foreach(lc, ((BoolExpr *) quals)->args)
		{
			if ((key_list = as_key_list(query, lfirst(lc))) != NULL)
				lfirst(lc) = key_list;
		}
		return quals;
	}
	if ((key_list = as_key_list(query, quals)) != NULL)
		return key_list;
	return quals;
}

/*
 * rewrite_query rewrites a SELECT's WHERE, and those of its subqueries in
 * FROM and WITH.
 */
static void
rewrite_query(Query *query)
{
	ListCell   *lc;

	if (query->commandType != CMD_SELECT)
		return;
	if (query->jointree)
	{
		query->jointree->quals = rewrite_quals(query, query->jointree->quals);
		rewrite_joins(query, (Node *) query->jointree);
	}
	foreach(lc, query->rtable)
	{
		RangeTblEntry *rte = lfirst(lc);

		if (rte->rtekind == RTE_SUBQUERY)
			rewrite_query(rte->subquery);
	}
	foreach(lc, query->cteList)
	{
		CommonTableExpr *cte = lfirst(lc);

		if (IsA(cte->ctequery, Query))
			rewrite_query((Query *) cte->ctequery);
	}
}

static PlannedStmt *
semi_join_planner(Query *parse, const char *query_string, int cursorOptions,
				  ParamListInfo boundParams)
{
	if (CollegeSemiJoinKeyLists)
		rewrite_query(parse);
	if (prev_planner)
		return prev_planner(parse, query_string, cursorOptions, boundParams);
	return standard_planner(parse, query_string, cursorOptions, boundParams);
}

/*
 * FdwSemiJoinInit installs the planner hook.
 */
void
FdwSemiJoinInit(void)
{
	prev_planner = planner_hook;
	planner_hook = semi_join_planner;
}
