/*-------------------------------------------------------------------------
 *
 * deparse.c
 *	  The statements collegedb foreign tables send to the shards, in the
 *	  text of every dialect at once, as postgres_fdw's deparse.c does for
 *	  one: columns, quals, the key, RETURNING, INSERT.
 *
 * Which quals a dialect's text carries, and how each is written there, is
 * the shippability rule's (shippable.c): each text gets what its dialect
 * computes exactly as PostgreSQL does.  Constants and parameters travel as $n parameters (fdw_exprs), evaluated
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

	snprintf(buf, sizeof(buf), "$%d", ShippableParam(d, expr));
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
	memset(d->nconds, 0, sizeof(d->nconds));
	memset(d->failed, 0, sizeof(d->failed));
	d->list_owners = NIL;
	d->list_elements = NIL;
}

/*
 * DeparseExpr appends an expression to the text of every dialect that
 * computes it as PostgreSQL does (shippable.c), and marks the others failed:
 * their statement cannot be sent.  Returns whether every dialect took it.
 */
bool
DeparseExpr(Node *node, FdwDeparse *d, bool assignment)
{
	bool		all = true;

	for (int i = 0; i < AdapterCount(); i++)
	{
		StringInfoData buf;

		if (d->failed[i])
			continue;
		initStringInfo(&buf);
		if (ShippableDeparse(node, d, i, assignment, &buf))
			appendStringInfoString(&d->sql[i], buf.data);
		else
			d->failed[i] = true;
		all &= !d->failed[i];
	}
	return all;
}

/*
 * DeparseAllDialects is the mask of every dialect (bit i: dialect i).
 */
uint32
DeparseAllDialects(void)
{
	return (uint32) ((1u << AdapterCount()) - 1);
}

/*
 * DeparseDialects returns the dialects (a mask, see DeparseAllDialects)
 * whose shards can compute a condition as PostgreSQL does.
 */
uint32
DeparseDialects(Node *node, CdForeignTable *table, Index relid)
{
	FdwDeparse	scratch;
	List	   *params = NIL;
	uint32		mask = 0;

	DeparseInit(&scratch, table, relid, &params);
	for (int i = 0; i < AdapterCount(); i++)
	{
		StringInfoData buf;

		initStringInfo(&buf);
		if (ShippableDeparse(node, &scratch, i, false, &buf))
			mask |= 1u << i;
	}
	return mask;
}

/*
 * DeparseWhere appends " WHERE ..." with the remote quals and, when
 * 'key_expr' is given, the key (as the next parameter), and returns the
 * key's parameter number (0: none).  Each dialect's text gets the quals
 * that dialect computes as PostgreSQL does; the planner checks the others
 * on the front, unless 'required' (a modification, which cannot be
 * checked after the fact): then a dialect that cannot take one is failed.
 */
int
DeparseWhere(FdwDeparse *d, List *remote_conds, Expr *key_expr, bool required)
{
	int			key_param = 0;
	ListCell   *lc;

	foreach(lc, remote_conds)
	{
		Expr	   *clause = lfirst(lc);

		if (IsA(clause, RestrictInfo))
			clause = ((RestrictInfo *) clause)->clause;
		for (int i = 0; i < AdapterCount(); i++)
		{
			StringInfoData buf;

			initStringInfo(&buf);
			if (d->failed[i])
				continue;
			if (!ShippableDeparse((Node *) clause, d, i, false, &buf))
			{
				d->failed[i] = required;
				continue;
			}
			appendStringInfo(&d->sql[i], "%s%s", d->nconds[i]++ ? " AND " : " WHERE ", buf.data);
		}
	}
	if (key_expr && !type_is_array(exprType((Node *) key_expr)) &&
		ShippableFamily(exprType((Node *) key_expr)) == CD_FAMILY_TEXT)
	{
		/* one text key: byte for byte, whatever the column's collation */
		char		param[16];

		key_param = ShippableParam(d, key_expr);
		snprintf(param, sizeof(param), "$%d", key_param);
		for (int i = 0; i < AdapterCount(); i++)
		{
			const CdAdapter *adapter = AdapterForDialect(i);

			appendStringInfoString(&d->sql[i], d->nconds[i]++ ? " AND " : " WHERE ");
			appendStringInfo(&d->sql[i], adapter->expr_rules->text_equal,
							 adapter->quote_ident(d->table->columns[d->table->key_attno - 1]),
							 param);
		}
	}
	else if (key_expr)
	{
		for (int i = 0; i < AdapterCount(); i++)
		{
			appendStringInfoString(&d->sql[i], d->nconds[i]++ ? " AND " : " WHERE ");
			d->key_start[i] = d->sql[i].len;
		}
		DeparseColumn(d, d->table->key_attno);
		DeparseAppend(d, " = ");
		deparse_param(d, key_expr);
		for (int i = 0; i < AdapterCount(); i++)
			d->key_end[i] = d->sql[i].len;
		key_param = list_length(*d->params);
	}

	/*
	 * A text that left out the quals of the last parameters still takes
	 * them all (the statement is sent with every parameter): it names the
	 * last one in a condition that is always true.
	 */
	for (int i = 0; i < AdapterCount(); i++)
	{
		int			n = list_length(*d->params);

		if (n > 0 && !d->failed[i] &&
			AdapterScan(AdapterForDialect(i), d->sql[i].data).max_param < n)
			appendStringInfo(&d->sql[i], "%s($%d IS NULL OR 1 = 1)",
							 d->nconds[i]++ ? " AND " : " WHERE ", n);
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
 * with the columns in 'used' (see FdwColumnList); with 'row_identity' one
 * more column, the row's identity on the shard (CdAdapter.row_identity,
 * NULL where the dialect has none), for an UPDATE or DELETE row by row.
 */
void
DeparseSelect(FdwDeparse *d, Bitmapset *used, bool row_identity)
{
	for (int i = 0; i < AdapterCount(); i++)
	{
		const CdAdapter *adapter = AdapterForDialect(i);

		appendStringInfo(&d->sql[i], "SELECT %s%s%s FROM %s",
						 FdwColumnList(d->table, adapter, used),
						 row_identity ? ", " : "",
						 !row_identity ? "" : adapter->row_identity ? adapter->row_identity : "NULL",
						 FdwQualifiedName(d->table, adapter));
	}
}

/*
 * DeparseRowLock appends what keeps the fetched rows as they are until the
 * shard's transaction ends (CdAdapter.row_lock_clause), where the dialect
 * needs it.
 */
void
DeparseRowLock(FdwDeparse *d)
{
	for (int i = 0; i < AdapterCount(); i++)
	{
		const char *clause = AdapterForDialect(i)->row_lock_clause;

		if (clause && !d->failed[i])
			appendStringInfoString(&d->sql[i], clause);
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
		texts = lappend(texts, makeString(d->failed[i] ? pstrdup("") : d->sql[i].data));
	return texts;
}

/*
 * DeparseTextsOf reads back what DeparseTexts made: the text per dialect
 * ("" where the dialect cannot take the statement, see FdwEnsureSendable).
 */
void
DeparseTextsOf(List *texts, const char **sql)
{
	for (int i = 0; i < AdapterCount(); i++)
		sql[i] = strVal(list_nth(texts, i));
}

/*
 * DeparseKeySplit returns where the key's condition ("col" = $k) stands in
 * each dialect's text (start and end offsets, as Integer nodes, dialect
 * after dialect), then the key column's name and whether its values are
 * text (1 or 0), for a scan or a modification of a list of keys to put
 * the list's condition there instead (FdwGroupedKeyText).
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
	split = lappend(split, makeString(pstrdup(d->table->columns[d->table->key_attno - 1])));
	split = lappend(split, makeInteger(ShippableFamily(get_atttype(d->table->relid,
														  d->table->key_attno)) == CD_FAMILY_TEXT));
	return split;
}

/*
 * column_list is the attributes 'attnums' of 'table' as a column list of
 * 'adapter''s dialect: "a, b, c".
 */
static char *
column_list(const CdForeignTable *table, const CdAdapter *adapter, int ncols,
			const AttrNumber *attnums)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int i = 0; i < ncols; i++)
		appendStringInfo(&buf, "%s%s", i ? ", " : "",
						 adapter->quote_ident(table->columns[attnums[i] - 1]));
	return buf.data;
}

/*
 * DeparseInsert builds every dialect's "INSERT INTO <table> (<columns>)
 * VALUES ($1, ...)" of the attributes 'attnums', into 'sql' (one text per
 * dialect); with 'do_nothing' (ON CONFLICT DO NOTHING) followed by the
 * dialect's insert_do_nothing, or empty where it has none.
 */
void
DeparseInsert(const CdForeignTable *table, int ncols, const AttrNumber *attnums,
			  bool do_nothing, const char **sql)
{
	for (int d = 0; d < AdapterCount(); d++)
	{
		const CdAdapter *adapter = AdapterForDialect(d);
		StringInfoData buf;

		initStringInfo(&buf);
		appendStringInfo(&buf, "INSERT INTO %s (%s) VALUES (", FdwQualifiedName(table, adapter),
						 column_list(table, adapter, ncols, attnums));
		for (int i = 0; i < ncols; i++)
			appendStringInfo(&buf, "%s$%d", i ? ", " : "", i + 1);
		appendStringInfoChar(&buf, ')');
		if (do_nothing && adapter->insert_do_nothing == NULL)
			buf.data[0] = '\0';
		else if (do_nothing)
			appendStringInfoString(&buf, adapter->insert_do_nothing);
		sql[d] = buf.data;
	}
}

/*
 * DeparseRowsInto fills 'sql' (one text per dialect) with the dialect's
 * bulk statement for rows of the attributes 'attnums' (CdAdapter.rows_sql),
 * or NULL where it has none.
 */
void
DeparseRowsInto(const CdForeignTable *table, int ncols, const AttrNumber *attnums,
				const char **sql)
{
	for (int d = 0; d < AdapterCount(); d++)
	{
		const CdAdapter *adapter = AdapterForDialect(d);

		sql[d] = adapter->rows_sql == NULL ? NULL :
			psprintf(adapter->rows_sql, FdwQualifiedName(table, adapter),
					 column_list(table, adapter, ncols, attnums));
	}
}
