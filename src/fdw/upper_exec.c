/*-------------------------------------------------------------------------
 *
 * upper_exec.c
 *	  Executing an aggregate scan: every shard at once (fanout.c) computes
 *	  its partial groups, which stream into one hash table of groups on the
 *	  front, combined as they arrive (a count and an integer sum by
 *	  addition, a numeric sum by numeric addition, min and max by the type's
 *	  ordering, bool_and and bool_or by AND and OR); then each group is
 *	  finished (avg = sum / count, as PostgreSQL's own avg divides) and
 *	  returned.  Memory is bounded by the number of groups, not rows.
 *
 * Moves.  A full scan of every shard can see a moving key on both shards
 * between the target's commit and the source's (README, "Reads during a
 * move"), and a pushed aggregate could not drop such rows after the fact.
 * So the scan first takes collegedb.move in SHARE mode, which waits for
 * every move step that has changed its journal row and keeps any step from
 * committing (each updates its row first) until the scan's shards have
 * answered; a step's own shard commits happen in its front transaction's
 * pre-commit, after that update.  With the lock held the journal and the
 * shards agree: when no move is in flight, nothing can change placement
 * while the shards answer, and each shard aggregates on its own; when some
 * are, the scan reads the same parts row by row with their key, and drops
 * a moving key's rows where it does not live (its target before the source
 * step, its source after).  The lock is released once the shards have
 * answered.  On a standby (no moves run there) no lock is taken.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "nodes/nodeFuncs.h"
#include "portability/instr_time.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgrprotos.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/typcache.h"

#include "catalog/catalog.h"
#include "catalog/shards.h"
#include "collegedb.h"
#include "fdw/upper.h"
#include "remote/fanout.h"

/* how a part is combined with the same part of another row */
typedef enum UpperCombine
{
	COMBINE_NONE = 0,			/* a grouping value */
	COMBINE_INT8_ADD,
	COMBINE_NUMERIC_ADD,
	COMBINE_MIN,
	COMBINE_MAX,
	COMBINE_AND,
	COMBINE_OR
} UpperCombine;

/* one group's combined parts */
typedef struct UpperGroup
{
	Datum	   *values;
	bool	   *nulls;
} UpperGroup;

typedef struct UpperScanState
{
	CdForeignTable *table;
	const char *pushed[CD_MAX_DIALECTS];
	const char *rows[CD_MAX_DIALECTS];
	int			ngroups;
	int			nparts;
	int			naggs;
	Oid		   *types;
	int32	   *typmods;
	int16	   *typlens;
	bool	   *typbyvals;
	FmgrInfo   *inputs;
	Oid		   *ioparams;
	UpperCombine *combine;
	FmgrInfo   *cmp;
	int		   *kinds;
	int		   *firsts;
	TupleDesc	part_desc;
	TupleTableSlot *part_slot;
	TupleTableSlot *key_slot;
	TupleHashTable hash;
	TupleHashIterator iter;
	UpperGroup *single;			/* no GROUP BY: the one group */
	MemoryContext table_cxt;
	MemoryContext temp_cxt;
	bool		fetched;
	bool		single_done;
	FdwShardRun run;			/* the shards, and how the last run went */
} UpperScanState;

typedef struct UpperSink
{
	CdRowSink	base;
	UpperScanState *st;
	const CdShard *shard;
	bool		by_rows;
} UpperSink;

static List *
int_list(List *private, int which)
{
	return list_nth(private, which);
}

/*
 * UpperBeginScan reads the plan's parts and prepares their conversion and
 * combination; the shards are reached at the first row.
 */
void
UpperBeginScan(ForeignScanState *node, int eflags)
{
	ForeignScan *plan = (ForeignScan *) node->ss.ps.plan;
	List	   *private = plan->fdw_private;
	UpperScanState *st = palloc0(sizeof(UpperScanState));
	ListCell   *lc;
	int			i = 0;

	node->fdw_state = st;
	st->table = FdwTableInfo(intVal(list_nth(private, UpperPrivRelid)));
	DeparseTextsOf(list_nth(private, UpperPrivPushed), st->pushed);
	DeparseTextsOf(list_nth(private, UpperPrivRows), st->rows);
	st->ngroups = intVal(list_nth(private, UpperPrivGroups));
	st->nparts = list_length(int_list(private, UpperPrivTypes));
	st->naggs = list_length(int_list(private, UpperPrivKinds));
	st->types = palloc0(sizeof(Oid) * st->nparts);
	st->typmods = palloc0(sizeof(int32) * st->nparts);
	st->typlens = palloc0(sizeof(int16) * st->nparts);
	st->typbyvals = palloc0(sizeof(bool) * st->nparts);
	st->inputs = palloc0(sizeof(FmgrInfo) * st->nparts);
	st->ioparams = palloc0(sizeof(Oid) * st->nparts);
	st->combine = palloc0(sizeof(UpperCombine) * st->nparts);
	st->cmp = palloc0(sizeof(FmgrInfo) * st->nparts);
	st->kinds = palloc0(sizeof(int) * Max(st->naggs, 1));
	st->firsts = palloc0(sizeof(int) * Max(st->naggs, 1));
	foreach(lc, int_list(private, UpperPrivTypes))
	{
		Oid			input;

		st->types[i] = lfirst_int(lc);
		st->typmods[i] = list_nth_int(int_list(private, UpperPrivTypmods), i);
		get_typlenbyval(st->types[i], &st->typlens[i], &st->typbyvals[i]);
		getTypeInputInfo(st->types[i], &input, &st->ioparams[i]);
		fmgr_info(input, &st->inputs[i]);
		i++;
	}
	for (int a = 0; a < st->naggs; a++)
	{
		int			f = list_nth_int(int_list(private, UpperPrivParts), a);
		UpperAggKind kind = list_nth_int(int_list(private, UpperPrivKinds), a);

		st->kinds[a] = kind;
		st->firsts[a] = f;
		switch (kind)
		{
			case UPPER_COUNT:
				st->combine[f] = COMBINE_INT8_ADD;
				break;
			case UPPER_SUM:
				st->combine[f] = st->types[f] == INT8OID ? COMBINE_INT8_ADD : COMBINE_NUMERIC_ADD;
				break;
			case UPPER_AVG:
				st->combine[f] = COMBINE_NUMERIC_ADD;
				st->combine[f + 1] = COMBINE_INT8_ADD;
				break;
			case UPPER_MIN:
			case UPPER_MAX:
				{
					TypeCacheEntry *tc = lookup_type_cache(st->types[f], TYPECACHE_CMP_PROC_FINFO);

					if (!OidIsValid(tc->cmp_proc_finfo.fn_oid))
						elog(ERROR, "no ordering for type %u", st->types[f]);
					fmgr_info_copy(&st->cmp[f], &tc->cmp_proc_finfo, CurrentMemoryContext);
					st->combine[f] = kind == UPPER_MIN ? COMBINE_MIN : COMBINE_MAX;
				}
				break;
			case UPPER_AND:
				st->combine[f] = COMBINE_AND;
				break;
			case UPPER_OR:
				st->combine[f] = COMBINE_OR;
				break;
		}
	}
	st->part_desc = CreateTemplateTupleDesc(st->nparts);
	for (i = 0; i < st->nparts; i++)
		TupleDescInitEntry(st->part_desc, i + 1, NULL, st->types[i], st->typmods[i], 0);
	st->part_slot = MakeSingleTupleTableSlot(st->part_desc, &TTSOpsVirtual);
	st->key_slot = MakeSingleTupleTableSlot(st->part_desc, &TTSOpsMinimalTuple);
	st->table_cxt = AllocSetContextCreate(CurrentMemoryContext, "collegedb aggregate groups",
										  ALLOCSET_DEFAULT_SIZES);
	st->temp_cxt = AllocSetContextCreate(CurrentMemoryContext, "collegedb aggregate row",
										 ALLOCSET_DEFAULT_SIZES);
	FdwShardRunInit(&st->run, node);
}

/*
 * new_groups empties the combined groups (a rescan starts again).
 */
static void
new_groups(UpperScanState *st, ForeignScanState *node, List *private)
{
	MemoryContextReset(st->table_cxt);
	st->hash = NULL;
	st->single = NULL;
	if (st->ngroups == 0)
	{
		st->single = MemoryContextAllocZero(st->table_cxt, sizeof(UpperGroup));
		st->single->values = MemoryContextAllocZero(st->table_cxt, sizeof(Datum) * st->nparts);
		st->single->nulls = MemoryContextAlloc(st->table_cxt, sizeof(bool) * st->nparts);
		memset(st->single->nulls, true, sizeof(bool) * st->nparts);
		return;
	}
	{
		AttrNumber *cols = palloc(sizeof(AttrNumber) * st->ngroups);
		Oid		   *eqops = palloc(sizeof(Oid) * st->ngroups);
		Oid		   *collations = palloc(sizeof(Oid) * st->ngroups);
		Oid		   *eqfuncs;
		FmgrInfo   *hashfuncs;

		for (int i = 0; i < st->ngroups; i++)
		{
			cols[i] = i + 1;
			eqops[i] = list_nth_int(int_list(private, UpperPrivEqops), i);
			collations[i] = type_is_collatable(st->types[i]) ? DEFAULT_COLLATION_OID : InvalidOid;
		}
		execTuplesHashPrepare(st->ngroups, eqops, &eqfuncs, &hashfuncs);
		st->hash = BuildTupleHashTableExt(&node->ss.ps, st->part_desc, st->ngroups, cols,
										  eqfuncs, hashfuncs, collations, 256, 0,
										  st->table_cxt, st->table_cxt, st->temp_cxt, false);
	}
}

/*
 * combine_part folds one row's part into its group's.
 */
static void
combine_part(UpperScanState *st, UpperGroup *g, int p, Datum v)
{
	MemoryContext old;
	Datum		cur = g->values[p];
	int			c;

	if (g->nulls[p])
	{
		old = MemoryContextSwitchTo(st->table_cxt);
		g->values[p] = datumCopy(v, st->typbyvals[p], st->typlens[p]);
		g->nulls[p] = false;
		MemoryContextSwitchTo(old);
		return;
	}
	switch (st->combine[p])
	{
		case COMBINE_NONE:
			return;
		case COMBINE_INT8_ADD:
			g->values[p] = DirectFunctionCall2(int8pl, cur, v);
			return;
		case COMBINE_NUMERIC_ADD:
			old = MemoryContextSwitchTo(st->table_cxt);
			g->values[p] = DirectFunctionCall2(numeric_add, cur, v);
			MemoryContextSwitchTo(old);
			pfree(DatumGetPointer(cur));
			return;
		case COMBINE_MIN:
		case COMBINE_MAX:
			c = DatumGetInt32(FunctionCall2Coll(&st->cmp[p], InvalidOid, v, cur));
			if ((st->combine[p] == COMBINE_MIN && c < 0) || (st->combine[p] == COMBINE_MAX && c > 0))
			{
				old = MemoryContextSwitchTo(st->table_cxt);
				g->values[p] = datumCopy(v, st->typbyvals[p], st->typlens[p]);
				MemoryContextSwitchTo(old);
				if (!st->typbyvals[p])
					pfree(DatumGetPointer(cur));
			}
			return;
		case COMBINE_AND:
			g->values[p] = BoolGetDatum(DatumGetBool(cur) && DatumGetBool(v));
			return;
		case COMBINE_OR:
			g->values[p] = BoolGetDatum(DatumGetBool(cur) || DatumGetBool(v));
			return;
	}
}

static void
upper_sink_columns(CdRowSink *self, int ncols, const char *const *names)
{
	UpperSink  *sink = (UpperSink *) self;
	int			want = sink->st->nparts + (sink->by_rows ? 1 : 0);

	if (ncols != want)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("the shard returned %d columns for an aggregate of %d", ncols, want)));
}

/*
 * upper_sink_row converts a shard's row of parts and folds it into its
 * group at once, so that rows are never collected.
 */
static void
upper_sink_row(CdRowSink *self, int ncols, const CdCell *cells)
{
	UpperSink  *sink = (UpperSink *) self;
	UpperScanState *st = sink->st;
	TupleTableSlot *slot = st->part_slot;
	MemoryContext old;
	UpperGroup *g;

	if (sink->by_rows && UpperDropped(st->run.drops, sink->shard, &cells[st->nparts]))
		return;
	old = MemoryContextSwitchTo(st->temp_cxt);
	ExecClearTuple(slot);
	for (int i = 0; i < st->nparts; i++)
		slot->tts_values[i] = ValuesCellToDatum(&cells[i], st->types[i], st->typmods[i],
												&st->inputs[i], st->ioparams[i],
												&slot->tts_isnull[i]);
	ExecStoreVirtualTuple(slot);
	if (st->hash == NULL)
		g = st->single;
	else
	{
		bool		isnew;
		TupleHashEntry entry = LookupTupleHashEntry(st->hash, slot, &isnew, NULL);

		if (isnew)
		{
			g = MemoryContextAllocZero(st->table_cxt, sizeof(UpperGroup));
			g->values = MemoryContextAllocZero(st->table_cxt, sizeof(Datum) * st->nparts);
			g->nulls = MemoryContextAlloc(st->table_cxt, sizeof(bool) * st->nparts);
			memset(g->nulls, true, sizeof(bool) * st->nparts);
			entry->additional = g;
		}
		g = entry->additional;
	}
	for (int p = st->ngroups; p < st->nparts; p++)
	{
		if (!slot->tts_isnull[p])
			combine_part(st, g, p, slot->tts_values[p]);
	}
	MemoryContextSwitchTo(old);
	MemoryContextReset(st->temp_cxt);
}

/* a shard's sink: its rows fold into the groups */
static CdRowSink *
sink_for(void *arg, int i, const CdShard *shard)
{
	UpperScanState *st = arg;
	UpperSink  *sink = palloc0(sizeof(UpperSink));

	sink->base.columns = upper_sink_columns;
	sink->base.row = upper_sink_row;
	sink->st = st;
	sink->shard = shard;
	sink->by_rows = st->run.moving;
	return &sink->base;
}

/*
 * finish_group returns a group's output row: its grouping values, and each
 * aggregate finished from its parts.
 */
static TupleTableSlot *
finish_group(ForeignScanState *node, UpperScanState *st, UpperGroup *g, MinimalTuple first)
{
	TupleTableSlot *slot = node->ss.ss_ScanTupleSlot;
	MemoryContext old = MemoryContextSwitchTo(node->ss.ps.ps_ExprContext->ecxt_per_tuple_memory);

	ExecClearTuple(slot);
	if (first != NULL)
	{
		ExecStoreMinimalTuple(first, st->key_slot, false);
		for (int i = 0; i < st->ngroups; i++)
			slot->tts_values[i] = slot_getattr(st->key_slot, i + 1, &slot->tts_isnull[i]);
	}
	for (int a = 0; a < st->naggs; a++)
	{
		int			f = st->firsts[a];
		int			out = st->ngroups + a;

		slot->tts_values[out] = g->values[f];
		slot->tts_isnull[out] = g->nulls[f];
		if (st->kinds[a] == UPPER_COUNT && g->nulls[f])
		{
			slot->tts_values[out] = Int64GetDatum(0);
			slot->tts_isnull[out] = false;
		}
		else if (st->kinds[a] == UPPER_AVG)
		{
			bool		none = g->nulls[f] || g->nulls[f + 1] || DatumGetInt64(g->values[f + 1]) == 0;

			slot->tts_isnull[out] = none;
			if (!none)
				slot->tts_values[out] =
					DirectFunctionCall2(numeric_div, g->values[f],
										DirectFunctionCall1(int8_numeric, g->values[f + 1]));
		}
	}
	MemoryContextSwitchTo(old);
	return ExecStoreVirtualTuple(slot);
}

TupleTableSlot *
UpperIterate(ForeignScanState *node)
{
	UpperScanState *st = node->fdw_state;

	if (!st->fetched)
	{
		/*
		 * IterateForeignScan runs in the per-tuple context: the groups, the
		 * hash table's functions and what EXPLAIN ANALYZE shows must outlive
		 * it.
		 */
		MemoryContext old = MemoryContextSwitchTo(node->ss.ps.state->es_query_cxt);

		new_groups(st, node, ((ForeignScan *) node->ss.ps.plan)->fdw_private);
		FdwRunShards(node, &st->run, st->table, st->pushed, st->rows, sink_for, st);
		st->fetched = true;
		if (st->hash)
			InitTupleHashIterator(st->hash, &st->iter);
		MemoryContextSwitchTo(old);
	}
	if (st->hash == NULL)
	{
		if (st->single_done)
			return ExecClearTuple(node->ss.ss_ScanTupleSlot);
		st->single_done = true;
		return finish_group(node, st, st->single, NULL);
	}
	{
		TupleHashEntry entry = ScanTupleHashTable(st->hash, &st->iter);

		if (entry == NULL)
			return ExecClearTuple(node->ss.ss_ScanTupleSlot);
		return finish_group(node, st, entry->additional, entry->firstTuple);
	}
}

void
UpperRescan(ForeignScanState *node)
{
	UpperScanState *st = node->fdw_state;

	st->fetched = false;
	st->single_done = false;
}

void
UpperEndScan(ForeignScanState *node)
{
	UpperScanState *st = node->fdw_state;

	if (st == NULL)
		return;
	ExecDropSingleTupleTableSlot(st->part_slot);
	ExecDropSingleTupleTableSlot(st->key_slot);
	MemoryContextDelete(st->table_cxt);
	MemoryContextDelete(st->temp_cxt);
}

/*
 * UpperExplain shows the statement each dialect of the fleet aggregates
 * with, and under ANALYZE how the shards were read and what each returned.
 */
void
UpperExplain(ForeignScanState *node, ExplainState *es)
{
	ForeignScan *plan = (ForeignScan *) node->ss.ps.plan;
	UpperScanState *st = node->fdw_state;

	FdwExplainShardRun(st ? &st->run : NULL, "all shards, aggregated on each",
					   list_nth(plan->fdw_private, UpperPrivPushed), es);
}
