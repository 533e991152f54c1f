/*-------------------------------------------------------------------------
 *
 * config.h
 *	  The persistent settings (catalog table collegedb.config), cached.
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_CATALOG_CONFIG_H
#define COLLEGEDB_CATALOG_CONFIG_H

#include "postgres.h"

#include "datatype/timestamp.h"

typedef enum CdStrategy
{
	CD_STRATEGY_HASH = 0,
	CD_STRATEGY_ROUND_ROBIN,
	CD_STRATEGY_RANDOM,
	CD_STRATEGY_LOCATION,
	CD_STRATEGY_JUMP,
	CD_STRATEGY_SLOTS
} CdStrategy;

typedef struct CdConfig
{
	CdStrategy	strategy;
	CdStrategy	read_strategy;	/* falls back to strategy */
	CdStrategy	write_strategy; /* falls back to strategy */
	bool		computed;		/* placement = 'computed' */
	char		target_region[16];	/* "" when unset */
	bool		allocate_on_read;
	bool		hash_mappings;
	int64		max_shard_size; /* 0 when unset */
	int64		size_cache_ttl_ms;
	int64		mapping_cache_ttl_ms;
	Oid			eligible;		/* InvalidOid when unset */
	Oid			eligible_owner; /* the role that configured it, which runs it */
	int			migration_concurrency;
	bool		region_prefixed_keys;
} CdConfig;

extern const CdConfig *ConfigGet(void);
extern void ConfigInit(void);
extern bool ConfigParseStrategy(const char *name, CdStrategy *strategy);
extern const char *ConfigStrategyName(CdStrategy strategy);
extern bool ConfigApply(int nargs, const Oid *types, const Datum *values, const char *nulls);

#endif							/* COLLEGEDB_CATALOG_CONFIG_H */
