/*-------------------------------------------------------------------------
 *
 * strategy.h
 *	  Allocation of a new key: the shards that take new keys, and the
 *	  strategy's pick among them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_PLACEMENT_STRATEGY_H
#define COLLEGEDB_PLACEMENT_STRATEGY_H

#include "postgres.h"

#include "catalog/config.h"
#include "catalog/shards.h"

extern const CdShard *PlacementAllocate(CdStrategy strategy, const char *key, int key_len);

#endif							/* COLLEGEDB_PLACEMENT_STRATEGY_H */
