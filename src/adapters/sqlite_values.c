/*-------------------------------------------------------------------------
 *
 * sqlite_values.c
 *	  The SQLite adapter's values: parameters bound by their kind, result
 *	  cells read by their storage class and declared type.
 *
 * Parameters are bound natively (integers, doubles, blobs) so that SQLite
 * stores what it would store had the value been written in the statement;
 * cells come back in PostgreSQL's input syntax (see CdCell).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>
#include <math.h>

#include <sqlite3.h>

#include "adapters/sqlite_internal.h"

/*
 * sqlite_bind_numeric binds an exact decimal as SQLite would store it if
 * it were typed in the statement: an integer when it is one that fits, a
 * double when that loses nothing (at most 15 significant digits), text
 * otherwise (also NaN and the infinities).
 */
static int
sqlite_bind_numeric(sqlite3_stmt *stmt, int index, const CdParam *p)
{
	char	   *text = pnstrdup(p->str ? p->str : "", p->len);
	const char *s = text;
	bool		has_point = false;
	int			ndigits = 0;
	int			first_nonzero = -1;
	int			last_nonzero = -1;
	int			rc;

	if (*s == '+' || *s == '-')
		s++;
	for (; *s; s++)
	{
		if (*s == '.' && !has_point)
			has_point = true;
		else if (isdigit((unsigned char) *s))
		{
			if (*s != '0')
			{
				if (first_nonzero < 0)
					first_nonzero = ndigits;
				last_nonzero = ndigits;
			}
			ndigits++;
		}
		else
			break;
	}

	if (*s == '\0' && ndigits > 0)
	{
		char	   *end;

		if (!has_point)
		{
			int64		v;

			errno = 0;
			v = strtoi64(text, &end, 10);
			if (errno == 0 && *end == '\0')
			{
				rc = sqlite3_bind_int64(stmt, index, v);
				pfree(text);
				return rc;
			}
		}
		if (first_nonzero < 0 || last_nonzero - first_nonzero + 1 <= 15)
		{
			double		d = strtod(text, &end);

			if (*end == '\0' && isfinite(d))
			{
				rc = sqlite3_bind_double(stmt, index, d);
				pfree(text);
				return rc;
			}
		}
	}

	rc = sqlite3_bind_text(stmt, index, text, p->len, SQLITE_TRANSIENT);
	pfree(text);
	return rc;
}

/*
 * SqliteBindParam binds one parameter according to its kind.  Data is
 * always copied (SQLITE_TRANSIENT): it need not outlive this call.
 */
int
SqliteBindParam(sqlite3_stmt *stmt, int index, const CdParam *p)
{
	const char *str = p->str ? p->str : "";

	switch (p->kind)
	{
		case CD_VALUE_NULL:
			return sqlite3_bind_null(stmt, index);
		case CD_VALUE_BOOL:
			return sqlite3_bind_int(stmt, index, p->bval ? 1 : 0);
		case CD_VALUE_INT:
			return sqlite3_bind_int64(stmt, index, p->ival);
		case CD_VALUE_FLOAT:
			/* SQLite would turn a NaN into NULL; keep it a value */
			if (isnan(p->fval))
				return sqlite3_bind_text(stmt, index, "NaN", 3, SQLITE_STATIC);
			return sqlite3_bind_double(stmt, index, p->fval);
		case CD_VALUE_NUMERIC:
			return sqlite_bind_numeric(stmt, index, p);
		case CD_VALUE_BYTES:
			/* a NULL pointer would bind NULL, not an empty blob */
			if (p->len == 0 || p->str == NULL)
				return sqlite3_bind_zeroblob(stmt, index, 0);
			return sqlite3_bind_blob(stmt, index, p->str, p->len,
									 SQLITE_TRANSIENT);
		case CD_VALUE_TIMESTAMPTZ:
			{
				char	   *text = psprintf("%.*s+00:00", p->len, str);
				int			rc;

				rc = sqlite3_bind_text(stmt, index, text, -1, SQLITE_TRANSIENT);
				pfree(text);
				return rc;
			}
		case CD_VALUE_TEXT:
		case CD_VALUE_JSON:
		case CD_VALUE_DATE:
		case CD_VALUE_TIME:
		case CD_VALUE_TIMESTAMP:
		case CD_VALUE_UUID:
			return sqlite3_bind_text(stmt, index, str, p->len, SQLITE_TRANSIENT);
	}
	elog(ERROR, "unexpected collegedb value kind %d", (int) p->kind);
	return SQLITE_MISUSE;		/* keep compiler quiet */
}

/*
 * sqlite_format_double writes the shortest decimal text that reads back
 * as 'd', in PostgreSQL's float8 input syntax.
 */
static int
sqlite_format_double(double d, char *buf, size_t size)
{
	if (isnan(d))
		return snprintf(buf, size, "NaN");
	if (isinf(d))
		return snprintf(buf, size, d > 0 ? "Infinity" : "-Infinity");
	snprintf(buf, size, "%.15g", d);
	if (strtod(buf, NULL) != d)
		snprintf(buf, size, "%.17g", d);
	return strlen(buf);
}

/*
 * SqliteReadColumnHint reads a result column's declared type: BOOL/BOOLEAN
 * and JSON/JSONB columns refine what the storage class says.
 */
SqliteColumnHint
SqliteReadColumnHint(sqlite3_stmt *stmt, int col)
{
	const char *decl = sqlite3_column_decltype(stmt, col);

	if (decl == NULL)
		return CD_SQLITE_COLUMN_PLAIN;
	if (pg_strcasecmp(decl, "BOOL") == 0 || pg_strcasecmp(decl, "BOOLEAN") == 0)
		return CD_SQLITE_COLUMN_BOOL;
	if (pg_strcasecmp(decl, "JSON") == 0 || pg_strcasecmp(decl, "JSONB") == 0)
		return CD_SQLITE_COLUMN_JSON;
	return CD_SQLITE_COLUMN_PLAIN;
}

/*
 * SqliteFillCells turns the current row into cells.  Integer and float
 * text goes to 'numbuf' (CD_SQLITE_NUMBUF bytes per column); text and blobs
 * point into SQLite's own buffers, valid until the next step.
 */
void
SqliteFillCells(sqlite3_stmt *stmt, int ncols, const SqliteColumnHint *hints,
				  CdCell *cells, char *numbuf)
{
	for (int i = 0; i < ncols; i++)
	{
		CdCell	   *cell = &cells[i];
		char	   *buf = numbuf + (Size) i * CD_SQLITE_NUMBUF;

		cell->isnull = false;
		switch (sqlite3_column_type(stmt, i))
		{
			case SQLITE_INTEGER:
				{
					sqlite3_int64 v = sqlite3_column_int64(stmt, i);

					if (hints[i] == CD_SQLITE_COLUMN_BOOL && (v == 0 || v == 1))
					{
						cell->kind = CD_VALUE_BOOL;
						cell->data = v ? "t" : "f";
						cell->len = 1;
					}
					else
					{
						cell->kind = CD_VALUE_INT;
						cell->len = snprintf(buf, CD_SQLITE_NUMBUF, INT64_FORMAT,
											 (int64) v);
						cell->data = buf;
					}
					break;
				}
			case SQLITE_FLOAT:
				cell->kind = CD_VALUE_FLOAT;
				cell->len = sqlite_format_double(sqlite3_column_double(stmt, i),
												 buf, CD_SQLITE_NUMBUF);
				cell->data = buf;
				break;
			case SQLITE_TEXT:
				{
					const unsigned char *text = sqlite3_column_text(stmt, i);

					cell->kind = hints[i] == CD_SQLITE_COLUMN_JSON ?
						CD_VALUE_JSON : CD_VALUE_TEXT;
					cell->data = text ? (const char *) text : "";
					cell->len = sqlite3_column_bytes(stmt, i);
					break;
				}
			case SQLITE_BLOB:
				{
					const void *blob = sqlite3_column_blob(stmt, i);

					cell->kind = CD_VALUE_BYTES;
					cell->data = blob ? (const char *) blob : "";
					cell->len = sqlite3_column_bytes(stmt, i);
					break;
				}
			default:			/* SQLITE_NULL */
				cell->isnull = true;
				cell->kind = CD_VALUE_NULL;
				cell->data = NULL;
				cell->len = 0;
				break;
		}
	}
}
