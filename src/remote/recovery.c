/*-------------------------------------------------------------------------
 *
 * recovery.c
 *	  Resolves the prepared transactions that two-phase commit
 *	  (twophase.c) left on the shards when a front transaction could not
 *	  finish its commit: a crash, a shard or connection lost midway.
 *
 * One pass (RecoveryRun) lists this front database's prepared transactions
 * on every shard that can prepare (CdTwoPhaseSql.list_prepared, filtered by
 * the gid's front prefix and server), and the markers of every last
 * participant (CdMarkerSql.list), then decides each prepared transaction
 * by its front transaction (named in its gid):
 *	- still running: left alone (it decides itself);
 *	- its decision record exists (catalog/decisions.c): commit;
 *	- over without a record, but a last participant holds its marker (the
 *	  front died between that commit and its own): commit;
 *	- over without a record, and no marker while every last participant
 *	  was listed: roll back;
 *	- otherwise (a last participant could not be listed): undecided, next
 *	  time.
 * The running check comes before the record is read, with a new snapshot:
 * a transaction that commits in between is seen committed.  A shard that
 * cannot be reached is retried at the next pass.  Decision records and
 * markers are forgotten once every shard was listed and none lists a
 * prepared transaction of theirs, if they are older than the pass's start
 * (every PREPARE of a transaction precedes its record and marker, so the
 * listings saw whatever was still prepared).  Passes are serialized by a
 * transaction-level advisory lock, so nothing is decided twice; a gid
 * decided meanwhile by its own backend is reported as gone.
 *
 * The coordinator runs a pass when it starts and every
 * collegedb.recovery_interval; collegedb.recover_prepared_transactions()
 * runs one on demand, and the view collegedb.prepared_transactions shows
 * what a pass would do without doing it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "storage/procarray.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "catalog/decisions.h"
#include "catalog/shards.h"
#include "collegedb.h"
#include "remote/connection_internal.h"

/* the advisory lock that serializes recovery passes of one database */
#define RECOVERY_LOCK_KEY1 0x63646232	/* "cdb2" */
#define RECOVERY_LOCK_KEY2 0x70633172	/* "pc1r" */

/* one prepared transaction found on a shard */
typedef struct Prepared
{
	const CdShard *shard;
	char	   *gid;
	char		xact[CD_XACT_SIZE];
	FullTransactionId fxid;
} Prepared;

/* one marker found on a last participant */
typedef struct Marker
{
	const CdShard *shard;
	char	   *xact;
	TimestampTz created;
} Marker;

/* one statement of a pass, run in autocommit (see RemoteRunAlone) */
typedef struct ShardCall
{
	const CdShard *shard;
	const char *sql;
	const char *gid;			/* for a two-phase command: its %s */
	int			nparams;
	CdParam    *params;
	CaptureRowSink *sink;
	bool		ok;
	CdRemoteError err;
} ShardCall;

/*
 * shard_call runs a ShardCall on the shard's connection, outside any
 * remote transaction (COMMIT PREPARED and XA COMMIT refuse to run in one);
 * a remote failure is left in the call, a failure to connect raises.
 */
static void
shard_call(void *arg)
{
	ShardCall  *call = arg;
	CdConnection *conn = ConnectionGet(call->shard);
	int64		rows;
	char	   *sql = call->gid ? psprintf(call->sql, call->gid) : (char *) call->sql;

	if (conn->xact_depth > 0)
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("cannot resolve prepared transactions on shard \"%s\" while this transaction uses it",
						call->shard->name)));
	memset(&call->err, 0, sizeof(call->err));
	conn->in_flight = true;
	conn->in_flight_level = GetCurrentTransactionNestLevel();
	call->ok = conn->adapter->exec(conn->handle, 0, NULL, sql, call->nparams, call->params,
								   CD_EXEC_INTERNAL | (IsBackgroundWorker ? CD_EXEC_CLEANUP : 0),
								   call->sink ? &call->sink->base : NULL, &rows, &call->err);
	conn->in_flight = false;
	if (!call->ok && call->err.connection_lost)
		ConnectionClose(conn);
}

/*
 * RemoteRunAlone runs 'sql' (with 'gid' for its %s, or none) on 'shard'
 * in the shard's autocommit, outside any remote transaction (also for
 * remote/deadlock.c),
 * rows to 'sink'; returns NULL when it worked, else the error's message.
 * *unknown (may be NULL) says the shard answered that no such prepared
 * transaction exists (or another session holds it).
 */
char *
RemoteRunAlone(const CdShard *shard, const char *sql, const char *gid, int nparams,
			 CdParam *params, CaptureRowSink *sink, bool *unknown)
{
	ShardCall	call;
	ErrorData  *failure;
	const CdAdapter *adapter = AdapterForDialect(shard->dialect);

	memset(&call, 0, sizeof(call));
	call.shard = shard;
	call.sql = sql;
	call.gid = gid;
	call.nparams = nparams;
	call.params = params;
	call.sink = sink;
	if (unknown)
		*unknown = false;
	if (!RemoteTry(shard_call, &call, &failure))
		return failure->message;
	if (call.ok)
		return NULL;
	if (unknown && adapter->caps.two_phase &&
		strcmp(call.err.sqlstate, adapter->two_phase_sql->missing_sqlstate) == 0)
		*unknown = true;
	return call.err.message ? call.err.message : pstrdup("unknown error");
}

/*
 * in_doubt appends one row of a pass's report.
 */
static List *
in_doubt(List *out, const CdShard *shard, const char *gid, const char *action,
		 const char *error)
{
	CdInDoubt  *row = palloc0(sizeof(CdInDoubt));

	row->shard = pstrdup(shard->name);
	row->gid = gid ? pstrdup(gid) : NULL;
	row->action = pstrdup(action);
	row->error = error ? pstrdup(error) : NULL;
	return lappend(out, row);
}

/*
 * list_prepared adds the shard's prepared transactions of this front to
 * *prepared; false (and a row in *out) when the shard could not be listed.
 */
static bool
list_prepared(const CdShard *shard, List **prepared, List **out)
{
	const CdAdapter *adapter = AdapterForDialect(shard->dialect);
	CaptureRowSink sink;
	char	   *error;
	ListCell   *lc;

	CaptureRowSinkInit(&sink);
	error = RemoteRunAlone(shard, adapter->two_phase_sql->list_prepared, NULL, 0, NULL,
						 &sink, NULL);
	if (error)
	{
		*out = in_doubt(*out, shard, NULL, "unreachable", error);
		return false;
	}
	foreach(lc, sink.rows)
	{
		CdParam    *row = lfirst(lc);
		const CdParam *gid = &row[sink.ncols - 1];
		Prepared   *p = palloc0(sizeof(Prepared));
		Oid			serverid;

		if (gid->kind == CD_VALUE_NULL ||
			!TwoPhaseParseGid(gid->str, p->xact, &p->fxid, &serverid) ||
			serverid != shard->serverid)
			continue;
		p->shard = shard;
		p->gid = pstrdup(gid->str);
		*prepared = lappend(*prepared, p);
	}
	return true;
}

/*
 * list_markers adds the last participant's markers to *markers; false
 * (and a row in *out) when the shard could not be listed.
 */
static bool
list_markers(const CdShard *shard, List **markers, List **out)
{
	const CdMarkerSql *sql = AdapterForDialect(shard->dialect)->marker_sql;
	CaptureRowSink sink;
	char	   *error;
	ListCell   *lc;

	CaptureRowSinkInit(&sink);
	error = RemoteRunAlone(shard, sql->ddl, NULL, 0, NULL, NULL, NULL);
	if (error == NULL)
		error = RemoteRunAlone(shard, sql->list, NULL, 0, NULL, &sink, NULL);
	if (error)
	{
		*out = in_doubt(*out, shard, NULL, "unreachable", error);
		return false;
	}
	foreach(lc, sink.rows)
	{
		CdParam    *row = lfirst(lc);
		Marker	   *m = palloc0(sizeof(Marker));

		if (row[0].kind == CD_VALUE_NULL)
			continue;
		m->shard = shard;
		m->xact = pstrdup(row[0].str);
		m->created = row[1].kind == CD_VALUE_INT ? (TimestampTz) row[1].ival :
			(TimestampTz) strtoll(row[1].str ? row[1].str : "0", NULL, 10);
		*markers = lappend(*markers, m);
	}
	return true;
}

static bool
has_marker(List *markers, const char *xact)
{
	ListCell   *lc;

	foreach(lc, markers)
		if (strcmp(((Marker *) lfirst(lc))->xact, xact) == 0)
			return true;
	return false;
}

static bool
is_listed(List *prepared, const char *xact)
{
	ListCell   *lc;

	foreach(lc, prepared)
		if (strcmp(((Prepared *) lfirst(lc))->xact, xact) == 0)
			return true;
	return false;
}

/*
 * decide works out what becomes of a prepared transaction (see the file
 * header): "commit", "roll back", "in progress" or "undecided".
 */
static const char *
decide(const Prepared *p, List *markers, bool markers_complete)
{
	if (TransactionIdIsInProgress(XidFromFullTransactionId(p->fxid)))
		return "in progress";
	if (DecisionExists(p->xact) || has_marker(markers, p->xact))
		return "commit";
	if (!markers_complete)
		return "undecided";
	return "roll back";
}

/*
 * forget deletes the decision records and markers that no prepared
 * transaction needs any more (see the file header).
 */
static void
forget(List *prepared, List *markers, TimestampTz start)
{
	char		prefix[CD_XACT_SIZE];
	ListCell   *lc;

	foreach(lc, DecisionList())
	{
		CdDecision *d = lfirst(lc);

		if (d->decided_at < start && !is_listed(prepared, d->xact))
			DecisionForget(d->xact);
	}
	TwoPhaseFrontPrefix(prefix);
	foreach(lc, markers)
	{
		Marker	   *m = lfirst(lc);
		CdParam		param;

		if (m->created >= start || is_listed(prepared, m->xact) ||
			strncmp(m->xact, prefix, strlen(prefix)) != 0)
			continue;
		memset(&param, 0, sizeof(param));
		param.kind = CD_VALUE_TEXT;
		param.str = m->xact;
		param.len = strlen(m->xact);
		/* a marker that stays is forgotten at a later pass */
		(void) RemoteRunAlone(m->shard, AdapterForDialect(m->shard->dialect)->marker_sql->forget,
							NULL, 1, &param, NULL, NULL);
	}
}

/*
 * RecoveryRun runs one pass over every shard and returns what it found,
 * as CdInDoubt rows: with 'act', what it did ("committed", "rolled back",
 * "in progress", "undecided", "gone": decided meanwhile by another
 * session, "failed", "unreachable"), else what it would do ("commit",
 * "roll back", "in progress", "undecided", "unreachable").  Must not run
 * in a transaction that has work open on a shard.
 */
List *
RecoveryRun(bool act)
{
	List	   *out = NIL;
	List	   *prepared = NIL;
	List	   *markers = NIL;
	bool		listed_all = true;
	bool		markers_complete = true;
	TimestampTz start;
	ListCell   *lc;

	/*
	 * A decision is read with a new snapshot, after the front transaction
	 * was seen over: a transaction snapshot could miss its record.
	 */
	if (act && IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("prepared transactions can be recovered only in a READ COMMITTED transaction")));
	if (act)
	{
		LOCKTAG		tag;

		SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, RECOVERY_LOCK_KEY1, RECOVERY_LOCK_KEY2, 2);
		(void) LockAcquire(&tag, ExclusiveLock, false, false);
	}
	start = GetCurrentTimestamp();

	foreach(lc, ShardList())
	{
		const CdShard *shard = lfirst(lc);
		const CdAdapter *adapter = AdapterForDialect(shard->dialect);

		/* a shard whose foreign server is gone cannot be reached any more */
		if (!OidIsValid(shard->serverid))
			continue;
		if (adapter->caps.two_phase && !list_prepared(shard, &prepared, &out))
			listed_all = false;
		if (adapter->caps.last_participant && !list_markers(shard, &markers, &out))
			markers_complete = false;
	}

	foreach(lc, prepared)
	{
		Prepared   *p = lfirst(lc);
		const char *what = decide(p, markers, markers_complete);
		const CdTwoPhaseSql *sql = AdapterForDialect(p->shard->dialect)->two_phase_sql;
		bool		commit = strcmp(what, "commit") == 0;
		bool		unknown;
		char	   *error;

		if (!act || (!commit && strcmp(what, "roll back") != 0))
		{
			out = in_doubt(out, p->shard, p->gid, what, NULL);
			continue;
		}
		error = RemoteRunAlone(p->shard, commit ? sql->commit_prepared : sql->rollback_prepared,
							 p->gid, 0, NULL, NULL, &unknown);
		if (error == NULL)
		{
			if (commit)
				ereport(LOG,
						(errmsg("collegedb: committed prepared transaction %s on shard \"%s\"",
								p->gid, p->shard->name)));
			else
				ereport(LOG,
						(errmsg("collegedb: rolled back prepared transaction %s on shard \"%s\"",
								p->gid, p->shard->name)));
			out = in_doubt(out, p->shard, p->gid, commit ? "committed" : "rolled back", NULL);
		}
		else
		{
			/* a failure stays prepared and is tried again at the next pass */
			if (!unknown && commit)
				ereport(LOG,
						(errmsg("collegedb: could not commit prepared transaction %s on shard \"%s\": %s",
								p->gid, p->shard->name, error)));
			else if (!unknown)
				ereport(LOG,
						(errmsg("collegedb: could not roll back prepared transaction %s on shard \"%s\": %s",
								p->gid, p->shard->name, error)));
			out = in_doubt(out, p->shard, p->gid, unknown ? "gone" : "failed", error);
		}
	}

	if (act && listed_all && markers_complete)
		forget(prepared, markers, start);
	return out;
}
