/*-------------------------------------------------------------------------
 *
 * slots.h
 *	  Slot maps as values (placement/slots.c): the default map, the
 *	  normal form, the digest, a slot's shard, the snapshot's JSON.
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_PLACEMENT_SLOTS_H
#define COLLEGEDB_PLACEMENT_SLOTS_H

#include "postgres.h"

#include "catalog/slotmaps.h"

extern CdSlotMap *PlacementDefaultSlotMap(int32 slots, const char *const *shards, int n);
extern void PlacementNormalizeSlotMap(CdSlotMap *map);
extern char *PlacementSlotMapDigest(const CdSlotMap *map);
extern int32 PlacementKeySlot(const char *key, int key_len, int32 slots);
extern const char *PlacementSlotShard(const CdSlotMap *map, int32 slot);
extern CdSlotMap *PlacementSlotMapWith(const CdSlotMap *map, int32 slot, const char *shard);
extern bool PlacementSlotMapsEqual(const CdSlotMap *a, const CdSlotMap *b);
extern char *PlacementSlotRangesJson(const CdSlotMap *map);
extern char *PlacementSlotMapSnapshot(const CdSlotMap *map);

#endif							/* COLLEGEDB_PLACEMENT_SLOTS_H */
