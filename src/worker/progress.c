/*-------------------------------------------------------------------------
 *
 * progress.c
 *	  Progress of a running rebalance or slot move as NOTICE lines, about
 *	  once a second, for a session that waits for the job (wait_for_job,
 *	  the synchronous rebalance and move_slot), as a progress bar would:
 *
 *	    NOTICE:  job 7: 40 of 100 keys (40%), 12.5 keys/s, about 5 s left
 *
 * The first line comes a second after the wait began, so a short job
 * says nothing; collegedb.progress_notices turns them off.  The figures
 * are those of collegedb.jobs, which the job's workers keep current as
 * each key settles.  What this file does not do: wait (its callers do),
 * or keep any figure itself.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "lib/stringinfo.h"

#include "catalog/journal.h"
#include "collegedb.h"
#include "worker/progress.h"

/* how often a waiter reports, in milliseconds */
#define PROGRESS_INTERVAL_MS 1000

/*
 * JobProgressStart returns when a wait that begins now first reports.
 */
TimestampTz
JobProgressStart(void)
{
	return TimestampTzPlusMilliseconds(GetCurrentTimestamp(), PROGRESS_INTERVAL_MS);
}

/*
 * JobProgressReport emits a NOTICE with job 'job_id''s progress when
 * *next_at has passed and the job is running with keys planned, and sets
 * *next_at to a second later.  It reads the job only when a line is due.
 */
void
JobProgressReport(int64 job_id, TimestampTz *next_at)
{
	TimestampTz now = GetCurrentTimestamp();
	int64		done;
	int64		planned;
	double		rate;
	double		left;
	StringInfoData line;

	if (!CollegeProgressNotices || now < *next_at)
		return;
	*next_at = TimestampTzPlusMilliseconds(now, PROGRESS_INTERVAL_MS);
	if (!JournalJobProgress(job_id, &done, &planned, &rate, &left))
		return;
	initStringInfo(&line);
	appendStringInfo(&line, "job " INT64_FORMAT ": " INT64_FORMAT " of " INT64_FORMAT " keys (%d%%)",
					 job_id, done, planned, (int) floor(100.0 * done / planned));
	if (rate >= 0)
		appendStringInfo(&line, ", %.1f keys/s", rate);
	if (left >= 0)
		appendStringInfo(&line, ", about %.0f s left", ceil(left));
	ereport(NOTICE,
			(errcode(ERRCODE_SUCCESSFUL_COMPLETION),
			 errmsg_internal("%s", line.data)));
	pfree(line.data);
}
