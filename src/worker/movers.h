/*-------------------------------------------------------------------------
 *
 * movers.h
 *	  A job's keys moved by several workers at once (worker/movers.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_WORKER_MOVERS_H
#define COLLEGEDB_WORKER_MOVERS_H

#include "postgres.h"

#include "fmgr.h"

extern void JobMoveKeys(int64 job_id, int concurrency, int nkeys);
extern PGDLLEXPORT void collegedb_mover_main(Datum arg);

#endif							/* COLLEGEDB_WORKER_MOVERS_H */
