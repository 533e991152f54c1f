/*-------------------------------------------------------------------------
 *
 * resolver.h
 *	  The resolver: recovery passes of two-phase commit in a worker of
 *	  their own (resolver.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_WORKER_RESOLVER_H
#define COLLEGEDB_WORKER_RESOLVER_H

#include "postgres.h"

#include "fmgr.h"
#include "postmaster/bgworker.h"
#include "utils/timestamp.h"

/* when the passes ran, and whether the last one found nothing */
typedef struct ResolverState
{
	TimestampTz last_pass;		/* 0: none yet */
	bool		recovered_all;
	uint64		recovered_begun;
} ResolverState;

extern void ResolverTick(ResolverState *state);
extern bool ResolverEnsure(BackgroundWorkerHandle **handle, TimestampTz *last_try);
extern bool ResolverStop(BackgroundWorkerHandle **handle);
extern PGDLLEXPORT void collegedb_resolver_main(Datum arg);

#endif							/* COLLEGEDB_WORKER_RESOLVER_H */
