/*-------------------------------------------------------------------------
 *
 * table_funcs.c
 *	  register_table: the tables whose rows move with their key.
 *
 * A registration is checked before it is recorded: on every shard that
 * answers, the table must exist with its key column (a shard that cannot
 * be reached is skipped with a WARNING: it is checked by the moves that
 * touch it).  A refused registration changes nothing, and a registered
 * table keeps its key column: changing it needs unregister_table first,
 * since moves in flight rely on it.  The shards are queried as the caller
 * (its user mappings); the catalog row is written by catalog/tables.c.
 * unregister_table stays a SQL function of the extension script.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/builtins.h"

#include "catalog/catalog.h"
#include "catalog/tables.h"
#include "remote/fanout.h"
#include "sqlfuncs/sqlfuncs.h"

PG_FUNCTION_INFO_V1(collegedb_register_table);

/*
 * check_shards runs "SELECT <table>.<column> FROM <table> WHERE 1 = 0" on every
 * shard at once (in each one's dialect: identifiers quote differently)
 * and refuses the registration with the first shard's error that is not a
 * lost connection.
 */
static void
check_shards(const char *table_name, const char *key_column)
{
	int			n;
	const CdShard **set = ShardReadSet(&n);
	CdFanoutShard *checked = palloc0(sizeof(CdFanoutShard) * Max(n, 1));

	for (int i = 0; i < n; i++)
	{
		const CdAdapter *adapter = AdapterForDialect(set[i]->dialect);
		char	   *table = adapter->quote_ident(table_name);

		checked[i].shard = set[i];
		/* qualified: SQLite never reads "t"."c" as a string literal */
		checked[i].sql = psprintf("SELECT %s.%s FROM %s WHERE 1 = 0",
								  table, adapter->quote_ident(key_column), table);
	}
	FanoutRun(checked, n, NULL, 0, NULL, CD_FANOUT_READ);

	for (int i = 0; i < n; i++)
	{
		int			code;

		if (checked[i].ok)
			continue;
		code = RemoteSqlstate(checked[i].sqlstate);
		if (checked[i].timed_out || ERRCODE_TO_CATEGORY(code) == ERRCODE_CONNECTION_EXCEPTION)
		{
			ereport(WARNING,
					(errmsg("could not check table \"%s\" on shard \"%s\": %s",
							table_name, set[i]->name, checked[i].error),
					 errdetail("The shard did not answer; the registration does not depend on it.")));
			continue;
		}
		ereport(ERROR,
				(errcode(code),
				 errmsg("cannot register table \"%s\" with key column \"%s\": %s",
						table_name, key_column, checked[i].error),
				 errdetail("Shard \"%s\" refused \"SELECT %s FROM %s\".", set[i]->name,
						   key_column, table_name),
				 errhint("Create the table with its key column on every shard first (collegedb.run_on_all).")));
	}
}

/*
 * collegedb_register_table records a table whose rows live with their key
 * and move with it, after checking it on the shards; a second registration
 * with the same key column changes nothing.
 */
Datum
collegedb_register_table(PG_FUNCTION_ARGS)
{
	char	   *table_name = PG_ARGISNULL(0) ? "" : TextDatumGetCString(PG_GETARG_DATUM(0));
	char	   *key_column = PG_ARGISNULL(1) ? "" : TextDatumGetCString(PG_GETARG_DATUM(1));
	char	   *current;

	CatalogEnsureWritable(gettext_noop("cannot register a table on a hot standby"));
	if (table_name[0] == '\0' || key_column[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("table name and key column must not be empty")));

	current = TableKeyColumn(table_name);
	if (current != NULL && strcmp(current, key_column) == 0)
		PG_RETURN_VOID();
	if (current != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("table \"%s\" is already registered with key column \"%s\"",
						table_name, current),
				 errdetail("Moves rely on a registered table's key column."),
				 errhint("Unregister the table with collegedb.unregister_table() first to change its key column.")));

	check_shards(table_name, key_column);

	TableRegister(table_name, key_column);
	PG_RETURN_VOID();
}
