/*-------------------------------------------------------------------------
 *
 * jobs.c
 *	  Jobs: a single move (reassign_shard) or a rebalance of a table, run
 *	  by background workers.
 *
 * A rebalance examines the distinct keys of the table on every readable
 * shard, computes each key's target among the shards that take keys (the
 * current strategy; under computed placement the newest epoch's owner),
 * and records the keys whose shard differs in collegedb.job_key.  Then
 * 'concurrency' workers move them (worker/movers.c).  Keys already on
 * their target are "agreed" and never touched, so a second pass after an
 * interruption finishes the first.
 *
 * Synchronous calls (reassign_shard, rebalance) hand their job to a
 * dynamic worker, because every journal step must commit on its own,
 * which the caller's transaction cannot do; the caller waits for it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/dsm.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/pmsignal.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "catalog/config.h"
#include "catalog/epochs.h"
#include "catalog/journal.h"
#include "catalog/tables.h"
#include "cd_errcodes.h"
#include "collegedb.h"
#include "placement/hash.h"
#include "placement/strategy.h"
#include "remote/fanout.h"
#include "router/router.h"
#include "worker/jobs.h"
#include "worker/movers.h"
#include "worker/moves.h"
#include "worker/progress.h"
#include "worker/slot_moves.h"
#include "worker/unit.h"

/* what a synchronous caller hands its job worker */
typedef struct JobRequest
{
	Oid			database;
	Oid			owner;
	char		kind;			/* 'm'ove, 'r'ebalance or 's'lot move */
	int32		slot;			/* a slot move's slot */
	bool		force;
	int			concurrency;
	int64		job_id;			/* set by the worker */
	char		error[256];		/* set by the worker if it could not start */
	int			table_off;		/* offsets into data, -1: none */
	int			key_off;
	int			target_off;
	char		data[FLEXIBLE_ARRAY_MEMBER];
} JobRequest;

/*
 * pick_target returns where a key should live: under computed placement
 * its owner in the newest epoch; under the slots strategy its slot's
 * shard (the installed map's, or where the slot moves); otherwise the strategy's pick among the
 * shards that take keys, except that strategies which do not follow from
 * the key (round-robin, random, location) leave a key on a shard that
 * takes keys.
 */
static const CdShard *
pick_target(const char *key, const CdShard *current, const CdShard **shards, int n)
{
	const CdConfig *config = ConfigGet();
	CdPickContext ctx;

	ctx.key = pg_server_to_any(key, strlen(key), PG_UTF8);
	ctx.key_len = strlen(ctx.key);
	ctx.target_region = config->target_region[0] ? config->target_region : NULL;
	ctx.ticket = 0;

	if (config->computed)
	{
		CdEpoch    *newest = linitial(EpochList());
		int			owner = PlacementRendezvousOwner(ctx.key, ctx.key_len,
													 newest->shards_utf8, newest->nshards);

		return ShardLookup(newest->shards[owner]);
	}
	if (config->write_strategy == CD_STRATEGY_SLOTS)
		return ShardLookup(RouterSlotHome(key, strlen(key)));
	if (config->write_strategy == CD_STRATEGY_ROUND_ROBIN ||
		config->write_strategy == CD_STRATEGY_RANDOM ||
		config->write_strategy == CD_STRATEGY_LOCATION)
	{
		for (int i = 0; i < n; i++)
			if (ShardIs(shards[i], current))
				return current;
		return PlacementPick(CD_STRATEGY_HASH, shards, n, &ctx);
	}
	return PlacementPick(config->write_strategy, shards, n, &ctx);
}

/* how many keys a rebalance plans between two looks for a cancel */
#define PLAN_CANCEL_EVERY 2000
/* how many of its keys to move a plan records with one statement */
#define PLAN_PAGE_KEYS 10000
/* from how many keys to move on a plan analyzes collegedb.job_key */
#define PLAN_ANALYZE_KEYS 1000

/*
 * A plan in the making: the counts, and for a job the keys to move that
 * are not recorded yet (at most PLAN_PAGE_KEYS, in page_context).
 */
typedef struct PlanInMaking
{
	JobPlan    *plan;
	int64		job_id;			/* 0: counts only */
	const CdShard **eligible;	/* the shards that take keys */
	int			neligible;
	List	   *page;			/* of CdJobKeyRow */
	MemoryContext page_context;
	int64		looked;
	bool		cancelled;
} PlanInMaking;

/* the rows of one shard's keys, as they arrive */
typedef struct PlanRowSink
{
	CdRowSink	base;
	PlanInMaking *state;
	const CdShard *shard;
} PlanRowSink;

/*
 * rebalance_check raises the errors a rebalance of the table would meet
 * before it reads any key: an unregistered table, computed placement
 * without an epoch, no shard that takes keys.  It returns the readable
 * shards (*n of them) and the shards that take keys (*neligible).
 */
static const CdShard **
rebalance_check(const char *table_name, CdTable **table, int *n,
				const CdShard ***eligible, int *neligible)
{
	const CdShard **set;

	*table = RegisteredTableEnsure(table_name);
	if (ConfigGet()->computed && EpochList() == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_CD_TOPOLOGY_UNAVAILABLE),
				 errmsg("computed placement has no published epoch")));

	set = ShardReadSet(n);
	*eligible = palloc(sizeof(CdShard *) * Max(*n, 1));
	*neligible = 0;
	for (int i = 0; i < *n; i++)
		if (RouterShardTakesKeys(set[i]) && RouterShardEligible(set[i], "allocate", NULL))
			(*eligible)[(*neligible)++] = set[i];
	if (*neligible == 0)
		ereport(ERROR,
				(errcode(ERRCODE_CD_NO_ELIGIBLE_SHARD),
				 errmsg("no shard can take keys, so there is nowhere to rebalance to")));
	return set;
}

/*
 * read_keys runs the statement 'fmt' (%1$s the key column, %2$s the table,
 * quoted in each shard's dialect) on the shards 'set' at once, each shard's rows
 * to sinks[i]; a shard that cannot be read fails the call.
 */
static void
read_keys(const char *fmt, CdTable *table, const char *table_name, const CdShard **set,
		  int n, CdRowSink **sinks)
{
	CdFanoutShard *found = palloc0(sizeof(CdFanoutShard) * Max(n, 1));
	int			nest;

	for (int i = 0; i < n; i++)
	{
		const CdAdapter *adapter = AdapterForDialect(set[i]->dialect);

		found[i].shard = set[i];
		found[i].sql = psprintf(fmt, adapter->quote_ident(table->key_column),
								adapter->quote_ident(table->name));
		found[i].sink = sinks[i];
	}
	/*
	 * No fanout_timeout: a shard's keys stream in for as long as the front
	 * takes to place them (a million keys take longer than its 10 s);
	 * statement_timeout and cancels still apply.
	 */
	nest = NewGUCNestLevel();
	WorkerSetLocal("collegedb.fanout_timeout", 0);
	FanoutRun(found, n, NULL, 0, NULL, CD_FANOUT_READ);
	AtEOXact_GUC(true, nest);
	for (int i = 0; i < n; i++)
		if (!found[i].ok)
			ereport(ERROR,
					(errcode(ERRCODE_CD_JOB_FAILED),
					 errmsg("could not read the keys of table \"%s\" on shard \"%s\": %s",
							table_name, set[i]->name, found[i].error)));
}

/*
 * RebalanceCheck raises what a rebalance of the table would raise before
 * it moves anything (see rebalance_check), and reaches the table on every
 * readable shard, without reading its keys.
 */
void
RebalanceCheck(const char *table_name)
{
	CdTable    *table;
	const CdShard **set;
	const CdShard **eligible;
	CdRowSink **sinks;
	CaptureRowSink *none;
	int			n,
				neligible;

	set = rebalance_check(table_name, &table, &n, &eligible, &neligible);
	sinks = palloc(sizeof(CdRowSink *) * Max(n, 1));
	none = palloc0(sizeof(CaptureRowSink) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		CaptureRowSinkInit(&none[i]);
		sinks[i] = &none[i].base;
	}
	read_keys("SELECT %s FROM %s WHERE 1 = 0", table, table_name, set, n, sinks);
}

/*
 * record_page records the plan's keys not recorded yet, with one
 * statement, and empties the page.
 */
static void
record_page(PlanInMaking *ps)
{
	if (ps->page != NIL)
		JournalAddJobKeys(ps->job_id, ps->page);
	ps->page = NIL;
	MemoryContextReset(ps->page_context);
}

static void
plan_columns(CdRowSink *self, int ncols, const char *const *names)
{
}

/*
 * plan_row places one key of a shard: agreed where its target is where it
 * is, otherwise one more key to move (recorded in pages for a job).  It
 * runs in the adapter's per-row context.
 */
static void
plan_row(CdRowSink *self, int ncols, const CdCell *cells)
{
	PlanRowSink   *sink = (PlanRowSink *) self;
	PlanInMaking  *ps = sink->state;
	CdParam		value;
	const char *key;
	const CdShard *current = sink->shard;
	const CdShard *mapped;
	const CdShard *target;

	if (ps->cancelled)
		return;
	if (++ps->looked % PLAN_CANCEL_EVERY == 0)
	{
		CHECK_FOR_INTERRUPTS();
		if (ps->job_id > 0 && !JournalJobGoesOn(ps->job_id))
		{
			/* the rest of the keys still arrive: they are not looked at */
			ps->cancelled = true;
			return;
		}
	}
	if (ncols < 1)
		return;
	ValuesCellToParam(&cells[0], &value);
	if (value.kind == CD_VALUE_NULL)
		return;
	key = value.str;
	ps->plan->examined++;
	/* a key is where its mapping says, when it has one */
	if (RouterFindMapping(key, strlen(key), &mapped))
	{
		if (!ShardIs(mapped, sink->shard))
		{
			/* a copy left behind elsewhere: counted where it is mapped */
			ps->plan->examined--;
			return;
		}
		current = mapped;
	}
	target = pick_target(key, current, ps->eligible, ps->neligible);
	if (ShardIs(target, current))
	{
		ps->plan->agreed++;
		return;
	}
	ps->plan->moves++;
	if (ps->job_id > 0)
	{
		MemoryContext old = MemoryContextSwitchTo(ps->page_context);
		CdJobKeyRow *k = palloc(sizeof(CdJobKeyRow));

		k->key = pstrdup(key);
		k->stored = RouterStoredKey(key, strlen(key));
		k->source = pstrdup(current->name);
		k->target = pstrdup(target->name);
		ps->page = lappend(ps->page, k);
		MemoryContextSwitchTo(old);
		if (list_length(ps->page) >= PLAN_PAGE_KEYS)
			record_page(ps);
	}
}

/*
 * RebalancePlan examines a registered table's keys on every readable shard
 * and counts which of them must move where.  The keys stream in from all
 * shards at once and are placed as they arrive.  For a job ('job_id' > 0)
 * it records the keys to move in collegedb.job_key, PLAN_PAGE_KEYS at a
 * time, in the caller's transaction (a key a previous run left pending
 * or claimed goes back to the plan's decision), so that its memory stays
 * the same whatever the table's size; it looks for a cancel every
 * PLAN_CANCEL_EVERY keys and returns NULL when one was asked for.
 * Without a job it only counts.
 */
JobPlan *
RebalancePlan(const char *table_name, int64 job_id)
{
	JobPlan    *plan = palloc0(sizeof(JobPlan));
	PlanInMaking	ps;
	CdTable    *table;
	const CdShard **set;
	PlanRowSink   *sinks;
	CdRowSink **bases;
	int			n;

	memset(&ps, 0, sizeof(ps));
	set = rebalance_check(table_name, &table, &n, &ps.eligible, &ps.neligible);
	ps.plan = plan;
	ps.job_id = job_id;
	ps.page_context = AllocSetContextCreate(CurrentMemoryContext, "collegedb plan page",
											ALLOCSET_DEFAULT_SIZES);
	if (job_id > 0)
		JournalForgetPendingJobKeys(job_id);

	sinks = palloc0(sizeof(PlanRowSink) * Max(n, 1));
	bases = palloc(sizeof(CdRowSink *) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		sinks[i].base.columns = plan_columns;
		sinks[i].base.row = plan_row;
		sinks[i].state = &ps;
		sinks[i].shard = set[i];
		bases[i] = &sinks[i].base;
	}
	read_keys("SELECT DISTINCT %s FROM %s", table, table_name, set, n, bases);
	if (ps.cancelled)
		return NULL;
	if (job_id > 0)
	{
		record_page(&ps);
		/* the batches settle their keys by the statistics of these rows */
		if (plan->moves >= PLAN_ANALYZE_KEYS)
			JournalAnalyzeJobKeys();
	}
	MemoryContextDelete(ps.page_context);
	return plan;
}

/*
 * run_rebalance plans a rebalance, recording the keys to move, and moves
 * them with 'concurrency' workers.
 */
static void
run_rebalance(int64 job_id, const char *table_name, int concurrency)
{
	JobPlan    *plan;
	int64		earlier;
	int64		nmoves;

	WorkerBegin();
	plan = RebalancePlan(table_name, job_id);
	if (plan == NULL || !JournalJobGoesOn(job_id))
	{
		/* cancelled while planning: the transaction records nothing */
		WorkerAbort();
		return;
	}
	/* keys an earlier run moved are agreed now: count them once */
	nmoves = plan->moves;
	earlier = JournalCountJobKeys(job_id) - nmoves;
	JournalSetJobResult(job_id, psprintf("{\"agreed\": " INT64_FORMAT "}",
										 Max(plan->agreed - earlier, 0)));
	/* the plan lives in the transaction's memory: not used past here */
	plan = NULL;
	WorkerCommit();

	JobMoveKeys(job_id, concurrency, nmoves);
}

/*
 * MoveEndpoints finds where a key lives now and checks the target it is
 * to move to: a registered shard that takes keys (unless forced).  A key
 * collegedb cannot place is MAPPING_NOT_FOUND.
 */
void
MoveEndpoints(const char *key, const char *target_name, bool force,
			  const CdShard **source, const CdShard **target)
{
	*target = ShardLookup(target_name);
	if (!force && !RouterShardTakesKeys(*target))
		ereport(ERROR,
				(errcode(ERRCODE_CD_NO_ELIGIBLE_SHARD),
				 errmsg("shard \"%s\" does not take keys", target_name),
				 errhint("Moves go only to active, writable shards; pass force => true to move anyway.")));
	*source = RouterLocateKey(key);
}

/*
 * moved_false renders the result of a move that had nothing to do.
 */
static char *
moved_false(const CdShard *shard)
{
	StringInfoData same;

	initStringInfo(&same);
	appendStringInfoString(&same, "{\"moved\": false, \"shard\": ");
	escape_json(&same, shard->name);
	appendStringInfoChar(&same, '}');
	return same.data;
}

/*
 * run_move moves one key where the job says; returns the job's result in
 * TopMemoryContext.  An interrupted move of the key is finished first;
 * when it went elsewhere, the key then moves on to the target.
 */
static char *
run_move(int64 job_id, const char *key, const char *target_name, bool force)
{
	const CdShard *target;
	const CdShard *source;
	int64		move_id = 0;
	int64		generation;
	bool		adopted = true;
	char	   *result;

	for (int round = 0; adopted && round < 2; round++)
	{
		WorkerBegin();
		MoveEndpoints(key, target_name, force, &source, &target);
		if (ShardIs(source, target))
		{
			result = MemoryContextStrdup(TopMemoryContext, moved_false(target));
			WorkerCommit();
			if (move_id == 0)
				return result;
			break;
		}
		move_id = MoveStart(job_id, key, source->name, target->name, &generation, &adopted, NULL);
		WorkerCommit();
		MoveRun(move_id, generation);
	}

	WorkerBegin();
	result = MemoryContextStrdup(TopMemoryContext, JournalMoveResult(move_id));
	WorkerCommit();
	return result;
}

/* the job this process runs now, 0: none */
static int64 running_job = 0;

/*
 * requeue_on_exit queues the job this process runs again when the process
 * exits before the job ended: a SIGTERM or a server shutdown is no death
 * of the job (JournalRequeueOrphanJobs counts only a worker that vanished
 * without this, killed or crashed).  It runs while the process still has
 * its database connection; an error here is only a death counted.
 */
static void
requeue_on_exit(int code, Datum arg)
{
	int64		job_id = running_job;

	running_job = 0;
	if (job_id == 0 || !PostmasterIsAlive())
		return;
	AbortOutOfAnyTransaction();
	WorkerBegin();
	JournalRequeueJob(job_id);
	WorkerCommit();
}

/*
 * JobRun runs a job to its end and records how it ended.  Must be called
 * outside a transaction, as the job's owner.
 */
void
JobRun(int64 job_id)
{
	static bool hooked = false;
	MemoryContext context = CurrentMemoryContext;
	CdJobRow	job;
	bool		started;

	WorkerBegin();
	MemoryContextSwitchTo(context);
	started = JournalStartJob(job_id, &job);
	WorkerCommit();
	MemoryContextSwitchTo(context);
	if (!started)
		return;
	if (!hooked)
		before_shmem_exit(requeue_on_exit, (Datum) 0);
	hooked = true;
	running_job = job_id;

	PG_TRY();
	{
		char	   *result = NULL;

		if (strcmp(job.kind, "move") == 0)
			result = run_move(job_id, job.key, job.target, job.force);
		else if (strcmp(job.kind, "move_slot") == 0)
			result = SlotMoveRun(job_id, job.slot, job.target, job.concurrency);
		else
			run_rebalance(job_id, job.table_name, job.concurrency);
		WorkerBegin();
		JournalFinishJob(job_id, "done", result, NULL);
		WorkerCommit();
	}
	PG_CATCH();
	{
		ErrorData  *edata = WorkerCatchError(context);

		WorkerBegin();
		JournalFinishJob(job_id, "failed", NULL, RemoteErrorText(edata));
		WorkerCommit();
	}
	PG_END_TRY();
	running_job = 0;
}

/*
 * collegedb_job_main is a synchronous caller's job worker: it records the
 * requested job, tells the caller its id, and runs it.
 */
void
collegedb_job_main(Datum arg)
{
	dsm_segment *seg;
	JobRequest *req;
	const char *key;

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	CurrentResourceOwner = ResourceOwnerCreate(NULL, "collegedb job");
	seg = dsm_attach(DatumGetUInt32(arg));
	if (seg == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("could not map the job request")));
	req = dsm_segment_address(seg);
	WorkerConnect(req->database, req->owner);
	pgstat_report_appname("collegedb job");
	key = req->key_off >= 0 ? req->data + req->key_off : NULL;

	WorkerBegin();
	req->job_id = JournalInsertJob(req->kind == 'm' ? "move" :
								   req->kind == 's' ? "move_slot" : "rebalance",
								   req->table_off >= 0 ? req->data + req->table_off : NULL,
								   key ? RouterStoredKey(key, strlen(key)) : NULL, key,
								   req->target_off >= 0 ? req->data + req->target_off : NULL,
								   req->force, req->concurrency, req->owner, true);
	if (req->kind == 's')
		JournalSetJobSlot(req->job_id, req->slot);
	WorkerCommit();

	JobRun(req->job_id);
	dsm_detach(seg);
	proc_exit(0);
}

/*
 * wait_reporting waits until a job's worker has exited, as
 * WaitForBackgroundWorkerShutdown does, and meanwhile reports the job's
 * progress once the worker has recorded it.
 */
static void
wait_reporting(BackgroundWorkerHandle *handle, volatile JobRequest *req)
{
	TimestampTz report_at = JobProgressStart();
	pid_t		pid;

	while (GetBackgroundWorkerPid(handle, &pid) != BGWH_STOPPED)
	{
		int64		job_id;

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 100, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		pg_read_barrier();
		job_id = req->job_id;
		if (job_id != 0)
			JobProgressReport(job_id, &report_at);
	}
}

/*
 * JobLaunchAndWait hands a job to a dynamic worker and waits until it has
 * run, reporting its progress meanwhile; returns the job's id.  The caller reads the outcome from
 * collegedb.job.
 */
int64
JobLaunchAndWait(char kind, const char *table_name, const char *key,
				 const char *target, bool force, int concurrency, int32 slot)
{
	Size		len = offsetof(JobRequest, data);
	int			off = 0;
	dsm_segment *seg;
	JobRequest *req;
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle;
	pid_t		pid;
	int64		job_id;

	EnsurePreloaded(kind == 'm' ? "collegedb.reassign_shard()" :
					kind == 's' ? "collegedb.move_slot()" : "collegedb.rebalance()");
	len += (table_name ? strlen(table_name) + 1 : 0) + (key ? strlen(key) + 1 : 0) +
		(target ? strlen(target) + 1 : 0);
	seg = dsm_create(len, 0);
	req = dsm_segment_address(seg);
	memset(req, 0, offsetof(JobRequest, data));
	req->database = MyDatabaseId;
	req->owner = GetUserId();
	req->kind = kind;
	req->force = force;
	req->concurrency = concurrency;
	req->slot = slot;
	req->job_id = 0;
#define PUT(field, s) \
	do { \
		if (s) { req->field = off; strcpy(req->data + off, s); off += strlen(s) + 1; } \
		else req->field = -1; \
	} while (0)
	PUT(table_off, table_name);
	PUT(key_off, key);
	PUT(target_off, target);
#undef PUT

	WorkerDescribe(&worker, "collegedb_job_main", "collegedb job",
				   psprintf("collegedb job for pid %d", MyProcPid));
	worker.bgw_main_arg = UInt32GetDatum(dsm_segment_handle(seg));
	if (!RegisterDynamicBackgroundWorker(&worker, &handle))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("could not start a background worker for the job"),
				 errhint("Raise max_worker_processes.")));
	if (WaitForBackgroundWorkerStartup(handle, &pid) != BGWH_STARTED)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("the job's background worker did not start")));
	wait_reporting(handle, req);
	job_id = req->job_id;
	dsm_detach(seg);
	if (job_id == 0)
		ereport(ERROR,
				(errcode(ERRCODE_CD_JOB_FAILED),
				 errmsg("the job's background worker (pid %d) exited before it recorded the job", (int) pid),
				 errhint("The server log says why.")));
	return job_id;
}
