-- The statement surface on one dialect, included by sqlite.sql,
-- postgres.sql and mysql.sql.  They register shards s1 and s2 of their
-- dialect and set the dialect's type names: bytes_t, ts_t, tstz_t,
-- uuid_t, json_t.

\i sql/common/try.sql

SELECT shard, ok, error FROM collegedb.run_on_all('DROP TABLE IF EXISTS items') ORDER BY shard;
SELECT format('CREATE TABLE items (id VARCHAR(64) PRIMARY KEY, n INTEGER, price DECIMAL(12,2), '
              'f DOUBLE PRECISION, ok BOOLEAN, data %s, d DATE, ts %s, tstz %s, u %s, doc %s, '
              'note VARCHAR(200))', :'bytes_t', :'ts_t', :'tstz_t', :'uuid_t', :'json_t') AS ddl \gset
SELECT shard, ok, rows, error FROM collegedb.run_on_all(:'ddl') ORDER BY shard;

-- parameters of each type arrive as the natural native value
SELECT collegedb.run_on_shard('s1',
  'INSERT INTO items (id, n, price, f, ok, data, d, ts, tstz, u, doc, note) '
  'VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)',
  'a'::text, 42, 1234.56::numeric, 2.5::float8, true, '\x00ff10'::bytea,
  '2024-02-29'::date, '2024-01-02 03:04:05.25'::timestamp,
  '2024-01-02 03:04:05+02'::timestamptz, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid,
  '{"k": [1, 2]}'::jsonb, 'it''s "quoted" \ and ünïcödé'::varchar);
SELECT collegedb.run_on_shard('s1',
  'INSERT INTO items (id, n, price, f, ok, data, d, ts, tstz, u, doc, note) '
  'VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)',
  'b', 7::int2, 9999999999.99::numeric, 0.1::float4, false, NULL::bytea,
  NULL::date, NULL::timestamp, NULL::timestamptz, NULL::uuid, NULL::json, NULL);
SELECT * FROM collegedb.all_on_shard('s1', 'SELECT id, n, price, f, data, d, note FROM items ORDER BY id');
SELECT * FROM collegedb.all_on_shard('s1', 'SELECT id, ts, tstz, u, doc FROM items ORDER BY id');
-- a parameter twice; placeholders inside literals, identifiers and comments are text
SELECT * FROM collegedb.all_on_shard('s1',
  'SELECT count(*) AS n, ''$1'' AS lit FROM items /* $2 */ WHERE id = $1 OR note = $1 -- $3',
  'a');
SELECT collegedb.run_on_shard('s1', 'UPDATE items SET n = n + $1 WHERE id IN ($2, $3)', 1, 'a', 'b');
SELECT * FROM collegedb.all_on_shard('s1', 'SELECT id, n FROM items ORDER BY id');
-- a VARIADIC array works like separate arguments
SELECT * FROM collegedb.all_on_shard('s1', 'SELECT id FROM items WHERE id = $1 OR id = $2 ORDER BY id',
  VARIADIC ARRAY['a', 'b']);

-- bad statements: each fails with its SQLSTATE, on the shard or before it
SELECT try($$SELECT collegedb.run_on_shard('s1', 'SELEC 1')$$);
SELECT try($$SELECT collegedb.run_on_shard('s1', 'SELECT * FROM no_such_table')$$);
SELECT try($$SELECT collegedb.run_on_shard('s1', 'INSERT INTO items (id) VALUES ($1)', 'a')$$);
SELECT try($$SELECT collegedb.run_on_shard('s1', 'SELECT $1, $2', 1)$$);
SELECT try($$SELECT collegedb.run_on_shard('s1', 'SELECT 1', 1)$$);
SELECT try($$SELECT collegedb.run_on_shard('s1', '  ;  -- nothing')$$);
SELECT try($$SELECT collegedb.run_on_shard('s1', 'SELECT 1; SELECT 2')$$);
SELECT try($$SELECT collegedb.run_on_shard('s1', NULL)$$);
SELECT try($$SELECT collegedb.run_on_shard('nowhere', 'SELECT 1')$$);
-- the remote error keeps its identity and says where it came from
\set VERBOSITY default
SELECT collegedb.run_on_shard('s1', 'INSERT INTO items (id) VALUES ($1)', 'a');
\set VERBOSITY terse
SELECT count(*) FROM collegedb.all_on_shard('s1', 'SELECT id FROM items');

-- statements in one front transaction share one remote transaction
BEGIN;
SELECT collegedb.run_on_shard('s1', 'INSERT INTO items (id) VALUES ($1)', 'rolled-back');
SELECT collegedb.run_on_shard('s2', 'INSERT INTO items (id) VALUES ($1)', 'rolled-back');
SELECT shard, in_transaction FROM collegedb.connections() ORDER BY shard;
ROLLBACK;
SELECT count(*) FROM collegedb.all_on_shard('s1', 'SELECT id FROM items WHERE id = $1', 'rolled-back');
SELECT count(*) FROM collegedb.all_on_shard('s2', 'SELECT id FROM items WHERE id = $1', 'rolled-back');
SELECT shard, in_transaction FROM collegedb.connections() ORDER BY shard;

BEGIN;
SELECT collegedb.run_on_shard('s1', 'INSERT INTO items (id) VALUES ($1)', 'committed');
SELECT collegedb.run_on_shard('s2', 'INSERT INTO items (id) VALUES ($1)', 'committed');
COMMIT;
SELECT * FROM collegedb.all_on_shard('s1', 'SELECT id FROM items WHERE id = $1', 'committed');
SELECT * FROM collegedb.all_on_shard('s2', 'SELECT id FROM items WHERE id = $1', 'committed');

-- an error rolls the front transaction back, and the shards with it
BEGIN;
SELECT collegedb.run_on_shard('s2', 'INSERT INTO items (id) VALUES ($1)', 'lost');
SELECT collegedb.run_on_shard('s1', 'INSERT INTO items (id) VALUES ($1)', 'a');
COMMIT;
SELECT count(*) FROM collegedb.all_on_shard('s2', 'SELECT id FROM items WHERE id = $1', 'lost');

-- savepoints follow the front's subtransactions
BEGIN;
SELECT collegedb.run_on_shard('s1', 'INSERT INTO items (id) VALUES ($1)', 'sp-kept');
SAVEPOINT one;
SELECT collegedb.run_on_shard('s1', 'INSERT INTO items (id) VALUES ($1)', 'sp-undone');
ROLLBACK TO SAVEPOINT one;
SAVEPOINT two;
SELECT collegedb.run_on_shard('s1', 'INSERT INTO items (id) VALUES ($1)', 'a');
ROLLBACK TO SAVEPOINT two;
SELECT collegedb.run_on_shard('s1', 'INSERT INTO items (id) VALUES ($1)', 'sp-after-error');
SAVEPOINT three;
SELECT collegedb.run_on_shard('s2', 'INSERT INTO items (id) VALUES ($1)', 'sp-released');
RELEASE SAVEPOINT three;
COMMIT;
SELECT * FROM collegedb.all_on_shard('s1', 'SELECT id FROM items WHERE id LIKE $1 ORDER BY id', 'sp-%');
SELECT * FROM collegedb.all_on_shard('s2', 'SELECT id FROM items WHERE id LIKE $1 ORDER BY id', 'sp-%');

-- a PL/pgSQL exception block is a subtransaction too
DO $$
BEGIN
  PERFORM collegedb.run_on_shard('s1', 'INSERT INTO items (id) VALUES ($1)', 'plpgsql-undone');
  PERFORM collegedb.run_on_shard('s1', 'INSERT INTO items (id) VALUES ($1)', 'a');
EXCEPTION WHEN unique_violation THEN
  RAISE NOTICE 'caught %', SQLSTATE;
END $$;
SELECT count(*) FROM collegedb.all_on_shard('s1', 'SELECT id FROM items WHERE id = $1', 'plpgsql-undone');

-- run_on_all reports a failing shard as a row and keeps the others' work
SELECT collegedb.run_on_shard('s2', 'DROP TABLE items');
SELECT shard, ok, rows, error IS NOT NULL AS failed
  FROM collegedb.run_on_all('UPDATE items SET note = ''touched''') ORDER BY shard;
SELECT count(*) FROM collegedb.all_on_shard('s1', 'SELECT id FROM items WHERE note = $1', 'touched');

-- fan-out: one read on every shard at once, rows tagged with their shard
SELECT shard, value, error FROM collegedb.fanout('SELECT count(*) AS n FROM items WHERE id <> $1', 'x')
 ORDER BY shard;
SELECT shard, value IS NULL AS no_value, error IS NOT NULL AS failed
  FROM collegedb.fanout('SELECT * FROM no_such_table') ORDER BY shard;
SELECT try($$SELECT * FROM collegedb.fanout('UPDATE items SET n = 0')$$);

-- the shard's size, measured in its dialect
SELECT collegedb.database_size('s1') > 0 AS measured, size_bytes > 0 AS in_stats
  FROM collegedb.shard_stats() WHERE shard = 's1';

-- connections are cached, listed and closed on request
SELECT shard, dialect, valid FROM collegedb.connections() ORDER BY shard;
SELECT collegedb.disconnect('s1');
SELECT collegedb.disconnect('s1');
SELECT shard FROM collegedb.connections() ORDER BY shard;
SELECT count(*) FROM collegedb.all_on_shard('s1', 'SELECT id FROM items');
SELECT collegedb.disconnect_all();
SELECT shard FROM collegedb.connections() ORDER BY shard;

-- routing by key on this dialect: records come back with the caller's types
SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE IF EXISTS items') ORDER BY shard;
SELECT shard, ok FROM collegedb.run_on_all(:'ddl') ORDER BY shard;
SELECT collegedb.set_mapping('key-1', 's1'), collegedb.set_mapping('key-2', 's2');
SELECT collegedb.run('key-' || i,
  'INSERT INTO items (id, n, price, f, ok, data, d, ts, tstz, u, doc, note) '
  'VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)',
  'key-' || i, i, 10.5 * i, i / 4.0, i = 1, '\x0aff'::bytea, '2024-03-01'::date + i,
  '2024-03-01 12:00:00'::timestamp, '2024-03-01 12:00:00+00'::timestamptz,
  'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1' || i, jsonb_build_object('i', i), 'row ' || i)
  FROM generate_series(1, 2) AS i;
SELECT * FROM collegedb.all('key-1', 'SELECT id, n, price, f, ok, data, d, ts, tstz, u, doc, note FROM items WHERE id = $1', 'key-1')
  AS t(id text, n int, price numeric, f float8, ok boolean, data bytea, d date, ts timestamp,
       tstz timestamptz, u uuid, doc jsonb, note varchar);
SELECT * FROM collegedb.all('key-2', 'SELECT id, ok, doc FROM items') AS t(id text, ok boolean, doc jsonb);
SELECT collegedb.first('key-2', 'SELECT id, n FROM items WHERE id = $1', 'key-2'),
       collegedb.first('key-1', 'SELECT id FROM items WHERE id = $1', 'key-2');
SELECT * FROM collegedb.all_json('key-1', 'SELECT id, price FROM items ORDER BY id');
SELECT collegedb.run('key-2', 'UPDATE items SET n = n * 10 WHERE id = $1', 'key-2');
SELECT (collegedb.first('key-2', 'SELECT n FROM items WHERE id = $1', 'key-2')->>'n')::int AS n;
SELECT collegedb.delete_mapping('key-1'), collegedb.delete_mapping('key-2');

-- computed placement on this dialect: s2 leaves the newest epoch, and its
-- keys are found under the older one and get exceptions
SELECT collegedb.register_table('items', 'id');
SELECT collegedb.configure(placement => 'computed');
SELECT count(*) FILTER (WHERE collegedb.rendezvous_owner('c-' || i, ARRAY['s1', 's2']) = 's2') AS on_s2,
       sum(collegedb.run('c-' || i, 'INSERT INTO items (id, n) VALUES ($1, $2)', 'c-' || i, i)) AS written
  FROM generate_series(1, 20) AS i;
SELECT collegedb.set_shard_state('s2', drain => 'draining');
SELECT epoch, shards FROM collegedb.epochs;
SELECT count(collegedb.first('c-' || i, 'SELECT n FROM items WHERE id = $1', 'c-' || i)) AS readable
  FROM generate_series(1, 20) AS i;
SELECT count(*) AS exceptions FROM collegedb.mapping;
SELECT sum(collegedb.run('c-' || i, 'UPDATE items SET n = n + 100 WHERE id = $1', 'c-' || i)) AS updated
  FROM generate_series(1, 20) AS i;
SELECT collegedb.set_shard_state('s2', drain => 'active');
SELECT collegedb.configure(placement => 'kv');
SELECT collegedb.unregister_table('items');
SELECT count(collegedb.delete_mapping(m)) FROM (SELECT 'c-' || i AS m FROM generate_series(1, 20) AS i) AS k
 WHERE collegedb.get_lookup_keys(m) <> '{}';


-- a sharded foreign table on this dialect: rows go where their key's
-- mapping says, reads and writes by key reach one shard, others all
SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE IF EXISTS users') ORDER BY shard;
SELECT shard, ok FROM collegedb.run_on_all(
  'CREATE TABLE users (id VARCHAR(32) PRIMARY KEY, name VARCHAR(64), visits INTEGER, born DATE)')
  ORDER BY shard;
CREATE FOREIGN TABLE users (id text, name text, visits int, born date)
  SERVER collegedb OPTIONS (key_column 'id');
INSERT INTO users SELECT 'user-' || i, 'User ' || i, i % 7, '2000-01-01'::date + i
  FROM generate_series(1, 300) AS i;
SELECT count(*) AS mapped, count(DISTINCT shard) AS shards FROM collegedb.mapping;
-- every row sits on the shard its mapping names
SELECT s.shard, count(*) = count(m.key) AS where_mapped, count(*) > 50 AS balanced
  FROM (VALUES ('s1'), ('s2')) AS s(shard)
       CROSS JOIN LATERAL collegedb.all_on_shard(s.shard, 'SELECT id FROM users') AS r
       LEFT JOIN collegedb.mappings m ON m.key = collegedb.mapping_key(r->>'id') AND m.shard = s.shard
 GROUP BY s.shard ORDER BY s.shard;
SELECT * FROM users WHERE id = 'user-7';
SELECT id, visits FROM users WHERE id IN ('user-1', 'user-2', 'nobody') ORDER BY id;
SELECT id FROM users WHERE id = ANY (ARRAY['user-3', 'user-4']) ORDER BY id;
SELECT count(*), sum(visits), min(born), max(born) FROM users;
SELECT id, born FROM users WHERE born < '2000-01-04' AND visits >= 1 ORDER BY id;
SELECT id FROM users WHERE visits * 2 + 1 = 13 AND (name = 'User 6' OR name IS NULL) ORDER BY id;
SELECT id FROM users WHERE name LIKE 'User 29_' ORDER BY id LIMIT 3;
SELECT count(*) FROM users WHERE id = 'nobody';
SELECT u.id, u.name FROM (VALUES ('user-10'), ('user-20')) AS l(id) JOIN users u USING (id) ORDER BY 1;
PREPARE by_id(text) AS SELECT name FROM users WHERE id = $1;
EXECUTE by_id('user-1');
EXECUTE by_id('user-2');
EXECUTE by_id('user-3');
EXECUTE by_id('user-4');
EXECUTE by_id('user-5');
EXECUTE by_id('user-6');
EXECUTE by_id('user-300');
EXPLAIN (COSTS OFF, VERBOSE) EXECUTE by_id('user-7');
DEALLOCATE by_id;
EXPLAIN (COSTS OFF) SELECT count(*) FROM users;
EXPLAIN (COSTS OFF, VERBOSE) SELECT id FROM users WHERE id = 'user-7' AND visits > 1;

-- writes by key, with RETURNING (where the dialect has none, row by row)
UPDATE users SET visits = visits + 10, name = 'Seven' WHERE id = 'user-7';
SELECT id, name, visits FROM users WHERE id = 'user-7';
SELECT try($$UPDATE users SET visits = 0 WHERE id = 'user-7' RETURNING visits$$);
UPDATE users SET visits = visits + 1 WHERE id = 'user-7' RETURNING id, visits;
SELECT visits FROM users WHERE id = 'user-7';
DELETE FROM users WHERE id IN ('user-8', 'user-9');
SELECT try($$DELETE FROM users WHERE id = 'user-10' RETURNING id$$);
SELECT count(*) FROM users WHERE id = 'user-10';
SELECT count(*) FROM users;
INSERT INTO users VALUES ('user-new', 'New', 1, NULL) RETURNING id, name, born;
SELECT * FROM users WHERE id = 'user-new';
EXPLAIN (COSTS OFF, VERBOSE) DELETE FROM users WHERE id = 'user-new';
DELETE FROM users WHERE id = 'user-new';

-- what the foreign table refuses, with nothing written
SELECT try($$UPDATE users SET visits = 0$$);
SELECT try($$DELETE FROM users WHERE visits = 3$$);
SELECT try($$UPDATE users SET id = 'other' WHERE id = 'user-1'$$);
SELECT try($$INSERT INTO users VALUES (NULL, 'no key', 0, NULL)$$);
SELECT try($$INSERT INTO users VALUES ('user-1', 'again', 0, NULL) ON CONFLICT (id) DO NOTHING$$);
SELECT try($$INSERT INTO users VALUES ('user-1', 'again', 0, NULL) ON CONFLICT (id) DO UPDATE SET name = 'again'$$);
SELECT try($$INSERT INTO users VALUES ('user-1', 'duplicate', 0, NULL)$$) ~ '^23' AS unique_violation;
-- a new value no shard computes: computed here, the row changed by its key
SELECT try($$UPDATE users SET visits = length(md5(name)) WHERE id = 'user-1'$$);
SELECT visits FROM users WHERE id = 'user-1';
SELECT count(*), sum(visits) FROM users;
-- unless asked: a statement on every shard
SET collegedb.allow_multi_shard_modify = on;
UPDATE users SET visits = 1 WHERE visits = 3;
DELETE FROM users WHERE visits = 1 AND born > '2000-10-01';
SELECT try($$DELETE FROM users WHERE id LIKE 'user-2__'$$);
RESET collegedb.allow_multi_shard_modify;
SELECT count(*), sum(visits) FROM users;

-- COPY FROM routes every row by its key, as INSERT does (text and CSV)
COPY users (id, name, visits, born) FROM STDIN;
copy-1	Copied 1	1	2001-01-01
copy-2	Copied 2	\N	\N
copy-3	Tab\there	3	2001-01-03
\.
COPY users FROM STDIN (FORMAT csv, HEADER true);
id,name,visits,born
copy-4,"Quoted, with comma",4,2001-01-04
copy-5,,5,
\.
SELECT id, name, visits, born FROM users WHERE id LIKE 'copy-%' ORDER BY id;
SELECT s.shard, count(*) = count(m.key) AS where_mapped
  FROM (VALUES ('s1'), ('s2')) AS s(shard)
       CROSS JOIN LATERAL collegedb.all_on_shard(s.shard, 'SELECT id FROM users WHERE id LIKE ''copy-%''') AS r
       LEFT JOIN collegedb.mappings m ON m.key = collegedb.mapping_key(r->>'id') AND m.shard = s.shard
 GROUP BY s.shard ORDER BY s.shard;
-- a row without a key, or a key that exists, fails the COPY; its earlier rows go with it
SELECT try($$COPY users FROM PROGRAM 'printf "copy-6\tSix\t6\t\\N\n\\N\tNo key\t0\t\\N\n"'$$);
SELECT try($$COPY users FROM PROGRAM 'printf "copy-7\tSeven\t7\t\\N\ncopy-1\tAgain\t0\t\\N\n"'$$) ~ '^23' AS unique_violation;
SELECT count(*) FROM users WHERE id IN ('copy-6', 'copy-7');
DELETE FROM users WHERE id IN ('copy-1', 'copy-2', 'copy-3', 'copy-4', 'copy-5');

-- ON CONFLICT DO NOTHING skips the rows that conflict on the shard and
-- counts only the others; a MySQL shard cannot skip exactly those rows, so
-- a fleet with one refuses it before anything is sent
CREATE FUNCTION inserted(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  n bigint;
BEGIN
  EXECUTE sql;
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n || ' inserted';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
SELECT inserted($$INSERT INTO users VALUES ('user-1', 'again', 0, NULL), ('conflict-1', 'new', 5, NULL),
                                           ('conflict-1', 'twice', 6, NULL) ON CONFLICT DO NOTHING$$);
SELECT inserted($$INSERT INTO users SELECT 'conflict-' || i, 'n' || i, i, NULL FROM generate_series(1, 3) AS i
                  ON CONFLICT DO NOTHING$$);
SELECT id, name, visits FROM users WHERE id IN ('user-1') OR id LIKE 'conflict-%' ORDER BY id;
DELETE FROM users WHERE id IN ('conflict-1', 'conflict-2', 'conflict-3');
DROP FUNCTION inserted(text);

-- ANALYZE samples every shard's rows: the row count is the whole table's,
-- and the planner estimates from the statistics
ANALYZE users;
SELECT reltuples = (SELECT count(*) FROM users) AS counted_every_shard
  FROM pg_class WHERE oid = 'users'::regclass;
SELECT attname, null_frac > 0 AS has_nulls FROM pg_stats
 WHERE schemaname = 'public' AND tablename = 'users' ORDER BY attname;
CREATE FUNCTION estimated_rows(q text) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE
  plan json;
BEGIN
  EXECUTE 'EXPLAIN (FORMAT JSON) ' || q INTO plan;
  RETURN plan->0->'Plan'->>'Plan Rows';
END $$;
SELECT estimated_rows('SELECT * FROM users') = (SELECT count(*) FROM users) AS estimate_is_count;
DROP FUNCTION estimated_rows(text);

-- TRUNCATE empties the table on every shard in the front's transaction
SELECT count(*) > 0 AS has_rows FROM users;
BEGIN;
TRUNCATE users;
SELECT count(*) AS in_transaction FROM users;
ROLLBACK;
SELECT count(*) > 0 AS still_has_rows FROM users;
SELECT try($$TRUNCATE users CASCADE$$) LIKE '0A000%' OR dialect = 'postgres' AS cascade_where_dialect_has_it
  FROM (SELECT DISTINCT dialect FROM collegedb.shards) AS d;
TRUNCATE users;
SELECT count(*) AS after_truncate FROM users;
SELECT s.shard, (SELECT count(*) FROM collegedb.all_on_shard(s.shard, 'SELECT id FROM users')) AS rows_left
  FROM (VALUES ('s1'), ('s2')) AS s(shard) ORDER BY s.shard;

-- IMPORT FOREIGN SCHEMA from a shard: a sharded foreign table per table,
-- keyed by the first column of its primary key (or the key_column option),
-- with the shard's types mapped to PostgreSQL's
SELECT shard, ok FROM collegedb.run_on_all(
  'CREATE TABLE imported_t (k VARCHAR(20) PRIMARY KEY, n INTEGER NOT NULL, amount DECIMAL(10,2), note TEXT)')
  ORDER BY shard;
SELECT shard, ok FROM collegedb.run_on_all('CREATE TABLE nokey_t (a INTEGER, b TEXT)') ORDER BY shard;
SELECT CASE s.dialect WHEN 'postgres' THEN 'public' WHEN 'sqlite' THEN 'main'
         ELSE (SELECT split_part(o, '=', 2) FROM pg_foreign_server f, unnest(f.srvoptions) AS o
                WHERE f.srvname = 's1' AND o LIKE 'dbname=%') END AS remote_schema
  FROM collegedb.shards s WHERE s.name = 's1' \gset
CREATE SCHEMA imp;
IMPORT FOREIGN SCHEMA :"remote_schema" LIMIT TO (imported_t, nokey_t) FROM SERVER s1 INTO imp;
SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull
  FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0
 WHERE c.relnamespace = 'imp'::regnamespace ORDER BY c.relname, a.attnum;
SELECT c.relname, s.srvname, array_to_string(array(SELECT o FROM unnest(t.ftoptions) AS o
                                               WHERE o NOT LIKE 'schema_name=%'), ', ') AS options
  FROM pg_foreign_table t JOIN pg_class c ON c.oid = t.ftrelid JOIN pg_foreign_server s ON s.oid = t.ftserver
 WHERE c.relnamespace = 'imp'::regnamespace ORDER BY c.relname;
INSERT INTO imp.imported_t VALUES ('imp-1', 1, 2.50, 'one'), ('imp-2', 2, NULL, NULL);
SELECT * FROM imp.imported_t ORDER BY k;
IMPORT FOREIGN SCHEMA :"remote_schema" LIMIT TO (nokey_t) FROM SERVER collegedb INTO imp
  OPTIONS (shard 's1', key_column 'a');
SELECT count(*) AS nokey_imported FROM pg_class WHERE relnamespace = 'imp'::regnamespace AND relname = 'nokey_t';
SELECT try($$IMPORT FOREIGN SCHEMA x FROM SERVER collegedb INTO imp$$);
SELECT try($$IMPORT FOREIGN SCHEMA no_such_schema FROM SERVER s1 INTO imp$$);
SELECT try($$IMPORT FOREIGN SCHEMA x FROM SERVER s1 INTO imp OPTIONS (bogus 'x')$$);
DELETE FROM imp.imported_t WHERE k IN ('imp-1', 'imp-2');
DROP SCHEMA imp CASCADE;
SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE imported_t') ORDER BY shard;
SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE nokey_t') ORDER BY shard;

DROP FOREIGN TABLE users;
DELETE FROM collegedb.mapping;
SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE users') ORDER BY shard;

SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE IF EXISTS items') ORDER BY shard;
