/*-------------------------------------------------------------------------
 *
 * observe.c
 *	  Per-shard timings of the statements a plan node sends, for EXPLAIN
 *	  ANALYZE: how many statements each shard ran, the rows they gave, the
 *	  time to the first row and the time in all.
 *
 * A caller that wants to know (the FDW executor under instrumentation)
 * installs an observer around the work it measures.  Every statement on
 * a shard passes StatementTryBegin and StatementFinish (execute.c), which
 * report to the installed observer: so statements sent one after another
 * (a routed key, its tombstone hops and guards) and at once (a fan-out)
 * are measured alike, including the time to connect.  The time to the
 * first row is taken by a row sink that wraps the caller's
 * (ObservedRowSink), since rows reach the caller's sink without passing
 * through the remote layer: a sink that knows its shard (one per shard in
 * a fan-out) or, for statements sent one at a time, the shard whose
 * statement is running.
 *
 * It does not time anything when no observer is installed: a statement
 * then costs one pointer test more.  An error that leaves a measured
 * section before the caller could restore the previous observer leaves
 * the observer installed; the transaction callbacks here remove it at
 * the end of the (sub)transaction it was installed in, so that it never
 * outlives the memory it lives in.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"

#include "remote/connection_internal.h"

static CdRemoteObserver *observer = NULL;
static bool callbacks_registered = false;

/*
 * observe_xact_callback removes the observer when its transaction ends.
 */
static void
observe_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_COMMIT ||
		event == XACT_EVENT_PARALLEL_ABORT || event == XACT_EVENT_PARALLEL_COMMIT ||
		event == XACT_EVENT_PREPARE)
		observer = NULL;
}

/*
 * observe_subxact_callback removes the observer when the subtransaction
 * it was installed in (or one around it) aborts; a fan-out's own
 * subtransactions, inside the measured section, leave it alone.
 */
static void
observe_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						 SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB && observer != NULL &&
		observer->level >= GetCurrentTransactionNestLevel())
		observer = NULL;
}

/*
 * RemoteObserverInit prepares an observer whose entries live in the
 * current memory context; 'timing' false counts statements and rows only.
 */
void
RemoteObserverInit(CdRemoteObserver *obs, bool timing)
{
	memset(obs, 0, sizeof(*obs));
	obs->context = CurrentMemoryContext;
	obs->timing = timing;
	obs->current = -1;
}

/*
 * RemoteObserve installs 'obs' (NULL: none) and returns the observer it
 * replaces, which the caller installs again when its section ends.
 */
CdRemoteObserver *
RemoteObserve(CdRemoteObserver *obs)
{
	CdRemoteObserver *previous = observer;

	if (!callbacks_registered)
	{
		RegisterXactCallback(observe_xact_callback, NULL);
		RegisterSubXactCallback(observe_subxact_callback, NULL);
		callbacks_registered = true;
	}
	if (obs)
		obs->level = GetCurrentTransactionNestLevel();
	observer = obs;
	return previous;
}

/*
 * RemoteObserverShard returns the entry of 'shard' in 'obs', adding it
 * (in shard order of first use).
 */
CdShardTiming *
RemoteObserverShard(CdRemoteObserver *obs, const CdShard *shard)
{
	for (int i = 0; i < obs->count; i++)
		if (strcmp(obs->shards[i].shard, shard->name) == 0)
			return &obs->shards[i];
	if (obs->count == obs->allocated)
	{
		int			n = Max(obs->allocated * 2, 4);

		if (obs->shards == NULL)
			obs->shards = MemoryContextAllocZero(obs->context, sizeof(CdShardTiming) * n);
		else
		{
			obs->shards = repalloc(obs->shards, sizeof(CdShardTiming) * n);
			memset(&obs->shards[obs->allocated], 0,
				   sizeof(CdShardTiming) * (n - obs->allocated));
		}
		obs->allocated = n;
	}
	strlcpy(obs->shards[obs->count].shard, shard->name, NAMEDATALEN);
	obs->shards[obs->count].dialect = shard->dialect;
	return &obs->shards[obs->count++];
}

/*
 * ObserveBegan notes that a statement on 'shard' starts now (before it
 * takes its connection).
 */
void
ObserveBegan(const CdShard *shard)
{
	CdShardTiming *t;

	if (observer == NULL)
		return;
	t = RemoteObserverShard(observer, shard);
	t->running = true;
	t->row_seen = false;
	if (observer->timing)
		INSTR_TIME_SET_CURRENT(t->started);
	observer->current = t - observer->shards;
}

/*
 * ObserveEnded notes that the statement on 'shard' ended: 'rows' it
 * returned or changed count unless it was one of collegedb's own
 * ('internal': a tombstone lookup, a probe), which count as statements.
 */
void
ObserveEnded(const CdShard *shard, int64 rows, bool internal, bool ok)
{
	CdShardTiming *t;

	if (observer == NULL)
		return;
	t = RemoteObserverShard(observer, shard);
	t->statements++;
	if (!ok)
		t->errors++;
	else if (!internal)
		t->rows += rows;
	if (observer->timing && t->running)
	{
		instr_time	now;

		INSTR_TIME_SET_CURRENT(now);
		t->ended = now;
		INSTR_TIME_SUBTRACT(now, t->started);
		t->total_ms += INSTR_TIME_GET_MILLISEC(now);
	}
	t->running = false;
}

/*
 * observed_columns passes the column names on.
 */
static void
observed_columns(CdRowSink *self, int ncols, const char *const *names)
{
	ObservedRowSink *sink = (ObservedRowSink *) self;

	if (sink->inner)
		sink->inner->columns(sink->inner, ncols, names);
}

/*
 * observed_row notes the first row of its shard's statement, then passes
 * the row on.
 */
static void
observed_row(CdRowSink *self, int ncols, const CdCell *cells)
{
	ObservedRowSink *sink = (ObservedRowSink *) self;
	CdRemoteObserver *obs = sink->observer;
	CdShardTiming *t = NULL;

	if (sink->shard)
		t = RemoteObserverShard(obs, sink->shard);
	else if (obs->current >= 0 && obs->current < obs->count)
		t = &obs->shards[obs->current];
	if (t && t->running && !t->row_seen)
	{
		t->row_seen = true;
		if (obs->timing && !t->has_first_row)
		{
			instr_time	now;

			INSTR_TIME_SET_CURRENT(now);
			INSTR_TIME_SUBTRACT(now, t->started);
			t->first_row_ms = INSTR_TIME_GET_MILLISEC(now);
			t->has_first_row = true;
		}
	}
	if (sink->inner)
		sink->inner->row(sink->inner, ncols, cells);
}

/*
 * ObservedRowSinkInit wraps 'inner' (may be NULL) for 'obs': rows are
 * those of 'shard', or with NULL of whichever shard's statement runs.
 */
void
ObservedRowSinkInit(ObservedRowSink *sink, CdRowSink *inner, CdRemoteObserver *obs,
					const CdShard *shard)
{
	sink->base.columns = observed_columns;
	sink->base.row = observed_row;
	sink->inner = inner;
	sink->observer = obs;
	sink->shard = shard;
}
