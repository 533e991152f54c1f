/*-------------------------------------------------------------------------
 *
 * pg_copy.c
 *	  Rows sent to a PostgreSQL shard by COPY FROM STDIN: the bulk path of
 *	  a batched INSERT or COPY into a sharded table (fdw/insert.c).
 *
 * A batch of rows becomes one COPY in text format: the statement goes
 * out, the shard's CopyInResponse is awaited (one round trip: libpq
 * accepts copy data only after it), then every row as COPY text and the
 * end of the copy, without waiting for the answer.  From there the
 * statement is an ordinary statement in flight: pg_poll (pg.c) flushes
 * what libpq still holds and reads the "COPY n" that ends it, or the
 * shard's error.  The shard then inserts the rows as its own COPY does
 * (in multi-row batches, without planning a statement per batch), which
 * is cheaper for it than a multi-row INSERT of parameters.
 *
 * A value goes in the text form its parameter has (remote/values.c), as
 * COPY's text format writes it: backslash, newline, carriage return and
 * tab escaped, NULL as \N, bytea in hex, a timestamptz with its UTC
 * offset.  The column's input function reads it, as it would read the
 * untyped parameter.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/memutils.h"

#include "adapters/pg_internal.h"
#include "collegedb.h"

/*
 * copy_text writes 'len' bytes of 's' at 'out' escaped for COPY's text
 * format, and returns the end of what it wrote (at most 2 * len bytes).
 */
static char *
copy_text(char *out, const char *s, int len)
{
	for (int i = 0; i < len; i++)
	{
		unsigned char c = (unsigned char) s[i];

		/* every byte COPY escapes is a backslash or below a space */
		if (likely(c >= ' ' && c != '\\'))
		{
			*out++ = c;
			continue;
		}
		switch (c)
		{
			case '\\':
				*out++ = '\\';
				*out++ = '\\';
				break;
			case '\n':
				*out++ = '\\';
				*out++ = 'n';
				break;
			case '\r':
				*out++ = '\\';
				*out++ = 'r';
				break;
			case '\t':
				*out++ = '\\';
				*out++ = 't';
				break;
			default:
				*out++ = c;
				break;
		}
	}
	return out;
}

/*
 * copy_row appends one row of 'ncols' values in COPY's text format: the
 * room it may need is made first, then every byte written in place.
 */
static void
copy_row(StringInfo buf, int ncols, const CdParam *values)
{
	static const char hex[] = "0123456789abcdef";
	Size		room = ncols + 1;
	char	   *out;

	for (int c = 0; c < ncols; c++)
		room += 2 * (Size) values[c].len + 3;
	enlargeStringInfo(buf, room);
	out = buf->data + buf->len;
	for (int c = 0; c < ncols; c++)
	{
		const CdParam *p = &values[c];

		if (c > 0)
			*out++ = '\t';
		switch (p->kind)
		{
			case CD_VALUE_NULL:
				*out++ = '\\';
				*out++ = 'N';
				break;
			case CD_VALUE_BYTES:
				/* "\x" then hex, its backslash escaped */
				*out++ = '\\';
				*out++ = '\\';
				*out++ = 'x';
				for (int i = 0; i < p->len; i++)
				{
					unsigned char b = (unsigned char) p->str[i];

					*out++ = hex[b >> 4];
					*out++ = hex[b & 0x0f];
				}
				break;
			case CD_VALUE_TIMESTAMPTZ:
				out = copy_text(out, p->str, p->len);
				memcpy(out, "+00", 3);
				out += 3;
				break;
			default:
				out = copy_text(out, p->str, p->len);
				break;
		}
	}
	*out++ = '\n';
	buf->len = out - buf->data;
	buf->data[buf->len] = '\0';
}

/*
 * copy_wait waits for the socket, under the statement's deadline; false
 * (with *err filled) when the wait gave up.
 */
static bool
copy_wait(PgHandle *handle, int events, int flags, CdRemoteError *err)
{
	bool		interruptible;
	TimestampTz deadline = AdapterExecDeadline(flags, &interruptible);

	if (PgHandleWait(handle, events, deadline, interruptible))
		return true;
	AdapterSetGaveUp(err, flags);
	return false;
}

/*
 * copy_started waits for the answer to the COPY statement: true once the
 * shard waits for the rows.  A shard that refused the statement (no such
 * table or column, no permission) sent its error instead: it is kept in
 * *err and the handle marked failed, so that pg_poll reads the rest of the
 * answer and reports it, and the connection stays in step.  False when
 * the connection failed or the wait gave up.
 */
static bool
copy_started(PgHandle *handle, int flags, CdRemoteError *err, bool *refused)
{
	PGconn	   *conn = handle->conn;

	*refused = false;
	for (;;)
	{
		int			flush = PQflush(conn);
		PGresult   *res;
		ExecStatusType status;

		if (flush < 0 || !PQconsumeInput(conn))
		{
			PgFillError(conn, NULL, err);
			err->connection_lost = true;
			return false;
		}
		if (flush > 0 || PQisBusy(conn))
		{
			if (!copy_wait(handle, flush > 0 ? WL_SOCKET_WRITEABLE : WL_SOCKET_READABLE,
						   flags, err))
				return false;
			continue;
		}
		res = PQgetResult(conn);
		status = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
		if (status == PGRES_COPY_IN)
		{
			PQclear(res);
			return true;
		}
		PgFillError(conn, res, err);
		PQclear(res);
		if (res == NULL)
		{
			err->connection_lost = true;
			return false;
		}
		handle->failed = true;
		*refused = true;
		return true;
	}
}

/*
 * PgCopyRows goes on with the COPY statement that pg_send has just sent
 * (pg_send_rows, pg.c): once the shard waits for the rows, it hands them
 * to libpq, 'nrows' rows of 'ncols' values each ('params', row after row),
 * and the end of the copy, without waiting for the answer, which comes
 * through pg_poll.  See adapter.h (CdAdapter.send_rows) and the file's
 * header.
 */
bool
PgCopyRows(PgHandle *handle, int nrows, int ncols, const CdParam *params, int flags,
		   CdRemoteError *err)
{
	PGconn	   *conn = handle->conn;
	StringInfoData data;
	MemoryContext old;
	bool		refused;
	int			r;

	if (!copy_started(handle, flags, err, &refused))
		return false;
	if (refused)
		return true;

	/* the rows' text lives until the next statement's pg_send */
	old = MemoryContextSwitchTo(handle->statement_context);
	initStringInfo(&data);
	for (int row = 0; row < nrows; row++)
		copy_row(&data, ncols, &params[row * ncols]);
	MemoryContextSwitchTo(old);

	/* libpq enlarges its buffer rather than refuse: 0 only if it cannot */
	while ((r = PQputCopyData(conn, data.data, data.len)) == 0)
		if (!copy_wait(handle, WL_SOCKET_WRITEABLE, flags, err))
			return false;
	while (r > 0 && (r = PQputCopyEnd(conn, NULL)) == 0)
		if (!copy_wait(handle, WL_SOCKET_WRITEABLE, flags, err))
			return false;
	if (r < 0)
	{
		PgFillError(conn, NULL, err);
		err->connection_lost = true;
		return false;
	}
	return true;
}
