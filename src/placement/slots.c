/*-------------------------------------------------------------------------
 *
 * slots.c
 *	  Slot maps as values (README.md "Slot maps"): the default map
 *	  of a slot count and a set of shards, the normal form every map is
 *	  stored and hashed in, its digest, the shard of a slot, a map with one
 *	  slot reassigned, and the snapshot's JSON text.
 *
 * The normal form sorts ranges by start and merges adjacent ranges of the
 * same shard, so that equal maps are equal however they were written.
 * The digest is the lowercase hex SHA-256 of the UTF-8 text "slots=<n>"
 * followed, for each normalised range, by ";<start>-<end>=<shard>": equal
 * maps give equal digests on any front.  Pure functions of their inputs;
 * validation of a map from its JSON is catalog/slotmaps.c's, reading and
 * writing the catalog is not done here.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/cryptohash.h"
#include "common/sha2.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/json.h"

#include "placement/hash.h"
#include "placement/slots.h"

/*
 * PlacementDefaultSlotMap returns the map that puts slot k on
 * shards[k mod n] ('shards' sorted by name, C collation), normalised.
 */
CdSlotMap *
PlacementDefaultSlotMap(int32 slots, const char *const *shards, int n)
{
	CdSlotMap  *map = palloc0(sizeof(CdSlotMap));

	Assert(n > 0 && slots > 0);
	map->slots = slots;
	map->nranges = slots;
	map->ranges = palloc(sizeof(CdSlotRange) * slots);
	for (int32 k = 0; k < slots; k++)
	{
		map->ranges[k].start = k;
		map->ranges[k].end = k + 1;
		map->ranges[k].shard = pstrdup(shards[k % n]);
	}
	PlacementNormalizeSlotMap(map);
	return map;
}

/*
 * PlacementNormalizeSlotMap merges, in a map whose ranges are sorted by
 * start and cover every slot once, adjacent ranges of the same shard.
 */
void
PlacementNormalizeSlotMap(CdSlotMap *map)
{
	int			kept = 0;

	for (int i = 0; i < map->nranges; i++)
	{
		if (kept > 0 && strcmp(map->ranges[kept - 1].shard, map->ranges[i].shard) == 0 &&
			map->ranges[kept - 1].end == map->ranges[i].start)
			map->ranges[kept - 1].end = map->ranges[i].end;
		else
			map->ranges[kept++] = map->ranges[i];
	}
	map->nranges = kept;
}

/*
 * PlacementSlotMapDigest returns the digest of a normalised map (see the
 * file header), palloc'd.
 */
char *
PlacementSlotMapDigest(const CdSlotMap *map)
{
	StringInfoData text;
	const char *utf8;
	size_t		utf8_len;
	uint8		digest[PG_SHA256_DIGEST_LENGTH];
	pg_cryptohash_ctx *ctx;
	char	   *hex;

	initStringInfo(&text);
	appendStringInfo(&text, "slots=%d", map->slots);
	for (int i = 0; i < map->nranges; i++)
		appendStringInfo(&text, ";%d-%d=%s", map->ranges[i].start, map->ranges[i].end,
						 map->ranges[i].shard);
	utf8 = pg_server_to_any(text.data, text.len, PG_UTF8);
	utf8_len = utf8 == text.data ? text.len : strlen(utf8);

	ctx = pg_cryptohash_create(PG_SHA256);
	if (pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) utf8, utf8_len) < 0 ||
		pg_cryptohash_final(ctx, digest, sizeof(digest)) < 0)
		elog(ERROR, "could not compute SHA-256: %s", pg_cryptohash_error(ctx));
	pg_cryptohash_free(ctx);

	hex = palloc(PG_SHA256_DIGEST_LENGTH * 2 + 1);
	hex[hex_encode((const char *) digest, PG_SHA256_DIGEST_LENGTH, hex)] = '\0';
	return hex;
}

/*
 * PlacementKeySlot returns the slot of a key (in the server encoding) among
 * 'slots': fnv1a32 of its UTF-8 form, as collegedb.slot_of computes it.
 */
int32
PlacementKeySlot(const char *key, int key_len, int32 slots)
{
	char	   *utf8 = pg_server_to_any(key, key_len, PG_UTF8);
	int32		slot;

	if (utf8 == key)
		return PlacementSlot(key, key_len, slots);
	slot = PlacementSlot(utf8, strlen(utf8), slots);
	pfree(utf8);
	return slot;
}

/*
 * PlacementSlotShard returns the shard of 'slot' (0 <= slot < slots), by
 * binary search over the sorted ranges.
 */
const char *
PlacementSlotShard(const CdSlotMap *map, int32 slot)
{
	int			lo = 0,
				hi = map->nranges - 1;

	Assert(slot >= 0 && slot < map->slots);
	while (lo < hi)
	{
		int			mid = (lo + hi + 1) / 2;

		if (map->ranges[mid].start <= slot)
			lo = mid;
		else
			hi = mid - 1;
	}
	return map->ranges[lo].shard;
}

/*
 * PlacementSlotMapWith returns a copy of 'map' with 'slot' on 'shard',
 * normalised, without version or digest.
 */
CdSlotMap *
PlacementSlotMapWith(const CdSlotMap *map, int32 slot, const char *shard)
{
	CdSlotMap  *copy = palloc0(sizeof(CdSlotMap));
	int			n = 0;

	copy->slots = map->slots;
	copy->ranges = palloc(sizeof(CdSlotRange) * (map->nranges + 2));
	for (int i = 0; i < map->nranges; i++)
	{
		const CdSlotRange *r = &map->ranges[i];

		if (slot < r->start || slot >= r->end)
		{
			copy->ranges[n++] = *r;
			continue;
		}
		/* split around the slot */
		if (r->start < slot)
			copy->ranges[n++] = (CdSlotRange) {r->start, slot, r->shard};
		copy->ranges[n++] = (CdSlotRange) {slot, slot + 1, pstrdup(shard)};
		if (slot + 1 < r->end)
			copy->ranges[n++] = (CdSlotRange) {slot + 1, r->end, r->shard};
	}
	copy->nranges = n;
	PlacementNormalizeSlotMap(copy);
	return copy;
}

/*
 * PlacementSlotMapsEqual says whether two normalised maps place every slot
 * alike.
 */
bool
PlacementSlotMapsEqual(const CdSlotMap *a, const CdSlotMap *b)
{
	if (a->slots != b->slots || a->nranges != b->nranges)
		return false;
	for (int i = 0; i < a->nranges; i++)
		if (a->ranges[i].start != b->ranges[i].start || a->ranges[i].end != b->ranges[i].end ||
			strcmp(a->ranges[i].shard, b->ranges[i].shard) != 0)
			return false;
	return true;
}

/*
 * PlacementSlotRangesJson renders the ranges as a JSON array of
 * {"start", "end", "shard"} objects.
 */
char *
PlacementSlotRangesJson(const CdSlotMap *map)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '[');
	for (int i = 0; i < map->nranges; i++)
	{
		appendStringInfo(&buf, "%s{\"start\": %d, \"end\": %d, \"shard\": ", i ? ", " : "",
						 map->ranges[i].start, map->ranges[i].end);
		escape_json(&buf, map->ranges[i].shard);
		appendStringInfoChar(&buf, '}');
	}
	appendStringInfoChar(&buf, ']');
	return buf.data;
}

/*
 * PlacementSlotMapSnapshot renders an installed map as its snapshot:
 * {"version", "digest", "slots", "ranges"}.
 */
char *
PlacementSlotMapSnapshot(const CdSlotMap *map)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, "{\"version\": %d, \"digest\": ", map->version);
	if (map->digest)
		escape_json(&buf, map->digest);
	else
		appendStringInfoString(&buf, "null");
	appendStringInfo(&buf, ", \"slots\": %d, \"ranges\": %s}", map->slots,
					 PlacementSlotRangesJson(map));
	return buf.data;
}
