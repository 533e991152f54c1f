/*-------------------------------------------------------------------------
 *
 * fanout.h
 *	  One statement on many shards at once; failures as data.
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_FANOUT_H
#define COLLEGEDB_FANOUT_H

#include "remote/remote.h"

/* One shard of a fan-out: what to run there, and how it went */
typedef struct CdFanoutShard
{
	const CdShard *shard;
	CdRowSink  *sink;			/* its rows (NULL: none) */

	bool		ok;
	bool		timed_out;
	int64		rows;			/* affected or returned */
	char	   *error;			/* when !ok */
	char		sqlstate[6];	/* when !ok */
} CdFanoutShard;

extern void FanoutRun(CdFanoutShard *shards, int n, const char *sql, int nparams,
					  const CdParam *params, bool is_write);
extern const CdShard **FanoutReadSet(int *count);

#endif							/* COLLEGEDB_FANOUT_H */
