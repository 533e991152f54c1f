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

extern char *ArgText(FunctionCallInfo fcinfo, int n, const char *what);

#endif							/* COLLEGEDB_SQLFUNCS_H */
