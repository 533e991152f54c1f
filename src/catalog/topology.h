/*-------------------------------------------------------------------------
 *
 * topology.h
 *	  The catalog of topology groups (collegedb.topology_*): who belongs to
 *	  a group, what is still to be delivered, and what dropping a shard
 *	  does to them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_CATALOG_TOPOLOGY_H
#define COLLEGEDB_CATALOG_TOPOLOGY_H

#include "postgres.h"

#include "nodes/pg_list.h"

extern List *TopologyReadSet(const char *group, bool *exists);
extern int64 TopologyPending(const char *group, bool *staged_here);
extern void TopologyForgetShard(const char *shard);

#endif							/* COLLEGEDB_CATALOG_TOPOLOGY_H */
