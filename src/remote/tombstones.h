/*-------------------------------------------------------------------------
 *
 * tombstones.h
 *	  The tombstone protocol on the shards: lookups, the guarded write, and
 *	  what a mover sends (remote/tombstones.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_TOMBSTONES_H
#define COLLEGEDB_TOMBSTONES_H

#include "catalog/shards.h"
#include "catalog/tables.h"
#include "remote/remote.h"

extern void TombstonePrepareShard(const CdShard *shard);
extern void TombstoneEnsureKeyFits(const CdShard *shard, const char *key, int key_len,
								   bool moving);
extern int64 TombstoneExecuteGuarded(const CdShard *shard, const char *key, int key_len,
									 const char *sql, int nparams, const CdParam *params,
									 CdRowSink *sink, char **moved_to);
extern char *TombstoneLookup(const CdShard *shard, const char *key, int key_len);

/* a mover's, in the shards' open remote transactions */
extern char *TombstoneGuardKeys(const CdShard *shard, int nkeys, char *const *keys,
								const int *key_lens);
extern void TombstoneLockKey(const CdShard *shard, const char *key);
extern char *TombstoneFind(const CdShard *shard, const char *key);
extern void TombstoneDrop(const CdShard *shard, const char *key, bool placeholder_only);
extern void TombstoneWrite(const CdShard *shard, const CdTable *table, const char *key,
						   const char *moved_to, int64 move_id);

#endif							/* COLLEGEDB_TOMBSTONES_H */
