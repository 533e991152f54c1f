/*-------------------------------------------------------------------------
 *
 * deparse.c
 *	  The statements collegedb foreign tables send to the shards, in the
 *	  text of every dialect at once, as postgres_fdw's deparse.c does for
 *	  one: columns, quals, the key, RETURNING, INSERT.
 *
 * Quals that every dialect understands the same way go to the shards:
 * comparisons (=, <>, <, <=, >, >=) and +, -, * of built-in types between
 * columns, constants and parameters, IS [NOT] NULL, AND, OR, NOT.
 * Constants and parameters travel as $n parameters (fdw_exprs), evaluated
 * at execution, so a generic plan routes by the parameter's value.  Each
 * text is built for one adapter (its identifier quoting, its schemas, its
 * RETURNING), since the key's shard, and every shard a tombstone leads to,
 * may speak any dialect.  Which quals and key are chosen is fdw_plan.c's.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_coerce.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "fdw/fdw.h"

void
DeparseAppend(FdwDeparse *d, const char *text)
{
	for (int i = 0; i < AdapterCount(); i++)
		appendStringInfoString(&d->sql[i], text);
}

void
DeparseColumn(FdwDeparse *d, AttrNumber attno)
{
	for (int i = 0; i < AdapterCount(); i++)
		appendStringInfoString(&d->sql[i],
							   AdapterForDialect(i)->quote_ident(d->table->columns[attno - 1]));
}

static void
deparse_param(FdwDeparse *d, Expr *expr)
{
	char		buf[16];

	*d->params = lappend(*d->params, expr);
	snprintf(buf, sizeof(buf), "$%d", list_length(*d->params));
	DeparseAppend(d, buf);
}

void
DeparseInit(FdwDeparse *d, CdForeignTable *table, Index relid, List **params)
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
 * DeparseExpr appends an expression to the statement, or returns false
 * (leaving junk behind: callers deparse into a scratch FdwDeparse first) when
 * it cannot go to the shards.
 */
bool
DeparseExpr(Node *node, FdwDeparse *d)
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
				DeparseColumn(d, var->varattno);
				return true;
			}
		case T_Const:
			{
				Const	   *c = (Const *) node;

				if (c->constisnull)
					DeparseAppend(d, "NULL");
				else if (c->consttype >= FirstGenbkiObjectId ||
						 type_is_array(c->consttype))
					return false;
				else
					deparse_param(d, (Expr *) node);
				return true;
			}
		case T_Param:
			{
				Param	   *p = (Param *) node;

				if ((p->paramkind != PARAM_EXTERN && p->paramkind != PARAM_EXEC) ||
					p->paramtype >= FirstGenbkiObjectId || type_is_array(p->paramtype))
					return false;
				deparse_param(d, (Expr *) node);
				return true;
			}
		case T_RelabelType:
			return DeparseExpr((Node *) ((RelabelType *) node)->arg, d);
		case T_FuncExpr:
			/* a length coercion (numeric(12,2), varchar(n)): the shard's column applies its own */
			if (!exprIsLengthCoercion(node, NULL))
				return false;
			return DeparseExpr(linitial(((FuncExpr *) node)->args), d);
		case T_OpExpr:
			{
				OpExpr	   *op = (OpExpr *) node;

				if (list_length(op->args) != 2 || !pushable_operator(op->opno))
					return false;
				DeparseAppend(d, "(");
				if (!DeparseExpr(linitial(op->args), d))
					return false;
				DeparseAppend(d, " ");
				DeparseAppend(d, get_opname(op->opno));
				DeparseAppend(d, " ");
				if (!DeparseExpr(lsecond(op->args), d))
					return false;
				DeparseAppend(d, ")");
				return true;
			}
		case T_NullTest:
			{
				NullTest   *nt = (NullTest *) node;

				if (nt->argisrow)
					return false;
				DeparseAppend(d, "(");
				if (!DeparseExpr((Node *) nt->arg, d))
					return false;
				DeparseAppend(d, nt->nulltesttype == IS_NULL ? " IS NULL)" : " IS NOT NULL)");
				return true;
			}
		case T_BoolExpr:
			{
				BoolExpr   *b = (BoolExpr *) node;
				ListCell   *lc;
				bool		first = true;

				DeparseAppend(d, "(");
				if (b->boolop == NOT_EXPR)
					DeparseAppend(d, "NOT ");
				foreach(lc, b->args)
				{
					if (!first)
						DeparseAppend(d, b->boolop == AND_EXPR ? " AND " : " OR ");
					if (!DeparseExpr(lfirst(lc), d))
						return false;
					first = false;
				}
				DeparseAppend(d, ")");
				return true;
			}
		default:
			return false;
	}
}

/*
 * DeparsePushable says whether an expression can go to the shards.
 */
bool
DeparsePushable(Node *node, CdForeignTable *table, Index relid)
{
	FdwDeparse	scratch;
	List	   *params = NIL;

	DeparseInit(&scratch, table, relid, &params);
	return DeparseExpr(node, &scratch);
}

/*
 * DeparseWhere appends " WHERE ..." with the remote quals and, when
 * 'key_expr' is given, the key (as the next parameter), and returns the
 * key's parameter number (0: none).
 */
int
DeparseWhere(FdwDeparse *d, List *remote_conds, Expr *key_expr)
{
	bool		first = true;
	int			key_param = 0;
	ListCell   *lc;

	foreach(lc, remote_conds)
	{
		Expr	   *clause = lfirst(lc);

		if (IsA(clause, RestrictInfo))
			clause = ((RestrictInfo *) clause)->clause;
		DeparseAppend(d, first ? " WHERE " : " AND ");
		if (!DeparseExpr((Node *) clause, d))
			elog(ERROR, "a qual that can go to the shards did not deparse");
		first = false;
	}
	if (key_expr)
	{
		DeparseAppend(d, first ? " WHERE " : " AND ");
		DeparseColumn(d, d->table->key_attno);
		for (int i = 0; i < AdapterCount(); i++)
			d->key_start[i] = d->sql[i].len;
		DeparseAppend(d, " = ");
		deparse_param(d, key_expr);
		for (int i = 0; i < AdapterCount(); i++)
			d->key_end[i] = d->sql[i].len;
		key_param = list_length(*d->params);
	}
	return key_param;
}

/*
 * DeparseReturning appends " RETURNING <every column>" where the dialect can
 * (CdCapabilities.returning; elsewhere the text is left without, and
 * execution refuses it).
 */
void
DeparseReturning(FdwDeparse *d)
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
 * FdwQualifiedName renders the remote table name (schema-qualified where
 * the dialect has schemas) for a dialect.
 */
char *
FdwQualifiedName(const CdForeignTable *table, const CdAdapter *adapter)
{
	return AdapterQualifiedName(adapter, table->schema, table->name);
}

/*
 * FdwColumnList renders the table's columns in table order, so that rows
 * come back in the table's shape: those in 'used' (attribute numbers less
 * FirstLowInvalidHeapAttributeNumber; NULL: all) by name, the others and
 * dropped ones as NULL.
 */
char *
FdwColumnList(const CdForeignTable *table, const CdAdapter *adapter, Bitmapset *used)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int i = 0; i < table->natts; i++)
	{
		bool		wanted = used == NULL ||
			bms_is_member(i + 1 - FirstLowInvalidHeapAttributeNumber, used);

		appendStringInfo(&buf, "%s%s", i ? ", " : "",
						 table->columns[i] && wanted ? adapter->quote_ident(table->columns[i]) : "NULL");
	}
	if (table->natts == 0)
		appendStringInfoString(&buf, "NULL");
	return buf.data;
}

/*
 * DeparseSelect starts every dialect's "SELECT <columns> FROM <table>",
 * with the columns in 'used' (see FdwColumnList).
 */
void
DeparseSelect(FdwDeparse *d, Bitmapset *used)
{
	for (int i = 0; i < AdapterCount(); i++)
	{
		const CdAdapter *adapter = AdapterForDialect(i);

		appendStringInfo(&d->sql[i], "SELECT %s FROM %s",
						 FdwColumnList(d->table, adapter, used),
						 FdwQualifiedName(d->table, adapter));
	}
}

/*
 * DeparseModify starts every dialect's UPDATE or DELETE of the table.
 */
void
DeparseModify(FdwDeparse *d, CmdType op)
{
	for (int i = 0; i < AdapterCount(); i++)
		appendStringInfo(&d->sql[i], "%s %s", op == CMD_UPDATE ? "UPDATE" : "DELETE FROM",
						 FdwQualifiedName(d->table, AdapterForDialect(i)));
}

/*
 * DeparseLimit appends " LIMIT n" to every dialect's text.
 */
void
DeparseLimit(FdwDeparse *d, int64 limit)
{
	for (int i = 0; i < AdapterCount(); i++)
		appendStringInfo(&d->sql[i], " LIMIT " INT64_FORMAT, limit);
}

/*
 * DeparseTexts returns the statement's text per dialect, as a List of
 * String nodes for a plan's fdw_private.
 */
List *
DeparseTexts(FdwDeparse *d)
{
	List	   *texts = NIL;

	for (int i = 0; i < AdapterCount(); i++)
		texts = lappend(texts, makeString(d->sql[i].data));
	return texts;
}

/*
 * DeparseKeySplit returns where the key's " = $k" stands in each dialect's
 * text (start and end offsets, as Integer nodes, dialect after dialect),
 * for a scan of a list of keys to put " IN ($k, ...)" there instead.
 */
List *
DeparseKeySplit(FdwDeparse *d)
{
	List	   *split = NIL;

	for (int i = 0; i < AdapterCount(); i++)
	{
		split = lappend(split, makeInteger(d->key_start[i]));
		split = lappend(split, makeInteger(d->key_end[i]));
	}
	return split;
}

/*
 * DeparseInsert builds every dialect's "INSERT INTO <table> (<columns>)
 * VALUES ($1, ...)" of the attributes 'attnums', into 'sql' (one text per
 * dialect).
 */
void
DeparseInsert(const CdForeignTable *table, int ncols, const AttrNumber *attnums,
			  const char **sql)
{
	for (int d = 0; d < AdapterCount(); d++)
	{
		const CdAdapter *adapter = AdapterForDialect(d);
		StringInfoData buf;

		initStringInfo(&buf);
		appendStringInfo(&buf, "INSERT INTO %s (", FdwQualifiedName(table, adapter));
		for (int i = 0; i < ncols; i++)
			appendStringInfo(&buf, "%s%s", i ? ", " : "",
							 adapter->quote_ident(table->columns[attnums[i] - 1]));
		appendStringInfoString(&buf, ") VALUES (");
		for (int i = 0; i < ncols; i++)
			appendStringInfo(&buf, "%s$%d", i ? ", " : "", i + 1);
		appendStringInfoChar(&buf, ')');
		sql[d] = buf.data;
	}
}
