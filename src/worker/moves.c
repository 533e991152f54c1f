/*-------------------------------------------------------------------------
 *
 * moves.c
 *	  The journaled move of one key from one shard to another (DESIGN.md
 *	  6), run by background workers, each step committed before the next.
 *
 *	  journaled    the move is recorded, with a lease naming its worker
 *	  copied       the key's rows of every registered table are on the
 *	               target (replacing whatever the target had for the key,
 *	               so a retry never duplicates)
 *	  source_done  in one source transaction holding the key's lock (the
 *	               one guarded writers take): the rows are read again and
 *	               copied again (rows that arrived meanwhile), the target
 *	               commits, then the tombstones are written and exactly
 *	               those rows deleted
 *	  mapped       the front maps the key (and its lookup keys) to the
 *	               target, or records an exception under computed placement
 *	  done
 *
 * Each step is idempotent, so after a crash at any point the coordinator
 * resumes the move from the journaled step: a source step that had
 * committed is recognised by its tombstone.  The key is readable at every
 * instant: from the source until its tombstone commits, then through the
 * tombstone, then through the mapping.
 *
 * What this file does not do: choose keys or targets (jobs.c), decide
 * which worker runs a move (coordinator.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "catalog/catalog.h"
#include "catalog/tables.h"
#include "cd_errcodes.h"
#include "remote/remote.h"
#include "router/router.h"
#include "worker/worker.h"

/* a mover's lease on a move; renewed at every step */
#define MOVE_LEASE "30 seconds"

/*
 * WorkerBegin starts a transaction for one unit of a worker's work, with a
 * snapshot and SPI.
 */
void
WorkerBegin(void)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
}

/*
 * WorkerCommit commits it; the shards' remote transactions commit first.
 */
void
WorkerCommit(void)
{
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
}

/*
 * WorkerExec runs one catalog statement with the catalog owner's rights
 * (the job's owner holds none on the tables: see catalog/catalog.c).
 */
uint64
WorkerExec(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls)
{
	CdCatalogAccess access;
	int			rc;

	CatalogAccessBegin(&access);
	rc = SPI_execute_with_args(sql, nargs, types, values, nulls, false, 0);
	if (rc < 0)
		elog(ERROR, "SPI_execute_with_args failed: %s", SPI_result_code_string(rc));
	CatalogAccessEnd(&access);
	return SPI_processed;
}

/*
 * WorkerCatchError, in a PG_CATCH block, takes the error into 'context',
 * clears it and aborts the transaction, so that the caller can record the
 * error in a new one.
 */
ErrorData *
WorkerCatchError(MemoryContext context)
{
	ErrorData  *edata;

	MemoryContextSwitchTo(context);
	edata = CopyErrorData();
	FlushErrorState();
	AbortCurrentTransaction();
	return edata;
}

static char *
spi_text(int row, int col)
{
	return SPI_getvalue(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col);
}

typedef struct MoveRow
{
	int64		id;
	char	   *key;
	const CdShard *source;
	const CdShard *target;
	char	   *step;
} MoveRow;

/*
 * load_move reads a move's row (in the current transaction, in the
 * caller's memory context).
 */
static MoveRow
load_move(int64 move_id)
{
	MemoryContext caller = CurrentMemoryContext;
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(move_id)};
	MoveRow		m;
	MemoryContext old;

	if (WorkerExec("SELECT key, source, target, step FROM collegedb.move WHERE id = $1",
				 1, types, values, NULL) != 1)
		elog(ERROR, "move %ld does not exist", (long) move_id);
	old = MemoryContextSwitchTo(caller);
	m.id = move_id;
	m.key = spi_text(0, 1);
	m.source = ShardLookup(spi_text(0, 2));
	m.target = ShardLookup(spi_text(0, 3));
	m.step = spi_text(0, 4);
	MemoryContextSwitchTo(old);
	return m;
}

/*
 * set_step records the step a move reached and renews the lease.
 */
static void
set_step(int64 move_id, const char *step, const char *rows)
{
	Oid			types[3] = {INT8OID, TEXTOID, JSONBOID};
	Datum		values[3];
	char		nulls[4] = "   ";

	values[0] = Int64GetDatum(move_id);
	values[1] = CStringGetTextDatum(step);
	values[2] = rows ? DirectFunctionCall1(jsonb_in, CStringGetDatum(rows)) : (Datum) 0;
	nulls[2] = rows ? ' ' : 'n';
	WorkerExec("UPDATE collegedb.move SET step = $2, rows = coalesce($3, rows), error = NULL, "
			 "lease_pid = pg_backend_pid(), lease_until = now() + interval '" MOVE_LEASE "', "
			 "updated_at = now() WHERE id = $1",
			 3, types, values, nulls);
}

static CdParam
text_param(const char *s)
{
	CdParam		p;

	memset(&p, 0, sizeof(p));
	p.kind = CD_VALUE_TEXT;
	p.typid = TEXTOID;
	p.str = s;
	p.len = strlen(s);
	return p;
}

/*
 * read_rows returns the key's rows of one table on a shard, as parameters
 * ready to be inserted elsewhere; 'is_write' keeps the read inside the
 * shard's open (locked) transaction.
 */
static CaptureRowSink *
read_rows(const CdShard *shard, const CdTable *table, const char *key, bool is_write)
{
	const CdAdapter *adapter = AdapterForDialect(shard->dialect);
	CaptureRowSink *rows = palloc(sizeof(CaptureRowSink));
	CdParam		kp = text_param(key);

	CaptureRowSinkInit(rows);
	(void) RemoteExecuteInternal(shard,
						 psprintf("SELECT * FROM %s WHERE %s = $1",
								  adapter->quote_ident(table->name),
								  adapter->quote_ident(table->key_column)),
						 1, &kp, &rows->base, is_write);
	return rows;
}

/*
 * replace_rows makes the target hold exactly 'rows' for the key in one
 * table, and no tombstone for the key: the key lives here now.
 */
static void
replace_rows(const CdShard *target, const CdTable *table, const char *key,
			 CaptureRowSink *rows)
{
	const CdAdapter *adapter = AdapterForDialect(target->dialect);
	CdParam		kp = text_param(key);
	StringInfoData insert;
	ListCell   *lc;

	(void) RemoteExecuteInternal(target,
						 psprintf("DELETE FROM %s WHERE %s = $1",
								  adapter->quote_ident(table->name),
								  adapter->quote_ident(table->key_column)),
						 1, &kp, NULL, true);
	(void) RemoteExecuteInternal(target, "DELETE FROM collegedb_tombstones WHERE shard_key = $1",
						 1, &kp, NULL, true);
	if (rows->rows == NIL)
		return;

	initStringInfo(&insert);
	appendStringInfo(&insert, "INSERT INTO %s (", adapter->quote_ident(table->name));
	for (int i = 0; i < rows->ncols; i++)
		appendStringInfo(&insert, "%s%s", i ? ", " : "", adapter->quote_ident(rows->names[i]));
	appendStringInfoString(&insert, ") VALUES (");
	for (int i = 0; i < rows->ncols; i++)
		appendStringInfo(&insert, "%s$%d", i ? ", " : "", i + 1);
	appendStringInfoChar(&insert, ')');
	foreach(lc, rows->rows)
		(void) RemoteExecuteInternal(target, insert.data, rows->ncols, lfirst(lc), NULL, true);
}

/*
 * row_counts renders {"table": rows, ...}.
 */
static char *
row_counts(List *tables, CaptureRowSink **rows)
{
	StringInfoData buf;
	int			i = 0;
	ListCell   *lc;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	foreach(lc, tables)
	{
		CdTable    *table = lfirst(lc);

		if (i)
			appendStringInfoString(&buf, ", ");
		escape_json(&buf, table->name);
		appendStringInfo(&buf, ": %d", list_length(rows[i]->rows));
		i++;
	}
	appendStringInfoChar(&buf, '}');
	return buf.data;
}

static List *
tables_to_move(void)
{
	List	   *tables = RegisteredTables();

	if (tables == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("no table is registered, so there are no rows to move"),
				 errhint("Register the tables that hold keys with collegedb.register_table().")));
	return tables;
}

/*
 * step_copy copies the key's rows of every registered table to the target
 * (committed with the journal).
 */
static void
step_copy(MoveRow *m)
{
	char	   *source = pstrdup(m->source->name);
	char	   *target = pstrdup(m->target->name);
	const char *now = MoveSourceOf(m->key)->name;
	List	   *tables;
	CaptureRowSink **rows;
	int			i = 0;
	ListCell   *lc;

	/*
	 * The key may have moved since the move was planned (a rebalance plans
	 * all its keys first): copying from the planned source would copy
	 * nothing and then wipe the key's rows.  Already at the target: done;
	 * elsewhere: the move fails, with nothing changed.
	 */
	if (strcmp(now, source) != 0)
	{
		Oid			types[2] = {INT8OID, TEXTOID};
		Datum		values[2];

		values[0] = Int64GetDatum(m->id);
		values[1] = CStringGetTextDatum(strcmp(now, target) == 0 ? "" :
										psprintf("key \"%s\" is on shard \"%s\" now, not on \"%s\"; nothing was moved",
												 m->key, now, source));
		WorkerExec("UPDATE collegedb.move SET step = CASE WHEN $2 = '' THEN 'done' ELSE 'failed' END, "
				 "error = nullif($2, ''), rows = '{}', lease_until = NULL, updated_at = now() "
				 "WHERE id = $1", 2, types, values, NULL);
		return;
	}

	/* the shard cache may have been rebuilt meanwhile */
	m->source = ShardLookup(source);
	m->target = ShardLookup(target);
	tables = tables_to_move();
	rows = palloc(sizeof(CaptureRowSink *) * list_length(tables));
	foreach(lc, tables)
	{
		rows[i] = read_rows(m->source, lfirst(lc), m->key, false);
		replace_rows(m->target, lfirst(lc), m->key, rows[i]);
		i++;
	}
	set_step(m->id, "copied", row_counts(tables, rows));
}

/*
 * step_source takes the key's lock on the source, copies again what is
 * there now, commits the target, then writes the tombstones and deletes
 * exactly those rows on the source (committed with the journal).  A
 * source step that committed before a crash is recognised by its
 * tombstone.
 */
static void
step_source(MoveRow *m)
{
	const CdAdapter *adapter = AdapterForDialect(m->source->dialect);
	char	   *moved_to = RemoteTombstone(m->source, m->key, strlen(m->key));
	List	   *tables;
	CaptureRowSink **rows;
	CdParam		kp = text_param(m->key);
	int			i = 0;
	ListCell   *lc;

	if (moved_to != NULL && strcmp(moved_to, m->target->name) == 0)
	{
		set_step(m->id, "source_done", NULL);
		return;
	}

	tables = tables_to_move();
	rows = palloc(sizeof(CaptureRowSink *) * list_length(tables));

	/*
	 * Lock both shards in name order, so that movers crossing each other
	 * (one from a to b, one from b to a) cannot wait for each other: SQLite
	 * takes its write lock at the target's first write.
	 */
	if (strcmp(m->target->name, m->source->name) < 0)
		(void) RemoteExecuteInternal(m->target, "DELETE FROM collegedb_tombstones WHERE shard_key = $1",
							 1, &kp, NULL, true);
	(void) RemoteExecuteInternal(m->source, adapter->lock_key_sql, 1, &kp, NULL, true);
	foreach(lc, tables)
	{
		rows[i] = read_rows(m->source, lfirst(lc), m->key, true);
		replace_rows(m->target, lfirst(lc), m->key, rows[i]);
		i++;
	}
	RemoteCommitNow(m->target);

	(void) RemoteExecuteInternal(m->source, "DELETE FROM collegedb_tombstones WHERE shard_key = $1",
						 1, &kp, NULL, true);
	foreach(lc, tables)
	{
		CdTable    *table = lfirst(lc);
		CdParam		tp[4];

		tp[0] = text_param(table->name);
		tp[1] = kp;
		tp[2] = text_param(m->target->name);
		tp[3] = text_param(psprintf(INT64_FORMAT, m->id));
		tp[3].kind = CD_VALUE_INT;
		tp[3].ival = m->id;
		tp[3].typid = INT8OID;
		(void) RemoteExecuteInternal(m->source,
							 "INSERT INTO collegedb_tombstones (table_name, shard_key, moved_to, move_id) "
							 "VALUES ($1, $2, $3, $4)", 4, tp, NULL, true);
		(void) RemoteExecuteInternal(m->source,
							 psprintf("DELETE FROM %s WHERE %s = $1",
									  adapter->quote_ident(table->name),
									  adapter->quote_ident(table->key_column)),
							 1, &kp, NULL, true);
	}
	set_step(m->id, "source_done", row_counts(tables, rows));
}

/*
 * step_map points the key (and every lookup key of its record) at the
 * target; a key without a mapping gets one (under computed placement: an
 * exception).
 */
static void
step_map(MoveRow *m)
{
	Oid			types[2] = {TEXTOID, TEXTOID};
	Datum		values[2];

	values[0] = CStringGetTextDatum(RouterStoredKey(m->key, strlen(m->key)));
	values[1] = CStringGetTextDatum(m->target->name);
	if (WorkerExec("UPDATE collegedb.mapping SET shard = $2 WHERE record = "
				 "(SELECT record FROM collegedb.mapping WHERE key = $1)",
				 2, types, values, NULL) == 0)
		WorkerExec("INSERT INTO collegedb.mapping (key, record, shard) VALUES ($1, $1, $2) "
				 "ON CONFLICT (key) DO UPDATE SET shard = EXCLUDED.shard",
				 2, types, values, NULL);
	set_step(m->id, "mapped", NULL);
}

/*
 * pause_for_tests stops a mover after a step, when the test-only setting
 * collegedb.test_pause_after_step names it, until the worker is killed.
 */
static void
pause_for_tests(int64 move_id, const char *step)
{
	if (CollegeTestPauseAfterStep == NULL || strcmp(CollegeTestPauseAfterStep, step) != 0)
		return;
	elog(LOG, "collegedb: move %ld paused after step %s", (long) move_id, step);
	for (;;)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 1000, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * MoveStart journals a move of 'key' (in the caller's transaction) and
 * returns its id.  A move of the key that is still active is adopted when
 * its worker is gone, else MOVE_IN_PROGRESS.
 */
int64
MoveStart(int64 job_id, const char *key, const char *source, const char *target)
{
	Oid			types[4] = {INT8OID, TEXTOID, TEXTOID, TEXTOID};
	Datum		values[4];
	char		nulls[5] = "    ";
	bool		isnull;

	values[0] = Int64GetDatum(job_id);
	nulls[0] = job_id > 0 ? ' ' : 'n';
	values[1] = CStringGetTextDatum(key);
	values[2] = CStringGetTextDatum(source);
	values[3] = CStringGetTextDatum(target);

	if (WorkerExec("SELECT id, lease_until > now() AND EXISTS "
				 "(SELECT 1 FROM pg_stat_activity a WHERE a.pid = m.lease_pid) "
				 "FROM collegedb.move m WHERE key = $2 AND step NOT IN ('done', 'failed') "
				 "FOR UPDATE", 4, types, values, nulls) > 0)
	{
		int64		id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
		bool		alive = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));

		if (alive && !isnull)
			ereport(ERROR,
					(errcode(ERRCODE_CD_MOVE_IN_PROGRESS),
					 errmsg("key \"%s\" is already being moved", key),
					 errdetail("Move %ld is running.", (long) id)));
		/* an interrupted move of the key: finish it rather than start anew */
		values[0] = Int64GetDatum(id);
		WorkerExec("UPDATE collegedb.move SET lease_pid = pg_backend_pid(), "
				 "lease_until = now() + interval '" MOVE_LEASE "' WHERE id = $1",
				 1, types, values, NULL);
		return id;
	}

	/* a mover that got here first, between the check above and now */
	if (WorkerExec("INSERT INTO collegedb.move (job_id, key, source, target, lease_pid, lease_until) "
				 "VALUES ($1, $2, $3, $4, pg_backend_pid(), now() + interval '" MOVE_LEASE "') "
				 "ON CONFLICT (key) WHERE step NOT IN ('done', 'failed') DO NOTHING "
				 "RETURNING id", 4, types, values, nulls) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_CD_MOVE_IN_PROGRESS),
				 errmsg("key \"%s\" is already being moved", key)));
	return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

/* how many times a step that hit a deadlock on a shard is tried */
#define MOVE_ATTEMPTS 4

static char *move_steps(int64 move_id);

/*
 * MoveRun carries a journaled move through its remaining steps, one
 * transaction each.  Must be called outside a transaction; errors go to
 * the caller with the move left at the last committed step.
 */
void
MoveRun(int64 move_id)
{
	MemoryContext caller = CurrentMemoryContext;
	char	   *failure = NULL;

	for (int attempt = 1;; attempt++)
	{
		ErrorData  *edata = NULL;
		Oid			types[2] = {INT8OID, TEXTOID};
		Datum		values[2];

		PG_TRY();
		{
			failure = move_steps(move_id);
		}
		PG_CATCH();
		{
			edata = WorkerCatchError(caller);
		}
		PG_END_TRY();
		if (edata == NULL)
			break;

		/*
		 * A deadlock or serialization failure on a shard (InnoDB's gap
		 * locks between movers): the step starts again from the last
		 * committed one, a few times.
		 */
		if ((edata->sqlerrcode == ERRCODE_T_R_SERIALIZATION_FAILURE ||
			 edata->sqlerrcode == ERRCODE_T_R_DEADLOCK_DETECTED) && attempt < MOVE_ATTEMPTS)
		{
			elog(LOG, "collegedb: move %ld retries after: %s", (long) move_id, edata->message);
			pg_usleep(50000L * attempt);
			continue;
		}

		/*
		 * Record why, and give up the lease at once, so that the move can
		 * be retried without waiting for it to expire; the move stays at
		 * its last committed step.
		 */
		WorkerBegin();
		values[0] = Int64GetDatum(move_id);
		values[1] = CStringGetTextDatum(edata->message);
		WorkerExec("UPDATE collegedb.move SET error = $2, lease_until = now() "
				 "WHERE id = $1 AND step NOT IN ('done', 'failed')", 2, types, values, NULL);
		WorkerCommit();
		MemoryContextSwitchTo(caller);
		ReThrowError(edata);
	}
	if (failure)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s", failure)));
}

/*
 * move_steps runs the steps of MoveRun; returns the error of a move that
 * ended failed, else NULL.
 */
static char *
move_steps(int64 move_id)
{
	MemoryContext context = AllocSetContextCreate(CurrentMemoryContext,
												  "collegedb move",
												  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(context);
	char	   *failure = NULL;

	for (;;)
	{
		MoveRow		m;
		char	   *done_step;

		WorkerBegin();
		m = load_move(move_id);
		pgstat_report_activity(STATE_RUNNING, psprintf("collegedb move %ld: %s", (long) move_id, m.step));
		if (strcmp(m.step, "journaled") == 0)
			step_copy(&m), done_step = "copied";
		else if (strcmp(m.step, "copied") == 0)
			step_source(&m), done_step = "source_done";
		else if (strcmp(m.step, "source_done") == 0)
			step_map(&m), done_step = "mapped";
		else if (strcmp(m.step, "mapped") == 0)
		{
			Oid			types[1] = {INT8OID};
			Datum		values[1] = {Int64GetDatum(move_id)};

			WorkerExec("UPDATE collegedb.move SET step = 'done', lease_until = NULL, "
					 "updated_at = now() WHERE id = $1", 1, types, values, NULL);
			done_step = "done";
		}
		else
		{
			if (strcmp(m.step, "failed") == 0)
			{
				Oid			types[1] = {INT8OID};
				Datum		values[1] = {Int64GetDatum(move_id)};

				WorkerExec("SELECT error FROM collegedb.move WHERE id = $1", 1, types, values, NULL);
				failure = spi_text(0, 1);
				failure = MemoryContextStrdup(old, failure ? failure : "the move failed");
			}
			WorkerCommit();
			break;
		}
		WorkerCommit();
		pgstat_report_activity(STATE_IDLE, NULL);
		pause_for_tests(move_id, done_step);
		MemoryContextReset(context);
		if (strcmp(done_step, "done") == 0)
			break;
	}
	MemoryContextSwitchTo(old);
	MemoryContextDelete(context);
	return failure;
}
