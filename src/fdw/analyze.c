/*-------------------------------------------------------------------------
 *
 * analyze.c
 *	  ANALYZE of collegedb foreign tables: a sample of every shard's rows.
 *
 * ANALYZE reads the table's rows from each of its shards in turn (the
 * shards stream them: single-row mode on PostgreSQL) and keeps a uniform
 * random sample of all of them (reservoir sampling, Vitter's algorithm Z
 * as in PostgreSQL's own ANALYZE), so that the statistics describe the
 * whole table and pg_class.reltuples is its row count over every shard.
 * The planner then estimates a scan's rows from them (fdw_plan.c).  Memory
 * is the sample's: each row is converted in a context reset after it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/sampling.h"

#include "catalog/shards.h"
#include "fdw/fdw.h"
#include "remote/remote.h"

typedef struct SampleSink
{
	RecordRowSink record;		/* converts the shard's rows; first */
	HeapTuple  *rows;
	int			targrows;
	int			numrows;		/* in the sample */
	double		seen;			/* rows read from the shards */
	double		rowstoskip;		/* before the next replacement; < 0: draw */
	ReservoirStateData rstate;
	MemoryContext sample_context;	/* where the sample's tuples live */
} SampleSink;

/*
 * sample_put keeps a row: the first targrows rows fill the sample, and
 * each later one replaces a random member with the reservoir's odds.
 */
static void
sample_put(RecordRowSink *record, Datum *values, bool *nulls)
{
	SampleSink *s = (SampleSink *) record;
	int			slot = -1;

	s->seen += 1;
	if (s->numrows < s->targrows)
		slot = s->numrows++;
	else
	{
		if (s->rowstoskip < 0)
			s->rowstoskip = reservoir_get_next_S(&s->rstate, s->seen, s->targrows);
		if (s->rowstoskip <= 0)
		{
			slot = (int) (s->targrows * sampler_random_fract(&s->rstate.randstate));
			Assert(slot >= 0 && slot < s->targrows);
			heap_freetuple(s->rows[slot]);
		}
		s->rowstoskip -= 1;
	}
	if (slot >= 0)
	{
		MemoryContext old = MemoryContextSwitchTo(s->sample_context);

		s->rows[slot] = heap_form_tuple(record->desc, values, nulls);
		MemoryContextSwitchTo(old);
	}
}

/*
 * acquire_sample is the AcquireSampleRowsFunc: every shard's rows through
 * one reservoir.  The whole count is *totalrows; there are no dead rows
 * the front can see.
 */
static int
acquire_sample(Relation rel, int elevel, HeapTuple *rows, int targrows,
			   double *totalrows, double *totaldeadrows)
{
	CdForeignTable *table = FdwTableInfo(RelationGetRelid(rel));
	SampleSink	s;
	ListCell   *lc;

	RecordRowSinkInit(&s.record, NULL, RelationGetDescr(rel));
	s.record.put = sample_put;
	s.rows = rows;
	s.targrows = targrows;
	s.numrows = 0;
	s.seen = 0;
	s.rowstoskip = -1;
	s.sample_context = CurrentMemoryContext;
	reservoir_init_selection_state(&s.rstate, targrows);

	foreach(lc, FdwTableShards(table))
	{
		const CdShard *shard = lfirst(lc);
		const CdAdapter *adapter = AdapterForDialect(shard->dialect);
		char	   *sql = psprintf("SELECT %s FROM %s",
								   FdwColumnList(table, adapter, NULL),
								   FdwQualifiedName(table, adapter));

		CHECK_FOR_INTERRUPTS();
		(void) RemoteExecute(shard, sql, 0, NULL, &s.record.base, false);
		pfree(sql);
	}
	MemoryContextDelete(s.record.row_context);
	FdwForgetRemoteRows(RelationGetRelid(rel));

	*totalrows = s.seen;
	*totaldeadrows = 0;
	ereport(elevel,
			(errmsg("\"%s\": the shards hold %.0f rows; %d rows in sample",
					RelationGetRelationName(rel), s.seen, s.numrows)));
	return s.numrows;
}

/*
 * collegedb_analyze is AnalyzeForeignTable: every collegedb foreign table
 * can be sampled.  The page count is not known before the rows are read;
 * the planner uses the row count.
 */
bool
collegedb_analyze(Relation rel, AcquireSampleRowsFunc *func, BlockNumber *totalpages)
{
	*func = acquire_sample;
	*totalpages = 1;
	return true;
}
