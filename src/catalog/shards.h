/*-------------------------------------------------------------------------
 *
 * shards.h
 *	  The registered shards (catalog table collegedb.shard) as a
 *	  backend-local cache.
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_CATALOG_SHARDS_H
#define COLLEGEDB_CATALOG_SHARDS_H

#include "postgres.h"

#include "nodes/pg_list.h"
#include "utils/jsonb.h"

#include "adapters/adapter.h"

typedef enum CdDrain
{
	CD_DRAIN_ACTIVE = 0,
	CD_DRAIN_DRAINING,
	CD_DRAIN_RETIRED
} CdDrain;

typedef struct CdShard
{
	char		name[NAMEDATALEN];
	Oid			serverid;		/* InvalidOid if the server was dropped */
	CdDialect	dialect;
	char	   *physical_id;
	bool		writable;
	CdDrain		drain;
	Jsonb	   *tags;
	char	   *region;
	double		priority;
} CdShard;

/* Attribute numbers of collegedb.shard, in the order of the script */
#define Anum_shard_name			1
#define Anum_shard_physical_id	2
#define Anum_shard_writable		3
#define Anum_shard_drain		4
#define Anum_shard_tags			5
#define Anum_shard_region		6
#define Anum_shard_priority		7
#define Anum_shard_added_at		8
#define Natts_shard				8

/*
 * ShardIs says whether two shard pointers name the same shard.  Pointers
 * into the shard cache are not identities: the cache is rebuilt at any
 * invalidation (a catalog change elsewhere, a reset of the invalidation
 * queue), so two lookups of one shard may return different pointers.
 */
static inline bool
ShardIs(const CdShard *a, const CdShard *b)
{
	return a == b || (a != NULL && b != NULL && strcmp(a->name, b->name) == 0);
}

extern void ShardCatalogInit(void);
extern const CdShard *ShardLookup(const char *name);
extern const CdShard *ShardLookupOptional(const char *name);
extern int16 ShardNumber(const char *name);
extern const char *ShardNumberName(int number);
extern List *ShardList(void);
extern List *ShardListNonEmpty(void);
extern const CdShard **ShardReadSet(int *count);
extern bool ShardParseDrain(const char *name, CdDrain *drain);
extern const char *ShardDrainName(CdDrain drain);
extern CdDialect ShardServerDialect(Oid serverid, bool *is_shard);

/* A change of a shard's state: what is set changes, the rest stays */
typedef struct CdShardChange
{
	bool		set_writable;
	bool		writable;
	const char *drain;			/* NULL: unchanged; checked by the caller */
	Jsonb	   *tags;
	const char *region;
	bool		set_priority;
	double		priority;
	const char *physical_id;
} CdShardChange;

extern void ShardInsert(const char *name, const char *region, double priority,
						const char *physical_id, Jsonb *tags);
extern void ShardDelete(const char *name);
extern void ShardUpdateState(const char *name, const CdShardChange *change);

#endif							/* COLLEGEDB_CATALOG_SHARDS_H */
