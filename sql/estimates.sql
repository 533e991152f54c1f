-- Row estimates of a sharded foreign table never ANALYZEd: the planner asks
-- each shard for its own statistics (fdw/estimate.c) and sums them; a shard
-- that cannot answer (no statistics, down) counts as the average of the
-- others, and planning never fails for it.
CREATE EXTENSION collegedb;
\set VERBOSITY terse
\i sql/common/env.sql
SET collegedb.commit_protocol = 'sequential';
SELECT current_user AS me \gset
\set a_db :sqlite_dir '/estimates_a.db'
CREATE DATABASE collegedb_estimates;
CREATE SERVER es_a FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'a_db');
CREATE SERVER es_p FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'postgres', host :'pg_host', port :'pg_port', dbname 'collegedb_estimates',
           connect_timeout '2');
CREATE USER MAPPING FOR PUBLIC SERVER es_p OPTIONS (user :'me');
CREATE SERVER es_m FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'mysql', host :'my_host', port :'my_port', dbname 'collegedb_test');
CREATE USER MAPPING FOR PUBLIC SERVER es_m OPTIONS (user :'my_user', password :'my_password');
SELECT collegedb.add_shard('es_a'), collegedb.add_shard('es_p'), collegedb.add_shard('es_m');
SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE IF EXISTS est') ORDER BY shard;
SELECT shard, ok FROM collegedb.run_on_all(
  'CREATE TABLE est (id BIGINT PRIMARY KEY, v VARCHAR(20))') ORDER BY shard;
CREATE FOREIGN TABLE est (id bigint, v text) SERVER collegedb OPTIONS (key_column 'id');

-- the estimate of a table's rows, and of those a condition keeps
CREATE FUNCTION plan_rows(q text) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE
  plan json;
BEGIN
  EXECUTE 'EXPLAIN (FORMAT JSON) ' || q INTO plan;
  RETURN (plan -> 0 -> 'Plan' ->> 'Plan Rows')::float8;
END $$;
SET collegedb.remote_estimate_cache = 0;

-- 10,000 rows on the PostgreSQL shard, analyzed there; 100 on the SQLite
-- shard and 50 on the MariaDB shard, each analyzed by its own ANALYZE
SELECT collegedb.run_on_shard('es_p',
  'INSERT INTO est SELECT g, ''v'' || g FROM generate_series(1, 10000) AS g');
SELECT collegedb.run_on_shard('es_p', 'ANALYZE est');
SELECT collegedb.run_on_shard('es_a',
  'WITH RECURSIVE g(n) AS (SELECT 10001 UNION ALL SELECT n + 1 FROM g WHERE n < 10100) INSERT INTO est SELECT n, ''a'' FROM g');
SELECT collegedb.run_on_shard('es_a', 'ANALYZE');
SELECT collegedb.run_on_shard('es_m',
  'INSERT INTO est SELECT seq, ''m'' FROM seq_10101_to_10150');
SELECT collegedb.run_on_shard('es_m', 'ANALYZE TABLE est');
SELECT count(*) AS real_rows FROM est;
SELECT reltuples < 0 AS never_analyzed_here FROM pg_class WHERE oid = 'est'::regclass;
-- the estimate is near the real count: within a factor of 2
SELECT plan_rows('SELECT * FROM est') BETWEEN 10150 / 2 AND 10150 * 2 AS near_real_count;
-- the shards' figure with the conditions' selectivity on top
SELECT plan_rows('SELECT * FROM est WHERE v = ''x''') < plan_rows('SELECT * FROM est')
  AS condition_narrows;
-- a key read stays a key read
SELECT plan_rows('SELECT * FROM est WHERE id = 5') AS key_read_rows;

-- use_remote_estimate 'false': the old default, nothing asked
ALTER FOREIGN TABLE est OPTIONS (ADD use_remote_estimate 'false');
SELECT plan_rows('SELECT * FROM est') AS without_remote_estimate;
ALTER FOREIGN TABLE est OPTIONS (SET use_remote_estimate 'true');
ALTER FOREIGN TABLE est OPTIONS (SET use_remote_estimate 'maybe');

-- a shard that is down: planning goes on, the shard counts as the average
-- of the others (and the scan itself fails, as it does)
ALTER SERVER es_p OPTIONS (SET port '1');
SELECT collegedb.disconnect_all() IS NOT NULL AS disconnected;
SELECT plan_rows('SELECT * FROM est') BETWEEN 100 AND 1000 AS planned_without_the_shard;
SELECT count(*) FROM est;
\getenv pg_port COLLEGEDB_TEST_PG_PORT
ALTER SERVER es_p OPTIONS (SET port :'pg_port');
SELECT plan_rows('SELECT * FROM est') BETWEEN 10150 / 2 AND 10150 * 2 AS back;

-- the answers are kept for remote_estimate_cache: a shard's new rows are
-- seen once it expires (here at once: 0), and ANALYZE of the table itself
-- takes over from the shards' figures
RESET collegedb.remote_estimate_cache;
SELECT collegedb.run_on_shard('es_p', 'DELETE FROM est WHERE id > 1000');
SELECT collegedb.run_on_shard('es_p', 'ANALYZE est');
SELECT plan_rows('SELECT * FROM est') > 5000 AS cached;
ANALYZE est;
SELECT plan_rows('SELECT * FROM est') BETWEEN 1150 / 2 AND 1150 * 2 AS analyzed_here;

SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE est') ORDER BY shard;
DROP FOREIGN TABLE est;
DROP EXTENSION collegedb CASCADE;
DROP DATABASE collegedb_estimates;
