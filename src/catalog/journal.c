/*-------------------------------------------------------------------------
 *
 * journal.c
 *	  The journal of moves and jobs (catalog tables collegedb.move,
 *	  collegedb.job and collegedb.job_key): every statement collegedb's C
 *	  code runs on them.
 *
 * A move's row records its step, who holds it (lease_pid and
 * lease_backend_start of the holder, the generation it took) and how its
 * attempts went; a job's rows record what it was asked to do, its keys and
 * how each ended (src/README.md, "Moves").  The steps themselves, and when
 * each statement here runs, are worker/moves.c's and worker/jobs.c's; this
 * file only knows the rows.  Every statement goes through CatalogExec
 * (the catalog owner's rights) in the caller's transaction, and a write of
 * a move's row is fenced by the generation of the attempt that makes it.
 *
 * With hash_mappings the key itself is never kept once a move or job ends:
 * error texts bound for these tables have the quoted key replaced by its
 * stored form (REDACT_KEY).
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

/* the delay before retry number attempts + 1 */
#define RETRY_DELAY CATALOG_RETRY_DELAY("m.attempts")

/* Moves */

/* in JournalTakeMove: the holder of move row "m" that it replaces vanished */
#define DIED "(m.lease_pid IS NOT NULL AND NOT (m.lease_pid = $2 AND m.lease_backend_start = $3))"

/*
 * JournalLoadMove locks a move's row, if this attempt still holds the move
 * (its generation), and reads it into the caller's memory context; false
 * when the move has changed hands.
 */
bool
JournalLoadMove(int64 move_id, int64 generation, CdMoveRow *m)
{
	Oid			types[2] = {INT8OID, INT8OID};
	Datum		values[2] = {Int64GetDatum(move_id), Int64GetDatum(generation)};
	CdCatalogRows rows;
	bool		isnull;

	if (CatalogExec("SELECT key, raw_key, source, target, step, coalesce(job_id, 0), abandoned "
					"FROM collegedb.move WHERE id = $1 AND generation = $2 FOR UPDATE",
					2, types, values, NULL, false, &rows) != 1)
		return false;
	m->id = move_id;
	m->generation = generation;
	m->key = CatalogText(&rows, 0, 1);
	m->raw_key = CatalogText(&rows, 0, 2);
	m->step = CatalogText(&rows, 0, 5);
	m->job_id = DatumGetInt64(CatalogValue(&rows, 0, 6, &isnull));
	m->abandoned = DatumGetBool(CatalogValue(&rows, 0, 7, &isnull));
	if (m->raw_key == NULL && strcmp(m->step, "done") != 0 && strcmp(m->step, "failed") != 0)
		elog(ERROR, "move " INT64_FORMAT " has lost its key", move_id);
	/* shards are looked up only where a step needs them: one may be gone */
	m->source = strcmp(m->step, "done") == 0 || strcmp(m->step, "failed") == 0 ? NULL :
		ShardLookup(CatalogText(&rows, 0, 3));
	m->target = m->source ? ShardLookup(CatalogText(&rows, 0, 4)) : NULL;
	return true;
}

/*
 * journal runs an UPDATE of the move's own row, as the attempt that holds
 * it ($1 = id, $2 = generation, then 'nargs' more).
 */
static void
journal(const CdMoveRow *m, const char *set, int nargs, Oid *types, Datum *values,
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
	if (CatalogExec(psprintf("UPDATE collegedb.move m SET %s, updated_at = now() "
							 "WHERE id = $1 AND generation = $2", set),
					nargs + 2, t, v, n, false, NULL) != 1)
		elog(ERROR, "move " INT64_FORMAT " changed hands while its row was locked", m->id);
}

/*
 * JournalSetStep records the step a move reached (with the rows it moved,
 * when given as JSON) and renews its lease.
 */
void
JournalSetStep(const CdMoveRow *m, const char *step, const char *rows)
{
	Oid			types[3] = {TEXTOID, JSONBOID, INT4OID};
	Datum		values[3];
	char		nulls[3] = "   ";

	values[0] = CStringGetTextDatum(step);
	values[1] = jsonb_or_null(rows, &nulls[1]);
	values[2] = Int32GetDatum(CollegeMoveLease);
	journal(m, "step = $3, rows = coalesce($4, rows), error = NULL, abandoned = false, "
			"lease_until = now() + $5 * interval '1 second'", 3, types, values, nulls);
}

/*
 * JournalEndMove ends a move: done, or failed with 'error' (NULL: the
 * error the journal has).  The key itself is forgotten (with hash_mappings
 * only its stored form stays), and the move's key in its job says how it
 * ended.
 */
void
JournalEndMove(const CdMoveRow *m, bool failed, const char *error, const char *rows)
{
	Oid			types[3] = {TEXTOID, TEXTOID, JSONBOID};
	Datum		values[3];
	char		nulls[3] = "   ";

	values[0] = CStringGetTextDatum(failed ? "failed" : "done");
	values[1] = text_or_null(error, &nulls[1]);
	values[2] = jsonb_or_null(rows, &nulls[2]);
	journal(m, "step = $3, error = CASE WHEN $3 = 'failed' THEN coalesce($4, error) END, "
			"rows = coalesce($5, rows), raw_key = NULL, lease_until = NULL, abandoned = false",
			3, types, values, nulls);
	if (m->job_id > 0)
		JournalSettleJobKey(m->job_id, m->key, !failed, NULL, m->id);
}

/*
 * JournalTakeMove makes this process the holder of a move that is not
 * finished, when its holder is gone (or is this process) and no step of it
 * is under way; returns the generation this attempt holds, 0 when it could
 * not.
 */
int64
JournalTakeMove(int64 move_id)
{
	Oid			types[5] = {INT8OID, INT4OID, TIMESTAMPTZOID, INT4OID, INT4OID};
	Datum		values[5];
	CdCatalogRows rows;
	bool		isnull;

	values[0] = Int64GetDatum(move_id);
	values[1] = Int32GetDatum(MyProcPid);
	values[2] = TimestampTzGetDatum(MyStartTimestamp);
	values[3] = Int32GetDatum(CollegeMoveLease);
	values[4] = Int32GetDatum(CollegeMoveMaxAttempts);
	/*
	 * A holder that is gone but never let the move go was killed or
	 * crashed: that is a failed attempt (with its delay before the next
	 * one, and giving up before the source step as any failure does), so a
	 * move that kills its worker cannot crash-loop the server.
	 */
	if (CatalogExec("UPDATE collegedb.move m SET generation = m.generation + 1, lease_pid = $2, "
					"lease_backend_start = $3, lease_until = now() + $4 * interval '1 second', "
					"updated_at = now(), "
					"attempts = m.attempts + CASE WHEN " DIED " THEN 1 ELSE 0 END, "
					"error = CASE WHEN " DIED " THEN format('its worker (process %s) died while it held the move', "
					"m.lease_pid) ELSE m.error END, "
					"next_attempt_at = CASE WHEN " DIED " THEN now() + " RETRY_DELAY " ELSE m.next_attempt_at END, "
					"abandoned = m.abandoned OR (" DIED " AND m.attempts + 1 >= $5 "
					"AND m.step IN ('journaled', 'copied')) "
					"WHERE m.id = (SELECT id FROM collegedb.move WHERE id = $1 "
					"              AND step NOT IN ('done', 'failed') FOR UPDATE SKIP LOCKED) "
					"AND (m.lease_pid IS NULL OR (m.lease_pid = $2 AND m.lease_backend_start = $3) "
					"     OR NOT " HOLDER_ALIVE ") "
					"RETURNING m.generation", 5, types, values, NULL, false, &rows) != 1)
		return 0;
	return DatumGetInt64(CatalogValue(&rows, 0, 1, &isnull));
}

/*
 * JournalStartMove journals a move of a key ('stored' its stored form) and
 * returns its id, held by this process (*generation).  An unfinished move
 * of the key whose holder is gone is taken over instead (*adopted; it may
 * go elsewhere than 'target').  One whose holder is alive is
 * MOVE_IN_PROGRESS, or, when 'busy' is given, returns 0 with that move's
 * id in *busy (-1: a mover that journaled the key just now).
 */
int64
JournalStartMove(int64 job_id, const char *stored, const char *key, const char *source,
				 const char *target, int64 *generation, bool *adopted, int64 *busy)
{
	Oid			types[9] = {INT8OID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT4OID,
	TIMESTAMPTZOID, INT4OID};
	Datum		values[9];
	char		nulls[9] = "        ";
	CdCatalogRows rows;
	bool		isnull;

	*adopted = false;
	values[0] = Int64GetDatum(job_id);
	nulls[0] = job_id > 0 ? ' ' : 'n';
	values[1] = CStringGetTextDatum(stored);
	values[2] = CStringGetTextDatum(key);
	values[3] = CStringGetTextDatum(source);
	values[4] = CStringGetTextDatum(target);
	values[5] = Int32GetDatum(MyProcPid);
	values[6] = TimestampTzGetDatum(MyStartTimestamp);
	values[7] = Int32GetDatum(CollegeMoveLease);

	if (CatalogExec("SELECT id, m.lease_pid IS NOT NULL "
					"AND NOT (m.lease_pid = $6 AND m.lease_backend_start = $7) AND " HOLDER_ALIVE ", "
					"coalesce(m.lease_pid, 0) "
					"FROM collegedb.move m WHERE key = $2 AND step NOT IN ('done', 'failed')",
					8, types, values, nulls, false, &rows) > 0)
	{
		int64		id = DatumGetInt64(CatalogValue(&rows, 0, 1, &isnull));
		bool		alive = DatumGetBool(CatalogValue(&rows, 0, 2, &isnull));
		int			pid = DatumGetInt32(CatalogValue(&rows, 0, 3, &isnull));

		if (!alive)
			*generation = JournalTakeMove(id);
		if ((alive || *generation == 0) && busy != NULL)
		{
			*busy = id;
			return 0;
		}
		if (alive || *generation == 0)
			ereport(ERROR,
					(errcode(ERRCODE_CD_MOVE_IN_PROGRESS),
					 errmsg("the key is already being moved"),
					 errdetail("Move " INT64_FORMAT " is running in process %d.", id, pid)));
		if (job_id > 0)
		{
			Oid			t[2] = {INT8OID, INT8OID};
			Datum		v[2] = {Int64GetDatum(id), Int64GetDatum(job_id)};

			(void) CatalogExec("UPDATE collegedb.move SET job_id = $2 WHERE id = $1",
							   2, t, v, NULL, false, NULL);
		}
		*adopted = true;
		return id;
	}

	/* a mover that got here first, between the check above and now */
	if (CatalogExec("INSERT INTO collegedb.move (job_id, key, raw_key, source, target, generation, "
					"lease_pid, lease_backend_start, lease_until) "
					"VALUES ($1, $2, $3, $4, $5, 1, $6, $7, now() + $8 * interval '1 second') "
					"ON CONFLICT (key) WHERE step NOT IN ('done', 'failed') DO NOTHING "
					"RETURNING id", 8, types, values, nulls, false, &rows) == 0)
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
	return DatumGetInt64(CatalogValue(&rows, 0, 1, &isnull));
}

/*
 * JournalMoveError returns the error a move recorded, NULL when none.
 */
char *
JournalMoveError(int64 move_id)
{
	return CatalogTextById("SELECT error FROM collegedb.move WHERE id = $1", move_id);
}

/*
 * JournalRecordFailure records a failed attempt of a move held with
 * 'generation': its error, one more attempt, when to retry, and whether
 * the move gives up (after collegedb.move_max_attempts, and only before
 * its source step).
 */
void
JournalRecordFailure(int64 move_id, int64 generation, const char *message)
{
	Oid			types[4] = {INT8OID, INT8OID, TEXTOID, INT4OID};
	Datum		values[4];

	values[0] = Int64GetDatum(move_id);
	values[1] = Int64GetDatum(generation);
	values[2] = CStringGetTextDatum(message);
	values[3] = Int32GetDatum(CollegeMoveMaxAttempts);
	(void) CatalogExec("UPDATE collegedb.move m SET error = " REDACT_KEY("$3", "m.raw_key", "m.key") ", "
					   "attempts = m.attempts + 1, "
					   "next_attempt_at = now() + " RETRY_DELAY ", "
					   "abandoned = m.abandoned OR (m.attempts + 1 >= $4 AND m.step IN ('journaled', 'copied')), "
					   "updated_at = now() "
					   "WHERE id = $1 AND generation = $2 AND step NOT IN ('done', 'failed')",
					   4, types, values, NULL, false, NULL);
}

/*
 * JournalRetryLater lets a move held with 'generation' go until its retry
 * is due, recording 'error' when given (NULL: the error stays).
 */
void
JournalRetryLater(int64 move_id, int64 generation, const char *error)
{
	Oid			types[3] = {INT8OID, INT8OID, TEXTOID};
	Datum		values[3];
	char		nulls[4] = "   ";

	values[0] = Int64GetDatum(move_id);
	values[1] = Int64GetDatum(generation);
	values[2] = text_or_null(error, &nulls[2]);
	(void) CatalogExec("UPDATE collegedb.move m SET "
					   "error = coalesce(" REDACT_KEY("$3", "m.raw_key", "m.key") ", error), "
					   "next_attempt_at = now() + " RETRY_DELAY ", "
					   "lease_pid = NULL, lease_backend_start = NULL, lease_until = NULL "
					   "WHERE id = $1 AND generation = $2 AND step NOT IN ('done', 'failed')",
					   3, types, values, nulls, false, NULL);
}

/*
 * JournalReleaseMove lets a move held with 'generation' go: its holder is
 * gone, for the coordinator.
 */
void
JournalReleaseMove(int64 move_id, int64 generation)
{
	Oid			types[2] = {INT8OID, INT8OID};
	Datum		values[2] = {Int64GetDatum(move_id), Int64GetDatum(generation)};

	(void) CatalogExec("UPDATE collegedb.move SET lease_pid = NULL, lease_backend_start = NULL, "
					   "lease_until = NULL WHERE id = $1 AND generation = $2 "
					   "AND step NOT IN ('done', 'failed')",
					   2, types, values, NULL, false, NULL);
}

/*
 * JournalMoveHeld says whether a move is unfinished and held by a live
 * process.
 */
bool
JournalMoveHeld(int64 move_id)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(move_id)};

	return CatalogExec("SELECT 1 FROM collegedb.move m WHERE id = $1 "
					   "AND step NOT IN ('done', 'failed') AND " HOLDER_ALIVE,
					   1, types, values, NULL, false, NULL) > 0;
}

/*
 * JournalMoveAbandoned says whether a move gave up (and waits for the
 * removal of the target's copy of its key).
 */
bool
JournalMoveAbandoned(int64 move_id)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(move_id)};
	CdCatalogRows rows;
	bool		isnull;

	if (CatalogExec("SELECT abandoned FROM collegedb.move WHERE id = $1",
					1, types, values, NULL, false, &rows) == 0)
		return false;
	return DatumGetBool(CatalogValue(&rows, 0, 1, &isnull));
}

/*
 * JournalLiveMove finds the unfinished move of a key (its stored form) that
 * a live process holds: false when there is none.
 */
bool
JournalLiveMove(const char *stored, int64 *move_id, int *pid)
{
	CdCatalogRows rows;
	bool		isnull;

	if (CatalogExecTexts(NULL, "SELECT m.id, m.lease_pid FROM collegedb.move m "
						 "WHERE m.key = $1 AND m.step NOT IN ('done', 'failed') AND " HOLDER_ALIVE,
						 1, &stored, false, &rows) != 1)
		return false;
	*move_id = DatumGetInt64(CatalogValue(&rows, 0, 1, &isnull));
	*pid = DatumGetInt32(CatalogValue(&rows, 0, 2, &isnull));
	return true;
}

/*
 * JournalUnfinishedMoves lists the unfinished moves, oldest first, as
 * CdUnfinishedMove: who holds each, whether that holder is alive, whether
 * its lease expired and whether its retry is due.  The owner is the role
 * of the move's job (the bootstrap superuser for a move without one).
 */
List *
JournalUnfinishedMoves(void)
{
	CdCatalogRows rows;
	List	   *moves = NIL;

	(void) CatalogExec("SELECT m.id, coalesce(j.owner, 10), m.generation, coalesce(m.lease_pid, 0), "
					   HOLDER_ALIVE ", "
					   "coalesce(m.lease_until < now(), false), "
					   "coalesce(m.next_attempt_at <= now(), true) "
					   "FROM collegedb.move m LEFT JOIN collegedb.job j ON j.id = m.job_id "
					   "WHERE m.step NOT IN ('done', 'failed') ORDER BY m.id",
					   0, NULL, NULL, NULL, false, &rows);
	for (uint64 i = 0; i < rows.count; i++)
	{
		CdUnfinishedMove *u = palloc(sizeof(CdUnfinishedMove));
		bool		isnull;

		u->id = DatumGetInt64(CatalogValue(&rows, i, 1, &isnull));
		u->owner = DatumGetObjectId(CatalogValue(&rows, i, 2, &isnull));
		u->generation = DatumGetInt64(CatalogValue(&rows, i, 3, &isnull));
		u->pid = DatumGetInt32(CatalogValue(&rows, i, 4, &isnull));
		u->alive = DatumGetBool(CatalogValue(&rows, i, 5, &isnull));
		u->expired = DatumGetBool(CatalogValue(&rows, i, 6, &isnull));
		u->due = DatumGetBool(CatalogValue(&rows, i, 7, &isnull));
		moves = lappend(moves, u);
	}
	return moves;
}

/*
 * JournalAnyMoveBeforeSource says whether any move has not passed its
 * source step yet (journaled or copied), on the caller's snapshot.
 */
bool
JournalAnyMoveBeforeSource(void)
{
	return CatalogExec("SELECT 1 FROM collegedb.move WHERE step NOT IN ('done', 'failed') "
					   "AND step IN ('journaled', 'copied') LIMIT 1",
					   0, NULL, NULL, NULL, true, NULL) > 0;
}

/*
 * JournalMovingSource returns the source of the key's move (its stored
 * form) when that move has not passed its source step, else NULL; on the
 * caller's snapshot.
 */
char *
JournalMovingSource(const char *stored)
{
	CdCatalogRows rows;

	if (CatalogExecTexts(NULL, "SELECT source FROM collegedb.move WHERE key = $1 "
						 "AND step NOT IN ('done', 'failed') "
						 "AND step IN ('journaled', 'copied')",
						 1, &stored, true, &rows) != 1)
		return NULL;
	return CatalogText(&rows, 0, 1);
}

/*
 * JournalMoveResult renders a finished move for its job's result: moved,
 * its id, from, to and the rows of each table.
 */
char *
JournalMoveResult(int64 move_id)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(move_id)};
	CdCatalogRows rows;

	if (CatalogExec("SELECT jsonb_build_object('moved', true, 'move_id', id, 'from', source, 'to', target, "
					"'rows', rows)::text FROM collegedb.move WHERE id = $1",
					1, types, values, NULL, false, &rows) != 1)
		elog(ERROR, "move " INT64_FORMAT " vanished", move_id);
	return CatalogText(&rows, 0, 1);
}

/*
 * JournalLastMoveOfJob reads the newest move of a job: false when it has
 * none.
 */
bool
JournalLastMoveOfJob(int64 job_id, int64 *move_id, char **step, int *attempts,
					 bool *abandoned)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(job_id)};
	CdCatalogRows rows;
	bool		isnull;

	if (CatalogExec("SELECT id, step, attempts, abandoned FROM collegedb.move "
					"WHERE job_id = $1 ORDER BY id DESC LIMIT 1",
					1, types, values, NULL, false, &rows) != 1)
		return false;
	*move_id = DatumGetInt64(CatalogValue(&rows, 0, 1, &isnull));
	*step = CatalogText(&rows, 0, 2);
	*attempts = DatumGetInt32(CatalogValue(&rows, 0, 3, &isnull));
	*abandoned = DatumGetBool(CatalogValue(&rows, 0, 4, &isnull));
	return true;
}

/* Batches of moves (worker/move_batches.c) */

static Datum
text_array(int n, char *const *texts)
{
	Datum	   *d = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		d[i] = CStringGetTextDatum(texts[i]);
	return PointerGetDatum(construct_array(d, n, TEXTOID, -1, false, TYPALIGN_INT));
}

static Datum
int8_array(int n, const int64 *ids)
{
	Datum	   *d = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		d[i] = Int64GetDatum(ids[i]);
	return PointerGetDatum(construct_array(d, n, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

/*
 * JournalStartMoves journals, in one statement, a move of each of 'n'
 * keys ('stored' their stored forms, 'keys' as given) from 'source' to
 * 'target', each held by this process with generation 1: ids[i] is key
 * i's move, 0 for a key that has an unfinished move already (the caller
 * moves that one alone, MoveStart deciding what becomes of it).
 */
void
JournalStartMoves(int64 job_id, int n, char *const *stored, char *const *keys,
				  const char *source, const char *target, int64 *ids)
{
	Oid			types[8] = {INT8OID, TEXTARRAYOID, TEXTARRAYOID, TEXTOID, TEXTOID, INT4OID,
	TIMESTAMPTZOID, INT4OID};
	Datum		values[8];
	char		nulls[9] = "        ";
	CdCatalogRows rows;

	values[0] = Int64GetDatum(job_id);
	nulls[0] = job_id > 0 ? ' ' : 'n';
	values[1] = text_array(n, stored);
	values[2] = text_array(n, keys);
	values[3] = CStringGetTextDatum(source);
	values[4] = CStringGetTextDatum(target);
	values[5] = Int32GetDatum(MyProcPid);
	values[6] = TimestampTzGetDatum(MyStartTimestamp);
	values[7] = Int32GetDatum(CollegeMoveLease);
	if (CatalogExec("WITH ins AS (INSERT INTO collegedb.move (job_id, key, raw_key, source, target, "
					"generation, lease_pid, lease_backend_start, lease_until) "
					"SELECT $1, k, r, $4, $5, 1, $6, $7, now() + $8 * interval '1 second' "
					"FROM unnest($2::text[], $3::text[]) AS u(k, r) "
					"ON CONFLICT (key) WHERE step NOT IN ('done', 'failed') DO NOTHING "
					"RETURNING id, key) "
					"SELECT coalesce(ins.id, 0) FROM unnest($2::text[]) WITH ORDINALITY AS u(k, o) "
					"LEFT JOIN ins ON ins.key = u.k ORDER BY u.o",
					8, types, values, nulls, false, &rows) != (uint64) n)
		elog(ERROR, "a batch of %d moves was journaled as " UINT64_FORMAT, n, rows.count);
	for (int i = 0; i < n; i++)
	{
		bool		isnull;

		ids[i] = DatumGetInt64(CatalogValue(&rows, i, 1, &isnull));
	}
}

/*
 * JournalLockMoves locks the rows of a batch's moves that this attempt
 * still holds (their generations) at 'step', as JournalLoadMove locks one:
 * held[i] says whether move ids[i] is one of them.
 */
void
JournalLockMoves(int n, const int64 *ids, const int64 *generations, const char *step,
				 bool *held)
{
	Oid			types[3] = {INT8ARRAYOID, INT8ARRAYOID, TEXTOID};
	Datum		values[3];
	CdCatalogRows rows;

	values[0] = int8_array(n, ids);
	values[1] = int8_array(n, generations);
	values[2] = CStringGetTextDatum(step);
	memset(held, 0, sizeof(bool) * n);
	(void) CatalogExec("SELECT u.o FROM unnest($1::bigint[], $2::bigint[]) WITH ORDINALITY AS u(id, g, o) "
					   "JOIN collegedb.move m ON m.id = u.id AND m.generation = u.g AND m.step = $3 "
					   "ORDER BY m.id FOR UPDATE OF m",
					   3, types, values, NULL, false, &rows);
	for (uint64 r = 0; r < rows.count; r++)
	{
		bool		isnull;
		int64		o = DatumGetInt64(CatalogValue(&rows, r, 1, &isnull));

		held[o - 1] = true;
	}
}

/*
 * JournalSetSteps records, in one statement, the step a batch's moves
 * reached (as JournalSetStep for each), renewing their leases; their rows
 * must be locked (JournalLockMoves).
 */
void
JournalSetSteps(int n, const int64 *ids, const int64 *generations, const char *step)
{
	Oid			types[4] = {INT8ARRAYOID, INT8ARRAYOID, TEXTOID, INT4OID};
	Datum		values[4];

	values[0] = int8_array(n, ids);
	values[1] = int8_array(n, generations);
	values[2] = CStringGetTextDatum(step);
	values[3] = Int32GetDatum(CollegeMoveLease);
	if (CatalogExec("UPDATE collegedb.move m SET step = $3, error = NULL, abandoned = false, "
					"lease_until = now() + $4 * interval '1 second', updated_at = now() "
					"FROM unnest($1::bigint[], $2::bigint[]) AS u(id, g) "
					"WHERE m.id = u.id AND m.generation = u.g",
					4, types, values, NULL, false, NULL) != (uint64) n)
		elog(ERROR, "moves of a batch changed hands while their rows were locked");
}

/*
 * JournalEndMoves ends a batch's moves done, in one statement (as
 * JournalEndMove for each), and, with a job, settles their keys ('stored'
 * their stored forms) moved.
 */
void
JournalEndMoves(int64 job_id, int n, const int64 *ids, const int64 *generations,
				char *const *stored)
{
	Oid			types[2] = {INT8ARRAYOID, INT8ARRAYOID};
	Datum		values[2];

	values[0] = int8_array(n, ids);
	values[1] = int8_array(n, generations);
	if (CatalogExec("UPDATE collegedb.move m SET step = 'done', error = NULL, raw_key = NULL, "
					"lease_until = NULL, abandoned = false, updated_at = now() "
					"FROM unnest($1::bigint[], $2::bigint[]) AS u(id, g) "
					"WHERE m.id = u.id AND m.generation = u.g",
					2, types, values, NULL, false, NULL) != (uint64) n)
		elog(ERROR, "moves of a batch changed hands while their rows were locked");
	if (job_id > 0)
	{
		types[0] = INT8OID;
		values[0] = Int64GetDatum(job_id);
		types[1] = TEXTARRAYOID;
		values[1] = text_array(n, stored);
		(void) CatalogExec("UPDATE collegedb.job_key SET state = 'moved', error = NULL, raw_key = NULL, "
						   "settled_at = clock_timestamp() "
						   "WHERE job_id = $1 AND key = ANY ($2::text[])",
						   2, types, values, NULL, false, NULL);
	}
}
