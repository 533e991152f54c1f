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

#include "libpq-fe.h"

#include "adapters/adapter.h"

/* the protocol's limit: the parameter count travels as a 16-bit integer */
#define PG_MAX_PARAMS 65535

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
} PgHandle;

/* pg_connect.c */
extern void *PgConnect(const CdConnInfo *info, CdRemoteError *err);
extern void PgClose(void *h);
extern void PgCancel(void *h, int timeout_ms);
extern bool PgWait(PGconn *conn, int events, TimestampTz deadline, bool interruptible);
extern void PgFillError(PGconn *conn, const PGresult *res, CdRemoteError *err);

/* pg_options.c */
extern bool PgOptionOk(const char *keyword, Oid catalog);
extern void PgCheckOptions(List *options, Oid catalog);
extern char *PgValidOptions(Oid catalog);

#endif							/* COLLEGEDB_PG_INTERNAL_H */
