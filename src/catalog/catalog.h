/*-------------------------------------------------------------------------
 *
 * catalog.h
 *	  The OIDs of collegedb's catalog tables, cached, the snapshot its
 *	  readers use, and the one path of its SPI statements (CatalogExec),
 *	  with the owner's rights.
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_CATALOG_H
#define COLLEGEDB_CATALOG_H

#include "postgres.h"

#include "access/htup.h"
#include "access/tupdesc.h"
#include "executor/spi.h"
#include "utils/snapshot.h"

typedef enum CdCatalogRel
{
	CD_REL_SHARD = 0,
	CD_REL_CONFIG,
	CD_REL_MAPPING,
	CD_REL_MAPPING_PKEY,
	CD_REL_EPOCH,
	CD_REL_TABLES,
	CD_REL_SLOT_MAP,
	CD_REL_SLOT_MOVE,
	CD_REL_SHARD_NUMBER,
	CD_REL_COUNT
} CdCatalogRel;

extern void CatalogInit(void);
extern void CatalogCacheRegister(CdCatalogRel rel, bool *valid);
extern void CatalogOnFirstUse(void (*hook) (void));
extern Oid	CatalogRelid(CdCatalogRel rel);
extern bool CatalogRelidIs(CdCatalogRel rel, Oid relid);
extern bool CatalogTakeMappingsChanged(void);
extern Snapshot CatalogReadSnapshot(void);
extern void CatalogReleaseSnapshot(Snapshot snapshot);

/* standby.c: the catalog is read-only on a hot standby */
extern void CatalogStandbyInit(void);
extern void CatalogEnsureWritable(const char *message);
extern char *CatalogPrimaryName(void);
extern int	CatalogStandbyHint(void);

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

/* the rows of a CatalogExec, copied into the caller's memory context */
typedef struct CdCatalogRows
{
	uint64		count;
	TupleDesc	desc;
	HeapTuple  *rows;
} CdCatalogRows;

extern uint64 CatalogExec(const char *sql, int nargs, const Oid *types, const Datum *values,
						  const char *nulls, bool read_only, CdCatalogRows *rows);
extern uint64 CatalogExecPlan(SPIPlanPtr *plan, const char *sql, int nargs,
							  const Oid *types, const Datum *values, const char *nulls,
							  bool read_only, CdCatalogRows *rows);
extern uint64 CatalogExecTexts(SPIPlanPtr *plan, const char *sql, int nargs,
							   const char *const *texts, bool read_only,
							   CdCatalogRows *rows);
extern bool CatalogExtensionIsCurrent(void);
extern char *CatalogText(const CdCatalogRows *rows, uint64 row, int col);
extern char *CatalogTextById(const char *sql, int64 id);
extern Datum CatalogValue(const CdCatalogRows *rows, uint64 row, int col, bool *isnull);

/*
 * CATALOG_RETRY_DELAY is SQL for how long a unit of work that failed n
 * times waits before it is tried again, 'attempts' being a column that
 * holds n - 1 (read before it is incremented): min(1 s * 2^(n-1), 300 s),
 * jittered in [d/2, d) so that retries spread out.
 */
#define CATALOG_RETRY_DELAY(attempts) \
	"least(300, power(2, " attempts ")) * (0.5 + random() / 2) * interval '1 second'"

#endif							/* COLLEGEDB_CATALOG_H */
