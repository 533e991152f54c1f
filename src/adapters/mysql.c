/*-------------------------------------------------------------------------
 *
 * mysql.c
 *	  The MySQL/MariaDB adapter: shards reached over libmariadb.  Its
 *	  operations table, and running a statement.
 *
 * This file runs one statement at a time with its $n parameters
 * interpolated client-side as literals (one round trip, as most MySQL
 * drivers do; see mysql_values.c), streams the result's rows to a row sink
 * as they arrive (never the whole result in memory), and classifies
 * statements by MySQL's lexical rules, executable comments included.  The
 * adapter's other phases have files of their own: connecting, waiting and
 * cancelling (mysql_connect.c), errors (mysql_errors.c), options
 * (mysql_options.c) and values (mysql_values.c).
 *
 * It does not cache connections, decide on retries, track transactions or
 * add error context: the remote layer (src/remote/) does.
 *
 * mysql.h clashes with PostgreSQL's headers (see mysql_internal.h), so only
 * the MySQL adapter's files include it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "utils/memutils.h"

#include "adapters/dialects.h"
#include "adapters/lexer.h"
#include "adapters/mysql_internal.h"

/* parameters one statement may have (MySQL's limit for prepared statements) */
#define CD_MYSQL_MAX_PARAMS 65535

/* the longest key collegedb_tombstones.shard_key holds, in characters */
#define CD_MYSQL_MAX_KEY_LENGTH 512

static const char *const mysql_read_words[] = {
	"select", "values", "table", "show", "explain", "describe", "desc", "with", NULL
};

/*
 * "lock": LOCK IN SHARE MODE; "into": SELECT ... INTO OUTFILE, DUMPFILE
 * or variables, and REPLACE INTO.  Not "replace" itself: REPLACE() is a
 * string function, and a REPLACE statement never starts with a read word.
 */
static const char *const mysql_write_words[] = {
	"insert", "update", "delete", "into", "lock", NULL
};
static const char *const mysql_transaction_words[] = {
	"begin", "start", "commit", "rollback", "savepoint", "release", "xa", NULL
};

/*
 * MySQL's lexical rules: executable comments are code (the server runs
 * /_*!50000 DELETE ... *_/), backslashes escape in literals unless the
 * session has NO_BACKSLASH_ESCAPES (collegedb's sessions do not, but a
 * routed statement can turn it on).
 */
#define MYSQL_LEXER_RULES(backslash) { \
	.backslash_escapes = (backslash), \
	.backtick_idents = true, \
	.hash_comments = true, \
	.dash_comment_space = true, \
	.executable_comments = true, \
	.read_words = mysql_read_words, \
	.write_words = mysql_write_words, \
	.transaction_words = mysql_transaction_words, \
}

static const CdLexerRules mysql_lexer_rules = MYSQL_LEXER_RULES(true);
static const CdLexerRules mysql_lexer_rules_no_backslash = MYSQL_LEXER_RULES(false);

/*
 * MysqlLexerRules returns the lexical rules a session follows now.
 */
static const CdLexerRules *
MysqlLexerRules(MYSQL *m)
{
	return (m->server_status & SERVER_STATUS_NO_BACKSLASH_ESCAPES) ?
		&mysql_lexer_rules_no_backslash : &mysql_lexer_rules;
}

/*
 * Statements that stay text even with parameters, by their first word:
 * what commits implicitly (mysql_implicit_commit, below), session and
 * transaction control, XA, and statements that prepare or run others or
 * return several results.
 */
static const char *const mysql_text_only[] = {
	"set", "xa", "call", "prepare", "execute", "deallocate", "use", "handler",
	"do", "kill", "reset", "purge", "change", "signal", "resignal", NULL
};

/*
 * Statements after which MySQL has committed the open transaction
 * ("Statements That Cause an Implicit Commit"): they cannot take part in a
 * remote transaction.
 */
static const char *const mysql_implicit_commit[] = {
	"alter", "create", "drop", "rename", "truncate", "grant", "revoke",
	"lock", "unlock", "analyze", "optimize", "repair", "check", "cache",
	"flush", "load", "install", "uninstall", "start", "begin", NULL
};

/*
 * MysqlPreparable says whether a statement of this shape is prepared on
 * the server (when it has parameters).
 */
static bool
MysqlPreparable(const CdStatementShape *shape)
{
	if (shape->transaction_control || shape->first_word[0] == '\0')
		return false;
	for (const char *const *w = mysql_text_only; *w; w++)
		if (strcmp(shape->first_word, *w) == 0)
			return false;
	for (const char *const *w = mysql_implicit_commit; *w; w++)
		if (strcmp(shape->first_word, *w) == 0)
			return false;
	return true;
}

/*
 * MysqlSend builds the statement, with its parameters as literals, and
 * starts the first command (a setup command, or the statement) without
 * waiting.  The placeholders are found by the lexical rules the session
 * follows now: a routed statement may have turned NO_BACKSLASH_ESCAPES on,
 * and a literal must end where the server thinks it does.  By those rules,
 * a statement the remote layer runs as a read must still be one.  A bad
 * parameter, or more than MySQL takes, fails before anything is sent.  See
 * adapter.h.
 */
static bool
MysqlSend(void *handle, int nsetup, const char *const *setup,
		  const char *sql, int nparams, const CdParam *params, int flags,
		  CdRemoteError *err)
{
	CdMysqlConn *conn = (CdMysqlConn *) handle;
	bool		no_backslash;
	CdMysqlPrepared *entry = NULL;
	bool		read_only;

	if (conn->midway || conn->res != NULL)
	{
		AdapterSetError(err, "08006", true,
						"the MySQL connection is in the middle of an earlier statement",
						NULL, NULL);
		return false;
	}
	if (AdapterTooManyParams(nparams, CD_MYSQL_MAX_PARAMS, "a MySQL", err))
		return false;

	MemoryContextReset(conn->row_context);
	MemoryContextResetOnly(conn->context);
	conn->entry = NULL;
	conn->statement = NULL;
	conn->statement_len = 0;
	no_backslash = (conn->mysql->server_status & SERVER_STATUS_NO_BACKSLASH_ESCAPES) != 0;
	if (nparams > 0)
		entry = MysqlPreparedFind(conn, sql, no_backslash);

	if (entry != NULL && entry->stmt != NULL)
		read_only = entry->read_only;	/* prepared: no literals needed */
	else
	{
		const CdLexerRules *rules = MysqlLexerRules(conn->mysql);
		CdMysqlParamState st;
		CdStatementShape shape;
		StringInfoData buf;
		MemoryContext old = MemoryContextSwitchTo(conn->context);

		MysqlParamStateInit(&st, conn->mysql, nparams, params);
		initStringInfo(&buf);
		shape = LexerScan(sql, rules, &buf, MysqlEmitParam, &st);
		MemoryContextSwitchTo(old);
		if (st.failed)
		{
			AdapterRefuse(err, st.sqlstate, st.message, NULL);
			return false;
		}
		read_only = shape.read_only;
		conn->statement = buf.data;
		conn->statement_len = buf.len;
		if (entry == NULL && nparams > 0 && MysqlPreparable(&shape))
			entry = MysqlPreparedAdd(conn, sql, no_backslash, read_only, rules);
		if (entry != NULL && entry->refused)
			entry = NULL;
	}
	if ((flags & CD_EXEC_READ) && !read_only)
	{
		AdapterRefuse(err, "25006",
					  "statement writes, but it was sent to the MySQL shard as a read",
					  "The session's NO_BACKSLASH_ESCAPES mode makes the statement's literals end elsewhere, and then it may write.");
		return false;
	}
	if (entry != NULL && !MysqlPreparedBind(conn, entry, nparams, params, err))
		return false;

	conn->phase = CD_MYSQL_QUERY;
	conn->started = false;
	conn->index = 0;
	conn->nsetup = nsetup;
	conn->setup = setup;
	conn->rows = 0;
	conn->ncols = 0;
	conn->midway = true;
	return true;
}

/*
 * MysqlFetch streams the rows of conn->res to 'sink' (NULL: drops them)
 * as far as it can without blocking: one round trip per command (the
 * protocol, without multi-statements, which stay off so that a statement
 * is exactly one command), then the rows as they arrive, never the whole
 * result in client memory.  Returns CD_POLL_DONE once the result ended
 * (and is freed), the wait it needs, or CD_POLL_FAILED.
 */
static CdPollResult
MysqlFetch(CdMysqlConn *conn, CdRowSink *sink, CdRemoteError *err)
{
	for (;;)
	{
		MYSQL_ROW	row = NULL;
		int			status;

		if (!conn->started)
			status = mysql_fetch_row_start(&row, conn->res);
		else
			status = mysql_fetch_row_cont(&row, conn->res, conn->wait);
		if ((conn->started = status != 0))
		{
			conn->wait = status;
			return MysqlWaitResult(status);
		}
		if (row == NULL)
		{
			/* the end, or an error packet: either way nothing is left to read */
			bool		failed = mysql_errno(conn->mysql) != 0;

			if (failed)
				MysqlSetError(err, conn->mysql, NULL);
			mysql_free_result(conn->res);
			conn->res = NULL;
			return failed ? CD_POLL_FAILED : CD_POLL_DONE;
		}
		conn->rows++;
		if (sink != NULL)
			MysqlDeliverRow(conn, row, mysql_fetch_lengths(conn->res), sink);
	}
}

/*
 * MysqlPoll advances the statement as far as it can without blocking:
 * the setup commands and the statement, then its rows, streamed (see
 * MysqlFetch); a CALL's further results are read and dropped.  Resuming a
 * suspended call when its socket is not ready yet is harmless: the library
 * suspends again.  See adapter.h.
 */
static CdPollResult
MysqlPoll(void *handle, CdRowSink *sink, int64 *rows_affected, CdRemoteError *err)
{
	CdMysqlConn *conn = (CdMysqlConn *) handle;
	MYSQL	   *m = conn->mysql;

	for (;;)
	{
		int			ret = 1;
		int			status;
		CdPollResult r;

		switch (conn->phase)
		{
			case CD_MYSQL_QUERY:
				if (!conn->started && conn->index == conn->nsetup && conn->entry != NULL)
				{
					conn->phase = conn->entry->stmt != NULL ?
						CD_MYSQL_STMT_EXECUTE : CD_MYSQL_STMT_PREPARE;
					continue;
				}
				if (!conn->started)
				{
					const char *q = conn->index < conn->nsetup ? conn->setup[conn->index] : conn->statement;
					size_t		len = conn->index < conn->nsetup ? strlen(q) : conn->statement_len;

					status = mysql_real_query_start(&ret, m, q, len);
				}
				else
					status = mysql_real_query_cont(&ret, m, conn->wait);
				if ((conn->started = status != 0))
				{
					conn->wait = status;
					return MysqlWaitResult(status);
				}
				if (ret != 0)
				{
					MysqlSetError(err, m, NULL);
					conn->midway = false;
					return CD_POLL_FAILED;
				}
				if (conn->index < conn->nsetup)
				{
					/* transaction control: no result set */
					conn->index++;
					continue;
				}
				if (mysql_field_count(m) == 0)
				{
					conn->rows = (int64) mysql_affected_rows(m);
					conn->phase = CD_MYSQL_NEXT;
					continue;
				}
				/* no I/O: the row description came with the answer */
				conn->res = mysql_use_result(m);
				if (conn->res == NULL)
				{
					MysqlSetError(err, m, NULL);
					err->connection_lost = true;
					return CD_POLL_FAILED;
				}
				MysqlColumns(conn, mysql_fetch_fields(conn->res),
							 (int) mysql_num_fields(conn->res), sink);
				conn->phase = CD_MYSQL_FETCH;
				continue;

			case CD_MYSQL_FETCH:
			case CD_MYSQL_FETCH_EXTRA:
				r = MysqlFetch(conn, conn->phase == CD_MYSQL_FETCH ? sink : NULL, err);
				if (r != CD_POLL_DONE)
				{
					if (r == CD_POLL_FAILED)
						conn->midway = false;
					return r;
				}
				conn->phase = CD_MYSQL_NEXT;
				continue;

			case CD_MYSQL_NEXT:
				if (!conn->started)
				{
					if (!mysql_more_results(m))
					{
						conn->phase = CD_MYSQL_DONE;
						continue;
					}
					status = mysql_next_result_start(&ret, m);
				}
				else
					status = mysql_next_result_cont(&ret, m, conn->wait);
				if ((conn->started = status != 0))
				{
					conn->wait = status;
					return MysqlWaitResult(status);
				}
				if (ret > 0)
				{
					MysqlSetError(err, m, NULL);
					conn->midway = false;
					return CD_POLL_FAILED;
				}
				if (ret == 0 && mysql_field_count(m) > 0)
				{
					conn->res = mysql_use_result(m);
					if (conn->res == NULL)
					{
						MysqlSetError(err, m, NULL);
						err->connection_lost = true;
						return CD_POLL_FAILED;
					}
					conn->phase = CD_MYSQL_FETCH_EXTRA;
				}
				else if (ret < 0)
					conn->phase = CD_MYSQL_DONE;
				continue;

			case CD_MYSQL_STMT_PREPARE:
			case CD_MYSQL_STMT_EXECUTE:
			case CD_MYSQL_STMT_FETCH:
				r = MysqlPreparedPoll(conn, sink, err);
				if (r != CD_POLL_DONE)
					return r;
				continue;

			case CD_MYSQL_DONE:
				conn->midway = false;
				*rows_affected = conn->rows;
				return CD_POLL_DONE;
		}
	}
}

static int
MysqlSocket(void *handle)
{
	return mysql_get_socket(((CdMysqlConn *) handle)->mysql);
}

static void
MysqlCancel(void *handle, int timeout_ms)
{
	MysqlCancelQuery((CdMysqlConn *) handle, timeout_ms);
}

/*
 * MysqlExec runs a statement to completion: MysqlSend, then MysqlPoll
 * while waiting (interruptibly; an interrupt kills the statement on the
 * server before the error goes on).  The waits' deadline is
 * AdapterExecDeadline's (cleanups, COMMIT); when it passes the connection
 * is lost.  See adapter.h.
 */
static bool
MysqlExec(void *handle, int nsetup, const char *const *setup,
		  const char *sql, int nparams, const CdParam *params, int flags,
		  CdRowSink *sink, int64 *rows_affected, CdRemoteError *err)
{
	CdMysqlConn *conn = (CdMysqlConn *) handle;
	bool		interruptible;
	TimestampTz deadline = AdapterExecDeadline(flags, &interruptible);
	CdPollResult r;

	*rows_affected = 0;
	if (!MysqlSend(handle, nsetup, setup, sql, nparams, params, flags, err))
		return false;
	while ((r = MysqlPoll(handle, sink, rows_affected, err)) == CD_POLL_READ ||
		   r == CD_POLL_WRITE)
	{
		conn->wait = MysqlWait(conn->mysql, conn->wait, conn, interruptible, deadline);
		if (conn->wait < 0)
		{
			AdapterSetGaveUp(err, flags);
			return false;
		}
	}
	return r == CD_POLL_DONE;
}

/* ----------------------------------------------------------------
 *		dialect text
 * ----------------------------------------------------------------
 */

/*
 * MysqlQuoteIdent quotes an identifier with backticks, doubling embedded
 * ones.
 */
static char *
MysqlQuoteIdent(const char *ident)
{
	return AdapterQuoteIdent(ident, '`');
}

/*
 * What add_shard creates on a MySQL shard: the tombstone table, keyed
 * (and indexed) so that a writer's locking read of a key's tombstone and a
 * mover's insert of it conflict in InnoDB.
 */
static const char *const mysql_shard_ddl[] = {
	"CREATE TABLE IF NOT EXISTS collegedb_tombstones ("
	"table_name VARCHAR(255) NOT NULL, "
	"shard_key VARCHAR(" CppAsString2(CD_MYSQL_MAX_KEY_LENGTH) ") NOT NULL, "
	"moved_to VARCHAR(255) NOT NULL, "
	"move_id BIGINT NULL, "
	"moved_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), "
	"PRIMARY KEY (shard_key, table_name)"
	") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
	NULL
};

/*
 * The shard-side tables of topology groups (see adapter.h).  utf8mb4_bin
 * pads with spaces, so the front refuses group and channel names that end
 * in one.
 */
static const char *const mysql_topology_ddl[] = {
	"CREATE TABLE IF NOT EXISTS collegedb_topology ("
	"group_name VARCHAR(255) NOT NULL PRIMARY KEY, version BIGINT NOT NULL, snapshot JSON NULL"
	") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
	"CREATE TABLE IF NOT EXISTS collegedb_topology_state ("
	"group_name VARCHAR(255) NOT NULL, channel VARCHAR(255) NOT NULL, "
	"version BIGINT NOT NULL, value JSON NULL, PRIMARY KEY (group_name, channel)"
	") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
	NULL
};

/*
 * Two-phase commit on MySQL and MariaDB is XA, which can only prepare a
 * transaction that began with XA START, and whose active transaction ends
 * only with XA END and then XA PREPARE, XA COMMIT ... ONE PHASE or XA
 * ROLLBACK.  Savepoints work inside XA transactions; statements that
 * commit implicitly are refused inside any remote transaction already (see
 * mysql_implicit_commit).  XA RECOVER lists the whole server's prepared
 * transactions; a prepared transaction whose session is still connected
 * can only be decided by that session (others get XAER_NOTA, XAE04).
 */
static const char *const mysql_xa_commit_one_phase[] = {"XA END '%s'", "XA COMMIT '%s' ONE PHASE", NULL};
static const char *const mysql_xa_rollback[] = {"XA END '%s'", "XA ROLLBACK '%s'", NULL};
static const char *const mysql_xa_prepare[] = {"XA END '%s'", "XA PREPARE '%s'", NULL};

static const CdTwoPhaseSql mysql_two_phase = {
	.begin = "XA START '%s'",
	.commit_one_phase = mysql_xa_commit_one_phase,
	.rollback = mysql_xa_rollback,
	.prepare = mysql_xa_prepare,
	.commit_prepared = "XA COMMIT '%s'",
	.rollback_prepared = "XA ROLLBACK '%s'",
	.list_prepared = "XA RECOVER",
	.missing_sqlstate = "XAE04",
};

static const char *const mysql_aliases[] = {"mariadb", NULL};

/*
 * MySQL compares and adds DECIMAL exactly, raises on BIGINT overflow
 * (22003), and compares DATE and DATETIME as PostgreSQL does (timestamptz
 * is stored in UTC, and the session's time_zone is UTC).  Its integer
 * arithmetic is 64-bit, so an int2/int4 result is range-checked (a value
 * out of range times the largest BIGINT overflows); in strict mode a store
 * checks the column's range.  Its default collations ignore case and
 * trailing spaces: text compares as binary strings, LIKE under
 * utf8mb4_bin.
 */
static const CdExprRules mysql_expr_rules = {
	.compare = CD_FAMILY_BIT(CD_FAMILY_BOOL) | CD_FAMILY_BIT(CD_FAMILY_INT2) |
	CD_FAMILY_BIT(CD_FAMILY_INT4) | CD_FAMILY_BIT(CD_FAMILY_INT8) |
	CD_FAMILY_BIT(CD_FAMILY_NUMERIC) | CD_FAMILY_BIT(CD_FAMILY_FLOAT8) |
	CD_FAMILY_BIT(CD_FAMILY_DATE) | CD_FAMILY_BIT(CD_FAMILY_TIMESTAMP) |
	CD_FAMILY_BIT(CD_FAMILY_TIMESTAMPTZ),
	.arith = CD_FAMILY_BIT(CD_FAMILY_INT8) | CD_FAMILY_BIT(CD_FAMILY_NUMERIC),
	.int_checked = "(CASE WHEN %1$s BETWEEN %2$s AND %3$s THEN %1$s "
	"ELSE %1$s * 9223372036854775807 END)",
	.int_widening = CD_FAMILY_BIT(CD_FAMILY_INT8) | CD_FAMILY_BIT(CD_FAMILY_NUMERIC) |
	CD_FAMILY_BIT(CD_FAMILY_FLOAT8),
	.store_checked = true,
	.text_equal = "(%1$s = %2$s AND CAST(%1$s AS BINARY) = CAST(%2$s AS BINARY))",
	.text_compare = "CAST(%1$s AS BINARY) %3$s CAST(%2$s AS BINARY)",
	.text_like = "%1$s %3$s %2$s COLLATE utf8mb4_bin",
	.agg_bool_and = "MIN(%s)",
	.agg_bool_or = "MAX(%s)",
	.text_order_by = "CAST(%s AS BINARY)",
};

const CdAdapter CdMysqlAdapter = {
	.name = "mysql",
	.aliases = mysql_aliases,
	.display_name = "MySQL",
	.a_name = "a MySQL",
	.caps = {
		.transactions = true,
		.savepoints = true,
		.two_phase = true,
		.schemas = true,
		.login = true,
	},

	.connect = MysqlConnect,
	.exec = MysqlExec,
	.send = MysqlSend,
	.poll = MysqlPoll,
	.socket = MysqlSocket,
	.cancel = MysqlCancel,
	.close = MysqlClose,
	.session_id = MysqlSessionId,

	.option_ok = MysqlOptionOk,
	.check_options = MysqlCheckOptions,
	.valid_options = MysqlValidOptions,

	/* executable comments are code; backslashes escape, as in our sessions */
	.lexer = &mysql_lexer_rules,
	.max_params = CD_MYSQL_MAX_PARAMS,
	.max_key_length = CD_MYSQL_MAX_KEY_LENGTH,

	.sql_begin = "START TRANSACTION",
	CD_SQL_STANDARD_TRANSACTION_CONTROL,
	.implicit_commit = mysql_implicit_commit,

	.quote_ident = MysqlQuoteIdent,
	.shard_ddl = mysql_shard_ddl,
	.sql_begin_write = "START TRANSACTION",
	.guard_query = "SELECT moved_to FROM collegedb_tombstones WHERE shard_key = $1 LIMIT 1 LOCK IN SHARE MODE",
	/*
	 * A locking read of an absent row takes only a gap lock, and InnoDB's
	 * gap locks never conflict: the mover writes a placeholder tombstone
	 * instead (replaced by the real ones in the same transaction), whose
	 * insert waits for writers holding the guard's shared lock and makes
	 * later guards wait for the move's commit.
	 */
	.guard_keys_sql = "SELECT moved_to FROM collegedb_tombstones WHERE shard_key IN (%s) LIMIT 1 LOCK IN SHARE MODE",
	.lock_key_sql = "INSERT INTO collegedb_tombstones (table_name, shard_key, moved_to) "
	"VALUES ('', $1, '') ON DUPLICATE KEY UPDATE moved_to = moved_to",
	/*
	 * No lock_keys_sql: a batch's placeholder inserts, key after key, and
	 * writers' guards (shared next-key locks on those placeholders and gap
	 * locks between them) deadlock, and InnoDB picks the writer as often as
	 * the mover; keys leave a MySQL shard one by one.
	 */
	/*
	 * XA PREPARE releases the guard's shared and gap locks; the writer's
	 * exclusive locks on the rows it changed stay, and a locking read waits
	 * for them and then reads the committed rows (not the transaction's
	 * snapshot), so the copy includes the prepared writer's change.
	 */
	.copy_lock_clause = " FOR UPDATE",
	.truncate_fmt = "DELETE FROM %s",	/* TRUNCATE commits implicitly */
	.import_sql = "SELECT c.TABLE_NAME, c.COLUMN_NAME, CASE "
	"WHEN c.COLUMN_TYPE LIKE 'tinyint(1)%' THEN 'boolean' "
	"WHEN c.DATA_TYPE IN ('tinyint', 'smallint') THEN 'smallint' "
	"WHEN c.DATA_TYPE IN ('mediumint', 'int') AND c.COLUMN_TYPE NOT LIKE '%unsigned%' THEN 'integer' "
	"WHEN c.DATA_TYPE IN ('int', 'bigint') AND c.COLUMN_TYPE NOT LIKE '%unsigned%' THEN 'bigint' "
	"WHEN c.DATA_TYPE IN ('mediumint', 'int') THEN 'bigint' "
	"WHEN c.DATA_TYPE = 'bigint' THEN 'numeric(20)' "
	"WHEN c.DATA_TYPE = 'decimal' THEN CONCAT('numeric(', c.NUMERIC_PRECISION, ',', c.NUMERIC_SCALE, ')') "
	"WHEN c.DATA_TYPE = 'float' THEN 'real' "
	"WHEN c.DATA_TYPE = 'double' THEN 'double precision' "
	"WHEN c.DATA_TYPE = 'varchar' THEN CONCAT('varchar(', c.CHARACTER_MAXIMUM_LENGTH, ')') "
	"WHEN c.DATA_TYPE = 'char' THEN CONCAT('char(', c.CHARACTER_MAXIMUM_LENGTH, ')') "
	"WHEN c.DATA_TYPE IN ('tinytext', 'text', 'mediumtext', 'longtext', 'enum', 'set') THEN 'text' "
	"WHEN c.DATA_TYPE IN ('tinyblob', 'blob', 'mediumblob', 'longblob', 'binary', 'varbinary') THEN 'bytea' "
	"WHEN c.DATA_TYPE = 'date' THEN 'date' "
	"WHEN c.DATA_TYPE IN ('datetime', 'timestamp') THEN 'timestamp' "
	"WHEN c.DATA_TYPE = 'time' THEN 'time' "
	"WHEN c.DATA_TYPE = 'json' THEN 'jsonb' "
	"ELSE 'text' END, "
	"CASE WHEN k.COLUMN_NAME IS NULL THEN 0 ELSE 1 END, CASE WHEN c.IS_NULLABLE = 'NO' THEN 1 ELSE 0 END, "
	"NULLIF(c.TABLE_SCHEMA, DATABASE()) "
	"FROM information_schema.COLUMNS c "
	"LEFT JOIN information_schema.KEY_COLUMN_USAGE k ON k.TABLE_SCHEMA = c.TABLE_SCHEMA "
	"AND k.TABLE_NAME = c.TABLE_NAME AND k.COLUMN_NAME = c.COLUMN_NAME "
	"AND k.CONSTRAINT_NAME = 'PRIMARY' AND k.ORDINAL_POSITION = 1 "
	"WHERE c.TABLE_SCHEMA = $1 AND c.TABLE_NAME NOT LIKE 'collegedb\\_%' "
	"ORDER BY c.TABLE_NAME, c.ORDINAL_POSITION",

	/*
	 * No insert_do_nothing: ON DUPLICATE KEY UPDATE c = c counts a skipped
	 * row as affected under CLIENT_FOUND_ROWS, and INSERT IGNORE turns other
	 * errors (NOT NULL, bad values) into warnings as well.
	 */
	.row_lock_clause = " FOR UPDATE",
	.primary_key_sql = "SELECT column_name FROM information_schema.key_column_usage "
	"WHERE table_schema = COALESCE($2, DATABASE()) AND table_name = $1 "
	"AND constraint_name = 'PRIMARY' ORDER BY ordinal_position",
	.size_sql = "SELECT CAST(COALESCE(SUM(data_length + index_length), 0) AS SIGNED) AS size FROM information_schema.tables WHERE table_schema = DATABASE()",
	/* InnoDB's table_rows is its own estimate; the pages are not PostgreSQL's */
	.row_estimate_sql = "SELECT CAST(table_rows AS SIGNED) AS estimate, NULL AS pages "
	"FROM information_schema.tables "
	"WHERE table_schema = COALESCE($2, DATABASE()) AND table_name = $1",
	.key_match = "%1$s = $%2$d AND CAST(%1$s AS BINARY) = CAST($%2$d AS BINARY)",
	/* a binary string against the keys compares them as binary strings */
	.key_in_match = "(%1$s IN (%2$s) AND CAST(%1$s AS BINARY) IN (%2$s))",
	/* MariaDB's InnoDB lock waits, server-wide; the user needs PROCESS */
	.lock_waits_sql = "SELECT r.trx_mysql_thread_id AS waiter, "
	"b.trx_mysql_thread_id AS blocker "
	"FROM information_schema.INNODB_LOCK_WAITS w "
	"JOIN information_schema.INNODB_TRX r ON r.trx_id = w.requesting_trx_id "
	"JOIN information_schema.INNODB_TRX b ON b.trx_id = w.blocking_trx_id",
	.topology_ddl = mysql_topology_ddl,
	/* assignments run left to right: the value first, compared with the old version */
	.topology_publish = "INSERT INTO collegedb_topology (group_name, version, snapshot) "
	"VALUES ($1, $2, $3) ON DUPLICATE KEY UPDATE "
	"snapshot = IF(VALUES(version) > version, VALUES(snapshot), snapshot), "
	"version = GREATEST(version, VALUES(version))",
	.topology_put_state = "INSERT INTO collegedb_topology_state (group_name, channel, version, value) "
	"VALUES ($1, $2, $3, $4) ON DUPLICATE KEY UPDATE "
	"value = IF(VALUES(version) > version, VALUES(value), value), "
	"version = GREATEST(version, VALUES(version))",
	.two_phase_sql = &mysql_two_phase,
	.expr_rules = &mysql_expr_rules,
};
