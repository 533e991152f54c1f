/*-------------------------------------------------------------------------
 *
 * import.c
 *	  IMPORT FOREIGN SCHEMA: sharded foreign tables for a shard's tables.
 *
 *	  IMPORT FOREIGN SCHEMA public FROM SERVER s1 INTO app;
 *	  IMPORT FOREIGN SCHEMA public FROM SERVER collegedb INTO app
 *	      OPTIONS (shard 's1', key_column 'id');
 *
 * reads the tables and columns of a schema of one shard (the server
 * imported from, or the option 'shard' when it is collegedb's own server)
 * and creates, for each table, a sharded foreign table on collegedb's
 * server: every shard holds the same tables, and rows route by the key.
 * The key is the option 'key_column' where the table has that column, else
 * the first column of the table's primary key; a table with neither is
 * left out with a NOTICE.  Column types are the shard's, mapped to
 * PostgreSQL's by the adapter's query (CdAdapter.import_sql), which also
 * leaves out collegedb's own tables on the shard.  LIMIT TO and EXCEPT
 * are applied by PostgreSQL to what this returns.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/defrem.h"
#include "foreign/foreign.h"
#include "nodes/parsenodes.h"
#include "utils/builtins.h"

#include "catalog/shards.h"
#include "cd_errcodes.h"
#include "fdw/fdw.h"
#include "remote/remote.h"

/* collegedb's own server, where the sharded tables are created */
#define ROUTER_SERVER "collegedb"

/* one column of the shard's answer, in import_sql's order */
enum
{
	IMPORT_TABLE,
	IMPORT_COLUMN,
	IMPORT_TYPE,
	IMPORT_IS_KEY,
	IMPORT_NOT_NULL,
	IMPORT_SCHEMA,
	IMPORT_NCOLS
};

static const char *
cell_text(const CdParam *row, int col)
{
	return row[col].kind == CD_VALUE_NULL ? NULL : pnstrdup(row[col].str, row[col].len);
}

static bool
cell_true(const CdParam *row, int col)
{
	const char *s = cell_text(row, col);

	return s && (strcmp(s, "1") == 0 || strcmp(s, "t") == 0 || strcmp(s, "true") == 0);
}

/*
 * table_statement returns the CREATE FOREIGN TABLE of one of the shard's
 * tables, whose columns are rows[first .. end), or NULL (with a NOTICE)
 * when it has no key.
 */
static char *
table_statement(ImportForeignSchemaStmt *stmt, List *rows,
				int first, int end, const char *key_option)
{
	const CdParam *head = list_nth(rows, first);
	const char *table = cell_text(head, IMPORT_TABLE);
	const char *key = NULL;
	StringInfoData sql;

	for (int i = first; i < end && key_option; i++)
		if (strcmp(cell_text(list_nth(rows, i), IMPORT_COLUMN), key_option) == 0)
			key = key_option;
	for (int i = first; i < end && key == NULL; i++)
		if (cell_true(list_nth(rows, i), IMPORT_IS_KEY))
			key = cell_text(list_nth(rows, i), IMPORT_COLUMN);
	if (key == NULL)
	{
		ereport(NOTICE,
				(errmsg("table \"%s\" is not imported: it has no primary key", table),
				 errhint("Name its key with OPTIONS (key_column '...'), or create the foreign table by hand.")));
		return NULL;
	}

	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE FOREIGN TABLE %s (",
					 quote_qualified_identifier(stmt->local_schema, table));
	for (int i = first; i < end; i++)
	{
		const CdParam *row = list_nth(rows, i);

		appendStringInfo(&sql, "%s%s %s%s", i > first ? ", " : "",
						 quote_identifier(cell_text(row, IMPORT_COLUMN)),
						 cell_text(row, IMPORT_TYPE),
						 cell_true(row, IMPORT_NOT_NULL) ? " NOT NULL" : "");
	}
	appendStringInfo(&sql, ") SERVER %s OPTIONS (key_column %s, table_name %s",
					 quote_identifier(ROUTER_SERVER), quote_literal_cstr(key),
					 quote_literal_cstr(table));
	if (cell_text(head, IMPORT_SCHEMA))
		appendStringInfo(&sql, ", schema_name %s", quote_literal_cstr(cell_text(head, IMPORT_SCHEMA)));
	appendStringInfoChar(&sql, ')');
	return sql.data;
}

/*
 * collegedb_import_schema is ImportForeignSchema: the statements that
 * create a sharded foreign table for each table of the shard's schema.
 */
List *
collegedb_import_schema(ImportForeignSchemaStmt *stmt, Oid serverOid)
{
	ForeignServer *server = GetForeignServer(serverOid);
	const char *shard_name = NULL;
	const char *key_option = NULL;
	const CdShard *shard;
	const CdAdapter *adapter;
	CaptureRowSink sink;
	CdParam		schema;
	List	   *commands = NIL;
	bool		is_shard;
	ListCell   *lc;
	int			first = 0;

	foreach(lc, stmt->options)
	{
		DefElem    *def = lfirst(lc);

		if (strcmp(def->defname, "shard") == 0)
			shard_name = defGetString(def);
		else if (strcmp(def->defname, "key_column") == 0)
			key_option = defGetString(def);
		else
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
					 errmsg("invalid option \"%s\" of IMPORT FOREIGN SCHEMA", def->defname),
					 errhint("Valid options are shard and key_column.")));
	}
	(void) ShardServerDialect(serverOid, &is_shard);
	if (is_shard && shard_name && strcmp(shard_name, server->servername) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
				 errmsg("option \"shard\" names \"%s\", but the schema is imported from shard \"%s\"",
						shard_name, server->servername)));
	if (!is_shard && shard_name == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
				 errmsg("IMPORT FOREIGN SCHEMA from server \"%s\" needs a shard to read the tables from",
						server->servername),
				 errhint("Add OPTIONS (shard '...'), or import FROM SERVER the shard's own server.")));
	shard = ShardLookup(is_shard ? server->servername : shard_name);
	adapter = AdapterForDialect(shard->dialect);

	memset(&schema, 0, sizeof(schema));
	schema.kind = CD_VALUE_TEXT;
	schema.typid = TEXTOID;
	schema.str = stmt->remote_schema;
	schema.len = strlen(stmt->remote_schema);
	CaptureRowSinkInit(&sink);
	(void) RemoteExecuteInternal(shard, adapter->import_sql, 1, &schema, &sink.base, false);
	if (sink.ncols != IMPORT_NCOLS)
		elog(ERROR, "the import query returned %d columns, not %d", sink.ncols, IMPORT_NCOLS);
	if (sink.rows == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_SCHEMA_NOT_FOUND),
				 errmsg("shard \"%s\" has no tables in schema \"%s\"", shard->name,
						stmt->remote_schema)));

	/* the rows come ordered by table: one statement per run of a table */
	for (int i = 1; i <= list_length(sink.rows); i++)
	{
		char	   *command;

		if (i < list_length(sink.rows) &&
			strcmp(cell_text(list_nth(sink.rows, i), IMPORT_TABLE),
				   cell_text(list_nth(sink.rows, first), IMPORT_TABLE)) == 0)
			continue;
		command = table_statement(stmt, sink.rows, first, i, key_option);
		if (command)
			commands = lappend(commands, command);
		first = i;
	}
	return commands;
}
