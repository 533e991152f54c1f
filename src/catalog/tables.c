/*-------------------------------------------------------------------------
 *
 * tables.c
 *	  Reads the registered tables, and registers them.
 *
 * Sharded foreign tables (on the router server, with key_column) count as
 * registered when their owner may register tables: a superuser, or a role
 * holding EXECUTE on collegedb.register_table (the admin set).  Anyone with
 * USAGE on the server collegedb can create a foreign table, and a table
 * that counts is one whose key's rows every move copies and deletes on the
 * shards; a routing role's foreign table is only routed.  Only slow paths
 * need the list (probing where a key lives, moves), so it is read through
 * SPI each time, in name order; whether any table is registered is cached,
 * for the routing path.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/inval.h"

#include "catalog/catalog.h"
#include "catalog/tables.h"

static int	tables_known = -1;	/* -1 unknown, else whether any exists */

/*
 * A sharded foreign table registers itself by being created, which
 * invalidates its own relcache entry: while none is known, any
 * invalidation asks again.  (A stale "some" only costs a tombstone lookup.)
 */
static void
tables_relcache_callback(Datum arg, Oid relid)
{
	if (tables_known == 0 || CatalogRelidIs(CD_REL_TABLES, relid))
		tables_known = -1;
}

/*
 * TablesInit registers the invalidation callback of AnyRegisteredTable.
 */
void
TablesInit(void)
{
	CacheRegisterRelcacheCallback(tables_relcache_callback, (Datum) 0);
}

/*
 * AnyRegisteredTable says, from a cache, whether any table is registered:
 * only then can keys have moved and left tombstones.
 */
bool
AnyRegisteredTable(void)
{
	if (tables_known < 0)
		tables_known = RegisteredTables() != NIL;
	return tables_known > 0;
}

/*
 * RegisteredTables returns a List of CdTable, in the caller's memory
 * context.
 */
List *
RegisteredTables(void)
{
	List	   *tables = NIL;
	CdCatalogRows rows;

	(void) CatalogExec("SELECT table_name, key_column FROM ("
					   "SELECT table_name, key_column FROM collegedb.registered_table "
					   "UNION "
					   "SELECT coalesce((SELECT option_value FROM pg_options_to_table(ft.ftoptions) "
					   "                  WHERE option_name = 'table_name'), c.relname), "
					   "       coalesce((SELECT option_value FROM pg_options_to_table(a.attfdwoptions) "
					   "                  WHERE option_name = 'column_name'), a.attname) "
					   "  FROM pg_foreign_table ft "
					   "  JOIN pg_class c ON c.oid = ft.ftrelid "
					   "  JOIN pg_foreign_server s ON s.oid = ft.ftserver AND s.srvname = 'collegedb' "
					   "  JOIN pg_options_to_table(ft.ftoptions) k ON k.option_name = 'key_column' "
					   "  JOIN pg_attribute a ON a.attrelid = ft.ftrelid AND a.attname = k.option_value"
					   " WHERE (SELECT r.rolsuper FROM pg_roles r WHERE r.oid = c.relowner)"
					   "    OR has_function_privilege(c.relowner, 'collegedb.register_table(text, text)', 'EXECUTE')"
					   ") t ORDER BY table_name COLLATE \"C\"", 0, NULL, NULL, NULL, true, &rows);
	for (uint64 i = 0; i < rows.count; i++)
	{
		CdTable    *table = palloc(sizeof(CdTable));

		table->name = CatalogText(&rows, i, 1);
		table->key_column = CatalogText(&rows, i, 2);
		tables = lappend(tables, table);
	}
	return tables;
}

/*
 * TableKeyColumn returns the key column a table is registered with (in
 * collegedb.registered_table), NULL when it is not.
 */
char *
TableKeyColumn(const char *table_name)
{
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(table_name)};
	CdCatalogRows rows;

	if (CatalogExec("SELECT key_column FROM collegedb.registered_table WHERE table_name = $1",
					1, types, values, NULL, true, &rows) != 1)
		return NULL;
	return CatalogText(&rows, 0, 1);
}

/*
 * TableRegister records a table whose rows move with their key.
 */
void
TableRegister(const char *table_name, const char *key_column)
{
	Oid			types[2] = {TEXTOID, TEXTOID};
	Datum		values[2];

	values[0] = CStringGetTextDatum(table_name);
	values[1] = CStringGetTextDatum(key_column);
	(void) CatalogExec("INSERT INTO collegedb.registered_table (table_name, key_column) "
					   "VALUES ($1, $2)", 2, types, values, NULL, false, NULL);
}
