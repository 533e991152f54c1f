/*-------------------------------------------------------------------------
 *
 * standby.c
 *	  What a hot standby of the front refuses: any change of collegedb's
 *	  catalog, and writes through its foreign tables, with SQLSTATE 25006
 *	  and a hint naming the primary.
 *
 * A standby routes from the catalog it replays, so reads and writes of keys
 * whose shard is already known work there; whatever must change the
 * catalog (a new key's mapping, a move, a setting, a decision of two-phase
 * commit) can only be done by the primary.  Two guards say so:
 *	- CatalogEnsureWritable, called by a function before it sends anything
 *	  to a shard, so that a refused call leaves the shards untouched;
 *	- an ExecutorStart hook that refuses, during recovery, any statement
 *	  that would write a table of collegedb's schema: the SQL-language
 *	  functions (set_mapping, configure, ...) and any path without its own
 *	  check get the same error instead of PostgreSQL's bare one.
 * A write through one of collegedb's foreign tables is refused there too
 * (PostgreSQL runs a standby's transactions read-only, foreign tables
 * included), with a hint to write existing keys with collegedb.run().
 * The primary is named by the host and port of primary_conninfo (never
 * anything else of it: it may hold a password).
 *
 * Which functions need the primary before they reach a shard is for their
 * callers to say (CatalogEnsureWritable); this file knows only the tables.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "executor/executor.h"
#include "foreign/foreign.h"
#include "nodes/parsenodes.h"
#include "parser/parsetree.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"

#include "adapters/adapter.h"
#include "catalog/catalog.h"
#include "collegedb.h"

static ExecutorStart_hook_type prev_executor_start = NULL;

static void standby_executor_start(QueryDesc *queryDesc, int eflags);

/*
 * CatalogStandbyInit installs the executor hook that refuses catalog
 * writes during recovery.
 */
void
CatalogStandbyInit(void)
{
	prev_executor_start = ExecutorStart_hook;
	ExecutorStart_hook = standby_executor_start;
}

/*
 * CatalogPrimaryName describes the primary this standby streams from, as
 * 'host "h", port p' from primary_conninfo, or NULL when it names no host.
 */
char *
CatalogPrimaryName(void)
{
	const char *conninfo = GetConfigOption("primary_conninfo", true, false);

	if (conninfo == NULL || conninfo[0] == '\0')
		return NULL;
	return AdapterConninfoHostPort(conninfo);
}

/*
 * CatalogStandbyHint adds to the error being built the hint that names
 * the primary; it returns 0 so that it can stand in an ereport's list.
 */
int
CatalogStandbyHint(void)
{
	char	   *primary = CatalogPrimaryName();

	if (primary)
		return errhint("Run it on the primary (%s).", primary);
	return errhint("Run it on the primary.");
}

/*
 * CatalogEnsureWritable raises 25006 when the front is a hot standby: its
 * catalog is read-only, so what the caller was asked to do cannot happen
 * here.  'message' is the error's whole sentence ("cannot add a shard on
 * a hot standby"), marked by the caller with gettext_noop.  Callers check
 * before they send anything to a shard.
 */
void
CatalogEnsureWritable(const char *message)
{
	if (!RecoveryInProgress())
		return;
	ereport(ERROR,
			(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
			 errmsg_internal("%s", _(message)),
			 errdetail("collegedb's catalog is read-only during recovery: it changes on the primary and reaches the standby through replication."),
			 CatalogStandbyHint()));
}

/*
 * is_collegedb_table says whether a foreign table belongs to a server of
 * collegedb's foreign-data wrapper.
 */
static bool
is_collegedb_table(Oid relid)
{
	ForeignTable *table = GetForeignTable(relid);
	ForeignServer *server = GetForeignServer(table->serverid);

	return strcmp(GetForeignDataWrapper(server->fdwid)->fdwname, "collegedb") == 0;
}

/*
 * standby_executor_start refuses, during recovery, a statement that would
 * write (or lock for writing) a table of collegedb's schema, before the
 * executor refuses it without saying where it can run.
 */
static void
standby_executor_start(QueryDesc *queryDesc, int eflags)
{
	if (RecoveryInProgress() && !(eflags & EXEC_FLAG_EXPLAIN_ONLY))
	{
		Oid			schema = InvalidOid;
		ListCell   *lc;

		foreach(lc, queryDesc->plannedstmt->rtable)
		{
			RangeTblEntry *rte = lfirst(lc);

			if (rte->rtekind != RTE_RELATION || (rte->requiredPerms & ~ACL_SELECT) == 0)
				continue;
			if (rte->relkind == RELKIND_FOREIGN_TABLE && is_collegedb_table(rte->relid))
			{
				char	   *primary = CatalogPrimaryName();

				ereport(ERROR,
						(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
						 errmsg("cannot write through foreign table \"%s\" on a hot standby",
								get_rel_name(rte->relid)),
						 errdetail("A hot standby runs every transaction read-only, foreign tables included."),
						 primary ?
						 errhint("Write keys that exist with collegedb.run() here, or run the statement on the primary (%s).", primary) :
						 errhint("Write keys that exist with collegedb.run() here, or run the statement on the primary.")));
			}
			if (!OidIsValid(schema))
				schema = get_namespace_oid("collegedb", true);
			if (OidIsValid(schema) && get_rel_namespace(rte->relid) == schema)
				ereport(ERROR,
						(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
						 errmsg("cannot change collegedb's catalog on a hot standby"),
						 errdetail("Table \"collegedb.%s\" is read-only during recovery: it changes on the primary and reaches the standby through replication.",
								   get_rel_name(rte->relid)),
						 CatalogStandbyHint()));
		}
	}
	if (prev_executor_start)
		prev_executor_start(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
}
