/*-------------------------------------------------------------------------
 *
 * sqlite_sandbox.c
 *	  The sandbox in which statements run on SQLite shards.
 *
 * SQLite shards run inside the PostgreSQL backend, as the server's
 * operating-system user, on statements that roles holding only the routing
 * grant write.  Whatever such a statement can make SQLite do, it does in
 * the server process: load a library, read or write a file, hand out or
 * follow a pointer (fts3_tokenizer), rewrite the schema by hand.  So every
 * connection gets, before any routed statement:
 *
 *	- SQLite's own hardening: defensive mode (no writable_schema, no direct
 *	  writes to the schema table, shadow tables or sqlite_dbpage), no
 *	  extension loading, no two-argument fts3_tokenizer, untrusted schemas
 *	  (functions with side effects cannot hide in views, triggers, defaults
 *	  or indexes), no double-quoted-string fallback (a misspelt "column" is
 *	  an error, not a string), no legacy ALTER TABLE;
 *	- tight limits: no attached database at all, bounded lengths, columns,
 *	  expression depth, compound selects, program size, function arguments,
 *	  LIKE patterns, parameters and trigger depth, and no worker threads
 *	  inside the backend;
 *	- an authorizer that allows what a list names and denies the rest:
 *	  reads, writes to ordinary tables, DDL of tables, indexes, views,
 *	  triggers and full-text or R-tree tables, a list of harmless pragmas
 *	  (most readable only) and of built-in functions.  It refuses ATTACH and
 *	  DETACH (VACUUM INTO is an ATTACH), pragmas that change files, memory
 *	  or the schema's integrity, functions that touch memory or files or
 *	  that are not on the list, and, unless collegedb runs its own
 *	  statement, any write to, DDL on, or trigger on an object named
 *	  collegedb_... (the tombstones a guard trusts), and transaction control
 *	  (the shard's transaction follows the front's).  Writes to collegedb's
 *	  tables from a trigger are refused even then: collegedb's statements
 *	  fire no triggers of their own.
 *
 * A refusal makes SQLite fail the statement with SQLITE_AUTH; 'denied'
 * names what was refused, and the adapter reports it as SQLSTATE 42501.
 * The authorizer runs inside SQLite: it never throws and never allocates.
 *
 * sqlite3.h is included by the SQLite adapter's files only.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "adapters/sqlite_sandbox.h"

/* the prefix of collegedb's own objects on shards */
#define RESERVED_PREFIX "collegedb_"

/*
 * The limits of every connection.  SQLite's defaults are sized for
 * trusted applications (a gigabyte per value and per statement, 250,000
 * parameters in Debian's build, triggers 1,000 deep); a shard serves
 * statements from any routing role, inside the server process.
 */
typedef struct SqliteLimit
{
	int			id;
	int			value;
} SqliteLimit;

static const SqliteLimit sqlite_limits[] = {
	{SQLITE_LIMIT_LENGTH, 100 * 1000 * 1000},	/* one value or row, bytes */
	{SQLITE_LIMIT_SQL_LENGTH, 10 * 1000 * 1000},	/* one statement, bytes */
	{SQLITE_LIMIT_COLUMN, 2000},
	{SQLITE_LIMIT_EXPR_DEPTH, 200},
	{SQLITE_LIMIT_COMPOUND_SELECT, 200},
	{SQLITE_LIMIT_VDBE_OP, 5 * 1000 * 1000},
	{SQLITE_LIMIT_FUNCTION_ARG, 100},
	{SQLITE_LIMIT_ATTACHED, 0},
	{SQLITE_LIMIT_LIKE_PATTERN_LENGTH, 10000},
	{SQLITE_LIMIT_VARIABLE_NUMBER, CD_SQLITE_MAX_VARIABLES},
	{SQLITE_LIMIT_TRIGGER_DEPTH, 32},
	{SQLITE_LIMIT_WORKER_THREADS, 0},
};

/* What a pragma may do in the sandbox */
typedef enum SqlitePragmaUse
{
	PRAGMA_READ = 0,			/* only read (no "= value") */
	PRAGMA_ARGUMENT,			/* read, with a name or number argument */
	PRAGMA_SET					/* read or set: harmless per-connection state */
} SqlitePragmaUse;

typedef struct SqlitePragma
{
	const char *name;
	SqlitePragmaUse use;
} SqlitePragma;

/*
 * The pragmas allowed, from SQLite's pragma list.  Not here, so refused:
 * those that name files or directories (database_list, temp_store_directory,
 * data_store_directory), the deprecated and debugging ones, and setting any
 * of the rest: journal_mode, synchronous, locking_mode, writable_schema,
 * ignore_check_constraints, trusted_schema, legacy_alter_table,
 * cache_size, mmap_size, soft/hard_heap_limit, threads, busy_timeout
 * (which would replace the interruptible busy handler), foreign_keys,
 * query_only, secure_delete, auto_vacuum, page_size, encoding,
 * max_page_count, schema_version, ...
 */
static const SqlitePragma sqlite_pragmas[] = {
	{"analysis_limit", PRAGMA_SET},
	{"application_id", PRAGMA_SET},
	{"auto_vacuum", PRAGMA_READ},
	{"automatic_index", PRAGMA_SET},
	{"busy_timeout", PRAGMA_READ},
	{"cache_size", PRAGMA_READ},
	{"cache_spill", PRAGMA_READ},
	{"cell_size_check", PRAGMA_READ},
	{"collation_list", PRAGMA_READ},
	{"compile_options", PRAGMA_READ},
	{"data_version", PRAGMA_READ},
	{"defer_foreign_keys", PRAGMA_SET},
	{"encoding", PRAGMA_READ},
	{"foreign_key_check", PRAGMA_ARGUMENT},
	{"foreign_key_list", PRAGMA_ARGUMENT},
	{"foreign_keys", PRAGMA_READ},
	{"freelist_count", PRAGMA_READ},
	{"function_list", PRAGMA_READ},
	{"hard_heap_limit", PRAGMA_READ},
	{"ignore_check_constraints", PRAGMA_READ},
	{"incremental_vacuum", PRAGMA_ARGUMENT},
	{"index_info", PRAGMA_ARGUMENT},
	{"index_list", PRAGMA_ARGUMENT},
	{"index_xinfo", PRAGMA_ARGUMENT},
	{"integrity_check", PRAGMA_ARGUMENT},
	{"journal_mode", PRAGMA_READ},
	{"journal_size_limit", PRAGMA_READ},
	{"legacy_alter_table", PRAGMA_READ},
	{"locking_mode", PRAGMA_READ},
	{"max_page_count", PRAGMA_READ},
	{"mmap_size", PRAGMA_READ},
	{"module_list", PRAGMA_READ},
	{"optimize", PRAGMA_ARGUMENT},
	{"page_count", PRAGMA_READ},
	{"page_size", PRAGMA_READ},
	{"pragma_list", PRAGMA_READ},
	{"query_only", PRAGMA_READ},
	{"quick_check", PRAGMA_ARGUMENT},
	{"read_uncommitted", PRAGMA_READ},
	{"recursive_triggers", PRAGMA_READ},
	{"reverse_unordered_selects", PRAGMA_SET},
	{"schema_version", PRAGMA_READ},
	{"secure_delete", PRAGMA_READ},
	{"soft_heap_limit", PRAGMA_READ},
	{"synchronous", PRAGMA_READ},
	{"table_info", PRAGMA_ARGUMENT},
	{"table_list", PRAGMA_ARGUMENT},
	{"table_xinfo", PRAGMA_ARGUMENT},
	{"temp_store", PRAGMA_READ},
	{"threads", PRAGMA_READ},
	{"trusted_schema", PRAGMA_READ},
	{"user_version", PRAGMA_SET},
	{"wal_autocheckpoint", PRAGMA_READ},
	{"wal_checkpoint", PRAGMA_ARGUMENT},
	{"writable_schema", PRAGMA_READ},
};

/*
 * The functions allowed: SQLite's built-in scalar, aggregate, window,
 * date, math and JSON functions and those of FTS3/4/5, and the internal
 * ones SQLite's own ALTER TABLE runs.  Not here, so refused:
 * load_extension, fts3_tokenizer (returns, and with two arguments takes,
 * a C pointer), fts5 (the API pointer), the R-tree debugging functions,
 * sqlite_log, and every function an extension or a future SQLite might
 * add.
 */
static const char *const sqlite_functions[] = {
	"->", "->>", "abs", "acos", "acosh", "asin", "asinh", "atan", "atan2",
	"atanh", "avg", "bm25", "ceil", "ceiling", "changes", "char", "coalesce",
	"concat", "concat_ws", "cos", "cosh", "count", "cume_dist",
	"current_date", "current_time", "current_timestamp", "date", "datetime",
	"degrees", "dense_rank", "exp", "first_value", "floor", "format",
	"fts5_source_id", "glob", "group_concat", "hex", "highlight", "ifnull",
	"iif", "instr", "json", "json_array", "json_array_length",
	"json_extract", "json_group_array", "json_group_object", "json_insert",
	"json_object", "json_patch", "json_quote", "json_remove", "json_replace",
	"json_set", "json_type", "json_valid", "julianday", "lag",
	"last_insert_rowid", "last_value", "lead", "length", "like",
	"likelihood", "likely", "ln", "log", "log10", "log2", "lower", "ltrim",
	"match", "matchinfo", "max", "min", "mod", "nth_value", "ntile",
	"nullif", "octet_length", "offsets", "percent_rank", "pi", "pow", "power",
	"printf", "quote", "radians", "random", "randomblob", "rank", "replace",
	"round", "row_number", "rtrim", "sign", "sin", "sinh", "snippet",
	"soundex", "sqlite_compileoption_get", "sqlite_compileoption_used",
	"sqlite_drop_column", "sqlite_offset", "sqlite_rename_column",
	"sqlite_rename_quotefix", "sqlite_rename_table", "sqlite_rename_test",
	"sqlite_source_id", "sqlite_version", "sqrt", "strftime", "string_agg",
	"substr", "substring", "sum", "tan", "tanh", "time", "total",
	"total_changes", "trim", "trunc", "typeof", "unhex", "unicode",
	"unixepoch", "unlikely", "upper", "zeroblob",
	NULL
};

/* the virtual-table modules CREATE VIRTUAL TABLE may use */
static const char *const sqlite_modules[] = {
	"fts3", "fts4", "fts4aux", "fts5", "fts5vocab", "rtree", "rtree_i32", NULL
};

static bool
reserved(const char *name)
{
	return name != NULL &&
		pg_strncasecmp(name, RESERVED_PREFIX, strlen(RESERVED_PREFIX)) == 0;
}

static bool
listed(const char *name, const char *const *list)
{
	if (name == NULL)
		return false;
	for (int i = 0; list[i]; i++)
		if (pg_strcasecmp(name, list[i]) == 0)
			return true;
	return false;
}

/*
 * deny records what was refused and refuses it.
 */
static int
deny(SqliteSandbox *sandbox, const char *what, const char *name)
{
	snprintf(sandbox->denied, sizeof(sandbox->denied), what, name ? name : "?");
	return SQLITE_DENY;
}

/*
 * pragma_allowed decides a PRAGMA: 'value' is its argument or the value it
 * is set to (NULL: none).
 */
static int
pragma_allowed(SqliteSandbox *sandbox, const char *name, const char *value)
{
	for (int i = 0; i < lengthof(sqlite_pragmas); i++)
	{
		const SqlitePragma *p = &sqlite_pragmas[i];

		if (pg_strcasecmp(name, p->name) != 0)
			continue;
		if (value == NULL || p->use != PRAGMA_READ)
			return SQLITE_OK;
		snprintf(sandbox->denied, sizeof(sandbox->denied),
				 "PRAGMA %s = %s (it may only be read)", p->name, value);
		return SQLITE_DENY;
	}
	return deny(sandbox, "PRAGMA %s", name);
}

/*
 * sqlite_authorizer is the sandbox's authorizer callback: SQLITE_OK for
 * what the lists allow, SQLITE_DENY (with sandbox->denied filled) for the
 * rest.  'trigger' is the trigger or view the action comes from.  It must
 * never throw.
 */
static int
sqlite_authorizer(void *arg, int action, const char *arg1, const char *arg2,
				  const char *dbname, const char *trigger)
{
	SqliteSandbox *sandbox = (SqliteSandbox *) arg;
	bool		internal = sandbox->internal;

	switch (action)
	{
		case SQLITE_SELECT:
		case SQLITE_READ:
		case SQLITE_RECURSIVE:
		case SQLITE_ANALYZE:
		case SQLITE_REINDEX:
			return SQLITE_OK;

		case SQLITE_INSERT:
		case SQLITE_UPDATE:
		case SQLITE_DELETE:
			if (!reserved(arg1))
				return SQLITE_OK;
			if (trigger != NULL)
			{
				snprintf(sandbox->denied, sizeof(sandbox->denied),
						 "writes to %s (collegedb's table) from trigger %s", arg1, trigger);
				return SQLITE_DENY;
			}
			if (internal)
				return SQLITE_OK;
			return deny(sandbox, "writes to %s (collegedb's table)", arg1);

		case SQLITE_CREATE_TABLE:
		case SQLITE_CREATE_TEMP_TABLE:
		case SQLITE_CREATE_VIEW:
		case SQLITE_CREATE_TEMP_VIEW:
		case SQLITE_DROP_TABLE:
		case SQLITE_DROP_TEMP_TABLE:
		case SQLITE_DROP_VIEW:
		case SQLITE_DROP_TEMP_VIEW:
		case SQLITE_DROP_VTABLE:
			if (reserved(arg1) && !internal)
				return deny(sandbox, "DDL on %s (names starting with collegedb_ are collegedb's)", arg1);
			return SQLITE_OK;

		case SQLITE_CREATE_INDEX:
		case SQLITE_CREATE_TEMP_INDEX:
		case SQLITE_DROP_INDEX:
		case SQLITE_DROP_TEMP_INDEX:
			/* arg1 is the index, arg2 its table */
			if ((reserved(arg1) || reserved(arg2)) && !internal)
				return deny(sandbox, "DDL on an index of %s (names starting with collegedb_ are collegedb's)",
							reserved(arg2) ? arg2 : arg1);
			return SQLITE_OK;

		case SQLITE_CREATE_TRIGGER:
		case SQLITE_CREATE_TEMP_TRIGGER:
			/* arg1 is the trigger, arg2 its table: never on collegedb's */
			if (reserved(arg2))
				return deny(sandbox, "a trigger on %s (collegedb's table)", arg2);
			if (reserved(arg1) && !internal)
				return deny(sandbox, "DDL on %s (names starting with collegedb_ are collegedb's)", arg1);
			return SQLITE_OK;

		case SQLITE_DROP_TRIGGER:
		case SQLITE_DROP_TEMP_TRIGGER:
			if (reserved(arg1) && !internal)
				return deny(sandbox, "DDL on %s (names starting with collegedb_ are collegedb's)", arg1);
			return SQLITE_OK;

		case SQLITE_ALTER_TABLE:
			/* arg1 is the schema, arg2 the table */
			if (reserved(arg2) && !internal)
				return deny(sandbox, "ALTER TABLE %s (collegedb's table)", arg2);
			return SQLITE_OK;

		case SQLITE_CREATE_VTABLE:
			/* arg1 is the table, arg2 the module */
			if (reserved(arg1) && !internal)
				return deny(sandbox, "DDL on %s (names starting with collegedb_ are collegedb's)", arg1);
			if (!listed(arg2, sqlite_modules))
				return deny(sandbox, "virtual tables using module %s", arg2);
			return SQLITE_OK;

		case SQLITE_PRAGMA:
			return pragma_allowed(sandbox, arg1, arg2);

		case SQLITE_FUNCTION:
			/* arg2 is the function */
			if (listed(arg2, sqlite_functions))
				return SQLITE_OK;
			return deny(sandbox, "function %s()", arg2);

		case SQLITE_TRANSACTION:
		case SQLITE_SAVEPOINT:
			if (internal)
				return SQLITE_OK;
			return deny(sandbox, "transaction control (%s); collegedb runs the shard's transaction",
						arg1);

		case SQLITE_ATTACH:
			if (arg1 == NULL)
				return deny(sandbox, "ATTACH of another database file%s (and VACUUM INTO)", "");
			return deny(sandbox, "ATTACH of database file \"%s\" (and VACUUM INTO)", arg1);
		case SQLITE_DETACH:
			return deny(sandbox, "DETACH of %s", arg1);
		case SQLITE_COPY:
			return deny(sandbox, "COPY%s", "");

		default:
			snprintf(sandbox->denied, sizeof(sandbox->denied),
					 "the SQLite operation with authorizer code %d", action);
			return SQLITE_DENY;
	}
}

/*
 * SqliteSandboxApply puts a freshly opened connection in the sandbox:
 * SQLite's hardening options, the limits, and the authorizer (with
 * 'sandbox' as its state).  Returns an SQLite result code; on failure
 * *step names the option SQLite refused, and the caller must not use the
 * connection: a sandbox short of one wall is no sandbox.
 */
int
SqliteSandboxApply(sqlite3 *db, SqliteSandbox *sandbox, const char **step)
{
	static const struct
	{
		int			op;
		int			value;
		const char *name;
	}			options[] = {
		{SQLITE_DBCONFIG_DEFENSIVE, 1, "SQLITE_DBCONFIG_DEFENSIVE"},
		{SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, "SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION"},
		{SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER, 0, "SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER"},
		{SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, "SQLITE_DBCONFIG_TRUSTED_SCHEMA"},
		{SQLITE_DBCONFIG_DQS_DML, 0, "SQLITE_DBCONFIG_DQS_DML"},
		{SQLITE_DBCONFIG_DQS_DDL, 0, "SQLITE_DBCONFIG_DQS_DDL"},
		{SQLITE_DBCONFIG_WRITABLE_SCHEMA, 0, "SQLITE_DBCONFIG_WRITABLE_SCHEMA"},
		{SQLITE_DBCONFIG_LEGACY_ALTER_TABLE, 0, "SQLITE_DBCONFIG_LEGACY_ALTER_TABLE"},
	};
	int			rc;

	for (int i = 0; i < lengthof(options); i++)
	{
		int			now = -1;

		rc = sqlite3_db_config(db, options[i].op, options[i].value, &now);
		if (rc == SQLITE_OK && now != options[i].value)
			rc = SQLITE_ERROR;
		if (rc != SQLITE_OK)
		{
			*step = options[i].name;
			return rc;
		}
	}
	rc = sqlite3_enable_load_extension(db, 0);
	if (rc != SQLITE_OK)
	{
		*step = "sqlite3_enable_load_extension";
		return rc;
	}
	for (int i = 0; i < lengthof(sqlite_limits); i++)
	{
		(void) sqlite3_limit(db, sqlite_limits[i].id, sqlite_limits[i].value);
		if (sqlite3_limit(db, sqlite_limits[i].id, -1) > sqlite_limits[i].value)
		{
			*step = "sqlite3_limit";
			return SQLITE_ERROR;
		}
	}
	SqliteSandboxBegin(sandbox, false);
	rc = sqlite3_set_authorizer(db, sqlite_authorizer, sandbox);
	if (rc != SQLITE_OK)
		*step = "sqlite3_set_authorizer";
	return rc;
}

/*
 * SqliteSandboxBegin prepares the sandbox for the next statement: one of
 * collegedb's own ('internal') or a caller's.
 */
void
SqliteSandboxBegin(SqliteSandbox *sandbox, bool internal)
{
	sandbox->internal = internal;
	sandbox->denied[0] = '\0';
}
