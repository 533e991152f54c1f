/*-------------------------------------------------------------------------
 *
 * fdw_plan.c
 *	  Planning scans and modifications of collegedb foreign tables
 *	  (DESIGN.md 7): which quals go to the shards, which key routes them,
 *	  and the statement text for each dialect.
 *
 * Quals that every dialect understands the same way go to the shards:
 * comparisons (=, <>, <, <=, >, >=) and +, -, * of built-in types between
 * columns, constants and parameters, IS [NOT] NULL, AND, OR, NOT.  The rest
 * is evaluated in the front.  Constants and parameters travel as $n
 * parameters (fdw_exprs), evaluated at execution, so a generic plan routes
 * by the parameter's value.  A qual "key = constant or parameter" (or
 * "key = ANY(array)", or IN) routes the scan to the key's shard(s); without
 * one the scan reaches every shard of the read set.
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
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "foreign/foreign.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/appendinfo.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/planmain.h"
#include "optimizer/restrictinfo.h"
#include "parser/parse_coerce.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "catalog/shards.h"
#include "cd_errcodes.h"
#include "collegedb.h"
#include "fdw/fdw.h"

/* what planning learns about a base relation (baserel->fdw_private) */
typedef struct FdwRelInfo
{
	CdForeignTable *table;
	List	   *remote_conds;	/* RestrictInfos that go to the shards */
	List	   *local_conds;	/* RestrictInfos evaluated in the front */
	Expr	   *key_expr;		/* the key's value(s), or NULL */
	bool		key_is_array;
} FdwRelInfo;

/* the statement text being built, once per dialect */
typedef struct Deparse
{
	StringInfoData sql[CD_MAX_DIALECTS];
	Index		relid;
	CdForeignTable *table;
	List	  **params;			/* fdw_exprs */
} Deparse;

static void
append(Deparse *d, const char *text)
{
	for (int i = 0; i < AdapterCount(); i++)
		appendStringInfoString(&d->sql[i], text);
}

static void
append_column(Deparse *d, AttrNumber attno)
{
	for (int i = 0; i < AdapterCount(); i++)
		appendStringInfoString(&d->sql[i],
							   AdapterForDialect(i)->quote_ident(d->table->columns[attno - 1]));
}

static void
append_param(Deparse *d, Expr *expr)
{
	char		buf[16];

	*d->params = lappend(*d->params, expr);
	snprintf(buf, sizeof(buf), "$%d", list_length(*d->params));
	append(d, buf);
}

static void
deparse_init(Deparse *d, CdForeignTable *table, Index relid, List **params)
{
	for (int i = 0; i < AdapterCount(); i++)
		initStringInfo(&d->sql[i]);
	d->table = table;
	d->relid = relid;
	d->params = params;
}

/*
 * pushable_operator says whether an operator means the same in every
 * dialect: a built-in comparison, or +, -, * of numbers.  Ordering of
 * strings is left to PostgreSQL, since each shard sorts by its own
 * collation; equality is sent (see README: "Sharded foreign tables").
 */
static bool
pushable_operator(Oid opno)
{
	HeapTuple	tuple;
	Form_pg_operator op;
	bool		ok = false;

	if (opno >= FirstGenbkiObjectId)
		return false;
	tuple = SearchSysCache1(OPEROID, ObjectIdGetDatum(opno));
	if (!HeapTupleIsValid(tuple))
		return false;
	op = (Form_pg_operator) GETSTRUCT(tuple);
	if (op->oprkind == 'b' && op->oprleft < FirstGenbkiObjectId && op->oprright < FirstGenbkiObjectId)
	{
		const char *name = NameStr(op->oprname);

		if (strcmp(name, "=") == 0 || strcmp(name, "<>") == 0)
			ok = true;
		else if (strcmp(name, "<") == 0 || strcmp(name, "<=") == 0 ||
				 strcmp(name, ">") == 0 || strcmp(name, ">=") == 0)
			ok = !type_is_collatable(op->oprleft);
		else if ((strcmp(name, "+") == 0 || strcmp(name, "-") == 0 || strcmp(name, "*") == 0) &&
				 TypeCategory(op->oprresult) == TYPCATEGORY_NUMERIC)
			ok = true;
	}
	ReleaseSysCache(tuple);
	return ok;
}

/*
 * deparse_expr appends an expression to the statement, or returns false
 * (leaving junk behind: callers deparse into a scratch Deparse first) when
 * it cannot go to the shards.
 */
static bool
deparse_expr(Node *node, Deparse *d)
{
	if (node == NULL)
		return false;
	switch (nodeTag(node))
	{
		case T_Var:
			{
				Var		   *var = (Var *) node;

				if (var->varno != d->relid || var->varlevelsup != 0 || var->varattno <= 0 ||
					d->table->columns[var->varattno - 1] == NULL)
					return false;
				append_column(d, var->varattno);
				return true;
			}
		case T_Const:
			{
				Const	   *c = (Const *) node;

				if (c->constisnull)
					append(d, "NULL");
				else if (c->consttype >= FirstGenbkiObjectId ||
						 type_is_array(c->consttype))
					return false;
				else
					append_param(d, (Expr *) node);
				return true;
			}
		case T_Param:
			{
				Param	   *p = (Param *) node;

				if ((p->paramkind != PARAM_EXTERN && p->paramkind != PARAM_EXEC) ||
					p->paramtype >= FirstGenbkiObjectId || type_is_array(p->paramtype))
					return false;
				append_param(d, (Expr *) node);
				return true;
			}
		case T_RelabelType:
			return deparse_expr((Node *) ((RelabelType *) node)->arg, d);
		case T_FuncExpr:
			/* a length coercion (numeric(12,2), varchar(n)): the shard's column applies its own */
			if (!exprIsLengthCoercion(node, NULL))
				return false;
			return deparse_expr(linitial(((FuncExpr *) node)->args), d);
		case T_OpExpr:
			{
				OpExpr	   *op = (OpExpr *) node;

				if (list_length(op->args) != 2 || !pushable_operator(op->opno))
					return false;
				append(d, "(");
				if (!deparse_expr(linitial(op->args), d))
					return false;
				append(d, " ");
				append(d, get_opname(op->opno));
				append(d, " ");
				if (!deparse_expr(lsecond(op->args), d))
					return false;
				append(d, ")");
				return true;
			}
		case T_NullTest:
			{
				NullTest   *nt = (NullTest *) node;

				if (nt->argisrow)
					return false;
				append(d, "(");
				if (!deparse_expr((Node *) nt->arg, d))
					return false;
				append(d, nt->nulltesttype == IS_NULL ? " IS NULL)" : " IS NOT NULL)");
				return true;
			}
		case T_BoolExpr:
			{
				BoolExpr   *b = (BoolExpr *) node;
				ListCell   *lc;
				bool		first = true;

				append(d, "(");
				if (b->boolop == NOT_EXPR)
					append(d, "NOT ");
				foreach(lc, b->args)
				{
					if (!first)
						append(d, b->boolop == AND_EXPR ? " AND " : " OR ");
					if (!deparse_expr(lfirst(lc), d))
						return false;
					first = false;
				}
				append(d, ")");
				return true;
			}
		default:
			return false;
	}
}

/*
 * is_pushable says whether an expression can go to the shards.
 */
static bool
is_pushable(Node *node, CdForeignTable *table, Index relid)
{
	Deparse		scratch;
	List	   *params = NIL;

	deparse_init(&scratch, table, relid, &params);
	return deparse_expr(node, &scratch);
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
			(IsA(r, Const) || IsA(r, Param)))
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
		else if (is_pushable((Node *) ri->clause, info->table, baserel->relid))
			info->remote_conds = lappend(info->remote_conds, ri);
		else
			info->local_conds = lappend(info->local_conds, ri);
	}
	baserel->fdw_private = info;
	baserel->rows = info->key_expr ? (info->key_is_array ? 10 : 1) : 1000;
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
}

/*
 * deparse_where appends " WHERE ..." with the remote quals and the key
 * (as the next parameter), and returns the key's parameter number.
 */
static int
deparse_where(Deparse *d, FdwRelInfo *info, List *remote_conds)
{
	bool		first = true;
	int			key_param = 0;
	ListCell   *lc;

	foreach(lc, remote_conds)
	{
		Expr	   *clause = lfirst(lc);

		if (IsA(clause, RestrictInfo))
			clause = ((RestrictInfo *) clause)->clause;
		append(d, first ? " WHERE " : " AND ");
		if (!deparse_expr((Node *) clause, d))
			elog(ERROR, "a qual that can go to the shards did not deparse");
		first = false;
	}
	if (info->key_expr)
	{
		append(d, first ? " WHERE " : " AND ");
		append_column(d, info->table->key_attno);
		append(d, " = ");
		append_param(d, info->key_expr);
		key_param = list_length(*d->params);
	}
	return key_param;
}

static List *
private_list(Deparse *d, int key_param, bool key_is_array, bool returning, bool set_processed)
{
	List	   *texts = NIL;
	List	   *out = NIL;

	for (int i = 0; i < AdapterCount(); i++)
		texts = lappend(texts, makeString(d->sql[i].data));
	out = lappend(out, texts);
	out = lappend(out, makeInteger(key_param));
	out = lappend(out, makeBoolean(key_is_array));
	out = lappend(out, makeBoolean(returning));
	out = lappend(out, makeBoolean(set_processed));
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
 * collegedb_get_plan builds the scan: SELECT the columns the query uses
 * (NULL for the others), WHERE the remote quals and the key, one text per
 * dialect.
 */
ForeignScan *
collegedb_get_plan(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid,
				   ForeignPath *best_path, List *tlist, List *scan_clauses,
				   Plan *outer_plan)
{
	FdwRelInfo *info = baserel->fdw_private;
	List	   *params = NIL;
	List	   *local = extract_actual_clauses(info->local_conds, false);
	Bitmapset  *used = NULL;
	Deparse		d;
	int			key_param;
	int64		limit;

	pull_varattnos((Node *) baserel->reltarget->exprs, baserel->relid, &used);
	pull_varattnos((Node *) local, baserel->relid, &used);
	if (bms_is_member(0 - FirstLowInvalidHeapAttributeNumber, used))
		used = NULL;			/* a whole-row reference */
	else if (used == NULL)
		used = bms_make_singleton(0 - FirstLowInvalidHeapAttributeNumber); /* no column */

	deparse_init(&d, info->table, baserel->relid, &params);
	for (int i = 0; i < AdapterCount(); i++)
	{
		const CdAdapter *adapter = AdapterForDialect(i);

		appendStringInfo(&d.sql[i], "SELECT %s FROM %s",
						 FdwColumnList(info->table, adapter, used),
						 FdwQualifiedName(info->table, adapter));
	}
	key_param = deparse_where(&d, info, info->remote_conds);
	limit = pushed_limit(root, baserel, info, local);
	if (limit >= 0)
		for (int i = 0; i < AdapterCount(); i++)
			appendStringInfo(&d.sql[i], " LIMIT " INT64_FORMAT, limit);

	return make_foreignscan(tlist, local, baserel->relid, params,
							private_list(&d, key_param, info->key_is_array, false, false),
							NIL, NIL, outer_plan);
}

/*
 * append_returning appends " RETURNING <every column>" where the dialect can
 * (CdCapabilities.returning; elsewhere the text is left without, and
 * execution refuses it).
 */
static void
append_returning(Deparse *d)
{
	for (int i = 0; i < AdapterCount(); i++)
	{
		if (!AdapterForDialect(i)->caps.returning)
			continue;
		appendStringInfo(&d->sql[i], " RETURNING %s",
						 FdwColumnList(d->table, AdapterForDialect(i), NULL));
	}
}

/*
 * ensure_key_or_multi_shard refuses an UPDATE or DELETE of a sharded table
 * without key equality, which would reach every shard, unless
 * collegedb.allow_multi_shard_modify is on.
 */
static void
ensure_key_or_multi_shard(CmdType op, FdwRelInfo *info)
{
	if (info->key_expr != NULL || info->table->shard != NULL || CollegeAllowMultiShardModify)
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
	Deparse		d;
	int			key_param;
	bool		returning = plan->returningLists != NIL;

	if (op != CMD_UPDATE && op != CMD_DELETE)
		return false;
	if (subplan == NULL || !IsA(subplan, ForeignScan))
		return false;
	fscan = (ForeignScan *) subplan;
	if (fscan->scan.scanrelid != resultRelation || fscan->scan.plan.qual != NIL)
		return false;
	rel = root->simple_rel_array[resultRelation];
	info = rel->fdw_private;

	deparse_init(&d, info->table, resultRelation, &params);
	for (int i = 0; i < AdapterCount(); i++)
		appendStringInfo(&d.sql[i], "%s %s", op == CMD_UPDATE ? "UPDATE" : "DELETE FROM",
						 FdwQualifiedName(info->table, AdapterForDialect(i)));

	if (op == CMD_UPDATE)
	{
		List	   *tlist;
		List	   *attrs;
		ListCell   *lc,
				   *lc2;
		bool		first = true;

		get_translated_update_targetlist(root, resultRelation, &tlist, &attrs);
		forboth(lc, tlist, lc2, attrs)
		{
			TargetEntry *tle = lfirst(lc);
			AttrNumber	attno = lfirst_int(lc2);

			if (attno == info->table->key_attno)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot change the key column of a sharded table"),
						 errhint("Delete the row and insert it under its new key.")));
			if (!is_pushable((Node *) tle->expr, info->table, resultRelation))
				return false;
			append(&d, first ? " SET " : ", ");
			append_column(&d, attno);
			append(&d, " = ");
			(void) deparse_expr((Node *) tle->expr, &d);
			first = false;
		}
	}
	key_param = deparse_where(&d, info, info->remote_conds);
	ensure_key_or_multi_shard(op, info);
	if (returning)
		append_returning(&d);

	fscan->operation = op;
	fscan->resultRelation = resultRelation;
	fscan->fdw_exprs = params;
	fscan->fdw_private = private_list(&d, key_param, info->key_is_array, returning,
									  plan->canSetTag);
	return true;
}

/*
 * collegedb_plan_modify plans the row-by-row path: INSERT.  An UPDATE or
 * DELETE that could not go to the shards whole is refused.
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
			ensure_key_or_multi_shard(plan->operation, info);
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("this %s cannot be sent to the shards",
						plan->operation == CMD_UPDATE ? "UPDATE" : "DELETE"),
				 errdetail("Its conditions or new values use expressions, joins or functions that collegedb does not send to shards."),
				 errhint("Use comparisons and +, -, * of columns, constants and parameters, or collegedb.run().")));
	}
	if (plan->onConflictAction != ONCONFLICT_NONE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("INSERT ... ON CONFLICT is not supported on collegedb foreign tables")));
	return NIL;
}
