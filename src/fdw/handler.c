/*-------------------------------------------------------------------------
 *
 * handler.c
 *	  The handler of the collegedb foreign-data wrapper.
 *
 * Planning is in fdw_plan.c, the remote statements in deparse.c, execution
 * in fdw_exec.c, (INSERT, COPY FROM) insert.c and (UPDATE, DELETE row by row)
 * row_modify.c (README.md, "Sharded foreign tables"; src/README.md, "A
 * guarded write").
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "foreign/fdwapi.h"
#include "nodes/nodes.h"

#include "fdw/fdw.h"

PG_FUNCTION_INFO_V1(collegedb_fdw_handler);

static int
collegedb_is_updatable(Relation rel)
{
	return (1 << CMD_INSERT) | (1 << CMD_UPDATE) | (1 << CMD_DELETE);
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
	routine->GetForeignPlan = collegedb_get_any_plan;
	routine->GetForeignUpperPaths = collegedb_get_upper_paths;
	routine->BeginForeignScan = collegedb_begin_any_scan;
	routine->IterateForeignScan = collegedb_iterate_any;
	routine->ReScanForeignScan = collegedb_rescan_any;
	routine->EndForeignScan = collegedb_end_any_scan;
	routine->ExplainForeignScan = collegedb_explain_any_scan;

	routine->IsForeignRelUpdatable = collegedb_is_updatable;
	routine->AddForeignUpdateTargets = collegedb_add_update_targets;
	routine->PlanForeignModify = collegedb_plan_modify;
	routine->BeginForeignModify = collegedb_begin_modify;
	routine->ExecForeignInsert = collegedb_exec_insert;
	routine->GetForeignModifyBatchSize = collegedb_batch_size;
	routine->ExecForeignBatchInsert = collegedb_exec_batch_insert;
	routine->EndForeignModify = collegedb_end_modify;
	routine->BeginForeignInsert = collegedb_begin_foreign_insert;
	routine->EndForeignInsert = collegedb_end_foreign_insert;
	routine->ExecForeignUpdate = collegedb_exec_row_modify;
	routine->ExecForeignDelete = collegedb_exec_row_modify;
	routine->ExplainForeignModify = collegedb_explain_modify;
	routine->ExecForeignTruncate = collegedb_exec_truncate;
	routine->AnalyzeForeignTable = collegedb_analyze;
	routine->ImportForeignSchema = collegedb_import_schema;

	routine->PlanDirectModify = collegedb_plan_direct_modify;
	routine->BeginDirectModify = collegedb_begin_direct_modify;
	routine->IterateDirectModify = collegedb_iterate_direct_modify;
	routine->EndDirectModify = collegedb_end_direct_modify;
	routine->ExplainDirectModify = collegedb_explain_scan;
	PG_RETURN_POINTER(routine);
}
