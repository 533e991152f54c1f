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
	const char *sql;			/* its statement (NULL: the fan-out's) */
	CdRowSink  *sink;			/* its rows (NULL: none) */

	bool		ok;
	bool		timed_out;
	int64		rows;			/* affected or returned */
	char	   *error;			/* when !ok: the message */
	char	   *detail;			/* when !ok, or NULL */
	char	   *hint;			/* when !ok, or NULL */
	char		sqlstate[6];	/* when !ok */
} CdFanoutShard;

/* What a fan-out's statement is */
typedef enum CdFanoutKind
{
	CD_FANOUT_READ = 0,			/* a read (the caller checked) */
	CD_FANOUT_WRITE,			/* a write */
	CD_FANOUT_BY_DIALECT		/* whatever each shard's dialect says */
} CdFanoutKind;

extern void FanoutRun(CdFanoutShard *shards, int n, const char *sql, int nparams,
					  const CdParam *params, CdFanoutKind kind);
extern void FanoutRaise(const CdFanoutShard *shard, const char *sql, const char *hint)
			pg_attribute_noreturn();

#endif							/* COLLEGEDB_FANOUT_H */
