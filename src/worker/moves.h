/*-------------------------------------------------------------------------
 *
 * moves.h
 *	  The journaled move of one key (worker/moves.c).  Each step commits on
 *	  its own: call these outside a transaction, except MoveStart.
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_WORKER_MOVES_H
#define COLLEGEDB_WORKER_MOVES_H

#include "postgres.h"

extern int64 MoveStart(int64 job_id, const char *key, const char *source,
					   const char *target, int64 *generation, bool *adopted,
					   int64 *busy);
extern void MoveWaitWhileHeld(int64 move_id);
extern void MoveRun(int64 move_id, int64 generation);
extern void MoveCleanUp(int64 move_id, int64 generation);
extern void MovePauseForTests(bool inside, int64 move_id, const char *step);

#endif							/* COLLEGEDB_WORKER_MOVES_H */
