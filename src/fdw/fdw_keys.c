/*-------------------------------------------------------------------------
 *
 * fdw_keys.c
 *	  Reads of a sharded foreign table by a list of keys ("key IN (...)",
 *	  "key = ANY(...)"), grouped per shard.
 *
 * Each key is routed as a point read routes it (RouterResolve: its
 * mapping, computed placement, the slot map; an unmapped key is saved only
 * with allocate_on_read), the keys are grouped by the first shard of their
 * route, and each shard gets one statement with its keys as " IN ($k,
 * ...)", where the planned text has " = $k" (deparse.c records where), in
 * as many statements as the adapter's parameter limit needs.  A row tells
 * which key it answers by its key column, which the scan always selects.
 * A key that got no row there goes on as a point read would after that
 * first read (RouterReadMissed: its tombstone, the other candidates), with
 * the planned one-key text.  The caller has already dropped NULL keys and
 * repeats, as IN does.  Writes by a list of keys stay per key: each is
 * guarded on its own.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "utils/lsyscache.h"
#include "fmgr.h"
#include "nodes/pg_list.h"
#include "nodes/value.h"

#include "catalog/shards.h"
#include "fdw/fdw.h"
#include "remote/remote.h"
#include "router/router.h"

/* the most parameters one grouped statement takes, where the adapter allows more */
#define FDW_KEYS_MAX_PARAMS 999

/*
 * FdwKeyText renders a key value as the text the router hashes and maps.
 */
char *
FdwKeyText(Datum value, Oid type)
{
	Oid			output;
	bool		varlena;

	getTypeOutputInfo(type, &output, &varlena);
	return OidOutputFunctionCall(output, value);
}

typedef struct KeyText
{
	char	   *text;
	int			index;
} KeyText;

static int
key_text_cmp(const void *a, const void *b)
{
	const KeyText *x = a;
	const KeyText *y = b;
	int			c = strcmp(x->text, y->text);

	return c != 0 ? c : (x->index > y->index) - (x->index < y->index);
}

/*
 * FdwDistinctKeys renders each key as FdwKeyText does, in the order given,
 * with NULL for a null key and for a repeat of an earlier one: the
 * statement runs once per key, and a key listed twice (IN ('a', 'a'))
 * must not read its rows twice, or update them twice.
 */
char **
FdwDistinctKeys(Datum *keys, bool *keynulls, int nkeys, Oid type)
{
	char	  **texts = palloc0(sizeof(char *) * Max(nkeys, 1));
	KeyText    *sorted = palloc(sizeof(KeyText) * Max(nkeys, 1));
	int			n = 0;

	for (int i = 0; i < nkeys; i++)
	{
		if (keynulls[i])
			continue;
		texts[i] = FdwKeyText(keys[i], type);
		sorted[n].text = texts[i];
		sorted[n++].index = i;
	}
	qsort(sorted, n, sizeof(KeyText), key_text_cmp);
	for (int i = 1; i < n; i++)
		if (strcmp(sorted[i].text, sorted[i - 1].text) == 0)
			texts[sorted[i].index] = NULL;
	pfree(sorted);
	return texts;
}

/* a key of the list and where it routes */
typedef struct FdwKey
{
	char	   *text;
	Datum		value;
	CdRoute		route;
	bool		found;			/* a row of it came back from route.shard */
} FdwKey;

/*
 * The sink a grouped statement's rows go through: each row goes on to the
 * scan's RecordRowSink, and the key it answers is marked found.
 */
typedef struct KeyRowSink
{
	CdRowSink	base;
	RecordRowSink *inner;
	int			key_col;		/* 0-based */
	FdwKey	  **keys;			/* the statement's keys, sorted by text */
	int			nkeys;
} KeyRowSink;

static int
key_ptr_cmp(const void *a, const void *b)
{
	return strcmp((*(FdwKey *const *) a)->text, (*(FdwKey *const *) b)->text);
}

static void
key_sink_columns(CdRowSink *self, int ncols, const char *const *names)
{
	KeyRowSink *sink = (KeyRowSink *) self;

	sink->inner->base.columns(&sink->inner->base, ncols, names);
}

/*
 * key_sink_row stores the row, then renders its key column as the key's
 * text is rendered (the column's type, its output function) to find the
 * key it answers.  It runs in the adapter's per-row context.
 */
static void
key_sink_row(CdRowSink *self, int ncols, const CdCell *cells)
{
	KeyRowSink *sink = (KeyRowSink *) self;
	Form_pg_attribute att = TupleDescAttr(sink->inner->desc, sink->key_col);
	FdwKey		probe;
	FdwKey	   *probe_ptr = &probe;
	FdwKey	  **hit;
	Datum		value;
	bool		isnull;

	sink->inner->base.row(&sink->inner->base, ncols, cells);
	if (sink->key_col >= ncols)
		return;
	value = ValuesCellToDatum(&cells[sink->key_col], att->atttypid, att->atttypmod,
							  &sink->inner->inputs[sink->key_col],
							  sink->inner->ioparams[sink->key_col], &isnull);
	if (isnull)
		return;
	probe.text = FdwKeyText(value, att->atttypid);
	hit = bsearch(&probe_ptr, sink->keys, sink->nkeys, sizeof(FdwKey *), key_ptr_cmp);
	if (hit)
		(*hit)->found = true;
}

/*
 * FdwKeysGroupable says whether a scan's keys can be read grouped per
 * shard: a read whose key is a list, planned with its key's place in the
 * text, the key its last parameter.
 */
bool
FdwKeysGroupable(int nparams, int key_param, List *split, bool is_write)
{
	return !is_write && split != NIL && key_param == nparams &&
		list_length(split) == 2 * AdapterCount();
}

/*
 * grouped_text puts " IN ($first, ..., $first + n - 1)" where the key's
 * " = $k" stands in 'sql' (the dialect's text).
 */
static char *
grouped_text(const char *sql, List *split, int dialect, int first, int n)
{
	int			start = intVal(list_nth(split, 2 * dialect));
	int			end = intVal(list_nth(split, 2 * dialect + 1));
	StringInfoData buf;

	initStringInfo(&buf);
	appendBinaryStringInfo(&buf, sql, start);
	appendStringInfoString(&buf, " IN (");
	for (int i = 0; i < n; i++)
		appendStringInfo(&buf, "%s$%d", i ? ", " : "", first + i);
	appendStringInfoChar(&buf, ')');
	appendStringInfoString(&buf, sql + end);
	return buf.data;
}

/*
 * read_group sends one shard's keys, 'n' of them, in statements of at
 * most the adapter's parameter limit; returns the rows.
 */
static int64
read_group(const CdShard *shard, FdwKey **keys, int n, const char *const *sql, List *split,
		   int nparams, const CdParam *params, Oid type, KeyRowSink *sink)
{
	const CdAdapter *adapter = AdapterForDialect(shard->dialect);
	int			fixed = nparams - 1;	/* the parameters other than the key */
	int			per = Min(adapter->max_params, FDW_KEYS_MAX_PARAMS) - fixed;
	CdParam    *chunk = palloc(sizeof(CdParam) * (fixed + Max(Min(per, n), 1)));
	int64		rows = 0;

	per = Max(per, 1);
	memcpy(chunk, params, sizeof(CdParam) * fixed);
	for (int from = 0; from < n; from += per)
	{
		int			m = Min(per, n - from);

		for (int i = 0; i < m; i++)
			ValuesToParam(keys[from + i]->value, false, type, &chunk[fixed + i]);
		sink->keys = keys + from;
		sink->nkeys = m;
		qsort(sink->keys, m, sizeof(FdwKey *), key_ptr_cmp);
		rows += RemoteExecute(shard, grouped_text(sql[shard->dialect], split, shard->dialect,
												  nparams, m),
							  fixed + m, chunk, &sink->base, false);
	}
	pfree(chunk);
	return rows;
}

/*
 * FdwReadKeys reads the rows of 'nkeys' keys ('keys' their texts, NULL
 * for one to leave out, 'values' their datums of type 'type') into 'sink',
 * one statement per shard (see the top of the file); 'params' are the
 * scan's, the key last.  Returns the rows.
 */
int64
FdwReadKeys(const char *const *sql, List *split, int nparams, CdParam *params,
			char **keys, Datum *values, int nkeys, Oid type,
			CdForeignTable *table, RecordRowSink *sink)
{
	FdwKey	   *all = palloc0(sizeof(FdwKey) * Max(nkeys, 1));
	FdwKey	  **group = palloc(sizeof(FdwKey *) * Max(nkeys, 1));
	bool	   *sent = palloc0(sizeof(bool) * Max(nkeys, 1));
	KeyRowSink key_sink;
	int			n = 0;
	int64		rows = 0;

	for (int i = 0; i < nkeys; i++)
	{
		if (keys[i] == NULL)
			continue;
		all[n].text = keys[i];
		all[n].value = values[i];
		all[n].route = RouterResolve(keys[i], strlen(keys[i]), false, true);
		n++;
	}

	key_sink.base.columns = key_sink_columns;
	key_sink.base.row = key_sink_row;
	key_sink.inner = sink;
	key_sink.key_col = table->key_attno - 1;

	/* one shard at a time, in the order its first key came */
	for (int i = 0; i < n; i++)
	{
		const CdShard *shard = all[i].route.shard;
		int			m = 0;

		if (sent[i])
			continue;
		for (int j = i; j < n; j++)
		{
			if (sent[j] || !ShardIs(all[j].route.shard, shard))
				continue;
			sent[j] = true;
			group[m++] = &all[j];
		}
		rows += read_group(shard, group, m, sql, split, nparams, params, type, &key_sink);
	}

	/* the keys that got nothing where they route go on as point reads */
	for (int i = 0; i < n; i++)
	{
		if (all[i].found)
			continue;
		ValuesToParam(all[i].value, false, type, &params[nparams - 1]);
		rows += RouterReadMissed(&all[i].route, all[i].text, strlen(all[i].text), sql,
								 nparams, params, &sink->base);
	}
	pfree(sent);
	pfree(group);
	pfree(all);
	return rows;
}
