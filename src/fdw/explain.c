/*-------------------------------------------------------------------------
 *
 * explain.c
 *	  What EXPLAIN shows of a scan or modification of a collegedb foreign
 *	  table: where it goes (its shard, the key's shards, or all shards) and,
 *	  with VERBOSE, the statement for each dialect it may reach; and under
 *	  EXPLAIN ANALYZE what was measured per shard (statements, errors,
 *	  rows, time to the first row and in all) and per fan-out (its time,
 *	  and how long the slowest shard kept the others waiting).
 *
 * The executors (fdw_exec.c, insert.c, row_modify.c) keep an FdwObserved
 * in their state and hand it their row sinks and fan-outs as they run;
 * the measuring itself is remote/observe.c's.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/explain.h"
#include "executor/executor.h"
#include "nodes/pg_list.h"

#include "catalog/shards.h"
#include "fdw/fdw.h"
#include "remote/fanout.h"
#include "remote/remote.h"
#include "router/router.h"

/* Per-shard timings under instrumentation (EXPLAIN ANALYZE) */

/*
 * FdwObservedInit sets up measuring when the query's nodes are instrumented
 * (their Instrumentation comes only after the node's Begin callback).
 */
void
FdwObservedInit(FdwObserved *o, EState *estate)
{
	memset(o, 0, sizeof(*o));
	if (estate->es_instrument == 0)
		return;
	o->observer = palloc(sizeof(CdRemoteObserver));
	RemoteObserverInit(o->observer, (estate->es_instrument & INSTRUMENT_TIMER) != 0);
}

/*
 * FdwObservedSink wraps 'inner' so that the observer sees its first rows;
 * 'shard' is the sink's shard, NULL for statements sent one at a time.
 */
CdRowSink *
FdwObservedSink(FdwObserved *o, CdRowSink *inner, const CdShard *shard)
{
	ObservedRowSink *sink;

	if (o->observer == NULL || inner == NULL)
		return inner;
	sink = palloc(sizeof(ObservedRowSink));
	ObservedRowSinkInit(sink, inner, o->observer, shard);
	return &sink->base;
}

/*
 * FdwObservedFanout adds up a fan-out over 'shards' that started at
 * 'start': its time, and how long after the next-to-last shard the
 * slowest one ended (the time spent waiting for it alone).
 */
void
FdwObservedFanout(FdwObserved *o, const CdFanoutShard *shards, int n, instr_time start)
{
	instr_time	now;
	const CdShardTiming *last = NULL;
	double		last_ms = 0,
				before_ms = 0;

	if (o->observer == NULL)
		return;
	o->fanouts++;
	o->fanout_shards = n;
	/* a shard that failed before its statement was sent (connecting) */
	for (int i = 0; i < n; i++)
	{
		CdShardTiming *t = RemoteObserverShard(o->observer, shards[i].shard);

		if (!shards[i].ok && t->running)
		{
			t->statements++;
			t->errors++;
			t->running = false;
		}
	}
	if (!o->observer->timing)
		return;
	INSTR_TIME_SET_CURRENT(now);
	INSTR_TIME_SUBTRACT(now, start);
	o->fanout_ms += INSTR_TIME_GET_MILLISEC(now);
	for (int i = 0; i < n; i++)
	{
		const CdShardTiming *t = RemoteObserverShard(o->observer, shards[i].shard);
		instr_time	end = t->ended;
		double		ms;

		if (INSTR_TIME_IS_ZERO(end))
			continue;
		INSTR_TIME_SUBTRACT(end, start);
		ms = INSTR_TIME_GET_MILLISEC(end);
		if (last == NULL || ms > last_ms)
		{
			before_ms = last ? last_ms : 0;
			last = t;
			last_ms = ms;
		}
		else if (ms > before_ms)
			before_ms = ms;
	}
	if (last == NULL)
		return;
	strlcpy(o->slowest, last->shard, NAMEDATALEN);
	if (n > 1)
		o->alone_ms += last_ms - before_ms;
}

static int
timing_name_cmp(const void *a, const void *b)
{
	return strcmp((*(CdShardTiming *const *) a)->shard, (*(CdShardTiming *const *) b)->shard);
}

/*
 * FdwExplainObserved shows what 'o' measured: per shard the statements, the
 * rows, and (with TIMING) the time to the first row and in all; for
 * fan-outs their time and the wait for the slowest shard.
 */
void
FdwExplainObserved(FdwObserved *o, ExplainState *es)
{
	CdRemoteObserver *obs = o->observer;
	bool		timing = es->timing && obs->timing;
	CdShardTiming **sorted = palloc(sizeof(CdShardTiming *) * Max(obs->count, 1));

	for (int i = 0; i < obs->count; i++)
		sorted[i] = &obs->shards[i];
	qsort(sorted, obs->count, sizeof(CdShardTiming *), timing_name_cmp);
	if (es->format != EXPLAIN_FORMAT_TEXT)
		ExplainOpenGroup("Shard Statements", "Shard Statements", false, es);
	for (int i = 0; i < obs->count; i++)
	{
		CdShardTiming *t = sorted[i];

		if (es->format == EXPLAIN_FORMAT_TEXT)
		{
			StringInfoData line;

			initStringInfo(&line);
			appendStringInfo(&line, "statements=" INT64_FORMAT, t->statements);
			if (t->errors > 0)
				appendStringInfo(&line, " errors=" INT64_FORMAT, t->errors);
			appendStringInfo(&line, " rows=" INT64_FORMAT, t->rows);
			if (timing)
			{
				if (t->has_first_row)
					appendStringInfo(&line, " first row=%.3f ms", t->first_row_ms);
				appendStringInfo(&line, " total=%.3f ms", t->total_ms);
			}
			ExplainPropertyText(psprintf("Shard %s (%s)", t->shard,
										 AdapterDialectName(t->dialect)), line.data, es);
			continue;
		}
		ExplainOpenGroup("Shard Statement", NULL, true, es);
		ExplainPropertyText("Shard", t->shard, es);
		ExplainPropertyText("Dialect", AdapterDialectName(t->dialect), es);
		ExplainPropertyInteger("Statements", NULL, t->statements, es);
		ExplainPropertyInteger("Errors", NULL, t->errors, es);
		ExplainPropertyInteger("Rows", NULL, t->rows, es);
		if (timing)
		{
			if (t->has_first_row)
				ExplainPropertyFloat("First Row Time", "ms", t->first_row_ms, 3, es);
			ExplainPropertyFloat("Total Time", "ms", t->total_ms, 3, es);
		}
		ExplainCloseGroup("Shard Statement", NULL, true, es);
	}
	if (es->format != EXPLAIN_FORMAT_TEXT)
		ExplainCloseGroup("Shard Statements", "Shard Statements", false, es);

	if (o->fanouts == 0)
		return;
	if (es->format == EXPLAIN_FORMAT_TEXT)
	{
		StringInfoData line;

		initStringInfo(&line);
		appendStringInfo(&line, "%d shard%s", o->fanout_shards, o->fanout_shards == 1 ? "" : "s");
		if (o->fanouts > 1)
			appendStringInfo(&line, ", " INT64_FORMAT " runs", o->fanouts);
		if (timing)
		{
			appendStringInfo(&line, ", %.3f ms", o->fanout_ms);
			if (o->slowest[0])
				appendStringInfo(&line, ", slowest %s, %.3f ms waiting for it alone",
								 o->slowest, o->alone_ms);
		}
		ExplainPropertyText("Fan-out", line.data, es);
		return;
	}
	ExplainPropertyInteger("Fan-out Shards", NULL, o->fanout_shards, es);
	ExplainPropertyInteger("Fan-out Runs", NULL, o->fanouts, es);
	if (timing)
	{
		ExplainPropertyFloat("Fan-out Time", "ms", o->fanout_ms, 3, es);
		if (o->slowest[0])
		{
			ExplainPropertyText("Slowest Shard", o->slowest, es);
			ExplainPropertyFloat("Slowest Shard Alone Time", "ms", o->alone_ms, 3, es);
		}
	}
}

/* Where a scan or modification goes */

/*
 * FdwExplainTargets says where a scan or modification goes, and with
 * VERBOSE the statement for each dialect among the shards it may reach.
 */
void
FdwExplainTargets(ForeignScan *plan, CdForeignTable *table, ExplainState *es)
{
	int			key_param = intVal(list_nth(plan->fdw_private, FdwPrivKeyParam));
	bool		dialects[CD_MAX_DIALECTS] = {false};
	ListCell   *lc;

	if (table->shard)
	{
		const CdShard *shard = ShardLookup(table->shard);

		ExplainPropertyText("Shard", shard->name, es);
		dialects[shard->dialect] = true;
	}
	else if (key_param > 0)
	{
		Node	   *key = list_nth(plan->fdw_exprs, key_param - 1);

		if (IsA(key, Const) && !boolVal(list_nth(plan->fdw_private, FdwPrivKeyArray)))
		{
			Const	   *c = (Const *) key;
			char	   *text = FdwKeyText(c->constvalue, c->consttype);
			CdRoute		route = RouterResolve(text, strlen(text), false, false);
			StringInfoData names;

			initStringInfo(&names);
			for (int i = 0; i < route.ncandidates; i++)
				appendStringInfo(&names, "%s%s", i ? ", " : "", route.candidates[i]->name);
			ExplainPropertyText("Shards", names.data, es);
		}
		else
			ExplainPropertyText("Shards", "the key's (routed at execution)", es);
		foreach(lc, ShardList())
			dialects[((CdShard *) lfirst(lc))->dialect] = true;
	}
	else
	{
		ExplainPropertyText("Shards", "all shards", es);
		foreach(lc, ShardList())
			dialects[((CdShard *) lfirst(lc))->dialect] = true;
	}
	if (!es->verbose)
		return;
	for (int d = 0; d < AdapterCount(); d++)
	{
		if (!dialects[d])
			continue;
		ExplainPropertyText(psprintf("Remote SQL (%s)", AdapterDialectName(d)),
							FdwExplainText(strVal(list_nth(list_nth(plan->fdw_private, FdwPrivSql), d))), es);
	}
}
