/*-------------------------------------------------------------------------
 *
 * mysql_prepared.c
 *	  The MySQL adapter's server-side prepared statements: a bounded cache,
 *	  per connection, of the statements it prepared, and running one.
 *
 * A statement sent as text is parsed by the server every time, and its
 * parameters travel as literals; a prepared one is parsed once per
 * connection and executed by handle with its parameters bound in their
 * own types (a BIGINT key compared with a BIGINT, never with a string,
 * which MySQL would compare as a double).  So mysql.c prepares each
 * statement text with parameters the first time it runs on a connection
 * and executes its handle after that; statements without parameters (the
 * adapter's own transaction control, DDL, the caller's session commands)
 * stay text.
 *
 * An entry is keyed on the caller's text and on whether the session had
 * NO_BACKSLASH_ESCAPES when it was rewritten (the placeholders are found
 * by the lexical rules of the moment); it holds the text with ?
 * placeholders, which $n each ? stands for, and the handle.  The cache
 * holds at most CD_MYSQL_PREPARED_MAX entries; the least recently used
 * one is evicted, its handle closed on the server before the next
 * prepare (COM_STMT_CLOSE has no answer).  A statement the server refuses
 * to prepare (ER_UNSUPPORTED_PS, or ER_MAX_PREPARED_STMT_COUNT_REACHED)
 * (and ER_PARSE_ERROR: a ? is not taken everywhere a literal is) runs as
 * text, and its entry remembers the refusal.  A handle the server no
 * longer knows (ER_UNKNOWN_STMT_HANDLER, ER_NEED_REPREPARE) is prepared
 * again once before its execution fails, and so is a read whose table
 * changed its number of columns (CR_NEW_STMT_METADATA).  The cache belongs to
 * the handle and dies with it, so a reconnect starts empty, as the new
 * session on the server does.
 *
 * Results are streamed row by row (never mysql_stmt_store_result), every
 * column bound as a string, which libmariadb fills with the text the text
 * protocol carries; a value longer than its buffer is fetched again into
 * a larger one.  Every wait is the caller's: each step returns what it
 * waits for, as MysqlPoll does.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "utils/memutils.h"

#include "adapters/lexer.h"
#include "adapters/mysql_internal.h"

/* a column's first buffer, in bytes (grown for longer values) */
#define CD_MYSQL_COLUMN_BUFFER_MIN 64
#define CD_MYSQL_COLUMN_BUFFER_MAX 1024

/* state of one ? rewrite */
typedef struct CdMysqlMarkState
{
	int			n;
	int			size;
	int		   *markers;
} CdMysqlMarkState;

/*
 * MysqlEmitMarker is the placeholder callback of the ? rewrite: it writes
 * a ? and records which parameter it stands for.
 */
static void
MysqlEmitMarker(StringInfo out, int n, void *arg)
{
	CdMysqlMarkState *st = (CdMysqlMarkState *) arg;

	if (st->n == st->size)
	{
		st->size *= 2;
		st->markers = repalloc(st->markers, sizeof(int) * st->size);
	}
	st->markers[st->n++] = n;
	appendStringInfoChar(out, '?');
}

/*
 * MysqlPreparedFind returns the cache entry of 'sql' rewritten under
 * 'no_backslash', or NULL, and marks it used.
 */
CdMysqlPrepared *
MysqlPreparedFind(CdMysqlConn *conn, const char *sql, bool no_backslash)
{
	uint32		hash = hash_bytes((const unsigned char *) sql, (int) strlen(sql));

	for (int i = 0; i < conn->nprepared; i++)
	{
		CdMysqlPrepared *e = conn->prepared[i];

		if (e->hash == hash && e->no_backslash == no_backslash &&
			strcmp(e->sql, sql) == 0)
		{
			e->used = ++conn->prepared_clock;
			return e;
		}
	}
	return NULL;
}

/*
 * MysqlPreparedClose puts a handle on the list of those to close on the
 * server before the next prepare (or with the connection).
 */
static void
MysqlPreparedClose(CdMysqlConn *conn, MYSQL_STMT *stmt)
{
	if (conn->nclosing == conn->closing_size)
	{
		int			size = Max(conn->closing_size * 2, 8);

		conn->closing = conn->closing == NULL ?
			MemoryContextAlloc(conn->prepared_context, sizeof(MYSQL_STMT *) * size) :
			repalloc(conn->closing, sizeof(MYSQL_STMT *) * size);
		conn->closing_size = size;
	}
	conn->closing[conn->nclosing++] = stmt;
}

/*
 * MysqlPreparedEvict drops the least recently used entry; its handle is
 * closed on the server before the next prepare.
 */
static void
MysqlPreparedEvict(CdMysqlConn *conn)
{
	int			victim = 0;
	CdMysqlPrepared *e;

	for (int i = 1; i < conn->nprepared; i++)
		if (conn->prepared[i]->used < conn->prepared[victim]->used)
			victim = i;
	e = conn->prepared[victim];
	if (e->stmt != NULL)
		MysqlPreparedClose(conn, e->stmt);
	conn->prepared[victim] = conn->prepared[--conn->nprepared];
	pfree(e->sql);
	pfree(e->marked);
	pfree(e->markers);
	pfree(e);
}

/*
 * MysqlPreparedAdd adds an entry for 'sql', not prepared yet: the ?
 * rewrite by 'rules' (those 'no_backslash' names), and 'read_only', the
 * statement's shape by them.  A full cache evicts its least recently used
 * entry first.
 */
CdMysqlPrepared *
MysqlPreparedAdd(CdMysqlConn *conn, const char *sql, bool no_backslash,
				 bool read_only, const CdLexerRules *rules)
{
	CdMysqlPrepared *e;
	CdMysqlMarkState st;
	StringInfoData buf;
	MemoryContext old;

	if (conn->prepared_context == NULL)
		conn->prepared_context = AllocSetContextCreate(TopMemoryContext,
													   "collegedb mysql prepared",
													   ALLOCSET_DEFAULT_SIZES);
	if (conn->nprepared == CD_MYSQL_PREPARED_MAX)
		MysqlPreparedEvict(conn);
	old = MemoryContextSwitchTo(conn->prepared_context);
	e = palloc0(sizeof(CdMysqlPrepared));
	e->sql = pstrdup(sql);
	e->hash = hash_bytes((const unsigned char *) sql, (int) strlen(sql));
	e->no_backslash = no_backslash;
	e->read_only = read_only;
	st.n = 0;
	st.size = 4;
	st.markers = palloc(sizeof(int) * st.size);
	initStringInfo(&buf);
	(void) LexerScan(sql, rules, &buf, MysqlEmitMarker, &st);
	e->marked = buf.data;
	e->marked_len = buf.len;
	e->nmarkers = st.n;
	e->markers = st.markers;
	e->used = ++conn->prepared_clock;
	MemoryContextSwitchTo(old);
	conn->prepared[conn->nprepared++] = e;
	return e;
}

/*
 * MysqlPreparedForgetStmt lets an entry's handle go: it is closed on the
 * server before the next prepare (or with the connection), and the entry
 * is prepared again when it runs next.
 */
static void
MysqlPreparedForgetStmt(CdMysqlConn *conn, CdMysqlPrepared *e)
{
	if (e->stmt == NULL)
		return;
	MysqlPreparedClose(conn, e->stmt);
	e->stmt = NULL;
}

/*
 * MysqlPreparedBind binds the parameters of one execution of 'entry', in
 * the statement's context, checking each as the literal path does (the
 * same refusals, in the same order).  False with *err filled (nothing
 * sent) on a bad parameter.
 */
bool
MysqlPreparedBind(CdMysqlConn *conn, CdMysqlPrepared *entry, int nparams,
				  const CdParam *params, CdRemoteError *err)
{
	CdMysqlParamState st;
	MemoryContext old = MemoryContextSwitchTo(conn->context);

	MysqlParamStateInit(&st, conn->mysql, nparams, params);
	conn->param_binds = palloc(sizeof(MYSQL_BIND) * Max(entry->nmarkers, 1));
	for (int i = 0; i < entry->nmarkers; i++)
	{
		const CdParam *p = MysqlParamUsable(&st, entry->markers[i]);

		if (p == NULL)
			break;
		MysqlBindParam(&conn->param_binds[i], p);
	}
	MemoryContextSwitchTo(old);
	if (st.failed)
	{
		AdapterRefuse(err, st.sqlstate, st.message, NULL);
		return false;
	}
	conn->entry = entry;
	conn->reprepared = false;
	return true;
}

/*
 * MysqlStmtColumns binds every column of the result just executed as a
 * string buffer, and sends the row description to the sink.  The
 * description is the one of this execution (the server sends it with
 * each, and it changes when a table under the statement did).
 */
static bool
MysqlStmtColumns(CdMysqlConn *conn, MYSQL_STMT *stmt, CdRowSink *sink,
				 CdRemoteError *err)
{
	int			ncols = (int) mysql_stmt_field_count(stmt);
	MemoryContext old = MemoryContextSwitchTo(conn->context);

	conn->col_binds = palloc0(sizeof(MYSQL_BIND) * Max(ncols, 1));
	conn->lengths = palloc0(sizeof(unsigned long) * Max(ncols, 1));
	conn->nulls = palloc0(sizeof(my_bool) * Max(ncols, 1));
	conn->values = palloc0(sizeof(char *) * Max(ncols, 1));
	for (int i = 0; i < ncols; i++)
	{
		MYSQL_BIND *b = &conn->col_binds[i];
		unsigned long size = Min(Max(stmt->fields[i].length + 1,
									 CD_MYSQL_COLUMN_BUFFER_MIN),
								 CD_MYSQL_COLUMN_BUFFER_MAX);

		b->buffer_type = MYSQL_TYPE_STRING;
		b->buffer = palloc(size);
		b->buffer_length = size;
		b->length = &conn->lengths[i];
		b->is_null = &conn->nulls[i];
	}
	MemoryContextSwitchTo(old);
	if (mysql_stmt_bind_result(stmt, conn->col_binds) != 0)
	{
		MysqlSetStmtError(err, stmt);
		return false;
	}
	MysqlColumns(conn, stmt->fields, ncols, sink);
	return true;
}

/*
 * MysqlStmtRow hands the row just fetched to the sink: a column whose
 * value did not fit its buffer gets a larger one, fetched again from the
 * row libmariadb holds (no I/O), and keeps it for the rows after.
 */
static bool
MysqlStmtRow(CdMysqlConn *conn, MYSQL_STMT *stmt, CdRowSink *sink,
			 CdRemoteError *err)
{
	bool		rebind = false;

	for (int i = 0; i < conn->ncols; i++)
	{
		MYSQL_BIND *b = &conn->col_binds[i];

		if (conn->nulls[i])
		{
			conn->values[i] = NULL;
			continue;
		}
		if (conn->lengths[i] > b->buffer_length)
		{
			unsigned long size = conn->lengths[i] + 1;

			b->buffer = MemoryContextAlloc(conn->context, size);
			b->buffer_length = size;
			if (mysql_stmt_fetch_column(stmt, b, (unsigned int) i, 0) != 0)
			{
				MysqlSetStmtError(err, stmt);
				return false;
			}
			rebind = true;
		}
		conn->values[i] = b->buffer;
	}
	if (rebind && mysql_stmt_bind_result(stmt, conn->col_binds) != 0)
	{
		MysqlSetStmtError(err, stmt);
		return false;
	}
	MysqlDeliverRow(conn, conn->values, conn->lengths, sink);
	return true;
}

/*
 * MysqlPreparedFailed ends the statement with the error of 'stmt'.
 */
static CdPollResult
MysqlPreparedFailed(CdMysqlConn *conn, MYSQL_STMT *stmt, CdRemoteError *err)
{
	MysqlSetStmtError(err, stmt);
	conn->midway = false;
	return CD_POLL_FAILED;
}

/*
 * MysqlPreparedPoll advances a prepared statement as far as it can
 * without blocking: handles waiting to be closed, the prepare (when the
 * entry has no handle), the execution, then the rows, streamed.  Returns
 * CD_POLL_DONE when MysqlPoll goes on (the statement finished, or the
 * server refused to prepare it and it runs as text: conn->entry is then
 * NULL), the wait it needs, or CD_POLL_FAILED.
 */
CdPollResult
MysqlPreparedPoll(CdMysqlConn *conn, CdRowSink *sink, CdRemoteError *err)
{
	CdMysqlPrepared *e = conn->entry;

	for (;;)
	{
		int			ret = 1;
		my_bool		closed = 0;
		int			status;

		switch (conn->phase)
		{
			case CD_MYSQL_STMT_PREPARE:
				if (conn->nclosing > 0)
				{
					MYSQL_STMT *s = conn->closing[conn->nclosing - 1];

					if (!conn->started)
						status = mysql_stmt_close_start(&closed, s);
					else
						status = mysql_stmt_close_cont(&closed, s, conn->wait);
					if ((conn->started = status != 0))
					{
						conn->wait = status;
						return MysqlWaitResult(status);
					}
					/* freed either way; a broken connection shows next */
					conn->nclosing--;
					continue;
				}
				if (!conn->started)
				{
					if (e->stmt == NULL && (e->stmt = mysql_stmt_init(conn->mysql)) == NULL)
					{
						AdapterSetError(err, "53200", true, "out of memory",
										"The MySQL client library could not allocate a statement handle.",
										NULL);
						conn->midway = false;
						return CD_POLL_FAILED;
					}
					status = mysql_stmt_prepare_start(&ret, e->stmt, e->marked,
													  (unsigned long) e->marked_len);
				}
				else
					status = mysql_stmt_prepare_cont(&ret, e->stmt, conn->wait);
				if ((conn->started = status != 0))
				{
					conn->wait = status;
					return MysqlWaitResult(status);
				}
				if (ret != 0)
				{
					unsigned int code = mysql_stmt_errno(e->stmt);

					/*
					 * Not every place that takes a literal takes a ? (SHOW
					 * ... LIKE ?, HELP ?): a syntax error runs as text too,
					 * which fails as it always did when the text is wrong.
					 */
					if ((code == ER_UNSUPPORTED_PS || code == ER_PARSE_ERROR ||
						 code == ER_MAX_PREPARED_STMT_COUNT_REACHED) &&
						conn->statement != NULL)
					{
						/* the text was built with the parameters: send it */
						e->refused = true;
						MysqlPreparedForgetStmt(conn, e);
						conn->entry = NULL;
						conn->phase = CD_MYSQL_QUERY;
						return CD_POLL_DONE;
					}
					MysqlSetStmtError(err, e->stmt);
					MysqlPreparedForgetStmt(conn, e);
					conn->midway = false;
					return CD_POLL_FAILED;
				}
				conn->phase = CD_MYSQL_STMT_EXECUTE;
				continue;

			case CD_MYSQL_STMT_EXECUTE:
				if (!conn->started)
				{
					if (mysql_stmt_param_count(e->stmt) != (unsigned long) e->nmarkers ||
						mysql_stmt_bind_param(e->stmt, conn->param_binds) != 0)
					{
						AdapterSetError(err, "XX000", false,
										"the MySQL server prepared the statement with another number of parameters",
										NULL, NULL);
						MysqlPreparedForgetStmt(conn, e);
						conn->midway = false;
						return CD_POLL_FAILED;
					}
					status = mysql_stmt_execute_start(&ret, e->stmt);
				}
				else
					status = mysql_stmt_execute_cont(&ret, e->stmt, conn->wait);
				if ((conn->started = status != 0))
				{
					conn->wait = status;
					return MysqlWaitResult(status);
				}
				if (ret != 0)
				{
					unsigned int code = mysql_stmt_errno(e->stmt);

					if ((code == ER_UNKNOWN_STMT_HANDLER || code == ER_NEED_REPREPARE) &&
						!conn->reprepared)
					{
						/* nothing ran: prepare it again, once */
						conn->reprepared = true;
						MysqlPreparedForgetStmt(conn, e);
						conn->phase = CD_MYSQL_STMT_PREPARE;
						continue;
					}


					/*
					 * A table under the statement changed its number of
					 * columns: libmariadb refuses the result, whose rows are
					 * still coming, and closing the handle reads them.  A
					 * read runs again on a new handle; anything else ran
					 * and its result is lost with the connection (a client
					 * error: connection_lost).
					 */
					if (code == CR_NEW_STMT_METADATA && e->read_only && !conn->reprepared)
					{
						conn->reprepared = true;
						MysqlPreparedForgetStmt(conn, e);
						conn->phase = CD_MYSQL_STMT_PREPARE;
						continue;
					}
					if (code == ER_UNKNOWN_STMT_HANDLER || code == ER_NEED_REPREPARE ||
						code == CR_NEW_STMT_METADATA)
					{
						CdPollResult r = MysqlPreparedFailed(conn, e->stmt, err);

						MysqlPreparedForgetStmt(conn, e);
						return r;
					}
					return MysqlPreparedFailed(conn, e->stmt, err);
				}
				if (mysql_stmt_field_count(e->stmt) == 0)
				{
					conn->rows = (int64) mysql_stmt_affected_rows(e->stmt);
					conn->phase = CD_MYSQL_DONE;
					return CD_POLL_DONE;
				}
				if (!MysqlStmtColumns(conn, e->stmt, sink, err))
				{
					/* rows are pending that nobody reads: the connection goes */
					err->connection_lost = true;
					return CD_POLL_FAILED;
				}
				conn->phase = CD_MYSQL_STMT_FETCH;
				continue;

			case CD_MYSQL_STMT_FETCH:
				if (!conn->started)
					status = mysql_stmt_fetch_start(&ret, e->stmt);
				else
					status = mysql_stmt_fetch_cont(&ret, e->stmt, conn->wait);
				if ((conn->started = status != 0))
				{
					conn->wait = status;
					return MysqlWaitResult(status);
				}
				if (ret == MYSQL_NO_DATA)
				{
					conn->phase = CD_MYSQL_DONE;
					return CD_POLL_DONE;
				}
				if (ret != 0 && ret != MYSQL_DATA_TRUNCATED)
				{
					/* the result ended with an error packet */
					CdPollResult r = MysqlPreparedFailed(conn, e->stmt, err);

					MysqlPreparedForgetStmt(conn, e);
					return r;
				}
				conn->rows++;
				if (sink != NULL && !MysqlStmtRow(conn, e->stmt, sink, err))
				{
					err->connection_lost = true;
					return CD_POLL_FAILED;
				}
				continue;

			default:
				elog(ERROR, "unexpected MySQL statement phase %d", (int) conn->phase);
		}
	}
}

/*
 * MysqlPreparedFree frees the cache with the connection, after
 * mysql_close: the handles no longer have a connection then, and closing
 * them only frees their memory.  A handle whose close was interrupted may
 * have left the connection's list already and still point at it: it is
 * let go rather than touched.
 */
void
MysqlPreparedFree(CdMysqlConn *conn)
{
	int			nclosing = conn->nclosing;

	if (nclosing > 0 && conn->phase == CD_MYSQL_STMT_PREPARE && conn->started)
		nclosing--;
	for (int i = 0; i < conn->nprepared; i++)
		if (conn->prepared[i]->stmt != NULL)
			(void) mysql_stmt_close(conn->prepared[i]->stmt);
	for (int i = 0; i < nclosing; i++)
		(void) mysql_stmt_close(conn->closing[i]);
	conn->nprepared = 0;
	conn->nclosing = 0;
	conn->closing = NULL;
	conn->closing_size = 0;
	if (conn->prepared_context != NULL)
		MemoryContextDelete(conn->prepared_context);
	conn->prepared_context = NULL;
}
