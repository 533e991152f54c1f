/*-------------------------------------------------------------------------
 *
 * hash.h
 *	  The placement hash functions (src/README.md, "Placement"):
 *	  rendezvous, jump and slots.  Pure functions of their inputs.
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_PLACEMENT_HASH_H
#define COLLEGEDB_PLACEMENT_HASH_H

#include "postgres.h"

#define FNV32_OFFSET	((uint32) 2166136261U)

extern uint32 PlacementFnv1a32(const char *data, size_t len, uint32 h);
extern uint32 PlacementRendezvousScore(const char *shard, size_t shard_len,
									   const char *key, size_t key_len);
extern int	PlacementRendezvousOwner(const char *key, size_t key_len,
									 const char *const *shards, int nshards);
extern int32 PlacementJumpBucket(const char *key, size_t key_len, int32 buckets);
extern int32 PlacementSlot(const char *key, size_t key_len, int32 slot_count);

#endif							/* COLLEGEDB_PLACEMENT_HASH_H */
