/*-------------------------------------------------------------------------
 *
 * cd_errcodes.h
 *	  collegedb's own SQLSTATEs, class CD (README.md, "Errors").
 *
 * Every condition collegedb raises on its own account uses one of these;
 * remote errors keep the SQLSTATE the shard gave them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_CD_ERRCODES_H
#define COLLEGEDB_CD_ERRCODES_H

#include "utils/elog.h"

#define ERRCODE_CD_SHARD_NOT_FOUND					MAKE_SQLSTATE('C','D','0','0','1')
#define ERRCODE_CD_NO_SHARDS						MAKE_SQLSTATE('C','D','0','0','2')
#define ERRCODE_CD_NO_ELIGIBLE_SHARD				MAKE_SQLSTATE('C','D','0','0','3')
#define ERRCODE_CD_ELIGIBILITY_FAILED				MAKE_SQLSTATE('C','D','0','0','4')
#define ERRCODE_CD_MAPPING_NOT_FOUND				MAKE_SQLSTATE('C','D','0','0','5')
#define ERRCODE_CD_TOMBSTONE_HOPS_EXCEEDED			MAKE_SQLSTATE('C','D','0','0','6')
#define ERRCODE_CD_MOVE_IN_PROGRESS					MAKE_SQLSTATE('C','D','0','0','7')
#define ERRCODE_CD_MIGRATION_UNSUPPORTED_DIALECT	MAKE_SQLSTATE('C','D','0','0','8')
#define ERRCODE_CD_CROSS_SHARD_UNSUPPORTED			MAKE_SQLSTATE('C','D','0','0','9')
#define ERRCODE_CD_SHARD_KEY_REQUIRED				MAKE_SQLSTATE('C','D','0','1','0')
#define ERRCODE_CD_INVALID_REGION_HINT				MAKE_SQLSTATE('C','D','0','1','1')
#define ERRCODE_CD_SLOT_MAP_CONFLICT				MAKE_SQLSTATE('C','D','0','1','2')
#define ERRCODE_CD_TOPOLOGY_UNAVAILABLE				MAKE_SQLSTATE('C','D','0','1','3')
#define ERRCODE_CD_JOB_FAILED						MAKE_SQLSTATE('C','D','0','1','4')

/*
 * Internal: what the PostgreSQL shards' collegedb_guard() raises when a key
 * has moved (CdAdapter.guard_setup); never reaches a client.  The text form
 * is for the guard's own source and for comparing an adapter's SQLSTATE.
 */
#define CD_GUARD_MOVED_SQLSTATE						"CD0M1"
#define ERRCODE_CD_GUARD_MOVED						MAKE_SQLSTATE('C','D','0','M','1')

#endif							/* COLLEGEDB_CD_ERRCODES_H */
