/*-------------------------------------------------------------------------
 *
 * strategy.h
 *	  The strategies' pick among the shards that may take a new key.
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_PLACEMENT_STRATEGY_H
#define COLLEGEDB_PLACEMENT_STRATEGY_H

#include "postgres.h"

#include "catalog/config.h"
#include "catalog/shards.h"

typedef struct CdPickContext
{
	const char *key;			/* UTF-8 */
	int			key_len;
	const char *target_region;	/* NULL: none */
	uint64		ticket;			/* round-robin: this allocation's number */
} CdPickContext;

extern const CdShard *PlacementPick(CdStrategy strategy, const CdShard *const *shards,
									int n, const CdPickContext *ctx);

#endif							/* COLLEGEDB_PLACEMENT_STRATEGY_H */
