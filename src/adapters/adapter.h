/*-------------------------------------------------------------------------
 *
 * adapter.h
 *	  The one interface behind which every shard dialect sits.
 *
 * An adapter knows how to talk to one kind of shard (PostgreSQL over libpq,
 * SQLite files, MySQL/MariaDB over libmariadb): connect, run one statement
 * with parameters while streaming the result rows to a sink, cancel, close,
 * and map the client library's errors to SQLSTATE + message + detail + hint.
 * It also declares everything else that differs between dialects, so that
 * nothing outside src/adapters/ ever asks which dialect a shard speaks: its
 * capabilities, its lexical rules (placeholders, literals, identifiers,
 * comments, which statements read), its option keywords for servers and
 * user mappings, the objects it needs on a shard, its guard, lock, size and
 * key-comparison SQL, and how it quotes identifiers.  The registry
 * (registry.c) lists the adapters; a new dialect is one more adapter and
 * one more line there (see src/README.md, "Adding a dialect").
 *
 * Adapters do not raise errors for remote failures: they fill a
 * CdRemoteError and return false, so that the remote layer (src/remote/)
 * can decide whether to retry, mark the connection broken, and add a context
 * line naming the shard and the statement.  Adapters may still throw for
 * interrupts (query cancel, statement_timeout) and for out-of-memory; they
 * release every client-library resource before letting such an error go.
 *
 * Client-library headers never appear here: each is included by its adapter
 * only (mysql.h clashes with PostgreSQL's headers).
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_ADAPTER_H
#define COLLEGEDB_ADAPTER_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "nodes/pg_list.h"

/*
 * A dialect is its adapter's position in the registry (registry.c), from 0
 * to AdapterCount() - 1; arrays kept per dialect (statement texts deparsed
 * for each) have room for CD_MAX_DIALECTS.
 */
typedef int CdDialect;

#define CD_MAX_DIALECTS 8

/*
 * How many keys a shard transaction's guards lock one by one before they
 * lock the whole tombstone table instead (where the dialect's per-key locks
 * are counted against a shared limit: PostgreSQL's advisory locks against
 * max_locks_per_transaction).  See lock_table_sql.
 */
#define CD_GUARD_KEY_LOCKS 512

/* an adapter's lexical rules (adapters/lexer.h) */
typedef struct CdLexerRules CdLexerRules;

/*
 * CdCapabilities is what a dialect can do, which the layers above ask
 * instead of naming dialects.
 */
typedef struct CdCapabilities
{
	bool		transactions;	/* BEGIN/COMMIT/ROLLBACK: statements of a front
								 * transaction join one remote transaction */
	bool		savepoints;		/* SAVEPOINT: the front's subtransactions too */
	bool		returning;		/* UPDATE and DELETE ... RETURNING */
	bool		two_phase;		/* PREPARE TRANSACTION or XA: a participant of
								 * two-phase commit (CdAdapter.two_phase_sql) */
	bool		last_participant;	/* cannot prepare, but can commit last with
									 * a durable marker of the decision
									 * (CdAdapter.marker_sql) */
	bool		pipelining;		/* setup commands, a guard and the statement
								 * travel in one round trip (guard_setup) */
	bool		schemas;		/* table names may be schema-qualified */
	bool		login;			/* connects as a user: a user mapping is
								 * needed, and the password rule applies */
	bool		server_files;	/* server options name files on the front's
								 * host (only superusers and
								 * pg_write_server_files members may) */
} CdCapabilities;

/*
 * CdValueKind classifies a parameter or result value in a dialect-neutral
 * way.  The remote layer turns PostgreSQL datums into CdParams and result
 * cells into jsonb or into the caller's column types according to it.
 */
typedef enum CdValueKind
{
	CD_VALUE_NULL = 0,
	CD_VALUE_BOOL,
	CD_VALUE_INT,				/* fits int64 */
	CD_VALUE_FLOAT,				/* float4/float8 */
	CD_VALUE_NUMERIC,			/* exact decimal, text form */
	CD_VALUE_TEXT,
	CD_VALUE_BYTES,				/* raw bytes, not hex */
	CD_VALUE_JSON,				/* JSON text */
	CD_VALUE_DATE,				/* YYYY-MM-DD */
	CD_VALUE_TIME,				/* HH:MM:SS[.ffffff] */
	CD_VALUE_TIMESTAMP,			/* YYYY-MM-DD HH:MM:SS[.ffffff], no zone */
	CD_VALUE_TIMESTAMPTZ,		/* as TIMESTAMP, always UTC, no zone suffix */
	CD_VALUE_UUID				/* canonical 36-character text */
} CdValueKind;

/*
 * CdParam is one statement parameter.
 *
 * For every kind but NULL, 'str'/'len' hold a text form valid as PostgreSQL
 * input for 'typid' (for BYTES: the raw bytes; for TIMESTAMPTZ: the UTC
 * time without a zone suffix, the adapter adds the zone its dialect needs).
 * BOOL, INT and FLOAT also carry their binary value so that adapters can
 * bind natively.  'typid' is the front's type OID; the PostgreSQL adapter
 * sends it when it is a built-in type.
 */
typedef struct CdParam
{
	CdValueKind kind;
	Oid			typid;
	bool		bval;
	int64		ival;
	double		fval;
	const char *str;
	int			len;
} CdParam;

/*
 * CdCell is one result value.  'data'/'len' hold the text form in
 * PostgreSQL input syntax (numbers, booleans as "t"/"f", dates and
 * timestamps in ISO form, JSON text); for BYTES the raw bytes.  'data' is
 * valid only during the sink callback.
 */
typedef struct CdCell
{
	bool		isnull;
	CdValueKind kind;
	const char *data;
	int			len;
} CdCell;

/*
 * CdRowSink receives a statement's result: first the column names (once,
 * also for a statement that returns no rows but has a row description, and
 * not at all for a statement without one), then each row.  Callbacks may
 * throw; the adapter then releases its client-library resources and
 * re-throws.
 */
typedef struct CdRowSink CdRowSink;
struct CdRowSink
{
	void		(*columns) (CdRowSink *self, int ncols, const char *const *names);
	void		(*row) (CdRowSink *self, int ncols, const CdCell *cells);
};

/*
 * CdRemoteError describes a failure.  Strings are palloc'd in the memory
 * context current when the adapter was called, copied out of the client
 * library before any handle is freed.  'connection_lost' says the
 * connection can no longer be used (the remote layer then closes it and,
 * when nothing was in flight, may reconnect and retry).  'nothing_sent'
 * says the adapter refused the call before sending anything, not even the
 * setup commands: the shard's transaction state is as before.
 */
typedef struct CdRemoteError
{
	char		sqlstate[6];	/* five characters and a NUL */
	char	   *message;
	char	   *detail;
	char	   *hint;
	bool		connection_lost;
	bool		nothing_sent;	/* refused before anything left for the shard */
} CdRemoteError;

/*
 * CdConnOption is one keyword/value pair from the foreign server or the
 * user mapping (the 'dialect' option is not passed on).
 */
typedef struct CdConnOption
{
	const char *keyword;
	const char *value;
	bool		from_user_mapping;
} CdConnOption;

/*
 * CdStatementShape is what the lexer tells about a statement by a dialect's
 * lexical rules (AdapterScan, CdAdapter.lexer).
 */
typedef struct CdStatementShape
{
	int			max_param;		/* highest $n referenced, 0 if none */
	bool		empty;			/* nothing but whitespace, ';' and comments */
	bool		read_only;		/* provably a read (see adapters/lexer.c) */
	bool		transaction_control;	/* BEGIN, COMMIT, SAVEPOINT, ... */
	bool		names_reserved; /* names something called collegedb_... */
	bool		statement_name_reserved;	/* a prepared statement called
											 * collegedb_... (after
											 * statement_name_words) */
	char		first_word[16]; /* lower case, "" if none or longer */
} CdStatementShape;

/*
 * Flags of one exec or send (CdAdapter.exec).
 *
 * CD_EXEC_INTERNAL: one of collegedb's own statements (transaction control,
 *	 tombstones, guards, a move's copy, the objects add_shard creates), never
 *	 a caller's text.  The SQLite sandbox allows these what it refuses
 *	 routed statements: writes to collegedb's tables, transaction control.
 * CD_EXEC_READ: the remote layer runs the statement as a read (no guard,
 *	 maybe in autocommit); an adapter whose own parser finds that it writes
 *	 refuses it.
 * CD_EXEC_CLEANUP: abort-time cleanup (ROLLBACK, ROLLBACK TO SAVEPOINT)
 *	 while interrupts are held: the wait gives up after the cleanup timeout,
 *	 or at once when a cancel or termination is pending, and the statement
 *	 then fails with connection_lost so that the connection is closed.
 * CD_EXEC_COMMIT: the statement is the remote transaction's COMMIT; a
 *	 shard that answers it by rolling back reports a failure.
 * CD_EXEC_GUARD: a setup command is the adapter's guard_setup, whose $1
 *	 is params[nparams], one parameter past the statement's own.
 * CD_EXEC_ALONE: the setup commands and the statement commit on the shard
 *	 by themselves (one implicit transaction, no remote transaction open),
 *	 so a failure after sending cannot be retried: the adapter sends them
 *	 only on a connection it finds alive, and reports one found dead as
 *	 connection_lost and nothing_sent.
 */
#define CD_EXEC_INTERNAL	0x01
#define CD_EXEC_READ		0x02
#define CD_EXEC_CLEANUP		0x04
#define CD_EXEC_COMMIT		0x08
#define CD_EXEC_GUARD		0x10
#define CD_EXEC_ALONE		0x20

/*
 * CdConnInfo is what connect gets.  'require_password': the remote layer's
 * password rule (postgres_fdw's) applies: the user mapping holds a
 * password, and the adapter must authenticate with it and nothing else of
 * the server's (no password file, environment, client certificate or
 * operating-system identity); one that can tell whether the server asked
 * for the password (libpq) refuses the connection with SQLSTATE 2F003 when
 * it did not.
 */
typedef struct CdConnInfo
{
	const char *shard;			/* server name, for messages */
	int			noptions;
	const CdConnOption *options;
	bool		require_password;
} CdConnInfo;

/*
 * CdAdapter is the operations table of one dialect.
 *
 * connect:	 open a connection; NULL and *err filled on failure.  The handle
 *			 is malloc'd or owned by the client library, never palloc'd: it
 *			 outlives transactions.
 * exec:	 run 'nsetup' parameterless commands (collegedb's own transaction
 *			 control such as BEGIN or SAVEPOINT, no result rows) and then
 *			 'sql' with 'params' and 'flags' (CD_EXEC_*).  'sql' uses
 *			 $1..$n placeholders; the adapter rewrites them for its dialect
 *			 (see adapters/lexer.h), each $n may appear more than once.  Rows
 *			 go to 'sink' (NULL: discard), the affected-row count to
 *			 *rows_affected (rows returned for a row-returning statement).
 *			 Returns false with *err filled on a remote failure.  Where the
 *			 protocol allows, setup commands and the statement travel in one
 *			 round trip.  Waits are interruptible; on an interrupt the adapter
 *			 cancels the remote work, frees its resources and re-throws.  A
 *			 failure that leaves the protocol in a state the adapter cannot
 *			 vouch for (a send that failed midway) is connection_lost.
 * send, poll, socket, cancel: the same statement run asynchronously, so
 *			 that several shards can work at once (fan-out).  send starts it
 *			 (false with *err on an immediate failure); poll makes progress
 *			 without blocking, streaming rows to the sink as they arrive, and
 *			 says what it waits for; socket is the descriptor to wait on;
 *			 cancel asks the shard to stop the statement (best effort,
 *			 within 'timeout_ms', never throwing: it runs while errors are
 *			 handled; it gives up early when a cancel or termination is
 *			 pending, since the connection is dropped next anyway).  An
 *			 adapter without them (NULL: SQLite, which is local) is run with
 *			 exec while the others are in flight.
 * close:	 close the connection and free the handle (NULL is a no-op).
 * session_id: (optional) the shard's id of the connection's session, as
 *			 lock_waits_sql reports it (PostgreSQL: the backend's pid;
 *			 MySQL: the thread id); NULL where the dialect has none.
 * name:	 the value of the server option 'dialect'; 'aliases' (NULL
 *			 terminated, or NULL) are accepted for it too.  display_name
 *			 and a_name name the dialect in messages ("MySQL", "a MySQL").
 * caps:	 what the dialect can do (CdCapabilities).
 * option_ok: whether 'keyword' is a valid option of this dialect for the
 *			 catalog 'catalog' (ForeignServerRelationId or
 *			 UserMappingRelationId).  A user mapping does not know its
 *			 server's dialect when it is validated: it may take what any
 *			 adapter takes there (AdapterUserMappingOptionOk), and each
 *			 adapter ignores at connect time what it does not use.
 * check_options: semantic checks on an option list (List of DefElem, the
 *			 'dialect' option already removed) at CREATE/ALTER SERVER or USER
 *			 MAPPING time: required options, values.  ereports on failure
 *			 (ERRCODE_FDW_OPTION_NAME_NOT_FOUND, ERRCODE_FDW_INVALID_OPTION_NAME,
 *			 ERRCODE_INVALID_PARAMETER_VALUE).
 * valid_options: palloc'd, comma-separated list of the valid option
 *			 keywords for 'catalog', for hints.
 * sql_*:	 the dialect's transaction-control statements.  The savepoint
 *			 statements take the savepoint level as %d.
 * implicit_commit: NULL-terminated list of the lower-case first words of
 *			 statements that commit the open transaction on this dialect
 *			 (MySQL's DDL), or NULL.  They run outside any remote
 *			 transaction and are refused inside one.
 * lexer:	 the dialect's lexical rules (adapters/lexer.h), by which
 *			 AdapterScan classifies a statement (see CdStatementShape):
 *			 placeholders, emptiness, the first word, and whether it is
 *			 provably a read.
 * max_params: the most parameters one statement may have here.
 * max_key_length: the longest key (in characters) the shard's tombstone
 *			 table holds; 0: no limit.  Guarded writes and moves of longer
 *			 keys are refused before anything is written.
 * quote_ident: palloc'd identifier quoted for the dialect.
 * shard_ddl: NULL-terminated statements creating what collegedb needs on a
 *			 shard (the tombstone table, an index on its key, and on
 *			 PostgreSQL the guard function); each is idempotent.
 * sql_begin_write: how a remote transaction that starts with a write
 *			 begins (SQLite takes its write lock at once: BEGIN IMMEDIATE).
 * guard_setup: (a dialect with pipelining) a statement, with $1 for the
 *			 key (CD_EXEC_GUARD), that takes the key's shared lock and
 *			 fails with SQLSTATE CD0M1 (ERRCODE_CD_GUARD_MOVED) and the
 *			 destination as detail when the key has a tombstone; it travels
 *			 in the statement's pipeline, inside guard_savepoint ..
 *			 guard_release when a remote transaction is open already, so
 *			 that guard_rollback_to can undo a guard that fired.
 * guard_query: (the others) a query with $1 = the key that takes the
 *			 key's lock inside the transaction and returns moved_to when
 *			 the key has a tombstone; run before the statement.
 * guard_keys_sql: the guard of a batch of keys (a bulk INSERT or COPY):
 *			 one query, run in the batch's shard transaction before its rows
 *			 are written, that takes every key's lock as the guard would (or
 *			 the escalated lock, see lock_table_sql) and returns a row with a
 *			 non-null moved_to when any of the keys has a tombstone.  With
 *			 guard_keys_array its one parameter $1 is a text array literal of
 *			 the keys; otherwise "%s" stands for $1, ..., $n, one per key.
 * guard_keys_probe: (optional) a query whose one row is true when the
 *			 shard has what guard_keys_sql needs (a shard prepared by an
 *			 older collegedb may not: then shard_ddl runs again first).
 * lock_key_sql: a statement with $1 = the key that a mover runs in its
 *			 source transaction to take the key's lock exclusively, so that
 *			 guarded writers wait for the move to commit.
 * lock_all_sql: (optional) a statement that a write of every key of a
 *			 table (TRUNCATE, fdw/truncate.c) runs first in its shard
 *			 transaction: it waits for the moves in progress from the shard
 *			 and holds off new ones until the write commits (it conflicts
 *			 with lock_table_sql).  Without it the write's own row locks do.
 * truncate_fmt: the statement that empties a table in the shard's
 *			 transaction, "%s" for the table's name: TRUNCATE where it is
 *			 transactional, else DELETE.  truncate_options: whether
 *			 TRUNCATE's CASCADE and RESTART IDENTITY may follow it.
 * insert_do_nothing: (optional) what an INSERT ends with for INSERT ...
 *			 ON CONFLICT DO NOTHING, so that a row that conflicts with a
 *			 unique constraint of the shard's table is skipped and counted
 *			 as not inserted, as PostgreSQL does; NULL where the dialect
 *			 cannot say exactly that.
 * rows_sql, send_rows: (optional) the dialect's bulk path for a batch of
 *			 rows into one table (fdw/insert.c).  rows_sql is its statement,
 *			 "%s" for the table's name and then for its column list
 *			 ("COPY %s (%s) FROM STDIN"); send_rows sends it with 'nrows'
 *			 rows of 'ncols' values ('params', row after row) as send does:
 *			 it returns once everything is handed to the client library, and
 *			 the answer (the rows inserted) comes through poll.  The rows
 *			 need not stay valid after it returns.  Only inside an open
 *			 remote transaction with no setup command to send.
 * exec_rows: (optional) exec of the one-row statement 'sql' for each of
 *			 'nrows' rows of 'ncols' values ('params', row after row), to
 *			 its end: the bulk path of a dialect without send_rows, where a
 *			 statement prepared once and run per row beats one statement of
 *			 many rows (SQLite).  *rows_affected counts every run's.
 * import_sql: the query IMPORT FOREIGN SCHEMA runs (fdw/import.c), $1 the
 *			 remote schema: one row per column of every table and view
 *			 there but collegedb's own, ordered by table and column
 *			 position: table name, column name, the PostgreSQL type that
 *			 holds its values, 1 for the first column of the primary key,
 *			 1 for NOT NULL (0 otherwise), and the table's schema_name option
 *			 (NULL where the shard's connection reaches it unqualified: a
 *			 MySQL shard's own database, which differs between shards).
 * lock_keys_sql: the locks of a batch of keys (a batched move, in its
 *			 source transaction): takes each key's lock as lock_key_sql
 *			 would, in the order given (the keys sorted, so that two batches
 *			 never wait for each other), and returns a row with each key
 *			 whose lock it could not take without waiting (PostgreSQL tries
 *			 each lock; SQLite's write lock waits, and returns nothing).  With
 *			 guard_keys_array its one parameter $1 is a text array literal
 *			 of the keys; otherwise "%s" stands for one lock_keys_item per
 *			 key (a format with %d, the key's parameter number).  NULL: keys
 *			 leave a shard of the dialect one by one (MySQL, see mysql.c).
 * lock_table_sql: (optional) a statement a mover runs in its source
 *			 transaction right after lock_key_sql, before it reads any row:
 *			 it conflicts with the lock a guard escalates to once a shard
 *			 transaction has locked CD_GUARD_KEY_LOCKS keys one by one
 *			 (PostgreSQL: ROW EXCLUSIVE against the guard's SHARE lock on
 *			 collegedb_tombstones).  NULL where the guard's locks are
 *			 bounded without it (MySQL's locks on the tombstone table's
 *			 pages, SQLite's one database lock).
 * copy_lock_clause: (optional) what a mover appends to its read of the
 *			 key's rows on the source, so that the read waits for, and then
 *			 sees, the changes of a writer whose transaction is prepared but
 *			 not yet committed.  Needed where a prepared transaction keeps
 *			 fewer locks than the guard took: MySQL's XA PREPARE releases the
 *			 shared and gap locks of the guard's locking read and keeps only
 *			 exclusive row locks, so the mover reads FOR UPDATE.  NULL where
 *			 the guard's own lock survives PREPARE (PostgreSQL's advisory
 *			 locks) or the dialect prepares nothing (SQLite).
 * row_identity: (optional) what identifies a row of a table on the shard
 *			 for as long as the shard's transaction holds it: an expression
 *			 the fetch of a row-by-row UPDATE or DELETE selects
 *			 (fdw/row_modify.c), in tid syntax "(block,offset)", or with
 *			 row_identity_int a non-negative 64-bit integer.  NULL: the
 *			 dialect has none, and its rows are not updated one by one.
 * row_identity_match: the condition that picks the row again, %1$s the
 *			 identity's parameter (tid text, or the integer), and %2$s the
 *			 parameter of the other form, NULL for a row of this dialect,
 *			 which the statement must name too.
 * primary_key_sql: (optional, for a dialect without row_identity) a query
 *			 returning, one per row in their order, the names of the columns
 *			 of the primary key of table $1 (in schema $2; NULL: the
 *			 connection's): the columns that tell its rows apart there.
 * row_lock_clause: (optional) what that fetch appends so that the rows it
 *			 returns stay as they are until the shard's transaction ends
 *			 (" FOR UPDATE"); NULL where the write transaction's own lock
 *			 already does (SQLite's database lock).
 * size_sql: statement returning the database's size in bytes as one row
 *			 with one column "size".
 * row_estimate_sql: (optional) a cheap query of the shard's own statistics
 *			 of table $1 (in schema $2; NULL: the connection's), never a
 *			 count of its rows: one row of two columns, the estimated rows
 *			 (NULL when the shard has no statistics of it) and the table's
 *			 current size in PostgreSQL-sized pages (NULL when unknown); no
 *			 row when there is no such table.  The planner sums the shards'
 *			 answers for a table never ANALYZEd (fdw/estimate.c).
 *			 row_estimate_probe: (optional) a query whose one row is true
 *			 when row_estimate_sql can run (SQLite's sqlite_stat1 exists
 *			 only once the database was analyzed).
 * two_phase_sql, marker_sql: two-phase commit (CdTwoPhaseSql) and the
 *			 last participant's decision marker (CdMarkerSql).
 * lock_waits_sql: (optional) a query whose rows (waiter, blocker) are
 *			 the sessions waiting for a lock on the shard's server and the
 *			 sessions they wait for, as session_id numbers them, in
 *			 autocommit; remote/deadlock.c builds the wait-for graph across
 *			 shards from it.  NULL: the dialect's waits are not seen (SQLite's
 *			 busy waits end with its busy timeout).
 * key_list_sql: (optional) what stands for a list of keys after the key
 *			 column, with $%d one parameter: the keys in PostgreSQL's array
 *			 text form ({"k1","k2"}), untyped, so that the shard reads it as
 *			 an array of its column's type (PostgreSQL: " = ANY($%d)").  One
 *			 statement text then serves every number of keys.  NULL: a list
 *			 goes as " IN ($k, ...)", one parameter per key.
 * key_match: a condition comparing column %1$s (quoted) with parameter
 *			 $%2$d byte for byte, whatever the column's collation, in a form
 *			 that can still use an index on the column.  Every statement a
 *			 move sends uses it.
 * key_in_match: (optional) key_match of a list of keys: column %1$s
 *			 (quoted) with any of %2$s ("$i, $j, ..."), byte for byte, where
 *			 a disjunction of key_match would be too deep an expression
 *			 (SQLite's expression depth limit) or too slow to plan (MySQL).
 *			 NULL: key_match per key, joined by OR (or key_list_sql where
 *			 the dialect has it).
 * topology_ddl: NULL-terminated statements creating the shard-side tables
 *			 of topology groups, collegedb_topology(group_name, version,
 *			 snapshot) and collegedb_topology_state(group_name, channel,
 *			 version, value), keyed byte for byte; each is idempotent.
 *			 add_shard runs them, and the coordinator before its first
 *			 delivery to a shard.
 * topology_publish: one statement, atomic on its own (the coordinator runs
 *			 it in the shard's autocommit), with $1 = the group, $2 = the
 *			 version (bigint), $3 = the snapshot (JSON; NULL once it is
 *			 removed): it writes the group's row only when $2 is newer than
 *			 the version stored, so a late delivery never undoes a newer one.
 * topology_put_state: the same for a state channel's value, with $1 = the
 *			 group, $2 = the channel, $3 = the version, $4 = the value (JSON).
 * expr_rules: which expressions a scan or modification may send there
 *			 (CdExprRules).
 */
/*
 * CdTwoPhaseSql is a dialect's two-phase commit (caps.two_phase).  Every
 * text takes the global transaction id as %s (it holds only [a-z0-9_], the
 * texts quote it); the lists are NULL-terminated and run in order, in one
 * exec.
 *
 * begin:	 NULL when any transaction can be prepared; otherwise how a
 *			 transaction that may be prepared begins (MySQL's XA START), and
 *			 such a transaction then ends only with one of the lists below:
 *			 commit_one_phase, rollback or prepare.
 * commit_one_phase, rollback: (with 'begin') commit or roll back a
 *			 transaction that began with 'begin' without preparing it.
 * prepare:	 prepares the open transaction under the id.
 * commit_prepared, rollback_prepared: decide a prepared transaction, from
 *			 any session.
 * list_prepared: a query whose rows' first column is the id of a
 *			 prepared transaction of this database (or server).
 * missing_sqlstate: what commit_prepared and rollback_prepared fail with
 *			 when no such prepared transaction exists (or another session
 *			 still holds it).
 * check:	 a query returning one row whose first column is NULL when the
 *			 server can prepare transactions, else a sentence saying why not.
 */
typedef struct CdTwoPhaseSql
{
	const char *begin;
	const char *const *commit_one_phase;
	const char *const *rollback;
	const char *const *prepare;
	const char *commit_prepared;
	const char *rollback_prepared;
	const char *list_prepared;
	const char *missing_sqlstate;
	const char *check;
} CdTwoPhaseSql;

/*
 * CdMarkerSql is how a last participant (caps.last_participant) keeps the
 * evidence of a decision: a row in a shard-side table (created by
 * shard_ddl, and by 'ddl' again before each mark, for shards added before
 * it existed) that commits with the participant's own transaction.
 *
 * mark:	 $1 the front transaction's id prefix (text), $2 when (bigint,
 *			 microseconds since the PostgreSQL epoch, by the front's clock).
 * list:	 every marker: columns xact, created.
 * forget:	 $1 the id prefix.
 */
typedef struct CdMarkerSql
{
	const char *ddl;
	const char *mark;
	const char *list;
	const char *forget;
} CdMarkerSql;

/*
 * CdTypeFamily groups PostgreSQL's built-in types by what a shard stores
 * for them, so that a dialect can declare, per family, what it computes
 * exactly as PostgreSQL does (CdExprRules; fdw/shippable.c maps types).
 */
typedef enum CdTypeFamily
{
	CD_FAMILY_OTHER = 0,
	CD_FAMILY_BOOL,
	CD_FAMILY_INT2,
	CD_FAMILY_INT4,
	CD_FAMILY_INT8,
	CD_FAMILY_NUMERIC,
	CD_FAMILY_FLOAT4,
	CD_FAMILY_FLOAT8,
	CD_FAMILY_TEXT,				/* text and varchar, not char(n) */
	CD_FAMILY_DATE,
	CD_FAMILY_TIMESTAMP,
	CD_FAMILY_TIMESTAMPTZ,
	CD_FAMILY_UUID,
	CD_FAMILY_BYTEA
} CdTypeFamily;

#define CD_FAMILY_BIT(f) (1u << (f))

/*
 * CdExprRules is the dialect's part of the shippability rule (see
 * fdw/shippable.c, as postgres_fdw's shippable.c): an expression goes to a
 * shard of the dialect only where the dialect computes exactly what
 * PostgreSQL computes for the front's types, errors included; everything
 * else is evaluated on the front.
 *
 * builtin:  every immutable built-in operator and function of non-collatable
 *			 types means the same (the dialect is PostgreSQL itself).
 * compare:	 families whose =, <>, <, <=, >, >= of columns, constants and
 *			 parameters give PostgreSQL's answer.
 * arith:	 families whose +, - and * give PostgreSQL's result, overflow
 *			 raising an error as PostgreSQL does (by the result's family).
 * int_checked: (optional) how an int2/int4 result of +, - or * computed in
 *			 64 bits is written so that a value outside the range [%2$s,
 *			 %3$s] raises the dialect's numeric-overflow error (22003)
 *			 instead of coming back: %1$s is the value (it may appear more
 *			 than once).  With it int2/int4 +, -, * of operands of at most 32
 *			 bits is exact (their 64-bit result cannot overflow).
 * int8_checked: (optional) how an int8 result of +, - or * is written so
 *			 that an overflow raises the dialect's numeric-overflow error
 *			 (22003) instead of coming back another way (SQLite's floats):
 *			 %1$s is the value (it may appear more than once).
 * int_widening: families an implicit cast from an integer may be dropped
 *			 for, because the dialect compares the integer with a value of
 *			 the family exactly.
 * store_checked: an assignment to a column (UPDATE ... SET) checks the
 *			 column's range and length and rounds to its scale as
 *			 PostgreSQL's length coercion and int4 overflow do, so that an
 *			 implicit length coercion, or one int2/int4 +, -, * of columns,
 *			 constants and parameters, is exact there.
 * text_equal: text equality, byte for byte whatever the column's
 *			 collation, operands %1$s and %2$s (each may appear twice).
 * text_compare: text <>, <, <=, >, >= in byte order (PostgreSQL's "C"
 *			 collation), operator %3$s; sent only when the front compares
 *			 under "C" (<> under any deterministic collation).  NULL: never.
 * text_like: PostgreSQL's LIKE (case-sensitive, backslash escapes, per
 *			 character), %3$s "LIKE" or "NOT LIKE".  NULL: never.
 * agg_bool_and, agg_bool_or: the aggregate that computes bool_and and
 *			 bool_or of %s there (NULL over no rows); NULL: not sent.
 * nulls_order: ORDER BY takes NULLS FIRST / NULLS LAST; otherwise a sort
 *			 is written "(x IS NULL) ASC, x" (NULLS LAST) or "... DESC, x".
 * text_order_by: how a text sort key %s is written to sort in byte order
 *			 (the front's "C" collation); NULL: text keys are not sent.
 *
 * count, sum and avg of integers and numeric, min and max are sent where
 * the comparisons and arithmetic above say the dialect computes them
 * exactly (fdw/upper.c).
 */
typedef struct CdExprRules
{
	bool		builtin;
	uint32		compare;
	uint32		arith;
	const char *int_checked;
	const char *int8_checked;
	uint32		int_widening;
	bool		store_checked;
	const char *text_equal;
	const char *text_compare;
	const char *text_like;
	const char *agg_bool_and;
	const char *agg_bool_or;
	bool		nulls_order;
	const char *text_order_by;
} CdExprRules;

/* What an asynchronous statement needs next (see CdAdapter.poll) */
typedef enum CdPollResult
{
	CD_POLL_DONE = 0,			/* finished; rows delivered */
	CD_POLL_READ,				/* wait until the socket is readable */
	CD_POLL_WRITE,				/* wait until the socket is writable */
	CD_POLL_FAILED				/* finished with *err filled */
} CdPollResult;

typedef struct CdAdapter
{
	const char *name;
	const char *const *aliases;
	const char *display_name;
	const char *a_name;
	CdCapabilities caps;

	void	   *(*connect) (const CdConnInfo *info, CdRemoteError *err);
	bool		(*exec) (void *conn, int nsetup, const char *const *setup,
						 const char *sql, int nparams, const CdParam *params,
						 int flags, CdRowSink *sink, int64 *rows_affected,
						 CdRemoteError *err);
	bool		(*send) (void *conn, int nsetup, const char *const *setup,
						 const char *sql, int nparams, const CdParam *params,
						 int flags, CdRemoteError *err);
	CdPollResult (*poll) (void *conn, CdRowSink *sink, int64 *rows_affected,
						  CdRemoteError *err);
	int			(*socket) (void *conn);
	void		(*cancel) (void *conn, int timeout_ms);
	void		(*close) (void *conn);
	int64		(*session_id) (void *conn);

	bool		(*option_ok) (const char *keyword, Oid catalog);
	void		(*check_options) (List *options, Oid catalog);
	char	   *(*valid_options) (Oid catalog);

	const char *sql_begin;
	const char *sql_commit;
	const char *sql_rollback;
	const char *sql_savepoint;	/* "SAVEPOINT s%d" */
	const char *sql_release;	/* "RELEASE SAVEPOINT s%d" */
	const char *sql_rollback_to;	/* "ROLLBACK TO SAVEPOINT s%d" */
	const char *const *implicit_commit;

	const CdLexerRules *lexer;
	int			max_params;
	int			max_key_length;

	char	   *(*quote_ident) (const char *ident);
	const char *const *shard_ddl;
	const char *sql_begin_write;
	const char *guard_setup;
	const char *guard_savepoint;
	const char *guard_release;
	const char *guard_rollback_to;
	const char *guard_query;
	const char *guard_keys_sql;
	bool		guard_keys_array;
	const char *guard_keys_probe;
	const char *lock_key_sql;
	const char *lock_table_sql;
	const char *lock_all_sql;
	const char *truncate_fmt;
	bool		truncate_options;
	const char *insert_do_nothing;
	const char *rows_sql;
	bool		(*send_rows) (void *conn, const char *sql, int nrows, int ncols,
							  const CdParam *params, int flags, CdRemoteError *err);
	bool		(*exec_rows) (void *conn, int nsetup, const char *const *setup,
							  const char *sql, int nrows, int ncols, const CdParam *params,
							  int flags, int64 *rows_affected, CdRemoteError *err);
	const char *import_sql;
	const char *lock_keys_sql;
	const char *lock_keys_item;
	const char *copy_lock_clause;
	const char *row_identity;
	bool		row_identity_int;
	const char *row_identity_match;
	const char *primary_key_sql;
	const char *row_lock_clause;
	const char *size_sql;
	const char *row_estimate_sql;
	const char *row_estimate_probe;
	const char *key_match;
	const char *key_in_match;
	const char *key_list_sql;
	const char *lock_waits_sql;

	const char *const *topology_ddl;
	const char *topology_publish;
	const char *topology_put_state;
	const CdTwoPhaseSql *two_phase_sql; /* with caps.two_phase */
	const CdMarkerSql *marker_sql;	/* with caps.last_participant */
	const CdExprRules *expr_rules;	/* what may be computed there */
} CdAdapter;

/*
 * The SQL standard's COMMIT, ROLLBACK and savepoint statements, which a
 * CdAdapter initializer may take as they are (sql_begin differs).
 */
#define CD_SQL_STANDARD_TRANSACTION_CONTROL \
	.sql_commit = "COMMIT", \
	.sql_rollback = "ROLLBACK", \
	.sql_savepoint = "SAVEPOINT s%d", \
	.sql_release = "RELEASE SAVEPOINT s%d", \
	.sql_rollback_to = "ROLLBACK TO SAVEPOINT s%d"

/* the registry (adapters/registry.c) */
extern int	AdapterCount(void);
extern const CdAdapter *AdapterForDialect(CdDialect dialect);
extern bool AdapterParseDialect(const char *name, CdDialect *dialect);
extern const char *AdapterDialectName(CdDialect dialect);
extern char *AdapterDialectList(const char *conjunction);
extern bool AdapterUserMappingOptionOk(const char *keyword);
extern char *AdapterUserMappingOptions(const char *also);

/* classification by the adapter's lexical rules (adapters/lexer.c) */
extern CdStatementShape AdapterScan(const CdAdapter *adapter, const char *sql);

/* helpers shared by adapters (adapters/common.c) */
extern const char AdapterUpsertTopology[];
extern const char AdapterUpsertTopologyState[];
extern void AdapterSetError(CdRemoteError *err, const char *sqlstate,
							bool connection_lost, const char *message,
							const char *detail, const char *hint);
extern void AdapterRefuse(CdRemoteError *err, const char *sqlstate,
						  const char *message, const char *detail);
extern char *AdapterHexBytes(const char *data, int len);
extern char *AdapterQuoteIdent(const char *ident, char quote);
extern char *AdapterQuoteStandardIdent(const char *ident);
extern char *AdapterConninfoHostPort(const char *conninfo);
extern char *AdapterKeyMatch(const CdAdapter *adapter, const char *column, int n);
extern char *AdapterKeysMatch(const CdAdapter *adapter, const char *column, int first,
							  int nkeys, bool *as_array);
extern char *AdapterQualifiedName(const CdAdapter *adapter, const char *schema,
								  const char *name);
extern char *AdapterWordList(List *words, const char *conjunction);
extern bool AdapterTooManyParams(int nparams, int max, const char *dialect,
								 CdRemoteError *err);
extern void AdapterDeliverRow(CdRowSink *sink, int ncols, const CdCell *cells,
							  MemoryContext row_context);
extern bool AdapterStopWaiting(void);
extern TimestampTz AdapterCleanupDeadline(void);
extern TimestampTz AdapterExecDeadline(int flags, bool *interruptible);
extern void AdapterSetGaveUp(CdRemoteError *err, int flags);
extern bool AdapterDeadlinePassed(TimestampTz deadline);
extern long AdapterWaitTimeout(TimestampTz deadline);

#endif							/* COLLEGEDB_ADAPTER_H */
