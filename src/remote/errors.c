/*-------------------------------------------------------------------------
 *
 * errors.c
 *	  Raises a shard's failure in the front: the one place that does, as
 *	  postgres_fdw's pgfdw_report_error.
 *
 * An adapter describes a failure (CdRemoteError: SQLSTATE, message,
 * detail, hint, whether the connection is lost) copied out of its client
 * library; the remote layer decides what to do about it and, when the
 * front's statement must fail, raises it here.  The error keeps its
 * identity: the shard's SQLSTATE, message, detail and hint, at severity
 * ERROR whatever the shard said, with a context line naming the shard, its
 * dialect and the statement.  A lost connection is class 08 whatever the
 * shard said last (the client needs to know the shard is unreachable),
 * except a COMMIT whose wait ended by statement_timeout: that stays the
 * timeout, since the commit's outcome is unknown, not refused.  The
 * operation (connecting, committing, releasing a savepoint) names itself
 * in the message; a statement's failure is the shard's own message.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "mb/pg_wchar.h"

#include "collegedb.h"
#include "remote/remote.h"

#define CLASS_IS_08(code) (ERRCODE_TO_CATEGORY(code) == ERRCODE_CONNECTION_EXCEPTION)

/*
 * RemoteSqlstate is the errcode of a shard's five-character SQLSTATE, for
 * RemoteRaise and for a caller that words a shard's failure itself.
 */
int
RemoteSqlstate(const char *sqlstate)
{
	return MAKE_SQLSTATE(sqlstate[0], sqlstate[1], sqlstate[2], sqlstate[3], sqlstate[4]);
}

/*
 * RemoteOpFailure: what a shard's health record says of a failed 'op' other
 * than a statement, as a whole phrase (a message is never built of pieces).
 */
static const char *
RemoteOpFailure(CdRemoteOp op)
{
	switch (op)
	{
		case CD_REMOTE_CONNECT:
			return "could not connect";
		case CD_REMOTE_COMMIT:
			return "could not commit";
		case CD_REMOTE_PREPARE:
			return "could not prepare the transaction";
		case CD_REMOTE_RELEASE:
			return "could not release savepoint";
		case CD_REMOTE_STATEMENT:
			break;
	}
	return "statement failed";
}

/* the longest statement an error's context line shows whole */
#define CONTEXT_SQL_MAX 800

/*
 * context_sql returns the statement for an error's context line: a long
 * one (a batch's INSERT of a thousand rows) is cut after its beginning,
 * which says what it was, with its length.
 */
static const char *
context_sql(const char *sql)
{
	int			len;

	if (sql == NULL || (len = strlen(sql)) <= CONTEXT_SQL_MAX)
		return sql;
	return psprintf("%.*s ... (%d characters)", pg_mbcliplen(sql, len, CONTEXT_SQL_MAX / 2),
					sql, len);
}

/*
 * RemoteRaise raises 'err', a failure of 'op' on shard 'shard' (of
 * 'adapter''s dialect), running 'sql' (NULL: none); see the file header.
 */
void
RemoteRaise(CdRemoteOp op, const char *shard, const CdAdapter *adapter,
			const char *sql, const CdRemoteError *err)
{
	int			code = RemoteSqlstate(err->sqlstate);
	const char *message = err->message ? err->message : "unknown error";

	sql = context_sql(sql);

	/* a connect's code is the adapter's: 08001, 2F003 (the password rule), ... */
	if (err->connection_lost && op != CD_REMOTE_CONNECT && !CLASS_IS_08(code) &&
		!(op == CD_REMOTE_COMMIT && code == ERRCODE_QUERY_CANCELED))
		code = ERRCODE_CONNECTION_FAILURE;

	/* a statement's failure was recorded where it ended (StatementFinish) */
	if (op != CD_REMOTE_STATEMENT)
		ActivityRecordContact(shard, psprintf("%s: %s", RemoteOpFailure(op), message));

	switch (op)
	{
		case CD_REMOTE_CONNECT:
			ereport(ERROR,
					(errcode(code),
					 errmsg("could not connect to shard \"%s\"", shard),
					 err->detail ? errdetail_internal("%s: %s", message, err->detail) :
					 errdetail_internal("%s", message),
					 err->hint ? errhint("%s", err->hint) : 0));
			break;
		case CD_REMOTE_COMMIT:
		case CD_REMOTE_PREPARE:
		case CD_REMOTE_RELEASE:
			ereport(ERROR,
					(errcode(code),
					 errmsg(op == CD_REMOTE_COMMIT ?
							gettext_noop("could not commit on shard \"%s\": %s") :
							op == CD_REMOTE_PREPARE ?
							gettext_noop("could not prepare the transaction on shard \"%s\": %s") :
							gettext_noop("could not release savepoint on shard \"%s\": %s"),
							shard, message),
					 err->detail ? errdetail_internal("%s", err->detail) : 0,
					 err->hint ? errhint("%s", err->hint) : 0));
			break;
		case CD_REMOTE_STATEMENT:
			if (err->connection_lost)
				ereport(ERROR,
						(errcode(code),
						 errmsg("lost connection to shard \"%s\"", shard),
						 errdetail_internal("%s", message),
						 sql ? errcontext("shard \"%s\" (%s): %s", shard, adapter->name, sql) : 0));
			ereport(ERROR,
					(errcode(code),
					 errmsg_internal("%s", message),
					 err->detail ? errdetail_internal("%s", err->detail) : 0,
					 err->hint ? errhint("%s", err->hint) : 0,
					 sql ? errcontext("shard \"%s\" (%s): %s", shard, adapter->name, sql) : 0));
			break;
	}
	pg_unreachable();
}

/*
 * RemoteErrorText renders a caught error for a log line or a journal row
 * so that it names the shard that failed: the message, followed by the
 * shard from the context line RemoteRaise adds (shard "x" (dialect): sql)
 * when the message does not name it already.
 */
char *
RemoteErrorText(const ErrorData *edata)
{
	const char *message = edata->message ? edata->message : "unknown error";
	const char *context = edata->context;
	const char *line;

	if (strstr(message, "shard \"") != NULL || context == NULL)
		return pstrdup(message);
	/* the innermost context line that names a shard */
	for (line = context; line != NULL; line = strchr(line, '\n'))
	{
		const char *end;

		if (*line == '\n')
			line++;
		if (strncmp(line, "shard \"", 7) != 0)
			continue;
		end = strstr(line + 7, "\" (");
		if (end == NULL)
			continue;
		return psprintf("%s (shard \"%.*s\")", message, (int) (end - line - 7), line + 7);
	}
	return pstrdup(message);
}
