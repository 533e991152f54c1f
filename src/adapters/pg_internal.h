/*-------------------------------------------------------------------------
 *
 * pg_internal.h
 *	  What the PostgreSQL adapter's files share: the connection handle and
 *	  the functions of pg_connect.c and pg_options.c.  libpq-fe.h is
 *	  included here, by the PostgreSQL adapter's files only.
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_PG_INTERNAL_H
#define COLLEGEDB_PG_INTERNAL_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "nodes/pg_list.h"
#include "storage/latch.h"

#include "libpq-fe.h"

#include "adapters/adapter.h"

/* the protocol's limit: the parameter count travels as a 16-bit integer */
#define PG_MAX_PARAMS 65535

/* prepared statements kept per connection (pg_prepared.c) */
#define PG_PREPARED_MAX 128
#define PG_PREPARED_NAME_LEN 32

/*
 * What drops the statements the cache forgot and the shard may still
 * hold: those named collegedb_p<n>, and nothing of the caller's own (a
 * DEALLOCATE ALL would take the statements a caller prepared with them).
 */
#define PG_DEALLOCATE_OWN_SQL \
	"DO $cd$DECLARE n text; BEGIN" \
	" FOR n IN SELECT name FROM pg_catalog.pg_prepared_statements" \
	"  WHERE pg_catalog.starts_with(name, 'collegedb_p') LOOP" \
	"  EXECUTE pg_catalog.format('DEALLOCATE %I', n);" \
	" END LOOP; END$cd$"

/* the guard (see pg.c's shard DDL), with the key as its parameter */
#define PG_GUARD_SQL "SELECT collegedb_guard($1)"

typedef struct PgPrepared
{
	uint32		hash;
	int			number;			/* named collegedb_p<number> on the shard */
	bool		ready;			/* the shard answered its Parse */
	int			nparams;
	Oid		   *types;
	char	   *sql;
} PgPrepared;

typedef struct PgHandle
{
	PGconn	   *conn;
	char		shard[NAMEDATALEN];

	/* the connection's keywords and values, malloc'd, for cancel requests */
	char	  **keywords;
	char	  **values;

	/* the statement in progress (pg_send .. pg_poll) */
	MemoryContext statement_context;	/* reset by each pg_send */
	MemoryContext row_context;	/* reset after each row */
	bool		pipeline;		/* setup commands went first */
	int			queries;		/* setup commands + the statement */
	int			current;		/* whose results come next */
	bool		single_row;		/* single-row mode is on for the statement */
	bool		columns_sent;
	bool		failed;			/* err holds the first failure */
	bool		is_commit;		/* the statement is the remote COMMIT */
	int			ncols;
	CdValueKind *kinds;
	CdCell	   *cells;
	unsigned char **unescaped;	/* PQunescapeBytea buffers of the row */
	int64		rows;

	/*
	 * What pg_send was given, kept for pg_start, which may send it all once
	 * more ('resent') when a query sent by name failed before it ran
	 * ('retry').  Per pipeline place: 'parse_at' the entry a Parse
	 * prepares, 'named_at' whether the query went by name;
	 * 'deallocate_index' is the place of a PG_DEALLOCATE_OWN_SQL (-1:
	 * none).
	 * 'forgets': a DISCARD or DEALLOCATE of the caller's.  'guard_key':
	 * the guard's parameter (CD_EXEC_GUARD).
	 */
	const char *const *setup;
	int			nsetup;
	int			flags;
	const char *guard_key;
	const char *sql;
	int			nparams;
	Oid		   *param_types;
	const char **param_values;
	int		   *param_lengths;
	int		   *param_formats;
	PgPrepared **parse_at;
	bool	   *named_at;
	int			deallocate_index;
	bool		forgets;
	bool		retry;
	bool		resent;

	/* the prepared-statement cache (pg_prepared.c) */
	MemoryContext prepared_context;
	PgPrepared *prepared[PG_PREPARED_MAX];
	int			nprepared;
	int			prepared_number;	/* the last name's number */
	bool		deallocate_pending; /* the shard may hold forgotten ones */

	/* the wait set: latch, postmaster death, the socket (pg_connect.c) */
	WaitEventSet *wait_set;
	int			wait_events;	/* the socket's events in wait_set */
} PgHandle;

/* pg_connect.c */
extern void *PgConnect(const CdConnInfo *info, CdRemoteError *err);
extern void PgClose(void *h);
extern int64 PgSessionId(void *h);
extern void PgCancel(void *h, int timeout_ms);
extern bool PgWait(PGconn *conn, int events, TimestampTz deadline, bool interruptible);
extern void PgFillError(PGconn *conn, const PGresult *res, CdRemoteError *err);
extern bool PgHandleWait(PgHandle *handle, int events, TimestampTz deadline,
						 bool interruptible);

/* pg_copy.c */
extern bool PgCopyRows(PgHandle *handle, int nrows, int ncols, const CdParam *params,
					   int flags, CdRemoteError *err);

/* pg_prepared.c */
extern PgPrepared *PgPreparedLookup(PgHandle *handle, const char *sql, int nparams,
									const Oid *types);
extern bool PgPreparedCheck(const CdAdapter *adapter, const char *sql, bool *forgets,
							CdRemoteError *err);
extern void PgPreparedForget(PgHandle *handle, PgPrepared *entry);
extern void PgPreparedForgetAll(PgHandle *handle, bool deallocate);
extern void PgPreparedMakeRoom(PgHandle *handle, int n);
extern void PgPreparedName(const PgPrepared *entry, char *name);
extern void PgPreparedFree(PgHandle *handle);

/* pg_options.c */
extern bool PgOptionOk(const char *keyword, Oid catalog);
extern void PgCheckOptions(List *options, Oid catalog);
extern char *PgValidOptions(Oid catalog);

#endif							/* COLLEGEDB_PG_INTERNAL_H */
