/*-------------------------------------------------------------------------
 *
 * locate.c
 *	  Where a key lives: the one place that answers it, from the route
 *	  (mapping, or computed candidates), a probe of the candidates'
 *	  registered tables, and the trail of the key's tombstones.
 *
 * RouterResolve (router.c) says where a key's statements go; the key
 * itself may have moved on since, leaving a tombstone on each shard it
 * left (src/README.md, "Tombstones and guarded writes").  A read that
 * finds nothing, a move that needs the key's shard, and route() follow
 * that trail here, up to ROUTER_MAX_HOPS moves.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/memutils.h"

#include "catalog/tables.h"
#include "cd_errcodes.h"
#include "remote/remote.h"
#include "remote/tombstones.h"
#include "router/router.h"

/*
 * RouterProbeKey returns the index of the first shard that holds the key
 * in any registered table, -1 when none does (or no table is registered).
 * Keys compare byte for byte.
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
	param.typid = InvalidOid;	/* the key column's type */
	param.str = pnstrdup(key, key_len);
	param.len = key_len;

	for (int i = 0; i < n; i++)
	{
		const CdAdapter *adapter = AdapterForDialect(shards[i]->dialect);

		foreach(lc, tables)
		{
			CdTable    *table = lfirst(lc);
			char	   *sql = psprintf("SELECT 1 FROM %s WHERE %s LIMIT 1",
									   adapter->quote_ident(table->name),
									   AdapterKeyMatch(adapter, table->key_column, 1));

			if (RemoteExecuteInternal(shards[i], sql, 1, &param, NULL, false) > 0)
				return i;
		}
	}
	return -1;
}

/*
 * RouterTombstoneHop returns the registered shard a tombstone points at; a
 * destination that is not a registered shard ends the trail.
 */
const CdShard *
RouterTombstoneHop(const char *moved_to, int hops)
{
	const CdShard *next = ShardLookupOptional(moved_to);

	if (next == NULL || !OidIsValid(next->serverid))
		ereport(ERROR,
				(errcode(ERRCODE_CD_TOMBSTONE_HOPS_EXCEEDED),
				 errmsg("a tombstone points at \"%s\", which is not a registered shard", moved_to),
				 errdetail("The key was followed across %d move%s.", hops, hops == 1 ? "" : "s")));
	if (hops > ROUTER_MAX_HOPS)
		ereport(ERROR,
				(errcode(ERRCODE_CD_TOMBSTONE_HOPS_EXCEEDED),
				 errmsg("key moved more than %d times without its mapping catching up", ROUTER_MAX_HOPS),
				 errhint("The mapping will follow once the moves finish; or read with collegedb.best_effort.")));
	return next;
}

/*
 * RouterFollowTombstones returns the shard a key's tombstone trail ends on,
 * starting at 'shard' (itself when there is none); *hops gets its length.
 */
const CdShard *
RouterFollowTombstones(const CdShard *shard, const char *key, int key_len, int *hops)
{
	char	   *moved_to;

	*hops = 0;
	while ((moved_to = TombstoneLookup(shard, key, key_len)) != NULL)
		shard = RouterTombstoneHop(moved_to, ++(*hops));
	return shard;
}

/*
 * RouterFollowOne looks for the key's tombstone on step->shard (a
 * RouterTrailStep) and follows it one hop; its argument is a void * for
 * RemoteTry.
 */
void
RouterFollowOne(void *arg)
{
	RouterTrailStep *step = arg;

	step->moved_to = TombstoneLookup(step->shard, step->key, step->key_len);
	if (step->moved_to != NULL)
		step->shard = RouterTombstoneHop(step->moved_to, ++step->hops);
}

/*
 * RouterLocateKey returns the shard a key lives on now: where its mapping
 * (or, under computed placement, the candidate that holds it) and then its
 * tombstones lead.  A key collegedb cannot place is MAPPING_NOT_FOUND.
 */
const CdShard *
RouterLocateKey(const char *key)
{
	CdRoute		route = RouterResolve(key, strlen(key), false, false);
	const CdShard *source = route.shard;
	int			hops;

	if (route.source == CD_ROUTE_STRATEGY)
		ereport(ERROR,
				(errcode(ERRCODE_CD_MAPPING_NOT_FOUND),
				 errmsg("key \"%s\" has no mapping", key)));
	if (route.ncandidates > 1 || route.source == CD_ROUTE_COMPUTED)
	{
		int			where = RouterProbeKey(key, strlen(key), route.candidates, route.ncandidates);

		if (where < 0)
			ereport(ERROR,
					(errcode(ERRCODE_CD_MAPPING_NOT_FOUND),
					 errmsg("key \"%s\" was found on none of its shards", key)));
		source = route.candidates[where];
	}
	return RouterFollowTombstones(source, key, strlen(key), &hops);
}

/* Recording where keys are (RouterMapKeysInPlace) */

#define MAP_IN_PLACE_BATCH 1000

typedef struct KeysInPlaceSink
{
	CdRowSink	base;
	const CdShard *shard;
	MemoryContext batch_context;	/* the batch's keys; reset after each */
	char	   *keys[MAP_IN_PLACE_BATCH];
	int			lens[MAP_IN_PLACE_BATCH];
	int			n;
	int64		mapped;
	const char *sql;			/* the shard's statement */
} KeysInPlaceSink;

static void
keys_in_place_flush(KeysInPlaceSink *s)
{
	const CdShard *picked[MAP_IN_PLACE_BATCH];
	const CdShard *owners[MAP_IN_PLACE_BATCH];
	MemoryContext old = MemoryContextSwitchTo(s->batch_context);

	for (int i = 0; i < s->n; i++)
		picked[i] = s->shard;
	RouterSaveNewKeys(s->n, s->keys, s->lens, picked, owners);
	MemoryContextSwitchTo(old);
	s->mapped += s->n;
	s->n = 0;
	MemoryContextReset(s->batch_context);
}

static void
keys_in_place_columns(CdRowSink *self, int ncols, const char *const *names)
{
}

static void
keys_in_place_row(CdRowSink *self, int ncols, const CdCell *cells)
{
	KeysInPlaceSink *s = (KeysInPlaceSink *) self;

	if (cells[0].isnull || cells[0].kind == CD_VALUE_NULL)
		return;
	s->keys[s->n] = MemoryContextAlloc(s->batch_context, cells[0].len + 1);
	memcpy(s->keys[s->n], cells[0].data, cells[0].len);
	s->keys[s->n][cells[0].len] = '\0';
	s->lens[s->n] = cells[0].len;
	if (++s->n == MAP_IN_PLACE_BATCH)
		keys_in_place_flush(s);
}

/* reads one shard's keys of one table (through RemoteTry) */
static void
keys_in_place_read(void *arg)
{
	KeysInPlaceSink *s = arg;

	(void) RemoteExecuteInternal(s->shard, s->sql, 0, NULL, &s->base, false);
	if (s->n > 0)
		keys_in_place_flush(s);
}

/*
 * RouterMapKeysInPlace gives every key of every registered table that has
 * no mapping one to the shard that holds it, a batch of keys at a time: a
 * switch away from a rule that placed keys without mappings (computed
 * placement, the slots strategy) keeps them where they are, and what reads
 * and writes them afterwards finds them by mapping.  A key already mapped
 * keeps its mapping; a shard without one of the tables holds none of its
 * keys.  Returns how many keys were read.
 */
int64
RouterMapKeysInPlace(void)
{
	KeysInPlaceSink *s = palloc0(sizeof(KeysInPlaceSink));
	const CdShard **set;
	int			n;
	ListCell   *lc;

	s->base.columns = keys_in_place_columns;
	s->base.row = keys_in_place_row;
	s->batch_context = AllocSetContextCreate(CurrentMemoryContext,
											 "collegedb keys in place",
											 ALLOCSET_DEFAULT_SIZES);
	set = ShardReadSet(&n);
	foreach(lc, RegisteredTables())
	{
		CdTable    *table = lfirst(lc);

		for (int i = 0; i < n; i++)
		{
			const CdAdapter *adapter = AdapterForDialect(set[i]->dialect);
			ErrorData  *failure;

			CHECK_FOR_INTERRUPTS();
			s->shard = set[i];
			s->sql = psprintf("SELECT DISTINCT %s FROM %s",
							  adapter->quote_ident(table->key_column),
							  adapter->quote_ident(table->name));
			/* a shard without the table holds none of its keys */
			if (!RemoteTry(keys_in_place_read, s, &failure))
			{
				if (failure->sqlerrcode != ERRCODE_UNDEFINED_TABLE)
					ReThrowError(failure);
				s->n = 0;
				MemoryContextReset(s->batch_context);
			}
		}
	}
	MemoryContextDelete(s->batch_context);
	return s->mapped;
}
