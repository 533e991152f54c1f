/*-------------------------------------------------------------------------
 *
 * journal_sql.h
 *	  What the two halves of the journal (journal.c: moves; job_journal.c:
 *	  jobs and their keys) share: SQL fragments and argument helpers.
 *	  Included by those two files only.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CD_JOURNAL_SQL_H
#define CD_JOURNAL_SQL_H

#include "utils/builtins.h"
#include "utils/jsonb.h"

/*
 * Whether the holder of move row "m" is alive: its process, started when
 * it took the move, is still there.
 */
#define HOLDER_ALIVE \
	"EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity a WHERE a.pid = m.lease_pid " \
	"AND (m.lease_backend_start IS NULL OR a.backend_start = m.lease_backend_start))"

/*
 * REDACT_KEY is SQL that writes, in an error text bound for a journal
 * table, the quoted key as its stored form (with hash_mappings the key
 * itself is never kept); raw and stored are column expressions.
 */
#define REDACT_KEY(msg, raw, stored) \
	"CASE WHEN " raw " IS NULL OR " raw " = " stored " THEN " msg \
	" ELSE replace(" msg ", '\"' || " raw " || '\"', '\"' || " stored " || '\"') END"

static inline Datum
text_or_null(const char *s, char *null)
{
	*null = s ? ' ' : 'n';
	return s ? CStringGetTextDatum(s) : (Datum) 0;
}

static inline Datum
jsonb_or_null(const char *s, char *null)
{
	*null = s ? ' ' : 'n';
	return s ? DirectFunctionCall1(jsonb_in, CStringGetDatum(s)) : (Datum) 0;
}

#endif							/* CD_JOURNAL_SQL_H */
