/*-------------------------------------------------------------------------
 *
 * job_journal.c
 *	  The journal of jobs (catalog tables collegedb.job and
 *	  collegedb.job_key): every statement collegedb's C code runs on them.
 *
 * A job's rows record what it was asked to do, who runs it (lease_pid and
 * lease_backend_start), how often its worker died (deaths), its keys and
 * how each ended (src/README.md, "Moves" and "Jobs").  When each statement
 * runs is worker/jobs.c's, worker/movers.c's and worker/coordinator.c's;
 * this file only knows the rows.  As in journal.c, every statement goes
 * through CatalogExec in the caller's transaction, and with hash_mappings
 * the key itself is kept only while a job is active.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "catalog/catalog.h"
#include "catalog/journal.h"
#include "catalog/journal_sql.h"
#include "cd_errcodes.h"
#include "collegedb.h"

/* Jobs */

/*
 * JournalInsertJob records a job and returns its id: queued for the
 * coordinator, or, with 'running', already run by this process.  NULL
 * strings and a 'concurrency' of 0 leave their column unset; 'key' is the
 * key itself, kept beside its stored form while the job runs.
 */
int64
JournalInsertJob(const char *kind, const char *table_name, const char *stored,
				 const char *key, const char *target, bool force, int concurrency,
				 Oid owner, bool running)
{
	Oid			types[10] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, BOOLOID, INT4OID, OIDOID,
	TEXTOID, TIMESTAMPTZOID, BOOLOID};
	Datum		values[10];
	char		nulls[11] = "          ";
	CdCatalogRows rows;
	bool		isnull;

	values[0] = CStringGetTextDatum(kind);
	values[1] = text_or_null(table_name, &nulls[1]);
	values[2] = text_or_null(stored, &nulls[2]);
	values[3] = text_or_null(target, &nulls[3]);
	values[4] = BoolGetDatum(force);
	values[5] = Int32GetDatum(concurrency);
	nulls[5] = concurrency > 0 ? ' ' : 'n';
	values[6] = ObjectIdGetDatum(owner);
	values[7] = text_or_null(key, &nulls[7]);
	values[8] = TimestampTzGetDatum(MyStartTimestamp);
	values[9] = BoolGetDatum(running);
	(void) CatalogExec("INSERT INTO collegedb.job (kind, table_name, key, target, force, concurrency, owner, "
					   "raw_key, state, lease_pid, lease_backend_start) "
					   "SELECT $1, $2, $3, $4, $5, $6, $7, $8, "
					   "CASE WHEN $10 THEN 'running' ELSE 'queued' END, "
					   "CASE WHEN $10 THEN pg_backend_pid() END, CASE WHEN $10 THEN $9 END "
					   "RETURNING id", 10, types, values, nulls, false, &rows);
	return DatumGetInt64(CatalogValue(&rows, 0, 1, &isnull));
}

/*
 * JournalStartJob marks a queued (or interrupted) job as running in this
 * process and reads what it is to do; false when it is neither.
 */
bool
JournalStartJob(int64 job_id, CdJobRow *job)
{
	Oid			types[2] = {INT8OID, TIMESTAMPTZOID};
	Datum		values[2] = {Int64GetDatum(job_id), TimestampTzGetDatum(MyStartTimestamp)};
	CdCatalogRows rows;
	bool		isnull;

	if (CatalogExec("UPDATE collegedb.job SET state = 'running', started_at = coalesce(started_at, now()), "
					"lease_pid = pg_backend_pid(), lease_backend_start = $2 "
					"WHERE id = $1 AND state IN ('queued', 'running') "
					"RETURNING kind, table_name, coalesce(raw_key, key), target, force, "
					"coalesce(concurrency, (SELECT migration_concurrency FROM collegedb.config)), slot",
					2, types, values, NULL, false, &rows) == 0)
		return false;
	job->kind = CatalogText(&rows, 0, 1);
	job->table_name = CatalogText(&rows, 0, 2);
	job->key = CatalogText(&rows, 0, 3);
	job->target = CatalogText(&rows, 0, 4);
	job->force = DatumGetBool(CatalogValue(&rows, 0, 5, &isnull));
	job->concurrency = DatumGetInt32(CatalogValue(&rows, 0, 6, &isnull));
	job->slot = DatumGetInt32(CatalogValue(&rows, 0, 7, &isnull));
	if (isnull)
		job->slot = -1;
	return true;
}

/*
 * JournalFinishJob records a job's end: 'state' ("done": "cancelled" when
 * a cancel was asked for), its result (JSON, NULL: unchanged) and error.
 */
void
JournalFinishJob(int64 job_id, const char *state, const char *result, const char *error)
{
	Oid			types[4] = {INT8OID, TEXTOID, JSONBOID, TEXTOID};
	Datum		values[4];
	char		nulls[5] = "    ";

	values[0] = Int64GetDatum(job_id);
	values[1] = CStringGetTextDatum(state);
	values[2] = jsonb_or_null(result, &nulls[2]);
	values[3] = text_or_null(error, &nulls[3]);
	(void) CatalogExec("UPDATE collegedb.job SET state = CASE WHEN cancel_requested AND $2 = 'done' "
					   "THEN 'cancelled' ELSE $2 END, result = coalesce($3, result), "
					   "last_error = " REDACT_KEY("$4", "raw_key", "key") ", "
					   "raw_key = NULL, finished_at = now() WHERE id = $1",
					   4, types, values, nulls, false, NULL);
}

/*
 * JournalSetJobSlot records the slot a move_slot job moves.
 */
void
JournalSetJobSlot(int64 job_id, int32 slot)
{
	Oid			types[2] = {INT8OID, INT4OID};
	Datum		values[2] = {Int64GetDatum(job_id), Int32GetDatum(slot)};

	(void) CatalogExec("UPDATE collegedb.job SET slot = $2 WHERE id = $1",
					   2, types, values, NULL, false, NULL);
}

/*
 * JournalJobKeysLeft counts the keys of a job that are not moved, and
 * returns the error of one that failed (NULL when none did).
 */
int64
JournalJobKeysLeft(int64 job_id, char **error)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(job_id)};
	CdCatalogRows rows;
	bool		isnull;

	(void) CatalogExec("SELECT count(*) FILTER (WHERE state <> 'moved'), "
					   "(SELECT error FROM collegedb.job_key WHERE job_id = $1 AND state = 'failed' "
					   "ORDER BY key LIMIT 1) FROM collegedb.job_key WHERE job_id = $1",
					   1, types, values, NULL, false, &rows);
	*error = CatalogText(&rows, 0, 2);
	return DatumGetInt64(CatalogValue(&rows, 0, 1, &isnull));
}

/*
 * JournalSetJobResult records a job's result so far (JSON).
 */
void
JournalSetJobResult(int64 job_id, const char *result)
{
	Oid			types[2] = {INT8OID, JSONBOID};
	Datum		values[2];
	char		null;

	values[0] = Int64GetDatum(job_id);
	values[1] = jsonb_or_null(result, &null);
	(void) CatalogExec("UPDATE collegedb.job SET result = $2 WHERE id = $1",
					   2, types, values, NULL, false, NULL);
}

/*
 * RESTORING_SQL is true while a restore of the catalog is under way:
 * collegedb.job or collegedb.move holds an id that its sequence has not
 * handed out.  Every id comes from nextval(), so outside a restore no row
 * is ahead of its sequence; pg_restore and a plain dump replayed with psql
 * load the tables one by one, each in a transaction of its own, and set
 * the sequences after the rows of every table.  Until then a restored job
 * or move would meet a catalog without its shards or registered tables.
 * A sequence is read as it is now, not as of the statement's snapshot: a
 * row the snapshot sees is ahead of it only until the restore is done.
 */
#define RESTORING_SQL \
	"(coalesce((SELECT max(id) FROM collegedb.job) >= " \
	"(SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END " \
	"FROM collegedb.job_id_seq), false) OR " \
	"coalesce((SELECT max(id) FROM collegedb.move) >= " \
	"(SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END " \
	"FROM collegedb.move_id_seq), false))"

/*
 * JournalRestoring says whether a restore of the catalog is under way
 * (RESTORING_SQL).
 */
bool
JournalRestoring(void)
{
	CdCatalogRows rows;
	bool		isnull;
	Datum		ahead;

	(void) CatalogExec("SELECT " RESTORING_SQL, 0, NULL, NULL, NULL, false, &rows);
	ahead = CatalogValue(&rows, 0, 1, &isnull);
	return !isnull && DatumGetBool(ahead);
}

/*
 * JournalRequeueOrphanJobs queues again every running job whose worker is
 * gone (its agreed keys are skipped when it runs again), counting a death
 * of the job: a worker that exits, by an error or a SIGTERM, records how
 * the job ended or requeues it first (JournalRequeueJob), so a running job
 * without its worker is one whose worker was killed or crashed.  A job
 * that died collegedb.job_max_deaths times ends failed instead, with the
 * reason, and nothing runs it again until collegedb.retry_job(): a job
 * that crashes its worker cannot crash-loop the server.  Its moves are
 * left to the journal (the coordinator finishes or cleans up each one).
 * Nothing is requeued while a restore is under way: the job's worker is
 * gone, but so are its shards until the restore has loaded them.
 */
void
JournalRequeueOrphanJobs(void)
{
	Oid			types[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(CollegeJobMaxDeaths)};
	CdCatalogRows rows;

	(void) CatalogExec("UPDATE collegedb.job j SET deaths = j.deaths + 1, "
					   "state = CASE WHEN j.deaths + 1 >= $1 THEN 'failed' ELSE 'queued' END, "
					   "finished_at = CASE WHEN j.deaths + 1 >= $1 THEN now() END, "
					   "last_error = CASE WHEN j.deaths + 1 >= $1 THEN "
					   "format('the job''s worker died %s times while it ran the job (the last one was process %s); "
					   "the job stopped so that it cannot crash the server again, and "
					   "collegedb.retry_job(%s) runs it again', j.deaths + 1, j.lease_pid, j.id) "
					   "ELSE j.last_error END "
					   "WHERE state = 'running' AND NOT " RESTORING_SQL " AND "
					   "NOT EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity a WHERE a.pid = j.lease_pid "
					   "AND (j.lease_backend_start IS NULL OR a.backend_start = j.lease_backend_start)) "
					   "RETURNING j.id, j.state, j.deaths, j.lease_pid",
					   1, types, values, NULL, false, &rows);
	for (uint64 i = 0; i < rows.count; i++)
	{
		char	   *id = CatalogText(&rows, i, 1);
		char	   *state = CatalogText(&rows, i, 2);

		if (strcmp(state, "failed") == 0)
			ereport(LOG,
					(errmsg("collegedb coordinator: job %s failed: its worker (last process %s) died %s times",
							id, CatalogText(&rows, i, 4), CatalogText(&rows, i, 3)),
					 errhint("collegedb.retry_job(%s) runs it again.", id)));
		else
			ereport(LOG,
					(errmsg("collegedb coordinator: job %s is queued again: its worker (process %s) died (death %s of at most %d)",
							id, CatalogText(&rows, i, 4), CatalogText(&rows, i, 3), CollegeJobMaxDeaths)));
	}
}

/*
 * JournalRequeueJob queues a job this process runs again without counting
 * a death: its worker is stopping cleanly (SIGTERM, a server shutdown)
 * before the job ended.
 */
void
JournalRequeueJob(int64 job_id)
{
	Oid			types[2] = {INT8OID, INT4OID};
	Datum		values[2] = {Int64GetDatum(job_id), Int32GetDatum(MyProcPid)};

	(void) CatalogExec("UPDATE collegedb.job SET state = 'queued' "
					   "WHERE id = $1 AND state = 'running' AND lease_pid = $2",
					   2, types, values, NULL, false, NULL);
}

/*
 * JournalNextQueuedJob finds the oldest queued job and its owner: false
 * when there is none.
 */
bool
JournalNextQueuedJob(int64 *job_id, Oid *owner)
{
	CdCatalogRows rows;
	bool		isnull;

	if (CatalogExec("SELECT id, owner FROM collegedb.job WHERE state = 'queued' "
					"ORDER BY id LIMIT 1", 0, NULL, NULL, NULL, false, &rows) == 0)
		return false;
	*job_id = DatumGetInt64(CatalogValue(&rows, 0, 1, &isnull));
	*owner = DatumGetObjectId(CatalogValue(&rows, 0, 2, &isnull));
	return true;
}

/*
 * JournalJobGoesOn says whether a job exists and no cancel was asked for.
 */
bool
JournalJobGoesOn(int64 job_id)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(job_id)};

	return CatalogExec("SELECT 1 FROM collegedb.job WHERE id = $1 AND NOT cancel_requested",
					   1, types, values, NULL, false, NULL) > 0;
}

/*
 * JournalJobOutcome reads how a job ended: state, result, last error;
 * false when there is no such job.
 */
bool
JournalJobOutcome(int64 job_id, char **state, Jsonb **result, char **error)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(job_id)};
	CdCatalogRows rows;
	bool		isnull;
	Datum		r;

	if (CatalogExec("SELECT state, result, last_error FROM collegedb.job WHERE id = $1",
					1, types, values, NULL, false, &rows) != 1)
		return false;
	*state = CatalogText(&rows, 0, 1);
	r = CatalogValue(&rows, 0, 2, &isnull);
	*result = isnull ? NULL : DatumGetJsonbPCopy(r);
	*error = CatalogText(&rows, 0, 3);
	return true;
}

/*
 * JournalJobView reads a job's row of the view collegedb.jobs into 'rows';
 * false when there is no such job.  It takes a new snapshot, so that a
 * waiter sees the job's progress.
 */
bool
JournalJobView(int64 job_id, CdCatalogRows *rows)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(job_id)};

	return CatalogExec("SELECT * FROM collegedb.jobs WHERE id = $1",
					   1, types, values, NULL, false, rows) > 0;
}

/*
 * JournalJobState returns a job's state (with a new snapshot), or NULL
 * when there is no such job.
 */
char *
JournalJobState(int64 job_id)
{
	return CatalogTextById("SELECT state FROM collegedb.job WHERE id = $1", job_id);
}

/*
 * JournalJobProgress reads a running rebalance's or slot move's progress
 * from collegedb.jobs (with a new snapshot): keys done and planned, keys
 * per second and seconds left (both < 0 when not known yet); false when
 * the job is not running or has no keys planned yet.
 */
bool
JournalJobProgress(int64 job_id, int64 *done, int64 *planned, double *rate, double *left)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(job_id)};
	CdCatalogRows rows;
	bool		isnull;
	Datum		d;

	if (CatalogExec("SELECT keys_done, keys_planned, keys_per_second::float8, "
					"extract(epoch FROM time_left)::float8 FROM collegedb.jobs "
					"WHERE id = $1 AND state = 'running' AND keys_planned > 0",
					1, types, values, NULL, false, &rows) == 0)
		return false;
	*done = DatumGetInt64(CatalogValue(&rows, 0, 1, &isnull));
	*planned = DatumGetInt64(CatalogValue(&rows, 0, 2, &isnull));
	d = CatalogValue(&rows, 0, 3, &isnull);
	*rate = isnull ? -1 : DatumGetFloat8(d);
	d = CatalogValue(&rows, 0, 4, &isnull);
	*left = isnull ? -1 : DatumGetFloat8(d);
	return true;
}

/*
 * JournalRebalanceResult reads a rebalance job's counts and its failed keys
 * (examined, agreed, moved bigint, failed jsonb) into 'rows'.
 */
void
JournalRebalanceResult(int64 job_id, CdCatalogRows *rows)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(job_id)};

	if (CatalogExec("SELECT j.examined, j.agreed, j.moved, "
					"coalesce((SELECT jsonb_agg(jsonb_build_object('key', key, 'error', error) "
					"ORDER BY key) FROM collegedb.job_key WHERE job_id = $1 AND state = 'failed'), "
					"'[]') FROM collegedb.jobs j WHERE j.id = $1",
					1, types, values, NULL, false, rows) != 1)
		elog(ERROR, "could not read job " INT64_FORMAT, job_id);
}

/* The keys of jobs */

/*
 * JournalForgetPendingJobKeys begins a (re)run's plan: the keys its last
 * run had not finished (pending, or claimed by a mover that died) are
 * forgotten, and come back with the new plan if it moves them still.
 */
void
JournalForgetPendingJobKeys(int64 job_id)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(job_id)};

	(void) CatalogExec("DELETE FROM collegedb.job_key WHERE job_id = $1 AND state IN ('pending', 'moving')",
					   1, types, values, NULL, false, NULL);
}

/*
 * JournalAddJobKeys records keys a rebalance's plan moves, a List of
 * CdJobKeyRow, with one statement (a page of the plan); a key the job had
 * settled already is pending again, with its new source and target.
 */
void
JournalAddJobKeys(int64 job_id, List *keys)
{
	Oid			types[5] = {INT8OID, TEXTARRAYOID, TEXTARRAYOID, TEXTARRAYOID, TEXTARRAYOID};
	Datum		values[5];
	int			n = list_length(keys);
	Datum	   *cols[4];
	ListCell   *lc;
	int			i = 0;

	values[0] = Int64GetDatum(job_id);
	for (int c = 0; c < 4; c++)
		cols[c] = palloc(sizeof(Datum) * Max(n, 1));
	foreach(lc, keys)
	{
		CdJobKeyRow *k = lfirst(lc);

		cols[0][i] = CStringGetTextDatum(k->stored);
		cols[1][i] = CStringGetTextDatum(k->source);
		cols[2][i] = CStringGetTextDatum(k->target);
		cols[3][i] = CStringGetTextDatum(k->key);
		i++;
	}
	for (int c = 0; c < 4; c++)
		values[c + 1] = PointerGetDatum(construct_array(cols[c], n, TEXTOID, -1, false, TYPALIGN_INT));
	/* a key planned twice (copies on two shards, no mapping): its last plan */
	(void) CatalogExec("INSERT INTO collegedb.job_key (job_id, key, source, target, raw_key) "
					   "SELECT DISTINCT ON (k.key) $1, k.key, k.source, k.target, k.raw_key "
					   "FROM unnest($2, $3, $4, $5) WITH ORDINALITY AS k(key, source, target, raw_key, n) "
					   "ORDER BY k.key, k.n DESC "
					   "ON CONFLICT (job_id, key) DO UPDATE SET source = EXCLUDED.source, "
					   "target = EXCLUDED.target, state = 'pending', error = NULL, raw_key = EXCLUDED.raw_key, "
					   "planned_at = now(), settled_at = NULL",
					   5, types, values, NULL, false, NULL);
	for (int c = 0; c < 4; c++)
		pfree(cols[c]);
}

/*
 * JournalAnalyzeJobKeys brings collegedb.job_key's statistics up to date
 * once a plan has recorded its keys (its own rows count): every batch's
 * statement that settles its keys by "job_id = $1 AND key = ANY (...)"
 * is planned from them, and with the statistics of the table before the
 * plan the planner took the job's id for the selective condition and read
 * every key of the job for each batch (a third of a million-key
 * rebalance's time).  A table that another process is analyzing or
 * vacuuming is skipped.
 */
void
JournalAnalyzeJobKeys(void)
{
	(void) CatalogExec("ANALYZE (SKIP_LOCKED) collegedb.job_key", 0, NULL, NULL, NULL, false, NULL);
}

/*
 * JournalCountJobKeys returns how many keys a job has in all.
 */
int64
JournalCountJobKeys(int64 job_id)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(job_id)};
	CdCatalogRows rows;
	bool		isnull;

	(void) CatalogExec("SELECT count(*) FROM collegedb.job_key WHERE job_id = $1",
					   1, types, values, NULL, false, &rows);
	return DatumGetInt64(CatalogValue(&rows, 0, 1, &isnull));
}

/*
 * JournalClaimJobKeys claims up to 'max' of a job's pending keys at once,
 * in key order after 'after' (a stored key; "" for the first), all with
 * the source and target of the first (FOR UPDATE SKIP LOCKED: one mover
 * per key), and reads them into keys[], sorted by raw key; returns how
 * many it claimed.  A mover passes the greatest key of its last claim
 * (*last, palloc'd): the pending index's entries of the keys claimed
 * before it are not walked again, which made each claim of a big job
 * slower than the last.  Keys before 'after' that are pending again (given
 * back, or passed by a claim that found them locked) are the caller's to
 * claim from "" once nothing is left after it.
 */
int
JournalClaimJobKeys(int64 job_id, int max, const char *after, CdJobKeyRow *keys,
					char **last)
{
	Oid			types[3] = {INT8OID, INT4OID, TEXTOID};
	Datum		values[3] = {Int64GetDatum(job_id), Int32GetDatum(max),
	CStringGetTextDatum(after)};
	CdCatalogRows rows;

	(void) CatalogExec("WITH first AS (SELECT source, target FROM collegedb.job_key "
					   "WHERE job_id = $1 AND state = 'pending' AND key > $3 "
					   "ORDER BY key LIMIT 1 FOR UPDATE SKIP LOCKED), "
					   "claimed AS (UPDATE collegedb.job_key SET state = 'moving' WHERE (job_id, key) IN "
					   "(SELECT k.job_id, k.key FROM collegedb.job_key k, first "
					   " WHERE k.job_id = $1 AND k.state = 'pending' AND k.key > $3 "
					   " AND k.source = first.source AND k.target = first.target "
					   " ORDER BY k.key LIMIT $2 FOR UPDATE OF k SKIP LOCKED) "
					   "RETURNING coalesce(raw_key, key) AS raw, source, target, key) "
					   "SELECT raw, source, target, key, max(key) OVER () FROM claimed "
					   "ORDER BY raw COLLATE \"C\"",
					   3, types, values, NULL, false, &rows);
	for (uint64 i = 0; i < rows.count; i++)
	{
		keys[i].key = CatalogText(&rows, i, 1);
		keys[i].source = CatalogText(&rows, i, 2);
		keys[i].target = CatalogText(&rows, i, 3);
		keys[i].stored = CatalogText(&rows, i, 4);
	}
	if (rows.count > 0)
		*last = CatalogText(&rows, 0, 5);
	return (int) rows.count;
}

/*
 * JournalUnclaimJobKey gives a claimed key that was never started back to
 * its job's pending keys (a batch's key when the job is cancelled).
 */
void
JournalUnclaimJobKey(int64 job_id, const char *stored)
{
	Oid			types[2] = {INT8OID, TEXTOID};
	Datum		values[2] = {Int64GetDatum(job_id), CStringGetTextDatum(stored)};

	(void) CatalogExec("UPDATE collegedb.job_key SET state = 'pending' "
					   "WHERE job_id = $1 AND key = $2 AND state = 'moving'",
					   2, types, values, NULL, false, NULL);
}

/*
 * JournalSettleJobKey records how a job's key (its stored form) ended:
 * moved, or failed with 'error' (NULL: the error of move 'move_id'), also
 * when that was decided after the job had recorded an earlier try; a key
 * that moved stays moved.
 */
void
JournalSettleJobKey(int64 job_id, const char *stored, bool moved, const char *error,
					int64 move_id)
{
	Oid			types[3] = {INT8OID, TEXTOID, INT8OID};
	Datum		values[3];

	values[0] = Int64GetDatum(job_id);
	values[1] = CStringGetTextDatum(stored);
	values[2] = Int64GetDatum(move_id);
	if (moved)
		(void) CatalogExec("UPDATE collegedb.job_key SET state = 'moved', error = NULL, raw_key = NULL, "
						   "settled_at = clock_timestamp() "
						   "WHERE job_id = $1 AND key = $2", 2, types, values, NULL, false, NULL);
	else if (error == NULL)
		(void) CatalogExec("UPDATE collegedb.job_key SET state = 'failed', raw_key = NULL, "
						   "settled_at = clock_timestamp(), "
						   "error = (SELECT error FROM collegedb.move WHERE id = $3) "
						   "WHERE job_id = $1 AND key = $2 AND state <> 'moved'",
						   3, types, values, NULL, false, NULL);
	else
	{
		types[2] = TEXTOID;
		values[2] = CStringGetTextDatum(error);
		(void) CatalogExec("UPDATE collegedb.job_key SET state = 'failed', raw_key = NULL, "
						   "settled_at = clock_timestamp(), "
						   "error = " REDACT_KEY("$3", "raw_key", "key") " "
						   "WHERE job_id = $1 AND key = $2 AND state <> 'moved'",
						   3, types, values, NULL, false, NULL);
	}
}
