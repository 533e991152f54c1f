/*-------------------------------------------------------------------------
 *
 * progress.h
 *	  NOTICE lines on a running job's progress, for the functions that
 *	  wait for a job (worker/progress.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_WORKER_PROGRESS_H
#define COLLEGEDB_WORKER_PROGRESS_H

#include "postgres.h"

#include "utils/timestamp.h"

extern TimestampTz JobProgressStart(void);
extern void JobProgressReport(int64 job_id, TimestampTz *next_at);

#endif							/* COLLEGEDB_WORKER_PROGRESS_H */
