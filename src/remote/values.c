/*-------------------------------------------------------------------------
 *
 * values.c
 *	  Converts values between PostgreSQL and the adapters' neutral form:
 *	  statement parameters out, result cells back as jsonb or as the
 *	  caller's column types.
 *
 * Parameters carry their kind and a text form that does not depend on the
 * session's DateStyle or TimeZone (dates and times are always ISO;
 * timestamptz is always UTC), so every dialect receives the same value.
 * Zone-less timestamps coming back are taken as UTC when the caller reads
 * them into timestamptz, which is how collegedb wrote them.
 *
 * The row sinks defined here store results in tuplestores with a memory
 * context reset after each row.  Adapters call them with a row context of
 * their own current, reset after each row: what a sink keeps goes into
 * the context it was created in.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "common/jsonapi.h"
#include "datatype/timestamp.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/datetime.h"
#include "utils/float.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "remote/remote.h"

/*
 * set_text fills a parameter's text form.
 */
static void
set_text(CdParam *param, CdValueKind kind, const char *str)
{
	param->kind = kind;
	param->str = str;
	param->len = strlen(str);
}

/*
 * encode_timestamp renders a timestamp in ISO form without a zone; for
 * timestamptz the value is rendered in UTC.  Infinite values become text.
 */
static void
encode_timestamp(Timestamp ts, CdValueKind kind, CdParam *param)
{
	struct pg_tm tm;
	fsec_t		fsec;
	char		buf[MAXDATELEN + 1];

	if (TIMESTAMP_NOT_FINITE(ts))
	{
		set_text(param, CD_VALUE_TEXT, TIMESTAMP_IS_NOBEGIN(ts) ? "-infinity" : "infinity");
		return;
	}
	if (timestamp2tm(ts, NULL, &tm, &fsec, NULL, NULL) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp out of range")));
	EncodeDateTime(&tm, fsec, false, 0, NULL, USE_ISO_DATES, buf);
	set_text(param, kind, pstrdup(buf));
}

/*
 * ValuesArrayLiteral renders n texts as one array literal in PostgreSQL's
 * text form ("{"a","b"}"), each element quoted, for a statement that
 * takes a list of keys as one parameter.
 */
char *
ValuesArrayLiteral(char *const *texts, const int *lens, int n)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	for (int i = 0; i < n; i++)
	{
		appendStringInfoString(&buf, i ? ",\"" : "\"");
		for (int c = 0; c < lens[i]; c++)
		{
			if (texts[i][c] == '"' || texts[i][c] == '\\')
				appendStringInfoChar(&buf, '\\');
			appendStringInfoChar(&buf, texts[i][c]);
		}
		appendStringInfoChar(&buf, '"');
	}
	appendStringInfoChar(&buf, '}');
	return buf.data;
}

/*
 * int_text returns an integer's decimal text, palloc'd: what psprintf
 * would, for the rows of a bulk load, without its formatting.
 */
static char *
int_text(int64 value)
{
	char	   *buf = palloc(MAXINT8LEN + 1);

	(void) pg_lltoa(value, buf);
	return buf;
}

/*
 * ValuesToParam converts one PostgreSQL value to a CdParam.
 */
void
ValuesToParam(Datum value, bool isnull, Oid typid, CdParam *param)
{
	memset(param, 0, sizeof(*param));
	param->typid = typid;
	if (isnull)
	{
		param->kind = CD_VALUE_NULL;
		return;
	}

	switch (typid)
	{
		case BOOLOID:
			param->bval = DatumGetBool(value);
			set_text(param, CD_VALUE_BOOL, param->bval ? "t" : "f");
			break;
		case INT2OID:
			param->ival = DatumGetInt16(value);
			set_text(param, CD_VALUE_INT, int_text(param->ival));
			break;
		case INT4OID:
			param->ival = DatumGetInt32(value);
			set_text(param, CD_VALUE_INT, int_text(param->ival));
			break;
		case INT8OID:
			param->ival = DatumGetInt64(value);
			set_text(param, CD_VALUE_INT, int_text(param->ival));
			break;
		case OIDOID:
			param->ival = DatumGetObjectId(value);
			set_text(param, CD_VALUE_INT, int_text(param->ival));
			break;
		case FLOAT4OID:
			/* widen through the shortest text, so 0.1::float4 stays 0.1 */
			set_text(param, CD_VALUE_FLOAT,
					 DatumGetCString(DirectFunctionCall1(float4out, value)));
			param->fval = strtod(param->str, NULL);
			break;
		case FLOAT8OID:
			param->fval = DatumGetFloat8(value);
			set_text(param, CD_VALUE_FLOAT, float8out_internal(param->fval));
			break;
		case NUMERICOID:
			{
				char	   *s = DatumGetCString(DirectFunctionCall1(numeric_out, value));

				/* NaN and infinities have no exact decimal form elsewhere */
				set_text(param, isdigit((unsigned char) s[s[0] == '-' ? 1 : 0]) ?
						 CD_VALUE_NUMERIC : CD_VALUE_TEXT, s);
				break;
			}
		case BYTEAOID:
			{
				bytea	   *b = DatumGetByteaPP(value);

				param->kind = CD_VALUE_BYTES;
				param->str = VARDATA_ANY(b);
				param->len = VARSIZE_ANY_EXHDR(b);
				break;
			}
		case JSONOID:
			set_text(param, CD_VALUE_JSON, TextDatumGetCString(value));
			break;
		case JSONBOID:
			set_text(param, CD_VALUE_JSON,
					 JsonbToCString(NULL, &DatumGetJsonbP(value)->root, 0));
			break;
		case DATEOID:
			{
				DateADT		d = DatumGetDateADT(value);
				struct pg_tm tm;
				char		buf[MAXDATELEN + 1];

				if (DATE_NOT_FINITE(d))
				{
					set_text(param, CD_VALUE_TEXT, DATE_IS_NOBEGIN(d) ? "-infinity" : "infinity");
					break;
				}
				j2date(d + POSTGRES_EPOCH_JDATE, &tm.tm_year, &tm.tm_mon, &tm.tm_mday);
				EncodeDateOnly(&tm, USE_ISO_DATES, buf);
				set_text(param, CD_VALUE_DATE, pstrdup(buf));
				break;
			}
		case TIMEOID:
			{
				struct pg_tm tm;
				fsec_t		fsec;
				char		buf[MAXDATELEN + 1];

				time2tm(DatumGetTimeADT(value), &tm, &fsec);
				EncodeTimeOnly(&tm, fsec, false, 0, USE_ISO_DATES, buf);
				set_text(param, CD_VALUE_TIME, pstrdup(buf));
				break;
			}
		case TIMESTAMPOID:
			encode_timestamp(DatumGetTimestamp(value), CD_VALUE_TIMESTAMP, param);
			break;
		case TIMESTAMPTZOID:
			encode_timestamp(DatumGetTimestampTz(value), CD_VALUE_TIMESTAMPTZ, param);
			break;
		case UUIDOID:
			set_text(param, CD_VALUE_UUID,
					 DatumGetCString(DirectFunctionCall1(uuid_out, value)));
			break;
		default:
			{
				Oid			output;
				bool		varlena;

				getTypeOutputInfo(typid, &output, &varlena);
				set_text(param, CD_VALUE_TEXT, OidOutputFunctionCall(output, value));
				break;
			}
	}
}

/*
 * ValuesFromVariadic converts the arguments from 'first' on (a VARIADIC
 * "any" list, or an array passed with VARIADIC) into CdParams.
 */
CdParam *
ValuesFromVariadic(FunctionCallInfo fcinfo, int first, int *nparams)
{
	Datum	   *args;
	Oid		   *types;
	bool	   *nulls;
	int			n;
	CdParam    *params;

	*nparams = 0;
	if (PG_NARGS() <= first)
		return NULL;

	n = extract_variadic_args(fcinfo, first, true, &args, &types, &nulls);
	if (n < 0)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("VARIADIC parameter array must not be null")));
	params = palloc(sizeof(CdParam) * Max(n, 1));
	for (int i = 0; i < n; i++)
		ValuesToParam(args[i], nulls[i], types[i], &params[i]);
	*nparams = n;
	return params;
}

/*
 * is_special_float says whether a number's text is NaN or an infinity,
 * which JSON cannot hold.
 */
static bool
is_special_number(const char *s)
{
	if (*s == '-' || *s == '+')
		s++;
	return pg_strcasecmp(s, "nan") == 0 || pg_strncasecmp(s, "inf", 3) == 0;
}

/*
 * valid_json checks JSON text without raising.
 */
static bool
valid_json(const char *data, int len)
{
	JsonLexContext *lex = makeJsonLexContextCstringLen((char *) data, len,
													   GetDatabaseEncoding(), false);

	return pg_parse_json(lex, &nullSemAction) == JSON_SUCCESS;
}

/*
 * cell_to_jsonb_value fills a JsonbValue from a cell; JSON text is parsed
 * into a nested container.
 */
static void
cell_to_jsonb_value(const CdCell *cell, JsonbValue *v)
{
	char	   *text;

	if (cell->isnull)
	{
		v->type = jbvNull;
		return;
	}

	switch (cell->kind)
	{
		case CD_VALUE_NULL:
			v->type = jbvNull;
			return;
		case CD_VALUE_BOOL:
			v->type = jbvBool;
			v->val.boolean = cell->len > 0 &&
				(cell->data[0] == 't' || cell->data[0] == 'T' || cell->data[0] == '1');
			return;
		case CD_VALUE_INT:
		case CD_VALUE_FLOAT:
		case CD_VALUE_NUMERIC:
			text = pnstrdup(cell->data, cell->len);
			if (!is_special_number(text))
			{
				v->type = jbvNumeric;
				v->val.numeric = DatumGetNumeric(DirectFunctionCall3(numeric_in,
																	 CStringGetDatum(text),
																	 ObjectIdGetDatum(InvalidOid),
																	 Int32GetDatum(-1)));
				return;
			}
			break;
		case CD_VALUE_BYTES:
			text = AdapterHexBytes(cell->data, cell->len);
			break;
		case CD_VALUE_JSON:
			if (valid_json(cell->data, cell->len))
			{
				Jsonb	   *jb;

				text = pnstrdup(cell->data, cell->len);
				jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(text)));
				v->type = jbvBinary;
				v->val.binary.data = &jb->root;
				v->val.binary.len = VARSIZE(jb) - VARHDRSZ;
				return;
			}
			text = pnstrdup(cell->data, cell->len);
			break;
		default:
			text = pnstrdup(cell->data, cell->len);
			break;
	}
	v->type = jbvString;
	v->val.string.val = text;
	v->val.string.len = strlen(text);
}

/*
 * ValuesRowToJsonb builds one jsonb object from a row, keyed by column
 * name (a later duplicate name wins).
 */
Jsonb *
ValuesRowToJsonb(int ncols, const char *const *names, const CdCell *cells)
{
	JsonbParseState *state = NULL;
	JsonbValue *result;

	pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	for (int i = 0; i < ncols; i++)
	{
		JsonbValue	key;
		JsonbValue	val;

		key.type = jbvString;
		key.val.string.val = (char *) names[i];
		key.val.string.len = strlen(names[i]);
		pushJsonbValue(&state, WJB_KEY, &key);
		cell_to_jsonb_value(&cells[i], &val);
		pushJsonbValue(&state, WJB_VALUE, &val);
	}
	result = pushJsonbValue(&state, WJB_END_OBJECT, NULL);
	return JsonbValueToJsonb(result);
}

/*
 * ValuesCellToDatum converts a cell to a value of type 'typid' through the
 * type's input function, adjusting the forms that differ between dialects
 * (raw bytes, booleans stored as numbers, zone-less UTC timestamps).
 */
Datum
ValuesCellToDatum(const CdCell *cell, Oid typid, int32 typmod,
				  FmgrInfo *input, Oid ioparam, bool *isnull)
{
	char	   *text;

	*isnull = cell->isnull || cell->kind == CD_VALUE_NULL;
	if (*isnull)
		return (Datum) 0;

	if (cell->kind == CD_VALUE_BYTES)
	{
		if (typid == BYTEAOID)
		{
			bytea	   *b = palloc(VARHDRSZ + cell->len);

			SET_VARSIZE(b, VARHDRSZ + cell->len);
			memcpy(VARDATA(b), cell->data, cell->len);
			return PointerGetDatum(b);
		}
		text = AdapterHexBytes(cell->data, cell->len);
	}
	else if (cell->kind == CD_VALUE_BOOL && typid != BOOLOID)
	{
		bool		b = cell->len > 0 && (cell->data[0] == 't' || cell->data[0] == '1');

		if (typid == JSONOID || typid == JSONBOID || typid == TEXTOID ||
			typid == VARCHAROID || typid == BPCHAROID)
			text = b ? "true" : "false";
		else
			text = b ? "1" : "0";
	}
	else if (cell->kind == CD_VALUE_TIMESTAMP && typid == TIMESTAMPTZOID)
		text = psprintf("%.*s+00", cell->len, cell->data);
	else if (cell->kind != CD_VALUE_JSON && cell->kind != CD_VALUE_INT &&
			 cell->kind != CD_VALUE_FLOAT && cell->kind != CD_VALUE_NUMERIC &&
			 (typid == JSONOID || typid == JSONBOID) &&
			 !valid_json(cell->data, cell->len))
	{
		/* plain text read into json becomes a JSON string */
		StringInfoData buf;

		initStringInfo(&buf);
		escape_json(&buf, pnstrdup(cell->data, cell->len));
		text = buf.data;
	}
	else
		text = pnstrdup(cell->data, cell->len);

	return InputFunctionCall(input, text, ioparam, typmod);
}

/* Jsonb row sink */

static void
jsonb_sink_columns(CdRowSink *self, int ncols, const char *const *names)
{
	JsonbRowSink *sink = (JsonbRowSink *) self;

	sink->ncols = ncols;
	sink->names = MemoryContextAlloc(sink->context, sizeof(char *) * Max(ncols, 1));
	for (int i = 0; i < ncols; i++)
		sink->names[i] = MemoryContextStrdup(sink->context, names[i]);
}

static void
jsonb_sink_row(CdRowSink *self, int ncols, const CdCell *cells)
{
	JsonbRowSink *sink = (JsonbRowSink *) self;
	MemoryContext old;
	Jsonb	   *jb;

	Assert(ncols == sink->ncols);
	sink->rows++;
	if (sink->store == NULL && sink->first != NULL)
		return;

	old = MemoryContextSwitchTo(sink->row_context);
	jb = ValuesRowToJsonb(ncols, (const char *const *) sink->names, cells);
	MemoryContextSwitchTo(old);

	if (sink->store && sink->tag)
	{
		Datum		values[3];
		bool		nulls[3] = {false, false, true};

		values[0] = CStringGetTextDatum(sink->tag);
		values[1] = JsonbPGetDatum(jb);
		values[2] = (Datum) 0;
		tuplestore_putvalues(sink->store, sink->desc, values, nulls);
	}
	else if (sink->store)
	{
		Datum		value = JsonbPGetDatum(jb);
		bool		isnull = false;

		tuplestore_putvalues(sink->store, sink->desc, &value, &isnull);
	}
	else
	{
		sink->first = MemoryContextAlloc(sink->context, VARSIZE(jb));
		memcpy(sink->first, jb, VARSIZE(jb));
	}
	MemoryContextReset(sink->row_context);
}

/*
 * JsonbRowSinkInit prepares a sink storing one jsonb object per row in
 * 'store' (with descriptor 'desc'), or, with 'store' NULL, keeping only
 * the first row in sink->first.
 */
void
JsonbRowSinkInit(JsonbRowSink *sink, Tuplestorestate *store, TupleDesc desc)
{
	memset(sink, 0, sizeof(*sink));
	sink->base.columns = jsonb_sink_columns;
	sink->base.row = jsonb_sink_row;
	sink->store = store;
	sink->desc = desc;
	sink->context = CurrentMemoryContext;
	sink->row_context = AllocSetContextCreate(CurrentMemoryContext,
											  "collegedb row",
											  ALLOCSET_DEFAULT_SIZES);
}

/* Record row sink */

static void
record_sink_columns(CdRowSink *self, int ncols, const char *const *names)
{
	RecordRowSink *sink = (RecordRowSink *) self;

	if (ncols != sink->desc->natts)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("the shard returned %d column%s but the column definition list has %d",
						ncols, ncols == 1 ? "" : "s", sink->desc->natts)));
}

/* names the column whose value could not be read */
static void
record_sink_error_context(void *arg)
{
	Form_pg_attribute att = arg;

	errcontext("converting column \"%s\" of type %s from the shard's value",
			   NameStr(att->attname), format_type_be(att->atttypid));
}

static void
record_sink_row(CdRowSink *self, int ncols, const CdCell *cells)
{
	RecordRowSink *sink = (RecordRowSink *) self;
	TupleDesc	desc = sink->desc;
	MemoryContext old;
	Datum	   *values;
	bool	   *nulls;
	ErrorContextCallback callback;

	sink->rows++;
	old = MemoryContextSwitchTo(sink->row_context);
	values = palloc(sizeof(Datum) * desc->natts);
	nulls = palloc(sizeof(bool) * desc->natts);
	callback.callback = record_sink_error_context;
	callback.previous = error_context_stack;
	error_context_stack = &callback;
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attisdropped)
		{
			/* a dropped column: the statement reads NULL in its place */
			values[i] = (Datum) 0;
			nulls[i] = true;
			continue;
		}
		callback.arg = att;
		values[i] = ValuesCellToDatum(&cells[i], att->atttypid, att->atttypmod,
									  &sink->inputs[i], sink->ioparams[i], &nulls[i]);
	}
	error_context_stack = callback.previous;
	if (sink->put)
		sink->put(sink, values, nulls);
	else
		tuplestore_putvalues(sink->store, desc, values, nulls);
	MemoryContextSwitchTo(old);
	MemoryContextReset(sink->row_context);
}

/*
 * RecordRowSinkInit prepares a sink converting rows to tuples of 'desc',
 * looking up each column's input function once.  The rows go into 'store',
 * or, where the caller sets sink->put instead, to that function (called in
 * a memory context reset after each row).
 */
void
RecordRowSinkInit(RecordRowSink *sink, Tuplestorestate *store, TupleDesc desc)
{
	memset(sink, 0, sizeof(*sink));
	sink->base.columns = record_sink_columns;
	sink->base.row = record_sink_row;
	sink->store = store;
	sink->desc = desc;
	sink->inputs = palloc(sizeof(FmgrInfo) * Max(desc->natts, 1));
	sink->ioparams = palloc(sizeof(Oid) * Max(desc->natts, 1));
	for (int i = 0; i < desc->natts; i++)
	{
		Oid			input;

		if (TupleDescAttr(desc, i)->attisdropped)
			continue;			/* no type: record_sink_row leaves it NULL */
		getTypeInputInfo(TupleDescAttr(desc, i)->atttypid, &input, &sink->ioparams[i]);
		fmgr_info(input, &sink->inputs[i]);
	}
	sink->row_context = AllocSetContextCreate(CurrentMemoryContext,
											  "collegedb row",
											  ALLOCSET_DEFAULT_SIZES);
}

/*
 * ValuesCellToParam turns a result cell into a parameter of the same kind,
 * so that a row read from one shard can be written to another in any
 * dialect.  Parameters are untyped (the target infers the column's type)
 * except bytea; timestamptz is normalized to UTC.  Strings are copied.
 */
void
ValuesCellToParam(const CdCell *cell, CdParam *param)
{
	memset(param, 0, sizeof(*param));
	if (cell->isnull || cell->kind == CD_VALUE_NULL)
	{
		param->kind = CD_VALUE_NULL;
		return;
	}
	if (cell->kind == CD_VALUE_TIMESTAMPTZ)
	{
		char	   *text = pnstrdup(cell->data, cell->len);
		Datum		ts = DirectFunctionCall3(timestamptz_in, CStringGetDatum(text),
											 ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1));

		ValuesToParam(ts, false, TIMESTAMPTZOID, param);
		param->typid = InvalidOid;
		return;
	}
	param->kind = cell->kind;
	param->typid = cell->kind == CD_VALUE_BYTES ? BYTEAOID : InvalidOid;
	{
		/* bytes may hold NULs: copy them all, and end with one for text */
		char	   *copy = palloc(cell->len + 1);

		memcpy(copy, cell->data, cell->len);
		copy[cell->len] = '\0';
		param->str = copy;
	}
	param->len = cell->len;
	switch (cell->kind)
	{
		case CD_VALUE_BOOL:
			param->bval = cell->len > 0 && (cell->data[0] == 't' || cell->data[0] == '1');
			break;
		case CD_VALUE_INT:
			param->ival = strtoi64(param->str, NULL, 10);
			break;
		case CD_VALUE_FLOAT:
			param->fval = strtod(param->str, NULL);
			break;
		default:
			break;
	}
}

/* Capture sink */

static void
capture_columns(CdRowSink *self, int ncols, const char *const *names)
{
	CaptureRowSink *sink = (CaptureRowSink *) self;
	MemoryContext old = MemoryContextSwitchTo(sink->context);

	sink->ncols = ncols;
	sink->names = palloc(sizeof(char *) * Max(ncols, 1));
	for (int i = 0; i < ncols; i++)
		sink->names[i] = pstrdup(names[i]);
	MemoryContextSwitchTo(old);
}

static void
capture_row(CdRowSink *self, int ncols, const CdCell *cells)
{
	CaptureRowSink *sink = (CaptureRowSink *) self;
	MemoryContext old = MemoryContextSwitchTo(sink->context);
	CdParam    *row = palloc(sizeof(CdParam) * Max(ncols, 1));

	for (int i = 0; i < ncols; i++)
		ValuesCellToParam(&cells[i], &row[i]);
	sink->rows = lappend(sink->rows, row);
	MemoryContextSwitchTo(old);
}

/*
 * CaptureRowSinkInit prepares a sink that keeps the column names and every
 * row, as parameters ready to be written elsewhere, in the current memory
 * context.
 */
void
CaptureRowSinkInit(CaptureRowSink *sink)
{
	memset(sink, 0, sizeof(*sink));
	sink->base.columns = capture_columns;
	sink->base.row = capture_row;
	sink->context = CurrentMemoryContext;
}
