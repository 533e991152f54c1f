/*-------------------------------------------------------------------------
 *
 * allocate.c
 *	  Chooses the shard of a new key (src/README.md, "Placement"): the
 *	  filters, in order shard state, eligibility predicate, size limit,
 *	  then the strategy.
 *
 * State: only active, writable shards take new keys.  Predicate: the
 * configured `eligible` function is called as (shard, context) with
 * context {operation, key, tags, state}; only true keeps a shard, and an
 * error is ELIGIBILITY_FAILED.  Size: with max_shard_size, shards at or
 * above it are left out, unless that would leave none; a shard whose size
 * cannot be measured stays in.  Nothing left is NO_ELIGIBLE_SHARD.
 *
 * Sizes are measured on the shard in its dialect and cached per backend for
 * size_cache_ttl.  The picks themselves are in placement/strategy.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/guc.h"
#include "utils/syscache.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "port/atomics.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/hsearch.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

#include "catalog/catalog.h"
#include "catalog/config.h"
#include "cd_errcodes.h"
#include "collegedb.h"
#include "placement/regions.h"
#include "placement/strategy.h"
#include "remote/remote.h"
#include "router/router.h"

typedef struct SizeCacheEntry
{
	char		shard[NAMEDATALEN]; /* hash key */
	bool		known;
	int64		size;
	TimestampTz measured_at;
} SizeCacheEntry;

static HTAB *size_cache = NULL;

/*
 * The round-robin strategy's counters: one per database, in shared memory,
 * so that new keys split exactly across every backend of the front.
 */
#define ROUND_ROBIN_SLOTS 64
#define ROUND_ROBIN_TRANCHE "collegedb round robin"

typedef struct RoundRobinSlot
{
	Oid			database;		/* InvalidOid: free */
	pg_atomic_uint64 next;
} RoundRobinSlot;

typedef struct RoundRobinState
{
	LWLock	   *lock;			/* protects the claiming of slots */
	RoundRobinSlot slots[ROUND_ROBIN_SLOTS];
} RoundRobinState;

static RoundRobinState *round_robin = NULL;

static Size
round_robin_size(void)
{
	return MAXALIGN(sizeof(RoundRobinState));
}

/* holding AddinShmemInitLock */
static void
round_robin_init(void)
{
	bool		found;

	round_robin = ShmemInitStruct("collegedb round robin", sizeof(RoundRobinState), &found);
	if (found)
		return;
	round_robin->lock = &(GetNamedLWLockTranche(ROUND_ROBIN_TRANCHE))->lock;
	for (int i = 0; i < ROUND_ROBIN_SLOTS; i++)
	{
		round_robin->slots[i].database = InvalidOid;
		pg_atomic_init_u64(&round_robin->slots[i].next, 0);
	}
}

/*
 * AllocateInit registers the round-robin counters' part of shared memory
 * (only while preloading).
 */
void
AllocateInit(void)
{
	ShmemRegister(ROUND_ROBIN_TRANCHE, 1, round_robin_size, round_robin_init);
}

/*
 * round_robin_slot returns this database's round-robin counter, claiming a
 * free one the first time.
 */
static RoundRobinSlot *
round_robin_slot(void)
{
	RoundRobinSlot *slot = NULL;

	EnsurePreloaded("the round-robin strategy");
	for (int i = 0; i < ROUND_ROBIN_SLOTS && slot == NULL; i++)
		if (round_robin->slots[i].database == MyDatabaseId)
			slot = &round_robin->slots[i];
	if (slot == NULL)
	{
		LWLockAcquire(round_robin->lock, LW_EXCLUSIVE);
		for (int i = 0; i < ROUND_ROBIN_SLOTS && slot == NULL; i++)
		{
			RoundRobinSlot *s = &round_robin->slots[i];

			if (s->database == MyDatabaseId || s->database == InvalidOid)
			{
				s->database = MyDatabaseId;
				slot = s;
			}
		}
		LWLockRelease(round_robin->lock);
		if (slot == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("too many databases use the round-robin strategy"),
					 errdetail("The server keeps %d round-robin counters.", ROUND_ROBIN_SLOTS)));
	}
	return slot;
}

/*
 * RoundRobinTicket returns this database's next round-robin number,
 * shared by every backend, and advances it.
 */
static uint64
RoundRobinTicket(void)
{
	return pg_atomic_fetch_add_u64(&round_robin_slot()->next, 1);
}

/*
 * RoundRobinPeek returns the number the next ticket will have,
 * without taking it: what explaining a decision (route(), shard_for_key())
 * may use, since it must not change the split.
 */
static uint64
RoundRobinPeek(void)
{
	return pg_atomic_read_u64(&round_robin_slot()->next);
}

/*
 * push_pair adds a key/value pair to a jsonb object being built.
 */
static void
push_pair(JsonbParseState **state, const char *key, JsonbValue *value)
{
	JsonbValue	k;

	k.type = jbvString;
	k.val.string.val = (char *) key;
	k.val.string.len = strlen(key);
	pushJsonbValue(state, WJB_KEY, &k);
	pushJsonbValue(state, WJB_VALUE, value);
}

static JsonbValue
string_value(const char *s)
{
	JsonbValue	v;

	if (s == NULL)
	{
		v.type = jbvNull;
		return v;
	}
	v.type = jbvString;
	v.val.string.val = (char *) s;
	v.val.string.len = strlen(s);
	return v;
}

static JsonbValue
binary_value(Jsonb *jb)
{
	JsonbValue	v;

	v.type = jbvBinary;
	v.val.binary.data = &jb->root;
	v.val.binary.len = VARSIZE(jb) - VARHDRSZ;
	return v;
}

/*
 * eligibility_context builds the predicate's context: the operation, the
 * key (when there is one), the shard's tags and its whole state.
 */
static Jsonb *
eligibility_context(const CdShard *shard, const char *operation, const char *key)
{
	JsonbParseState *state = NULL;
	JsonbValue	v;
	JsonbValue *result;

	pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	v = string_value(operation);
	push_pair(&state, "operation", &v);
	v = string_value(key);
	push_pair(&state, "key", &v);
	v = binary_value(shard->tags);
	push_pair(&state, "tags", &v);

	v = string_value("state");
	pushJsonbValue(&state, WJB_KEY, &v);
	pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	v = string_value(shard->name);
	push_pair(&state, "name", &v);
	v = string_value(shard->physical_id);
	push_pair(&state, "physical_id", &v);
	v.type = jbvBool;
	v.val.boolean = shard->writable;
	push_pair(&state, "writable", &v);
	v = string_value(ShardDrainName(shard->drain));
	push_pair(&state, "drain", &v);
	v = string_value(shard->region);
	push_pair(&state, "region", &v);
	v.type = jbvNumeric;
	v.val.numeric = DatumGetNumeric(DirectFunctionCall1(float8_numeric,
														Float8GetDatum(shard->priority)));
	push_pair(&state, "priority", &v);
	v = binary_value(shard->tags);
	push_pair(&state, "tags", &v);
	pushJsonbValue(&state, WJB_END_OBJECT, NULL);

	result = pushJsonbValue(&state, WJB_END_OBJECT, NULL);
	return JsonbValueToJsonb(result);
}

/*
 * RouterShardEligible calls the configured predicate for one shard; true
 * when there is none.  An error in the predicate is ELIGIBILITY_FAILED,
 * with the predicate's message as detail (a cancel stays a cancel).
 *
 * The predicate is code an administrator chose, and it runs whenever
 * someone's statement needs a new key placed: it runs as the role that
 * configured it (collegedb.config.eligible_owner), never with the rights
 * of whoever triggered it, and, as PostgreSQL runs index expressions,
 * inside a security-restricted operation with search_path pg_catalog,
 * pg_temp and every setting it changes undone afterwards.  A predicate
 * that tries to escalate when a superuser triggers it has only its
 * configurer's rights.
 */
bool
RouterShardEligible(const CdShard *shard, const char *operation, const char *key)
{
	const CdConfig *config = ConfigGet();
	MemoryContext context = CurrentMemoryContext;
	LOCAL_FCINFO(fcinfo, 2);
	FmgrInfo	flinfo;
	Datum		result;
	Oid			owner;
	Oid			save_userid;
	int			save_sec_context;
	int			nestlevel;

	if (!OidIsValid(config->eligible))
		return true;

	owner = config->eligible_owner;
	if (!OidIsValid(owner) || !SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(owner)))
		ereport(ERROR,
				(errcode(ERRCODE_CD_ELIGIBILITY_FAILED),
				 errmsg("eligibility predicate %s failed for shard \"%s\"",
						format_procedure(config->eligible), shard->name),
				 errdetail("The role that configured it no longer exists."),
				 errhint("Configure the predicate again with collegedb.configure(eligible => ...).")));
	if (pg_proc_aclcheck(config->eligible, owner, ACL_EXECUTE) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_CD_ELIGIBILITY_FAILED),
				 errmsg("eligibility predicate %s failed for shard \"%s\"",
						format_procedure(config->eligible), shard->name),
				 errdetail("Role \"%s\", which configured it and runs it, may not execute it.",
						   GetUserNameFromId(owner, false))));

	fmgr_info(config->eligible, &flinfo);
	InitFunctionCallInfoData(*fcinfo, &flinfo, 2, InvalidOid, NULL, NULL);
	fcinfo->args[0].value = CStringGetTextDatum(shard->name);
	fcinfo->args[0].isnull = false;
	fcinfo->args[1].value = JsonbPGetDatum(eligibility_context(shard, operation, key));
	fcinfo->args[1].isnull = false;

	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(owner, save_sec_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	nestlevel = NewGUCNestLevel();
	PG_TRY();
	{
		(void) set_config_option("search_path", "pg_catalog, pg_temp",
								 PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
		result = FunctionCallInvoke(fcinfo);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(context);
		edata = CopyErrorData();
		FlushErrorState();
		AtEOXact_GUC(false, nestlevel);
		SetUserIdAndSecContext(save_userid, save_sec_context);
		if (RemoteErrorIsInterrupt(edata))
			ReThrowError(edata);
		ereport(ERROR,
				(errcode(ERRCODE_CD_ELIGIBILITY_FAILED),
				 errmsg("eligibility predicate %s failed for shard \"%s\"",
						format_procedure(config->eligible), shard->name),
				 errdetail_internal("%s", edata->message)));
	}
	PG_END_TRY();
	AtEOXact_GUC(false, nestlevel);
	SetUserIdAndSecContext(save_userid, save_sec_context);

	return !fcinfo->isnull && DatumGetBool(result);
}

/* what measure_one gets and gives */
typedef struct SizeProbe
{
	const CdShard *shard;
	bool		known;
	int64		size;
} SizeProbe;

/*
 * measure_one runs the dialect's size query on a shard.
 */
static void
measure_one(void *arg)
{
	SizeProbe  *probe = arg;
	JsonbRowSink sink;

	JsonbRowSinkInit(&sink, NULL, NULL);
	(void) RemoteExecuteInternal(probe->shard, AdapterForDialect(probe->shard->dialect)->size_sql,
								 0, NULL, &sink.base, false);
	if (sink.first != NULL)
	{
		JsonbValue *v = getKeyJsonValueFromContainer(&sink.first->root, "size", 4, NULL);

		if (v && v->type == jbvNumeric)
		{
			probe->size = DatumGetInt64(DirectFunctionCall1(numeric_int8,
															NumericGetDatum(v->val.numeric)));
			probe->known = true;
		}
	}
}

/*
 * measure_size measures a shard in a subtransaction (RemoteTry), so that a
 * shard that cannot tell its size is only "unknown" (a cancel is still a
 * cancel); returns whether it could.
 */
static bool
measure_size(const CdShard *shard, int64 *size)
{
	SizeProbe	probe = {shard, false, 0};

	if (RemoteTry(measure_one, &probe, NULL) && probe.known)
	{
		*size = probe.size;
		return true;
	}
	return false;
}

/*
 * RouterShardSize returns a shard's size in bytes, measured at most
 * size_cache_ttl ago unless 'fresh'; false when it cannot be measured.
 */
bool
RouterShardSize(const CdShard *shard, bool fresh, int64 *size)
{
	SizeCacheEntry *entry;
	TimestampTz now = GetCurrentTimestamp();
	bool		found;

	if (size_cache == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = NAMEDATALEN;
		ctl.entrysize = sizeof(SizeCacheEntry);
		ctl.hcxt = TopMemoryContext;
		size_cache = hash_create("collegedb shard sizes", 16, &ctl,
								 HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	}
	entry = hash_search(size_cache, shard->name, HASH_ENTER, &found);
	if (!found || fresh ||
		now - entry->measured_at >= ConfigGet()->size_cache_ttl_ms * 1000)
	{
		entry->known = measure_size(shard, &entry->size);
		entry->measured_at = now;
	}
	*size = entry->size;
	return entry->known;
}

/*
 * RouterShardTakesKeys says whether a shard's state lets it take new keys.
 */
bool
RouterShardTakesKeys(const CdShard *shard)
{
	return OidIsValid(shard->serverid) && shard->writable &&
		shard->drain == CD_DRAIN_ACTIVE;
}

/*
 * RouterAnyShardTakesKeys says whether any registered shard's state lets
 * it take new keys.
 */
bool
RouterAnyShardTakesKeys(void)
{
	ListCell   *lc;

	foreach(lc, ShardList())
		if (RouterShardTakesKeys(lfirst(lc)))
			return true;
	return false;
}

/*
 * RouterAnyShardEligible says whether any registered shard is eligible
 * under computed placement: takes keys and is accepted by the eligibility
 * predicate (operation "publish", as when epochs are published).
 */
bool
RouterAnyShardEligible(void)
{
	ListCell   *lc;

	foreach(lc, ShardList())
		if (RouterShardTakesKeys(lfirst(lc)) && RouterShardEligible(lfirst(lc), "publish", NULL))
			return true;
	return false;
}

/*
 * RouterUnderSizeLimit says whether a shard is below max_shard_size (or
 * cannot be measured, or there is no limit).
 */
bool
RouterUnderSizeLimit(const CdShard *shard)
{
	int64		limit = ConfigGet()->max_shard_size;
	int64		size;

	return limit == 0 || !RouterShardSize(shard, false, &size) || size < limit;
}

/*
 * RouterAllocate returns the shard 'strategy' gives a new key, after the
 * filters.  Only a pick that will be saved ('take_ticket') advances the
 * round-robin counter; any other (route(), shard_for_key(), an unmapped
 * read) only looks at it, so explaining a decision never changes the split.
 */
const CdShard *
RouterAllocate(CdStrategy strategy, const char *key, int key_len, bool take_ticket)
{
	const CdConfig *config = ConfigGet();
	List	   *all = ShardListNonEmpty();
	int			n = 0,
				small = 0;
	const CdShard **shards;
	const CdShard **under;
	char	   *keystr = pnstrdup(key, key_len);
	CdPickContext ctx;
	ListCell   *lc;


	shards = palloc(sizeof(CdShard *) * list_length(all));
	foreach(lc, all)
	{
		const CdShard *shard = lfirst(lc);

		if (RouterShardTakesKeys(shard))
			shards[n++] = shard;
	}
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_CD_NO_ELIGIBLE_SHARD),
				 errmsg("no shard can take new keys"),
				 errdetail("Every registered shard is draining, retired or not writable."),
				 errhint("Make a shard writable and active with collegedb.set_shard_state().")));

	if (OidIsValid(config->eligible))
	{
		int			kept = 0;

		for (int i = 0; i < n; i++)
			if (RouterShardEligible(shards[i], "allocate", keystr))
				shards[kept++] = shards[i];
		if (kept == 0)
			ereport(ERROR,
					(errcode(ERRCODE_CD_NO_ELIGIBLE_SHARD),
					 errmsg("no shard can take new keys"),
					 errdetail("The eligibility predicate %s accepts none of the %d active, writable shards.",
							   format_procedure(config->eligible), n)));
		n = kept;
	}

	if (config->max_shard_size > 0)
	{
		StringInfoData excluded;

		initStringInfo(&excluded);
		under = palloc(sizeof(CdShard *) * n);
		for (int i = 0; i < n; i++)
		{
			if (RouterUnderSizeLimit(shards[i]))
				under[small++] = shards[i];
			else
				appendStringInfo(&excluded, "%s%s", excluded.len ? ", " : "", shards[i]->name);
		}
		if (small > 0)
		{
			if (CollegeDebug && small < n)
				ereport(NOTICE,
						(errmsg("excluded %d shard%s due to size limits: %s",
								n - small, n - small == 1 ? "" : "s", excluded.data)));
			shards = under;
			n = small;
		}
		else if (CollegeDebug)
			ereport(NOTICE,
					(errmsg("every shard is at or above max_shard_size; ignoring the limit for this key")));
	}

	ctx.key = pg_server_to_any(key, key_len, PG_UTF8);
	ctx.key_len = ctx.key == key ? key_len : strlen(ctx.key);
	ctx.target_region = NULL;
	if (config->region_prefixed_keys)
		ctx.target_region = RegionRegionPrefix(key, key_len);
	if (ctx.target_region == NULL && CollegeTargetRegion && CollegeTargetRegion[0])
		ctx.target_region = CollegeTargetRegion;
	if (ctx.target_region == NULL && config->target_region[0])
		ctx.target_region = config->target_region;
	ctx.ticket = strategy != CD_STRATEGY_ROUND_ROBIN ? 0 :
		take_ticket ? RoundRobinTicket() : RoundRobinPeek();

	return PlacementPick(strategy, shards, n, &ctx);
}
