/*-------------------------------------------------------------------------
 *
 * placeholders.h
 *	  Find $n placeholders in a statement, per dialect, outside string
 *	  literals, quoted identifiers and comments.
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_PLACEHOLDERS_H
#define COLLEGEDB_PLACEHOLDERS_H

#include "postgres.h"

#include "lib/stringinfo.h"

#include "adapters/adapter.h"

/*
 * PlaceholderEmit appends the dialect's replacement for placeholder $n
 * (1-based) to 'out'.
 */
typedef void (*PlaceholderEmit) (StringInfo out, int n, void *arg);

typedef struct CdStatementShape
{
	int			max_param;		/* highest $n referenced, 0 if none */
	bool		empty;			/* nothing but whitespace, ';' and comments */
	bool		read_only;		/* SELECT/VALUES/TABLE/SHOW/EXPLAIN/WITH and no
								 * INSERT/UPDATE/DELETE/MERGE/INTO anywhere */
	char		first_word[16]; /* lower case, "" if none or longer */
} CdStatementShape;

/*
 * PlaceholdersRewrite copies 'sql' to 'out', replacing each $n outside
 * literals, quoted identifiers and comments (by the lexical rules of
 * 'dialect') with what 'emit' appends.  With 'out' NULL it only scans.
 * Returns the statement's shape.
 */
extern CdStatementShape PlaceholdersRewrite(const char *sql, CdDialect dialect,
											StringInfo out, PlaceholderEmit emit,
											void *arg);

#endif							/* COLLEGEDB_PLACEHOLDERS_H */
