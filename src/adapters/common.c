/*-------------------------------------------------------------------------
 *
 * common.c
 *	  The small helpers every adapter shares: errors, quoting, the
 *	  deadlines of waits, row delivery.
 *
 * Nothing here talks to a shard; the adapters do.  The list of adapters
 * is registry.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "adapters/adapter.h"
#include "collegedb.h"

/*
 * The "apply only if newer" writes of topology groups (see adapter.h) in
 * the INSERT ... ON CONFLICT form that PostgreSQL and SQLite share.
 */
const char AdapterUpsertTopology[] =
"INSERT INTO collegedb_topology AS t (group_name, version, snapshot) "
"VALUES ($1, $2, $3) ON CONFLICT (group_name) DO UPDATE "
"SET version = excluded.version, snapshot = excluded.snapshot WHERE excluded.version > t.version";

const char AdapterUpsertTopologyState[] =
"INSERT INTO collegedb_topology_state AS t (group_name, channel, version, value) "
"VALUES ($1, $2, $3, $4) ON CONFLICT (group_name, channel) DO UPDATE "
"SET version = excluded.version, value = excluded.value WHERE excluded.version > t.version";

/*
 * AdapterSetError fills a CdRemoteError, copying every string into the
 * current memory context so that the caller may free client-library
 * handles right after.
 */
void
AdapterSetError(CdRemoteError *err, const char *sqlstate, bool connection_lost,
				const char *message, const char *detail, const char *hint)
{
	if (sqlstate == NULL || strlen(sqlstate) != 5)
		sqlstate = connection_lost ? "08006" : "XX000";
	memcpy(err->sqlstate, sqlstate, 5);
	err->sqlstate[5] = '\0';
	err->message = pstrdup(message ? message : "unknown error");
	err->detail = detail && detail[0] ? pstrdup(detail) : NULL;
	err->hint = hint && hint[0] ? pstrdup(hint) : NULL;
	err->connection_lost = connection_lost;
	err->nothing_sent = false;
}

/*
 * AdapterRefuse fills *err for a call refused before anything was sent.
 */
void
AdapterRefuse(CdRemoteError *err, const char *sqlstate, const char *message,
			  const char *detail)
{
	AdapterSetError(err, sqlstate, false, message, detail, NULL);
	err->nothing_sent = true;
}

/*
 * AdapterHexBytes renders raw bytes as PostgreSQL's bytea hex text
 * ("\x0a1b..."), palloc'd.
 */
char *
AdapterHexBytes(const char *data, int len)
{
	static const char hexdig[] = "0123456789abcdef";
	char	   *out = palloc(len * 2 + 3);
	char	   *p = out;

	*p++ = '\\';
	*p++ = 'x';
	for (int i = 0; i < len; i++)
	{
		unsigned char c = (unsigned char) data[i];

		*p++ = hexdig[c >> 4];
		*p++ = hexdig[c & 0xF];
	}
	*p = '\0';
	return out;
}

/*
 * AdapterQuoteIdent quotes an identifier between two 'quote' characters,
 * doubling the ones inside it: '"' for PostgreSQL and SQLite, '`' for
 * MySQL.  The result is palloc'd.
 */
char *
AdapterQuoteIdent(const char *ident, char quote)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, quote);
	for (const char *p = ident; *p; p++)
	{
		if (*p == quote)
			appendStringInfoChar(&buf, quote);
		appendStringInfoChar(&buf, *p);
	}
	appendStringInfoChar(&buf, quote);
	return buf.data;
}

/*
 * AdapterQuoteStandardIdent quotes an identifier the SQL standard's way, in
 * double quotes (PostgreSQL, SQLite): a CdAdapter.quote_ident.
 */
char *
AdapterQuoteStandardIdent(const char *ident)
{
	return AdapterQuoteIdent(ident, '"');
}

/*
 * AdapterKeyMatch returns the adapter's byte-for-byte comparison of column
 * 'column' (unquoted) with parameter $n (CdAdapter.key_match).
 */
char *
AdapterKeyMatch(const CdAdapter *adapter, const char *column, int n)
{
	return psprintf(adapter->key_match ? adapter->key_match : "%1$s = $%2$d",
					adapter->quote_ident(column), n);
}

/*
 * AdapterKeysMatch returns the byte-for-byte comparison of column 'column'
 * (unquoted) with any of 'nkeys' keys, the parameters from $first on:
 * with the adapter's key_list_sql one parameter, the keys' array literal
 * (*as_array); otherwise one parameter per key, in the adapter's
 * key_in_match or each compared by key_match.
 */
char *
AdapterKeysMatch(const CdAdapter *adapter, const char *column, int first, int nkeys,
				 bool *as_array)
{
	StringInfoData buf;

	*as_array = adapter->key_list_sql != NULL;
	initStringInfo(&buf);
	if (*as_array)
	{
		appendStringInfoString(&buf, adapter->quote_ident(column));
		appendStringInfo(&buf, adapter->key_list_sql, first);
		return buf.data;
	}
	if (adapter->key_in_match && nkeys > 1)
	{
		for (int i = 0; i < nkeys; i++)
			appendStringInfo(&buf, "%s$%d", i ? ", " : "", first + i);
		return psprintf(adapter->key_in_match, adapter->quote_ident(column), buf.data);
	}
	appendStringInfoChar(&buf, '(');
	for (int i = 0; i < nkeys; i++)
	{
		if (i)
			appendStringInfoString(&buf, " OR ");
		appendStringInfoString(&buf, AdapterKeyMatch(adapter, column, first + i));
	}
	appendStringInfoChar(&buf, ')');
	return buf.data;
}

/*
 * AdapterQualifiedName renders a table name for the adapter's dialect,
 * qualified with 'schema' (may be NULL) where the dialect has schemas.
 */
char *
AdapterQualifiedName(const CdAdapter *adapter, const char *schema, const char *name)
{
	if (schema && adapter->caps.schemas)
		return psprintf("%s.%s", adapter->quote_ident(schema), adapter->quote_ident(name));
	return adapter->quote_ident(name);
}

/*
 * AdapterWordList joins words for a message, the last two with
 * 'conjunction': "a", "a and b", "a, b and c".
 */
char *
AdapterWordList(List *words, const char *conjunction)
{
	StringInfoData buf;
	int			i = 0;
	ListCell   *lc;

	initStringInfo(&buf);
	foreach(lc, words)
	{
		if (i > 0)
			appendStringInfo(&buf, i == list_length(words) - 1 ? " %s " : ", ", conjunction);
		appendStringInfoString(&buf, lfirst(lc));
		i++;
	}
	return buf.data;
}

/*
 * AdapterTooManyParams refuses, before anything is sent, a statement with
 * more parameters than 'dialect' takes ('max'); false when it has not.
 * The remote layer checks first: this keeps each adapter safe on its own.
 */
bool
AdapterTooManyParams(int nparams, int max, const char *dialect, CdRemoteError *err)
{
	if (nparams <= max)
		return false;
	AdapterRefuse(err, "54023",
				  psprintf("cannot send more than %d parameters to %s shard", max, dialect),
				  NULL);
	return true;
}

/*
 * AdapterDeliverRow hands one row to a sink with 'row_context' current,
 * and resets that context after it: whatever the sink allocates there for
 * the row is freed before the next, so memory does not grow with the row
 * count.  Sinks keep what must outlive the row in their own contexts.
 */
void
AdapterDeliverRow(CdRowSink *sink, int ncols, const CdCell *cells,
				  MemoryContext row_context)
{
	MemoryContext old = MemoryContextSwitchTo(row_context);

	sink->row(sink, ncols, cells);
	MemoryContextSwitchTo(old);
	MemoryContextReset(row_context);
}

/*
 * AdapterStopWaiting says whether a wait that cannot service interrupts
 * (cleanup while they are held, a cancel request sent while an error is
 * being handled) should give up now: a cancel or a termination is pending,
 * and the caller drops the connection anyway.  Safe anywhere; never
 * throws.
 */
bool
AdapterStopWaiting(void)
{
	return InterruptPending && (QueryCancelPending || ProcDiePending);
}

/*
 * AdapterCleanupDeadline returns when a cleanup starting now must give up:
 * after collegedb.cleanup_timeout, as postgres_fdw gives up on a shard that
 * does not answer its abort-time ROLLBACK or cancel.
 */
TimestampTz
AdapterCleanupDeadline(void)
{
	return TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
									   Max(CollegeCleanupTimeout, 1));
}

/*
 * AdapterExecDeadline returns the deadline of an exec's waits, 0 for none,
 * and in *interruptible whether they service interrupts.  A cleanup, or
 * any exec while interrupts are held (nothing could end its wait then),
 * waits at most collegedb.cleanup_timeout and does not service interrupts.
 * A remote COMMIT waits at most statement_timeout: PostgreSQL stops the
 * timer before the front's commit runs collegedb's callbacks, so the
 * front's own timeout would never end that wait.
 */
TimestampTz
AdapterExecDeadline(int flags, bool *interruptible)
{
	*interruptible = !(flags & CD_EXEC_CLEANUP) && INTERRUPTS_CAN_BE_PROCESSED();
	if (!*interruptible)
		return AdapterCleanupDeadline();
	if ((flags & CD_EXEC_COMMIT) && StatementTimeout > 0)
		return TimestampTzPlusMilliseconds(GetCurrentTimestamp(), StatementTimeout);
	return 0;
}

/*
 * AdapterSetGaveUp fills *err for an exec whose wait gave up (see
 * AdapterExecDeadline): the protocol is midway, so the connection is
 * lost.
 */
void
AdapterSetGaveUp(CdRemoteError *err, int flags)
{
	if (AdapterStopWaiting())
		AdapterSetError(err, "57014", true,
						"stopped waiting for the shard: a cancel or termination is pending",
						NULL, NULL);
	else if ((flags & CD_EXEC_COMMIT) && !(flags & CD_EXEC_CLEANUP))
		AdapterSetError(err, "57014", true,
						"canceling the commit due to statement timeout",
						"The shard's connection was closed; whether the shard committed is unknown.",
						NULL);
	else
		AdapterSetError(err, "08006", true,
						psprintf("the shard did not answer within collegedb.cleanup_timeout (%d ms)",
								 CollegeCleanupTimeout),
						NULL, NULL);
}

/*
 * AdapterDeadlinePassed says whether 'deadline' (0: none) has passed.
 */
bool
AdapterDeadlinePassed(TimestampTz deadline)
{
	return deadline != 0 && GetCurrentTimestamp() >= deadline;
}

/*
 * AdapterWaitTimeout returns the milliseconds left until 'deadline' for a
 * latch wait: -1 (wait without limit) when there is none, at least 0.
 */
long
AdapterWaitTimeout(TimestampTz deadline)
{
	if (deadline == 0)
		return -1;
	return Max(TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline), 0);
}
