/*-------------------------------------------------------------------------
 *
 * fanout_check.c
 *	  What a scan does with the shards of a fan-out that failed: one rule
 *	  for the scans of rows (fdw_exec.c) and of aggregates (upper_exec.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"

#include "collegedb.h"
#include "fdw/fdw.h"
#include "remote/fanout.h"

/*
 * FdwFanoutResult checks a fan-out of a scan: a failed shard fails it,
 * except a read under collegedb.fanout_partial, which warns and goes on
 * without that shard's rows.  Returns the rows of the shards that answered.
 */
int64
FdwFanoutResult(const CdFanoutShard *shards, int n, bool is_write)
{
	StringInfoData skipped;
	int64		rows = 0;

	initStringInfo(&skipped);
	for (int i = 0; i < n; i++)
	{
		if (shards[i].ok)
		{
			rows += shards[i].rows;
			continue;
		}
		if (is_write || !CollegeFanoutPartial)
			FanoutRaise(&shards[i], NULL,
						"SET collegedb.fanout_partial = on reads the other shards anyway.");
		appendStringInfo(&skipped, "%s%s (%s)", skipped.len ? ", " : "",
						 shards[i].shard->name, shards[i].error);
	}
	if (skipped.len)
		ereport(WARNING,
				(errmsg("skipped shards that failed: %s", skipped.data)));
	return rows;
}
