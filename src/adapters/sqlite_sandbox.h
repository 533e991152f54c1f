/*-------------------------------------------------------------------------
 *
 * sqlite_sandbox.h
 *	  The sandbox every SQLite shard connection runs in (sqlite_sandbox.c),
 *	  shared by the SQLite adapter's files only.
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_SQLITE_SANDBOX_H
#define COLLEGEDB_SQLITE_SANDBOX_H

#include "postgres.h"

#include <sqlite3.h>

/* the most parameters one statement may bind (SQLITE_LIMIT_VARIABLE_NUMBER) */
#define CD_SQLITE_MAX_VARIABLES 32766

/*
 * SqliteSandbox is the authorizer's state, one per connection.  'internal'
 * is set while one of collegedb's own statements runs (CD_EXEC_INTERNAL);
 * 'denied' names what the authorizer refused last, for the error message
 * ("" when nothing was).
 */
typedef struct SqliteSandbox
{
	bool		internal;
	char		denied[256];
} SqliteSandbox;

extern int	SqliteSandboxApply(sqlite3 *db, SqliteSandbox *sandbox, const char **step);
extern void SqliteSandboxBegin(SqliteSandbox *sandbox, bool internal);

#endif							/* COLLEGEDB_SQLITE_SANDBOX_H */
