/*-------------------------------------------------------------------------
 *
 * routed.c
 *	  Runs a statement by key: resolves the key, then runs the statement
 *	  where the key lives.
 *
 * Under KV placement, and for a key with an exception, that is one shard.
 * Under computed placement a key may live on any of its owners by epoch:
 * a read tries them newest first and stops at the first that returns
 * rows (recording an exception when that was not the newest owner, so the
 * next read goes straight there); a write looks for the key in the
 * registered tables of each owner and goes where it is found, else to the
 * newest owner.  A write of a key found nowhere while no shard takes new
 * keys is NO_ELIGIBLE_SHARD.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/tables.h"
#include "cd_errcodes.h"
#include "remote/remote.h"
#include "router/router.h"

/*
 * RouterProbeKey returns the index of the first shard that holds the key
 * in any registered table, -1 when none does (or no table is registered).
 */
int
RouterProbeKey(const char *key, int key_len, const CdShard *const *shards, int n)
{
	List	   *tables = RegisteredTables();
	CdParam		param;
	ListCell   *lc;

	if (tables == NIL)
		return -1;
	memset(&param, 0, sizeof(param));
	param.kind = CD_VALUE_TEXT;
	param.typid = TEXTOID;
	param.str = pnstrdup(key, key_len);
	param.len = key_len;

	for (int i = 0; i < n; i++)
	{
		const CdAdapter *adapter = AdapterForDialect(shards[i]->dialect);

		foreach(lc, tables)
		{
			CdTable    *table = lfirst(lc);
			char	   *sql = psprintf("SELECT 1 FROM %s WHERE %s = $1 LIMIT 1",
									   adapter->quote_ident(table->name),
									   adapter->quote_ident(table->key_column));

			if (RemoteExecute(shards[i], sql, 1, &param, NULL, false) > 0)
				return i;
		}
	}
	return -1;
}

/*
 * RouterExecute routes 'sql' by key and runs it, streaming rows to 'sink';
 * returns the rows affected (or returned).
 */
int64
RouterExecute(const char *key, int key_len, const char *sql, int nparams,
			  const CdParam *params, CdRowSink *sink, bool is_write)
{
	CdRoute		route = RouterResolve(key, key_len, is_write, true);
	int			target;
	int64		rows = 0;

	if (route.source == CD_ROUTE_COMPUTED && !is_write)
	{
		for (int i = 0; i < route.ncandidates; i++)
		{
			rows = RemoteExecute(route.candidates[i], sql, nparams, params, sink, false);
			if (rows > 0)
			{
				if (i > 0)
					RouterRecordException(key, key_len, route.candidates[i]);
				break;
			}
		}
		return rows;
	}

	if (route.source != CD_ROUTE_COMPUTED)
		return RemoteExecute(route.shard, sql, nparams, params, sink, is_write);

	/* a computed write: where does the key live? */
	target = route.ncandidates > 1 || !RouterAnyShardTakesKeys() ?
		RouterProbeKey(key, key_len, route.candidates, route.ncandidates) : 0;
	if (target < 0)
	{
		if (!RouterAnyShardTakesKeys())
			ereport(ERROR,
					(errcode(ERRCODE_CD_NO_ELIGIBLE_SHARD),
					 errmsg("no shard can take new keys"),
					 errdetail("Under computed placement the key was found on none of its owners, and every shard is draining, retired or not writable.")));
		target = 0;
	}
	if (target > 0)
		RouterRecordException(key, key_len, route.candidates[target]);
	return RemoteExecute(route.candidates[target], sql, nparams, params, sink, true);
}
