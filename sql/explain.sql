-- EXPLAIN ANALYZE on sharded foreign tables: per shard the statements, rows
-- and times of the remote statements, for a fan-out its time and the wait
-- for the slowest shard; VERBOSE shows the remote SQL per dialect.  Times
-- are masked by explain_filter (as in PostgreSQL's own explain tests).
CREATE EXTENSION collegedb;
\set VERBOSITY terse
\i sql/common/env.sql
SET collegedb.commit_protocol = 'sequential';
SELECT current_user AS me \gset
\set a_db :sqlite_dir '/explain_a.db'
CREATE DATABASE collegedb_explain;
CREATE SERVER ex_a FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'a_db');
CREATE SERVER ex_p FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'postgres', host :'pg_host', port :'pg_port', dbname 'collegedb_explain');
CREATE USER MAPPING FOR PUBLIC SERVER ex_p OPTIONS (user :'me');
CREATE SERVER ex_m FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'mysql', host :'my_host', port :'my_port', dbname 'collegedb_test');
CREATE USER MAPPING FOR PUBLIC SERVER ex_m OPTIONS (user :'my_user', password :'my_password');
SELECT collegedb.add_shard('ex_a'), collegedb.add_shard('ex_p'), collegedb.add_shard('ex_m');
SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE IF EXISTS items') ORDER BY shard;
SELECT shard, ok FROM collegedb.run_on_all(
  'CREATE TABLE items (id BIGINT PRIMARY KEY, name VARCHAR(20))') ORDER BY shard;
CREATE FOREIGN TABLE items (id bigint, name text)
  SERVER collegedb OPTIONS (key_column 'id');
-- keys 1, 2 and 3 on one shard each, 11 beside 1
SELECT collegedb.set_mapping('1', 'ex_a'), collegedb.set_mapping('2', 'ex_m'),
       collegedb.set_mapping('3', 'ex_p'), collegedb.set_mapping('11', 'ex_a');
INSERT INTO items VALUES (1, 'one'), (2, 'two'), (3, 'three'), (11, 'eleven');

-- every number with a decimal point is a time: masked as N
CREATE FUNCTION explain_filter(text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
  ln text;
BEGIN
  FOR ln IN EXECUTE $1 LOOP
    ln := regexp_replace(ln, '\m\d+\.\d+\M', 'N', 'g');
    -- which shard answers last varies from run to run
    ln := regexp_replace(ln, 'slowest [^,]+,', 'slowest S,');
    RETURN NEXT ln;
  END LOOP;
END $$;
CREATE FUNCTION explain_json(text) RETURNS json LANGUAGE plpgsql AS $$
DECLARE
  plan json;
BEGIN
  EXECUTE $1 INTO plan;
  RETURN plan -> 0 -> 'Plan';
END $$;

-- a key read: one statement on its shard, its rows and times
SELECT explain_filter($$EXPLAIN (ANALYZE, COSTS OFF, SUMMARY OFF)
  SELECT * FROM items WHERE id = 1$$);
-- a fan-out: every shard, and the wait for the slowest
SELECT explain_filter($$EXPLAIN (ANALYZE, COSTS OFF, SUMMARY OFF)
  SELECT * FROM items$$);
-- TIMING OFF: statements and rows only.  Key 99 has no row: its shard is
-- asked for a tombstone too, one statement more
SELECT explain_filter($$EXPLAIN (ANALYZE, COSTS OFF, SUMMARY OFF, TIMING OFF)
  SELECT * FROM items WHERE id IN (1, 2, 11, 99)$$);
-- VERBOSE: the remote statement in each dialect, as without ANALYZE
SELECT explain_filter($$EXPLAIN (ANALYZE, VERBOSE, COSTS OFF, SUMMARY OFF, TIMING OFF)
  SELECT name FROM items WHERE name > 'o'$$);
-- rescans add up (loops), and so do the shards' statements
SELECT explain_filter($$EXPLAIN (ANALYZE, COSTS OFF, SUMMARY OFF, TIMING OFF)
  SELECT i, (SELECT name FROM items WHERE id = i) FROM generate_series(1, 3) AS i$$);
-- writes: an UPDATE by key and an INSERT, each row's shard
SELECT explain_filter($$EXPLAIN (ANALYZE, COSTS OFF, SUMMARY OFF, TIMING OFF)
  UPDATE items SET name = 'uno' WHERE id = 1$$);
SELECT explain_filter($$EXPLAIN (ANALYZE, COSTS OFF, SUMMARY OFF, TIMING OFF)
  INSERT INTO items VALUES (21, 'x'), (22, 'y')$$);
SELECT id, name FROM items ORDER BY id;

-- structured formats: the same figures as fields
SELECT explain_filter($$EXPLAIN (ANALYZE, COSTS OFF, SUMMARY OFF, FORMAT JSON)
  SELECT * FROM items WHERE id = 3$$);
SELECT explain_filter($$EXPLAIN (ANALYZE, COSTS OFF, SUMMARY OFF, TIMING OFF, FORMAT YAML)
  SELECT * FROM items$$);
SELECT explain_filter($$EXPLAIN (ANALYZE, COSTS OFF, SUMMARY OFF, FORMAT XML)
  SELECT * FROM items WHERE id = 2$$);
-- the JSON is JSON, and its per-shard rows add up to the plan's
SELECT (p ->> 'Actual Rows')::int AS plan_rows,
       (SELECT sum((s ->> 'Rows')::int) FROM json_array_elements(p -> 'Shard Statements') AS s) AS shard_rows,
       (SELECT bool_and((s ->> 'Total Time')::numeric >= (s ->> 'First Row Time')::numeric)
          FROM json_array_elements(p -> 'Shard Statements') AS s) AS first_before_total,
       p ->> 'Fan-out Shards' AS shards,
       (p ->> 'Slowest Shard') IN ('ex_a', 'ex_m', 'ex_p') AS slowest_named,
       (p ->> 'Slowest Shard Alone Time')::numeric <= (p ->> 'Fan-out Time')::numeric AS alone_within
  FROM explain_json($$EXPLAIN (ANALYZE, COSTS OFF, SUMMARY OFF, FORMAT JSON) SELECT * FROM items$$) AS p;

-- without ANALYZE nothing is measured
EXPLAIN (COSTS OFF) SELECT * FROM items;

-- a failed shard under fanout_partial: its failed statement is counted
ALTER SERVER ex_p OPTIONS (SET port '1');
SELECT collegedb.disconnect_all() IS NOT NULL AS disconnected;
SET collegedb.fanout_partial = on;
SET client_min_messages = error;
SELECT explain_filter($$EXPLAIN (ANALYZE, COSTS OFF, SUMMARY OFF, TIMING OFF)
  SELECT * FROM items$$);
RESET client_min_messages;
RESET collegedb.fanout_partial;
ALTER SERVER ex_p OPTIONS (SET port :'pg_port');

SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE items') ORDER BY shard;
DROP FOREIGN TABLE items;
DROP FUNCTION explain_filter(text), explain_json(text);
DROP EXTENSION collegedb CASCADE;
DROP DATABASE collegedb_explain;
