/*-------------------------------------------------------------------------
 *
 * table.c
 *	  What a collegedb foreign table is, for the planner and the executor:
 *	  its options (remote name, schema, columns, key column), read once per
 *	  plan or scan into a CdForeignTable, and the shards that hold its rows.
 *
 * The validator (options.c) checks the options when they are written;
 * this file reads them back, and raises the errors that only a whole
 * table can show (a sharded table without key_column, a key column that
 * does not exist).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "commands/defrem.h"
#include "foreign/foreign.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "catalog/shards.h"
#include "fdw/fdw.h"

/*
 * FdwTableShards returns the shards that hold a table's rows: its own
 * shard's, or every registered shard (NO_SHARDS when there is none).
 */
List *
FdwTableShards(const CdForeignTable *table)
{
	if (table->shard)
		return list_make1((void *) ShardLookup(table->shard));
	return list_copy(ShardListNonEmpty());
}

/*
 * FdwTableInfo reads a collegedb foreign table's options: the remote
 * name, schema and column names, the key column, and whether it belongs to
 * a shard's own server.
 */
CdForeignTable *
FdwTableInfo(Oid relid)
{
	ForeignTable *ft = GetForeignTable(relid);
	ForeignServer *server = GetForeignServer(ft->serverid);
	Relation	rel = table_open(relid, NoLock);
	TupleDesc	desc = RelationGetDescr(rel);
	CdForeignTable *table = palloc0(sizeof(CdForeignTable));
	char	   *key_column = NULL;
	bool		is_shard;
	ListCell   *lc;

	table->relid = relid;
	table->name = RelationGetRelationName(rel);
	table->remote_estimate = true;
	foreach(lc, ft->options)
	{
		DefElem    *def = lfirst(lc);

		if (strcmp(def->defname, "table_name") == 0)
			table->name = defGetString(def);
		else if (strcmp(def->defname, "schema_name") == 0)
			table->schema = defGetString(def);
		else if (strcmp(def->defname, "key_column") == 0)
			key_column = defGetString(def);
		else if (strcmp(def->defname, "use_remote_estimate") == 0)
			table->remote_estimate = defGetBoolean(def);
	}
	(void) ShardServerDialect(server->serverid, &is_shard);
	if (is_shard)
		table->shard = server->servername;

	table->natts = desc->natts;
	table->columns = palloc0(sizeof(char *) * Max(desc->natts, 1));
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		List	   *options;

		if (att->attisdropped)
			continue;
		table->columns[i] = NameStr(att->attname);
		options = GetForeignColumnOptions(relid, att->attnum);
		foreach(lc, options)
		{
			DefElem    *def = lfirst(lc);

			if (strcmp(def->defname, "column_name") == 0)
				table->columns[i] = defGetString(def);
		}
		if (key_column && strcmp(NameStr(att->attname), key_column) == 0)
			table->key_attno = att->attnum;
	}
	table_close(rel, NoLock);

	if (key_column == NULL && table->shard == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
				 errmsg("sharded foreign table \"%s\" needs option key_column",
						get_rel_name(relid)),
				 errhint("ALTER FOREIGN TABLE %s OPTIONS (ADD key_column '...') names the column that routes its rows.",
						 quote_identifier(get_rel_name(relid)))));
	if (key_column && table->key_attno == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("key column \"%s\" of foreign table \"%s\" does not exist",
						key_column, get_rel_name(relid))));
	return table;
}
