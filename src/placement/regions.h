/*-------------------------------------------------------------------------
 *
 * regions.h
 *	  The eleven region codes (seed 003) and the distances between them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_PLACEMENT_REGIONS_H
#define COLLEGEDB_PLACEMENT_REGIONS_H

#include "postgres.h"

#define CD_REGION_COUNT 11

extern int	RegionIndex(const char *code);
extern int	RegionDistance(int a, int b);
extern const char *RegionRegionPrefix(const char *key, int key_len);
extern void EnsureValidRegion(const char *region);

#endif							/* COLLEGEDB_PLACEMENT_REGIONS_H */
