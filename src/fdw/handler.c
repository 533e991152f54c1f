/*-------------------------------------------------------------------------
 *
 * handler.c
 *	  The handler of the collegedb foreign-data wrapper.
 *
 * Sharded foreign tables (DESIGN.md section 7) are not built yet: planning
 * a scan or a modification of a collegedb foreign table fails with
 * feature_not_supported.  Shards themselves are reached through the SQL
 * functions (collegedb.run_on_shard and friends).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "foreign/fdwapi.h"
#include "nodes/nodes.h"

PG_FUNCTION_INFO_V1(collegedb_fdw_handler);

static void
not_yet(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("collegedb foreign tables cannot be queried yet"),
			 errhint("Use collegedb.run_on_shard() and collegedb.all_on_shard() to reach shards.")));
}

static void
collegedb_get_rel_size(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid)
{
	not_yet();
}

static void
collegedb_get_paths(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid)
{
	not_yet();
}

static ForeignScan *
collegedb_get_plan(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid,
				   ForeignPath *best_path, List *tlist, List *scan_clauses,
				   Plan *outer_plan)
{
	not_yet();
	return NULL;
}

static void
collegedb_begin_scan(ForeignScanState *node, int eflags)
{
	not_yet();
}

static TupleTableSlot *
collegedb_iterate(ForeignScanState *node)
{
	not_yet();
	return NULL;
}

static void
collegedb_rescan(ForeignScanState *node)
{
	not_yet();
}

static void
collegedb_end_scan(ForeignScanState *node)
{
}

/*
 * collegedb_fdw_handler returns the wrapper's routine table.
 */
Datum
collegedb_fdw_handler(PG_FUNCTION_ARGS)
{
	FdwRoutine *routine = makeNode(FdwRoutine);

	routine->GetForeignRelSize = collegedb_get_rel_size;
	routine->GetForeignPaths = collegedb_get_paths;
	routine->GetForeignPlan = collegedb_get_plan;
	routine->BeginForeignScan = collegedb_begin_scan;
	routine->IterateForeignScan = collegedb_iterate;
	routine->ReScanForeignScan = collegedb_rescan;
	routine->EndForeignScan = collegedb_end_scan;
	PG_RETURN_POINTER(routine);
}
