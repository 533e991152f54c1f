/*-------------------------------------------------------------------------
 *
 * tables.h
 *	  The registered tables (catalog table collegedb.registered_table):
 *	  tables whose rows live with their key and move with it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_CATALOG_TABLES_H
#define COLLEGEDB_CATALOG_TABLES_H

#include "postgres.h"

#include "nodes/pg_list.h"

typedef struct CdTable
{
	char	   *name;
	char	   *key_column;
} CdTable;

extern List *RegisteredTables(void);
extern char *TableKeyColumn(const char *table_name);
extern void TableRegister(const char *table_name, const char *key_column);
extern bool AnyRegisteredTable(void);
extern void TablesInit(void);

#endif							/* COLLEGEDB_CATALOG_TABLES_H */
