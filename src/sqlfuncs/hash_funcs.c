/*-------------------------------------------------------------------------
 *
 * hash_funcs.c
 *	  SQL wrappers of the placement hash functions: rendezvous_score,
 *	  rendezvous_owner, jump_bucket, slot_of.
 *
 * Text arrives in the database encoding and is hashed as UTF-8, as
 * src/README.md ("Placement") defines.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "placement/hash.h"

PG_FUNCTION_INFO_V1(collegedb_rendezvous_score);
PG_FUNCTION_INFO_V1(collegedb_rendezvous_owner);
PG_FUNCTION_INFO_V1(collegedb_jump_bucket);
PG_FUNCTION_INFO_V1(collegedb_slot_of);

/*
 * utf8_arg returns a text argument's bytes in UTF-8.
 */
static const char *
utf8_arg(FunctionCallInfo fcinfo, int n, size_t *len)
{
	text	   *t = PG_GETARG_TEXT_PP(n);
	const char *s = VARDATA_ANY(t);
	int			l = VARSIZE_ANY_EXHDR(t);
	const char *u = pg_server_to_any(s, l, PG_UTF8);

	*len = (u == s) ? l : strlen(u);
	return u;
}

static void
ensure_positive(int32 n, const char *what)
{
	if (n <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be positive", what)));
}

Datum
collegedb_rendezvous_score(PG_FUNCTION_ARGS)
{
	size_t		shard_len,
				key_len;
	const char *shard = utf8_arg(fcinfo, 0, &shard_len);
	const char *key = utf8_arg(fcinfo, 1, &key_len);

	PG_RETURN_INT64((int64) PlacementRendezvousScore(shard, shard_len, key, key_len));
}

/*
 * collegedb_rendezvous_owner returns the shard with the highest score for
 * the key; NULL for an empty array.  NULL shard names are refused.
 */
Datum
collegedb_rendezvous_owner(PG_FUNCTION_ARGS)
{
	size_t		key_len;
	const char *key = utf8_arg(fcinfo, 0, &key_len);
	ArrayType  *arr = PG_GETARG_ARRAYTYPE_P(1);
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	const char **names;
	const char **originals;
	int			owner;

	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	if (n == 0)
		PG_RETURN_NULL();
	names = palloc(sizeof(char *) * n);
	originals = palloc(sizeof(char *) * n);
	for (int i = 0; i < n; i++)
	{
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("shard names must not be null")));
		originals[i] = TextDatumGetCString(elems[i]);
		names[i] = pg_server_to_any(originals[i], strlen(originals[i]), PG_UTF8);
	}
	owner = PlacementRendezvousOwner(key, key_len, names, n);
	PG_RETURN_TEXT_P(cstring_to_text(originals[owner]));
}

/*
 * bucket_of returns bucket(key, n) of (key text, n int), 'what' naming n
 * in the error when it is not positive.
 */
static Datum
bucket_of(FunctionCallInfo fcinfo, int32 (*bucket) (const char *, size_t, int32),
		  const char *what)
{
	size_t		key_len;
	const char *key = utf8_arg(fcinfo, 0, &key_len);
	int32		n = PG_GETARG_INT32(1);

	ensure_positive(n, what);
	PG_RETURN_INT32(bucket(key, key_len, n));
}

Datum
collegedb_jump_bucket(PG_FUNCTION_ARGS)
{
	return bucket_of(fcinfo, PlacementJumpBucket, "the number of buckets");
}

Datum
collegedb_slot_of(PG_FUNCTION_ARGS)
{
	return bucket_of(fcinfo, PlacementSlot, "the slot count");
}
