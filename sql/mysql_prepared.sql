-- Server-side prepared statements on a MySQL/MariaDB shard: a statement
-- with parameters is prepared once per connection and executed by handle,
-- with its parameters bound in their own types; its rows read exactly as
-- the text protocol's.
CREATE EXTENSION collegedb;
\set VERBOSITY terse
\i sql/common/env.sql
\i sql/common/try.sql
CREATE SERVER s1 FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'mysql', host :'my_host', port :'my_port', dbname 'collegedb_test');
CREATE USER MAPPING FOR PUBLIC SERVER s1 OPTIONS (user :'my_user', password :'my_password');
SELECT collegedb.add_shard('s1');
-- a second shard on the same server, whose connection kills the first's
SELECT collegedb.run_on_shard('s1', 'CREATE DATABASE IF NOT EXISTS collegedb_ps');
CREATE SERVER s2 FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'mysql', host :'my_host', port :'my_port', dbname 'collegedb_ps');
CREATE USER MAPPING FOR PUBLIC SERVER s2 OPTIONS (user :'my_user', password :'my_password');
SELECT collegedb.add_shard('s2');

-- this session's statement counters on the shard (SHOW has no parameters:
-- it runs as text)
CREATE FUNCTION stmt_counters(OUT prepares int, OUT executes int, OUT closes int)
LANGUAGE sql AS $$
  SELECT max(CASE WHEN r->>'Variable_name' = 'Com_stmt_prepare' THEN (r->>'Value')::int END),
         max(CASE WHEN r->>'Variable_name' = 'Com_stmt_execute' THEN (r->>'Value')::int END),
         max(CASE WHEN r->>'Variable_name' = 'Com_stmt_close' THEN (r->>'Value')::int END)
  FROM collegedb.all_on_shard('s1', 'SHOW SESSION STATUS WHERE Variable_name IN (''Com_stmt_prepare'', ''Com_stmt_execute'', ''Com_stmt_close'')') AS r
$$;
CREATE TEMP TABLE c0 AS SELECT 0 AS step, * FROM stmt_counters();

SELECT collegedb.run_on_shard('s1', 'DROP TABLE IF EXISTS pt');
SELECT collegedb.run_on_shard('s1', 'CREATE TABLE pt (id BIGINT PRIMARY KEY, v VARCHAR(20))');
SELECT collegedb.run_on_shard('s1', 'INSERT INTO pt VALUES (1, ''one''), (2, ''two''), (9007199254740992, ''2^53''), (9007199254740993, ''2^53+1'')');

-- one statement run five times: one prepare, five executions; and a
-- routed read by key, five times: one more prepare, five executions
SELECT collegedb.set_mapping('key-1', 's1');
INSERT INTO c0 SELECT 1, * FROM stmt_counters();
SELECT k, collegedb.all_on_shard('s1', 'SELECT id, v FROM pt WHERE id = $1', k::int8)
FROM generate_series(1, 5) AS k ORDER BY k;
SELECT k, collegedb.first('key-1', 'SELECT v FROM pt WHERE id = $1', k::int8)
FROM generate_series(1, 5) AS k ORDER BY k;
INSERT INTO c0 SELECT 2, * FROM stmt_counters();
SELECT b.prepares - a.prepares AS prepares, b.executes - a.executes AS executes
FROM c0 a, c0 b WHERE a.step = 1 AND b.step = 2;

-- a BIGINT key above 2^53 is bound as a BIGINT and compared exactly
SELECT * FROM collegedb.all_on_shard('s1', 'SELECT id, v FROM pt WHERE id = $1 ORDER BY id', 9007199254740993::int8);
SELECT * FROM collegedb.all_on_shard('s1', 'SELECT id, v FROM pt WHERE id = $1 ORDER BY id', '9007199254740993'::text);

-- NULL parameters, of any type
SELECT * FROM collegedb.all_on_shard('s1', 'SELECT $1 IS NULL AS a, $2 IS NULL AS b, COALESCE($3, ''none'') AS c',
  NULL::int, NULL::bytea, NULL::text);
SELECT collegedb.run_on_shard('s1', 'INSERT INTO pt VALUES ($1, $2)', 3::int8, NULL::text);
SELECT * FROM collegedb.all_on_shard('s1', 'SELECT id, v FROM pt WHERE id = $1 AND v IS NULL', 3::int8);

-- writes report the rows they affected, as the text path does
SELECT collegedb.run_on_shard('s1', 'UPDATE pt SET v = $1 WHERE id < $2', 'small', 4::int8) AS prepared,
       collegedb.run_on_shard('s1', 'UPDATE pt SET v = ''small'' WHERE id < 4') AS text;
SELECT collegedb.run_on_shard('s1', 'DELETE FROM pt WHERE id = $1', 12345::int8) AS none;

-- errors keep their SQLSTATEs: a duplicate key, a bad parameter (refused
-- before anything is sent, as on the text path), an unknown column
SELECT try($$SELECT collegedb.run_on_shard('s1', 'INSERT INTO pt VALUES ($1, $2)', 1::int8, 'again')$$);
SELECT try($$SELECT collegedb.run_on_shard('s1', 'INSERT INTO pt VALUES (1, ''again'')')$$);
SELECT try($$SELECT collegedb.all_on_shard('s1', 'SELECT $1 + $2', 1)$$);
SELECT try($$SELECT collegedb.all_on_shard('s1', 'SELECT $1', 'NaN'::float8)$$);
SELECT try($$SELECT collegedb.all_on_shard('s1', 'SELECT nope FROM pt WHERE id = $1', 1)$$);
-- the statement still works after its errors
SELECT * FROM collegedb.all_on_shard('s1', 'SELECT id, v FROM pt WHERE id = $1', 2::int8);

-- every type reads the same through a prepared statement as through the
-- text protocol (the same statement without parameters)
SELECT collegedb.run_on_shard('s1', 'DROP TABLE IF EXISTS types');
SELECT collegedb.run_on_shard('s1', 'CREATE TABLE types (id INT PRIMARY KEY, '
  'ti TINYINT, si SMALLINT, mi MEDIUMINT, i INT, bi BIGINT, ubi BIGINT UNSIGNED, '
  'dec1 DECIMAL(20,6), dec0 DECIMAL(5,0), fl FLOAT, db DOUBLE, '
  'd DATE, dt DATETIME, dt6 DATETIME(6), ts3 TIMESTAMP(3) NULL, t TIME, t6 TIME(6), y YEAR, '
  'b1 BIT(1), b64 BIT(64), bin BINARY(4), vbin VARBINARY(10), bl LONGBLOB, '
  'ch CHAR(5), vc VARCHAR(100), tx LONGTEXT, en ENUM(''x'', ''y''), st SET(''p'', ''q''), js JSON, '
  'zf INT(6) ZEROFILL) DEFAULT CHARSET=utf8mb4');
SELECT collegedb.run_on_shard('s1', 'INSERT INTO types VALUES '
  '(1, -128, -32768, -8388608, -2147483648, -9223372036854775808, 18446744073709551615, '
  '-12345678901234.123456, 99999, 1.1, 0.1, '
  '''1000-01-01'', ''9999-12-31 23:59:59'', ''2024-02-29 12:34:56.000001'', ''2038-01-19 03:14:07.999'', '
  '''-838:59:59'', ''12:00:00.5'', 1901, b''1'', b''1111111111111111111111111111111111111111111111111111111111111111'', '
  'X''00FF0010'', X''DEADBEEF'', REPEAT(X''00FF'', 3000), ''ab'', ''ünïcödé 😀'', REPEAT(''é😀'', 2000), '
  '''y'', ''p,q'', ''{"k": [1, 2.50, "x"]}'', 42), '
  '(2, 127, 32767, 8388607, 2147483647, 9223372036854775807, 0, 0.000001, -1, -3.4e38, 1.7976931348623157e308, '
  '''2024-01-02'', ''2024-01-02 03:04:05'', ''2024-01-02 03:04:05.250000'', ''2024-01-02 03:04:05.000'', '
  '''23:59:59'', ''838:59:59.000000'', 2155, b''0'', b''0'', ''abcd'', '''', '''', '''', '''', '''', '
  '''x'', '''', ''null'', 0), '
  '(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '
  'NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)');
CREATE TEMP TABLE via_text AS
  SELECT r FROM collegedb.all_on_shard('s1', 'SELECT * FROM types ORDER BY id') AS r;
CREATE TEMP TABLE via_prepared AS
  SELECT r FROM collegedb.all_on_shard('s1', 'SELECT * FROM types WHERE id > $1 ORDER BY id', 0) AS r;
SELECT count(*) AS rows, bool_and(t.r::text = p.r::text) AS identical
FROM (SELECT r, row_number() OVER () AS n FROM via_text) t
JOIN (SELECT r, row_number() OVER () AS n FROM via_prepared) p USING (n);
-- column by column, without the long values
SELECT k, p.r->k AS prepared, t.r->k IS NOT DISTINCT FROM p.r->k AS same
FROM via_text t JOIN via_prepared p ON t.r->'id' = p.r->'id',
     jsonb_object_keys(p.r) AS k
WHERE k NOT IN ('bl', 'tx') AND p.r->>'id' <> '3'
ORDER BY p.r->>'id', k;
-- values longer than their first buffer are fetched again, whole
SELECT length(r->>'bl') AS bl_chars, length(r->>'tx') AS tx_chars, r->>'tx' = repeat('é😀', 2000) AS tx_ok
FROM via_prepared WHERE r->>'id' = '1';

-- an ALTER TABLE under a cached statement: the next execution has the
-- new row description
SELECT * FROM collegedb.all_on_shard('s1', 'SELECT * FROM pt WHERE id = $1', 1::int8);
SELECT collegedb.run_on_shard('s1', 'ALTER TABLE pt ADD COLUMN extra INT NOT NULL DEFAULT 7');
SELECT * FROM collegedb.all_on_shard('s1', 'SELECT * FROM pt WHERE id = $1', 1::int8);
SELECT collegedb.run_on_shard('s1', 'ALTER TABLE pt DROP COLUMN v');
SELECT * FROM collegedb.all_on_shard('s1', 'SELECT * FROM pt WHERE id = $1', 1::int8);

-- statements that are not prepared: SET (session commands) is never
-- tried; what the server cannot prepare (a ? where SHOW ... LIKE takes
-- only a literal) is tried once, runs as text, and the refusal is
-- remembered
INSERT INTO c0 SELECT 3, * FROM stmt_counters();
SELECT collegedb.run_on_shard('s1', 'SET @cd_x = $1', 5);
SELECT * FROM collegedb.all_on_shard('s1', 'SELECT @cd_x AS x');
SELECT k, r FROM generate_series(1, 2) AS k,
  collegedb.all_on_shard('s1', 'SHOW TABLES LIKE $1', 'p_') AS r ORDER BY k;
INSERT INTO c0 SELECT 4, * FROM stmt_counters();
SELECT b.prepares - a.prepares AS prepares, b.executes - a.executes AS executes
FROM c0 a, c0 b WHERE a.step = 3 AND b.step = 4;

-- eviction: the cache holds 12 statements so far (two without a handle:
-- the one that failed to prepare, the one the server refused); 70 more
-- through a cache of 64 evict the 18 least recently used, and the first
-- of the 70 runs again prepared anew, evicting one more: 17 of the 19 had
-- a handle to close on the server
INSERT INTO c0 SELECT 5, * FROM stmt_counters();
SELECT count(*) FROM generate_series(1, 70) AS k,
  collegedb.all_on_shard('s1', format('SELECT $1 + %s AS v', k), k) AS r
WHERE (r->>'v')::int = 2 * k;
SELECT count(*) FROM collegedb.all_on_shard('s1', 'SELECT $1 + 1 AS v', 1);
INSERT INTO c0 SELECT 6, * FROM stmt_counters();
SELECT b.prepares - a.prepares AS prepares, b.executes - a.executes AS executes,
       b.closes - a.closes AS closes
FROM c0 a, c0 b WHERE a.step = 5 AND b.step = 6;

-- the server kills the connection: the statement fails as a lost
-- connection or runs on a new one, and the next runs on a new connection
-- with a cache of its own
SELECT r->>'id' AS id FROM collegedb.all_on_shard('s1', 'SELECT CONNECTION_ID() AS id') AS r \gset old_
SELECT collegedb.run_on_shard('s2', 'KILL CONNECTION ' || :'old_id');
SELECT try($$SELECT collegedb.all_on_shard('s1', 'SELECT id FROM pt WHERE id = $1', 1::int8)$$)
  ~ '^(ok|08006: |57014: )' AS lost_or_ok;
SELECT * FROM collegedb.all_on_shard('s1', 'SELECT id FROM pt WHERE id = $1', 1::int8);
SELECT (r->>'id') <> :'old_id' AS new_connection
FROM collegedb.all_on_shard('s1', 'SELECT CONNECTION_ID() AS id') AS r;
SELECT prepares = 1 AS prepared_anew, executes BETWEEN 1 AND 2 AS executed FROM stmt_counters();

-- statement_timeout during a prepared execution cancels it on the shard;
-- the connection is usable after
SET statement_timeout = '300ms';
SELECT * FROM collegedb.all_on_shard('s1', 'SELECT SLEEP($1) AS s', 10);
RESET statement_timeout;
SELECT * FROM collegedb.all_on_shard('s1', 'SELECT SLEEP($1) AS s', 0);
SELECT * FROM collegedb.all_on_shard('s1', 'SELECT id FROM pt WHERE id = $1', 2::int8);

SELECT collegedb.run_on_shard('s1', 'DROP TABLE pt');
SELECT collegedb.run_on_shard('s1', 'DROP TABLE types');
SELECT collegedb.run_on_shard('s1', 'DROP DATABASE collegedb_ps');
DROP FUNCTION stmt_counters();
DROP FUNCTION try(text);
DROP EXTENSION collegedb CASCADE;
