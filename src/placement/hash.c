/*-------------------------------------------------------------------------
 *
 * hash.c
 *	  The placement hash functions, exactly as src/README.md ("Placement")
 *	  defines them; sql/hash.sql holds test values that must not change.
 *
 * Rendezvous (strategy "hash"): score(s, k) = fmix32(fnv1a32(s ':' k)),
 * the owner is the highest score, ties to the lower name.  Jump (Concile
 * fixed-N): Lamping & Veach's jump consistent hash of fnv1a64 over the
 * key's order-preserving encoding.  Slots (Harper): fnv1a32 over the key's
 * ordered binary form, modulo the slot count.
 *
 * Keys and names are UTF-8 bytes; callers convert from the database
 * encoding.  Nothing here does I/O or knows about shards' state.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "placement/hash.h"

#define FNV32_PRIME		((uint32) 16777619U)
#define FNV64_OFFSET	UINT64CONST(14695981039346656037)
#define FNV64_PRIME		UINT64CONST(1099511628211)

/*
 * PlacementFnv1a32 continues an FNV-1a 32-bit hash 'h' over 'data'; a new
 * hash starts from FNV32_OFFSET.
 */
uint32
PlacementFnv1a32(const char *data, size_t len, uint32 h)
{
	for (size_t i = 0; i < len; i++)
	{
		h ^= (unsigned char) data[i];
		h *= FNV32_PRIME;
	}
	return h;
}

static inline uint32
fmix32(uint32 h)
{
	h ^= h >> 16;
	h *= ((uint32) 0x85ebca6bU);
	h ^= h >> 13;
	h *= ((uint32) 0xc2b2ae35U);
	h ^= h >> 16;
	return h;
}

/*
 * PlacementRendezvousScore returns the rendezvous score of a shard for a
 * key.
 */
uint32
PlacementRendezvousScore(const char *shard, size_t shard_len,
						 const char *key, size_t key_len)
{
	uint32		h = PlacementFnv1a32(shard, shard_len, FNV32_OFFSET);

	h = PlacementFnv1a32(":", 1, h);
	h = PlacementFnv1a32(key, key_len, h);
	return fmix32(h);
}

/*
 * PlacementRendezvousOwner returns the index of the shard with the highest
 * score for the key (ties to the lower name in byte order), -1 when there
 * are no shards.
 */
int
PlacementRendezvousOwner(const char *key, size_t key_len,
						 const char *const *shards, int nshards)
{
	int			best = -1;
	uint32		best_score = 0;

	for (int i = 0; i < nshards; i++)
	{
		uint32		score = PlacementRendezvousScore(shards[i], strlen(shards[i]),
													 key, key_len);

		if (best < 0 || score > best_score ||
			(score == best_score && strcmp(shards[i], shards[best]) < 0))
		{
			best = i;
			best_score = score;
		}
	}
	return best;
}

/*
 * PlacementJumpBucket maps a key to one of 'buckets' buckets: jump
 * consistent hash over fnv1a64 of 0x06, the key with each 0x00 byte
 * written 0x00 0xFF, and a closing 0x00.
 */
int32
PlacementJumpBucket(const char *key, size_t key_len, int32 buckets)
{
	uint64		h = FNV64_OFFSET;
	int64		b = -1;
	int64		j = 0;

#define FNV64_STEP(c) (h = (h ^ (unsigned char) (c)) * FNV64_PRIME)
	FNV64_STEP(0x06);
	for (size_t i = 0; i < key_len; i++)
	{
		FNV64_STEP(key[i]);
		if (key[i] == '\0')
			FNV64_STEP(0xFF);
	}
	FNV64_STEP(0x00);
#undef FNV64_STEP

	while (j < buckets)
	{
		b = j;
		h = h * UINT64CONST(2862933555777941757) + 1;
		j = (int64) ((double) (b + 1) * ((double) (INT64CONST(1) << 31) /
										 (double) ((h >> 33) + 1)));
	}
	return (int32) b;
}

/*
 * PlacementSlot returns fnv1a32(ordered_binary(key)) mod slot_count.  The
 * ordered binary form of a text key is its UTF-8 bytes, with U+0001..U+0004
 * escaped as 0x04 c when the key is shorter than 64 characters, after a
 * 0x1B prefix when the key is empty or starts below U+001C.
 */
int32
PlacementSlot(const char *key, size_t key_len, int32 slot_count)
{
	uint32		h = FNV32_OFFSET;
	size_t		nchars = 0;
	bool		escape;

	/* characters, not bytes: count the bytes that start a UTF-8 sequence */
	for (size_t i = 0; i < key_len && nchars < 64; i++)
		if (((unsigned char) key[i] & 0xC0) != 0x80)
			nchars++;
	escape = nchars < 64;

	if (key_len == 0 || (unsigned char) key[0] < 0x1C)
		h = PlacementFnv1a32("\x1b", 1, h);
	for (size_t i = 0; i < key_len; i++)
	{
		unsigned char c = (unsigned char) key[i];

		if (escape && c >= 0x01 && c <= 0x04)
			h = PlacementFnv1a32("\x04", 1, h);
		h = PlacementFnv1a32((const char *) &c, 1, h);
	}
	return (int32) (h % (uint32) slot_count);
}
