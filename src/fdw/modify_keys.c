/*-------------------------------------------------------------------------
 *
 * modify_keys.c
 *	  UPDATE and DELETE of a sharded foreign table by a list of keys
 *	  ("key IN (...)", "key = ANY(...)"): one statement per shard, guarded.
 *
 * Each key is routed as a routed write routes it (RouterResolve for a
 * write), and the keys are grouped by their shard.  A shard's group is
 * guarded as a batch of inserts is (TombstoneGuardKeys: every key's lock,
 * bounded, and one lookup of their tombstones, in the shard's write
 * transaction), then gets one statement with its keys where the planned
 * text has the key's " = $k" (FdwGroupedKeyText, fdw_keys.c: an array
 * parameter on PostgreSQL, "IN ($k, ...)" elsewhere, split at the
 * adapter's parameter limit).  A group in which a key has moved away, and
 * a key with several candidate shards, are written key by key the guarded
 * way instead (RouterExecuteDialects: each follows its tombstone).  The
 * shards are written one after another, in the order their first key
 * came.  Reads by a list of keys are fdw_keys.c's.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "utils/builtins.h"

#include "catalog/config.h"
#include "catalog/shards.h"
#include "fdw/fdw.h"
#include "remote/remote.h"
#include "remote/tombstones.h"
#include "router/router.h"

/* the most parameters one statement of keys takes, as fdw_keys.c's reads */
#define FDW_WRITE_KEYS_MAX_PARAMS 999

/*
 * write_key writes one key the guarded way, following its tombstone.
 */
static int64
write_key(const char *const *sql, int nparams, CdParam *params, const char *key,
		  Datum value, Oid type, CdRowSink *sink)
{
	ValuesToParam(value, false, type, &params[nparams - 1]);
	return RouterExecuteDialects(key, strlen(key), sql, nparams, params, sink, true);
}

/*
 * write_group sends a shard's keys, guarded: in statements of as many keys
 * as the dialect takes, or key by key when one of them has moved away.
 */
static int64
write_group(const CdShard *shard, const char *const *sql, List *split, int nparams,
			CdParam *params, char **keys, Datum *values, int n, Oid type, CdRowSink *sink)
{
	const CdAdapter *adapter = AdapterForDialect(shard->dialect);
	int			fixed = nparams - 1;
	int		   *lens = palloc(sizeof(int) * n);
	int			per;
	CdParam    *chunk;
	int64		rows = 0;

	for (int i = 0; i < n; i++)
		lens[i] = strlen(keys[i]);
	if (TombstoneGuardKeys(shard, n, keys, lens) != NULL)
	{
		for (int i = 0; i < n; i++)
			rows += write_key(sql, nparams, params, keys[i], values[i], type, sink);
		return rows;
	}
	per = adapter->key_list_sql ? n :
		Max(Min(adapter->max_params, FDW_WRITE_KEYS_MAX_PARAMS) - fixed, 1);
	chunk = palloc(sizeof(CdParam) * (fixed + (adapter->key_list_sql ? 1 : Min(per, n))));
	memcpy(chunk, params, sizeof(CdParam) * fixed);
	for (int from = 0; from < n; from += per)
	{
		int			m = Min(per, n - from);
		int			sent;

		if (adapter->key_list_sql)
		{
			char	   *array = ValuesArrayLiteral(keys + from, lens + from, m);

			ValuesToParam(CStringGetTextDatum(array), false, TEXTOID, &chunk[fixed]);
			sent = 1;
		}
		else
		{
			for (int i = 0; i < m; i++)
				ValuesToParam(values[from + i], false, type, &chunk[fixed + i]);
			sent = m;
		}
		rows += RemoteExecute(shard,
							  FdwGroupedKeyText(sql[shard->dialect], split, shard->dialect,
												nparams, sent),
							  fixed + sent, chunk, sink, true);
	}
	return rows;
}

/*
 * FdwWriteKeys runs an UPDATE or DELETE of 'nkeys' keys ('keys' their
 * texts, NULL for one to leave out, 'values' their datums of type 'type'),
 * one statement per shard (see the top of the file); 'params' are the
 * statement's, the key last; rows it returns go to 'sink'.  Returns the
 * rows affected (or returned).
 */
int64
FdwWriteKeys(const char *const *sql, List *split, int nparams, CdParam *params,
			 char **keys, Datum *values, int nkeys, Oid type, CdRowSink *sink)
{
	const CdShard **shards = palloc(sizeof(CdShard *) * Max(nkeys, 1));
	bool	   *done = palloc0(sizeof(bool) * Max(nkeys, 1));
	char	  **group_keys = palloc(sizeof(char *) * Max(nkeys, 1));
	Datum	   *group_values = palloc(sizeof(Datum) * Max(nkeys, 1));
	bool		computed_ro = ConfigGet()->computed && !RouterAnyShardEligible();
	int64		rows = 0;

	for (int i = 0; i < nkeys; i++)
	{
		CdRoute		route;

		shards[i] = NULL;
		if (keys[i] == NULL)
		{
			done[i] = true;
			continue;
		}
		if (computed_ro)
			continue;			/* key by key: the router refuses the write */
		route = RouterResolve(keys[i], strlen(keys[i]), true, true);
		if (route.ncandidates == 1 && !(route.source == CD_ROUTE_SLOT && RecoveryInProgress()))
			shards[i] = route.shard;
	}

	/* one group per shard, in the order its first key came */
	for (int i = 0; i < nkeys; i++)
	{
		int			n = 0;

		if (done[i] || shards[i] == NULL)
			continue;
		for (int j = i; j < nkeys; j++)
		{
			if (done[j] || shards[j] == NULL || !ShardIs(shards[j], shards[i]))
				continue;
			done[j] = true;
			group_keys[n] = keys[j];
			group_values[n++] = values[j];
		}
		rows += write_group(shards[i], sql, split, nparams, params, group_keys, group_values,
							n, type, sink);
	}

	/* the keys with several candidates, or none: key by key */
	for (int i = 0; i < nkeys; i++)
	{
		if (!done[i])
			rows += write_key(sql, nparams, params, keys[i], values[i], type, sink);
	}
	return rows;
}
