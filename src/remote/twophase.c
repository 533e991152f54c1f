/*-------------------------------------------------------------------------
 *
 * twophase.c
 *	  Two-phase commit of a front transaction that wrote on several shards
 *	  (README.md "Transactions across shards"), and the global transaction ids it uses.
 *
 * The end of every front transaction is xact.c's; this file holds the
 * two-phase path it takes.  At the front's pre-commit:
 *	- fewer than two participants wrote, or collegedb.commit_protocol is
 *	  'sequential' (xact.c): the readers commit at once (all COMMITs sent,
 *	  then all awaited), so a transaction over many shards pays one round
 *	  trip for their commits, then each writer in turn.  The readers go first because a reader's COMMIT can fail (a
 *	  serialization failure): it then aborts the front before the one
 *	  writer committed, so the write is rolled back with it;
 *	- otherwise the readers commit first, at once (they cannot change the
 *	  outcome), then every writer that can prepare
 *	  (CdCapabilities.two_phase) is prepared under its global transaction
 *	  id, then the one writer that
 *	  cannot (SQLite, CdCapabilities.last_participant) inserts a marker of
 *	  the front transaction and commits: its outcome is the decision.  The
 *	  decision record in collegedb.commit_decision, in the front's own
 *	  transaction, is written (and flushed) before the first PREPARE; it
 *	  counts once the front commits.  Any failure until the front's commit
 *	  raises, and the front's abort rolls every prepared participant back
 *	  (xact.c).
 * At the front's commit (interrupts are held, nothing may raise): the
 * decision is flushed to the front's WAL, then every prepared participant
 * is committed, each wait bounded by collegedb.cleanup_timeout; what fails
 * is left to recovery (recovery.c) with a WARNING.  From its decision
 * record to its end such a transaction counts in shared memory as
 * running, and one that aborted or left a participant prepared is noted
 * there, which is what tells the coordinators whether a recovery pass can
 * find anything (ActivityTwoPhaseQuiet).
 *
 * A global transaction id is "cdb_<system identifier>_<database oid>_
 * <full xid>_<server oid>" in hex: the front (so that recovery knows its
 * own), the front transaction (whose state recovery asks), and the shard
 * server (two servers on one PostgreSQL cluster or MariaDB server must not
 * collide).  A dialect that can only prepare what began as a two-phase
 * transaction (MySQL's XA START) gets its id when the remote transaction
 * begins (TwoPhaseBeginGid), which assigns the front transaction its xid.
 *
 * The narrow window: when the front dies after the last participant
 * committed and before its own commit, recovery commits the prepared
 * participants (the marker decides), but the front's own changes of that
 * transaction (new key mappings, for instance) are lost with it.  README
 * "Transactions across shards" says so.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "access/transam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "replication/syncrep.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "catalog/catalog.h"
#include "catalog/decisions.h"
#include "cd_errcodes.h"
#include "collegedb.h"
#include "remote/connection_internal.h"

/*
 * TwoPhaseFrontPrefix writes "cdb_<system identifier>_<database oid>_",
 * the start of every global transaction id of this front database.
 */
void
TwoPhaseFrontPrefix(char *buf)
{
	snprintf(buf, CD_XACT_SIZE, "cdb_%016llx_%08x_",
			 (unsigned long long) GetSystemIdentifier(), MyDatabaseId);
}

/*
 * TwoPhaseXactName writes the name of front transaction 'fxid': the front
 * prefix and the full xid.
 */
void
TwoPhaseXactName(FullTransactionId fxid, char *buf)
{
	snprintf(buf, CD_XACT_SIZE, "cdb_%016llx_%08x_%016llx",
			 (unsigned long long) GetSystemIdentifier(), MyDatabaseId,
			 (unsigned long long) U64FromFullTransactionId(fxid));
}

/*
 * gid_for writes the global transaction id of front transaction 'fxid' on
 * server 'serverid'.
 */
static void
gid_for(FullTransactionId fxid, Oid serverid, char *gid)
{
	char		xact[CD_XACT_SIZE];

	TwoPhaseXactName(fxid, xact);
	snprintf(gid, CD_GID_SIZE, "%s_%08x", xact, serverid);
}

/*
 * TwoPhaseParseGid says whether 'gid' is one of this front database's,
 * and then returns its front transaction's name (CD_XACT_SIZE bytes), full
 * xid and server.
 */
bool
TwoPhaseParseGid(const char *gid, char *xact, FullTransactionId *fxid, Oid *serverid)
{
	char		prefix[CD_XACT_SIZE];
	size_t		plen;
	unsigned long long x;
	unsigned int s;
	char		tail;

	TwoPhaseFrontPrefix(prefix);
	plen = strlen(prefix);
	if (strncmp(gid, prefix, plen) != 0 || strlen(gid) != plen + 16 + 1 + 8)
		return false;
	if (sscanf(gid + plen, "%16llx_%8x%c", &x, &s, &tail) != 2)
		return false;
	*fxid = FullTransactionIdFromU64(x);
	*serverid = s;
	memcpy(xact, gid, plen + 16);
	xact[plen + 16] = '\0';
	return true;
}

/*
 * two_phase_wanted says whether a multi-shard commit of the current
 * transaction would use two-phase commit: the setting asks for it, and
 * the front can write its decision (not a hot standby).
 */
static bool
two_phase_wanted(void)
{
	return CollegeCommitProtocol == CD_COMMIT_2PC && !RecoveryInProgress();
}

/*
 * TwoPhaseBeginGid writes into 'gid' the id a remote transaction on
 * 'shard' must begin with, when its dialect prepares only transactions
 * that began as two-phase ones (CdTwoPhaseSql.begin) and two-phase commit
 * is wanted; else "" (the plain BEGIN).
 */
void
TwoPhaseBeginGid(const CdShard *shard, CdConnection *conn, char *gid)
{
	const CdAdapter *adapter = conn->adapter;

	gid[0] = '\0';
	if (!adapter->caps.two_phase || adapter->two_phase_sql->begin == NULL ||
		!two_phase_wanted())
		return;
	gid_for(GetTopFullTransactionId(), shard->serverid, gid);
}

/*
 * TwoPhasePause stops the committing backend, when the test-only setting
 * collegedb.test_pause_commit names 'step', until it is killed or a file
 * named collegedb_resume_commit appears in the data directory (removed as
 * the backend goes on), so that a test can restart a shard meanwhile.
 */
void
TwoPhasePause(const char *step)
{
	if (CollegeTestPauseCommit == NULL || strcmp(CollegeTestPauseCommit, step) != 0)
		return;
	elog(LOG, "collegedb: commit paused at %s (pid %d)", step, MyProcPid);
	for (;;)
	{
		if (unlink("collegedb_resume_commit") == 0)
		{
			elog(LOG, "collegedb: commit resumed at %s (pid %d)", step, MyProcPid);
			return;
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 100, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * can_prepare says whether a participant can be prepared.
 */
static bool
can_prepare(const CdConnection *conn)
{
	const CdAdapter *adapter = conn->adapter;

	return adapter->caps.two_phase &&
		(adapter->two_phase_sql->begin == NULL || conn->xa);
}

/*
 * prepare sends a participant's PREPARE under its global transaction id;
 * raises on failure.
 */
static void
prepare(CdConnection *conn, FullTransactionId fxid)
{
	CdRemoteError err;

	if (!conn->xa)
		gid_for(fxid, conn->key.serverid, conn->gid);
	conn->prepare_sent = true;
	if (!ConnectionExecList(conn, conn->adapter->two_phase_sql->prepare, conn->gid,
							CD_EXEC_COMMIT, &err))
		RemoteRaise(CD_REMOTE_PREPARE, conn->shard, conn->adapter, NULL, &err);
	conn->prepared = true;
	conn->xact_depth = 0;
}

/*
 * Whether this transaction's last participant committed: its marker is
 * then the decision, so an abort of the front after that (a failure of
 * another pre-commit step) commits the prepared shards instead of rolling
 * them back.
 */
static bool last_committed = false;

/* whether this transaction counts in two-phase commit's shared activity */
static bool two_phase_begun = false;

/*
 * mark_last writes the marker of front transaction 'xact' in the last
 * participant's transaction, which xact.c then commits; raises on failure.
 */
static void
mark_last(CdConnection *conn, const char *xact)
{
	const CdMarkerSql *marker = conn->adapter->marker_sql;
	CdParam		params[2];
	CdRemoteError err;
	int64		rows;
	const char *setup[1] = {marker->ddl};
	char	   *created = psprintf(INT64_FORMAT, (int64) GetCurrentTimestamp());

	memset(params, 0, sizeof(params));
	params[0].kind = CD_VALUE_TEXT;
	params[0].str = xact;
	params[0].len = strlen(xact);
	params[1].kind = CD_VALUE_INT;
	params[1].ival = (int64) GetCurrentTimestamp();
	params[1].str = created;
	params[1].len = strlen(created);

	memset(&err, 0, sizeof(err));
	conn->in_flight = true;
	conn->in_flight_level = GetCurrentTransactionNestLevel();
	if (!conn->adapter->exec(conn->handle, 1, setup, marker->mark, 2, params,
							 CD_EXEC_INTERNAL, NULL, &rows, &err))
	{
		conn->in_flight = false;
		if (err.connection_lost)
			ConnectionClose(conn);
		RemoteRaise(CD_REMOTE_COMMIT, conn->shard, conn->adapter, NULL, &err);
	}
	conn->in_flight = false;
}

/* orders the names in a message, whatever the order the shards were used in */
static int
list_quoted_name_cmp(const ListCell *a, const ListCell *b)
{
	return strcmp(lfirst(a), lfirst(b));
}

/*
 * ensure_one_last refuses a commit with more than one writer that cannot
 * prepare, naming them, before anything is prepared; returns the one
 * there is (or NULL).
 */
static CdConnection *
ensure_one_last(CdConnection **parts, int n)
{
	CdConnection *last = NULL;
	List	   *names = NIL;
	bool		markable = true;

	for (int i = 0; i < n; i++)
	{
		if (!parts[i]->wrote || can_prepare(parts[i]))
			continue;
		names = lappend(names, psprintf("\"%s\"", parts[i]->shard));
		markable &= parts[i]->adapter->caps.last_participant;
		last = parts[i];
	}
	if (list_length(names) > 1 || !markable)
	{
		list_sort(names, list_quoted_name_cmp);
		ereport(ERROR,
				(errcode(ERRCODE_CD_CROSS_SHARD_UNSUPPORTED),
				 errmsg("cannot commit a transaction that wrote on several shards when %s cannot prepare it",
						AdapterWordList(names, "and")),
				 errdetail("Two-phase commit prepares every shard but one last participant, which must be able to record the decision: at most one shard of a dialect without PREPARE (such as SQLite) may take part."),
				 errhint("Write on one such shard per transaction, or SET collegedb.commit_protocol = 'sequential' to commit the shards one after another, without atomicity.")));
	}
	return last;
}

/*
 * TwoPhaseWriterProblem says, before the first write on 'conn' in the
 * front's transaction, whether the transaction could still commit once it
 * wrote there: under two-phase commit at most one writer may be unable to
 * prepare (ensure_one_last), and it must be able to record the decision.
 * When not, it fills 'problem' and returns true, so that the write is
 * refused before it is sent, and nothing is reported done (a row of
 * run_on_all, a result of run) that the commit would then roll back.
 * Only dialects without PREPARE count here (whether an XA dialect's
 * transaction can prepare depends on how it began; the pre-commit checks
 * that), and writes still under way count (a fan-out begins them all
 * before any ends; the shard's own earlier writes do not: collegedb's
 * guard of a write is not checked, and runs before it).  Marks 'conn' as
 * written in this transaction.
 */
bool
TwoPhaseWriterProblem(CdConnection *conn, CdStatementProblem *problem)
{
	CdConnection **all;
	const CdConnection *other = NULL;
	int			n;

	if (!two_phase_wanted())
		return false;
	if (!conn->adapter->caps.two_phase)
	{
		all = ConnectionList(&n);
		for (int i = 0; i < n && other == NULL; i++)
		{
			/* a write of this transaction on another shard, done or under way */
			if (all[i] == conn ||
				!(all[i]->wrote || all[i]->write_lxid == MyProc->lxid))
				continue;
			if (!all[i]->adapter->caps.two_phase || !conn->adapter->caps.last_participant)
				other = all[i];
		}
		pfree(all);
	}
	conn->write_lxid = MyProc->lxid;
	if (other == NULL)
		return false;
	problem->sqlerrcode = ERRCODE_CD_CROSS_SHARD_UNSUPPORTED;
	problem->message = psprintf("cannot write on shard \"%s\" in a transaction that wrote on shard \"%s\"",
								conn->shard, other->shard);
	problem->detail = pstrdup("The transaction could not commit: two-phase commit prepares every shard but one last participant, "
							  "and at most one shard of a dialect without PREPARE (such as SQLite) may take part.");
	problem->hint = pstrdup("Write on one such shard per transaction, or SET collegedb.commit_protocol = 'sequential' to commit the shards one after another, without atomicity.");
	return true;
}

/*
 * TwoPhaseCheck does, at the front's pre-commit of a transaction that
 * wrote on several shards under two-phase commit, what can fail before any
 * shard is prepared but a lost participant (xact.c checked those): a hot
 * standby, more than one participant that cannot prepare.  Returns the
 * last participant (the one that cannot prepare), or NULL.
 */
CdConnection *
TwoPhaseCheck(CdConnection **parts, int n)
{
	if (RecoveryInProgress())
	{
		char	   *primary = CatalogPrimaryName();

		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot commit a transaction that wrote on several shards on a hot standby"),
				 errdetail("Two-phase commit records its decision in the front database, which is read-only here."),
				 primary ?
				 errhint("Write on one shard per transaction here, SET collegedb.commit_protocol = 'sequential', or run the transaction on the primary (%s).", primary) :
				 errhint("Write on one shard per transaction here, SET collegedb.commit_protocol = 'sequential', or run the transaction on the primary.")));
	}
	return ensure_one_last(parts, n);
}

/*
 * TwoPhasePrepare writes the decision record, prepares every writer but
 * 'last', and writes the marker in 'last', which the caller then commits
 * and reports (TwoPhaseLastCommitted); the readers have committed already.
 */
void
TwoPhasePrepare(CdConnection **parts, int n, CdConnection *last)
{
	FullTransactionId fxid;
	char		xact[CD_XACT_SIZE];

	/*
	 * The decision record goes in first: it counts only if the front
	 * commits, and flushing it makes the front's xid durable before any
	 * shard holds a prepared transaction named after it.  Otherwise a crash
	 * before the front wrote anything could hand the same xid (and so the
	 * same global transaction ids) to a new transaction after recovery,
	 * which would then look like the crashed one still running.  With
	 * synchronous replication the record also waits for the synchronous
	 * standbys, as PREPARE TRANSACTION does: a standby promoted after the
	 * front died then knows the xid too.
	 */
	/* from here on a shard may be left prepared: the coordinator looks */
	ActivityTwoPhaseBegin();
	two_phase_begun = true;
	fxid = GetTopFullTransactionId();
	TwoPhaseXactName(fxid, xact);
	DecisionRecord(xact);
	XLogFlush(XactLastRecEnd);
	SyncRepWaitForLSN(XactLastRecEnd, false);

	for (int i = 0; i < n; i++)
		if (parts[i]->wrote && parts[i] != last)
			prepare(parts[i], fxid);
	TwoPhasePause("prepared");

	if (last)
		mark_last(last, xact);
}

/*
 * TwoPhaseLastCommitted notes that the last participant committed: the
 * transaction's outcome is decided (commit), even if the front aborts now.
 */
void
TwoPhaseLastCommitted(void)
{
	last_committed = true;
	TwoPhasePause("last_committed");
}


/*
 * at_commit commits the prepared participants once the front's
 * decision committed; nothing here raises (see the file header).  False
 * when a participant's commit failed, leaving it to recovery.
 */
static bool
at_commit(CdConnection **parts, int n)
{
	int			done = 0;
	bool		clean = true;

	for (int i = 0; i < n; i++)
	{
		CdConnection *conn = parts[i];
		CdRemoteError err;

		if (!conn->prepared)
			continue;
		if (done == 0)
		{
			/* the decision must survive a crash before any shard acts on it */
			XLogFlush(XactLastCommitEnd);
			TwoPhasePause("decided");
		}
		else if (done == 1)
			TwoPhasePause("between_commits");
		done++;
		/* a prepared transaction that is gone was committed by recovery */
		if (!ConnectionExecList(conn,
								(const char *const[]) {conn->adapter->two_phase_sql->commit_prepared, NULL},
								conn->gid, CD_EXEC_CLEANUP, &err) &&
			strcmp(err.sqlstate, conn->adapter->two_phase_sql->missing_sqlstate) != 0)
		{
			clean = false;
			ereport(WARNING,
					(errcode(ERRCODE_TRANSACTION_RESOLUTION_UNKNOWN),
					 errmsg("could not commit prepared transaction %s on shard \"%s\": %s",
							conn->gid, conn->shard, err.message ? err.message : "unknown error"),
					 errdetail("The transaction committed; the shard's part is prepared and will be committed."),
					 errhint("The coordinator commits it later, or run SELECT * FROM collegedb.recover_prepared_transactions().")));
		}
		ConnectionMarkFinished(conn);
	}
	return clean;
}

/*
 * TwoPhaseFinish commits the prepared participants at the end of the front
 * transaction when its decision is to commit: at its commit, or at an abort
 * that came after the last participant committed (the marker decided).
 * True when nothing is left prepared for recovery.
 */
bool
TwoPhaseFinish(bool aborted)
{
	CdConnection **parts;
	int			n;
	bool		clean = true;

	if (!aborted || last_committed)
	{
		parts = ConnectionParticipants(&n);
		if (n > 0)
			clean = at_commit(parts, n);
	}
	last_committed = false;
	return clean;
}

/*
 * TwoPhaseEnded tells the shared activity that this transaction's
 * two-phase commit is over, once its connections ended; 'clean' false when
 * something may be left prepared.
 */
void
TwoPhaseEnded(bool clean)
{
	if (two_phase_begun)
		ActivityTwoPhaseEnd(clean);
	two_phase_begun = false;
}
