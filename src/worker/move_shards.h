/*-------------------------------------------------------------------------
 *
 * move_shards.h
 *	  What a move sends to the shards of a key's rows
 *	  (worker/move_shards.c), in the shards' open remote transactions.
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_WORKER_MOVE_SHARDS_H
#define COLLEGEDB_WORKER_MOVE_SHARDS_H

#include "postgres.h"

#include "catalog/shards.h"
#include "catalog/tables.h"

extern int64 MoveDeleteKeyRows(const CdShard *shard, const CdTable *table,
							   const char *key);
extern int64 MoveCopyKeyRows(const CdShard *source, const CdShard *target,
							 const CdTable *table, const char *key);
extern int64 MoveDeleteKeysRows(const CdShard *shard, const CdTable *table, int nkeys,
								char *const *keys);
extern int64 MoveCopyKeysRows(const CdShard *source, const CdShard *target,
							  const CdTable *table, int nkeys, char *const *keys);

#endif							/* COLLEGEDB_WORKER_MOVE_SHARDS_H */
