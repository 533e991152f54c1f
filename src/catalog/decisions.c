/*-------------------------------------------------------------------------
 *
 * decisions.c
 *	  Reads and writes collegedb.commit_decision, the front's record that a
 *	  front transaction committed after preparing its shards.
 *
 * A row is inserted by the front transaction itself, at its pre-commit
 * (remote/twophase.c): it exists exactly when that transaction committed.
 * Recovery (remote/recovery.c) commits a prepared participant whose front
 * transaction has a row, and deletes rows once no shard lists a prepared
 * participant of theirs.  The table is not dumped: a row only means
 * something to the cluster and database whose transaction wrote it (its
 * name carries their identity), and a dump restored elsewhere is another
 * front.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "catalog/catalog.h"
#include "catalog/decisions.h"

/*
 * DecisionRecord inserts the decision record of front transaction 'xact'
 * in the current transaction.
 */
void
DecisionRecord(const char *xact)
{
	static SPIPlanPtr plan = NULL;
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(xact)};
	/* at pre-commit the statement's portal and snapshot are gone */
	bool		push = !ActiveSnapshotSet();

	if (push)
		PushActiveSnapshot(GetTransactionSnapshot());
	(void) CatalogExecPlan(&plan,
						   "INSERT INTO collegedb.commit_decision (xact, decided_at) "
						   "VALUES ($1, pg_catalog.clock_timestamp())",
						   1, types, values, NULL, false, NULL);
	if (push)
		PopActiveSnapshot();
}

/*
 * DecisionExists says whether front transaction 'xact' committed its
 * decision, by a snapshot taken now (the caller asked first whether the
 * transaction is still running: a record committed since is seen).
 */
bool
DecisionExists(const char *xact)
{
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(xact)};

	return CatalogExec("SELECT 1 FROM collegedb.commit_decision WHERE xact = $1",
					   1, types, values, NULL, false, NULL) > 0;
}

/*
 * DecisionList returns every decision record (CdDecision).
 */
List *
DecisionList(void)
{
	CdCatalogRows rows;
	List	   *out = NIL;

	(void) CatalogExec("SELECT xact, decided_at FROM collegedb.commit_decision ORDER BY xact",
					   0, NULL, NULL, NULL, false, &rows);
	for (uint64 i = 0; i < rows.count; i++)
	{
		CdDecision *d = palloc(sizeof(CdDecision));
		bool		isnull;

		d->xact = CatalogText(&rows, i, 1);
		d->decided_at = DatumGetTimestampTz(CatalogValue(&rows, i, 2, &isnull));
		out = lappend(out, d);
	}
	return out;
}

/*
 * DecisionForget deletes the decision record of 'xact'.
 */
void
DecisionForget(const char *xact)
{
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(xact)};

	(void) CatalogExec("DELETE FROM collegedb.commit_decision WHERE xact = $1",
					   1, types, values, NULL, false, NULL);
}
