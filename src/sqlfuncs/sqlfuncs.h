/*-------------------------------------------------------------------------
 *
 * sqlfuncs.h
 *	  Helpers shared by the SQL-callable wrappers.
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_SQLFUNCS_H
#define COLLEGEDB_SQLFUNCS_H

#include "fmgr.h"
#include "datatype/timestamp.h"

#include "catalog/shards.h"

extern char *ArgText(FunctionCallInfo fcinfo, int n, const char *what);
extern TimestampTz ArgDeadline(FunctionCallInfo fcinfo, int n);
extern void SqlfuncsPause(int ms);
extern void SqlfuncsFanout(FunctionCallInfo fcinfo, const char *what, const CdShard **set,
						   int n, const char *sql, int first);

#endif							/* COLLEGEDB_SQLFUNCS_H */
