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
extern bool TombstoneKeyFits(const CdShard *shard, const char *key, int key_len);
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

/* a batched move's, in the shards' open remote transactions */
extern char *TombstoneKeysCondition(const CdShard *shard, const char *column, int first,
									int nkeys, char *const *keys, CdParam *params,
									int *nparams);
extern List *TombstoneLockKeys(const CdShard *shard, int nkeys, char *const *keys);
extern List *TombstoneFindKeys(const CdShard *shard, int nkeys, char *const *keys);
extern void TombstoneDropKeys(const CdShard *shard, int nkeys, char *const *keys,
							  bool placeholder_only);
extern void TombstoneWriteKeys(const CdShard *shard, const CdTable *table, int nkeys,
							   char *const *keys, const char *moved_to,
							   const int64 *move_ids);

#endif							/* COLLEGEDB_TOMBSTONES_H */
