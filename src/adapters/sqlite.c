/*-------------------------------------------------------------------------
 *
 * sqlite.c
 *	  The SQLite adapter: shards that are SQLite database files opened in
 *	  the backend itself.  Its operations table, and running a statement.
 *
 * This file runs one statement at a time with $n parameters rewritten to
 * SQLite's ?n and streams the rows to a CdRowSink.  The adapter's other
 * phases have files of their own: connecting (sqlite_connect.c), errors
 * (sqlite_errors.c), values (sqlite_values.c), options
 * (sqlite_options.c) and the sandbox every connection runs in
 * (sqlite_sandbox.c: no extensions, no other files, no pointers, no
 * hand-written schema, tight limits, an allow-list authorizer).  A
 * statement the remote layer runs as a read must be one by SQLite's own
 * parser (sqlite3_stmt_readonly).
 *
 * It does not cache connections, track transaction nesting, retry or add
 * the shard's name to errors: the remote layer (src/remote/) does.
 *
 * sqlite3.h is included by the SQLite adapter's files and nowhere else.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>

#include <sqlite3.h>

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/memutils.h"

#include "adapters/dialects.h"
#include "adapters/lexer.h"
#include "adapters/sqlite_internal.h"

static const char *const sqlite_read_words[] = {
	"select", "values", "with", "explain", NULL
};
static const char *const sqlite_write_words[] = {
	"insert", "update", "delete", "into", NULL
};
static const char *const sqlite_transaction_words[] = {
	"begin", "commit", "end", "rollback", "savepoint", "release", NULL
};

static const CdLexerRules sqlite_lexer_rules = {
	.backtick_idents = true,
	.bracket_idents = true,
	.strings_are_names = true,
	.read_words = sqlite_read_words,
	.write_words = sqlite_write_words,
	.transaction_words = sqlite_transaction_words,
};

/*
 * sqlite_idle_rollback tells whether 'sql' is a ROLLBACK with no
 * transaction open.  SQLite rolls back by itself after some errors and
 * would then fail the remote layer's ROLLBACK; ROLLBACK of nothing is
 * harmless, so it succeeds instead (PostgreSQL only warns).
 */
static bool
sqlite_idle_rollback(SqliteConn *conn, const char *sql)
{
	return pg_strcasecmp(sql, "ROLLBACK") == 0 &&
		sqlite3_get_autocommit(conn->db) != 0;
}

/*
 * sqlite_emit_placeholder writes $n as ?n, so that SQLite binds parameter
 * number n wherever it appears.
 */
static void
sqlite_emit_placeholder(StringInfo out, int n, void *arg)
{
	appendStringInfo(out, "?%d", n);
}

/*
 * sqlite_tail_is_empty tells whether what follows the first statement is
 * nothing but whitespace, semicolons and comments.
 */
static bool
sqlite_tail_is_empty(const char *p)
{
	while (p != NULL && *p != '\0')
	{
		if (isspace((unsigned char) *p) || *p == ';')
			p++;
		else if (p[0] == '-' && p[1] == '-')
		{
			p = strchr(p, '\n');
		}
		else if (p[0] == '/' && p[1] == '*')
		{
			p = strstr(p + 2, "*/");	/* unterminated: runs to the end */
			if (p != NULL)
				p += 2;
		}
		else
			return false;
	}
	return true;
}






/*
 * sqlite_step_all steps 'stmt' to the end, sending the column names once
 * (when the statement has columns and ran) and every row to 'sink', in a
 * row context reset after each row.  Returns the last step's result code
 * and the row count in *nrows.  May throw (sink callbacks, interrupts); the
 * caller finalizes then.
 */
static int
sqlite_step_all(sqlite3_stmt *stmt, CdRowSink *sink, int64 *nrows)
{
	int			ncols = 0;
	bool		columns_sent = false;
	SqliteColumnHint *hints = NULL;
	CdCell	   *cells = NULL;
	char	   *numbuf = NULL;
	MemoryContext row_context = NULL;
	int			rc;

	*nrows = 0;
	for (;;)
	{
		rc = sqlite3_step(stmt);
		if (rc != SQLITE_ROW && rc != SQLITE_DONE)
			break;

		/*
		 * The columns are read after the first step: a cached statement
		 * that SQLite prepared anew there (the schema changed) may have
		 * other columns than before.
		 */
		if (sink != NULL && !columns_sent &&
			(ncols = sqlite3_column_count(stmt)) > 0)
		{
			row_context = AllocSetContextCreate(CurrentMemoryContext,
												"collegedb sqlite row",
												ALLOCSET_DEFAULT_SIZES);
			hints = palloc(sizeof(SqliteColumnHint) * ncols);
			cells = palloc(sizeof(CdCell) * ncols);
			numbuf = palloc((Size) ncols * CD_SQLITE_NUMBUF);
			for (int i = 0; i < ncols; i++)
				hints[i] = SqliteReadColumnHint(stmt, i);
		}
		if (sink != NULL && ncols > 0 && !columns_sent)
		{
			const char **names = palloc(sizeof(char *) * ncols);

			for (int i = 0; i < ncols; i++)
			{
				const char *name = sqlite3_column_name(stmt, i);

				names[i] = name ? name : "?column?";
			}
			sink->columns(sink, ncols, names);
			pfree(names);
			columns_sent = true;
		}
		if (rc == SQLITE_DONE)
			break;

		(*nrows)++;
		if (sink != NULL && ncols > 0)
		{
			SqliteFillCells(stmt, ncols, hints, cells, numbuf);
			AdapterDeliverRow(sink, ncols, cells, row_context);
		}
		CHECK_FOR_INTERRUPTS();
	}

	if (hints != NULL)
	{
		pfree(hints);
		pfree(cells);
		pfree(numbuf);
		MemoryContextDelete(row_context);
	}
	return rc;
}

/*
 * sqlite_cacheable tells whether a statement whose first word is 'word' is
 * kept for reuse: reads and writes of rows only.  DDL, PRAGMA, ATTACH,
 * transaction control and whatever else are prepared on every call: they
 * are rarely repeated, and the checks around them (ALTER naming
 * collegedb's objects) read their text each time.
 */
static bool
sqlite_cacheable(const char *word)
{
	static const char *const words[] = {
		"select", "values", "with", "insert", "update", "delete", "replace", NULL
	};

	for (int i = 0; words[i] != NULL; i++)
		if (strcmp(word, words[i]) == 0)
			return true;
	return false;
}

/*
 * sqlite_prepare prepares 'sql' (not in the cache) with $n rewritten to
 * ?n, and keeps it in the cache when it is worth it: *entry is then its
 * entry, else NULL and the caller finalizes the statement.  Returns the
 * statement, or NULL with *err filled.
 */
static sqlite3_stmt *
sqlite_prepare(SqliteConn *conn, const char *sql, int nparams, bool internal,
			   SqliteCachedStmt **entry, CdRemoteError *err)
{
	sqlite3_stmt *stmt = NULL;
	const char *tail = NULL;
	CdStatementShape shape;
	StringInfoData buf;
	bool		cache;
	int			rc;

	*entry = NULL;
	initStringInfo(&buf);
	shape = LexerScan(sql, &sqlite_lexer_rules, &buf, sqlite_emit_placeholder, NULL);
	if (shape.max_param > nparams)
	{
		AdapterSetError(err, "42P02", false,
						psprintf("there is no parameter $%d", shape.max_param),
						NULL, NULL);
		return NULL;
	}

	/*
	 * ALTER TABLE ... RENAME TO collegedb_x would slip a table in where
	 * collegedb expects its own; the authorizer sees only the old name.
	 */
	if (!internal && strcmp(shape.first_word, "alter") == 0 &&
		shape.names_reserved)
	{
		SqliteDenied("ALTER naming an object collegedb_... (names starting with collegedb_ are collegedb's)",
					  err);
		return NULL;
	}

	cache = sqlite_cacheable(shape.first_word);
	rc = sqlite3_prepare_v3(conn->db, buf.data, buf.len + 1,
							cache ? SQLITE_PREPARE_PERSISTENT : 0, &stmt, &tail);
	if (rc != SQLITE_OK)
	{
		SqliteFail(conn, rc, stmt, err);
		return NULL;
	}
	if (stmt == NULL)
	{
		AdapterSetError(err, "42601", false, "empty statement", NULL, NULL);
		return NULL;
	}
	if (!sqlite_tail_is_empty(tail))
	{
		sqlite3_finalize(stmt);
		AdapterSetError(err, "42601", false,
						"cannot run more than one command in a statement",
						NULL, "Send each command separately.");
		return NULL;
	}
	pfree(buf.data);

	if (cache && !sqlite3_stmt_isexplain(stmt))
		*entry = SqliteStmtCacheAdd(&conn->stmts, sql, internal, shape.max_param, stmt);
	return stmt;
}

/*
 * sqlite_put_back is done with 'stmt': reset for its next use when it is
 * the cached 'entry', else finalized.
 */
static void
sqlite_put_back(SqliteCachedStmt *entry, sqlite3_stmt *stmt)
{
	if (entry != NULL)
		SqliteStmtCacheRelease(entry);
	else
		sqlite3_finalize(stmt);
}

/*
 * sqlite_start runs the setup commands and finds 'sql' prepared (the
 * cache, else sqlite_prepare), checked against its 'nparams' parameters:
 * the part of sqlite_exec and sqlite_exec_rows before any binding.
 * Returns the statement (*entry its cache entry, or NULL), or NULL with
 * *err filled, or NULL with *nothing set for a ROLLBACK with no
 * transaction open, which succeeds at once.
 *
 * The setup commands are collegedb's own; the statement is too only with
 * CD_EXEC_INTERNAL, else the sandbox refuses what a routed statement may
 * not do.  A statement run as a read (CD_EXEC_READ) must be one by
 * SQLite's own parser.  The statement is checked to be exactly one
 * command by SQLite's parser too (the tail it leaves), not by the lexer,
 * because only SQLite knows that the semicolons inside CREATE TRIGGER ...
 * BEGIN ... END do not end the statement.
 */
static sqlite3_stmt *
sqlite_start(SqliteConn *conn, int nsetup, const char *const *setup, const char *sql,
			 int nparams, int flags, SqliteCachedStmt **entry, bool *nothing,
			 CdRemoteError *err)
{
	sqlite3_stmt *stmt;
	bool		internal;
	int			rc;

	*nothing = false;
	*entry = NULL;
	conn->interrupted = false;
	SqliteSandboxBegin(&conn->sandbox, true);
	/* before the setup commands: a refusal must leave the transaction as it was */
	if (AdapterTooManyParams(nparams, CD_SQLITE_MAX_VARIABLES, "an SQLite", err))
		return NULL;

	/*
	 * After SQLite rolled back a transaction on its own, only a ROLLBACK
	 * brings caller and database back in step.  Anything else is refused as
	 * a lost connection, which makes the remote layer give up on it.
	 */
	if (conn->transaction_lost)
	{
		if (pg_strcasecmp(nsetup > 0 ? setup[0] : sql, "ROLLBACK") != 0)
		{
			AdapterSetError(err, "40000", true,
							"SQLite rolled back the open transaction",
							"An earlier failure ended the transaction on the shard.",
							NULL);
			return NULL;
		}
		conn->transaction_lost = false;
	}

	for (int i = 0; i < nsetup; i++)
	{
		conn->in_transaction = !sqlite3_get_autocommit(conn->db);
		if (sqlite_idle_rollback(conn, setup[i]))
			continue;
		rc = sqlite3_exec(conn->db, setup[i], NULL, NULL, NULL);
		if (rc != SQLITE_OK)
		{
			(void) SqliteFail(conn, rc, NULL, err);
			return NULL;
		}
	}

	conn->in_transaction = !sqlite3_get_autocommit(conn->db);
	if (sqlite_idle_rollback(conn, sql))
	{
		*nothing = true;
		return NULL;
	}

	internal = (flags & CD_EXEC_INTERNAL) != 0;
	SqliteSandboxBegin(&conn->sandbox, internal);

	*entry = SqliteStmtCacheLookup(&conn->stmts, sql, internal);
	if (*entry == NULL)
	{
		stmt = sqlite_prepare(conn, sql, nparams, internal, entry, err);
		if (stmt == NULL)
			return NULL;
	}
	else if ((*entry)->max_param > nparams)
	{
		AdapterSetError(err, "42P02", false,
						psprintf("there is no parameter $%d", (*entry)->max_param),
						NULL, NULL);
		return NULL;
	}
	else
		stmt = (*entry)->stmt;

	if ((flags & CD_EXEC_READ) && !sqlite3_stmt_readonly(stmt))
	{
		sqlite_put_back(*entry, stmt);
		AdapterSetError(err, "25006", false,
						"statement writes, but it was sent to the SQLite shard as a read",
						"SQLite's parser finds that the statement changes the database.",
						NULL);
		return NULL;
	}

	/* SQLite's own ?, :name or @name parameters count too */
	if (sqlite3_bind_parameter_count(stmt) > nparams)
	{
		AdapterSetError(err, "42P02", false,
						psprintf("there is no parameter $%d", sqlite3_bind_parameter_count(stmt)),
						NULL, NULL);
		sqlite_put_back(*entry, stmt);
		return NULL;
	}
	return stmt;
}

/*
 * sqlite_run binds 'params' to 'stmt' and steps it to the end, streaming
 * rows to 'sink'; 'reset' first resets a statement that ran before.
 * Returns the last step's result code and the rows in *nrows.  Binding may
 * raise too (a value SQLite cannot take): a cached statement that raised
 * leaves the cache, since it may be stopped mid-step.
 */
static int
sqlite_run(sqlite3_stmt *stmt, SqliteCachedStmt **entry, bool reset,
		   const CdParam *params, CdRowSink *sink, int64 *nrows)
{
	int			nbound = sqlite3_bind_parameter_count(stmt);
	int			rc = SQLITE_OK;

	PG_TRY();
	{
		if (reset)
			rc = sqlite3_reset(stmt);
		for (int i = 0; rc == SQLITE_OK && i < nbound; i++)
			rc = SqliteBindParam(stmt, i + 1, &params[i]);
		if (rc == SQLITE_OK)
			rc = sqlite_step_all(stmt, sink, nrows);
	}
	PG_CATCH();
	{
		if (*entry != NULL)
			stmt = SqliteStmtCacheDetach(*entry);
		sqlite3_finalize(stmt);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return rc;
}

/*
 * sqlite_failed reads the error of a statement that did not end as
 * SQLITE_DONE and finalizes it (a cached one leaves the cache).
 */
static bool
sqlite_failed(SqliteConn *conn, int rc, sqlite3_stmt *stmt, SqliteCachedStmt *entry,
			  CdRemoteError *err)
{
	if (entry != NULL)
		stmt = SqliteStmtCacheDetach(entry);
	return SqliteFail(conn, rc, stmt, err);
}

/*
 * sqlite_exec runs the setup commands, then 'sql' with its parameters,
 * streaming rows to 'sink'.  See adapter.h for the contract, and
 * sqlite_start for what is checked.
 */
static bool
sqlite_exec(void *handle, int nsetup, const char *const *setup,
			const char *sql, int nparams, const CdParam *params, int flags,
			CdRowSink *sink, int64 *rows_affected, CdRemoteError *err)
{
	SqliteConn *conn = (SqliteConn *) handle;
	sqlite3_stmt *stmt;
	SqliteCachedStmt *entry;
	bool		nothing;
	int64		nrows = 0;
	sqlite3_int64 total_before;
	int			rc;

	if (rows_affected)
		*rows_affected = 0;
	stmt = sqlite_start(conn, nsetup, setup, sql, nparams, flags, &entry, &nothing, err);
	if (stmt == NULL)
		return nothing;
	total_before = sqlite3_total_changes64(conn->db);
	rc = sqlite_run(stmt, &entry, false, params, sink, &nrows);
	if (rc != SQLITE_DONE)
		return sqlite_failed(conn, rc, stmt, entry, err);

	/*
	 * A statement with a result (SELECT, PRAGMA, INSERT ... RETURNING)
	 * counts its rows.  Otherwise, sqlite3_changes64 keeps the count of the
	 * last INSERT, UPDATE or DELETE across other statements: DDL must not
	 * report that stale count.
	 */
	if (rows_affected)
	{
		if (sqlite3_column_count(stmt) > 0 || sqlite3_stmt_readonly(stmt))
			*rows_affected = nrows;
		else if (sqlite3_total_changes64(conn->db) == total_before)
			*rows_affected = 0;
		else
			*rows_affected = sqlite3_changes64(conn->db);
	}

	sqlite_put_back(entry, stmt);
	return true;
}

/*
 * sqlite_exec_rows runs the setup commands, then the one-row statement
 * 'sql' once for each of 'nrows' rows of 'ncols' values ('params', row
 * after row): one prepared statement, bound and stepped again for every
 * row, which SQLite does faster than it parses and plans one statement of
 * many rows' placeholders.  The rows affected are those of every run.  A
 * failure stops at its row (the caller's transaction then fails).  See
 * adapter.h.
 */
static bool
sqlite_exec_rows(void *handle, int nsetup, const char *const *setup, const char *sql,
				 int nrows, int ncols, const CdParam *params, int flags,
				 int64 *rows_affected, CdRemoteError *err)
{
	SqliteConn *conn = (SqliteConn *) handle;
	sqlite3_stmt *stmt;
	SqliteCachedStmt *entry;
	bool		nothing;

	*rows_affected = 0;
	stmt = sqlite_start(conn, nsetup, setup, sql, ncols, flags, &entry, &nothing, err);
	if (stmt == NULL)
		return nothing;
	for (int row = 0; row < nrows; row++)
	{
		int64		returned = 0;
		int			rc = sqlite_run(stmt, &entry, row > 0, &params[row * ncols], NULL,
									&returned);

		if (rc != SQLITE_DONE)
			return sqlite_failed(conn, rc, stmt, entry, err);
		*rows_affected += sqlite3_column_count(stmt) > 0 ? returned :
			sqlite3_changes64(conn->db);
	}
	sqlite_put_back(entry, stmt);
	return true;
}

/*
 * What add_shard creates on an SQLite shard: the tombstone table and an
 * index on its key.  Writers are serialized by SQLite's write lock, which
 * a write transaction takes at BEGIN IMMEDIATE.
 */
#define CD_SQLITE_MARKER_DDL \
	"CREATE TABLE IF NOT EXISTS collegedb_decisions (" \
	"xact TEXT PRIMARY KEY, created INTEGER NOT NULL)"

static const char *const sqlite_shard_ddl[] = {
	"CREATE TABLE IF NOT EXISTS collegedb_tombstones ("
	"table_name TEXT NOT NULL, "
	"shard_key TEXT NOT NULL, "
	"moved_to TEXT NOT NULL, "
	"move_id INTEGER, "
	"moved_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')), "
	"PRIMARY KEY (table_name, shard_key))",
	"CREATE INDEX IF NOT EXISTS collegedb_tombstones_key ON collegedb_tombstones (shard_key)",
	CD_SQLITE_MARKER_DDL,
	NULL
};

/*
 * The shard-side tables of topology groups (see adapter.h); TEXT compares
 * in byte order (BINARY).
 */
static const char *const sqlite_topology_ddl[] = {
	"CREATE TABLE IF NOT EXISTS collegedb_topology ("
	"group_name TEXT NOT NULL PRIMARY KEY, version INTEGER NOT NULL, snapshot TEXT)",
	"CREATE TABLE IF NOT EXISTS collegedb_topology_state ("
	"group_name TEXT NOT NULL, channel TEXT NOT NULL, version INTEGER NOT NULL, value TEXT, "
	"PRIMARY KEY (group_name, channel))",
	NULL
};

/*
 * SQLite cannot prepare a transaction: it takes part in two-phase commit
 * as the last participant, committing once every other participant is
 * prepared, with a marker row of the front transaction in its own
 * transaction, so that its outcome is the decision (remote/twophase.c).
 */
static const CdMarkerSql sqlite_marker = {
	.ddl = CD_SQLITE_MARKER_DDL,
	.mark = "INSERT INTO collegedb_decisions (xact, created) VALUES ($1, $2)",
	.list = "SELECT xact, created FROM collegedb_decisions",
	.forget = "DELETE FROM collegedb_decisions WHERE xact = $1",
};

/*
 * SQLite stores integers in 64 bits and converts an overflowing result to
 * a float, keeps numeric values as floats, dates as text and compares
 * text by its column's collation: integer and float comparisons are
 * exact, int2/int4 arithmetic is exact once its result is range-checked
 * (abs() of the smallest integer is SQLite's "integer overflow" error),
 * and so is int8 arithmetic once its result is checked to be an integer
 * still (an overflowing one is a float),
 * text compares byte for byte under COLLATE BINARY.  Its LIKE folds ASCII
 * case: never sent.
 */
static const CdExprRules sqlite_expr_rules = {
	.compare = CD_FAMILY_BIT(CD_FAMILY_BOOL) | CD_FAMILY_BIT(CD_FAMILY_INT2) |
	CD_FAMILY_BIT(CD_FAMILY_INT4) | CD_FAMILY_BIT(CD_FAMILY_INT8) |
	CD_FAMILY_BIT(CD_FAMILY_FLOAT8),
	.int_checked = "(CASE WHEN %1$s BETWEEN %2$s AND %3$s THEN %1$s "
	"ELSE abs(-9223372036854775808 + 0 * %1$s) END)",
	.int8_checked = "(CASE WHEN typeof(%1$s) = 'integer' THEN %1$s "
	"ELSE abs(-9223372036854775808 + 0 * length(%1$s)) END)",
	.int_widening = CD_FAMILY_BIT(CD_FAMILY_INT8) | CD_FAMILY_BIT(CD_FAMILY_FLOAT8),
	.text_equal = "%1$s = %2$s COLLATE BINARY",
	.text_compare = "%1$s %3$s %2$s COLLATE BINARY",
	.agg_bool_and = "min(%s)",
	.agg_bool_or = "max(%s)",
	.text_order_by = "%s COLLATE BINARY",
};

const CdAdapter CdSqliteAdapter = {
	.name = "sqlite",
	.display_name = "SQLite",
	.a_name = "an SQLite",
	.caps = {
		.transactions = true,
		.savepoints = true,
		.returning = true,
		.last_participant = true,
		.server_files = true,
	},

	.connect = SqliteConnect,
	.exec = sqlite_exec,
	.exec_rows = sqlite_exec_rows,
	.close = SqliteClose,

	.lexer = &sqlite_lexer_rules,
	.max_params = CD_SQLITE_MAX_VARIABLES,
	.max_key_length = 0,

	.option_ok = SqliteOptionOk,
	.check_options = SqliteCheckOptions,
	.valid_options = SqliteValidOptions,

	.sql_begin = "BEGIN",
	CD_SQL_STANDARD_TRANSACTION_CONTROL,

	.quote_ident = AdapterQuoteStandardIdent,
	.shard_ddl = sqlite_shard_ddl,
	.sql_begin_write = "BEGIN IMMEDIATE",
	.guard_query = "SELECT moved_to FROM collegedb_tombstones WHERE shard_key = $1 LIMIT 1",
	.guard_keys_sql = "SELECT moved_to FROM collegedb_tombstones WHERE shard_key IN (%s) LIMIT 1",
	.lock_key_sql = "SELECT count(*) FROM collegedb_tombstones WHERE shard_key = $1",
	.truncate_fmt = "DELETE FROM %s",
	.insert_do_nothing = " ON CONFLICT DO NOTHING",
	/* types by SQLite's affinity rules, the forms the dialect reads back first */
	.import_sql = "SELECT m.name, p.name, CASE "
	"WHEN upper(p.type) LIKE '%INT%' THEN 'bigint' "
	"WHEN upper(p.type) LIKE '%CHAR%' OR upper(p.type) LIKE '%CLOB%' "
	"OR upper(p.type) LIKE '%TEXT%' THEN 'text' "
	"WHEN upper(p.type) LIKE '%BLOB%' THEN 'bytea' "
	"WHEN p.type = '' THEN 'text' "
	"WHEN upper(p.type) LIKE '%REAL%' OR upper(p.type) LIKE '%FLOA%' "
	"OR upper(p.type) LIKE '%DOUB%' THEN 'double precision' "
	"WHEN upper(p.type) LIKE 'BOOL%' THEN 'boolean' "
	"WHEN upper(p.type) LIKE 'DATETIME%' OR upper(p.type) LIKE 'TIMESTAMP%' THEN 'timestamp' "
	"WHEN upper(p.type) LIKE 'DATE%' THEN 'date' "
	"WHEN upper(p.type) LIKE 'DECIMAL(%' OR upper(p.type) LIKE 'NUMERIC(%' "
	"THEN 'numeric' || substr(p.type, instr(p.type, '(')) "
	"ELSE 'numeric' END, "
	"p.pk = 1, p.\"notnull\", NULL "
	"FROM sqlite_master m, pragma_table_info(m.name) p "
	"WHERE m.type IN ('table', 'view') AND $1 IN ('main', 'public', '') "
	"AND m.name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND m.name NOT LIKE 'collegedb\\_%' ESCAPE '\\' "
	"ORDER BY m.name, p.cid",
	.row_identity = "rowid",
	.row_identity_int = true,
	.row_identity_match = "rowid = %1$s AND %2$s IS NULL",
	.lock_keys_sql = "SELECT count(*) FROM collegedb_tombstones WHERE shard_key IN (%s)",
	.lock_keys_item = "$%d",
	.size_sql = "SELECT page_count * page_size AS size FROM pragma_page_count(), pragma_page_size()",
	/*
	 * ANALYZE's sqlite_stat1: a table's row count leads each of its rows;
	 * without it the default (a count(*) would read the whole table).  A
	 * table of another attached schema is not looked up.
	 */
	.row_estimate_sql = "SELECT max(CAST(stat AS INTEGER)) AS estimate, NULL AS pages "
	"FROM sqlite_stat1 WHERE tbl = $1 AND $2 IS NULL",
	.row_estimate_probe = "SELECT count(*) FROM sqlite_master "
	"WHERE type = 'table' AND name = 'sqlite_stat1'",
	.key_match = "%1$s = $%2$d COLLATE BINARY",
	.key_in_match = "%1$s COLLATE BINARY IN (%2$s)",
	.topology_ddl = sqlite_topology_ddl,
	.topology_publish = AdapterUpsertTopology,
	.topology_put_state = AdapterUpsertTopologyState,
	.marker_sql = &sqlite_marker,
	.expr_rules = &sqlite_expr_rules,
};
