/*-------------------------------------------------------------------------
 *
 * mysql_values.c
 *	  Values to and from MySQL/MariaDB: parameters written into the
 *	  statement as literals (escaped for the connection) or bound to a
 *	  prepared statement, and result rows handed to the sink as cells in
 *	  dialect-neutral kinds.
 *
 * Nothing here talks to the server; mysql.c does.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "utils/memutils.h"

#include "adapters/mysql_internal.h"

/* ----------------------------------------------------------------
 *		parameters
 * ----------------------------------------------------------------
 */

/*
 * MysqlParamFail records the first failure of a placeholder rewrite.
 */
static void
MysqlParamFail(CdMysqlParamState *st, const char *sqlstate, char *message)
{
	if (st->failed)
		return;
	st->failed = true;
	st->sqlstate = sqlstate;
	st->message = message;
}

/*
 * MysqlAppendQuoted appends a single-quoted string literal, escaped for the
 * connection's character set (and for NO_BACKSLASH_ESCAPES, which the
 * library learns from the server's status flags).
 */
static void
MysqlAppendQuoted(StringInfo out, CdMysqlParamState *st, const char *s,
				  int len)
{
	unsigned long n;

	enlargeStringInfo(out, len * 2 + 3);
	out->data[out->len++] = '\'';
	n = mysql_real_escape_string(st->mysql, out->data + out->len, s,
								 (unsigned long) len);
	if (n == (unsigned long) -1)
	{
		MysqlParamFail(st, "22021",
					   pstrdup("parameter cannot be escaped for the MySQL connection character set"));
		n = 0;
	}
	out->len += (int) n;
	out->data[out->len++] = '\'';
	out->data[out->len] = '\0';
}

/*
 * MysqlNumericOk says whether a NUMERIC parameter is a finite decimal that
 * can be pasted into SQL as-is (PostgreSQL's numeric output: sign, digits,
 * point).  NaN and infinities are not.
 */
static bool
MysqlNumericOk(const char *s, int len)
{
	bool		digit = false;

	for (int i = 0; i < len; i++)
	{
		char		c = s[i];

		if (c >= '0' && c <= '9')
			digit = true;
		else if (!(c == '-' || c == '+' || c == '.' ||
				   ((c == 'e' || c == 'E') && digit)))
			return false;
	}
	return digit;
}

/*
 * MysqlParamStateInit starts the state of one placeholder rewrite, or of
 * one binding, for 'nparams' parameters on connection 'm'.
 */
void
MysqlParamStateInit(CdMysqlParamState *st, MYSQL *m, int nparams,
					const CdParam *params)
{
	memset(st, 0, sizeof(CdMysqlParamState));
	st->mysql = m;
	st->nparams = nparams;
	st->params = params;
}

/*
 * MysqlCheckStringKind fails for a value kind that does not travel as a
 * character string (text, JSON, dates and times, UUIDs): the other kinds
 * have cases of their own.  TIMESTAMPTZ arrives in UTC without a zone and
 * the session time_zone is '+00:00' (see MysqlConnect): a plain string.
 */
static void
MysqlCheckStringKind(CdValueKind kind)
{
	switch (kind)
	{
		case CD_VALUE_TEXT:
		case CD_VALUE_JSON:
		case CD_VALUE_DATE:
		case CD_VALUE_TIME:
		case CD_VALUE_TIMESTAMP:
		case CD_VALUE_TIMESTAMPTZ:
		case CD_VALUE_UUID:
			return;
		default:
			elog(ERROR, "unexpected collegedb value kind %d", (int) kind);
	}
}

/*
 * MysqlParamUsable checks parameter $n as both the literal and the bound
 * path take it: it must exist, and MySQL has no NaN or infinity, in DOUBLE
 * or in DECIMAL.  Returns the parameter, or NULL with the failure
 * recorded in the state.
 */
const CdParam *
MysqlParamUsable(CdMysqlParamState *st, int n)
{
	const CdParam *p;

	if (n < 1 || n > st->nparams)
	{
		MysqlParamFail(st, "42P02",
					   psprintf("there is no parameter $%d", n));
		return NULL;
	}
	p = &st->params[n - 1];
	if ((p->kind == CD_VALUE_FLOAT && (isnan(p->fval) || isinf(p->fval))) ||
		(p->kind == CD_VALUE_NUMERIC &&
		 (p->str == NULL || !MysqlNumericOk(p->str, p->len))))
	{
		MysqlParamFail(st, "22003",
					   pstrdup("MySQL cannot store NaN or infinity"));
		return NULL;
	}
	return p;
}

/*
 * MysqlEmitParam is the placeholder callback: it appends parameter $n as a
 * MySQL literal.  It cannot fail through the rewrite, so a failure is
 * recorded in the state and checked once the rewrite is done.
 */
void
MysqlEmitParam(StringInfo out, int n, void *arg)
{
	CdMysqlParamState *st = (CdMysqlParamState *) arg;
	const CdParam *p = MysqlParamUsable(st, n);

	if (p == NULL)
	{
		appendStringInfoString(out, "NULL");
		return;
	}

	switch (p->kind)
	{
		case CD_VALUE_NULL:
			appendStringInfoString(out, "NULL");
			break;
		case CD_VALUE_BOOL:
			appendStringInfoString(out, p->bval ? "TRUE" : "FALSE");
			break;
		case CD_VALUE_INT:
			appendStringInfo(out, INT64_FORMAT, p->ival);
			break;
		case CD_VALUE_FLOAT:
			{
				char		buf[64];

				snprintf(buf, sizeof(buf), "%.17g", p->fval);
				appendStringInfoString(out, buf);
				/* an exponent makes MySQL read a DOUBLE, not a DECIMAL */
				if (strchr(buf, 'e') == NULL && strchr(buf, 'E') == NULL)
					appendStringInfoString(out, "e0");
			}
			break;
		case CD_VALUE_NUMERIC:
			appendBinaryStringInfo(out, p->str, p->len);
			break;
		case CD_VALUE_BYTES:
			{
				static const char hexdig[] = "0123456789ABCDEF";

				enlargeStringInfo(out, p->len * 2 + 3);
				out->data[out->len++] = 'X';
				out->data[out->len++] = '\'';
				for (int i = 0; i < p->len; i++)
				{
					unsigned char c = (unsigned char) p->str[i];

					out->data[out->len++] = hexdig[c >> 4];
					out->data[out->len++] = hexdig[c & 0xF];
				}
				out->data[out->len++] = '\'';
				out->data[out->len] = '\0';
			}
			break;

		default:
			MysqlCheckStringKind(p->kind);
			MysqlAppendQuoted(out, st, p->str ? p->str : "", p->str ? p->len : 0);
			break;
	}
}

/*
 * MysqlBindParam binds parameter 'p' (checked by MysqlParamUsable) for a
 * prepared statement, with the MySQL type its literal would have: BIGINT
 * for integers (booleans are 1 and 0, as TRUE and FALSE are), DOUBLE,
 * DECIMAL as text, binary strings for bytes, and character strings in the
 * connection's character set for the rest (temporal values in the text
 * form their literals have).  The bind points at copies in the current
 * memory context: the caller's parameters may be gone when it is sent.
 */
void
MysqlBindParam(MYSQL_BIND *b, const CdParam *p)
{
	memset(b, 0, sizeof(MYSQL_BIND));
	switch (p->kind)
	{
		case CD_VALUE_NULL:
			b->buffer_type = MYSQL_TYPE_NULL;
			break;
		case CD_VALUE_BOOL:
		case CD_VALUE_INT:
			{
				int64	   *v = palloc(sizeof(int64));

				*v = p->kind == CD_VALUE_BOOL ? (p->bval ? 1 : 0) : p->ival;
				b->buffer_type = MYSQL_TYPE_LONGLONG;
				b->buffer = v;
			}
			break;
		case CD_VALUE_FLOAT:
			{
				double	   *v = palloc(sizeof(double));

				*v = p->fval;
				b->buffer_type = MYSQL_TYPE_DOUBLE;
				b->buffer = v;
			}
			break;
		default:
			if (p->kind == CD_VALUE_NUMERIC)
				b->buffer_type = MYSQL_TYPE_NEWDECIMAL;
			else if (p->kind == CD_VALUE_BYTES)
				b->buffer_type = MYSQL_TYPE_BLOB;
			else
			{
				MysqlCheckStringKind(p->kind);
				b->buffer_type = MYSQL_TYPE_STRING;
			}
			{
				/* bytes may hold NULs: a copy by length */
				int			len = p->str ? p->len : 0;
				char	   *copy = palloc(len + 1);

				if (len > 0)
					memcpy(copy, p->str, len);
				copy[len] = '\0';
				b->buffer = copy;
				b->buffer_length = (unsigned long) len;
			}
			break;
	}
}


/* ----------------------------------------------------------------
 *		results
 * ----------------------------------------------------------------
 */

/*
 * MysqlColumnKind maps a result column's type to a value kind.  Binary
 * strings (character set 63) are bytes; the checks on individual values
 * (zero dates, out-of-range times, unsigned overflow) are in MysqlCell.
 * BOOLEAN columns are TINYINT(1) in MySQL and stay integers.
 */
CdValueKind
MysqlColumnKind(const MYSQL_FIELD *f)
{
	switch (f->type)
	{
		case MYSQL_TYPE_TINY:
		case MYSQL_TYPE_SHORT:
		case MYSQL_TYPE_LONG:
		case MYSQL_TYPE_LONGLONG:
		case MYSQL_TYPE_INT24:
		case MYSQL_TYPE_YEAR:
		case MYSQL_TYPE_BIT:
			return CD_VALUE_INT;
		case MYSQL_TYPE_FLOAT:
		case MYSQL_TYPE_DOUBLE:
			return CD_VALUE_FLOAT;
		case MYSQL_TYPE_DECIMAL:
		case MYSQL_TYPE_NEWDECIMAL:
			return CD_VALUE_NUMERIC;
		case MYSQL_TYPE_DATE:
		case MYSQL_TYPE_NEWDATE:
			return CD_VALUE_DATE;
		case MYSQL_TYPE_TIME:
		case MYSQL_TYPE_TIME2:
			return CD_VALUE_TIME;
		case MYSQL_TYPE_DATETIME:
		case MYSQL_TYPE_DATETIME2:
		case MYSQL_TYPE_TIMESTAMP:
		case MYSQL_TYPE_TIMESTAMP2:
			return CD_VALUE_TIMESTAMP;
		case MYSQL_TYPE_JSON:
			return CD_VALUE_JSON;
		case MYSQL_TYPE_GEOMETRY:
			/* well-known binary, not text */
			return CD_VALUE_BYTES;
		case MYSQL_TYPE_TINY_BLOB:
		case MYSQL_TYPE_MEDIUM_BLOB:
		case MYSQL_TYPE_LONG_BLOB:
		case MYSQL_TYPE_BLOB:
		case MYSQL_TYPE_STRING:
		case MYSQL_TYPE_VAR_STRING:
		case MYSQL_TYPE_VARCHAR:
			return f->charsetnr == CD_MYSQL_BINARY_CHARSET ?
				CD_VALUE_BYTES : CD_VALUE_TEXT;
		default:
			return CD_VALUE_TEXT;
	}
}

/*
 * MysqlZeroDate says whether a DATE or DATETIME text has a zero year, month
 * or day ('0000-00-00', '2024-00-10'): MySQL accepts those, PostgreSQL
 * does not, so they travel as text.
 */
static bool
MysqlZeroDate(const char *v, unsigned long len)
{
	if (len < 10 || v[4] != '-' || v[7] != '-')
		return true;			/* not the shape we expect: keep as text */
	return strncmp(v, "0000", 4) == 0 || strncmp(v + 5, "00", 2) == 0 ||
		strncmp(v + 8, "00", 2) == 0;
}

/*
 * MysqlTimeOfDay says whether a TIME text is a time of day PostgreSQL
 * accepts; MySQL TIME is an interval (-838:59:59 to 838:59:59).
 */
static bool
MysqlTimeOfDay(const char *v, unsigned long len)
{
	return len >= 8 && v[0] >= '0' && v[0] <= '2' && v[2] == ':' &&
		(v[0] < '2' || v[1] < '4');
}

/*
 * MysqlCell fills one result cell, deciding the kind per value where the
 * column type alone cannot: BIT comes as big-endian bytes and is decoded
 * into 'buf'; unsigned BIGINT and BIT(64) above the int64 range become
 * NUMERIC; zero dates and non-clock TIME values become TEXT.
 */
void
MysqlCell(CdCell *cell, const MYSQL_FIELD *f, CdValueKind kind,
		  const char *v, unsigned long len, char *buf)
{
	cell->isnull = (v == NULL);
	cell->kind = kind;
	cell->data = v;
	cell->len = (int) len;
	if (v == NULL)
		return;

	switch (f->type)
	{
		case MYSQL_TYPE_BIT:
			{
				uint64		u = 0;

				for (unsigned long i = 0; i < len && i < 8; i++)
					u = (u << 8) | (unsigned char) v[i];
				snprintf(buf, CD_MYSQL_INTBUF, UINT64_FORMAT, u);
				cell->data = buf;
				cell->len = (int) strlen(buf);
				if (u > (uint64) PG_INT64_MAX)
					cell->kind = CD_VALUE_NUMERIC;
			}
			break;
		case MYSQL_TYPE_LONGLONG:
			/* 9223372036854775807 has 19 digits */
			if ((f->flags & UNSIGNED_FLAG) &&
				(len > 19 ||
				 (len == 19 && strncmp(v, "9223372036854775807", 19) > 0)))
				cell->kind = CD_VALUE_NUMERIC;
			break;
		case MYSQL_TYPE_DATE:
		case MYSQL_TYPE_NEWDATE:
		case MYSQL_TYPE_DATETIME:
		case MYSQL_TYPE_DATETIME2:
		case MYSQL_TYPE_TIMESTAMP:
		case MYSQL_TYPE_TIMESTAMP2:
			if (MysqlZeroDate(v, len))
				cell->kind = CD_VALUE_TEXT;
			break;
		case MYSQL_TYPE_TIME:
		case MYSQL_TYPE_TIME2:
			if (!MysqlTimeOfDay(v, len))
				cell->kind = CD_VALUE_TEXT;
			break;
		default:
			break;
	}
}

/*
 * MysqlColumns takes the row description of the result being streamed
 * (the text protocol's or a prepared statement's), into the statement's
 * context, and sends the column names to the sink.
 */
void
MysqlColumns(CdMysqlConn *conn, MYSQL_FIELD *fields, int ncols, CdRowSink *sink)
{
	MemoryContext old = MemoryContextSwitchTo(conn->context);
	const char **names = palloc(sizeof(char *) * Max(ncols, 1));

	conn->ncols = ncols;
	conn->fields = fields;
	conn->kinds = palloc(sizeof(CdValueKind) * Max(ncols, 1));
	conn->cells = palloc(sizeof(CdCell) * Max(ncols, 1));
	conn->bufs = palloc((Size) CD_MYSQL_INTBUF * Max(ncols, 1));
	for (int i = 0; i < ncols; i++)
	{
		names[i] = conn->fields[i].name;
		conn->kinds[i] = MysqlColumnKind(&conn->fields[i]);
	}
	MemoryContextSwitchTo(old);
	if (sink != NULL)
		sink->columns(sink, ncols, names);
}

/*
 * MysqlDeliverRow hands a row (its values as the text protocol carries
 * them, NULL for NULL, and their lengths) to the sink, in the row
 * context.  Reads client memory only.  May throw (from the sink).
 */
void
MysqlDeliverRow(CdMysqlConn *conn, MYSQL_ROW row, const unsigned long *lengths,
				CdRowSink *sink)
{
	for (int i = 0; i < conn->ncols; i++)
		MysqlCell(&conn->cells[i], &conn->fields[i], conn->kinds[i], row[i], lengths[i],
				  conn->bufs + (Size) i * CD_MYSQL_INTBUF);
	AdapterDeliverRow(sink, conn->ncols, conn->cells, conn->row_context);
}
