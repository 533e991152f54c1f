/*-------------------------------------------------------------------------
 *
 * routed.c
 *	  Runs a statement by key: resolves the key, then runs the statement
 *	  where the key lives.
 *
 * Writes are guarded: they never land on a shard the key has moved away
 * from, and follow its tombstone instead; reads that find nothing follow
 * tombstones too, up to ROUTER_MAX_HOPS moves (the trail is locate.c's).
 *
 * Under KV placement, and for a key with an exception, that is one shard.
 * Under computed placement a key may live on any of its owners by epoch:
 * a read tries them newest first and stops at the first that returns
 * rows (recording an exception when that was not the newest owner, so the
 * next read goes straight there); a write looks for the key in the
 * registered tables of each owner and goes where it is found, else to the
 * newest owner; either way it is guarded on the shard it lands on.  While
 * a move of the key has not passed its source step, the key's statements
 * go to the move's source (RouterResolve).  With no eligible shard,
 * computed placement is read-only: every write is NO_ELIGIBLE_SHARD.  Under
 * the slots strategy a key's one shard is its slot's, except while the
 * slot moves: then it has two candidates, handled as above (slotroute.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"

#include "catalog/catalog.h"
#include "catalog/tables.h"
#include "cd_errcodes.h"
#include "collegedb.h"
#include "remote/remote.h"
#include "remote/tombstones.h"
#include "router/router.h"

/*
 * read_following runs a read on 'shard'; when it returns no rows and the
 * shard has a tombstone for the key, follows it (src/README.md, "Tombstones
 * and guarded writes").  Returns
 * the rows, and in *answered the shard that gave them.  With 'read_already'
 * the caller has run the read on 'shard' and it returned no rows: only the
 * tombstone is looked up there.  With
 * collegedb.best_effort a trail that cannot be followed gives no rows.
 */
static int64
read_following(const CdShard *shard, const char *key, int key_len, const char *const *sql,
			   int nparams, const CdParam *params, CdRowSink *sink,
			   const CdShard **answered, bool read_already)
{
	int			hops = 0;
	int64		rows = 0;

	for (;;)
	{
		RouterTrailStep step;

		if (!read_already)
			rows = RemoteExecute(shard, sql[shard->dialect], nparams, params, sink, false);
		read_already = false;
		*answered = shard;
		if (rows > 0 || !AnyRegisteredTable())
			return rows;

		step.shard = shard;
		step.key = key;
		step.key_len = key_len;
		step.hops = hops;
		step.moved_to = NULL;
		if (!CollegeBestEffort)
			RouterFollowOne(&step);

		/*
		 * Best effort: a failed lookup or a broken trail is "no rows".  The
		 * lookup runs in a subtransaction (RemoteTry), so that a failure is
		 * undone on the shard as well (its remote transaction rolls back to
		 * the subtransaction's savepoint instead of staying aborted, which
		 * would turn the front's COMMIT into a silent ROLLBACK there); a
		 * cancel or statement_timeout is re-thrown, never taken for a
		 * failure.
		 */
		else if (!RemoteTry(RouterFollowOne, &step, NULL))
			return 0;
		if (step.moved_to == NULL)
			return rows;
		shard = step.shard;
		hops = step.hops;
	}
}

/*
 * read_candidates runs a read on the route's candidates in order and stops at the first that returns rows (recording an
 * exception under computed placement when that was not the newest owner).
 * With 'first_read', candidates[0] has been read already and returned
 * nothing: only its tombstone is looked up.
 */
static int64
read_candidates(const CdRoute *route, bool first_read, const char *key, int key_len,
				const char *const *sql, int nparams, const CdParam *params, CdRowSink *sink)
{
	const CdShard *answered;
	int64		rows = 0;

	for (int i = 0; i < route->ncandidates; i++)
	{
		rows = read_following(route->candidates[i], key, key_len, sql, nparams, params,
							  sink, &answered, first_read && i == 0);
		if (rows > 0)
		{
			if (route->source == CD_ROUTE_COMPUTED && !ShardIs(answered, route->candidates[0]))
				RouterRecordException(key, key_len, answered);
			break;
		}
	}
	return rows;
}

/*
 * RouterReadMissed goes on with a read by key that a caller ran itself on
 * the route's first shard (route->shard), for instance with other keys in
 * the same statement, where it returned no row of this key: it follows the
 * key's tombstone from there and tries the other candidates, exactly as
 * RouterExecuteDialects would after that first read.  Nothing is sent when
 * there is nothing to follow (one candidate, no registered table).
 */
int64
RouterReadMissed(const CdRoute *route, const char *key, int key_len, const char *const *sql,
				 int nparams, const CdParam *params, CdRowSink *sink)
{
	if (route->ncandidates <= 1 && !AnyRegisteredTable())
		return 0;
	return read_candidates(route, true, key, key_len, sql, nparams, params, sink);
}

/*
 * write_following runs a guarded write on 'shard', re-sending it where the
 * key's tombstone points when the key has moved away.
 */
static int64
write_following(const CdShard *shard, const char *key, int key_len, const char *const *sql,
				int nparams, const CdParam *params, CdRowSink *sink)
{
	int			hops = 0;

	for (;;)
	{
		char	   *moved_to;
		int64		rows = TombstoneExecuteGuarded(shard, key, key_len, sql[shard->dialect],
												nparams, params, sink, &moved_to);

		if (moved_to == NULL)
			return rows;
		shard = RouterTombstoneHop(moved_to, ++hops);
	}
}

/*
 * refuse_new_slot_key refuses, on a hot standby, the write of a key that
 * none of its slot's shards holds yet.  A slot's move on the primary waits
 * for the writers that hold the slot's lock there, never for a standby's:
 * a new key written here could land on a shard the slot has just left,
 * where no read would find it again.
 */
static void
refuse_new_slot_key(int32 slot)
{
	ereport(ERROR,
			(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
			 errmsg("cannot write a new key of slot %d on a hot standby", slot),
			 errdetail("The key is on none of its slot's shards, and a move of the slot on the primary does not wait for this standby's writers."),
			 CatalogStandbyHint()));
}

/*
 * RouterExecuteDialects routes a statement by key and runs it, streaming
 * rows to 'sink'; returns the rows affected (or returned).  'sql' holds
 * the statement's text for each dialect (indexed by CdDialect), since the
 * key's shard, and every shard a tombstone leads to, may speak another.
 * Writes are guarded and reads follow tombstones, so a statement reaches
 * the key where it lives now even through a stale mapping.
 */
int64
RouterExecuteDialects(const char *key, int key_len, const char *const *sql, int nparams,
					  const CdParam *params, CdRowSink *sink, bool is_write)
{
	CdRoute		route = RouterResolve(key, key_len, is_write, true);
	int			target;

	if (!is_write)
		return read_candidates(&route, false, key, key_len, sql, nparams, params, sink);

	/* computed placement without an eligible shard is read-only */
	if (ConfigGet()->computed && !RouterAnyShardEligible())
		ereport(ERROR,
				(errcode(ERRCODE_CD_NO_ELIGIBLE_SHARD),
				 errmsg("no shard is eligible, so the cluster is read-only"),
				 errdetail("Under computed placement writes need an eligible shard: every shard is draining, retired, not writable or refused by the eligibility predicate."),
				 errhint("Make a shard writable and active with collegedb.set_shard_state().")));

	if (route.ncandidates == 1 && !(route.source == CD_ROUTE_SLOT && RecoveryInProgress()))
		return write_following(route.shard, key, key_len, sql, nparams, params, sink);

	/*
	 * A write with several candidates (computed, or a slot that moves; on
	 * a hot standby any slot's, see refuse_new_slot_key):
	 * where does the key live?  The probe only chooses the shard to try: the
	 * write itself is guarded there like any other (the key's lock and
	 * tombstone), and follows the key when it has moved on.  A key found
	 * nowhere goes to the first candidate.  Computed placement records an
	 * exception for a key found elsewhere; a slot's keys need none (the
	 * slot's route leads to both shards until the move installs the map).
	 */
	target = RouterProbeKey(key, key_len, route.candidates, route.ncandidates);
	if (target < 0 && route.source == CD_ROUTE_SLOT && RecoveryInProgress() &&
		AnyRegisteredTable())
		refuse_new_slot_key(route.slot);
	if (target < 0)
		target = 0;
	if (target > 0 && route.source == CD_ROUTE_COMPUTED)
		RouterRecordException(key, key_len, route.candidates[target]);
	return write_following(route.candidates[target], key, key_len, sql, nparams, params, sink);
}

/*
 * RouterExecute is RouterExecuteDialects with the same text for every
 * dialect ($n placeholders are rewritten per dialect anyway).
 */
int64
RouterExecute(const char *key, int key_len, const char *sql, int nparams,
			  const CdParam *params, CdRowSink *sink, bool is_write)
{
	const char *same[CD_MAX_DIALECTS];

	for (int d = 0; d < AdapterCount(); d++)
		same[d] = sql;
	return RouterExecuteDialects(key, key_len, same, nparams, params, sink, is_write);
}
