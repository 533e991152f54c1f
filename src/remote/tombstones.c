/*-------------------------------------------------------------------------
 *
 * tombstones.c
 *	  The tombstone protocol on the shards: every statement that reads or
 *	  writes collegedb_tombstones or takes a key's lock, and the guarded
 *	  write.
 *
 * A tombstone on a shard says "key K of table T moved to shard S"
 * (src/README.md, "Tombstones and guarded writes").  Routed reads look
 * them up (TombstoneLookup) to follow a moved key; routed writes are
 * guarded (TombstoneExecuteGuarded): they run with a check of the key's
 * tombstone under the key's shared lock, and never land on a shard the key
 * has left.  A mover takes the key's lock exclusively (TombstoneLockKey),
 * finds and drops tombstones and writes new ones inside its source
 * transaction.
 *
 * The dialect-specific parts are the adapters' (CdAdapter): the table
 * (shard_ddl, created by TombstonePrepareShard), the guard (guard_setup
 * or guard_query, and the guard's savepoint), the lock (lock_key_sql) and
 * the byte-for-byte comparison of keys (key_match); this file is the only one that runs them, and the
 * only one that writes tombstone SQL.  The lock of some dialects (MySQL's)
 * writes a placeholder row, table_name '', which is never a tombstone.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "cd_errcodes.h"
#include "remote/connection_internal.h"
#include "remote/tombstones.h"

/* a lookup of a key's tombstone, the same in every dialect */
#define TOMBSTONE_SQL "SELECT moved_to FROM collegedb_tombstones WHERE shard_key = $1 LIMIT 1"

/* the placeholder row some dialects' lock_key_sql writes; never a tombstone */
#define PLACEHOLDER_TABLE ""

/*
 * key_param makes a text parameter of a key (or a name): typed text, or
 * untyped, so that the shard takes it as the column's type.
 */
static CdParam
key_param(const char *key, int key_len, bool typed)
{
	CdParam		p;

	memset(&p, 0, sizeof(p));
	p.kind = CD_VALUE_TEXT;
	p.typid = typed ? TEXTOID : InvalidOid;
	p.str = key;
	p.len = key_len;
	return p;
}

/*
 * TombstonePrepareShard creates on 'shard' what the protocol needs there
 * (CdAdapter.shard_ddl: the tombstone table, its key index, and on
 * PostgreSQL the guard function); every statement is idempotent, so
 * add_shard may run it on a shard that had it already.
 */
void
TombstonePrepareShard(const CdShard *shard)
{
	for (const char *const *ddl = AdapterForDialect(shard->dialect)->shard_ddl; *ddl; ddl++)
		(void) RemoteExecuteInternal(shard, *ddl, 0, NULL, NULL, true);
}

/*
 * TombstoneEnsureKeyFits refuses a key longer than 'shard''s tombstone
 * table can hold (CdAdapter.max_key_length: MySQL's VARCHAR), before
 * anything is written: its tombstone would be stored cut short, and no
 * guard would ever find it.  'moving': the key is to be moved, not written.
 */
void
TombstoneEnsureKeyFits(const CdShard *shard, const char *key, int key_len, bool moving)
{
	const CdAdapter *adapter = AdapterForDialect(shard->dialect);
	int			chars;

	if (adapter->max_key_length <= 0)
		return;
	chars = pg_mbstrlen_with_len(key, key_len);
	if (chars <= adapter->max_key_length)
		return;
	if (moving)
		ereport(ERROR,
				(errcode(ERRCODE_STRING_DATA_RIGHT_TRUNCATION),
				 errmsg("key is too long to move to or from shard \"%s\"", shard->name),
				 errdetail("%s shards keep keys of at most %d characters in their tombstones; this key has %d.",
						   adapter->name, adapter->max_key_length, chars),
				 errhint("Nothing was moved.")));
	ereport(ERROR,
			(errcode(ERRCODE_STRING_DATA_RIGHT_TRUNCATION),
			 errmsg("key is too long for %s shard \"%s\"", adapter->name, shard->name),
			 errdetail("The shard's tombstone table holds keys of at most %d characters; this key has %d.",
					   adapter->max_key_length, chars)));
}

/*
 * TombstoneKeyFits says whether 'shard''s tombstone table holds the key
 * (what TombstoneEnsureKeyFits refuses, as a test).
 */
bool
TombstoneKeyFits(const CdShard *shard, const char *key, int key_len)
{
	const CdAdapter *adapter = AdapterForDialect(shard->dialect);

	return adapter->max_key_length <= 0 ||
		pg_mbstrlen_with_len(key, key_len) <= adapter->max_key_length;
}

/*
 * TombstoneExecuteGuarded runs a write for 'key' on 'shard' unless the key
 * has moved away from it (src/README.md, "Tombstones and guarded writes"):
 * together with a check of the key's tombstone, under the key's lock, in
 * the shard's transaction.  When the
 * key has moved, nothing is written, *moved_to names the destination, and
 * the shard's transaction is as before.
 *
 * A dialect with pipelining (PostgreSQL) sends its guard_setup in the
 * statement's pipeline (one round trip); when it finds a tombstone it
 * fails, the pipeline stops before the statement, and the remote
 * transaction is rolled back (or, if it was open before, back to the
 * guard's savepoint).  The others run their guard_query first (a locking
 * read on MySQL, under SQLite's write lock) and the statement only when it
 * returns nothing.
 */
int64
TombstoneExecuteGuarded(const CdShard *shard, const char *key, int key_len,
						const char *sql, int nparams, const CdParam *params,
						CdRowSink *sink, char **moved_to)
{
	const CdAdapter *adapter = AdapterForDialect(shard->dialect);
	CdParam		kp = key_param(pnstrdup(key, key_len), key_len, true);
	CdStatement st;

	*moved_to = NULL;
	TombstoneEnsureKeyFits(shard, key, key_len, false);
	StatementPrepare(&st, shard, sql, nparams, params, true, 0);
	for (int attempt = 0;; attempt++)
	{
		bool		ok;
		ErrorContextCallback context;

		/* in one round trip, guard and write in one implicit transaction */
		st.commit_alone = adapter->caps.pipelining && adapter->guard_setup &&
			ConnectionCommitAloneOk();
		StatementBegin(&st);
		StatementContextPush(&st, &context);
		if (adapter->caps.pipelining && adapter->guard_setup)
		{
			/* the key goes as the guard's parameter, past the statement's */
			CdParam    *with_key = palloc(sizeof(CdParam) * (nparams + 1));

			if (nparams > 0)
				memcpy(with_key, params, sizeof(CdParam) * nparams);
			with_key[nparams] = kp;
			if (st.was_open)
				st.setup[st.nsetup++] = adapter->guard_savepoint;
			st.setup[st.nsetup++] = adapter->guard_setup;
			if (st.was_open)
				st.setup[st.nsetup++] = adapter->guard_release;
			ok = adapter->exec(st.conn->handle, st.nsetup, st.setup, sql,
							   nparams, with_key,
							   st.flags | CD_EXEC_GUARD | (st.commit_alone ? CD_EXEC_ALONE : 0),
							   sink, &st.rows, &st.err);
			if (!ok && strcmp(st.err.sqlstate, CD_GUARD_MOVED_SQLSTATE) == 0)
			{
				StatementContextPop(&context);
				*moved_to = pstrdup(st.err.detail ? st.err.detail : "");
				(void) StatementFinish(&st, true, attempt);
				/* alone, the shard's implicit transaction ended with it */
				if (!st.commit_alone)
					ConnectionUndoGuard(st.conn, st.was_open);
				return 0;
			}
		}
		else
		{
			CaptureRowSink found;

			CaptureRowSinkInit(&found);
			ok = adapter->exec(st.conn->handle, st.nsetup, st.setup, adapter->guard_query,
							   1, &kp, CD_EXEC_INTERNAL, &found.base, &st.rows, &st.err);
			if (ok && found.rows != NIL)
			{
				CdParam    *row = linitial(found.rows);

				StatementContextPop(&context);
				*moved_to = pstrdup(row[0].str ? row[0].str : "");
				(void) StatementFinish(&st, true, attempt);

				/*
				 * A transaction opened for this write is rolled back at once:
				 * it holds the guard's lock on the tombstone (MySQL's shared
				 * lock, SQLite's write lock), and the write now waits on
				 * moved_to, where a mover may hold that shard's lock while it
				 * waits for this one (a move from here to moved_to).
				 */
				if (!st.was_open)
					ConnectionUndoGuard(st.conn, false);
				return 0;
			}
			if (ok)
				ok = adapter->exec(st.conn->handle, 0, NULL, sql, nparams, params,
								   st.flags, sink, &st.rows, &st.err);
		}
		StatementContextPop(&context);
		if (StatementFinish(&st, ok, attempt))
			continue;
		if (ok)
			return st.rows;
		StatementRaise(&st);
	}
}

/* the servers whose guard_keys_probe this backend saw answer true */
static List *guard_keys_ready = NIL;

/*
 * ensure_guard_keys makes sure, once per backend and shard, that 'shard'
 * has what its adapter's guard_keys_sql calls: a shard that add_shard
 * prepared before 0.3 has no batch guard, and gets it (with the bounded
 * guard of single keys) from its shard_ddl, which is idempotent.
 */
static void
ensure_guard_keys(const CdShard *shard, const CdAdapter *adapter)
{
	CaptureRowSink found;
	MemoryContext old;

	if (adapter->guard_keys_probe == NULL ||
		list_member_oid(guard_keys_ready, shard->serverid))
		return;
	CaptureRowSinkInit(&found);
	(void) RemoteExecuteInternal(shard, adapter->guard_keys_probe, 0, NULL, &found.base, true);
	if (found.rows == NIL || ((CdParam *) linitial(found.rows))[0].str == NULL ||
		((CdParam *) linitial(found.rows))[0].str[0] != 't')
	{
		/* in this transaction: probed again next time, in case it aborts */
		TombstonePrepareShard(shard);
		return;
	}
	old = MemoryContextSwitchTo(TopMemoryContext);
	guard_keys_ready = lappend_oid(guard_keys_ready, shard->serverid);
	MemoryContextSwitchTo(old);
}

/*
 * TombstoneGuardKeys guards a batch of writes on 'shard', one per key of
 * 'keys' (a bulk INSERT or COPY, fdw/insert.c): in the shard's write
 * transaction, it takes every key's lock as TombstoneExecuteGuarded's
 * guard would (CdAdapter.guard_keys_sql; past CD_GUARD_KEY_LOCKS keys the
 * escalated table lock) and looks up the keys' tombstones in one query.
 * It returns where one of the keys moved to, NULL when none did; the
 * locks stay with the transaction either way, so the batch's rows written
 * after it are ordered before any move of their keys.  A caller told that
 * a key moved sends the batch's rows one by one, each guarded and
 * following its own tombstone.
 */
char *
TombstoneGuardKeys(const CdShard *shard, int nkeys, char *const *keys, const int *key_lens)
{
	const CdAdapter *adapter = AdapterForDialect(shard->dialect);
	CaptureRowSink found;
	CdParam    *params;
	int			nparams;
	char	   *sql;
	ListCell   *lc;

	for (int i = 0; i < nkeys; i++)
		TombstoneEnsureKeyFits(shard, keys[i], key_lens[i], false);
	ensure_guard_keys(shard, adapter);
	if (adapter->guard_keys_array)
	{
		char	   *array = ValuesArrayLiteral(keys, key_lens, nkeys);

		params = palloc(sizeof(CdParam));
		params[0] = key_param(array, strlen(array), true);
		nparams = 1;
		sql = (char *) adapter->guard_keys_sql;
	}
	else
	{
		StringInfoData list;

		initStringInfo(&list);
		params = palloc(sizeof(CdParam) * nkeys);
		for (int i = 0; i < nkeys; i++)
		{
			params[i] = key_param(keys[i], key_lens[i], true);
			appendStringInfo(&list, "%s$%d", i ? ", " : "", i + 1);
		}
		nparams = nkeys;
		sql = psprintf(adapter->guard_keys_sql, list.data);
	}
	CaptureRowSinkInit(&found);
	(void) RemoteExecuteInternal(shard, sql, nparams, params, &found.base, true);
	foreach(lc, found.rows)
	{
		CdParam    *row = lfirst(lc);

		if (row[0].kind != CD_VALUE_NULL && row[0].str)
			return pstrdup(row[0].str);
	}
	return NULL;
}

/*
 * TombstoneLookup returns where a key moved to from 'shard', NULL when it
 * has no tombstone there.
 */
char *
TombstoneLookup(const CdShard *shard, const char *key, int key_len)
{
	CdParam		kp = key_param(pnstrdup(key, key_len), key_len, true);
	CaptureRowSink found;

	CaptureRowSinkInit(&found);
	(void) RemoteExecuteInternal(shard, TOMBSTONE_SQL, 1, &kp, &found.base, false);
	if (found.rows == NIL)
		return NULL;
	return pstrdup(((CdParam *) linitial(found.rows))[0].str);
}

/*
 * TombstoneLockKey takes the key's lock on 'shard' exclusively in its remote
 * transaction (opening it), so that guarded writers of the key wait for
 * the move's commit, whether their guard locked the key or, past
 * CD_GUARD_KEY_LOCKS keys, the tombstone table.
 */
void
TombstoneLockKey(const CdShard *shard, const char *key)
{
	const CdAdapter *adapter = AdapterForDialect(shard->dialect);
	CdParam		kp = key_param(key, strlen(key), true);

	(void) RemoteExecuteInternal(shard, adapter->lock_key_sql, 1, &kp, NULL, true);

	/*
	 * Then the table lock that a guard escalated to conflicts with: after
	 * the key's lock, so that a writer still locking keys one by one never
	 * waits for a mover that waits for it (the mover waits on the key, the
	 * writer's escalation finds no table lock held).
	 */
	if (adapter->lock_table_sql)
		(void) RemoteExecuteInternal(shard, adapter->lock_table_sql, 0, NULL, NULL, true);
}

/*
 * TombstoneKeysCondition is the byte-for-byte comparison of 'column'
 * (unquoted) on 'shard' with any of 'nkeys' keys (AdapterKeysMatch), its
 * parameters from $first on: stored in 'params' (room for nkeys), their
 * number in *nparams.  The keys go untyped, so that the shard takes them
 * as the column's type.
 */
char *
TombstoneKeysCondition(const CdShard *shard, const char *column, int first, int nkeys,
					   char *const *keys, CdParam *params, int *nparams)
{
	bool		as_array;
	char	   *condition = AdapterKeysMatch(AdapterForDialect(shard->dialect), column,
											 first, nkeys, &as_array);

	if (as_array)
	{
		int		   *lens = palloc(sizeof(int) * Max(nkeys, 1));
		char	   *array;

		for (int i = 0; i < nkeys; i++)
			lens[i] = strlen(keys[i]);
		array = ValuesArrayLiteral(keys, lens, nkeys);
		params[0] = key_param(array, strlen(array), false);
		*nparams = 1;
		return condition;
	}
	for (int i = 0; i < nkeys; i++)
		params[i] = key_param(keys[i], strlen(keys[i]), false);
	*nparams = nkeys;
	return condition;
}

/*
 * TombstoneLockKeys takes the locks of a batch of keys on 'shard' (a
 * batched move's source transaction, opening it), sorted byte-wise by the
 * caller, as TombstoneLockKey takes one key's, then the table lock;
 * returns the keys whose lock could not be taken without waiting (only
 * PostgreSQL tries: the other dialects wait), which the batch leaves out.
 */
List *
TombstoneLockKeys(const CdShard *shard, int nkeys, char *const *keys)
{
	const CdAdapter *adapter = AdapterForDialect(shard->dialect);
	CaptureRowSink found;
	CdParam    *params = palloc(sizeof(CdParam) * Max(nkeys, 1));
	List	   *missed = NIL;
	char	   *sql;
	ListCell   *lc;

	if (adapter->guard_keys_array)
	{
		int		   *lens = palloc(sizeof(int) * Max(nkeys, 1));
		char	   *array;

		for (int i = 0; i < nkeys; i++)
			lens[i] = strlen(keys[i]);
		array = ValuesArrayLiteral(keys, lens, nkeys);
		params[0] = key_param(array, strlen(array), true);
		sql = (char *) adapter->lock_keys_sql;
		nkeys = 1;
	}
	else
	{
		StringInfoData list;

		initStringInfo(&list);
		for (int i = 0; i < nkeys; i++)
		{
			if (i)
				appendStringInfoString(&list, ", ");
			appendStringInfo(&list, adapter->lock_keys_item, i + 1);
			params[i] = key_param(keys[i], strlen(keys[i]), true);
		}
		sql = psprintf(adapter->lock_keys_sql, list.data);
	}
	CaptureRowSinkInit(&found);
	(void) RemoteExecuteInternal(shard, sql, nkeys, params, &found.base, true);
	foreach(lc, found.rows)
	{
		CdParam    *row = lfirst(lc);

		if (row[0].kind != CD_VALUE_NULL && row[0].str && found.ncols == 1 &&
			adapter->guard_keys_array)
			missed = lappend(missed, pstrdup(row[0].str));
	}
	/* the table lock after the keys' locks: see TombstoneLockKey */
	if (adapter->lock_table_sql)
		(void) RemoteExecuteInternal(shard, adapter->lock_table_sql, 0, NULL, NULL, true);
	return missed;
}

/*
 * TombstoneFindKeys returns the tombstones of any of 'nkeys' keys on
 * 'shard', as rows of (shard_key, moved_to), reading inside the shard's
 * open transaction (after the keys' locks: what their holders committed).
 * The placeholder a lock may write is no tombstone.
 */
List *
TombstoneFindKeys(const CdShard *shard, int nkeys, char *const *keys)
{
	CdParam    *params = palloc(sizeof(CdParam) * Max(nkeys, 1));
	int			nparams;
	char	   *condition = TombstoneKeysCondition(shard, "shard_key", 1, nkeys, keys,
												   params, &nparams);
	CaptureRowSink found;

	CaptureRowSinkInit(&found);
	(void) RemoteExecuteInternal(shard,
								 psprintf("SELECT shard_key, moved_to FROM collegedb_tombstones WHERE %s "
										  "AND table_name <> '" PLACEHOLDER_TABLE "'", condition),
								 nparams, params, &found.base, true);
	return found.rows;
}

/*
 * TombstoneFind returns where the key's tombstone on 'shard' points,
 * NULL when it has none (TombstoneFindKeys of the one key).
 */
char *
TombstoneFind(const CdShard *shard, const char *key)
{
	char	   *keys[1] = {(char *) key};
	List	   *rows = TombstoneFindKeys(shard, 1, keys);
	CdParam    *row;

	if (rows == NIL)
		return NULL;
	row = linitial(rows);
	return row[1].kind == CD_VALUE_NULL ? NULL : pstrdup(row[1].str);
}

/*
 * TombstoneDropKeys deletes every tombstone of any of 'nkeys' keys on
 * 'shard' (and the placeholders of their locks); with 'placeholder_only',
 * just the placeholders.
 */
void
TombstoneDropKeys(const CdShard *shard, int nkeys, char *const *keys, bool placeholder_only)
{
	CdParam    *params = palloc(sizeof(CdParam) * Max(nkeys, 1));
	int			nparams;
	char	   *condition = TombstoneKeysCondition(shard, "shard_key", 1, nkeys, keys,
												   params, &nparams);

	(void) RemoteExecuteInternal(shard,
								 psprintf("DELETE FROM collegedb_tombstones WHERE %s%s", condition,
										  placeholder_only ?
										  " AND table_name = '" PLACEHOLDER_TABLE "'" : ""),
								 nparams, params, NULL, true);
}

/*
 * TombstoneDrop deletes every tombstone of the key on 'shard' (and the
 * placeholder of its lock); with 'placeholder_only', just the placeholder.
 */
void
TombstoneDrop(const CdShard *shard, const char *key, bool placeholder_only)
{
	char	   *keys[1] = {(char *) key};

	TombstoneDropKeys(shard, 1, keys, placeholder_only);
}

/*
 * TombstoneWriteKeys records on 'shard', in one statement, that the rows
 * of 'table' of each of 'nkeys' keys moved to 'moved_to', key i by move
 * move_ids[i].
 */
void
TombstoneWriteKeys(const CdShard *shard, const CdTable *table, int nkeys, char *const *keys,
				   const char *moved_to, const int64 *move_ids)
{
	CdParam    *tp = palloc0(sizeof(CdParam) * (2 + 2 * nkeys));
	StringInfoData sql;

	tp[0] = key_param(table->name, strlen(table->name), true);
	tp[1] = key_param(moved_to, strlen(moved_to), true);
	initStringInfo(&sql);
	appendStringInfoString(&sql, "INSERT INTO collegedb_tombstones (table_name, shard_key, moved_to, move_id) VALUES ");
	for (int i = 0; i < nkeys; i++)
	{
		CdParam    *id = &tp[3 + 2 * i];

		tp[2 + 2 * i] = key_param(keys[i], strlen(keys[i]), true);
		id->kind = CD_VALUE_INT;
		id->typid = INT8OID;
		id->ival = move_ids[i];
		id->str = psprintf(INT64_FORMAT, move_ids[i]);
		id->len = strlen(id->str);
		appendStringInfo(&sql, "%s($1, $%d, $2, $%d)", i ? ", " : "", 3 + 2 * i, 4 + 2 * i);
	}
	(void) RemoteExecuteInternal(shard, sql.data, 2 + 2 * nkeys, tp, NULL, true);
}

/*
 * TombstoneWrite records on 'shard' that the key's rows of 'table'
 * moved to 'moved_to'.
 */
void
TombstoneWrite(const CdShard *shard, const CdTable *table, const char *key,
			   const char *moved_to, int64 move_id)
{
	char	   *keys[1] = {(char *) key};

	TombstoneWriteKeys(shard, table, 1, keys, moved_to, &move_id);
}
