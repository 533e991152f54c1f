/*-------------------------------------------------------------------------
 *
 * topology.h
 *	  The catalog of topology groups (collegedb.topology_*): every statement
 *	  collegedb's C code runs on it (catalog/topology.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_CATALOG_TOPOLOGY_H
#define COLLEGEDB_CATALOG_TOPOLOGY_H

#include "postgres.h"

#include "nodes/pg_list.h"
#include "utils/jsonb.h"

/* one row of the outbox, collegedb.topology_delivery */
typedef struct CdTopologyDelivery
{
	char	   *group_name;
	char	   *kind;			/* "snapshot" or "state" */
	char	   *channel;		/* "" for a snapshot */
	char	   *member;
	int64		version;
	Jsonb	   *payload;		/* NULL: the snapshot's removal */
	Oid			owner;			/* whose user mappings reach the member */
	int			attempts;
} CdTopologyDelivery;

/* the writers, in the caller's transaction ('caller': who staged it) */
extern Jsonb *TopologyApply(const char *group, Jsonb *members, Jsonb *states, Oid caller);
extern bool TopologyRemove(const char *group, Oid caller);
extern void TopologySetChannel(const char *channel, const char *members, Oid caller);

/* readers */
extern List *TopologyReadSet(const char *group, bool *exists);
extern int64 TopologyPending(const char *group, bool *staged_here);

/* what dropping a shard does */
extern void TopologyForgetShard(const char *shard);

/* the coordinator's side of the outbox */
extern List *TopologyDueDeliveries(int limit, long *next_ms);
extern void TopologyDelivered(const CdTopologyDelivery *d);
extern void TopologyDeliveryFailed(const CdTopologyDelivery *d, const char *error);

#endif							/* COLLEGEDB_CATALOG_TOPOLOGY_H */
