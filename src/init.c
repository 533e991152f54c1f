/*-------------------------------------------------------------------------
 *
 * init.c
 *	  collegedb's entry point: PG_MODULE_MAGIC and _PG_init, which only
 *	  calls each module's init.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"

#include "catalog/catalog.h"
#include "catalog/config.h"
#include "catalog/epochs.h"
#include "catalog/shards.h"
#include "catalog/slotmaps.h"
#include "catalog/tables.h"
#include "collegedb.h"
#include "fdw/fdw.h"
#include "remote/remote.h"
#include "router/router.h"
#include "worker/launcher.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/*
 * _PG_init defines the GUCs and, when loaded through
 * shared_preload_libraries, requests shared memory; then registers the
 * backend-local caches' invalidation callbacks.
 */
void
_PG_init(void)
{
	GucInit();
	ShmemInit();
	WaitsInit();
	ActivityInit();
	ConnectionInit();
	XactInit();
	CatalogInit();
	CatalogStandbyInit();
	ShardCatalogInit();
	ConfigInit();
	EpochInit();
	SlotMapInit();
	TablesInit();
	RouterInit();
	FdwSemiJoinInit();
	LauncherInit();
}
