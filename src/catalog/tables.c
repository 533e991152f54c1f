/*-------------------------------------------------------------------------
 *
 * tables.c
 *	  Reads the registered tables.
 *
 * Only slow paths need them (probing where a key lives, moves), so they
 * are read through SPI each time, in name order.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "utils/builtins.h"

#include "catalog/tables.h"

/*
 * RegisteredTables returns a List of CdTable, in the caller's memory
 * context.
 */
List *
RegisteredTables(void)
{
	MemoryContext caller = CurrentMemoryContext;
	List	   *tables = NIL;

	SPI_connect();
	if (SPI_execute("SELECT table_name, key_column FROM collegedb.registered_table "
					"ORDER BY table_name COLLATE \"C\"", true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the registered tables");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		MemoryContext old = MemoryContextSwitchTo(caller);
		CdTable    *table = palloc(sizeof(CdTable));

		table->name = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
		table->key_column = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2);
		tables = lappend(tables, table);
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	return tables;
}
