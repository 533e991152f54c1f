/*-------------------------------------------------------------------------
 *
 * fdw_keys.c
 *	  Reads of a sharded foreign table by a list of keys ("key IN (...)",
 *	  "key = ANY(...)"), grouped per shard, the shards read at once.
 *
 * Each key is routed as a point read routes it (RouterResolve: its
 * mapping, computed placement, the slot map; an unmapped key is saved only
 * with allocate_on_read), the keys are grouped by the first shard of their
 * route, and each shard gets its keys where the planned text has the key's
 * " = $k" (deparse.c records where): as one array parameter where the
 * dialect takes one (CdAdapter.key_list_sql: PostgreSQL's " = ANY($k)",
 * one prepared statement for every list length), else as " IN ($k, ...)"
 * in as many statements as the adapter's parameter limit needs, each list
 * padded to a power of two by repeating its last key (a repeat changes
 * nothing in IN), so that the lengths, and the statements a shard
 * prepares for them, stay few.  The shards' statements run at once
 * through the fan-out (remote/fanout.h), a shard's further statements
 * right after its previous one; the first shard that fails fails the
 * read.  A row tells which key it answers by its key column, which the
 * scan always selects; one that answers none of the statement's keys
 * byte for byte (a shard's collation matched it: MySQL's ignore case) is
 * left out, as a read of one text key compares byte for byte.  A key that got no row there goes on as a point
 * read would after that first read (RouterReadMissed: its tombstone, the
 * other candidates), with the planned one-key text, after the fan-out.
 * The caller has already dropped NULL keys and repeats, as IN does.
 * Writes by a list of keys are grouped per shard too, with their guards
 * (modify_keys.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "fmgr.h"
#include "nodes/pg_list.h"
#include "nodes/value.h"

#include "catalog/shards.h"
#include "fdw/fdw.h"
#include "remote/fanout.h"
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
	int64		left_out;		/* rows that answered none of them */
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
 * key_sink_row renders the row's key column as the key's text is rendered
 * (the column's type, its output function) to find the key it answers,
 * and stores the row only when it answers one.  A shard compares a list's
 * keys under its column's collation (MySQL's ignore case and trailing
 * spaces: 'kb' for 'kB'), where a read of one text key compares byte for
 * byte (deparse.c): a row whose key is none of the list's, byte for byte,
 * is not the key's and is left out.  It runs in the adapter's per-row
 * context.
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

	if (sink->key_col >= ncols)
	{
		sink->inner->base.row(&sink->inner->base, ncols, cells);
		return;
	}
	value = ValuesCellToDatum(&cells[sink->key_col], att->atttypid, att->atttypmod,
							  &sink->inner->inputs[sink->key_col],
							  sink->inner->ioparams[sink->key_col], &isnull);
	probe.text = isnull ? NULL : FdwKeyText(value, att->atttypid);
	hit = isnull ? NULL :
		bsearch(&probe_ptr, sink->keys, sink->nkeys, sizeof(FdwKey *), key_ptr_cmp);
	if (hit == NULL)
	{
		sink->left_out++;
		return;
	}
	(*hit)->found = true;
	sink->inner->base.row(&sink->inner->base, ncols, cells);
}

/*
 * FdwKeysGroupable says whether a scan's (or a direct modification's) keys
 * can be sent grouped per shard: a key that is a list, planned with its
 * key's place in the text, the key its last parameter.
 */
bool
FdwKeysGroupable(int nparams, int key_param, List *split)
{
	return split != NIL && key_param == nparams &&
		list_length(split) == 2 * AdapterCount() + 2;
}

/*
 * FdwGroupedKeyText puts the dialect's condition on a list of keys where
 * the key's "col" = $k stands in 'sql' (the dialect's text, 'split' from
 * DeparseKeySplit): the keys are $first to $first + n - 1, or the one
 * array parameter $first with the adapter's key_list_sql.  Text keys
 * compare byte for byte, as one key does (AdapterKeysMatch: a shard's
 * collation would otherwise take 'kb' for 'kB' on MySQL); other keys by
 * the column's own equality.  Reads here, writes in modify_keys.c.
 */
char *
FdwGroupedKeyText(const char *sql, List *split, int dialect, int first, int n)
{
	const CdAdapter *adapter = AdapterForDialect(dialect);
	int			start = intVal(list_nth(split, 2 * dialect));
	int			end = intVal(list_nth(split, 2 * dialect + 1));
	const char *column = strVal(list_nth(split, 2 * AdapterCount()));
	bool		text = intVal(list_nth(split, 2 * AdapterCount() + 1)) != 0;
	StringInfoData buf;

	initStringInfo(&buf);
	appendBinaryStringInfo(&buf, sql, start);
	if (text)
	{
		bool		as_array;

		appendStringInfoString(&buf, AdapterKeysMatch(adapter, column, first, n, &as_array));
		Assert(as_array == (adapter->key_list_sql != NULL));
	}
	else
	{
		appendStringInfoString(&buf, adapter->quote_ident(column));
		if (adapter->key_list_sql)
			appendStringInfo(&buf, adapter->key_list_sql, first);
		else
		{
			appendStringInfoString(&buf, " IN (");
			for (int i = 0; i < n; i++)
				appendStringInfo(&buf, "%s$%d", i ? ", " : "", first + i);
			appendStringInfoChar(&buf, ')');
		}
	}
	appendStringInfoString(&buf, sql + end);
	return buf.data;
}

/*
 * array_param renders keys as one parameter in PostgreSQL's array text
 * form, each element quoted, untyped: the shard takes it as an array of
 * its key column's type.
 */
static void
array_param(FdwKey **keys, int n, CdParam *param)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	for (int i = 0; i < n; i++)
	{
		if (i > 0)
			appendStringInfoChar(&buf, ',');
		appendStringInfoChar(&buf, '"');
		for (const char *c = keys[i]->text; *c; c++)
		{
			if (*c == '"' || *c == '\\')
				appendStringInfoChar(&buf, '\\');
			appendStringInfoChar(&buf, *c);
		}
		appendStringInfoChar(&buf, '"');
	}
	appendStringInfoChar(&buf, '}');
	ValuesToParam(CStringGetTextDatum(buf.data), false, TEXTOID, param);
}

/*
 * One shard's keys and the statements that read them: 'per' keys a
 * statement (all of them with an array parameter), the next statement
 * starting at 'from'.
 */
typedef struct KeyGroup
{
	const CdShard *shard;
	FdwKey	  **keys;			/* sorted by text within each statement */
	int			nkeys;
	int			from;
	int			per;
	const char *const *sql;
	List	   *split;
	int			nparams;		/* the scan's, the key last */
	const CdParam *params;
	Oid			type;
	CdParam    *chunk;			/* the statement's parameters */
	KeyRowSink	sink;
	int64		rows;			/* of the statements that ended */
} KeyGroup;

/*
 * padded_length returns how many keys a statement of 'm' keys sends: the
 * next power of two, at most 'per'.
 */
static int
padded_length(int m, int per)
{
	int			n = 1;

	while (n < m)
		n *= 2;
	return Min(n, per);
}

/*
 * group_next sets up a group's next statement in its fan-out entry, or
 * returns false when the group's keys are all sent or its last statement
 * failed (a CdFanoutShard.next callback, called after each statement
 * ended, and by group_init for the first).
 */
static bool
group_next(CdFanoutShard *out)
{
	KeyGroup   *g = out->arg;
	const CdAdapter *adapter = AdapterForDialect(g->shard->dialect);
	int			fixed = g->nparams - 1; /* the parameters other than the key */
	int			m = Min(g->per, g->nkeys - g->from);
	int			sent;

	if (g->from > 0)
	{
		if (!out->ok)
			return false;
		g->rows += out->rows;
	}
	if (m <= 0)
		return false;
	g->sink.keys = g->keys + g->from;
	g->sink.nkeys = m;
	qsort(g->sink.keys, m, sizeof(FdwKey *), key_ptr_cmp);
	memcpy(g->chunk, g->params, sizeof(CdParam) * fixed);
	if (adapter->key_list_sql)
	{
		array_param(g->sink.keys, m, &g->chunk[fixed]);
		sent = 1;
	}
	else
	{
		sent = padded_length(m, g->per);
		for (int i = 0; i < sent; i++)
			ValuesToParam(g->sink.keys[Min(i, m - 1)]->value, false, g->type,
						  &g->chunk[fixed + i]);
	}
	out->sql = FdwGroupedKeyText(g->sql[g->shard->dialect], g->split, g->shard->dialect,
							g->nparams, sent);
	out->nparams = fixed + sent;
	out->params = g->chunk;
	g->from += m;
	return true;
}

/*
 * group_init sets up a shard's group of 'n' keys and its first statement
 * in 'out'.
 */
static void
group_init(KeyGroup *g, CdFanoutShard *out, const CdShard *shard, FdwKey **keys, int n,
		   const char *const *sql, List *split, int nparams, const CdParam *params,
		   Oid type, CdForeignTable *table, RecordRowSink *inner)
{
	const CdAdapter *adapter = AdapterForDialect(shard->dialect);
	int			fixed = nparams - 1;

	g->shard = shard;
	g->keys = keys;
	g->nkeys = n;
	g->from = 0;
	g->per = adapter->key_list_sql ? n :
		Max(Min(adapter->max_params, FDW_KEYS_MAX_PARAMS) - fixed, 1);
	g->sql = sql;
	g->split = split;
	g->nparams = nparams;
	g->params = params;
	g->type = type;
	g->chunk = palloc(sizeof(CdParam) *
					  (fixed + (adapter->key_list_sql ? 1 : padded_length(Min(g->per, n), g->per))));
	g->sink.base.columns = key_sink_columns;
	g->sink.base.row = key_sink_row;
	g->sink.inner = inner;
	g->sink.key_col = table->key_attno - 1;

	memset(out, 0, sizeof(*out));
	out->shard = shard;
	out->sink = &g->sink.base;
	out->arg = g;
	(void) group_next(out);
	out->next = group_next;
}

/*
 * FdwReadKeys reads the rows of 'nkeys' keys ('keys' their texts, NULL
 * for one to leave out, 'values' their datums of type 'type') into 'sink',
 * the shards at once (see the top of the file); 'params' are the scan's,
 * the key last.  Returns the rows.
 */
int64
FdwReadKeys(const char *const *sql, List *split, int nparams, CdParam *params,
			char **keys, Datum *values, int nkeys, Oid type,
			CdForeignTable *table, RecordRowSink *sink)
{
	FdwKey	   *all = palloc0(sizeof(FdwKey) * Max(nkeys, 1));
	FdwKey	  **grouped = palloc(sizeof(FdwKey *) * Max(nkeys, 1));
	bool	   *placed = palloc0(sizeof(bool) * Max(nkeys, 1));
	KeyGroup   *groups = palloc0(sizeof(KeyGroup) * Max(nkeys, 1));
	CdFanoutShard *shards = palloc0(sizeof(CdFanoutShard) * Max(nkeys, 1));
	int			n = 0;
	int			ngroups = 0;
	int			m = 0;
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

	/* one group per shard, in the order its first key came */
	for (int i = 0; i < n; i++)
	{
		const CdShard *shard = all[i].route.shard;
		int			first = m;

		if (placed[i])
			continue;
		for (int j = i; j < n; j++)
		{
			if (placed[j] || !ShardIs(all[j].route.shard, shard))
				continue;
			placed[j] = true;
			grouped[m++] = &all[j];
		}
		group_init(&groups[ngroups], &shards[ngroups], shard, grouped + first, m - first,
				   sql, split, nparams, params, type, table, sink);
		ngroups++;
	}

	if (ngroups > 0)
		FanoutRun(shards, ngroups, NULL, 0, NULL, CD_FANOUT_READ);
	for (int i = 0; i < ngroups; i++)
	{
		if (!shards[i].ok)
			FanoutRaise(&shards[i], NULL, NULL);
		rows += groups[i].rows - groups[i].sink.left_out;
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
	pfree(shards);
	pfree(groups);
	pfree(placed);
	pfree(grouped);
	pfree(all);
	return rows;
}
