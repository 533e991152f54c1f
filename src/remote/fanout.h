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

/*
 * One shard of a fan-out: what to run there, and how it went.
 *
 * 'sql', when set, is this shard's statement instead of the fan-out's,
 * with 'nparams'/'params' (when 'nparams' is 0, the fan-out's).  'next',
 * when set, is called each time one of the shard's statements ended (ok,
 * rows, error, detail, hint and sqlstate filled in); it may set the
 * shard's following statement in 'sql'/'nparams'/'params' and return true
 * to have it run on the same connection right away, so that a slow shard
 * holds up no other shard's sequence.  'arg' is the caller's.
 */
typedef struct CdFanoutShard CdFanoutShard;
struct CdFanoutShard
{
	const CdShard *shard;
	CdRowSink  *sink;			/* its rows (NULL: none) */
	const char *sql;			/* its statement (NULL: the fan-out's) */
	int			nparams;
	const CdParam *params;
	bool		(*next) (CdFanoutShard *self);
	void	   *arg;

	bool		ok;
	bool		timed_out;
	int64		rows;			/* affected or returned */
	char	   *error;			/* when !ok: the message */
	char	   *detail;			/* when !ok, or NULL */
	char	   *hint;			/* when !ok, or NULL */
	char		sqlstate[6];	/* when !ok */
};

/* What a fan-out's statement is */
typedef enum CdFanoutKind
{
	CD_FANOUT_READ = 0,			/* a read (the caller checked) */
	CD_FANOUT_WRITE,			/* a write */
	CD_FANOUT_BY_DIALECT,		/* whatever each shard's dialect says */
	CD_FANOUT_EACH_COMMITS,		/* the same, and the caller commits each
								 * shard's part right after (RemoteCommitNow):
								 * none waits for the front's commit */
	CD_FANOUT_AUTOCOMMIT		/* collegedb's own writes, each atomic and
								 * idempotent: each commits on its shard on
								 * its own, outside any remote transaction */
} CdFanoutKind;

extern void FanoutRun(CdFanoutShard *shards, int n, const char *sql, int nparams,
					  const CdParam *params, CdFanoutKind kind);
extern void FanoutRaise(const CdFanoutShard *shard, const char *sql, const char *hint)
			pg_attribute_noreturn();

#endif							/* COLLEGEDB_FANOUT_H */
