/*-------------------------------------------------------------------------
 *
 * shmem.h
 *	  Shared per-shard activity counters.
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_SHMEM_H
#define COLLEGEDB_SHMEM_H

typedef struct ShardActivity
{
	char		shard[NAMEDATALEN];
	uint64		statements;
	uint64		errors;
} ShardActivity;

extern ShardActivity *ShmemActivitySnapshot(int *count);

#endif							/* COLLEGEDB_SHMEM_H */
