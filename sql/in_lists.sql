-- Sharded foreign tables read by a list of keys (key IN (...), key = ANY(...)):
-- each key routes as a point read does, the keys are grouped per shard and
-- each shard gets one statement with its keys, over SQLite, PostgreSQL and
-- MySQL shards.  The rows are those of one read per key: NULL matches
-- nothing, a key listed twice gives its row once, an unmapped key gives
-- nothing (and gets no mapping), a moved key is followed.
CREATE EXTENSION collegedb;
\set VERBOSITY terse
\i sql/common/env.sql
SELECT current_user AS me \gset
\set a_db :sqlite_dir '/in_lists_a.db'
CREATE DATABASE collegedb_in_lists;
CREATE SERVER a FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'a_db');
CREATE SERVER p FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'postgres', host :'pg_host', port :'pg_port', dbname 'collegedb_in_lists');
CREATE USER MAPPING FOR PUBLIC SERVER p OPTIONS (user :'me');
CREATE SERVER my_boot FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'mysql', host :'my_host', port :'my_port', dbname 'collegedb_test');
CREATE USER MAPPING FOR PUBLIC SERVER my_boot OPTIONS (user :'my_user', password :'my_password');
SELECT collegedb.add_shard('my_boot');
SELECT collegedb.run_on_shard('my_boot', 'DROP DATABASE IF EXISTS collegedb_in_lists');
SELECT collegedb.run_on_shard('my_boot', 'CREATE DATABASE collegedb_in_lists');
SELECT collegedb.drop_shard('my_boot');
CREATE SERVER m FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'mysql', host :'my_host', port :'my_port', dbname 'collegedb_in_lists');
CREATE USER MAPPING FOR PUBLIC SERVER m OPTIONS (user :'my_user', password :'my_password');
SELECT collegedb.add_shard(s) FROM unnest(ARRAY['a', 'p', 'm']) AS s;
SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE IF EXISTS items') ORDER BY shard;
SELECT shard, ok FROM collegedb.run_on_all('CREATE TABLE items (id INTEGER PRIMARY KEY, v VARCHAR(20))')
  ORDER BY shard;
CREATE FOREIGN TABLE items (id int, v text) SERVER collegedb OPTIONS (key_column 'id');

-- keys 1 to 100 on two shards (odd on a, even on p), 101 to 120 on m
SELECT count(*) AS mapped FROM (
  SELECT collegedb.set_mapping(i::text, CASE WHEN i > 100 THEN 'm' WHEN i % 2 = 1 THEN 'a' ELSE 'p' END)
    FROM generate_series(1, 120) AS i) AS s;
INSERT INTO items SELECT i, 'v' || i FROM generate_series(1, 120) AS i;
SELECT shard, (value->>'n')::int AS n FROM collegedb.fanout('SELECT count(*) AS n FROM items') ORDER BY shard;

-- 100 keys over two shards: the same rows as one read per key
SELECT string_agg(i::text, ', ') AS list FROM generate_series(1, 100) AS i \gset
CREATE TEMP TABLE per_key AS
  SELECT i AS id, (SELECT v FROM items WHERE id = i) AS v FROM generate_series(1, 100) AS i;
CREATE TEMP TABLE grouped AS SELECT id, v FROM items WHERE id IN (:list);
SELECT (SELECT count(*) FROM grouped) AS grouped, (SELECT count(*) FROM per_key) AS per_key,
       NOT EXISTS ((TABLE grouped EXCEPT TABLE per_key) UNION ALL (TABLE per_key EXCEPT TABLE grouped)) AS same;
-- the same keys as an array parameter (a generic plan routes by its value)
PREPARE by_keys(int[]) AS SELECT id, v FROM items WHERE id = ANY($1);
SET plan_cache_mode = force_generic_plan;
SELECT '{' || string_agg(i::text, ',') || '}' AS keys FROM generate_series(1, 100) AS i \gset
CREATE TEMP TABLE by_param AS EXECUTE by_keys(:'keys');
SELECT count(*) AS rows, sum(id) AS ids FROM by_param;
CREATE TEMP TABLE by_param2 AS EXECUTE by_keys('{1, 2, 101, NULL, 2}');
SELECT id, v FROM by_param2 ORDER BY id;
SELECT count(*), sum(id) FROM items WHERE id = ANY(ARRAY(SELECT generate_series(1, 100))::int[]);
RESET plan_cache_mode;

-- IN ($1, $2, $3) of separate parameters under a generic plan: the list is
-- evaluated at execution and grouped as a constant list is
PREPARE by_params(int, int, int) AS
  SELECT id, v FROM items WHERE id IN ($1, $2, $3) ORDER BY id;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE by_params(1, 2, 101);
EXECUTE by_params(1, 2, 101);
EXECUTE by_params(4, NULL, 4);
EXECUTE by_params(NULL, NULL, NULL);
EXECUTE by_params(103, 500, 6);
-- an expression of parameters, evaluated once
PREPARE by_exprs(int) AS
  SELECT id, v FROM items WHERE id IN ($1, $1 + 1, $1 * 10) ORDER BY id;
EXECUTE by_exprs(9);
-- in PL/pgSQL, whose plans go generic after five executions
CREATE FUNCTION read3(a int, b int, c int) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  RETURN (SELECT string_agg(id || '=' || v, ',' ORDER BY id) FROM items WHERE id IN (a, b, c));
END $$;
SELECT i, read3(i, i + 1, 100 + i) FROM generate_series(1, 8) AS i ORDER BY i;
DROP FUNCTION read3(int, int, int);
-- a volatile element is evaluated per row, in the front: every shard
EXPLAIN (COSTS OFF) SELECT id FROM items WHERE id IN (1, (random() * 0)::int + 2);
SELECT id FROM items WHERE id IN (1, (random() * 0)::int + 2) ORDER BY id;
RESET plan_cache_mode;
DEALLOCATE by_params;
DEALLOCATE by_exprs;

-- keys of all three dialects in one list, with another qual sent along
SELECT id, v FROM items WHERE id IN (97, 98, 99, 100, 101, 102, 120) ORDER BY id;
SELECT id, v FROM items WHERE id IN (97, 98, 99, 100, 101, 102, 120) AND v <> 'v98' ORDER BY id;
-- a list read inside a transaction block
BEGIN;
SELECT id, v FROM items WHERE id = ANY('{2, 3, 103}') ORDER BY id;
COMMIT;

-- duplicates and NULLs behave as IN does; an empty list reads nothing
SELECT id, v FROM items WHERE id IN (1, 1, 2, NULL, 101, 101) ORDER BY id;
SELECT id, v FROM items WHERE id = ANY(ARRAY[4, NULL, 4, 104]) ORDER BY id;
SELECT count(*) FROM items WHERE id = ANY('{NULL}'::int[]);
SELECT count(*) FROM items WHERE id = ANY('{}'::int[]);
SELECT count(*) FROM items WHERE id = ANY(NULL::int[]);

-- keys without a mapping read nothing, and get none
SELECT id, v FROM items WHERE id IN (5, 500, 501) ORDER BY id;
SELECT count(*) AS new_mappings FROM collegedb.mapping
  WHERE key IN (collegedb.mapping_id('500'), collegedb.mapping_id('501'));

-- more keys than one statement takes (999 parameters on SQLite and MySQL):
-- the shard's keys go in several statements
SELECT count(*) AS rows, sum(id) AS ids FROM items WHERE id = ANY(ARRAY(SELECT generate_series(1, 2500))::int[]);
SELECT count(*) AS new_mappings FROM collegedb.mapping WHERE shard IS NULL OR key = collegedb.mapping_id('2500');

-- a moved key: its rows go, a tombstone stays, and a list read through a
-- stale mapping still finds it
SELECT collegedb.reassign_shard('3', 'p') ->> 'rows' AS rows_moved;
SELECT (SELECT n.name FROM collegedb.shard_number n WHERE n.number = shard) AS shard FROM collegedb.mapping WHERE key = collegedb.mapping_id('3');
SELECT id, v FROM items WHERE id IN (1, 2, 3, 4) ORDER BY id;
SELECT count(*) AS left_on_a FROM collegedb.all_on_shard('a', 'SELECT id FROM items WHERE id = 3');
UPDATE collegedb.mapping SET shard = (SELECT n.number FROM collegedb.shard_number n WHERE n.name = 'a') WHERE key = collegedb.mapping_id('3');
SELECT collegedb.disconnect_all() IS NOT NULL AS disconnected;
SELECT id, v FROM items WHERE id IN (1, 2, 3, 4) ORDER BY id;
SELECT id, v FROM items WHERE id IN (3, 3, 5) ORDER BY id;

-- a write by a list of keys is guarded per key, as before
UPDATE items SET v = 'w' WHERE id IN (1, 2, 3, 101);
SELECT id, v FROM items WHERE id IN (1, 2, 3, 101) ORDER BY id;

-- the plan shows the one-key text; execution puts the shard's keys there
EXPLAIN (COSTS OFF, VERBOSE) SELECT v FROM items WHERE id IN (1, 2, 3);

SELECT collegedb.run_on_shard('m', 'DROP DATABASE collegedb_in_lists') IS NOT NULL AS dropped;
SELECT collegedb.disconnect_all() IS NOT NULL AS disconnected;
DROP EXTENSION collegedb CASCADE;
DROP DATABASE collegedb_in_lists;
