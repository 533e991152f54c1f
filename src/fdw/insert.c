/*-------------------------------------------------------------------------
 *
 * insert.c
 *	  INSERT and COPY FROM into collegedb foreign tables: rows routed by
 *	  their key, buffered per shard and sent in batches.
 *
 * Each row is routed by its key value (a new key is allocated and its
 * mapping saved, as with collegedb.run).  When the statement allows it
 * (no RETURNING, no ON CONFLICT, no row trigger after the insert, one
 * shard the key can go to), the row is not sent at once: it joins its shard's
 * batch, and a batch goes when it holds collegedb.insert_batch_rows rows or
 * collegedb.insert_batch_bytes bytes (or as many parameters as the
 * dialect's max_params allows), and every batch at the end of the
 * statement (EndForeignModify, EndForeignInsert).  A batch is two
 * statements in the shard's write transaction: the guard of all its keys
 * (TombstoneGuardKeys, remote/tombstones.c: the keys' locks, bounded, and
 * one lookup of their tombstones), then the rows: by COPY to a PostgreSQL
 * shard (CdAdapter.send_rows, adapters/pg_copy.c), one prepared one-row
 * INSERT run for every row on SQLite (exec_rows), else one multi-row
 * INSERT.  When the
 * guard finds that one of the keys moved away, the batch's rows go one by
 * one the guarded way instead, each following its own key's tombstone.
 * The INSERT is sent without waiting for its answer (RemoteSend): the
 * shard works on it while the front routes the next rows and fills the
 * other shards' batches, and the answer is awaited before that shard's
 * next batch, or at the end of the statement (errors are raised then).
 * Memory stays flat: a batch's values live in its shard's context, reset
 * after each send.
 *
 * Rows that cannot be batched go one by one, as every row did before
 * (RouterExecuteDialects, router/routed.c), in a memory context reset after
 * each row.  A foreign table on a shard's own server batches without a
 * guard (its rows are not routed).  What it does not do: UPDATE and
 * DELETE (fdw_exec.c), the remote statements' texts (deparse.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "executor/executor.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "catalog/config.h"
#include "catalog/shards.h"
#include "cd_errcodes.h"
#include "collegedb.h"
#include "fdw/fdw.h"
#include "remote/remote.h"
#include "remote/tombstones.h"
#include "router/router.h"

/*
 * What the batch still has to learn of a row's key before it is sent:
 * nothing (its mapping or its one computed owner was read), that it is
 * new (its mapping is saved with the batch's: RouterSaveNewKeys), or,
 * under computed placement, whether it has an exception that sends it
 * elsewhere (looked up with the batch's: RouterFindExceptions).
 */
#define ROW_KEY_KNOWN		0
#define ROW_KEY_NEW			1
#define ROW_KEY_UNCHECKED	2

/* the rows buffered for one shard */
typedef struct FdwShardBatch
{
	const CdShard *shard;
	int			max_rows;		/* within the dialect's max_params */
	int			nrows;
	Size		bytes;
	CdParam    *params;			/* max_rows * ncols */
	char	  **keys;			/* NULL for a shard's own table */
	int		   *key_lens;
	char	   *kind;			/* each row's key: ROW_KEY_* */
	int			nnew;			/* rows whose kind is not ROW_KEY_KNOWN */
	MemoryContext values;		/* the rows' values; reset after each send */

	/*
	 * The batch sent last, whose INSERT may still be running on the shard
	 * (RemoteSend) while the next one fills: its arrays and values stay
	 * until its answer came (batch_await), then serve the next batch.
	 */
	CdPendingStatement *pending;
	CdParam    *sent_params;
	char	  **sent_keys;
	int		   *sent_key_lens;
	char	   *sent_kind;
	MemoryContext sent_values;
} FdwShardBatch;

typedef struct FdwInsertState
{
	FdwModifyKind kind;			/* FDW_MODIFY_INSERT */
	CdForeignTable *table;
	const char *sql[CD_MAX_DIALECTS];
	int			ncols;
	AttrNumber *attnums;
	MemoryContext row_context;	/* reset after each row */
	FdwObserved observed;		/* under EXPLAIN ANALYZE */
	bool		batching;
	bool		do_nothing;		/* ON CONFLICT DO NOTHING: rows may be skipped */
	char	   *values_prefix[CD_MAX_DIALECTS]; /* "INSERT ... VALUES " */
	char	   *full_sql[CD_MAX_DIALECTS];	/* the INSERT of a full batch */
	const char *rows_sql[CD_MAX_DIALECTS];	/* the dialect's bulk path, or NULL */
	int			full_rows[CD_MAX_DIALECTS];
	int64		rows_sent;		/* for collegedb.insert_progress */
	TimestampTz last_report;
	int			nbatches;
	FdwShardBatch *batches;		/* one per shard met, in es_query_cxt */
	MemoryContext batch_context;
} FdwInsertState;

/*
 * batching_allowed says whether the rows of this insert may wait in a
 * batch: only when nothing needs each row's outcome at once (RETURNING,
 * ON CONFLICT, a row trigger after the insert or a transition table sees
 * the row as the shard has it).  A key with several shards to go to (a
 * computed key under several epochs, a slot that moves) is sent by itself
 * whenever it comes (insert_row).
 */
static bool
batching_allowed(ModifyTableState *mtstate, ResultRelInfo *rinfo, FdwInsertState *st)
{
	TriggerDesc *trig = rinfo->ri_TrigDesc;

	if (CollegeInsertBatchRows <= 1 || st->ncols == 0)
		return false;
	/* RETURNING is set up after BeginForeignModify: ask the plan too */
	if (rinfo->ri_projectReturning != NULL || rinfo->ri_returningList != NIL)
		return false;
	if (mtstate->ps.plan && IsA(mtstate->ps.plan, ModifyTable) &&
		((ModifyTable *) mtstate->ps.plan)->returningLists != NIL)
		return false;
	if (mtstate->ps.plan && IsA(mtstate->ps.plan, ModifyTable) &&
		((ModifyTable *) mtstate->ps.plan)->onConflictAction != ONCONFLICT_NONE)
		return false;
	if (trig && (trig->trig_insert_after_row || trig->trig_insert_new_table))
		return false;
	/* without an eligible shard computed placement refuses writes: row by row */
	if (st->table->shard == NULL && ConfigGet()->computed && !RouterAnyShardEligible())
		return false;
	return true;
}

/*
 * ensure_do_nothing_sendable refuses INSERT ... ON CONFLICT DO NOTHING
 * before anything is sent when a shard the rows may reach cannot skip a
 * conflicting row exactly (CdAdapter.insert_do_nothing).
 */
static void
ensure_do_nothing_sendable(FdwInsertState *st, ResultRelInfo *rinfo)
{
	List	   *shards = st->table->shard ? list_make1((void *) ShardLookup(st->table->shard)) :
		ShardList();
	ListCell   *lc;

	foreach(lc, shards)
	{
		const CdShard *shard = lfirst(lc);

		if (st->sql[shard->dialect][0] == '\0')
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("INSERT ... ON CONFLICT DO NOTHING into \"%s\" cannot be sent to %s shard \"%s\"",
							RelationGetRelationName(rinfo->ri_RelationDesc),
							AdapterForDialect(shard->dialect)->display_name, shard->name),
					 errdetail("%s has no statement that skips exactly the rows that conflict with a unique constraint.",
							   AdapterForDialect(shard->dialect)->display_name),
					 errhint("Insert without ON CONFLICT, or leave out the rows that exist already.")));
	}
}

/*
 * begin_insert sets up the insertion of rows into a foreign table, for
 * INSERT (collegedb_begin_modify) and for COPY FROM and rows routed to a
 * partition (collegedb_begin_foreign_insert).
 */
static void
begin_insert(ModifyTableState *mtstate, ResultRelInfo *rinfo)
{
	FdwInsertState *st;
	TupleDesc	desc = RelationGetDescr(rinfo->ri_RelationDesc);

	st = palloc0(sizeof(FdwInsertState));
	st->kind = FDW_MODIFY_INSERT;
	st->table = FdwTableInfo(RelationGetRelid(rinfo->ri_RelationDesc));
	st->attnums = palloc(sizeof(AttrNumber) * Max(desc->natts, 1));
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (!att->attisdropped && !att->attgenerated)
			st->attnums[st->ncols++] = att->attnum;
	}
	st->do_nothing = mtstate->ps.plan && IsA(mtstate->ps.plan, ModifyTable) &&
		((ModifyTable *) mtstate->ps.plan)->onConflictAction == ONCONFLICT_NOTHING;
	DeparseInsert(st->table, st->ncols, st->attnums, st->do_nothing, st->sql);
	if (st->do_nothing)
		ensure_do_nothing_sendable(st, rinfo);
	FdwObservedInit(&st->observed, mtstate->ps.state);
	st->row_context = AllocSetContextCreate(mtstate->ps.state->es_query_cxt,
											"collegedb insert row",
											ALLOCSET_DEFAULT_SIZES);
	st->batching = batching_allowed(mtstate, rinfo, st);
	if (st->batching)
	{
		st->batch_context = AllocSetContextCreate(mtstate->ps.state->es_query_cxt,
												  "collegedb insert batches",
												  ALLOCSET_DEFAULT_SIZES);
		for (int d = 0; d < AdapterCount(); d++)
		{
			/* the text up to the placeholders' row, which a batch repeats */
			const char *values = strstr(st->sql[d], ") VALUES (");

			Assert(values != NULL);
			st->values_prefix[d] = pnstrdup(st->sql[d], values - st->sql[d] + strlen(") VALUES "));
		}
		DeparseRowsInto(st->table, st->ncols, st->attnums, st->rows_sql);
	}
	rinfo->ri_FdwState = st;
}

void
collegedb_begin_modify(ModifyTableState *mtstate, ResultRelInfo *rinfo,
					   List *fdw_private, int subplan_index, int eflags)
{
	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return;
	if (mtstate->operation != CMD_INSERT)
		RowModifyBegin(mtstate, rinfo, fdw_private);
	else
		begin_insert(mtstate, rinfo);
}

/*
 * collegedb_begin_foreign_insert prepares COPY FROM into a foreign table,
 * and the rows an INSERT or COPY into a partitioned table routes to a
 * foreign partition: each row then goes as an INSERT's would.
 */
void
collegedb_begin_foreign_insert(ModifyTableState *mtstate, ResultRelInfo *rinfo)
{
	begin_insert(mtstate, rinfo);
}

void
collegedb_explain_modify(ModifyTableState *mtstate, ResultRelInfo *rinfo,
						 List *fdw_private, int subplan_index, ExplainState *es)
{
	CdForeignTable *table;
	FdwInsertState *st = rinfo->ri_FdwState;

	if (mtstate->operation != CMD_INSERT)
	{
		RowModifyExplain(rinfo, fdw_private, es);
		return;
	}
	table = FdwTableInfo(RelationGetRelid(rinfo->ri_RelationDesc));
	ExplainPropertyText("Shards", table->shard ? table->shard : "each row's key's", es);
	if (es->analyze && st && st->observed.observer)
		FdwExplainObserved(&st->observed, es);
}

/*
 * row_params converts a row's values into CdParams, and returns its key's
 * text (NULL when the table has no key or the key is null).
 */
static char *
row_params(FdwInsertState *st, ResultRelInfo *rinfo, TupleTableSlot *slot, CdParam *params)
{
	TupleDesc	desc = RelationGetDescr(rinfo->ri_RelationDesc);
	char	   *key = NULL;

	slot_getallattrs(slot);
	for (int i = 0; i < st->ncols; i++)
	{
		AttrNumber	attno = st->attnums[i];
		Form_pg_attribute att = TupleDescAttr(desc, attno - 1);

		ValuesToParam(slot->tts_values[attno - 1], slot->tts_isnull[attno - 1],
					  att->atttypid, &params[i]);
		if (attno == st->table->key_attno && !slot->tts_isnull[attno - 1])
			key = FdwKeyText(slot->tts_values[attno - 1], att->atttypid);
	}
	return key;
}

/*
 * ensure_key refuses a row of a sharded table without a key.
 */
static void
ensure_key(FdwInsertState *st, ResultRelInfo *rinfo, const char *key)
{
	if (key == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CD_SHARD_KEY_REQUIRED),
				 errmsg("a row of sharded table \"%s\" needs a key",
						RelationGetRelationName(rinfo->ri_RelationDesc)),
				 errdetail("Column \"%s\" is null.",
						   NameStr(TupleDescAttr(RelationGetDescr(rinfo->ri_RelationDesc),
												 st->table->key_attno - 1)->attname))));
}

/*
 * send_row sends one row where its key belongs, guarded: the path of every
 * row that does not wait in a batch.
 */
static int64
send_row(FdwInsertState *st, const char *key, CdParam *params)
{
	if (st->table->shard)
	{
		const CdShard *shard = ShardLookup(st->table->shard);

		return RemoteExecute(shard, st->sql[shard->dialect], st->ncols, params, NULL, true);
	}
	return RouterExecuteDialects(key, strlen(key), st->sql, st->ncols, params, NULL, true);
}

/*
 * report_progress says, every collegedb.insert_progress, how many rows the
 * statement has sent so far (a NOTICE): for long loads that are not a COPY,
 * which pg_stat_progress_copy shows anyway.
 */
static void
report_progress(FdwInsertState *st)
{
	TimestampTz now;

	if (CollegeInsertProgress <= 0)
		return;
	now = GetCurrentTimestamp();
	if (st->last_report == 0)
		st->last_report = GetCurrentStatementStartTimestamp();
	if (!TimestampDifferenceExceeds(st->last_report, now, CollegeInsertProgress))
		return;
	st->last_report = now;
	ereport(NOTICE,
			(errmsg_plural(INT64_FORMAT " row sent to the shards so far",
						   INT64_FORMAT " rows sent to the shards so far",
						   st->rows_sent, st->rows_sent)));
}

/*
 * insert_sql returns the INSERT of 'nrows' rows in 'dialect': built each
 * time, but kept for the batch size that repeats (a full batch).
 */
static const char *
insert_sql(FdwInsertState *st, int dialect, int nrows)
{
	StringInfoData sql;
	int			n = 0;

	if (st->full_rows[dialect] == nrows)
		return st->full_sql[dialect];
	initStringInfo(&sql);		/* in the caller's row context */
	appendStringInfoString(&sql, st->values_prefix[dialect]);
	for (int i = 0; i < nrows; i++)
	{
		appendStringInfoString(&sql, i ? ", (" : "(");
		for (int c = 0; c < st->ncols; c++)
			appendStringInfo(&sql, "%s$%d", c ? ", " : "", ++n);
		appendStringInfoChar(&sql, ')');
	}
	if (nrows < st->full_rows[dialect])
		return sql.data;		/* a shorter batch (the last one): not kept */
	/* the one it replaces may still be running on a shard: not freed */
	st->full_sql[dialect] = MemoryContextStrdup(st->batch_context, sql.data);
	st->full_rows[dialect] = nrows;
	return st->full_sql[dialect];
}

/*
 * batch_await waits for the INSERT of the shard's batch sent last, and
 * empties the arrays it held.
 */
static void
batch_await(FdwShardBatch *b)
{
	if (b->pending == NULL)
		return;
	(void) RemoteAwait(b->pending);
	b->pending = NULL;
	MemoryContextReset(b->sent_values);
}

/*
 * batch_keep_sent keeps the batch just sent until its answer comes: the
 * arrays of the batch sent before (empty: awaited) take its place.
 */
static void
batch_keep_sent(FdwShardBatch *b)
{
#define SWAP(type, a, c) do { type t_ = (a); (a) = (c); (c) = t_; } while (0)
	SWAP(CdParam *, b->params, b->sent_params);
	SWAP(char **, b->keys, b->sent_keys);
	SWAP(int *, b->key_lens, b->sent_key_lens);
	SWAP(char *, b->kind, b->sent_kind);
	SWAP(MemoryContext, b->values, b->sent_values);
#undef SWAP
}

/*
 * batch_send sends a shard's buffered rows: first the mappings of its new
 * keys, in one statement (a key that got a mapping meanwhile, from a
 * concurrent writer or an earlier row, keeps it, and its row goes there
 * by itself), then the guard of their keys, then one INSERT of every row;
 * or, when a key moved away, each row by itself the guarded way.  The
 * batch is empty afterwards.
 */
static void
batch_send(FdwInsertState *st, FdwShardBatch *b)
{
	MemoryContext old;
	char	   *moved_to = NULL;
	int		   *rows;
	int			nrows = 0;
	int		   *elsewhere;
	int			nelsewhere = 0;

	if (b->nrows == 0)
		return;
	/* one INSERT at a time on the shard's connection */
	batch_await(b);
	old = MemoryContextSwitchTo(st->row_context);
	if (b->nrows == 1 && b->keys)
	{
		/* one row: the guarded write of a single row, one round trip */
		if (b->kind[0] == ROW_KEY_NEW)
		{
			const CdShard *owner;

			RouterSaveNewKeys(1, b->keys, b->key_lens, &b->shard, &owner);
		}
		(void) send_row(st, b->keys[0], b->params);
		goto done;
	}
	rows = palloc(sizeof(int) * b->nrows);
	elsewhere = palloc(sizeof(int) * b->nrows);
	if (b->nnew > 0)
	{
		char	  **keys = palloc(sizeof(char *) * b->nnew * 2);
		int		   *lens = palloc(sizeof(int) * b->nnew * 2);
		const CdShard **picked = palloc(sizeof(CdShard *) * b->nnew);
		const CdShard **owners = palloc(sizeof(CdShard *) * b->nnew * 2);
		int			nn = 0;
		int			nu = 0;

		/* new keys first in the arrays, unchecked ones from b->nnew on */
		for (int r = 0; r < b->nrows; r++)
		{
			int			i;

			if (b->kind[r] == ROW_KEY_KNOWN)
				continue;
			i = b->kind[r] == ROW_KEY_NEW ? nn++ : b->nnew + nu++;
			keys[i] = b->keys[r];
			lens[i] = b->key_lens[r];
			if (b->kind[r] == ROW_KEY_NEW)
				picked[i] = b->shard;
		}
		RouterSaveNewKeys(nn, keys, lens, picked, owners);
		RouterFindExceptions(nu, keys + b->nnew, lens + b->nnew, owners + b->nnew);
		nn = nu = 0;
		for (int r = 0; r < b->nrows; r++)
		{
			const CdShard *owner = b->kind[r] == ROW_KEY_NEW ? owners[nn++] :
				b->kind[r] == ROW_KEY_UNCHECKED ? owners[b->nnew + nu++] : NULL;

			if (owner != NULL && owner != b->shard)
				elsewhere[nelsewhere++] = r;
			else
				rows[nrows++] = r;
		}
	}
	else
	{
		for (int r = 0; r < b->nrows; r++)
			rows[nrows++] = r;
	}

	if (nrows > 0 && b->keys)
	{
		char	  **keys = palloc(sizeof(char *) * nrows);
		int		   *lens = palloc(sizeof(int) * nrows);

		for (int i = 0; i < nrows; i++)
		{
			keys[i] = b->keys[rows[i]];
			lens[i] = b->key_lens[rows[i]];
		}
		moved_to = TombstoneGuardKeys(b->shard, nrows, keys, lens);
	}
	if (nrows > 0 && moved_to == NULL)
	{
		/* what the INSERT uses lives with the batch until its answer */
		MemoryContext row_old = MemoryContextSwitchTo(b->values);
		CdParam    *params = b->params;

		if (nrows < b->nrows)
		{
			params = palloc(sizeof(CdParam) * nrows * st->ncols);
			for (int i = 0; i < nrows; i++)
				memcpy(&params[i * st->ncols], &b->params[rows[i] * st->ncols],
					   sizeof(CdParam) * st->ncols);
		}
		if (RemoteExecutesRows(b->shard))
			(void) RemoteExecuteRows(b->shard, st->sql[b->shard->dialect], nrows,
									 st->ncols, params);
		else if (st->rows_sql[b->shard->dialect] && RemoteSendsRows(b->shard))
			b->pending = RemoteSendRows(b->shard, st->rows_sql[b->shard->dialect], nrows,
										st->ncols, params);
		else
			b->pending = RemoteSend(b->shard, insert_sql(st, b->shard->dialect, nrows),
									nrows * st->ncols, params);
		MemoryContextSwitchTo(row_old);
	}
	else if (nrows > 0)
	{
		/* a key moved away: every row by itself, following its key */
		for (int i = 0; i < nrows; i++)
			elsewhere[nelsewhere++] = rows[i];
	}
	for (int i = 0; i < nelsewhere; i++)
		(void) send_row(st, b->keys[elsewhere[i]], &b->params[elsewhere[i] * st->ncols]);

done:
	MemoryContextSwitchTo(old);
	MemoryContextReset(st->row_context);
	if (b->pending)
		batch_keep_sent(b);
	else
		MemoryContextReset(b->values);
	st->rows_sent += b->nrows;
	report_progress(st);
	b->nrows = 0;
	b->nnew = 0;
	b->bytes = 0;
}

/*
 * shard_batch returns the batch of 'shard', creating it.
 */
static FdwShardBatch *
shard_batch(FdwInsertState *st, const CdShard *shard)
{
	const CdAdapter *adapter;
	FdwShardBatch *b;
	MemoryContext old;

	for (int i = 0; i < st->nbatches; i++)
		if (st->batches[i].shard == shard)
			return &st->batches[i];

	old = MemoryContextSwitchTo(st->batch_context);
	if (st->nbatches == 0)
		st->batches = palloc(sizeof(FdwShardBatch));
	else
		st->batches = repalloc(st->batches, sizeof(FdwShardBatch) * (st->nbatches + 1));
	b = &st->batches[st->nbatches++];
	memset(b, 0, sizeof(*b));
	b->shard = shard;
	adapter = AdapterForDialect(shard->dialect);
	b->max_rows = CollegeInsertBatchRows;
	if (adapter->max_params > 0)
		b->max_rows = Max(1, Min(b->max_rows, adapter->max_params / st->ncols));
	b->params = palloc(sizeof(CdParam) * b->max_rows * st->ncols);
	b->sent_params = palloc(sizeof(CdParam) * b->max_rows * st->ncols);
	if (st->table->shard == NULL)
	{
		b->keys = palloc(sizeof(char *) * b->max_rows);
		b->key_lens = palloc(sizeof(int) * b->max_rows);
		b->kind = palloc(sizeof(char) * b->max_rows);
		b->sent_keys = palloc(sizeof(char *) * b->max_rows);
		b->sent_key_lens = palloc(sizeof(int) * b->max_rows);
		b->sent_kind = palloc(sizeof(char) * b->max_rows);
	}
	b->values = AllocSetContextCreate(st->batch_context, "collegedb insert batch values",
									  ALLOCSET_DEFAULT_SIZES);
	b->sent_values = AllocSetContextCreate(st->batch_context, "collegedb insert batch values",
										   ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(old);
	return b;
}

/*
 * batch_add puts a row in its shard's batch, copying its values into the
 * batch's memory (a value may point into the slot, which the next row
 * reuses), and sends the batch when it is full.
 */
static void
batch_add(FdwInsertState *st, const CdShard *shard, const char *key, char kind,
		  const CdParam *params)
{
	FdwShardBatch *b = shard_batch(st, shard);
	MemoryContext old = MemoryContextSwitchTo(b->values);
	CdParam    *row = &b->params[b->nrows * st->ncols];

	for (int c = 0; c < st->ncols; c++)
	{
		row[c] = params[c];
		if (params[c].str)
		{
			char	   *copy = palloc(params[c].len + 1);

			memcpy(copy, params[c].str, params[c].len);
			copy[params[c].len] = '\0';
			row[c].str = copy;
		}
		b->bytes += params[c].len + sizeof(CdParam);
	}
	if (b->keys)
	{
		b->key_lens[b->nrows] = strlen(key);
		b->keys[b->nrows] = pstrdup(key);
		b->kind[b->nrows] = kind;
		b->nnew += kind != ROW_KEY_KNOWN ? 1 : 0;
		b->bytes += b->key_lens[b->nrows];
	}
	b->nrows++;
	MemoryContextSwitchTo(old);
	if (b->nrows >= b->max_rows || b->bytes >= (Size) CollegeInsertBatchBytes)
		batch_send(st, b);
}

/*
 * insert_row sends one row where its key belongs, or adds it to its
 * shard's batch; see collegedb_exec_insert.  False when the shard skipped
 * the row (ON CONFLICT DO NOTHING).
 */
static bool
insert_row(FdwInsertState *st, ResultRelInfo *rinfo, TupleTableSlot *slot)
{
	CdParam    *params = palloc(sizeof(CdParam) * Max(st->ncols, 1));
	char	   *key = row_params(st, rinfo, slot, params);
	CdRoute		route;
	bool		is_new;
	bool		unchecked;

	if (st->table->shard == NULL)
		ensure_key(st, rinfo, key);
	if (!st->batching)
		return send_row(st, key, params) > 0 || !st->do_nothing;
	if (st->table->shard)
	{
		batch_add(st, ShardLookup(st->table->shard), NULL, ROW_KEY_KNOWN, params);
		return true;
	}

	/*
	 * One shard to go to: the key's mapping, or a new key's placement
	 * (saved with the batch's other new keys before the batch is sent; it
	 * commits or rolls back with the rows), or its one computed owner.  A key with several candidates (under several
	 * epochs, a slot that moves) goes by itself, probing them first.
	 */
	route = RouterResolveBatched(key, strlen(key), &is_new, &unchecked);
	if (route.ncandidates != 1 || (route.source == CD_ROUTE_SLOT && RecoveryInProgress()))
	{
		(void) send_row(st, key, params);
		return true;
	}
	batch_add(st, route.shard, key,
			  is_new ? ROW_KEY_NEW : unchecked ? ROW_KEY_UNCHECKED : ROW_KEY_KNOWN, params);
	return true;
}

/*
 * collegedb_exec_insert inserts one row where its key belongs (a new key
 * is allocated and mapped, as with collegedb.run), or buffers it in its
 * shard's batch, in a memory context reset after the row: its
 * parameters, its routing and its statement leave nothing behind, however
 * many rows an INSERT ... SELECT sends.
 */
TupleTableSlot *
collegedb_exec_insert(EState *estate, ResultRelInfo *rinfo,
					  TupleTableSlot *slot, TupleTableSlot *planSlot)
{
	FdwInsertState *st = rinfo->ri_FdwState;
	MemoryContext old = MemoryContextSwitchTo(st->row_context);
	CdRemoteObserver *previous = NULL;
	bool		inserted;

	if (st->observed.observer)
		previous = RemoteObserve(st->observed.observer);
	inserted = insert_row(st, rinfo, slot);
	if (st->observed.observer)
		(void) RemoteObserve(previous);
	MemoryContextSwitchTo(old);
	MemoryContextReset(st->row_context);
	return inserted ? slot : NULL;
}

/*
 * end_insert sends every batch still waiting, and with 'await' waits for
 * every shard's answer (the shards work on their last batches together).
 */
static void
end_insert(ResultRelInfo *rinfo, bool await)
{
	FdwInsertState *st = rinfo->ri_FdwState;
	CdRemoteObserver *previous = NULL;

	if (st == NULL || st->kind != FDW_MODIFY_INSERT || !st->batching)
		return;
	if (st->observed.observer)
		previous = RemoteObserve(st->observed.observer);
	for (int i = 0; i < st->nbatches; i++)
		batch_send(st, &st->batches[i]);
	for (int i = 0; i < st->nbatches && await; i++)
		batch_await(&st->batches[i]);
	if (st->observed.observer)
		(void) RemoteObserve(previous);
}

/*
 * collegedb_batch_size tells the executor how many rows of an INSERT to
 * hand over at once (ExecForeignBatchInsert): a batch's worth for every
 * shard, so that each call fills the shards' batches about once.  1 where
 * the rows may not wait (batching_allowed).  COPY FROM in PostgreSQL 15
 * still hands rows over one by one (ExecForeignInsert), and its batches go
 * at EndForeignInsert.
 */
int
collegedb_batch_size(ResultRelInfo *rinfo)
{
	FdwInsertState *st = rinfo->ri_FdwState;

	if (st == NULL || !st->batching)
		return 1;
	return Min((int64) CollegeInsertBatchRows * Max(list_length(ShardList()), 1), 100000);
}

/*
 * collegedb_exec_batch_insert inserts the rows the executor gathered, each
 * as collegedb_exec_insert would, and then sends every shard's batch (the
 * executor's last call comes when the plan has no more rows); the answers
 * are awaited at the next call's batches or at the end, except under
 * EXPLAIN ANALYZE, which reports what was sent before the end.
 */
TupleTableSlot **
collegedb_exec_batch_insert(EState *estate, ResultRelInfo *rinfo, TupleTableSlot **slots,
							TupleTableSlot **planSlots, int *numSlots)
{
	FdwInsertState *st = rinfo->ri_FdwState;

	for (int i = 0; i < *numSlots; i++)
		(void) collegedb_exec_insert(estate, rinfo, slots[i], planSlots ? planSlots[i] : NULL);
	end_insert(rinfo, st->observed.observer != NULL);
	return slots;
}

void
collegedb_end_modify(EState *estate, ResultRelInfo *rinfo)
{
	end_insert(rinfo, true);
}

void
collegedb_end_foreign_insert(EState *estate, ResultRelInfo *rinfo)
{
	end_insert(rinfo, true);
}
