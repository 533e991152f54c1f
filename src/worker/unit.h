/*-------------------------------------------------------------------------
 *
 * unit.h
 *	  A background worker's unit of work: one transaction each
 *	  (worker/unit.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_WORKER_UNIT_H
#define COLLEGEDB_WORKER_UNIT_H

#include "postgres.h"

#include "postmaster/bgworker.h"

extern void WorkerBegin(void);
extern void WorkerCommit(void);
extern void WorkerAbort(void);
extern void WorkerSetLocal(const char *name, int value);
extern ErrorData *WorkerCatchError(MemoryContext context);
extern void WorkerDescribe(BackgroundWorker *worker, const char *function,
						   const char *type, const char *name);
extern void WorkerSettleLoop(const char *appname);
extern MemoryContext WorkerLoopTop(MemoryContext loop_context);
extern void WorkerConnect(Oid database, Oid owner);

#endif							/* COLLEGEDB_WORKER_UNIT_H */
