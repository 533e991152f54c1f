/*-------------------------------------------------------------------------
 *
 * shippable.c
 *	  Which expressions may go to a shard of a dialect, and how they are
 *	  written there: the shippability rule, as postgres_fdw's shippable.c
 *	  and foreign_expr_walker.
 *
 * An operator, function, cast, collation or constant goes to a shard only
 * where its adapter declares (CdExprRules, adapters/adapter.h) that the
 * dialect computes exactly what PostgreSQL computes for the front's types,
 * errors included: a comparison of a family the dialect compares exactly,
 * arithmetic whose overflow raises as PostgreSQL's does, text comparisons
 * written byte for byte (and ordered only when the front orders under "C"),
 * LIKE where the dialect has PostgreSQL's.  What no rule allows is left to
 * the front (fdw_plan.c keeps it as a local qual; EXPLAIN shows it as the
 * scan's Filter).  Each dialect's text is decided on its own, so that a
 * condition one dialect cannot compute still goes to the others (and is
 * checked on the front as well).
 *
 * This file does not decide which quals route the scan (fdw_plan.c) nor
 * build the statement around the expression (deparse.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/transam.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/pg_locale.h"
#include "utils/syscache.h"

#include "catalog/shards.h"
#include "cd_errcodes.h"
#include "fdw/fdw.h"

/* the most elements of an IN list written out as a chain of comparisons */
#define SHIP_MAX_LIST 100

/* the longest value a range check repeats (CdExprRules.int_checked) */
#define SHIP_MAX_CHECKED 400

typedef struct ShipContext
{
	FdwDeparse *d;
	CdDialect	dialect;
	const CdExprRules *rules;
	bool		assignment;		/* the top of an UPDATE's new value */
} ShipContext;

static bool ship(Node *node, ShipContext *cx, StringInfo out);

/*
 * ShippableFamily maps a front type onto the family the rules speak of.
 */
CdTypeFamily
ShippableFamily(Oid type)
{
	switch (type)
	{
		case BOOLOID:
			return CD_FAMILY_BOOL;
		case INT2OID:
			return CD_FAMILY_INT2;
		case INT4OID:
			return CD_FAMILY_INT4;
		case INT8OID:
			return CD_FAMILY_INT8;
		case NUMERICOID:
			return CD_FAMILY_NUMERIC;
		case FLOAT4OID:
			return CD_FAMILY_FLOAT4;
		case FLOAT8OID:
			return CD_FAMILY_FLOAT8;
		case TEXTOID:
		case VARCHAROID:
			return CD_FAMILY_TEXT;
		case DATEOID:
			return CD_FAMILY_DATE;
		case TIMESTAMPOID:
			return CD_FAMILY_TIMESTAMP;
		case TIMESTAMPTZOID:
			return CD_FAMILY_TIMESTAMPTZ;
		case UUIDOID:
			return CD_FAMILY_UUID;
		case BYTEAOID:
			return CD_FAMILY_BYTEA;
		default:
			return CD_FAMILY_OTHER;
	}
}

static bool
family_is_int32(CdTypeFamily f)
{
	return f == CD_FAMILY_INT2 || f == CD_FAMILY_INT4;
}

static bool
family_is_integer(CdTypeFamily f)
{
	return family_is_int32(f) || f == CD_FAMILY_INT8;
}

static bool
is_leaf(Node *node)
{
	while (IsA(node, RelabelType))
		node = (Node *) ((RelabelType *) node)->arg;
	return IsA(node, Var) || IsA(node, Const) || IsA(node, Param);
}

/*
 * ship_operands deparses a binary operator's two operands on their own.
 */
static bool
ship_operands(List *args, ShipContext *cx, StringInfo l, StringInfo r)
{
	ShipContext inner = *cx;

	inner.assignment = false;
	initStringInfo(l);
	initStringInfo(r);
	return ship(linitial(args), &inner, l) && ship(lsecond(args), &inner, r);
}

/*
 * ship_text_operator writes a comparison or LIKE of text by the dialect's
 * format, under the rules of the front's collation: equality and <> are
 * byte equality under any deterministic collation, ordering only under
 * "C", LIKE compares characters exactly whatever the collation.
 */
static bool
ship_text_operator(const char *name, List *args, Oid collid, ShipContext *cx,
				   StringInfo out)
{
	const char *format = NULL;
	const char *word = name;
	StringInfoData l,
				r;

	if (!OidIsValid(collid) || !get_collation_isdeterministic(collid))
		return false;
	if (strcmp(name, "=") == 0)
		format = cx->rules->text_equal;
	else if (strcmp(name, "<>") == 0)
		format = cx->rules->text_compare;
	else if (strcmp(name, "<") == 0 || strcmp(name, "<=") == 0 ||
			 strcmp(name, ">") == 0 || strcmp(name, ">=") == 0)
		format = lc_collate_is_c(collid) ? cx->rules->text_compare : NULL;
	else if (strcmp(name, "~~") == 0 || strcmp(name, "!~~") == 0)
	{
		format = cx->rules->text_like;
		word = name[0] == '!' ? "NOT LIKE" : "LIKE";
	}
	if (format == NULL || !ship_operands(args, cx, &l, &r))
		return false;
	appendStringInfoChar(out, '(');
	appendStringInfo(out, format, l.data, r.data, word);
	appendStringInfoChar(out, ')');
	return true;
}

/*
 * ship_operator writes a binary operator where the dialect computes it as
 * PostgreSQL does.
 */
static bool
ship_operator(Oid opno, List *args, Oid collid, ShipContext *cx, StringInfo out)
{
	HeapTuple	tuple;
	Form_pg_operator op;
	char		name[NAMEDATALEN];
	CdTypeFamily lf,
				rf,
				resf;
	bool		collatable;
	bool		ok = false;
	const char *checked = NULL;
	StringInfoData l,
				r;

	if (opno >= FirstGenbkiObjectId || list_length(args) != 2)
		return false;
	tuple = SearchSysCache1(OPEROID, ObjectIdGetDatum(opno));
	if (!HeapTupleIsValid(tuple))
		return false;
	op = (Form_pg_operator) GETSTRUCT(tuple);
	strlcpy(name, NameStr(op->oprname), sizeof(name));
	lf = ShippableFamily(op->oprleft);
	rf = ShippableFamily(op->oprright);
	resf = ShippableFamily(op->oprresult);
	collatable = type_is_collatable(op->oprleft) || type_is_collatable(op->oprright);
	ReleaseSysCache(tuple);

	if (collatable)
		return lf == CD_FAMILY_TEXT && rf == CD_FAMILY_TEXT &&
			ship_text_operator(name, args, collid, cx, out);

	if (cx->rules->builtin)
		ok = op_volatile(opno) == PROVOLATILE_IMMUTABLE;
	else if (strcmp(name, "=") == 0 || strcmp(name, "<>") == 0 ||
			 strcmp(name, "<") == 0 || strcmp(name, "<=") == 0 ||
			 strcmp(name, ">") == 0 || strcmp(name, ">=") == 0)
		ok = (cx->rules->compare & CD_FAMILY_BIT(lf)) &&
			(cx->rules->compare & CD_FAMILY_BIT(rf)) &&
			(lf == rf || (family_is_integer(lf) && family_is_integer(rf)));
	else if (strcmp(name, "+") == 0 || strcmp(name, "-") == 0 || strcmp(name, "*") == 0)
	{
		if ((cx->rules->arith & CD_FAMILY_BIT(resf)) && resf != CD_FAMILY_OTHER &&
			(lf == resf || family_is_integer(lf)) && (rf == resf || family_is_integer(rf)))
			ok = true;
		else if (family_is_int32(resf) && family_is_int32(lf) && family_is_int32(rf))
		{
			if (cx->assignment && cx->rules->store_checked &&
				is_leaf(linitial(args)) && is_leaf(lsecond(args)))
				ok = true;		/* the column's range check is PostgreSQL's */
			else if (cx->rules->int_checked)
			{
				ok = true;
				checked = cx->rules->int_checked;
			}
		}
		else if (resf == CD_FAMILY_INT8 && family_is_integer(lf) && family_is_integer(rf) &&
				 cx->rules->int8_checked)
		{
			ok = true;
			checked = cx->rules->int8_checked;
		}
	}
	if (!ok || !ship_operands(args, cx, &l, &r))
		return false;
	if (checked)
	{
		char	   *value = psprintf("(%s %s %s)", l.data, name, r.data);
		bool		int2 = resf == CD_FAMILY_INT2;

		/* the check repeats its value: deep nests are left to the front */
		if (strlen(value) > SHIP_MAX_CHECKED)
			return false;

		appendStringInfo(out, checked, value,
						 int2 ? "-32768" : "-2147483648", int2 ? "32767" : "2147483647");
	}
	else
		appendStringInfo(out, "(%s %s %s)", l.data, name, r.data);
	return true;
}

/*
 * list_elements returns an IN list's elements as constants, made once per
 * list and statement so that every dialect's text numbers them alike.
 */
static List *
list_elements(ScalarArrayOpExpr *saop, Const *array, FdwDeparse *d)
{
	ListCell   *lc1,
			   *lc2;
	ArrayType  *arr;
	Oid			elemtype;
	int16		typlen;
	bool		typbyval;
	char		typalign;
	Datum	   *values;
	bool	   *nulls;
	int			n;
	List	   *elements = NIL;

	forboth(lc1, d->list_owners, lc2, d->list_elements)
	{
		if (lfirst(lc1) == saop)
			return lfirst(lc2);
	}
	arr = DatumGetArrayTypeP(array->constvalue);
	elemtype = ARR_ELEMTYPE(arr);
	get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
	deconstruct_array(arr, elemtype, typlen, typbyval, typalign, &values, &nulls, &n);
	if (n > SHIP_MAX_LIST)
		return NIL;
	for (int i = 0; i < n; i++)
		elements = lappend(elements,
						   makeConst(elemtype, -1, array->constcollid, typlen,
									 nulls[i] ? (Datum) 0 : values[i], nulls[i], typbyval));
	if (elements == NIL)
		elements = list_make1(NULL);	/* an empty list: no elements, but known */
	d->list_owners = lappend(d->list_owners, saop);
	d->list_elements = lappend(d->list_elements, elements);
	return elements;
}

/*
 * ship_list writes "x op ANY/ALL (constant array)" as a chain of the
 * operator's comparisons joined by OR (ANY) or AND (ALL), which has the
 * same three-valued answer, NULL elements included.
 */
static bool
ship_list(ScalarArrayOpExpr *saop, ShipContext *cx, StringInfo out)
{
	Node	   *arrayarg = lsecond(saop->args);
	List	   *elements;
	ListCell   *lc;
	bool		first = true;

	if (!IsA(arrayarg, Const) || ((Const *) arrayarg)->constisnull)
		return false;
	elements = list_elements(saop, (Const *) arrayarg, cx->d);
	if (elements == NIL)
		return false;
	if (linitial(elements) == NULL)
	{
		appendStringInfoString(out, saop->useOr ? "(1 = 0)" : "(1 = 1)");
		return true;
	}
	appendStringInfoChar(out, '(');
	foreach(lc, elements)
	{
		if (!first)
			appendStringInfoString(out, saop->useOr ? " OR " : " AND ");
		if (!ship_operator(saop->opno, list_make2(linitial(saop->args), lfirst(lc)),
						   saop->inputcollid, cx, out))
			return false;
		first = false;
	}
	appendStringInfoChar(out, ')');
	return true;
}

/*
 * ship_function writes a function call or cast: a length coercion where the
 * column's store applies it or the dialect is PostgreSQL, an implicit
 * widening of an integer where the dialect compares across the two types
 * exactly, and (PostgreSQL) any immutable built-in function of
 * non-collatable arguments.
 */
static bool
ship_function(FuncExpr *fe, ShipContext *cx, StringInfo out)
{
	int32		typmod;
	ListCell   *lc;
	bool		first = true;

	if (exprIsLengthCoercion((Node *) fe, &typmod))
	{
		StringInfoData arg;

		if (cx->assignment && cx->rules->store_checked &&
			fe->funcformat == COERCE_IMPLICIT_CAST)
			return ship(linitial(fe->args), cx, out);
		if (!cx->rules->builtin)
			return false;
		initStringInfo(&arg);
		if (!ship(linitial(fe->args), cx, &arg))
			return false;
		appendStringInfo(out, "(%s)::%s", arg.data,
						 format_type_with_typemod(fe->funcresulttype, typmod));
		return true;
	}
	if (fe->funcformat == COERCE_IMPLICIT_CAST && list_length(fe->args) == 1 &&
		family_is_int32(ShippableFamily(exprType(linitial(fe->args)))) &&
		(cx->rules->int_widening & CD_FAMILY_BIT(ShippableFamily(fe->funcresulttype))))
		return ship(linitial(fe->args), cx, out);

	if (!cx->rules->builtin || fe->funcid >= FirstGenbkiObjectId || fe->funcretset ||
		fe->funcvariadic || OidIsValid(fe->inputcollid) ||
		func_volatile(fe->funcid) != PROVOLATILE_IMMUTABLE)
		return false;
	if (fe->funcformat == COERCE_IMPLICIT_CAST || fe->funcformat == COERCE_EXPLICIT_CAST)
	{
		StringInfoData arg;

		if (list_length(fe->args) != 1)
			return false;
		initStringInfo(&arg);
		if (!ship(linitial(fe->args), cx, &arg))
			return false;
		appendStringInfo(out, "(%s)::%s", arg.data, format_type_be_qualified(fe->funcresulttype));
		return true;
	}
	appendStringInfo(out, "pg_catalog.%s(", quote_identifier(get_func_name(fe->funcid)));
	foreach(lc, fe->args)
	{
		if (IsA(lfirst(lc), NamedArgExpr))
			return false;
		if (!first)
			appendStringInfoString(out, ", ");
		if (!ship(lfirst(lc), cx, out))
			return false;
		first = false;
	}
	appendStringInfoChar(out, ')');
	return true;
}

/*
 * ShippableParam returns the $n that stands for a constant or parameter
 * (the statement's fdw_exprs): the same node keeps its number in every
 * dialect's text.
 */
int
ShippableParam(FdwDeparse *d, Expr *expr)
{
	ListCell   *lc;
	int			n = 0;

	foreach(lc, *d->params)
	{
		n++;
		if (lfirst(lc) == expr)
			return n;
	}
	*d->params = lappend(*d->params, expr);
	return list_length(*d->params);
}

/*
 * ship_param appends a constant or parameter as the statement's $n: the
 * same node keeps its number in every dialect's text.
 */
static void
ship_param(Expr *expr, ShipContext *cx, StringInfo out)
{
	appendStringInfo(out, "$%d", ShippableParam(cx->d, expr));
}

/*
 * ship appends 'node' in the dialect's text, or returns false when the
 * dialect does not compute it as PostgreSQL does.
 */
static bool
ship(Node *node, ShipContext *cx, StringInfo out)
{
	if (node == NULL)
		return false;
	switch (nodeTag(node))
	{
		case T_Var:
			{
				Var		   *var = (Var *) node;
				FdwDeparse *d = cx->d;

				if (var->varno != d->relid || var->varlevelsup != 0 || var->varattno <= 0 ||
					var->varattno > d->table->natts ||
					d->table->columns[var->varattno - 1] == NULL)
					return false;
				appendStringInfoString(out, AdapterForDialect(cx->dialect)->quote_ident(d->table->columns[var->varattno - 1]));
				return true;
			}
		case T_Const:
			{
				Const	   *c = (Const *) node;

				if (c->consttype >= FirstGenbkiObjectId || type_is_array(c->consttype))
					return false;
				if (c->constisnull)
					appendStringInfoString(out, "NULL");
				else
					ship_param((Expr *) node, cx, out);
				return true;
			}
		case T_Param:
			{
				Param	   *p = (Param *) node;

				if ((p->paramkind != PARAM_EXTERN && p->paramkind != PARAM_EXEC) ||
					p->paramtype >= FirstGenbkiObjectId || type_is_array(p->paramtype))
					return false;
				ship_param((Expr *) node, cx, out);
				return true;
			}
		case T_RelabelType:
			return ship((Node *) ((RelabelType *) node)->arg, cx, out);
		case T_FuncExpr:
			return ship_function((FuncExpr *) node, cx, out);
		case T_OpExpr:
			{
				OpExpr	   *op = (OpExpr *) node;

				return ship_operator(op->opno, op->args, op->inputcollid, cx, out);
			}
		case T_ScalarArrayOpExpr:
			return ship_list((ScalarArrayOpExpr *) node, cx, out);
		case T_NullTest:
			{
				NullTest   *nt = (NullTest *) node;
				ShipContext inner = *cx;

				inner.assignment = false;
				if (nt->argisrow)
					return false;
				appendStringInfoChar(out, '(');
				if (!ship((Node *) nt->arg, &inner, out))
					return false;
				appendStringInfoString(out, nt->nulltesttype == IS_NULL ? " IS NULL)" : " IS NOT NULL)");
				return true;
			}
		case T_BoolExpr:
			{
				BoolExpr   *b = (BoolExpr *) node;
				ShipContext inner = *cx;
				ListCell   *lc;
				bool		first = true;

				inner.assignment = false;
				appendStringInfoChar(out, '(');
				if (b->boolop == NOT_EXPR)
					appendStringInfoString(out, "NOT ");
				foreach(lc, b->args)
				{
					if (!first)
						appendStringInfoString(out, b->boolop == AND_EXPR ? " AND " : " OR ");
					if (!ship(lfirst(lc), &inner, out))
						return false;
					first = false;
				}
				appendStringInfoChar(out, ')');
				return true;
			}
		default:
			return false;
	}
}

/*
 * ShippableDeparse appends 'node' as dialect 'dialect' writes it to 'out',
 * or returns false (leaving junk in 'out') when that dialect does not
 * compute it exactly as PostgreSQL does.  'assignment': the node is the
 * whole new value of a column (UPDATE ... SET), which the shard's store
 * range-checks where the dialect says so.
 */
bool
ShippableDeparse(Node *node, FdwDeparse *d, CdDialect dialect, bool assignment,
				 StringInfo out)
{
	ShipContext cx;

	cx.d = d;
	cx.dialect = dialect;
	cx.rules = AdapterForDialect(dialect)->expr_rules;
	cx.assignment = assignment;
	if (cx.rules == NULL)
		return false;
	return ship(node, &cx, out);
}

/*
 * FdwFleetDialects returns the dialects (a mask, see DeparseAllDialects) of
 * the shards a statement of 'table' may reach: its own shard's, or those of
 * the whole fleet (the key's shard, and every shard a tombstone leads to,
 * may be any shard).
 */
uint32
FdwFleetDialects(const CdForeignTable *table)
{
	uint32		mask = 0;
	ListCell   *lc;

	if (table->shard)
		return 1u << ShardLookup(table->shard)->dialect;
	foreach(lc, ShardList())
		mask |= 1u << ((CdShard *) lfirst(lc))->dialect;
	return mask;
}

/*
 * FdwEnsureSendable refuses a statement before anything is sent when a shard
 * it may reach speaks a dialect that cannot compute one of its expressions
 * as PostgreSQL does (the planner left that dialect's text empty).  The
 * planner sends such an UPDATE or DELETE row by row instead; this catches a
 * plan made before a shard of another dialect joined the fleet.
 */
void
FdwEnsureSendable(const char *const *sql, const CdForeignTable *table)
{
	const CdAdapter *cannot = NULL;
	uint32		reach = FdwFleetDialects(table);

	for (int d = 0; d < AdapterCount() && cannot == NULL; d++)
	{
		if ((reach & (1u << d)) && sql[d][0] == '\0')
			cannot = AdapterForDialect(d);
	}
	if (cannot == NULL)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("this statement cannot be sent to %s shard", cannot->a_name),
			 errdetail("%s does not compute one of its conditions or new values exactly as PostgreSQL does.",
					   cannot->display_name),
			 errhint("Prepare the statement again, or run DISCARD PLANS: its plan was made before a shard of this dialect was registered.")));
}

/*
 * FdwExplainText is what EXPLAIN shows for a dialect's text: the text, or
 * why there is none.
 */
const char *
FdwExplainText(const char *sql)
{
	return sql[0] != '\0' ? sql : "(none: not computed there as PostgreSQL does; refused)";
}
