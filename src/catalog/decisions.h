/*-------------------------------------------------------------------------
 *
 * decisions.h
 *	  The decision records of two-phase commit (collegedb.commit_decision):
 *	  every read and write of collegedb's C code (catalog/decisions.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_CATALOG_DECISIONS_H
#define COLLEGEDB_CATALOG_DECISIONS_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "nodes/pg_list.h"

/* one decision record */
typedef struct CdDecision
{
	char	   *xact;			/* the front transaction's name */
	TimestampTz decided_at;
} CdDecision;

extern void DecisionRecord(const char *xact);
extern bool DecisionExists(const char *xact);
extern List *DecisionList(void);
extern void DecisionForget(const char *xact);

#endif							/* COLLEGEDB_CATALOG_DECISIONS_H */
