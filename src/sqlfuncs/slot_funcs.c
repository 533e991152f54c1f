/*-------------------------------------------------------------------------
 *
 * slot_funcs.c
 *	  SQL functions of slot maps: initialize_shard_map, which
 *	  installs version 1, and verify_shard_map, which compares where a
 *	  registered table's rows are with where a map puts them.
 *
 * Moving a slot (move_slot, schedule_move_slot) is a job: move_funcs.c
 * and worker/slot_moves.c.  The maps themselves, their normal form and
 * digest are catalog/slotmaps.c and placement/slots.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"

#include "catalog/catalog.h"
#include "catalog/shards.h"
#include "catalog/slotmaps.h"
#include "catalog/tables.h"
#include "cd_errcodes.h"
#include "placement/slots.h"
#include "remote/fanout.h"
#include "sqlfuncs/sqlfuncs.h"

PG_FUNCTION_INFO_V1(collegedb_initialize_shard_map);
PG_FUNCTION_INFO_V1(collegedb_verify_shard_map);

/* how many mismatching rows verify_shard_map shows */
#define VERIFY_MAX_SAMPLES 10

static Datum
jsonb_from_text(const char *text)
{
	return DirectFunctionCall1(jsonb_in, CStringGetDatum(text));
}

/*
 * slots_arg reads a slot count argument: 1 .. SLOT_MAP_MAX_SLOTS.
 */
static int32
slots_arg(FunctionCallInfo fcinfo, int n)
{
	int32		slots;

	if (PG_ARGISNULL(n))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("slots must not be null")));
	slots = PG_GETARG_INT32(n);
	if (slots < 1 || slots > SLOT_MAP_MAX_SLOTS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("slots must be between 1 and %d, not %d", SLOT_MAP_MAX_SLOTS, slots)));
	return slots;
}

/*
 * default_map returns the default map of 'slots' slots over the active
 * shards in name order (C collation): slot k on shards[k mod n].
 */
static CdSlotMap *
default_map(int32 slots)
{
	List	   *all = ShardListNonEmpty();
	const char **names = palloc(sizeof(char *) * Max(list_length(all), 1));
	int			n = 0;
	ListCell   *lc;

	foreach(lc, all)
	{
		const CdShard *shard = lfirst(lc);

		if (OidIsValid(shard->serverid) && shard->drain == CD_DRAIN_ACTIVE)
			names[n++] = shard->name;
	}
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_CD_NO_ELIGIBLE_SHARD),
				 errmsg("no shard is active, so the default slot map has no shard to use"),
				 errhint("Give the ranges, or make a shard active with collegedb.set_shard_state().")));
	return PlacementDefaultSlotMap(slots, names, n);
}

/*
 * collegedb_initialize_shard_map installs version 1 of the slot map: the
 * given ranges (normalised), or the default map of 'slots' slots; returns
 * its snapshot.  An exact retry of the installed map returns it and
 * changes nothing; any other map while one is installed is
 * SLOT_MAP_CONFLICT, naming both digests.
 */
Datum
collegedb_initialize_shard_map(PG_FUNCTION_ARGS)
{
	int32		slots = slots_arg(fcinfo, 0);
	CdSlotMap  *map;
	CdSlotMap  *installed;

	CatalogEnsureWritable(gettext_noop("cannot install a slot map on a hot standby"));
	if (PG_ARGISNULL(1))
		map = default_map(slots);
	else
	{
		map = SlotMapParse(slots, PG_GETARG_JSONB_P(1));
		PlacementNormalizeSlotMap(map);
		for (int i = 0; i < map->nranges; i++)
			if (ShardLookupOptional(map->ranges[i].shard) == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_CD_SHARD_NOT_FOUND),
						 errmsg("shard \"%s\" of %s is not registered", map->ranges[i].shard,
								SlotSpanText(map->ranges[i].start, map->ranges[i].end)),
						 errhint("Register it with collegedb.add_shard().")));
	}
	map->digest = PlacementSlotMapDigest(map);

	installed = SlotMapLockNewest();
	if (installed != NULL)
	{
		if (strcmp(installed->digest, map->digest) == 0 && PlacementSlotMapsEqual(installed, map))
			PG_RETURN_DATUM(jsonb_from_text(PlacementSlotMapSnapshot(installed)));
		ereport(ERROR,
				(errcode(ERRCODE_CD_SLOT_MAP_CONFLICT),
				 errmsg("a different slot map is installed"),
				 errdetail("The installed map, version %d, has digest %s; this one would have digest %s.",
						   installed->version, installed->digest, map->digest),
				 errhint("An installed map is never replaced or deleted: move slots with collegedb.move_slot().")));
	}
	map->version = 1;
	SlotMapInsert(map, PlacementSlotRangesJson(map));
	PG_RETURN_DATUM(jsonb_from_text(PlacementSlotMapSnapshot(map)));
}

/* one row of verify_shard_map's samples */
typedef struct VerifySample
{
	char	   *key;
	const char *shard;
	int32		slot;
	const char *expected;
} VerifySample;

/* what verify_shard_map counts, over every shard's rows */
typedef struct VerifyState
{
	const CdSlotMap *map;
	int64		checked;
	int64		mismatches;
	int			nsamples;
	VerifySample samples[VERIFY_MAX_SAMPLES];
	bits8	   *seen;			/* one bit per slot */
	int32		observed;
	MemoryContext context;		/* of the samples */
} VerifyState;

/* the rows of one shard, compared as they stream by */
typedef struct VerifySink
{
	CdRowSink	base;
	VerifyState *state;
	const CdShard *shard;
} VerifySink;

static void
verify_columns(CdRowSink *self, int ncols, const char *const *names)
{
}

static int
sample_cmp(const VerifySample *a, const VerifySample *b)
{
	int			c = strcmp(a->key, b->key);

	return c != 0 ? c : strcmp(a->shard, b->shard);
}

/*
 * keep_sample keeps the VERIFY_MAX_SAMPLES smallest mismatches (by key,
 * then shard), in order, so that the samples do not depend on which shard
 * answered first.
 */
static void
keep_sample(VerifyState *state, const VerifySample *sample)
{
	int			at = state->nsamples;

	while (at > 0 && sample_cmp(sample, &state->samples[at - 1]) < 0)
		at--;
	if (at >= VERIFY_MAX_SAMPLES)
		return;
	if (state->nsamples < VERIFY_MAX_SAMPLES)
		state->nsamples++;
	memmove(&state->samples[at + 1], &state->samples[at],
			sizeof(VerifySample) * (state->nsamples - 1 - at));
	state->samples[at].key = MemoryContextStrdup(state->context, sample->key);
	state->samples[at].shard = MemoryContextStrdup(state->context, sample->shard);
	state->samples[at].slot = sample->slot;
	state->samples[at].expected = MemoryContextStrdup(state->context, sample->expected);
}

static void
verify_row(CdRowSink *self, int ncols, const CdCell *cells)
{
	VerifySink *sink = (VerifySink *) self;
	VerifyState *state = sink->state;
	int32		slot;
	const char *expected;

	if (cells[0].isnull || cells[0].kind == CD_VALUE_NULL)
		return;
	slot = PlacementKeySlot(cells[0].data, cells[0].len, state->map->slots);
	state->checked++;
	if (!(state->seen[slot / 8] & (1 << (slot % 8))))
	{
		state->seen[slot / 8] |= 1 << (slot % 8);
		state->observed++;
	}
	expected = PlacementSlotShard(state->map, slot);
	if (strcmp(expected, sink->shard->name) != 0)
	{
		VerifySample sample;

		state->mismatches++;
		sample.key = pnstrdup(cells[0].data, cells[0].len);
		sample.shard = sink->shard->name;
		sample.slot = slot;
		sample.expected = expected;
		keep_sample(state, &sample);
	}
}

/*
 * collegedb_verify_shard_map reads the key of every row of a registered
 * table on every shard and compares each row's shard with the shard the
 * installed map (or, with none installed, the default map of 'slots'
 * slots) gives its key's slot.  Read-only; rows stream through, so memory
 * does not grow with the table.
 */
Datum
collegedb_verify_shard_map(PG_FUNCTION_ARGS)
{
	CdTable    *table = RegisteredTableEnsure(ArgText(fcinfo, 0, "table name"));
	const CdSlotMap *installed = SlotMapCurrent();
	VerifyState state;
	CdFanoutShard *found;
	VerifySink *sinks;
	const CdShard **set;
	StringInfoData out;
	int			n;

	memset(&state, 0, sizeof(state));
	if (installed != NULL)
	{
		if (!PG_ARGISNULL(1) && slots_arg(fcinfo, 1) != installed->slots)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("slots %d differs from the installed map's %d", PG_GETARG_INT32(1),
							installed->slots),
					 errhint("Leave slots out to compare with the installed map.")));
		state.map = installed;
	}
	else
	{
		CdSlotMap  *map = default_map(PG_ARGISNULL(1) ? SLOT_MAP_DEFAULT_SLOTS : slots_arg(fcinfo, 1));

		map->digest = PlacementSlotMapDigest(map);
		state.map = map;
	}
	state.seen = palloc0(state.map->slots / 8 + 1);
	state.context = CurrentMemoryContext;

	set = ShardReadSet(&n);
	found = palloc0(sizeof(CdFanoutShard) * Max(n, 1));
	sinks = palloc0(sizeof(VerifySink) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		const CdAdapter *adapter = AdapterForDialect(set[i]->dialect);

		sinks[i].base.columns = verify_columns;
		sinks[i].base.row = verify_row;
		sinks[i].state = &state;
		sinks[i].shard = set[i];
		found[i].shard = set[i];
		/* in each shard's dialect: identifiers quote differently */
		found[i].sql = psprintf("SELECT %s FROM %s", adapter->quote_ident(table->key_column),
								adapter->quote_ident(table->name));
		found[i].sink = &sinks[i].base;
	}
	FanoutRun(found, n, NULL, 0, NULL, CD_FANOUT_READ);
	for (int i = 0; i < n; i++)
		if (!found[i].ok)
			FanoutRaise(&found[i], found[i].sql, NULL);

	initStringInfo(&out);
	appendStringInfo(&out, "{\"checked\": " INT64_FORMAT ", \"mismatches\": " INT64_FORMAT
					 ", \"samples\": [", state.checked, state.mismatches);
	for (int i = 0; i < state.nsamples; i++)
	{
		appendStringInfoString(&out, i ? ", {\"key\": " : "{\"key\": ");
		escape_json(&out, state.samples[i].key);
		appendStringInfoString(&out, ", \"shard\": ");
		escape_json(&out, state.samples[i].shard);
		appendStringInfo(&out, ", \"slot\": %d, \"expected\": ", state.samples[i].slot);
		escape_json(&out, state.samples[i].expected);
		appendStringInfoChar(&out, '}');
	}
	appendStringInfo(&out, "], \"observed_slots\": %d, \"version\": ", state.observed);
	if (state.map->version > 0)
		appendStringInfo(&out, "%d", state.map->version);
	else
		appendStringInfoString(&out, "null");
	appendStringInfoString(&out, ", \"digest\": ");
	escape_json(&out, state.map->digest);
	appendStringInfoChar(&out, '}');
	PG_RETURN_DATUM(jsonb_from_text(out.data));
}
