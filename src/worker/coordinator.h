/*-------------------------------------------------------------------------
 *
 * coordinator.h
 *	  A database's coordinator: it resumes interrupted moves and runs
 *	  scheduled jobs (worker/coordinator.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_WORKER_COORDINATOR_H
#define COLLEGEDB_WORKER_COORDINATOR_H

#include "postgres.h"

#include "fmgr.h"

extern PGDLLEXPORT void collegedb_coordinator_main(Datum arg);

#endif							/* COLLEGEDB_WORKER_COORDINATOR_H */
