/*-------------------------------------------------------------------------
 *
 * fdw_exec.c
 *	  Executing scans and modifications of collegedb foreign tables.
 *
 * A scan with a routing key runs its statement once per distinct key
 * through the router (mapping or computed placement, tombstone hops), so each key
 * reaches the shard it lives on; a read by a list of keys sends each shard
 * one statement with its keys, the shards at once (fdw_keys.c).  A scan without one runs on every shard
 * of the read set at once (the fan-out), and fails when a shard fails
 * unless collegedb.fanout_partial is on (then a WARNING names the skipped
 * shards).  A foreign table on a shard's own server reads and writes that
 * shard only.  Rows are converted to the table's column types as they
 * arrive and kept in a tuplestore (which spills to disk).
 *
 * INSERT and COPY FROM are insert.c's.  UPDATE and DELETE run whole on the key's shard(s), guarded,
 * and RETURNING gives the rows the shard returns; what cannot go whole runs
 * row by row (row_modify.c), its rows fetched here with their identity on
 * the shard, locked, in the shard's write transaction.
 *
 * The table's options come from table.c (FdwTableInfo); what EXPLAIN
 * shows and what EXPLAIN ANALYZE measures of the shards is explain.c's,
 * which the scan feeds its row sinks and fan-outs (FdwObservedSink,
 * FdwObservedFanout).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "catalog/shards.h"
#include "collegedb.h"
#include "fdw/fdw.h"
#include "remote/fanout.h"
#include "remote/remote.h"
#include "router/router.h"

/* Scans and direct modifications */

typedef struct FdwScanState
{
	CdForeignTable *table;
	const char *sql[CD_MAX_DIALECTS];
	int			key_param;
	bool		key_is_array;
	List	   *key_split;		/* see FdwPrivKeySplit */
	bool		is_write;
	bool		for_modify;		/* rows of an UPDATE or DELETE row by row */
	TupleDesc	store_desc;		/* the table's columns, then the row identity */
	bool		set_processed;
	List	   *param_exprs;	/* ExprStates */
	List	   *param_types;
	Tuplestorestate *store;
	TupleTableSlot *stored;		/* reads the tuplestore's minimal tuples */
	bool		fetched;
	int64		rows;
	FdwObserved observed;		/* under EXPLAIN ANALYZE */
} FdwScanState;

/*
 * with_row_identity returns 'desc' with one more column, text: the row's
 * identity on its shard, as the fetch of a row-by-row UPDATE or DELETE
 * selects it (row_modify.c).
 */
static TupleDesc
with_row_identity(TupleDesc desc)
{
	TupleDesc	out = CreateTemplateTupleDesc(desc->natts + 1);

	for (int i = 0; i < desc->natts; i++)
		TupleDescCopyEntry(out, i + 1, desc, i + 1);
	TupleDescInitEntry(out, desc->natts + 1, "collegedb_row_identity", TEXTOID, -1, 0);
	return out;
}

static FdwScanState *
scan_state(ForeignScanState *node, bool is_write)
{
	ForeignScan *plan = (ForeignScan *) node->ss.ps.plan;
	Oid			relid = is_write ? RelationGetRelid(node->resultRelInfo->ri_RelationDesc) :
		RelationGetRelid(node->ss.ss_currentRelation);
	FdwScanState *st = palloc0(sizeof(FdwScanState));
	ListCell   *lc;

	st->table = FdwTableInfo(relid);
	DeparseTextsOf(list_nth(plan->fdw_private, FdwPrivSql), st->sql);
	st->key_param = intVal(list_nth(plan->fdw_private, FdwPrivKeyParam));
	st->key_is_array = boolVal(list_nth(plan->fdw_private, FdwPrivKeyArray));
	st->key_split = list_nth(plan->fdw_private, FdwPrivKeySplit);
	st->set_processed = boolVal(list_nth(plan->fdw_private, FdwPrivSetProcessed));
	st->for_modify = boolVal(list_nth(plan->fdw_private, FdwPrivForModify));
	st->is_write = is_write || st->for_modify;
	st->store_desc = is_write ? RelationGetDescr(node->resultRelInfo->ri_RelationDesc) :
		RelationGetDescr(node->ss.ss_currentRelation);
	if (st->for_modify)
		st->store_desc = with_row_identity(st->store_desc);
	st->param_exprs = ExecInitExprList(plan->fdw_exprs, (PlanState *) node);
	foreach(lc, plan->fdw_exprs)
		st->param_types = lappend_oid(st->param_types, exprType(lfirst(lc)));
	FdwObservedInit(&st->observed, node->ss.ps.state);
	st->stored = ExecInitExtraTupleSlot(node->ss.ps.state, st->store_desc, &TTSOpsMinimalTuple);
	return st;
}

/*
 * eval_params evaluates the statement's parameters in the scan's current
 * context.
 */
static CdParam *
eval_params(ForeignScanState *node, FdwScanState *st, Datum **values, bool **nulls)
{
	ExprContext *econtext = node->ss.ps.ps_ExprContext;
	int			n = list_length(st->param_exprs);
	CdParam    *params = palloc0(sizeof(CdParam) * Max(n, 1));
	ListCell   *lc,
			   *lc2;
	int			i = 0;

	*values = palloc(sizeof(Datum) * Max(n, 1));
	*nulls = palloc(sizeof(bool) * Max(n, 1));
	forboth(lc, st->param_exprs, lc2, st->param_types)
	{
		(*values)[i] = ExecEvalExpr(lfirst(lc), econtext, &(*nulls)[i]);
		ValuesToParam((*values)[i], (*nulls)[i], lfirst_oid(lc2), &params[i]);
		i++;
	}
	return params;
}

/*
 * run_everywhere runs the statement on every shard of the read set at
 * once, rows to 'store'.  A failed shard fails the statement, except a
 * read with collegedb.fanout_partial.
 */
static int64
run_everywhere(FdwScanState *st, CdParam *params, int nparams, TupleDesc desc)
{
	int			n;
	const CdShard **set = ShardReadSet(&n);
	RecordRowSink *sinks = palloc0(sizeof(RecordRowSink) * Max(n, 1));
	CdFanoutShard *shards = palloc0(sizeof(CdFanoutShard) * Max(n, 1));
	instr_time	start;

	for (int i = 0; i < n; i++)
	{
		RecordRowSinkInit(&sinks[i], st->store, desc);
		shards[i].shard = set[i];
		shards[i].sql = st->sql[set[i]->dialect];
		shards[i].sink = FdwObservedSink(&st->observed, st->store ? &sinks[i].base : NULL, set[i]);
	}
	INSTR_TIME_SET_CURRENT(start);
	FanoutRun(shards, n, NULL, nparams, params,
			  st->is_write ? CD_FANOUT_WRITE : CD_FANOUT_READ);
	FdwObservedFanout(&st->observed, shards, n, start);
	return FdwFanoutResult(shards, n, st->is_write);
}

/*
 * run_statement runs the scan's (or modification's) statement: on the
 * table's own shard, per key through the router, or everywhere.
 */
static void
run_statement(ForeignScanState *node, FdwScanState *st, TupleDesc desc)
{
	MemoryContext per_tuple = node->ss.ps.ps_ExprContext->ecxt_per_tuple_memory;
	MemoryContext old = MemoryContextSwitchTo(per_tuple);
	Datum	   *values;
	bool	   *nulls;
	int			nparams = list_length(st->param_exprs);
	CdParam    *params = eval_params(node, st, &values, &nulls);
	RecordRowSink sink;
	CdRowSink  *rows_to = NULL;
	CdRemoteObserver *previous = NULL;

	MemoryContextSwitchTo(old);
	FdwEnsureSendable(st->sql, st->table);
	st->rows = 0;
	if (st->store)
	{
		RecordRowSinkInit(&sink, st->store, desc);
		rows_to = &sink.base;
	}
	if (st->observed.observer)
	{
		rows_to = FdwObservedSink(&st->observed, rows_to, NULL);
		previous = RemoteObserve(st->observed.observer);
	}

	if (st->table->shard)
	{
		const CdShard *shard = ShardLookup(st->table->shard);

		st->rows = RemoteExecute(shard, st->sql[shard->dialect], nparams, params,
								 rows_to, st->is_write);
	}
	else if (st->key_param > 0)
	{
		int			k = st->key_param - 1;
		Oid			type = list_nth_oid(st->param_types, k);
		Datum	   *keys = &values[k];
		bool	   *keynulls = &nulls[k];
		int			nkeys = 1;
		char	  **texts;

		if (st->key_is_array && !nulls[k])
		{
			ArrayType  *arr = DatumGetArrayTypeP(values[k]);
			int16		typlen;
			bool		typbyval;
			char		typalign;

			type = ARR_ELEMTYPE(arr);
			get_typlenbyvalalign(type, &typlen, &typbyval, &typalign);
			deconstruct_array(arr, type, typlen, typbyval, typalign, &keys, &keynulls, &nkeys);
		}
		texts = nulls[k] ? NULL : FdwDistinctKeys(keys, keynulls, nkeys, type);

		if (texts && st->key_is_array && st->store && !st->is_write &&
			FdwKeysGroupable(nparams, st->key_param, st->key_split))
		{
			st->rows = FdwReadKeys(st->sql, st->key_split, nparams, params, texts, keys,
								   nkeys, type, st->table, &sink);
			return;
		}
		if (texts && st->key_is_array && st->is_write &&
			FdwKeysGroupable(nparams, st->key_param, st->key_split))
			st->rows = FdwWriteKeys(st->sql, st->key_split, nparams, params, texts, keys,
									nkeys, type, rows_to);
		else
		{
			for (int i = 0; i < nkeys && !nulls[k]; i++)
			{
				char	   *key = texts[i];

				if (key == NULL)
					continue;
				ValuesToParam(keys[i], false, type, &params[k]);
				st->rows += RouterExecuteDialects(key, strlen(key), st->sql, nparams, params,
												  rows_to, st->is_write);
			}
		}
	}
	else
		st->rows = run_everywhere(st, params, nparams, desc);
	if (st->observed.observer)
		(void) RemoteObserve(previous);
}

/*
 * ensure_returning_possible refuses UPDATE/DELETE ... RETURNING that could
 * reach a shard whose dialect cannot return the rows it changed
 * (CdCapabilities.returning).
 */
static void
ensure_returning_possible(FdwScanState *st)
{
	const CdAdapter *cannot = NULL;
	ListCell   *lc;

	if (st->table->shard)
	{
		const CdAdapter *adapter = AdapterForDialect(ShardLookup(st->table->shard)->dialect);

		if (!adapter->caps.returning)
			cannot = adapter;
	}
	else
	{
		foreach(lc, ShardList())
		{
			const CdAdapter *adapter = AdapterForDialect(((CdShard *) lfirst(lc))->dialect);

			if (!adapter->caps.returning && cannot == NULL)
				cannot = adapter;
		}
	}
	if (cannot == NULL)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("UPDATE and DELETE with RETURNING cannot reach %s shards", cannot->display_name),
			 errdetail("%s has no UPDATE ... RETURNING.", cannot->display_name),
			 errhint("Run the statement without RETURNING and read the rows afterwards.")));
}

/* Row identities: what the fetch of a row-by-row UPDATE or DELETE reads (row_modify.c) */

/* an integer identity in a tid: offsets with this bit set (ctids have none) */
#define ROW_ID_INT_FLAG 0x8000
#define ROW_ID_INT_BITS 15
#define ROW_ID_INT_MAX ((INT64CONST(1) << (32 + ROW_ID_INT_BITS)) - 1)

/*
 * FdwRowIdentity turns the identity a shard returned for a row (its text,
 * NULL when the dialect has none) into the tid the scan's row carries.  A
 * tid's text is taken as it is; an integer i is written (i >> 15, 0x8000 |
 * (i & 0x7fff)), an offset no ctid has.  No identity is the invalid tid.
 */
void
FdwRowIdentity(const char *text, ItemPointer tid)
{
	int64		id;

	if (text == NULL)
	{
		ItemPointerSetInvalid(tid);
		return;
	}
	if (text[0] == '(')
	{
		ItemPointerCopy((ItemPointer) DatumGetPointer(DirectFunctionCall1(tidin, CStringGetDatum(text))),
						tid);
		return;
	}
	id = pg_strtoint64(text);
	if (id < 0 || id > ROW_ID_INT_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("row identity " INT64_FORMAT " of a shard's row is out of range", id),
				 errdetail("UPDATE and DELETE row by row take row identities from 0 to " INT64_FORMAT ".",
						   ROW_ID_INT_MAX)));
	ItemPointerSet(tid, (BlockNumber) (id >> ROW_ID_INT_BITS),
				   (OffsetNumber) (ROW_ID_INT_FLAG | (id & (ROW_ID_INT_FLAG - 1))));
}

/*
 * FdwRowIdentityParams sets the row's identity parameters from its tid: the tid
 * form or the integer form, the other NULL.
 */
void
FdwRowIdentityParams(ItemPointer tid, CdParam *as_tid, CdParam *as_int)
{
	OffsetNumber offset = ItemPointerGetOffsetNumberNoCheck(tid);

	if (offset & ROW_ID_INT_FLAG)
	{
		int64		id = ((int64) ItemPointerGetBlockNumberNoCheck(tid) << ROW_ID_INT_BITS) |
			(offset & (ROW_ID_INT_FLAG - 1));

		ValuesToParam(Int64GetDatum(id), false, INT8OID, as_int);
		ValuesToParam((Datum) 0, true, TEXTOID, as_tid);
		return;
	}
	ValuesToParam(DirectFunctionCall1(textin, DirectFunctionCall1(tidout, PointerGetDatum(tid))),
				  false, TEXTOID, as_tid);
	ValuesToParam((Datum) 0, true, INT8OID, as_int);
}

/*
 * with_identity puts the stored row into the scan's slot (a heap tuple's,
 * as every foreign scan's) with its identity as the tuple's tid, which the
 * junk "ctid" of the UPDATE or DELETE reads.
 */
static TupleTableSlot *
with_identity(FdwScanState *st, TupleTableSlot *slot)
{
	int			natts = slot->tts_tupleDescriptor->natts;
	HeapTupleTableSlot *hslot = (HeapTupleTableSlot *) slot;
	ItemPointerData tid;

	Assert(TTS_IS_HEAPTUPLE(slot));
	slot_getallattrs(st->stored);
	FdwRowIdentity(st->stored->tts_isnull[natts] ? NULL :
				   TextDatumGetCString(st->stored->tts_values[natts]), &tid);
	ExecClearTuple(slot);
	memcpy(slot->tts_values, st->stored->tts_values, sizeof(Datum) * natts);
	memcpy(slot->tts_isnull, st->stored->tts_isnull, sizeof(bool) * natts);
	ExecStoreVirtualTuple(slot);
	ExecMaterializeSlot(slot);
	hslot->tuple->t_self = tid;
	slot->tts_tid = tid;
	return slot;
}

/*
 * next_row puts the next stored row in the scan's slot.  A row read back
 * from the tuplestore's file is allocated in the current context and the
 * reading slot frees it when it is cleared: read it in the query's
 * context, not in the per-tuple context the executor resets under the
 * slot's feet (which crashed any scan that spilled past work_mem).
 */
static TupleTableSlot *
next_row(FdwScanState *st, TupleTableSlot *slot, EState *estate)
{
	MemoryContext old = MemoryContextSwitchTo(estate->es_query_cxt);
	bool		found = tuplestore_gettupleslot(st->store, true, false, st->stored);

	MemoryContextSwitchTo(old);
	if (!found)
		return ExecClearTuple(slot);
	if (st->for_modify)
		return with_identity(st, slot);
	return ExecCopySlot(slot, st->stored);
}

void
collegedb_begin_scan(ForeignScanState *node, int eflags)
{
	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return;
	node->fdw_state = scan_state(node, false);
}

TupleTableSlot *
collegedb_iterate(ForeignScanState *node)
{
	FdwScanState *st = node->fdw_state;
	TupleTableSlot *slot = node->ss.ss_ScanTupleSlot;

	if (!st->fetched)
	{
		MemoryContext old = MemoryContextSwitchTo(node->ss.ps.state->es_query_cxt);

		st->store = tuplestore_begin_heap(false, false, work_mem);
		MemoryContextSwitchTo(old);
		run_statement(node, st, st->store_desc);
		st->fetched = true;
	}
	return next_row(st, slot, node->ss.ps.state);
}

/*
 * drop_rows ends the scan's tuplestore, after its reading slot lets go of
 * the row it holds from there.
 */
static void
drop_rows(FdwScanState *st)
{
	if (st->store == NULL)
		return;
	ExecClearTuple(st->stored);
	tuplestore_end(st->store);
	st->store = NULL;
}

void
collegedb_rescan(ForeignScanState *node)
{
	FdwScanState *st = node->fdw_state;

	drop_rows(st);
	st->fetched = false;
}

void
collegedb_end_scan(ForeignScanState *node)
{
	FdwScanState *st = node->fdw_state;

	if (st)
		drop_rows(st);
}

void
collegedb_begin_direct_modify(ForeignScanState *node, int eflags)
{
	FdwScanState *st;

	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return;
	st = scan_state(node, true);
	node->fdw_state = st;
}

TupleTableSlot *
collegedb_iterate_direct_modify(ForeignScanState *node)
{
	FdwScanState *st = node->fdw_state;
	ForeignScan *plan = (ForeignScan *) node->ss.ps.plan;
	EState	   *estate = node->ss.ps.state;
	TupleTableSlot *slot = node->ss.ss_ScanTupleSlot;
	bool		returning = boolVal(list_nth(plan->fdw_private, FdwPrivReturning));

	if (!st->fetched)
	{
		if (returning)
		{
			MemoryContext old = MemoryContextSwitchTo(estate->es_query_cxt);

			st->store = tuplestore_begin_heap(false, false, work_mem);
			MemoryContextSwitchTo(old);
			ensure_returning_possible(st);
		}
		run_statement(node, st, RelationGetDescr(node->resultRelInfo->ri_RelationDesc));
		st->fetched = true;
		if (!returning)
		{
			if (st->set_processed)
				estate->es_processed += st->rows;
			if (node->ss.ps.instrument)
				node->ss.ps.instrument->tuplecount += st->rows;
			return ExecClearTuple(slot);
		}
	}
	if (!returning)
		return ExecClearTuple(slot);
	slot = next_row(st, slot, estate);	/* TupIsNull() evaluates its argument twice */
	if (TupIsNull(slot))
		return slot;
	/* the local RETURNING list reads the row from the scan tuple */
	node->resultRelInfo->ri_projectReturning->pi_exprContext->ecxt_scantuple = slot;
	if (st->set_processed)
		estate->es_processed++;
	return slot;
}

void
collegedb_end_direct_modify(ForeignScanState *node)
{
	collegedb_end_scan(node);
}

/* INSERT: insert.c; UPDATE and DELETE row by row: row_modify.c */

/* EXPLAIN (explain.c says what; this callback finds it in the scan's state) */

void
collegedb_explain_scan(ForeignScanState *node, ExplainState *es)
{
	ForeignScan *plan = (ForeignScan *) node->ss.ps.plan;
	Relation	rel = node->ss.ss_currentRelation ? node->ss.ss_currentRelation :
		node->resultRelInfo->ri_RelationDesc;

	FdwScanState *st = node->fdw_state;

	FdwExplainTargets(plan, FdwTableInfo(RelationGetRelid(rel)), es);
	if (es->analyze && st && st->observed.observer)
		FdwExplainObserved(&st->observed, es);
}
