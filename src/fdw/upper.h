/*-------------------------------------------------------------------------
 *
 * upper.h
 *	  Aggregates computed on the shards: what upper.c (planning) and
 *	  upper_exec.c (execution) share.
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_UPPER_H
#define COLLEGEDB_UPPER_H

#include "fdw/fdw.h"

/* the aggregates computed in parts */
typedef enum UpperAggKind
{
	UPPER_COUNT = 0,
	UPPER_SUM,
	UPPER_MIN,
	UPPER_MAX,
	UPPER_AVG,					/* two parts: the sum and the count */
	UPPER_AND,
	UPPER_OR
} UpperAggKind;

/* The indexes of an aggregate scan's fdw_private list */
enum UpperPrivate
{
	UpperPrivPushed = 0,		/* per dialect: the statement aggregating there */
	UpperPrivRows,				/* per dialect: its parts row by row, and the key */
	UpperPrivTypes,				/* the parts' types (Integer) */
	UpperPrivTypmods,			/* and typmods */
	UpperPrivGroups,			/* how many parts are grouping values */
	UpperPrivEqops,				/* their equality operators */
	UpperPrivKinds,				/* UpperAggKind per aggregate */
	UpperPrivParts,				/* each aggregate's first part */
	UpperPrivRelid,				/* the foreign table */
	UpperPrivCount
};

extern List *UpperDeparse(FdwDeparse *d, FdwRelInfo *info, List *groups, List *group_eqops,
						  List *aggs, List *kinds);
extern void UpperBeginScan(ForeignScanState *node, int eflags);
extern TupleTableSlot *UpperIterate(ForeignScanState *node);
extern void UpperRescan(ForeignScanState *node);
extern void UpperEndScan(ForeignScanState *node);
extern void UpperExplain(ForeignScanState *node, ExplainState *es);

#endif							/* COLLEGEDB_UPPER_H */
