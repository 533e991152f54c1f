/*-------------------------------------------------------------------------
 *
 * move_shards.c
 *	  What a move sends to the shards of the key's rows: read, copied in
 *	  batches and deleted.  The key's lock and its tombstones are the
 *	  tombstone protocol's (remote/tombstones.c).
 *
 * Every statement compares the keys byte for byte, whatever the column's
 * collation (TombstoneKeysCondition, the adapter's key_match: MySQL's
 * case-insensitive and PAD SPACE collations would otherwise match 'K' and
 * 'k ' to 'k'), and sends the keys as untyped parameters, so that key
 * columns of any type work.  A batched move sends the keys of its batch
 * in each statement; a one-key move, a batch of one.
 * Statements run inside the shard's open remote transaction (they are all
 * sent as writes), through RemoteExecuteInternal: they are collegedb's
 * own.
 *
 * Rows are copied as they stream from the source: a sink buffers at most
 * MOVE_BATCH_ROWS rows, MOVE_BATCH_PARAMS parameters or MOVE_BATCH_BYTES
 * bytes in a memory context reset after each batch, and sends each batch
 * to the target as one multi-row INSERT, so a key with many rows moves in
 * bounded memory.
 *
 * This file does not decide when any of this happens: moves.c does.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "utils/memutils.h"

#include "catalog/tables.h"
#include "remote/remote.h"
#include "remote/tombstones.h"
#include "router/router.h"
#include "worker/move_shards.h"

/* a batch ends at whichever limit comes first (bench/moves measures them) */
#ifndef MOVE_BATCH_ROWS
#define MOVE_BATCH_ROWS 1000
#endif
#define MOVE_BATCH_PARAMS 999	/* SQLite's historic default limit */
#define MOVE_BATCH_BYTES (1024 * 1024)

/*
 * MoveDeleteKeysRows deletes the rows of 'table' of any of 'nkeys' keys on
 * 'shard', in one statement, and returns how many there were.
 */
int64
MoveDeleteKeysRows(const CdShard *shard, const CdTable *table, int nkeys, char *const *keys)
{
	const CdAdapter *adapter = AdapterForDialect(shard->dialect);
	CdParam    *params = palloc(sizeof(CdParam) * Max(nkeys, 1));
	int			nparams;
	char	   *condition = TombstoneKeysCondition(shard, table->key_column, 1, nkeys, keys,
												   params, &nparams);

	return RemoteExecuteInternal(shard,
								 psprintf("DELETE FROM %s WHERE %s",
										  adapter->quote_ident(table->name), condition),
								 nparams, params, NULL, true);
}

/*
 * MoveDeleteKeyRows deletes the key's rows of 'table' on 'shard' and
 * returns how many there were.
 */
int64
MoveDeleteKeyRows(const CdShard *shard, const CdTable *table, const char *key)
{
	char	   *keys[1] = {(char *) key};

	return MoveDeleteKeysRows(shard, table, 1, keys);
}

/*
 * A sink that writes the rows it receives to the target in batches.
 */
typedef struct BatchSink
{
	CdRowSink	base;
	const CdShard *target;
	const CdTable *table;
	MemoryContext context;		/* the sink's own state */
	MemoryContext batch_context;	/* the rows of one batch, reset per batch */
	int			ncols;
	int			rows_per_batch;
	char	   *prefix;			/* INSERT INTO t (c, ...) VALUES */
	char	   *full_sql;		/* the statement of a full batch */
	CdParam    *params;			/* rows_per_batch * ncols */
	int			nrows;			/* in the current batch */
	Size		bytes;			/* of the current batch's values */
	int64		copied;
} BatchSink;

/*
 * batch_sql builds the INSERT of 'nrows' rows.
 */
static char *
batch_sql(BatchSink *sink, int nrows)
{
	StringInfoData sql;
	int			n = 0;

	initStringInfo(&sql);
	appendStringInfoString(&sql, sink->prefix);
	for (int r = 0; r < nrows; r++)
	{
		appendStringInfoString(&sql, r ? ", (" : "(");
		for (int c = 0; c < sink->ncols; c++)
			appendStringInfo(&sql, "%s$%d", c ? ", " : "", ++n);
		appendStringInfoChar(&sql, ')');
	}
	return sql.data;
}

static void
batch_flush(BatchSink *sink)
{
	MemoryContext old;
	const char *sql;

	if (sink->nrows == 0)
		return;
	old = MemoryContextSwitchTo(sink->batch_context);
	sql = sink->nrows == sink->rows_per_batch ? sink->full_sql : batch_sql(sink, sink->nrows);
	(void) RemoteExecuteInternal(sink->target, sql, sink->nrows * sink->ncols, sink->params,
								 NULL, true);
	MemoryContextSwitchTo(old);
	sink->copied += sink->nrows;
	sink->nrows = 0;
	sink->bytes = 0;
	MemoryContextReset(sink->batch_context);
}

static void
batch_columns(CdRowSink *self, int ncols, const char *const *names)
{
	BatchSink  *sink = (BatchSink *) self;
	const CdAdapter *adapter = AdapterForDialect(sink->target->dialect);
	MemoryContext old = MemoryContextSwitchTo(sink->context);
	StringInfoData prefix;

	sink->ncols = ncols;
	sink->rows_per_batch = Max(1, Min(MOVE_BATCH_ROWS, MOVE_BATCH_PARAMS / Max(ncols, 1)));
	initStringInfo(&prefix);
	appendStringInfo(&prefix, "INSERT INTO %s (", adapter->quote_ident(sink->table->name));
	for (int i = 0; i < ncols; i++)
		appendStringInfo(&prefix, "%s%s", i ? ", " : "", adapter->quote_ident(names[i]));
	appendStringInfoString(&prefix, ") VALUES ");
	sink->prefix = prefix.data;
	sink->full_sql = batch_sql(sink, sink->rows_per_batch);
	sink->params = palloc0(sizeof(CdParam) * sink->rows_per_batch * Max(ncols, 1));
	MemoryContextSwitchTo(old);
}

static void
batch_row(CdRowSink *self, int ncols, const CdCell *cells)
{
	BatchSink  *sink = (BatchSink *) self;
	MemoryContext old;
	CdParam    *row;

	if (ncols != sink->ncols || ncols == 0)
		elog(ERROR, "a row of %d columns after a description of %d", ncols, sink->ncols);
	old = MemoryContextSwitchTo(sink->batch_context);
	row = &sink->params[sink->nrows * ncols];
	for (int i = 0; i < ncols; i++)
	{
		ValuesCellToParam(&cells[i], &row[i]);
		sink->bytes += cells[i].isnull ? 1 : cells[i].len;
	}
	MemoryContextSwitchTo(old);
	sink->nrows++;
	if (sink->nrows == sink->rows_per_batch || sink->bytes >= MOVE_BATCH_BYTES)
		batch_flush(sink);
}

/*
 * MoveCopyKeysRows streams the rows of 'table' of any of 'nkeys' keys from
 * the source into the target (one read on the source, multi-row INSERTs
 * on the target), in both shards' open transactions, and returns how many
 * it copied.  The target must hold none of the keys' rows already.  The
 * read takes the source dialect's copy_lock_clause: it waits for a writer
 * whose transaction is prepared (the key's lock alone may not hold it off,
 * see adapter.h) and copies what that writer committed.
 */
int64
MoveCopyKeysRows(const CdShard *source, const CdShard *target, const CdTable *table,
				 int nkeys, char *const *keys)
{
	const CdAdapter *adapter = AdapterForDialect(source->dialect);
	CdParam    *params = palloc(sizeof(CdParam) * Max(nkeys, 1));
	int			nparams;
	char	   *condition = TombstoneKeysCondition(source, table->key_column, 1, nkeys, keys,
												   params, &nparams);
	BatchSink	sink;
	int64		copied;

	memset(&sink, 0, sizeof(sink));
	sink.base.columns = batch_columns;
	sink.base.row = batch_row;
	sink.target = target;
	sink.table = table;
	sink.context = AllocSetContextCreate(CurrentMemoryContext, "collegedb move copy",
										 ALLOCSET_DEFAULT_SIZES);
	sink.batch_context = AllocSetContextCreate(sink.context, "collegedb move batch",
											   ALLOCSET_DEFAULT_SIZES);
	(void) RemoteExecuteInternal(source,
								 psprintf("SELECT * FROM %s WHERE %s%s",
										  adapter->quote_ident(table->name), condition,
										  adapter->copy_lock_clause ? adapter->copy_lock_clause : ""),
								 nparams, params, &sink.base, true);
	batch_flush(&sink);
	copied = sink.copied;
	MemoryContextDelete(sink.context);
	return copied;
}

/*
 * MoveCopyKeyRows streams the key's rows of 'table' from the source into
 * the target (MoveCopyKeysRows of the one key).
 */
int64
MoveCopyKeyRows(const CdShard *source, const CdShard *target, const CdTable *table,
				const char *key)
{
	char	   *keys[1] = {(char *) key};

	return MoveCopyKeysRows(source, target, table, 1, keys);
}
