-- Security regression: what a role holding only collegedb.grant_routing
-- can send to shards, and that none of it crashes the server, reaches a
-- file, a pointer or collegedb's own tables, or is taken for what it is
-- not.  1. the SQLite sandbox (functions, pragmas and statements from
-- SQLite's documentation); 2. each dialect classifies its own statements
-- (MySQL's executable comments); 3. parameter limits; 4. duplicate keys;
-- 5. MySQL strict mode and keys longer than a tombstone holds.
-- test/t/100_stalls.pl covers stalled shards, test/t/060_security.pl
-- passwords.
CREATE EXTENSION collegedb;
\set VERBOSITY terse
\i sql/common/env.sql
SELECT current_user AS me \gset
\i sql/common/try.sql
CREATE FUNCTION tries(VARIADIC sqls text[]) RETURNS TABLE (statement text, outcome text)
LANGUAGE sql AS $$
  SELECT s, try(s) FROM unnest(sqls) WITH ORDINALITY AS t(s, i) ORDER BY i
$$;

\set lite_db :sqlite_dir '/sandbox_lite.db'
CREATE SERVER lite FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'lite_db');
CREATE DATABASE collegedb_sandbox;
CREATE SERVER pg FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'postgres', host :'pg_host', port :'pg_port', dbname 'collegedb_sandbox');
CREATE USER MAPPING FOR :"me" SERVER pg OPTIONS (user :'me');
CREATE SERVER my FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'mysql', host :'my_host', port :'my_port', dbname 'collegedb_test');
CREATE USER MAPPING FOR PUBLIC SERVER my OPTIONS (user :'my_user', password :'my_password');
SELECT collegedb.add_shard('lite'), collegedb.add_shard('pg'), collegedb.add_shard('my');
SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE IF EXISTS notes') ORDER BY shard;
SELECT shard, ok FROM collegedb.run_on_all('CREATE TABLE notes (id VARCHAR(600) PRIMARY KEY, body TEXT)')
 ORDER BY shard;
SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE IF EXISTS victims') ORDER BY shard;
SELECT shard, ok FROM collegedb.run_on_all('CREATE TABLE victims (id INTEGER)') ORDER BY shard;
SELECT shard, ok FROM collegedb.run_on_all('INSERT INTO victims VALUES (1)') ORDER BY shard;
SELECT collegedb.register_table('notes', 'id');
SELECT collegedb.set_mapping('k', 'lite'), collegedb.set_mapping('k2', 'lite'), collegedb.set_mapping('pk', 'pg'),
       collegedb.set_mapping('mk', 'my');
CREATE ROLE regress_sb_app;
SELECT collegedb.grant_routing('regress_sb_app');
CREATE USER MAPPING FOR regress_sb_app SERVER pg OPTIONS (user :'me', password_required 'false');

-- 1. SQLite.  The attack of the issue: fts3_tokenizer hands out a library
-- address, and takes one back from a bytea parameter; an fts3 table using
-- it then called through the pointer.  Refused, and the server stays up.
SET ROLE regress_sb_app;
SELECT * FROM tries(
  $$SELECT collegedb.first('k', 'SELECT hex(fts3_tokenizer(''simple'')) AS p')$$,
  $$SELECT collegedb.first('k', 'SELECT fts3_tokenizer(''evil'', $1) AS p', '\x4141414141414141'::bytea)$$,
  $$SELECT collegedb.run('k', 'CREATE VIRTUAL TABLE crash USING fts3(x, tokenize=evil)')$$,
  $$SELECT collegedb.run('k', 'INSERT INTO crash VALUES (''boom'')')$$);
SELECT collegedb.first('k', 'SELECT 1 AS still_up');

-- every function of SQLite's documentation that touches memory, files or
-- the library: refused (the CLI's readfile and friends do not exist in
-- the library at all)
SELECT * FROM tries(
  $$SELECT collegedb.first('k', 'SELECT load_extension(''/usr/lib/x86_64-linux-gnu/libsqlite3.so.0'')')$$,
  $$SELECT collegedb.first('k', 'SELECT load_extension(''/tmp/evil'', ''sqlite3_evil_init'')')$$,
  $$SELECT collegedb.first('k', 'SELECT fts3_tokenizer(''porter'')')$$,
  $$SELECT collegedb.first('k', 'SELECT fts5(NULL)')$$,
  $$SELECT collegedb.first('k', 'SELECT rtreenode(2, x''00'')')$$,
  $$SELECT collegedb.first('k', 'SELECT rtreecheck(''notes'')')$$,
  $$SELECT collegedb.first('k', 'SELECT readfile(''/etc/passwd'')')$$,
  $$SELECT collegedb.first('k', 'SELECT writefile(''/tmp/collegedb-x'', ''y'')')$$,
  $$SELECT collegedb.first('k', 'SELECT edit(''x'')')$$,
  $$SELECT collegedb.first('k', 'SELECT sqlite_rename_table(1, 2, 3, 4, 5, 6, 7)')$$,
  $$SELECT collegedb.first('k', 'SELECT optimize() FROM notes')$$);
-- harmless functions work, operators that are functions too
SELECT collegedb.first('k', 'SELECT upper(''a'') AS u, json_extract(''{"a":1}'', ''$.a'') AS j, '
                            '''{"b":2}'' ->> ''$.b'' AS arrow, round(pi(), 2) AS pi, '
                            'length(randomblob(10)) AS n, strftime(''%Y'', ''2026-01-01'') AS y, '
                            'coalesce(NULL, 1) AS c, ''abc'' LIKE ''a%'' AS l');

-- pragmas: those that name files, change the journal, durability,
-- locking, memory, the schema's integrity or collegedb's own settings are
-- refused; reading most, and a few harmless settings, work
SELECT * FROM tries(
  $$SELECT collegedb.run('k', 'PRAGMA writable_schema = ON')$$,
  $$SELECT collegedb.run('k', 'PRAGMA writable_schema = RESET')$$,
  $$SELECT collegedb.run('k', 'PRAGMA journal_mode = OFF')$$,
  $$SELECT collegedb.run('k', 'PRAGMA main.journal_mode = DELETE')$$,
  $$SELECT collegedb.run('k', 'PRAGMA synchronous = OFF')$$,
  $$SELECT collegedb.run('k', 'PRAGMA locking_mode = EXCLUSIVE')$$,
  $$SELECT collegedb.run('k', 'PRAGMA mmap_size = 1000000000')$$,
  $$SELECT collegedb.run('k', 'PRAGMA cache_size = -2000000')$$,
  $$SELECT collegedb.run('k', 'PRAGMA soft_heap_limit = 1')$$,
  $$SELECT collegedb.run('k', 'PRAGMA hard_heap_limit = 1')$$,
  $$SELECT collegedb.run('k', 'PRAGMA threads = 8')$$,
  $$SELECT collegedb.run('k', 'PRAGMA busy_timeout = 100000000')$$,
  $$SELECT collegedb.run('k', 'PRAGMA trusted_schema = ON')$$,
  $$SELECT collegedb.run('k', 'PRAGMA ignore_check_constraints = ON')$$,
  $$SELECT collegedb.run('k', 'PRAGMA legacy_alter_table = ON')$$,
  $$SELECT collegedb.run('k', 'PRAGMA foreign_keys = OFF')$$,
  $$SELECT collegedb.run('k', 'PRAGMA query_only = ON')$$,
  $$SELECT collegedb.run('k', 'PRAGMA schema_version = 1')$$,
  $$SELECT collegedb.run('k', 'PRAGMA secure_delete = OFF')$$,
  $$SELECT collegedb.run('k', 'PRAGMA auto_vacuum = FULL')$$,
  $$SELECT collegedb.run('k', 'PRAGMA page_size = 512')$$,
  $$SELECT collegedb.run('k', 'PRAGMA max_page_count = 1')$$,
  $$SELECT collegedb.run('k', 'PRAGMA journal_size_limit = 0')$$,
  $$SELECT collegedb.run('k', 'PRAGMA wal_autocheckpoint = 0')$$,
  $$SELECT collegedb.run('k', 'PRAGMA cell_size_check = ON')$$,
  $$SELECT collegedb.run('k', 'PRAGMA recursive_triggers = OFF')$$,
  $$SELECT collegedb.run('k', 'PRAGMA case_sensitive_like = ON')$$,
  $$SELECT collegedb.run('k', 'PRAGMA temp_store = MEMORY')$$,
  $$SELECT collegedb.run('k', 'PRAGMA temp_store_directory = ''/tmp''')$$,
  $$SELECT collegedb.run('k', 'PRAGMA data_store_directory = ''/tmp''')$$,
  $$SELECT collegedb.run('k', 'PRAGMA database_list')$$,
  $$SELECT collegedb.first('k', 'SELECT file FROM pragma_database_list')$$,
  $$SELECT collegedb.run('k', 'PRAGMA encoding = ''UTF-16''')$$,
  $$SELECT collegedb.run('k', 'PRAGMA read_uncommitted = ON')$$,
  $$SELECT collegedb.run('k', 'PRAGMA full_column_names = ON')$$,
  $$SELECT collegedb.run('k', 'PRAGMA count_changes = ON')$$,
  $$SELECT collegedb.run('k', 'PRAGMA default_cache_size = 1')$$,
  $$SELECT collegedb.run('k', 'PRAGMA vdbe_trace = ON')$$,
  $$SELECT collegedb.run('k', 'PRAGMA parser_trace = ON')$$,
  $$SELECT collegedb.run('k', 'PRAGMA key = ''x''')$$,
  $$SELECT collegedb.run('k', 'PRAGMA shrink_memory')$$,
  $$SELECT collegedb.run('k', 'PRAGMA journal_mode')$$,
  $$SELECT collegedb.run('k', 'PRAGMA writable_schema')$$,
  $$SELECT collegedb.run('k', 'PRAGMA table_info(notes)')$$,
  $$SELECT collegedb.run('k', 'PRAGMA integrity_check')$$,
  $$SELECT collegedb.run('k', 'PRAGMA user_version = 7')$$,
  $$SELECT collegedb.run('k', 'PRAGMA defer_foreign_keys = ON')$$);
SELECT collegedb.first('k', 'SELECT journal_mode, (SELECT count(*) FROM pragma_table_info(''notes'')) AS cols '
                            'FROM pragma_journal_mode');

-- other files: ATTACH in every spelling, VACUUM INTO, DETACH
SELECT * FROM tries(
  $$SELECT collegedb.run('k', 'ATTACH ''/tmp/collegedb-steal.db'' AS s')$$,
  $$SELECT collegedb.run('k', 'ATTACH ''file:/tmp/collegedb-steal.db?mode=rwc'' AS s')$$,
  $$SELECT collegedb.run('k', 'ATTACH '':memory:'' AS m')$$,
  $$SELECT collegedb.run('k', 'ATTACH '''' AS t')$$,
  $$SELECT collegedb.run('k', 'ATTACH DATABASE $1 AS s', '/tmp/collegedb-steal.db')$$,
  $$SELECT collegedb.run('k', 'VACUUM INTO ''/tmp/collegedb-steal.db''')$$,
  $$SELECT collegedb.run('k', 'VACUUM')$$,
  $$SELECT collegedb.run('k', 'DETACH main')$$);

-- collegedb's own tables: the tombstones a guard trusts, whatever the
-- spelling, directly, by shadowing, renaming or from a trigger
SELECT * FROM tries(
  $$SELECT collegedb.run('k', 'INSERT INTO collegedb_tombstones (table_name, shard_key, moved_to) VALUES (''notes'', ''k'', ''evil'')')$$,
  $$SELECT collegedb.run('k', 'REPLACE INTO main.collegedb_tombstones (table_name, shard_key, moved_to) VALUES (''notes'', ''k'', ''evil'')')$$,
  $$SELECT collegedb.run('k', 'INSERT INTO "COLLEGEDB_TOMBSTONES" (table_name, shard_key, moved_to) VALUES (''notes'', ''k'', ''evil'')')$$,
  $$SELECT collegedb.run('k', 'UPDATE collegedb_tombstones SET moved_to = ''evil''')$$,
  $$SELECT collegedb.run('k', 'DELETE FROM [collegedb_tombstones]')$$,
  $$SELECT collegedb.run('k', 'DROP TABLE collegedb_tombstones')$$,
  $$SELECT collegedb.run('k', 'ALTER TABLE collegedb_tombstones RENAME TO t')$$,
  $$SELECT collegedb.run('k', 'ALTER TABLE collegedb_tombstones ADD COLUMN x')$$,
  $$SELECT collegedb.run('k', 'ALTER TABLE notes RENAME TO collegedb_fake')$$,
  $$SELECT collegedb.run('k', 'ALTER TABLE notes RENAME TO ''collegedb_fake''')$$,
  $$SELECT collegedb.run('k', 'CREATE INDEX evil ON collegedb_tombstones (moved_to)')$$,
  $$SELECT collegedb.run('k', 'DROP INDEX collegedb_tombstones_key')$$,
  $$SELECT collegedb.run('k', 'CREATE TRIGGER t AFTER INSERT ON collegedb_tombstones BEGIN SELECT 1; END')$$,
  $$SELECT collegedb.run('k', 'CREATE TEMP TRIGGER t BEFORE DELETE ON collegedb_tombstones BEGIN SELECT RAISE(IGNORE); END')$$,
  $$SELECT collegedb.run('k', 'CREATE TEMP TABLE collegedb_tombstones (table_name, shard_key, moved_to)')$$,
  $$SELECT collegedb.run('k', 'CREATE TEMP VIEW collegedb_tombstones AS SELECT 1')$$,
  $$SELECT collegedb.run('k', 'CREATE TABLE collegedb_extra (x)')$$,
  $$SELECT collegedb.run('k', 'CREATE VIEW collegedb_view AS SELECT 1')$$,
  $$SELECT collegedb.run('k', 'CREATE VIRTUAL TABLE collegedb_fts USING fts5(x)')$$);
-- a trigger on an ordinary table may not write tombstones either: it is
-- refused when it fires, for routed statements and collegedb's own alike
SELECT collegedb.run('k', 'CREATE TRIGGER sneaky AFTER INSERT ON notes BEGIN '
                          'INSERT INTO collegedb_tombstones (table_name, shard_key, moved_to) '
                          'VALUES (''notes'', NEW.id, ''evil''); END');
SELECT try($$SELECT collegedb.run('k', 'INSERT INTO notes VALUES ($1, $2)', 'k', 'x')$$);
SELECT collegedb.run('k', 'DROP TRIGGER sneaky');

-- transaction control belongs to collegedb, in every dialect
SELECT * FROM tries(
  $$SELECT collegedb.run('k', 'COMMIT')$$,
  $$SELECT collegedb.run('k', 'BEGIN IMMEDIATE')$$,
  $$SELECT collegedb.run('k', 'ROLLBACK')$$,
  $$SELECT collegedb.run('k', 'SAVEPOINT x')$$,
  $$SELECT collegedb.run('k', 'RELEASE x')$$,
  $$SELECT collegedb.run('k', 'END')$$,
  $$SELECT collegedb.run('mk', 'XA START ''x''')$$,
  $$SELECT collegedb.run('mk', 'START TRANSACTION')$$);
RESET ROLE;
SELECT * FROM tries(
  $$SELECT collegedb.run('pk', 'COMMIT')$$,
  $$SELECT collegedb.run('pk', 'PREPARE TRANSACTION ''x''')$$,
  $$SELECT collegedb.run_on_shard('pg', 'ABORT')$$);
SET ROLE regress_sb_app;

-- no double-quoted-string fallback: "x" is a name; statements stay
-- within their limits
SELECT * FROM tries(
  $$SELECT collegedb.first('k', 'SELECT "no such column" AS x')$$,
  $$SELECT collegedb.run('k', 'INSERT INTO notes VALUES ("id", "body")')$$,
  $$SELECT collegedb.first('k', 'SELECT length(zeroblob(200000000)) AS n')$$,
  $$SELECT collegedb.first('k', 'SELECT length(randomblob(200000000)) AS n')$$,
  $$SELECT collegedb.first('k', 'SELECT length(replace(hex(zeroblob(30000000)), ''0'', ''00'')) AS n')$$,
  $$SELECT collegedb.first('k', 'SELECT 1' || repeat(' + 1', 300) || ' AS deep')$$,
  $$SELECT collegedb.first('k', (SELECT string_agg('SELECT ' || i, ' UNION ALL ') FROM generate_series(1, 300) i))$$,
  $$SELECT collegedb.first('k', 'SELECT ''a'' LIKE ''' || repeat('%a', 6000) || ''' AS l')$$,
  $$SELECT collegedb.first('k', 'SELECT max(' || (SELECT string_agg(i::text, ', ') FROM generate_series(1, 150) i) || ') AS m')$$,
  $$SELECT collegedb.run('k', 'CREATE VIRTUAL TABLE stats USING dbstat')$$,
  $$SELECT collegedb.run('k', 'CREATE VIRTUAL TABLE d USING fts4(body)')$$,
  $$SELECT collegedb.run('k', 'DROP TABLE d')$$);

-- nothing was written: no tombstone, no extra object, victims intact
RESET ROLE;
SELECT * FROM collegedb.all_on_shard('lite', 'SELECT count(*) AS tombstones FROM collegedb_tombstones');
SELECT * FROM collegedb.all_on_shard('lite', 'SELECT type, name FROM sqlite_master ORDER BY type, name');
SELECT * FROM collegedb.all_on_shard('lite', 'SELECT count(*) AS notes FROM notes');
-- collegedb's own statements still write tombstones and create its table
SELECT collegedb.reassign_shard('k', 'pg')->>'moved' AS moved;
SELECT * FROM collegedb.all_on_shard('lite', 'SELECT table_name, shard_key, moved_to FROM collegedb_tombstones');

-- 2. Classification is the dialect's.  MySQL runs the text of an
-- executable comment: a DELETE hidden there is a write, refused by
-- fanout, wherever the comment sits; PostgreSQL and SQLite read it as a
-- comment.  A statement that may reach several dialects is a read only
-- when each of them says so.
SET ROLE regress_sb_app;
SELECT * FROM tries(
  $$SELECT * FROM collegedb.fanout('/*!50000 DELETE FROM victims WHERE 1 OR */ (SELECT 1)')$$,
  $$SELECT * FROM collegedb.fanout('/*! DELETE FROM victims */')$$,
  $$SELECT * FROM collegedb.fanout('/*M!100100 DELETE FROM victims */ SELECT 1')$$,
  $$SELECT * FROM collegedb.fanout('SELECT 1 /*!50000 INTO OUTFILE ''/tmp/collegedb-x'' */')$$,
  $$SELECT * FROM collegedb.fanout('SELECT id FROM victims LOCK IN SHARE MODE')$$,
  $$SELECT collegedb.first_by_lookup_key('x', '/*!50000 DELETE FROM victims WHERE 1 OR */ (SELECT 1)')$$);
SELECT shard, value FROM collegedb.fanout('SELECT count(*) AS n FROM victims /* a comment */') ORDER BY shard;
SELECT shard, value FROM collegedb.fanout('SELECT replace(''a-b'', ''-'', ''+'') AS r') ORDER BY shard;
RESET ROLE;
SELECT * FROM collegedb.all_on_shard('my', 'SELECT count(*) AS victims FROM victims');
-- run_on_all classifies per shard: the write is transactional where it is one
SELECT shard, ok, rows FROM collegedb.run_on_all('SELECT 1 /*!50000 FROM victims WHERE 1 = 0 FOR UPDATE */')
 ORDER BY shard;

-- 3. More parameters than a dialect takes: a clear error before anything
-- is sent, and the session goes on
SELECT * FROM tries(
  $$SELECT collegedb.run('pk', 'INSERT INTO victims VALUES ($70000)', VARIADIC array_fill(7, ARRAY[70000]))$$,
  $$SELECT collegedb.run('mk', 'INSERT INTO victims VALUES ($70000)', VARIADIC array_fill(7, ARRAY[70000]))$$,
  $$SELECT collegedb.run('k2', 'INSERT INTO victims VALUES ($40000)', VARIADIC array_fill(7, ARRAY[40000]))$$,
  $$SELECT collegedb.run_on_shard('lite', 'INSERT INTO victims VALUES ($40000)', VARIADIC array_fill(7, ARRAY[40000]))$$);
SELECT shard, value FROM collegedb.fanout('SELECT count(*) AS n FROM victims') ORDER BY shard;

-- 4. A key listed twice runs once: IN and = ANY through a foreign table
SELECT shard, ok FROM collegedb.run_on_all('CREATE TABLE counters (id VARCHAR(10) PRIMARY KEY, n INTEGER)')
 ORDER BY shard;
CREATE FOREIGN TABLE counters (id text, n int) SERVER collegedb OPTIONS (key_column 'id');
INSERT INTO counters VALUES ('c1', 0), ('c2', 0), ('c3', 0);
UPDATE counters SET n = n + 1 WHERE id IN ('c1', 'c1');
UPDATE counters SET n = n + 1 WHERE id = ANY (ARRAY['c2', 'c2', 'c2']);
UPDATE counters SET n = n + 1 WHERE id IN ('c3', 'c1', 'c3');
SELECT * FROM counters WHERE id IN ('c1', 'c1', 'c2', 'c3', 'c2') ORDER BY id;
-- a row the front cannot take in the middle of a streamed result fails
-- the statement; the connection, abandoned midway, is opened anew
SELECT shard, ok FROM collegedb.run_on_all('CREATE TABLE mixed (id INTEGER PRIMARY KEY, v VARCHAR(10))')
 ORDER BY shard;
SELECT shard, ok, rows FROM collegedb.run_on_all(
  'INSERT INTO mixed (id, v) VALUES (1, ''1''), (2, ''2''), (3, ''3''), (4, ''x''), (5, ''5'')')
 ORDER BY shard;
SELECT * FROM tries(
  $$SELECT count(*) FROM collegedb.all('mk', 'SELECT v FROM mixed ORDER BY id') AS t(v int)$$,
  $$SELECT count(*) FROM collegedb.all('pk', 'SELECT v FROM mixed ORDER BY id') AS t(v int)$$,
  $$SELECT count(*) FROM collegedb.all('k2', 'SELECT v FROM mixed ORDER BY id') AS t(v int)$$);
SELECT collegedb.first('mk', 'SELECT count(*) AS n FROM mixed') AS my,
       collegedb.first('pk', 'SELECT count(*) AS n FROM mixed') AS pg,
       collegedb.first('k2', 'SELECT count(*) AS n FROM mixed') AS lite;
SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE mixed') ORDER BY shard;
-- a scan whose rows spill past work_mem reads them back safely (it used
-- to free a row the executor had already reset: a crash)
SELECT collegedb.run_on_shard('pg', 'CREATE TABLE many AS SELECT generate_series(1, 20000) AS i');
CREATE FOREIGN TABLE many (i int) SERVER pg;
SET work_mem = 64;
SELECT count(*), sum(i) FROM many;
SELECT count(*) FROM (SELECT * FROM many LIMIT 15000) AS s;
RESET work_mem;
SELECT collegedb.run_on_shard('pg', 'DROP TABLE many');

-- 5. MySQL sessions are strict: a value too long is an error, not cut
SELECT collegedb.first('mk', 'SELECT @@SESSION.sql_mode LIKE ''%STRICT_ALL_TABLES%'' AS strict, '
                             '@@SESSION.sql_mode LIKE ''%NO_BACKSLASH_ESCAPES%'' AS nbe');
SELECT collegedb.run_on_shard('my', 'CREATE TABLE IF NOT EXISTS short_t (v VARCHAR(3))');
SELECT try($$SELECT collegedb.run_on_shard('my', 'INSERT INTO short_t VALUES ($1)', 'too long')$$);
SELECT * FROM collegedb.all_on_shard('my', 'SELECT count(*) AS n FROM short_t');
SELECT collegedb.run_on_shard('my', 'DROP TABLE short_t');
-- a guarded write whose key is longer than MySQL's tombstones hold is
-- refused before anything is written
SELECT collegedb.set_mapping(repeat('x', 513), 'my');
SELECT try(format($$SELECT collegedb.run(%L, 'INSERT INTO notes VALUES ($1, $2)', %L, 'long')$$,
                  repeat('x', 513), repeat('x', 513)));
SELECT * FROM collegedb.all_on_shard('my', 'SELECT count(*) AS n FROM notes');
SELECT collegedb.set_mapping(repeat('y', 512), 'my');
SELECT collegedb.run(repeat('y', 512), 'INSERT INTO notes VALUES ($1, $2)', repeat('y', 512), 'fits');

-- a routed statement may turn NO_BACKSLASH_ESCAPES on for its session:
-- the adapter then finds placeholders, and checks that a read is one, by
-- the session's rules, where a literal ends at the next quote: this
-- statement hides INTO from the usual rules, not from the session's
SELECT collegedb.run('mk', 'SET SESSION sql_mode = CONCAT(@@SESSION.sql_mode, '',NO_BACKSLASH_ESCAPES'')');
SELECT try($$SELECT * FROM collegedb.all_on_shard('my', 'SELECT ''x\'' AS a, 1 INTO @v -- ''')$$);
SELECT collegedb.disconnect('my');

SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE victims') ORDER BY shard;
SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE notes') ORDER BY shard;
SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE counters') ORDER BY shard;
DROP EXTENSION collegedb CASCADE;
DROP DATABASE collegedb_sandbox;
DROP FUNCTION tries(text[]);
DROP FUNCTION try(text);
DROP OWNED BY regress_sb_app;
DROP ROLE regress_sb_app;
