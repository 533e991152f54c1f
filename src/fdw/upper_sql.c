/*-------------------------------------------------------------------------
 *
 * upper_sql.c
 *	  The statements of an aggregate scan, one per dialect: the partial
 *	  aggregation each shard computes ("SELECT g, count(*), sum(x) ... GROUP
 *	  BY g"), and the same parts row by row with the key ("SELECT g, 1, x,
 *	  key ..."), which the front reads instead while moves are in flight
 *	  (upper_exec.c).  Which aggregates may be written is upper.c's.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"

#include "fdw/upper.h"

/* a part of the scan's rows: its type, and how each statement writes it */
typedef struct UpperPart
{
	Oid			type;
	int32		typmod;
	const char *pushed;			/* a format of the argument, e.g. "sum(%s)" */
	const char *row;			/* the same part of one row */
} UpperPart;

#define UPPER_ONE_IF_SET "CASE WHEN %s IS NULL THEN 0 ELSE 1 END"

/*
 * agg_parts returns the parts an aggregate is computed from.
 */
static int
agg_parts(Aggref *agg, UpperAggKind kind, const CdExprRules *rules, UpperPart *parts)
{
	switch (kind)
	{
		case UPPER_COUNT:
			parts[0] = (UpperPart)
			{
				INT8OID, -1, agg->aggstar ? "count(*)" : "count(%s)",
					agg->aggstar ? "1" : UPPER_ONE_IF_SET
			};
			return 1;
		case UPPER_SUM:
			parts[0] = (UpperPart)
			{
				agg->aggtype, -1, "sum(%s)", "%s"
			};
			return 1;
		case UPPER_MIN:
		case UPPER_MAX:
			parts[0] = (UpperPart)
			{
				agg->aggtype, -1, kind == UPPER_MIN ? "min(%s)" : "max(%s)", "%s"
			};
			return 1;
		case UPPER_AVG:
			parts[0] = (UpperPart)
			{
				NUMERICOID, -1, "sum(%s)", "%s"
			};
			parts[1] = (UpperPart)
			{
				INT8OID, -1, "count(%s)", UPPER_ONE_IF_SET
			};
			return 2;
		case UPPER_AND:
		case UPPER_OR:
			parts[0] = (UpperPart)
			{
				BOOLOID, -1, kind == UPPER_AND ? rules->agg_bool_and : rules->agg_bool_or, "%s"
			};
			return 1;
	}
	return 0;
}

/*
 * append_expr appends an expression in one dialect's text through a format,
 * or marks the dialect failed.
 */
static void
append_expr(FdwDeparse *d, int dialect, Node *expr, const char *format, StringInfo out)
{
	StringInfoData buf;

	initStringInfo(&buf);
	if (expr != NULL && !ShippableDeparse(expr, d, dialect, false, &buf))
		d->failed[dialect] = true;
	appendStringInfo(out, format ? format : "%s", buf.data);
}

/*
 * deparse_one writes both statements' column lists of one dialect, and the
 * GROUP BY of the aggregating one.
 */
static void
deparse_one(FdwDeparse *d, int i, List *groups, List *aggs, List *kinds,
			StringInfo pushed, StringInfo rows, StringInfo group_by)
{
	const CdAdapter *adapter = AdapterForDialect(i);
	ListCell   *lc,
			   *lc2;
	bool		first = true;

	foreach(lc, groups)
	{
		appendStringInfoString(pushed, first ? "" : ", ");
		appendStringInfoString(rows, first ? "" : ", ");
		appendStringInfoString(group_by, first ? " GROUP BY " : ", ");
		append_expr(d, i, lfirst(lc), NULL, pushed);
		append_expr(d, i, lfirst(lc), NULL, rows);
		append_expr(d, i, lfirst(lc), NULL, group_by);
		first = false;
	}
	forboth(lc, aggs, lc2, kinds)
	{
		Aggref	   *agg = lfirst(lc);
		Node	   *arg = agg->aggstar ? NULL : (Node *) ((TargetEntry *) linitial(agg->args))->expr;
		UpperPart	parts[2];
		int			n = agg_parts(agg, lfirst_int(lc2), adapter->expr_rules, parts);

		for (int p = 0; p < n; p++)
		{
			appendStringInfoString(pushed, first ? "" : ", ");
			appendStringInfoString(rows, first ? "" : ", ");
			if (parts[p].pushed == NULL)
				d->failed[i] = true;
			append_expr(d, i, arg, parts[p].pushed ? parts[p].pushed : "%s", pushed);
			append_expr(d, i, arg, parts[p].row, rows);
			first = false;
		}
	}
	appendStringInfo(rows, ", %s", adapter->quote_ident(d->table->columns[d->table->key_attno - 1]));
}

/*
 * UpperDeparse builds an aggregate scan's fdw_private (see UpperPrivate):
 * both statements of every dialect, with the quals that all go to the
 * shards (a dialect that cannot take one of its parts gets no text), and
 * the parts' types.
 */
List *
UpperDeparse(FdwDeparse *d, FdwRelInfo *info, List *groups, List *group_eqops,
			 List *aggs, List *kinds)
{
	FdwDeparse	r;
	List	   *types = NIL,
			   *typmods = NIL,
			   *firsts = NIL,
			   *eqops = NIL,
			   *pushed_texts,
			   *row_texts;
	StringInfoData group_by[CD_MAX_DIALECTS];
	ListCell   *lc,
			   *lc2;
	int			part = list_length(groups);

	DeparseInit(&r, d->table, d->relid, d->params);
	for (int i = 0; i < AdapterCount(); i++)
	{
		StringInfoData pushed,
					rows;

		initStringInfo(&pushed);
		initStringInfo(&rows);
		initStringInfo(&group_by[i]);
		deparse_one(d, i, groups, aggs, kinds, &pushed, &rows, &group_by[i]);
		appendStringInfo(&d->sql[i], "SELECT %s FROM %s", pushed.data,
						 FdwQualifiedName(d->table, AdapterForDialect(i)));
		appendStringInfo(&r.sql[i], "SELECT %s FROM %s", rows.data,
						 FdwQualifiedName(d->table, AdapterForDialect(i)));
	}
	/* both statements number the same nodes alike, IN lists included */
	r.list_owners = d->list_owners;
	r.list_elements = d->list_elements;
	(void) DeparseWhere(d, info->remote_conds, NULL, true);
	r.list_owners = d->list_owners;
	r.list_elements = d->list_elements;
	(void) DeparseWhere(&r, info->remote_conds, NULL, true);
	for (int i = 0; i < AdapterCount(); i++)
	{
		appendStringInfoString(&d->sql[i], group_by[i].data);
		r.failed[i] |= d->failed[i];
		d->failed[i] |= r.failed[i];
	}
	pushed_texts = DeparseTexts(d);
	row_texts = DeparseTexts(&r);

	foreach(lc, groups)
	{
		types = lappend_int(types, exprType(lfirst(lc)));
		typmods = lappend_int(typmods, exprTypmod(lfirst(lc)));
	}
	foreach(lc, group_eqops)
		eqops = lappend_int(eqops, lfirst_oid(lc));
	forboth(lc, aggs, lc2, kinds)
	{
		UpperPart	parts[2];
		int			n = agg_parts(lfirst(lc), lfirst_int(lc2), AdapterForDialect(0)->expr_rules, parts);

		firsts = lappend_int(firsts, part);
		for (int p = 0; p < n; p++)
		{
			types = lappend_int(types, parts[p].type);
			typmods = lappend_int(typmods, parts[p].typmod);
		}
		part += n;
	}
	return list_concat(list_make5(pushed_texts, row_texts, types, typmods,
								  makeInteger(list_length(groups))),
					   list_make4(eqops, list_copy(kinds), firsts, makeInteger(d->table->relid)));
}
