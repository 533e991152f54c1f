/*-------------------------------------------------------------------------
 *
 * catalog.c
 *	  Finds collegedb's catalog tables by cached OID, and turns changes to
 *	  them into cache invalidations for every backend.
 *
 * The tables are created by the extension script in schema collegedb.
 * Their OIDs are looked up once and forgotten when any of them gets a
 * relcache invalidation (which DROP EXTENSION sends).  A statement-level
 * trigger on each table (collegedb.invalidate_cache) queues a relcache
 * invalidation of the table when its rows change: every backend sees it at
 * its next statement, this one at its next command, and an aborted change
 * sends nothing (the trigger is invalidate.c).  The caches themselves live
 * beside their readers (shards.c, config.c, epochs.c, slotmaps.c, tables.c
 * and the router's mapping cache, router/router.c); the simple ones, valid
 * until their table changes, are dropped here (CatalogCacheRegister).
 *
 * The tables belong to the role that created the extension, and nobody
 * else holds a privilege on them: roles granted collegedb's functions
 * reach them only through those functions.  Reads by index scan check no
 * privilege; statements through SPI do, so every SPI statement on a
 * catalog table runs between CatalogAccessBegin and CatalogAccessEnd, with
 * the owner's rights and a search_path that only holds pg_catalog (the
 * statements name their tables with the schema; operators and functions
 * must not resolve to the caller's objects while the owner's rights are
 * in force).  Remote work never happens in between: shard connections
 * always use the calling role's user mapping.  CatalogExec is that one
 * path: every SPI statement of collegedb's C code on its catalog goes
 * through it, and the writes of each table are in that table's file of
 * src/catalog/ (mappings.c, shards.c, tables.c, config.c, epochs.c,
 * slotmaps.c, journal.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "catalog/catalog.h"
#include "collegedb.h"

static const char *const rel_names[CD_REL_COUNT] = {
	[CD_REL_SHARD] = "shard",
	[CD_REL_CONFIG] = "config",
	[CD_REL_MAPPING] = "mapping",
	[CD_REL_MAPPING_PKEY] = "mapping_pkey",
	[CD_REL_EPOCH] = "epoch",
	[CD_REL_TABLES] = "registered_table",
	[CD_REL_SLOT_MAP] = "slot_map",
	[CD_REL_SLOT_MOVE] = "slot_move",
	[CD_REL_SHARD_NUMBER] = "shard_number",
};

static Oid	rel_oids[CD_REL_COUNT];
static Oid	catalog_owner = InvalidOid;
static void (*first_use_hook) (void) = NULL;

/* the backend-local caches of catalog tables (CatalogCacheRegister) */
typedef struct CatalogCache
{
	CdCatalogRel rel;
	bool	   *valid;
} CatalogCache;

static CatalogCache caches[CD_REL_COUNT * 2];
static int	ncaches = 0;

static void
catalog_relcache_callback(Datum arg, Oid relid)
{
	/* before the OIDs are forgotten: they say which table changed */
	for (int i = 0; i < ncaches; i++)
		if (CatalogRelidIs(caches[i].rel, relid))
			*caches[i].valid = false;

	for (int i = 0; i < CD_REL_COUNT; i++)
	{
		if (relid == InvalidOid || relid == rel_oids[i])
		{
			memset(rel_oids, 0, sizeof(rel_oids));
			catalog_owner = InvalidOid;
			return;
		}
	}
}

/*
 * CatalogInit registers the callback that forgets the cached OIDs and
 * drops the registered caches.
 */
void
CatalogInit(void)
{
	CacheRegisterRelcacheCallback(catalog_relcache_callback, (Datum) 0);
}

/*
 * CatalogCacheRegister makes '*valid' false whenever catalog table 'rel'
 * changes (its trigger's invalidation, or a reset of every relation): a
 * cache kept beside the table's reader then reloads at its next use.
 * Called from the readers' init functions, in _PG_init.
 */
void
CatalogCacheRegister(CdCatalogRel rel, bool *valid)
{
	if (ncaches >= lengthof(caches))
		elog(ERROR, "too many caches of collegedb's catalog");
	caches[ncaches].rel = rel;
	caches[ncaches].valid = valid;
	ncaches++;
}

/*
 * CatalogOnFirstUse sets what runs when a backend first finds collegedb's
 * catalog in its database, and again after the catalog's OIDs were
 * forgotten: the launcher wakes the database's coordinator.  The catalog
 * knows nothing of workers; the layer above registers itself.
 */
void
CatalogOnFirstUse(void (*hook) (void))
{
	first_use_hook = hook;
}

/*
 * installed_version returns the version of the collegedb extension in this
 * database (palloc'd), or NULL when there is none; read from pg_extension
 * directly, not through SPI or the catalog OIDs, which may belong to
 * another version's catalog.
 */
static char *
installed_version(void)
{
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	char	   *version = NULL;

	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber, F_NAMEEQ,
				CStringGetDatum("collegedb"));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		bool		isnull;
		Datum		datum = heap_getattr(tuple, Anum_pg_extension_extversion,
										 RelationGetDescr(rel), &isnull);

		if (!isnull)
			version = TextDatumGetCString(datum);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return version;
}

/*
 * check_version refuses a catalog of another version than the one this
 * library serves: its tables have other columns, which the library would
 * misread.  That is the state of a database between the installation of a
 * new collegedb and ALTER EXTENSION collegedb UPDATE.  The update's own
 * scripts (and CREATE EXTENSION's) run while their version is being made,
 * and are let through.
 */
static void
check_version(void)
{
	char	   *version;

	if (creating_extension)
		return;
	version = installed_version();
	if (version != NULL && strcmp(version, COLLEGEDB_VERSION) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("collegedb's catalog in this database is version %s, but the library loaded is version %s",
						version, COLLEGEDB_VERSION),
				 errhint("Run ALTER EXTENSION collegedb UPDATE.")));
}

/*
 * CatalogRelid returns the OID of one of collegedb's catalog relations;
 * fails clearly when the extension is not installed in this database, or
 * is of another version than this library (check_version).
 */
Oid
CatalogRelid(CdCatalogRel rel)
{
	if (!OidIsValid(rel_oids[rel]))
	{
		Oid			nsp = get_namespace_oid(COLLEGEDB_SCHEMA, true);
		Oid			relid = OidIsValid(nsp) ? get_relname_relid(rel_names[rel], nsp) : InvalidOid;

		if (!OidIsValid(relid))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("extension \"collegedb\" is not installed in this database"),
					 errhint("Run CREATE EXTENSION collegedb.")));
		/* the first use since the cache was reset (see CatalogOnFirstUse) */
		if (!memcmp(rel_oids, (Oid[CD_REL_COUNT]) {0}, sizeof(rel_oids)))
		{
			check_version();
			if (first_use_hook)
				first_use_hook();
		}
		rel_oids[rel] = relid;
	}
	return rel_oids[rel];
}

/*
 * CatalogRelidIs says, without any lookup (so it is safe in invalidation
 * callbacks), whether 'relid' is the cached OID of 'rel'; InvalidOid (all
 * relations) always matches.
 */
bool
CatalogRelidIs(CdCatalogRel rel, Oid relid)
{
	return relid == InvalidOid || !OidIsValid(rel_oids[rel]) || relid == rel_oids[rel];
}

/*
 * CatalogReadSnapshot returns a registered snapshot for reading catalog
 * rows: the latest one, so routing follows every committed change (and the
 * current transaction's own) whatever the isolation level.
 */
Snapshot
CatalogReadSnapshot(void)
{
	return RegisterSnapshot(GetLatestSnapshot());
}

void
CatalogReleaseSnapshot(Snapshot snapshot)
{
	UnregisterSnapshot(snapshot);
}

/*
 * CatalogOwner returns the owner of collegedb's catalog tables: the role
 * that created the extension.
 */
Oid
CatalogOwner(void)
{
	if (!OidIsValid(catalog_owner))
	{
		Oid			relid = CatalogRelid(CD_REL_SHARD);
		HeapTuple	tp = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));

		if (!HeapTupleIsValid(tp))
			elog(ERROR, "cache lookup failed for relation %u", relid);
		catalog_owner = ((Form_pg_class) GETSTRUCT(tp))->relowner;
		ReleaseSysCache(tp);
	}
	return catalog_owner;
}

/*
 * CatalogAccessBegin gives the SPI statements that follow the catalog
 * owner's rights, with search_path = pg_catalog, pg_temp, until
 * CatalogAccessEnd.  The owner's rights end with the (sub)transaction if
 * an error comes first.
 */
void
CatalogAccessBegin(CdCatalogAccess *save)
{
	Oid			owner = CatalogOwner();

	GetUserIdAndSecContext(&save->userid, &save->sec_context);
	SetUserIdAndSecContext(owner, save->sec_context |
						   SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	save->nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
}

/*
 * CatalogAccessEnd returns to the caller's rights and search_path.
 */
void
CatalogAccessEnd(const CdCatalogAccess *save)
{
	AtEOXact_GUC(false, save->nestlevel);
	SetUserIdAndSecContext(save->userid, save->sec_context);
}

/*
 * catalog_exec runs a statement for CatalogExec and CatalogExecPlan: with
 * 'plan' given, through the plan it caches there (prepared on first use,
 * kept for the backend's life).
 */
static uint64
catalog_exec(SPIPlanPtr *plan, const char *sql, int nargs, const Oid *types,
			 const Datum *values, const char *nulls, bool read_only,
			 CdCatalogRows *rows)
{
	MemoryContext caller = CurrentMemoryContext;
	CdCatalogAccess access;
	uint64		processed;
	int			rc;

	CatalogAccessBegin(&access);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (plan && *plan == NULL)
	{
		SPIPlanPtr	p = SPI_prepare(sql, nargs, (Oid *) types);

		if (p == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		SPI_keepplan(p);
		*plan = p;
	}
	if (plan)
		rc = SPI_execute_plan(*plan, (Datum *) values, nulls, read_only, 0);
	else
		rc = SPI_execute_with_args(sql, nargs, (Oid *) types, (Datum *) values, nulls,
								   read_only, 0);
	if (rc < 0)
		elog(ERROR, "SPI_execute failed: %s", SPI_result_code_string(rc));
	processed = SPI_processed;
	if (rows)
	{
		MemoryContext old = MemoryContextSwitchTo(caller);

		rows->count = SPI_tuptable ? processed : 0;
		rows->desc = SPI_tuptable ? CreateTupleDescCopy(SPI_tuptable->tupdesc) : NULL;
		rows->rows = palloc(sizeof(HeapTuple) * Max(rows->count, 1));
		for (uint64 i = 0; i < rows->count; i++)
			rows->rows[i] = heap_copytuple(SPI_tuptable->vals[i]);
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	CatalogAccessEnd(&access);
	return processed;
}

/*
 * CatalogExec runs one SQL statement on collegedb's catalog, with
 * arguments, the catalog owner's rights and a search_path of pg_catalog
 * (see the file header), in its own SPI connection, and returns the number
 * of rows it processed.  'read_only' runs it on the current snapshot (a
 * read that must agree with the caller's); otherwise it takes a new
 * snapshot, as any statement of the caller would.  With 'rows' given, the
 * result's rows are copied into the caller's memory context (read them
 * with CatalogText and CatalogValue).
 */
uint64
CatalogExec(const char *sql, int nargs, const Oid *types, const Datum *values,
			const char *nulls, bool read_only, CdCatalogRows *rows)
{
	return catalog_exec(NULL, sql, nargs, types, values, nulls, read_only, rows);
}

/*
 * CatalogExtensionIsCurrent says whether the extension in this database is
 * the version this library serves (it serves no other catalog).
 */
bool
CatalogExtensionIsCurrent(void)
{
	char	   *version = installed_version();

	return version != NULL && strcmp(version, COLLEGEDB_VERSION) == 0;
}

/*
 * CatalogExecPlan is CatalogExec through a plan prepared once per backend
 * and cached in *plan, for a statement on a path that runs often.
 */
uint64
CatalogExecPlan(SPIPlanPtr *plan, const char *sql, int nargs, const Oid *types,
				const Datum *values, const char *nulls, bool read_only,
				CdCatalogRows *rows)
{
	return catalog_exec(plan, sql, nargs, types, values, nulls, read_only, rows);
}

/*
 * CatalogExecTexts is CatalogExec (with 'plan': CatalogExecPlan) for a
 * statement whose arguments are all text, 'texts' (a NULL one is NULL).
 */
uint64
CatalogExecTexts(SPIPlanPtr *plan, const char *sql, int nargs, const char *const *texts,
				 bool read_only, CdCatalogRows *rows)
{
	Oid		   *types = palloc(sizeof(Oid) * Max(nargs, 1));
	Datum	   *values = palloc(sizeof(Datum) * Max(nargs, 1));
	char	   *nulls = palloc(nargs + 1);

	for (int i = 0; i < nargs; i++)
	{
		types[i] = TEXTOID;
		values[i] = texts[i] ? CStringGetTextDatum(texts[i]) : (Datum) 0;
		nulls[i] = texts[i] ? ' ' : 'n';
	}
	nulls[nargs] = '\0';
	return catalog_exec(plan, sql, nargs, types, values, nulls, read_only, rows);
}

/*
 * CatalogTextById runs 'sql', whose one parameter is a bigint id, and
 * returns the first column of its first row as text (CatalogText); NULL
 * when it returns no row.
 */
char *
CatalogTextById(const char *sql, int64 id)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(id)};
	CdCatalogRows rows;

	if (CatalogExec(sql, 1, types, values, NULL, false, &rows) == 0)
		return NULL;
	return CatalogText(&rows, 0, 1);
}

/*
 * CatalogText returns column 'col' (1-based) of row 'row' as text, in the
 * current memory context; NULL for a null.
 */
char *
CatalogText(const CdCatalogRows *rows, uint64 row, int col)
{
	return SPI_getvalue(rows->rows[row], rows->desc, col);
}

/*
 * CatalogValue returns column 'col' (1-based) of row 'row'; it points into
 * the copied row.
 */
Datum
CatalogValue(const CdCatalogRows *rows, uint64 row, int col, bool *isnull)
{
	return SPI_getbinval(rows->rows[row], rows->desc, col, isnull);
}
