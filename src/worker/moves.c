/*-------------------------------------------------------------------------
 *
 * moves.c
 *	  The journaled move of one key from one shard to another (DESIGN.md
 *	  6), run by background workers, each step committed before the next.
 *
 *	  journaled    the move is recorded, held by the process that runs it
 *	  copied       validated: the source still holds the key, the key fits
 *	               both shards' tombstones, the target is reachable and
 *	               holds none of the key's rows.  Nothing of the key is
 *	               visible on the target yet.
 *	  source_done  in one source transaction holding the key's lock (the
 *	               one guarded writers take): the source is checked for
 *	               the key's tombstone again, the key's rows stream to the
 *	               target in batches (the target's stale rows and tombstone
 *	               of the key go in the same target transaction), the
 *	               target commits, then the tombstones are written and the
 *	               rows deleted, each DELETE removing exactly as many rows
 *	               as were copied (otherwise the step fails and the source
 *	               keeps everything)
 *	  mapped       the front maps the key (and its lookup keys) to the
 *	               target, or records an exception under computed placement
 *	  done
 *
 * Ownership.  A move is held by one process at a time: the one whose pid
 * and start time are in lease_pid / lease_backend_start.  A process takes
 * a move (MoveStart, MoveTake) only when its holder is no longer alive, and
 * taking it bumps the move's generation.  Every step's front transaction
 * first locks the move's row with the generation it took (no row: the move
 * changed hands, and the step stops having changed nothing) and keeps that
 * lock to its commit, and the shards' remote transactions commit in the
 * front's pre-commit, while the lock is held: an attempt that lost the
 * move can apply none of its effects.  The lease (lease_until) is renewed
 * at every step for the views, and never decides anything: a step that
 * waits a long time for the key's lock, or copies many rows, keeps its
 * move.  To hand a stuck move over, terminate its worker.
 *
 * Failures.  A step that meets a deadlock or a serialization failure on a
 * shard is tried again at once (a few times).  Any other failure is
 * recorded with its error and the move is retried later by the
 * coordinator, after 1 s, 2 s, 4 s, ... (at most 5 minutes, with jitter),
 * up to collegedb.move_max_attempts attempts.  A move that gives up before
 * source_done has the target's partial copy of the key removed, once the
 * source shows (under the key's lock) that it still owns the key, and ends
 * failed; until that clean-up has happened it stays "abandoned" in its
 * step.  A move at source_done or later is never failed: it can only roll
 * forward, and is retried until it can.
 *
 * Each step is idempotent, so after a crash at any point the move resumes
 * from its journaled step: a source step that had committed is recognised
 * by its tombstone.  The key is readable at every instant: from the source
 * until its tombstone commits, then through the tombstone, then through
 * the mapping.
 *
 * What this file does not do: choose keys or targets (jobs.c), decide
 * which worker runs a move (coordinator.c), build the shards' statements
 * (move_shards.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "catalog/catalog.h"
#include "catalog/tables.h"
#include "cd_errcodes.h"
#include "remote/remote.h"
#include "router/router.h"
#include "worker/worker.h"

int			CollegeMoveLease = 30;
int			CollegeMoveMaxAttempts = 8;
char	   *CollegeTestPauseAfterStep = NULL;
char	   *CollegeTestPauseInStep = NULL;

/* how many times a step that hit a deadlock on a shard is tried at once */
#define MOVE_DEADLOCK_ATTEMPTS 4

/*
 * Whether the holder of move row "m" is alive: its process, started when
 * it took the move, is still there.
 */
#define HOLDER_ALIVE \
	"EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity a WHERE a.pid = m.lease_pid " \
	"AND (m.lease_backend_start IS NULL OR a.backend_start = m.lease_backend_start))"

/* the delay before retry number attempts + 1 */
#define RETRY_DELAY WORKER_RETRY_DELAY("m.attempts")

/*
 * WorkerBegin starts a transaction for one unit of a worker's work, with a
 * snapshot and SPI.  It first takes a share lock on the extension itself,
 * which DROP EXTENSION locks before anything else: a worker and a DROP
 * EXTENSION then wait for each other's transaction instead of deadlocking
 * on the catalog tables, which they would lock in different orders.
 */
void
WorkerBegin(void)
{
	Oid			extension;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	extension = get_extension_oid("collegedb", true);
	if (OidIsValid(extension))
		LockDatabaseObject(ExtensionRelationId, extension, 0, AccessShareLock);
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

static Datum
spi_datum(int row, int col, bool *isnull)
{
	return SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col, isnull);
}

typedef struct MoveRow
{
	int64		id;
	int64		generation;
	int64		job_id;			/* 0: none */
	char	   *key;			/* the stored form */
	char	   *raw_key;		/* the key itself */
	const CdShard *source;
	const CdShard *target;
	char	   *step;
	bool		abandoned;
} MoveRow;

/*
 * load_move locks a move's row, if this attempt still holds the move (its
 * generation), and reads it into the caller's memory context; false when
 * the move has changed hands.
 */
static bool
load_move(int64 move_id, int64 generation, MoveRow *m)
{
	MemoryContext caller = CurrentMemoryContext;
	Oid			types[2] = {INT8OID, INT8OID};
	Datum		values[2] = {Int64GetDatum(move_id), Int64GetDatum(generation)};
	MemoryContext old;
	bool		isnull;

	if (WorkerExec("SELECT key, raw_key, source, target, step, coalesce(job_id, 0), abandoned "
				   "FROM collegedb.move WHERE id = $1 AND generation = $2 FOR UPDATE",
				   2, types, values, NULL) != 1)
		return false;
	old = MemoryContextSwitchTo(caller);
	m->id = move_id;
	m->generation = generation;
	m->key = spi_text(0, 1);
	m->raw_key = spi_text(0, 2);
	m->step = spi_text(0, 5);
	m->job_id = DatumGetInt64(spi_datum(0, 6, &isnull));
	m->abandoned = DatumGetBool(spi_datum(0, 7, &isnull));
	if (m->raw_key == NULL && strcmp(m->step, "done") != 0 && strcmp(m->step, "failed") != 0)
		elog(ERROR, "move %ld has lost its key", (long) move_id);
	/* shards are looked up only where a step needs them: one may be gone */
	m->source = strcmp(m->step, "done") == 0 || strcmp(m->step, "failed") == 0 ? NULL :
		ShardLookup(spi_text(0, 3));
	m->target = m->source ? ShardLookup(spi_text(0, 4)) : NULL;
	MemoryContextSwitchTo(old);
	return true;
}

/*
 * journal runs an UPDATE of the move's own row, as the attempt that holds
 * it ($1 = id, $2 = generation, then 'nargs' more).
 */
static void
journal(const MoveRow *m, const char *set, int nargs, Oid *types, Datum *values,
		const char *nulls)
{
	Oid			t[8] = {INT8OID, INT8OID};
	Datum		v[8] = {Int64GetDatum(m->id), Int64GetDatum(m->generation)};
	char		n[9] = "        ";

	for (int i = 0; i < nargs; i++)
	{
		t[i + 2] = types[i];
		v[i + 2] = values[i];
		n[i + 2] = nulls ? nulls[i] : ' ';
	}
	if (WorkerExec(psprintf("UPDATE collegedb.move m SET %s, updated_at = now() "
							"WHERE id = $1 AND generation = $2", set),
				   nargs + 2, t, v, n) != 1)
		elog(ERROR, "move %ld changed hands while its row was locked", (long) m->id);
}

/*
 * set_step records the step a move reached and renews its lease.
 */
static void
set_step(const MoveRow *m, const char *step, const char *rows)
{
	Oid			types[3] = {TEXTOID, JSONBOID, INT4OID};
	Datum		values[3];
	char		nulls[3] = "   ";

	values[0] = CStringGetTextDatum(step);
	values[1] = rows ? DirectFunctionCall1(jsonb_in, CStringGetDatum(rows)) : (Datum) 0;
	nulls[1] = rows ? ' ' : 'n';
	values[2] = Int32GetDatum(CollegeMoveLease);
	journal(m, "step = $3, rows = coalesce($4, rows), error = NULL, abandoned = false, "
			"lease_until = now() + $5 * interval '1 second'", 3, types, values, nulls);
}

/*
 * settle_job_key makes the move's key in its job say how the move ended,
 * also when that was decided after the job had recorded an earlier try.
 */
static void
settle_job_key(const MoveRow *m, bool moved)
{
	Oid			types[3] = {INT8OID, TEXTOID, INT8OID};
	Datum		values[3];

	if (m->job_id <= 0)
		return;
	values[0] = Int64GetDatum(m->job_id);
	values[1] = CStringGetTextDatum(m->key);
	values[2] = Int64GetDatum(m->id);
	WorkerExec(moved ?
			   "UPDATE collegedb.job_key SET state = 'moved', error = NULL, raw_key = NULL "
			   "WHERE job_id = $1 AND key = $2" :
			   "UPDATE collegedb.job_key SET state = 'failed', raw_key = NULL, "
			   "error = (SELECT error FROM collegedb.move WHERE id = $3) "
			   "WHERE job_id = $1 AND key = $2 AND state <> 'moved'",
			   3, types, values, NULL);
}

/*
 * end_move ends a move: done, or failed with 'error' (NULL: the error the
 * journal has).  The key itself is forgotten (with hash_mappings only its
 * stored form stays).
 */
static void
end_move(MoveRow *m, bool failed, const char *error, const char *rows)
{
	Oid			types[3] = {TEXTOID, TEXTOID, JSONBOID};
	Datum		values[3];
	char		nulls[3] = "   ";

	values[0] = CStringGetTextDatum(failed ? "failed" : "done");
	values[1] = error ? CStringGetTextDatum(error) : (Datum) 0;
	nulls[1] = error ? ' ' : 'n';
	values[2] = rows ? DirectFunctionCall1(jsonb_in, CStringGetDatum(rows)) : (Datum) 0;
	nulls[2] = rows ? ' ' : 'n';
	journal(m, "step = $3, error = CASE WHEN $3 = 'failed' THEN coalesce($4, error) END, "
			"rows = coalesce($5, rows), raw_key = NULL, lease_until = NULL, abandoned = false",
			3, types, values, nulls);
	settle_job_key(m, !failed);
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
 * row_counts renders {"table": rows, ...}.
 */
static char *
row_counts(List *tables, const int64 *rows)
{
	StringInfoData buf;
	int			i = 0;
	ListCell   *lc;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	foreach(lc, tables)
	{
		if (i)
			appendStringInfoString(&buf, ", ");
		escape_json(&buf, ((CdTable *) lfirst(lc))->name);
		appendStringInfo(&buf, ": " INT64_FORMAT, rows[i]);
		i++;
	}
	appendStringInfoChar(&buf, '}');
	return buf.data;
}

/*
 * pause_for_tests stops a mover, when the test-only setting 'setting'
 * names 'where', until the worker is killed.
 */
static void
pause_for_tests(const char *setting, int64 move_id, const char *where, const char *what)
{
	if (setting == NULL || strcmp(setting, where) != 0)
		return;
	elog(LOG, "collegedb: move %ld paused %s %s", (long) move_id, what, where);
	for (;;)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 1000, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * step_validate checks a journaled move before anything is written: the
 * key must still be on the planned source (a rebalance plans all its keys
 * first, and one may have moved since: copying from the planned source
 * would copy nothing and wipe the key's rows), it must fit both shards,
 * and the target must be reachable; the target's stale rows of the key
 * (left by an earlier failed move) are removed, committed with the step.
 */
static void
step_validate(MoveRow *m)
{
	const CdShard *now = MoveSourceOf(m->raw_key);
	ListCell   *lc;

	if (strcmp(now->name, m->source->name) != 0)
	{
		if (strcmp(now->name, m->target->name) == 0)
			end_move(m, false, NULL, "{}");
		else
			end_move(m, true, psprintf("the key is on shard \"%s\" now, not on \"%s\"; nothing was moved",
								 now->name, m->source->name), "{}");
		return;
	}
	MoveEnsureKeyFits(m->source, m->raw_key);
	MoveEnsureKeyFits(m->target, m->raw_key);
	foreach(lc, tables_to_move())
		(void) MoveDeleteKeyRows(m->target, lfirst(lc), m->raw_key);
	set_step(m, "copied", NULL);
}

/*
 * step_source moves the rows: see the file header.  A source step that
 * committed before a crash is recognised by its tombstone, found after the
 * key's lock is held.
 */
static void
step_source(MoveRow *m)
{
	List	   *tables = tables_to_move();
	int64	   *copied = palloc0(sizeof(int64) * list_length(tables));
	char	   *moved_to;
	int			i;
	ListCell   *lc;

	MoveEnsureKeyFits(m->source, m->raw_key);
	MoveEnsureKeyFits(m->target, m->raw_key);

	/*
	 * Open both shards' transactions in name order, so that movers crossing
	 * each other (one from a to b, one from b to a) cannot wait for each
	 * other: SQLite takes its write lock at a transaction's first write.
	 * The target's first write removes its stale tombstone of the key (the
	 * key lived there once), together with the rows that replace it.
	 */
	if (strcmp(m->target->name, m->source->name) < 0)
		MoveDropTombstones(m->target, m->raw_key, false);
	MoveLockKey(m->source, m->raw_key);
	pause_for_tests(CollegeTestPauseInStep, m->id, "source_lock", "inside step");

	moved_to = MoveFindTombstone(m->source, m->raw_key);
	if (moved_to != NULL)
	{
		MoveDropTombstones(m->source, m->raw_key, true);
		if (strcmp(moved_to, m->target->name) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_CD_MOVE_IN_PROGRESS),
					 errmsg("the key has moved from shard \"%s\" to \"%s\" since move %ld began",
							m->source->name, moved_to, (long) m->id)));
		/* the source step committed before the journal could say so */
		set_step(m, "source_done", NULL);
		return;
	}

	if (strcmp(m->target->name, m->source->name) >= 0)
		MoveDropTombstones(m->target, m->raw_key, false);
	i = 0;
	foreach(lc, tables)
	{
		(void) MoveDeleteKeyRows(m->target, lfirst(lc), m->raw_key);
		copied[i++] = MoveCopyKeyRows(m->source, m->target, lfirst(lc), m->raw_key);
	}

	/*
	 * The target commits first, then (in the front's pre-commit, with the
	 * journal) the source.  Between the two commits, one round trip, the
	 * key's rows are on both shards: a routed statement still reaches them
	 * once (the source holds the key's lock, and reads go by mapping), but a
	 * scan of every shard can see them twice.  Two-phase commit would not
	 * close that window: two servers never commit at one instant, and a
	 * prepared transaction's rows only become visible at its own commit.
	 * If the front dies here, the target keeps its copy until the move
	 * resumes (and replaces it) or gives up (and removes it); routing sends
	 * the key's statements to the source meanwhile (RouterMovingSource).
	 */
	RemoteCommitNow(m->target);
	pause_for_tests(CollegeTestPauseInStep, m->id, "source", "inside step");

	MoveDropTombstones(m->source, m->raw_key, false);
	i = 0;
	foreach(lc, tables)
	{
		CdTable    *table = lfirst(lc);
		int64		deleted;

		MoveWriteTombstone(m->source, table, m->raw_key, m->target->name, m->id);
		deleted = MoveDeleteKeyRows(m->source, table, m->raw_key);
		if (deleted != copied[i])
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("the source's rows of the key in table \"%s\" changed during move %ld",
							table->name, (long) m->id),
					 errdetail("The move copied " INT64_FORMAT " rows to shard \"%s\" and would have deleted " INT64_FORMAT " on shard \"%s\"; nothing was deleted.",
							   copied[i], m->target->name, deleted, m->source->name),
					 errhint("A statement that bypasses collegedb's guard (run_on_shard, or a client of the shard) wrote the key's rows during the move.")));
		i++;
	}
	set_step(m, "source_done", row_counts(tables, copied));
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

	values[0] = CStringGetTextDatum(m->key);
	values[1] = CStringGetTextDatum(m->target->name);
	if (WorkerExec("UPDATE collegedb.mapping SET shard = $2 WHERE record = "
				   "(SELECT record FROM collegedb.mapping WHERE key = $1)",
				   2, types, values, NULL) == 0)
		WorkerExec("INSERT INTO collegedb.mapping (key, record, shard) VALUES ($1, $1, $2) "
				   "ON CONFLICT (key) DO UPDATE SET shard = EXCLUDED.shard",
				   2, types, values, NULL);
	set_step(m, "mapped", NULL);
}

/*
 * scrub_target removes the target's copy of the key, when the source shows
 * under the key's lock that it still owns the key; true when it did, false
 * when the source step turns out to have committed (then the move rolls
 * forward: source_done).
 */
static bool
scrub_target(MoveRow *m)
{
	char	   *moved_to;
	ListCell   *lc;

	MoveLockKey(m->source, m->raw_key);
	moved_to = MoveFindTombstone(m->source, m->raw_key);
	MoveDropTombstones(m->source, m->raw_key, true);
	if (moved_to != NULL && strcmp(moved_to, m->target->name) == 0)
	{
		set_step(m, "source_done", NULL);
		return false;
	}
	if (moved_to != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("shard \"%s\" has a tombstone of the key to shard \"%s\"; the target's copy is left alone",
						m->source->name, moved_to)));
	foreach(lc, tables_to_move())
		(void) MoveDeleteKeyRows(m->target, lfirst(lc), m->raw_key);
	RemoteCommitNow(m->target);
	return true;
}

/*
 * MoveTake makes this process the holder of a move that is not finished,
 * when its holder is gone (or is this process) and no step of it is under
 * way; returns the generation this attempt holds, 0 when it could not.
 * In the caller's transaction.
 */
int64
MoveTake(int64 move_id)
{
	Oid			types[4] = {INT8OID, INT4OID, TIMESTAMPTZOID, INT4OID};
	Datum		values[4];
	bool		isnull;

	values[0] = Int64GetDatum(move_id);
	values[1] = Int32GetDatum(MyProcPid);
	values[2] = TimestampTzGetDatum(MyStartTimestamp);
	values[3] = Int32GetDatum(CollegeMoveLease);
	if (WorkerExec("UPDATE collegedb.move m SET generation = m.generation + 1, lease_pid = $2, "
				   "lease_backend_start = $3, lease_until = now() + $4 * interval '1 second', "
				   "updated_at = now() "
				   "WHERE m.id = (SELECT id FROM collegedb.move WHERE id = $1 "
				   "              AND step NOT IN ('done', 'failed') FOR UPDATE SKIP LOCKED) "
				   "AND (m.lease_pid IS NULL OR (m.lease_pid = $2 AND m.lease_backend_start = $3) "
				   "     OR NOT " HOLDER_ALIVE ") "
				   "RETURNING m.generation", 4, types, values, NULL) != 1)
		return 0;
	return DatumGetInt64(spi_datum(0, 1, &isnull));
}

/*
 * MoveStart journals a move of 'key' (in the caller's transaction) and
 * returns its id, held by this process (*generation).  An unfinished move
 * of the key whose holder is gone is taken over instead (*adopted; it may
 * go elsewhere than 'target').  One whose holder is alive is
 * MOVE_IN_PROGRESS, or, when 'busy' is given, returns 0 with that move's
 * id in *busy.  A key too long for either shard is refused here.
 */
int64
MoveStart(int64 job_id, const char *key, const char *source, const char *target,
		  int64 *generation, bool *adopted, int64 *busy)
{
	Oid			types[9] = {INT8OID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT4OID,
	TIMESTAMPTZOID, INT4OID};
	Datum		values[9];
	char		nulls[9] = "        ";
	bool		isnull;

	MoveEnsureKeyFits(ShardLookup(source), key);
	MoveEnsureKeyFits(ShardLookup(target), key);
	*adopted = false;
	values[0] = Int64GetDatum(job_id);
	nulls[0] = job_id > 0 ? ' ' : 'n';
	values[1] = CStringGetTextDatum(RouterStoredKey(key, strlen(key)));
	values[2] = CStringGetTextDatum(key);
	values[3] = CStringGetTextDatum(source);
	values[4] = CStringGetTextDatum(target);
	values[5] = Int32GetDatum(MyProcPid);
	values[6] = TimestampTzGetDatum(MyStartTimestamp);
	values[7] = Int32GetDatum(CollegeMoveLease);

	if (WorkerExec("SELECT id, m.lease_pid IS NOT NULL "
				   "AND NOT (m.lease_pid = $6 AND m.lease_backend_start = $7) AND " HOLDER_ALIVE ", "
				   "coalesce(m.lease_pid, 0) "
				   "FROM collegedb.move m WHERE key = $2 AND step NOT IN ('done', 'failed')",
				   8, types, values, nulls) > 0)
	{
		int64		id = DatumGetInt64(spi_datum(0, 1, &isnull));
		bool		alive = DatumGetBool(spi_datum(0, 2, &isnull));
		int			pid = DatumGetInt32(spi_datum(0, 3, &isnull));

		if (!alive)
			*generation = MoveTake(id);
		if ((alive || *generation == 0) && busy != NULL)
		{
			*busy = id;
			return 0;
		}
		if (alive || *generation == 0)
			ereport(ERROR,
					(errcode(ERRCODE_CD_MOVE_IN_PROGRESS),
					 errmsg("the key is already being moved"),
					 errdetail("Move %ld is running in process %d.", (long) id, pid)));
		if (job_id > 0)
		{
			Oid			t[2] = {INT8OID, INT8OID};
			Datum		v[2] = {Int64GetDatum(id), Int64GetDatum(job_id)};

			WorkerExec("UPDATE collegedb.move SET job_id = $2 WHERE id = $1", 2, t, v, NULL);
		}
		*adopted = true;
		return id;
	}

	/* a mover that got here first, between the check above and now */
	if (WorkerExec("INSERT INTO collegedb.move (job_id, key, raw_key, source, target, generation, "
				   "lease_pid, lease_backend_start, lease_until) "
				   "VALUES ($1, $2, $3, $4, $5, 1, $6, $7, now() + $8 * interval '1 second') "
				   "ON CONFLICT (key) WHERE step NOT IN ('done', 'failed') DO NOTHING "
				   "RETURNING id", 8, types, values, nulls) == 0)
	{
		if (busy != NULL)
		{
			*busy = -1;
			return 0;
		}
		ereport(ERROR,
				(errcode(ERRCODE_CD_MOVE_IN_PROGRESS),
				 errmsg("the key is already being moved")));
	}
	*generation = 1;
	return DatumGetInt64(spi_datum(0, 1, &isnull));
}

typedef enum MoveOutcome
{
	MOVE_OUTCOME_DONE,
	MOVE_OUTCOME_FAILED,
	MOVE_OUTCOME_TAKEN_OVER
} MoveOutcome;

/*
 * move_steps runs a move's remaining steps, one transaction each; returns
 * how it ended, and for a failed move its error in *failure.
 */
static MoveOutcome
move_steps(int64 move_id, int64 generation, char **failure)
{
	MemoryContext caller = CurrentMemoryContext;
	MemoryContext context = AllocSetContextCreate(CurrentMemoryContext,
												  "collegedb move",
												  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(context);
	MoveOutcome outcome = MOVE_OUTCOME_DONE;

	for (;;)
	{
		MoveRow		m;
		const char *done_step;

		WorkerBegin();
		if (!load_move(move_id, generation, &m))
		{
			WorkerCommit();
			outcome = MOVE_OUTCOME_TAKEN_OVER;
			break;
		}
		pgstat_report_activity(STATE_RUNNING, psprintf("collegedb move %ld: %s", (long) move_id, m.step));
		if (strcmp(m.step, "journaled") == 0)
			step_validate(&m), done_step = "copied";
		else if (strcmp(m.step, "copied") == 0)
			step_source(&m), done_step = "source_done";
		else if (strcmp(m.step, "source_done") == 0)
			step_map(&m), done_step = "mapped";
		else if (strcmp(m.step, "mapped") == 0)
			end_move(&m, false, NULL, NULL), done_step = "done";
		else
		{
			if (strcmp(m.step, "failed") == 0)
			{
				Oid			types[1] = {INT8OID};
				Datum		values[1] = {Int64GetDatum(move_id)};

				WorkerExec("SELECT error FROM collegedb.move WHERE id = $1", 1, types, values, NULL);
				*failure = spi_text(0, 1);
				*failure = MemoryContextStrdup(caller, *failure ? *failure : "the move failed");
				outcome = MOVE_OUTCOME_FAILED;
			}
			WorkerCommit();
			break;
		}
		WorkerCommit();
		pgstat_report_activity(STATE_IDLE, NULL);
		pause_for_tests(CollegeTestPauseAfterStep, move_id, done_step, "after step");
		MemoryContextReset(context);
	}
	MemoryContextSwitchTo(old);
	MemoryContextDelete(context);
	return outcome;
}

/*
 * settle_failure runs, in a transaction of its own, what follows a failed
 * attempt that still holds the move: after a failed source step the
 * target's copy (if it committed one) is removed, and a move that gave up
 * and is clean ends failed.  Its own errors are only logged: the
 * coordinator tries again.
 */
static void
settle_failure(int64 move_id, int64 generation)
{
	MemoryContext context = CurrentMemoryContext;

	PG_TRY();
	{
		MoveRow		m;

		WorkerBegin();
		if (!load_move(move_id, generation, &m))
			;					/* changed hands */
		else if (strcmp(m.step, "copied") == 0)
		{
			/* the source step ran: the target may hold a copy */
			if (scrub_target(&m) && m.abandoned)
				end_move(&m, true, NULL, NULL);
		}
		else if (strcmp(m.step, "journaled") == 0 && m.abandoned)
		{
			/* validation only removes rows: the target holds nothing of ours */
			end_move(&m, true, NULL, NULL);
		}
		WorkerCommit();
	}
	PG_CATCH();
	{
		ErrorData  *edata = WorkerCatchError(context);

		ereport(LOG,
				(errmsg("collegedb: could not remove the target's copy of the key of move %ld: %s",
						(long) move_id, edata->message)));
	}
	PG_END_TRY();
}

/*
 * record_failure records a failed attempt: its error, one more attempt,
 * when to retry, and whether the move gives up; then settles it and lets
 * the move go (its holder is gone, for the coordinator).
 */
static void
record_failure(int64 move_id, int64 generation, const char *message)
{
	Oid			types[4] = {INT8OID, INT8OID, TEXTOID, INT4OID};
	Datum		values[4];

	values[0] = Int64GetDatum(move_id);
	values[1] = Int64GetDatum(generation);
	values[2] = CStringGetTextDatum(message);
	values[3] = Int32GetDatum(CollegeMoveMaxAttempts);
	WorkerBegin();
	WorkerExec("UPDATE collegedb.move m SET error = " MOVE_REDACT_KEY("$3", "m.raw_key", "m.key") ", "
			   "attempts = m.attempts + 1, "
			   "next_attempt_at = now() + " RETRY_DELAY ", "
			   "abandoned = m.abandoned OR (m.attempts + 1 >= $4 AND m.step IN ('journaled', 'copied')), "
			   "updated_at = now() "
			   "WHERE id = $1 AND generation = $2 AND step NOT IN ('done', 'failed')",
			   4, types, values, NULL);
	WorkerCommit();

	settle_failure(move_id, generation);

	WorkerBegin();
	WorkerExec("UPDATE collegedb.move SET lease_pid = NULL, lease_backend_start = NULL, "
			   "lease_until = NULL WHERE id = $1 AND generation = $2 "
			   "AND step NOT IN ('done', 'failed')",
			   2, types, values, NULL);
	WorkerCommit();
}

/*
 * MoveRun carries a journaled move, held by this process with 'generation',
 * through its remaining steps, one transaction each.  Must be called
 * outside a transaction; errors go to the caller with the move left at the
 * last committed step and scheduled for a retry (see the file header).
 */
void
MoveRun(int64 move_id, int64 generation)
{
	MemoryContext caller = CurrentMemoryContext;
	char	   *failure = NULL;
	MoveOutcome outcome = MOVE_OUTCOME_DONE;

	for (int attempt = 1;; attempt++)
	{
		ErrorData  *edata = NULL;

		PG_TRY();
		{
			outcome = move_steps(move_id, generation, &failure);
		}
		PG_CATCH();
		{
			edata = WorkerCatchError(caller);
		}
		PG_END_TRY();
		if (edata == NULL)
			break;

		/*
		 * A deadlock or serialization failure on a shard (InnoDB's gap locks
		 * between movers): the step starts again from the last committed
		 * one, at once, a few times.
		 */
		if ((edata->sqlerrcode == ERRCODE_T_R_SERIALIZATION_FAILURE ||
			 edata->sqlerrcode == ERRCODE_T_R_DEADLOCK_DETECTED) &&
			attempt < MOVE_DEADLOCK_ATTEMPTS)
		{
			elog(LOG, "collegedb: move %ld retries after: %s", (long) move_id, edata->message);
			pg_usleep(50000L * attempt);
			continue;
		}
		record_failure(move_id, generation, edata->message);
		MemoryContextSwitchTo(caller);
		ReThrowError(edata);
	}
	if (outcome == MOVE_OUTCOME_TAKEN_OVER)
		ereport(ERROR,
				(errcode(ERRCODE_CD_MOVE_IN_PROGRESS),
				 errmsg("move %ld was taken over by another worker", (long) move_id)));
	if (outcome == MOVE_OUTCOME_FAILED)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s", failure)));
}

/*
 * MoveCleanUp finishes a move that gave up (held by this process with
 * 'generation'): removes the target's copy of the key and ends it failed,
 * or rolls it forward when its source step turns out to have committed.
 * Errors are recorded for the next try.
 */
void
MoveCleanUp(int64 move_id, int64 generation)
{
	MemoryContext caller = CurrentMemoryContext;
	ErrorData  *edata = NULL;

	PG_TRY();
	{
		settle_failure(move_id, generation);
	}
	PG_CATCH();
	{
		edata = WorkerCatchError(caller);
	}
	PG_END_TRY();

	WorkerBegin();
	{
		Oid			types[3] = {INT8OID, INT8OID, TEXTOID};
		Datum		values[3];
		char		nulls[4] = "   ";

		values[0] = Int64GetDatum(move_id);
		values[1] = Int64GetDatum(generation);
		values[2] = edata ? CStringGetTextDatum(edata->message) : (Datum) 0;
		nulls[2] = edata ? ' ' : 'n';
		WorkerExec("UPDATE collegedb.move m SET "
				   "error = coalesce(" MOVE_REDACT_KEY("$3", "m.raw_key", "m.key") ", error), "
				   "next_attempt_at = now() + " RETRY_DELAY ", "
				   "lease_pid = NULL, lease_backend_start = NULL, lease_until = NULL "
				   "WHERE id = $1 AND generation = $2 AND step NOT IN ('done', 'failed')",
				   3, types, values, nulls);
	}
	WorkerCommit();
}

/*
 * MoveWaitWhileHeld waits, outside a transaction, until a move is no
 * longer run by a live process (it ended, or its holder is gone and it can
 * be taken over); -1: a move that was not found, waited for briefly.
 * Interruptible.
 */
void
MoveWaitWhileHeld(int64 move_id)
{
	for (;;)
	{
		Oid			types[1] = {INT8OID};
		Datum		values[1] = {Int64GetDatum(move_id)};
		bool		held;

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 100, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (move_id < 0)
			return;
		WorkerBegin();
		held = WorkerExec("SELECT 1 FROM collegedb.move m WHERE id = $1 "
						  "AND step NOT IN ('done', 'failed') AND " HOLDER_ALIVE,
						  1, types, values, NULL) > 0;
		WorkerCommit();
		if (!held)
			return;
	}
}
