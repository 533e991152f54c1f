/*-------------------------------------------------------------------------
 *
 * slotmaps.h
 *	  The installed slot maps (catalog table collegedb.slot_map) and the
 *	  slots being moved (collegedb.slot_move), cached.
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_CATALOG_SLOTMAPS_H
#define COLLEGEDB_CATALOG_SLOTMAPS_H

#include "postgres.h"

#include "nodes/pg_list.h"
#include "utils/jsonb.h"

#define SLOT_MAP_MAX_SLOTS 65536
#define SLOT_MAP_DEFAULT_SLOTS 1024

/* slots start .. end - 1 belong to 'shard' */
typedef struct CdSlotRange
{
	int32		start;
	int32		end;			/* exclusive */
	char	   *shard;
} CdSlotRange;

/*
 * A slot map: a complete, non-overlapping cover of 0 .. slots - 1, sorted
 * by start once normalised.  version 0 and digest NULL: not installed.
 */
typedef struct CdSlotMap
{
	int32		version;
	int32		slots;
	char	   *digest;
	int			nranges;
	CdSlotRange *ranges;
} CdSlotMap;

/* a slot that is moving from source to target (collegedb.slot_move) */
typedef struct CdSlotMove
{
	int32		slot;
	char		source[NAMEDATALEN];
	char		target[NAMEDATALEN];
	int64		job_id;			/* 0: none */
} CdSlotMove;

extern void SlotMapInit(void);
extern CdSlotMap *SlotMapParse(int32 slots, Jsonb *ranges);
extern char *SlotSpanText(int32 start, int32 end);
extern const CdSlotMap *SlotMapCurrent(void);
extern CdSlotMap *SlotMapLockNewest(void);
extern void SlotMapInsert(const CdSlotMap *map, const char *ranges_json);
extern const CdSlotMove *SlotMoveFind(int32 slot);
extern bool SlotMoveAny(void);
extern void SlotMoveInsert(int32 slot, const char *source, const char *target, int64 job_id);
extern void SlotMoveDelete(int32 slot);

#endif							/* COLLEGEDB_CATALOG_SLOTMAPS_H */
