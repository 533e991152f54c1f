/*-------------------------------------------------------------------------
 *
 * shard_run.c
 *	  One statement per dialect on every shard at once, for the scans that
 *	  read the shards whole: the parameters, the move fence (upper_exec.c),
 *	  the fan-out (remote/fanout.c, each shard's rows streamed to its sink),
 *	  what a failed shard does (one rule for the scans of rows, fdw_exec.c,
 *	  of aggregates, upper_exec.c, and of sorted reads, topn.c), and what
 *	  EXPLAIN shows of it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "catalog/namespace.h"
#include "executor/executor.h"
#include "lib/stringinfo.h"
#include "nodes/nodeFuncs.h"
#include "storage/lmgr.h"
#include "utils/lsyscache.h"

#include "catalog/catalog.h"
#include "collegedb.h"
#include "fdw/fdw.h"
#include "fdw/upper.h"
#include "remote/fanout.h"

/* a moving key's rows to drop, read from one shard */
typedef struct UpperDrop
{
	char	   *key;
	char	   *shard;
} UpperDrop;

/*
 * UpperFence takes collegedb.move in SHARE mode and reads the moves in
 * flight: the rows each of their keys must not be read from (see upper_exec.c,
 * "Moves"), into *drops.  Returns the relation locked (to unlock
 * once the shards have answered), or InvalidOid.
 */
Oid
UpperFence(List **drops)
{
	Oid			move = get_relname_relid("move", get_namespace_oid("collegedb", false));
	CdCatalogRows rows;
	uint64		n;

	if (OidIsValid(move) && !RecoveryInProgress())
		LockRelationOid(move, ShareLock);
	else
		move = InvalidOid;
	n = CatalogExec("SELECT raw_key, CASE WHEN step IN ('journaled', 'copied') THEN target "
					"ELSE source END FROM collegedb.move WHERE step NOT IN ('done', 'failed') "
					"AND raw_key IS NOT NULL", 0, NULL, NULL, NULL, true, &rows);
	*drops = NIL;
	for (uint64 r = 0; r < n; r++)
	{
		UpperDrop  *drop = palloc(sizeof(UpperDrop));

		drop->key = CatalogText(&rows, r, 1);
		drop->shard = CatalogText(&rows, r, 2);
		*drops = lappend(*drops, drop);
	}
	return move;
}

/*
 * UpperDropped says whether a row of a moving key comes from a shard where
 * the key does not live (see UpperFence).
 */
bool
UpperDropped(List *drops, const CdShard *shard, const CdCell *key)
{
	ListCell   *lc;

	if (key->isnull)
		return false;
	foreach(lc, drops)
	{
		UpperDrop  *drop = lfirst(lc);

		if (strcmp(drop->shard, shard->name) == 0 && (int) strlen(drop->key) == key->len &&
			memcmp(drop->key, key->data, key->len) == 0)
			return true;
	}
	return false;
}

/*
 * FdwFanoutResult checks a fan-out of a scan: a failed shard fails it,
 * except a read under collegedb.fanout_partial, which warns and goes on
 * without that shard's rows.  Returns the rows of the shards that answered.
 */
int64
FdwFanoutResult(const CdFanoutShard *shards, int n, bool is_write)
{
	StringInfoData skipped;
	int64		rows = 0;

	initStringInfo(&skipped);
	for (int i = 0; i < n; i++)
	{
		if (shards[i].ok)
		{
			rows += shards[i].rows;
			continue;
		}
		if (is_write || !CollegeFanoutPartial)
			FanoutRaise(&shards[i], NULL,
						"SET collegedb.fanout_partial = on reads the other shards anyway.");
		appendStringInfo(&skipped, "%s%s (%s)", skipped.len ? ", " : "",
						 shards[i].shard->name, shards[i].error);
	}
	if (skipped.len)
		ereport(WARNING,
				(errmsg("skipped shards that failed: %s", skipped.data)));
	return rows;
}

/* a shard's statement ended: its time, for EXPLAIN ANALYZE */
static bool
shard_ended(CdFanoutShard *self)
{
	FdwShardRun *run = self->arg;
	instr_time	now;

	INSTR_TIME_SET_CURRENT(now);
	INSTR_TIME_SUBTRACT(now, run->start);
	for (int i = 0; i < run->nshards; i++)
	{
		if (run->shards[i] == self->shard)
			run->ms[i] = INSTR_TIME_GET_MILLISEC(now);
	}
	return false;
}

/*
 * FdwRunShards runs a scan's statement on every shard of the read set at
 * once, in the caller's memory context (which must outlive the scan's
 * rows): the parameters evaluated, a statement some shard's dialect cannot
 * take refused, moves fenced (UpperFence: 'moving' texts while moves are
 * in flight, with the rows to drop in run->drops), each shard's rows to
 * sink_for(arg, i, shard).  The fence is released once every shard has
 * answered.
 */
void
FdwRunShards(ForeignScanState *node, FdwShardRun *run, const CdForeignTable *table,
			 const char *const *texts, const char *const *moving,
			 CdRowSink *(*sink_for) (void *arg, int i, const CdShard *shard), void *arg)
{
	ExprContext *econtext = node->ss.ps.ps_ExprContext;
	int			nparams = list_length(run->param_exprs);
	CdParam    *params = palloc0(sizeof(CdParam) * Max(nparams, 1));
	CdFanoutShard *shards;
	ListCell   *lc,
			   *lc2;
	Oid			locked;
	int			i = 0;

	forboth(lc, run->param_exprs, lc2, run->param_types)
	{
		bool		isnull;
		Datum		value = ExecEvalExpr(lfirst(lc), econtext, &isnull);

		ValuesToParam(value, isnull, lfirst_oid(lc2), &params[i++]);
	}
	FdwEnsureSendable(texts, table);
	locked = UpperFence(&run->drops);
	run->moving = run->drops != NIL;
	if (run->moving)
		texts = moving;
	run->shards = ShardReadSet(&run->nshards);
	shards = palloc0(sizeof(CdFanoutShard) * Max(run->nshards, 1));
	run->rows = palloc0(sizeof(int64) * Max(run->nshards, 1));
	run->ms = palloc0(sizeof(double) * Max(run->nshards, 1));
	for (i = 0; i < run->nshards; i++)
	{
		shards[i].shard = run->shards[i];
		shards[i].sql = texts[run->shards[i]->dialect];
		shards[i].sink = sink_for(arg, i, run->shards[i]);
		shards[i].next = shard_ended;
		shards[i].arg = run;
	}
	INSTR_TIME_SET_CURRENT(run->start);
	FanoutRun(shards, run->nshards, NULL, nparams, params, CD_FANOUT_READ);
	(void) FdwFanoutResult(shards, run->nshards, false);
	for (i = 0; i < run->nshards; i++)
		run->rows[i] = shards[i].rows;
	run->done = true;
	/* placement may change again: the shards have answered */
	if (OidIsValid(locked))
		UnlockRelationOid(locked, ShareLock);
}

/*
 * FdwShardRunInit prepares a scan's parameters.
 */
void
FdwShardRunInit(FdwShardRun *run, ForeignScanState *node)
{
	ForeignScan *plan = (ForeignScan *) node->ss.ps.plan;
	ListCell   *lc;

	memset(run, 0, sizeof(*run));
	run->param_exprs = ExecInitExprList(plan->fdw_exprs, (PlanState *) node);
	foreach(lc, plan->fdw_exprs)
		run->param_types = lappend_oid(run->param_types, exprType(lfirst(lc)));
}

/*
 * FdwExplainShardRun shows what the scan sends (each dialect of the fleet's
 * text, under VERBOSE) and, under ANALYZE, how each shard answered.
 */
void
FdwExplainShardRun(const FdwShardRun *run, const char *how, List *texts, ExplainState *es)
{
	bool		dialects[CD_MAX_DIALECTS] = {0};
	ListCell   *lc;

	ExplainPropertyText("Shards", how, es);
	foreach(lc, ShardList())
		dialects[((CdShard *) lfirst(lc))->dialect] = true;
	for (int d = 0; es->verbose && d < AdapterCount(); d++)
	{
		if (dialects[d])
			ExplainPropertyText(psprintf("Remote SQL (%s)", AdapterDialectName(d)),
								FdwExplainText(strVal(list_nth(texts, d))), es);
	}
	if (!es->analyze || run == NULL || !run->done)
		return;
	ExplainPropertyText("Read", run->moving ? "row by row with the key (moves in flight)" : "the statements above", es);
	for (int i = 0; i < run->nshards; i++)
		ExplainPropertyText(psprintf("Shard %s", run->shards[i]->name),
							es->timing ?
							psprintf(INT64_FORMAT " rows in %.3f ms", run->rows[i], run->ms[i]) :
							psprintf(INT64_FORMAT " rows", run->rows[i]), es);
}
