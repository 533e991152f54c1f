/*-------------------------------------------------------------------------
 *
 * estimate.c
 *	  Row estimates of a sharded foreign table that was never ANALYZEd:
 *	  each shard's own statistics of its part, summed.
 *
 * Without ANALYZE (analyze.c) the front knows nothing of a table's size.
 * The planner then asks each shard of the table what its own statistics
 * say (CdAdapter.row_estimate_sql: pg_class.reltuples scaled to the
 * table's current pages, information_schema.tables.table_rows,
 * sqlite_stat1), one cheap catalog query per shard, and sums the answers.
 * A shard that cannot tell (never analyzed, down, unreachable within its
 * connect_timeout) counts as the average of those that could; when none
 * could, the estimate is the old default.  Planning never fails for it:
 * each shard is asked in a subtransaction (RemoteTry), and a failure is
 * remembered as "unknown" as long as an answer is.  The questions run in
 * the shard's autocommit (RemoteExecuteAside), never in a remote
 * transaction: a shard whose connection has one open already is not asked
 * (its last answer, if any, holds) until the transaction ends.
 *
 * Answers are kept per backend, table and shard for
 * collegedb.remote_estimate_cache (0: asked at every planning); ANALYZE of
 * the table forgets them.  The table option use_remote_estimate 'false'
 * turns the questions off (as postgres_fdw's option of that name does
 * for its remote EXPLAIN).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "optimizer/optimizer.h"
#include "optimizer/plancat.h"
#include "storage/bufpage.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "catalog/shards.h"
#include "collegedb.h"
#include "fdw/fdw.h"

typedef struct EstimateKey
{
	Oid			relid;
	char		shard[NAMEDATALEN];
} EstimateKey;

typedef struct EstimateEntry
{
	EstimateKey key;			/* first */
	bool		known;
	double		rows;
	TimestampTz asked_at;
} EstimateEntry;

static HTAB *estimates = NULL;

/* what ask_one gets and gives */
typedef struct EstimateProbe
{
	const CdShard *shard;
	const CdForeignTable *table;
	bool		known;
	double		rows;
	double		pages;			/* < 0: not told */
	bool		busy;			/* not asked: a remote transaction is open */
} EstimateProbe;

/*
 * cell_number reads a numeric answer; false for NULL or no number.
 */
static bool
cell_number(const CdParam *cell, double *out)
{
	char	   *end;

	if (cell->kind == CD_VALUE_NULL || cell->str == NULL)
		return false;
	*out = strtod(cell->str, &end);
	return end != cell->str && *out >= 0;
}

/*
 * ask_one runs the dialect's probe (when it has one) and its estimate query
 * on one shard.
 */
static void
ask_one(void *arg)
{
	EstimateProbe *p = arg;
	const CdAdapter *adapter = AdapterForDialect(p->shard->dialect);
	CaptureRowSink answer;
	CdParam		args[2];
	const CdParam *row;

	if (adapter->row_estimate_probe)
	{
		CaptureRowSinkInit(&answer);
		if (RemoteExecuteAside(p->shard, adapter->row_estimate_probe, 0, NULL,
							   &answer.base) < 0)
		{
			p->busy = true;
			return;
		}
		if (answer.rows == NIL || ((CdParam *) linitial(answer.rows))[0].str == NULL ||
			((CdParam *) linitial(answer.rows))[0].str[0] == '0' ||
			((CdParam *) linitial(answer.rows))[0].str[0] == 'f')
			return;
	}
	CaptureRowSinkInit(&answer);
	ValuesToParam(CStringGetTextDatum(p->table->name), false, TEXTOID, &args[0]);
	ValuesToParam(p->table->schema ? CStringGetTextDatum(p->table->schema) : (Datum) 0,
				  p->table->schema == NULL, TEXTOID, &args[1]);
	if (RemoteExecuteAside(p->shard, adapter->row_estimate_sql, 2, args, &answer.base) < 0)
	{
		p->busy = true;
		return;
	}
	if (answer.rows == NIL || answer.ncols < 2)
		return;
	row = linitial(answer.rows);
	if (cell_number(&row[0], &p->rows))
		p->known = true;
	else if (!cell_number(&row[1], &p->pages))
		p->pages = -1;
}

/*
 * tuples_per_page is PostgreSQL's guess of a heap page's rows for the
 * table's columns (as estimate_rel_size makes for a table never vacuumed).
 */
static double
tuples_per_page(const CdForeignTable *table)
{
	int32		width = get_relation_data_width(table->relid, NULL);
	int32		tuple_width = width + MAXALIGN(SizeofHeapTupleHeader) + sizeof(ItemIdData);

	return clamp_row_est((BLCKSZ - SizeOfPageHeaderData) / (double) Max(tuple_width, 1));
}

/*
 * ask_shard returns what one shard says of its part of the table, asked
 * at most remote_estimate_cache ago; false when it could not tell.
 */
static bool
ask_shard(const CdShard *shard, const CdForeignTable *table, double *rows)
{
	EstimateKey key;
	EstimateEntry *entry;
	TimestampTz now = GetCurrentTimestamp();
	bool		found;

	if (estimates == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(EstimateKey);
		ctl.entrysize = sizeof(EstimateEntry);
		ctl.hcxt = TopMemoryContext;
		estimates = hash_create("collegedb row estimates", 64, &ctl,
								HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	memset(&key, 0, sizeof(key));
	key.relid = table->relid;
	strlcpy(key.shard, shard->name, NAMEDATALEN);
	entry = hash_search(estimates, &key, HASH_ENTER, &found);
	if (!found)
		entry->known = false;
	if (!found || now - entry->asked_at >= (int64) CollegeRemoteEstimateCache * 1000)
	{
		EstimateProbe probe = {shard, table, false, 0, -1, false};
		const CdAdapter *adapter = AdapterForDialect(shard->dialect);
		bool		answered = OidIsValid(shard->serverid) && adapter->row_estimate_sql &&
			RemoteTry(ask_one, &probe, NULL);

		/* a shard in a remote transaction is asked next time: the last answer holds */
		if (!answered || !probe.busy)
		{
			entry->known = answered && (probe.known || probe.pages > 0);
			if (probe.known)
				entry->rows = probe.rows;
			else if (answered && probe.pages > 0)
				entry->rows = probe.pages * tuples_per_page(table);
			entry->asked_at = now;
		}
	}
	*rows = entry->rows;
	return entry->known;
}

/*
 * FdwRemoteRows estimates the rows of a table from its shards' own
 * statistics; false when no shard could tell, or the table's option
 * use_remote_estimate is off.
 */
bool
FdwRemoteRows(const CdForeignTable *table, double *rows)
{
	double		sum = 0;
	int			known = 0,
				unknown = 0;
	List	   *shards;
	ListCell   *lc;

	if (!table->remote_estimate)
		return false;
	/* the scan's own shards, without its error when there is none */
	shards = table->shard ? list_make1((void *) ShardLookupOptional(table->shard)) : ShardList();
	foreach(lc, shards)
	{
		const CdShard *shard = lfirst(lc);
		double		part;

		if (shard != NULL && ask_shard(shard, table, &part))
		{
			sum += part;
			known++;
		}
		else
			unknown++;
	}
	if (known == 0)
		return false;
	*rows = sum + unknown * (sum / known);
	return true;
}

/*
 * FdwForgetRemoteRows drops what the shards said of a table (its ANALYZE
 * knows better, and a later planning asks again).
 */
void
FdwForgetRemoteRows(Oid relid)
{
	HASH_SEQ_STATUS scan;
	EstimateEntry *entry;

	if (estimates == NULL)
		return;
	hash_seq_init(&scan, estimates);
	while ((entry = hash_seq_search(&scan)) != NULL)
		if (entry->key.relid == relid)
			(void) hash_search(estimates, &entry->key, HASH_REMOVE, NULL);
}
