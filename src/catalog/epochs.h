/*-------------------------------------------------------------------------
 *
 * epochs.h
 *	  The published epochs of computed placement (catalog table
 *	  collegedb.epoch), cached.
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_CATALOG_EPOCHS_H
#define COLLEGEDB_CATALOG_EPOCHS_H

#include "postgres.h"

#include "nodes/pg_list.h"

typedef struct CdEpoch
{
	int			number;
	int			nshards;
	char	  **shards;			/* sorted, database encoding */
	const char **shards_utf8;	/* the same names in UTF-8, for hashing */
} CdEpoch;

extern void EpochInit(void);
extern List *EpochList(void);
extern void EpochInsert(int number, const char *const *shards, int nshards);

#endif							/* COLLEGEDB_CATALOG_EPOCHS_H */
