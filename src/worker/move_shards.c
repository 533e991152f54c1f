/*-------------------------------------------------------------------------
 *
 * move_shards.c
 *	  What a move sends to the shards of the key's rows: read, copied in
 *	  batches and deleted.  The key's lock and its tombstones are the
 *	  tombstone protocol's (remote/tombstones.c).
 *
 * Every statement compares the key byte for byte, whatever the column's
 * collation (the adapter's key_match: MySQL's case-insensitive and PAD
 * SPACE collations would otherwise match 'K' and 'k ' to 'k'), and sends
 * the key as an untyped parameter, so that key columns of any type work.
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
#include "router/router.h"
#include "worker/move_shards.h"

/* a batch ends at whichever limit comes first (bench/moves measures them) */
#ifndef MOVE_BATCH_ROWS
#define MOVE_BATCH_ROWS 1000
#endif
#define MOVE_BATCH_PARAMS 999	/* SQLite's historic default limit */
#define MOVE_BATCH_BYTES (1024 * 1024)

/* the key as an untyped parameter: the shard takes it as the column's type */
static CdParam
key_param(const char *key)
{
	CdParam		p;

	memset(&p, 0, sizeof(p));
	p.kind = CD_VALUE_TEXT;
	p.typid = InvalidOid;
	p.str = key;
	p.len = strlen(key);
	return p;
}

/*
 * key_condition is the byte-for-byte comparison of 'column' (unquoted)
 * with parameter $n on 'shard'.
 */
static char *
key_condition(const CdShard *shard, const char *column, int n)
{
	return AdapterKeyMatch(AdapterForDialect(shard->dialect), column, n);
}

/*
 * MoveDeleteKeyRows deletes the key's rows of 'table' on 'shard' and
 * returns how many there were.
 */
int64
MoveDeleteKeyRows(const CdShard *shard, const CdTable *table, const char *key)
{
	const CdAdapter *adapter = AdapterForDialect(shard->dialect);
	CdParam		kp = key_param(key);

	return RemoteExecuteInternal(shard,
								 psprintf("DELETE FROM %s WHERE %s",
										  adapter->quote_ident(table->name),
										  key_condition(shard, table->key_column, 1)),
								 1, &kp, NULL, true);
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
 * MoveCopyKeyRows streams the key's rows of 'table' from the source into
 * the target, in both shards' open transactions, and returns how many it
 * copied.  The target must hold none of the key's rows already.  The read
 * takes the source dialect's copy_lock_clause: it waits for a writer whose
 * transaction is prepared (the key's lock alone may not hold it off, see
 * adapter.h) and copies what that writer committed.
 */
int64
MoveCopyKeyRows(const CdShard *source, const CdShard *target, const CdTable *table,
				const char *key)
{
	const CdAdapter *adapter = AdapterForDialect(source->dialect);
	CdParam		kp = key_param(key);
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
										  adapter->quote_ident(table->name),
										  key_condition(source, table->key_column, 1),
										  adapter->copy_lock_clause ? adapter->copy_lock_clause : ""),
								 1, &kp, &sink.base, true);
	batch_flush(&sink);
	copied = sink.copied;
	MemoryContextDelete(sink.context);
	return copied;
}
