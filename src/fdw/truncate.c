/*-------------------------------------------------------------------------
 *
 * truncate.c
 *	  TRUNCATE of collegedb foreign tables: every shard's part, in the
 *	  front's transaction.
 *
 * A sharded foreign table is emptied on every registered shard, a table
 * on a shard's own server on that shard, each in the shard's write
 * transaction, so that the TRUNCATE commits or rolls back with the front's
 * transaction (two-phase over several shards, like any write; a fleet
 * whose shards cannot commit together refuses it at commit as it refuses
 * any such write).  The dialect says how (CdAdapter.truncate_fmt):
 * PostgreSQL's TRUNCATE, which is transactional there; DELETE on MySQL,
 * whose TRUNCATE commits implicitly, and on SQLite, which has none.
 *
 * A move of one of the table's keys must not run beside it: a move that
 * copied the key's rows before the TRUNCATE reached the source and wrote
 * them on the target after it reached the target would bring them back.
 * Every shard's transaction first takes the lock that holds off moves
 * (CdAdapter.lock_all_sql; it waits for the moves in progress), on every
 * shard before any of them is emptied; where the dialect has no such lock,
 * the DELETE's own row locks conflict with the mover's locking copy.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/rel.h"

#include "catalog/shards.h"
#include "cd_errcodes.h"
#include "fdw/fdw.h"
#include "remote/remote.h"
#include "remote/tombstones.h"

/*
 * truncate_sql returns the statement that empties 'table' on a shard of
 * 'adapter', refusing CASCADE and RESTART IDENTITY where the dialect's
 * statement cannot carry them.
 */
static char *
truncate_sql(const CdForeignTable *table, Relation rel, const CdShard *shard,
			 DropBehavior behavior, bool restart_seqs)
{
	const CdAdapter *adapter = AdapterForDialect(shard->dialect);
	StringInfoData sql;

	if (!adapter->truncate_options && (behavior == DROP_CASCADE || restart_seqs))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot truncate foreign table \"%s\" with %s on shard \"%s\"",
						RelationGetRelationName(rel),
						behavior == DROP_CASCADE ? "CASCADE" : "RESTART IDENTITY",
						shard->name),
				 errdetail("The shard's dialect empties a table with DELETE, which has no such option."),
				 errhint("Leave the option out.")));
	initStringInfo(&sql);
	appendStringInfo(&sql, adapter->truncate_fmt, FdwQualifiedName(table, adapter));
	if (adapter->truncate_options && restart_seqs)
		appendStringInfoString(&sql, " RESTART IDENTITY");
	if (adapter->truncate_options && behavior == DROP_CASCADE)
		appendStringInfoString(&sql, " CASCADE");
	return sql.data;
}

/*
 * collegedb_exec_truncate empties the foreign tables 'rels' (all of
 * collegedb's server) on their shards: first every shard's move lock, then
 * every table's statement, all in the shards' write transactions.
 */
void
collegedb_exec_truncate(List *rels, DropBehavior behavior, bool restart_seqs)
{
	List	   *locked = NIL;
	List	   *work = NIL;		/* pairs: shard, statement */
	ListCell   *lc;

	foreach(lc, rels)
	{
		Relation	rel = lfirst(lc);
		CdForeignTable *table = FdwTableInfo(RelationGetRelid(rel));
		ListCell   *sc;

		foreach(sc, FdwTableShards(table))
		{
			const CdShard *shard = lfirst(sc);

			/* the statements first: an option a dialect refuses sends nothing */
			work = lappend(work, (void *) shard);
			work = lappend(work, truncate_sql(table, rel, shard, behavior, restart_seqs));
			if (!list_member_ptr(locked, shard))
				locked = lappend(locked, (void *) shard);
		}
	}
	foreach(lc, locked)
	{
		const CdShard *shard = lfirst(lc);
		const CdAdapter *adapter = AdapterForDialect(shard->dialect);

		if (adapter->lock_all_sql)
			(void) RemoteExecuteInternal(shard, adapter->lock_all_sql, 0, NULL, NULL, true);
	}
	for (int i = 0; i < list_length(work); i += 2)
		(void) RemoteExecute(list_nth(work, i), list_nth(work, i + 1), 0, NULL, NULL, true);
}
