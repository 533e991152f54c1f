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
	 * The statement's prepared form: 'parse_index' is the pipeline position
	 * of its Parse (-1: none sent), 'deallocate_index' that of a DEALLOCATE
	 * ALL (-1: none); 'executed' is the entry executed by name (NULL: sent
	 * unnamed); 'forgets': a DISCARD or DEALLOCATE of the caller's.  The
	 * parameters stay in statement_context for a resend without a name.
	 */
	PgPrepared *executed;
	int			parse_index;
	int			deallocate_index;
	bool		forgets;
	bool		retry_unnamed;	/* resend unnamed once the results are in */
	const char *sql;
	int			nparams;
	Oid		   *param_types;
	const char **param_values;
	int		   *param_lengths;
	int		   *param_formats;

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
extern void PgCancel(void *h, int timeout_ms);
extern bool PgWait(PGconn *conn, int events, TimestampTz deadline, bool interruptible);
extern void PgFillError(PGconn *conn, const PGresult *res, CdRemoteError *err);
extern bool PgHandleWait(PgHandle *handle, int events, TimestampTz deadline,
						 bool interruptible);

/* pg_prepared.c */
extern PgPrepared *PgPreparedLookup(PgHandle *handle, const char *sql, int nparams,
									const Oid *types);
extern bool PgPreparedForgets(const char *sql, const CdLexerRules *rules);
extern void PgPreparedForget(PgHandle *handle, PgPrepared *entry);
extern void PgPreparedForgetAll(PgHandle *handle, bool deallocate);
extern void PgPreparedName(const PgPrepared *entry, char *name);
extern void PgPreparedFree(PgHandle *handle);

/* pg_options.c */
extern bool PgOptionOk(const char *keyword, Oid catalog);
extern void PgCheckOptions(List *options, Oid catalog);
extern char *PgValidOptions(Oid catalog);

#endif							/* COLLEGEDB_PG_INTERNAL_H */
