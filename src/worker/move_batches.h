/*-------------------------------------------------------------------------
 *
 * move_batches.h
 *	  A batch of a job's keys moved together through the journaled move
 *	  protocol (worker/move_batches.c).  Call outside a transaction.
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_WORKER_MOVE_BATCHES_H
#define COLLEGEDB_WORKER_MOVE_BATCHES_H

#include "postgres.h"

#include "catalog/journal.h"

extern long MoveBatch(int64 job_id, int n, const CdJobKeyRow *keys, bool *done,
					  bool *started);

#endif							/* COLLEGEDB_WORKER_MOVE_BATCHES_H */
