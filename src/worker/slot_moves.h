/*-------------------------------------------------------------------------
 *
 * slot_moves.h
 *	  The move of a slot to another shard (worker/slot_moves.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_WORKER_SLOT_MOVES_H
#define COLLEGEDB_WORKER_SLOT_MOVES_H

#include "postgres.h"

#include "catalog/slotmaps.h"

extern const CdSlotMap *SlotMoveCheck(int32 slot, const char *target, const char **source);
extern char *SlotMoveRun(int64 job_id, int32 slot, const char *target, int concurrency);

#endif							/* COLLEGEDB_WORKER_SLOT_MOVES_H */
