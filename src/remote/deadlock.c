/*-------------------------------------------------------------------------
 *
 * deadlock.c
 *	  Detection of deadlocks across shards: two front transactions that
 *	  each wait, on one shard, for a lock the other holds on another (or
 *	  on the front).  No shard sees a cycle, so none ends it.
 *
 * The backends publish their shard sessions and waits (common/waits.c).
 * A pass (DeadlockRun), run by the database's coordinator or, while the
 * coordinator runs moves or jobs, by its resolver, starts when some
 * backend has waited for a shard longer than deadlock_timeout
 * (DeadlockDue).  It asks every shard those backends hold sessions on for
 * its lock waits (CdAdapter.lock_waits_sql: pairs of the shard's session
 * ids, waiter and blocker) and maps each id back to the front backend
 * that published it *for that shard's server*: a PostgreSQL answer is
 * cluster-wide and a MariaDB one server-wide, so the same pid can be a
 * session of another shard of the same cluster (found through that
 * shard's own query) or of another cluster.  The front's own lock waits
 * (pg_blocking_pids) are edges too.  A cycle of the wait-for graph among
 * front backends is acted on only when two consecutive snapshots (the
 * shards' answers are not taken at one instant) show it with the same
 * transactions: the youngest transaction of the cycle that waits for a
 * shard is then chosen (WaitsChooseVictim), and its own wait raises
 * 40P01, whose abort releases its locks on the shards.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "catalog/shards.h"
#include "collegedb.h"
#include "remote/remote.h"

#define FRONT_LOCK_WAITS \
	"SELECT DISTINCT w.pid::bigint, b.pid::bigint FROM pg_catalog.pg_locks w, " \
	"LATERAL unnest(pg_catalog.pg_blocking_pids(w.pid)) AS b(pid) WHERE NOT w.granted"

/* one wait of the graph: backend 'from' waits for backend 'to' */
typedef struct WaitEdge
{
	int			from;			/* indexes into the snapshot's backends */
	int			to;
	const char *where;			/* the shard's name, NULL: the front */
} WaitEdge;

typedef struct WaitGraph
{
	CdWaitsBackend *backends;
	int			nbackends;
	WaitEdge   *edges;
	int			nedges;
	int			maxedges;
} WaitGraph;

/* a cycle found: its members, for the next snapshot's comparison */
typedef struct CycleKey
{
	int			n;
	int			index[CD_WAITS_MAX_SESSIONS];
	uint64		xact[CD_WAITS_MAX_SESSIONS];
} CycleKey;

/* the cycle the last snapshot showed, acted on when the next one does */
static CycleKey seen;

/* a backend's wait counts once it is older than deadlock_timeout */
static bool
waits_long(const CdWaitsBackend *b, TimestampTz now)
{
	return b->wait_start != 0 &&
		TimestampDifferenceExceeds(b->wait_start, now, DeadlockTimeout);
}

/*
 * DeadlockDue says whether a pass is due: detection is on and some
 * backend of this database has waited for a shard longer than
 * deadlock_timeout.  Reads shared memory only.
 */
bool
DeadlockDue(void)
{
	CdWaitsBackend *backends;
	int			n;
	bool		due = false;
	TimestampTz now = GetCurrentTimestamp();

	if (!CollegeDeadlockDetection || DeadlockTimeout <= 0)
		return false;
	backends = WaitsSnapshot(MyDatabaseId, &n);
	for (int i = 0; i < n && !due; i++)
		due = waits_long(&backends[i], now);
	if (backends)
		pfree(backends);
	if (!due)
		seen.n = 0;
	return due;
}

static void
add_edge(WaitGraph *g, int from, int to, const char *where)
{
	if (from < 0 || to < 0 || from == to)
		return;
	for (int i = 0; i < g->nedges; i++)
		if (g->edges[i].from == from && g->edges[i].to == to)
			return;
	if (g->nedges == g->maxedges)
	{
		g->maxedges = Max(16, g->maxedges * 2);
		g->edges = g->edges ? repalloc(g->edges, sizeof(WaitEdge) * g->maxedges)
			: palloc(sizeof(WaitEdge) * g->maxedges);
	}
	g->edges[g->nedges].from = from;
	g->edges[g->nedges].to = to;
	g->edges[g->nedges].where = where;
	g->nedges++;
}

/* the backend that published 'session' for 'serverid', or -1 */
static int
by_session(const WaitGraph *g, Oid serverid, int64 session)
{
	for (int i = 0; i < g->nbackends; i++)
		for (int s = 0; s < g->backends[i].nsessions; s++)
			if (g->backends[i].sessions[s].serverid == serverid &&
				g->backends[i].sessions[s].session == session)
				return i;
	return -1;
}

/* the backend whose pid is 'pid', or -1 */
static int
by_pid(const WaitGraph *g, int64 pid)
{
	for (int i = 0; i < g->nbackends; i++)
		if (g->backends[i].pid == pid)
			return i;
	return -1;
}

/* whether some long-waiting backend holds a session on 'serverid' */
static bool
server_wanted(const WaitGraph *g, Oid serverid, TimestampTz now)
{
	for (int i = 0; i < g->nbackends; i++)
	{
		if (!waits_long(&g->backends[i], now))
			continue;
		for (int s = 0; s < g->backends[i].nsessions; s++)
			if (g->backends[i].sessions[s].serverid == serverid)
				return true;
	}
	return false;
}

/*
 * shard_edges adds the lock waits of one shard's server, mapped through
 * the sessions published for that shard's server.
 */
static void
shard_edges(WaitGraph *g, const CdShard *shard)
{
	const CdAdapter *adapter = AdapterForDialect(shard->dialect);
	CaptureRowSink sink;
	char	   *error;
	ListCell   *lc;

	if (adapter->lock_waits_sql == NULL)
		return;
	CaptureRowSinkInit(&sink);
	error = RemoteRunAlone(shard, adapter->lock_waits_sql, NULL, 0, NULL, &sink, NULL);
	if (error)
	{
		ereport(LOG,
				(errmsg("collegedb: could not read the lock waits of shard \"%s\": %s",
						shard->name, error)));
		return;
	}
	if (sink.ncols < 2)
		return;
	foreach(lc, sink.rows)
	{
		CdParam    *row = lfirst(lc);

		if (row[0].kind == CD_VALUE_NULL || row[1].kind == CD_VALUE_NULL)
			continue;
		add_edge(g, by_session(g, shard->serverid, strtoi64(row[0].str, NULL, 10)),
				 by_session(g, shard->serverid, strtoi64(row[1].str, NULL, 10)),
				 pstrdup(shard->name));
	}
}

/*
 * front_edges adds the waits for the front's own locks among the
 * backends that published sessions.
 */
static void
front_edges(WaitGraph *g)
{
	if (SPI_connect() != SPI_OK_CONNECT)
		return;
	if (SPI_execute(FRONT_LOCK_WAITS, true, 0) == SPI_OK_SELECT)
	{
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			bool		null1,
						null2;
			Datum		w = SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1, &null1);
			Datum		b = SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 2, &null2);

			if (!null1 && !null2)
				add_edge(g, by_pid(g, DatumGetInt64(w)), by_pid(g, DatumGetInt64(b)), NULL);
		}
	}
	SPI_finish();
}

/*
 * snapshot builds the wait-for graph among this database's front
 * backends; false when no backend waits long enough for a shard.
 */
static bool
snapshot(WaitGraph *g)
{
	TimestampTz now = GetCurrentTimestamp();
	bool		any = false;
	ListCell   *lc;

	memset(g, 0, sizeof(*g));
	g->backends = WaitsSnapshot(MyDatabaseId, &g->nbackends);
	for (int i = 0; i < g->nbackends; i++)
		any |= waits_long(&g->backends[i], now);
	if (!any)
		return false;
	foreach(lc, ShardList())
	{
		const CdShard *shard = lfirst(lc);

		if (OidIsValid(shard->serverid) && server_wanted(g, shard->serverid, now))
			shard_edges(g, shard);
	}
	front_edges(g);
	return true;
}

/*
 * find_cycle looks for a cycle through a backend that waits for a shard
 * (a breadth-first search back to it); fills 'path' with the edges of the
 * first one found, in order, and returns their number (0: none).
 */
static int
find_cycle(const WaitGraph *g, int *path)
{
	int		   *via = palloc(sizeof(int) * Max(g->nbackends, 1));
	int		   *queue = palloc(sizeof(int) * Max(g->nbackends, 1));

	for (int start = 0; start < g->nbackends; start++)
	{
		int			head = 0,
					tail = 0;
		int			closing = -1;

		if (g->backends[start].wait_start == 0)
			continue;
		for (int i = 0; i < g->nbackends; i++)
			via[i] = -1;
		queue[tail++] = start;
		while (head < tail && closing < 0)
		{
			int			node = queue[head++];

			for (int e = 0; e < g->nedges && closing < 0; e++)
			{
				if (g->edges[e].from != node)
					continue;
				if (g->edges[e].to == start)
					closing = e;
				else if (via[g->edges[e].to] < 0 && g->edges[e].to != start)
				{
					via[g->edges[e].to] = e;
					queue[tail++] = g->edges[e].to;
				}
			}
		}
		if (closing >= 0)
		{
			int			n = 0;
			int			e = closing;

			/* walk back from the closing edge to the start */
			for (;;)
			{
				path[n++] = e;
				if (g->edges[e].from == start || n >= CD_WAITS_MAX_SESSIONS)
					break;
				e = via[g->edges[e].from];
			}
			/* in the order of the waits */
			for (int i = 0; i < n / 2; i++)
			{
				int			t = path[i];

				path[i] = path[n - 1 - i];
				path[n - 1 - i] = t;
			}
			return n;
		}
	}
	return 0;
}

/* the cycle's members, sorted by slot, with their transactions */
static void
cycle_key(const WaitGraph *g, const int *path, int n, CycleKey *key)
{
	key->n = n;
	for (int i = 0; i < n; i++)
	{
		const CdWaitsBackend *b = &g->backends[g->edges[path[i]].from];
		int			j = i;

		while (j > 0 && key->index[j - 1] > b->index)
		{
			key->index[j] = key->index[j - 1];
			key->xact[j] = key->xact[j - 1];
			j--;
		}
		key->index[j] = b->index;
		key->xact[j] = b->xact;
	}
}

static bool
same_cycle(const CycleKey *a, const CycleKey *b)
{
	if (a->n == 0 || a->n != b->n)
		return false;
	for (int i = 0; i < a->n; i++)
		if (a->index[i] != b->index[i] || a->xact[i] != b->xact[i])
			return false;
	return true;
}

/*
 * cancel_victim chooses the youngest transaction of the cycle that waits
 * for a shard and names the cycle's waits in its error.
 */
static void
cancel_victim(const WaitGraph *g, const int *path, int n)
{
	StringInfoData detail;
	const CdWaitsBackend *victim = NULL;

	initStringInfo(&detail);
	for (int i = 0; i < n; i++)
	{
		const WaitEdge *e = &g->edges[path[i]];
		const CdWaitsBackend *from = &g->backends[e->from];

		if (i > 0)
			appendStringInfoString(&detail, "; ");
		if (e->where)
			appendStringInfo(&detail, "process %d waits on shard \"%s\" for process %d",
							 from->pid, e->where, g->backends[e->to].pid);
		else
			appendStringInfo(&detail, "process %d waits on the front for process %d",
							 from->pid, g->backends[e->to].pid);
		if (from->wait_start != 0 &&
			(victim == NULL || from->xact_start > victim->xact_start ||
			 (from->xact_start == victim->xact_start && from->pid > victim->pid)))
			victim = from;
	}
	appendStringInfoChar(&detail, '.');
	if (victim == NULL)
		return;
	if (detail.len > 0)
		detail.data[0] = pg_toupper((unsigned char) detail.data[0]);
	if (WaitsChooseVictim(victim->index, victim->pid, victim->xact, detail.data))
		ereport(LOG,
				(errmsg("collegedb: deadlock across shards: canceling the transaction of process %d",
						victim->pid),
				 errdetail_internal("%s", detail.data)));
}

/*
 * DeadlockRun is one pass, in a transaction of a worker: up to two
 * snapshots, until one confirms the cycle the previous one (of this pass
 * or of the last) showed.
 */
void
DeadlockRun(void)
{
	for (int attempt = 0; attempt < 2; attempt++)
	{
		WaitGraph	g;
		int			path[CD_WAITS_MAX_SESSIONS];
		int			n;
		CycleKey	key;

		if (!snapshot(&g))
		{
			seen.n = 0;
			return;
		}
		n = find_cycle(&g, path);
		if (n == 0)
		{
			seen.n = 0;
			return;
		}
		cycle_key(&g, path, n, &key);
		if (same_cycle(&seen, &key))
		{
			cancel_victim(&g, path, n);
			seen.n = 0;
			return;
		}
		seen = key;
	}
}
