/*-------------------------------------------------------------------------
 *
 * catalog.h
 *	  The OIDs of collegedb's catalog tables, cached, the snapshot its
 *	  readers use, and the owner's rights its SPI statements run with.
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

/*
 * What CatalogAccessBegin saved: the caller's user and security context
 * and the GUC nest level of the search_path it set.
 */
typedef struct CdCatalogAccess
{
	Oid			userid;
	int			sec_context;
	int			nestlevel;
} CdCatalogAccess;

extern Oid	CatalogOwner(void);
extern void CatalogAccessBegin(CdCatalogAccess *save);
extern void CatalogAccessEnd(const CdCatalogAccess *save);

#endif							/* COLLEGEDB_CATALOG_H */
