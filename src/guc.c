/*-------------------------------------------------------------------------
 *
 * guc.c
 *	  Every collegedb.* GUC, defined in one place, in alphabetical order.
 *
 * Persistent settings live in a catalog row (collegedb.configure); GUCs are
 * per-session overrides and server-level sizing.  Secrets are never GUCs.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/guc.h"

#include "collegedb.h"

bool		CollegeDebug = false;
int			CollegeMaxShards = 256;

/*
 * GucInit defines the GUCs and reserves the collegedb. prefix.
 */
void
GucInit(void)
{
	DefineCustomBoolVariable("collegedb.debug",
							 "Reports collegedb's routing decisions as LOG messages.",
							 NULL,
							 &CollegeDebug,
							 false,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("collegedb.max_shards",
							"Sets how many shards the shared activity counters can track.",
							"Needs collegedb in shared_preload_libraries; takes effect at server start.",
							&CollegeMaxShards,
							256, 1, 65536,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

	MarkGUCPrefixReserved("collegedb");
}
