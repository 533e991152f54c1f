/*-------------------------------------------------------------------------
 *
 * catalog.h
 *	  The OIDs of collegedb's catalog tables, cached, and the snapshot its
 *	  readers use.
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_CATALOG_H
#define COLLEGEDB_CATALOG_H

#include "postgres.h"

#include "utils/snapshot.h"

typedef enum CdCatalogRel
{
	CD_REL_SHARD = 0,
	CD_REL_CONFIG,
	CD_REL_MAPPING,
	CD_REL_MAPPING_PKEY,
	CD_REL_EPOCH,
	CD_REL_TABLES,
	CD_REL_COUNT
} CdCatalogRel;

extern void CatalogInit(void);
extern Oid	CatalogRelid(CdCatalogRel rel);
extern bool CatalogRelidIs(CdCatalogRel rel, Oid relid);
extern Snapshot CatalogReadSnapshot(void);
extern void CatalogReleaseSnapshot(Snapshot snapshot);

#endif							/* COLLEGEDB_CATALOG_H */
