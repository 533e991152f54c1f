-- collegedb.shard_health: one row per shard, whether it answers, its last
-- error, this backend's connections, statements and errors, size, key
-- count and state; a shard that cannot be reached gives NULLs and its
-- error, never an error of the view.  Failures name their shard.
CREATE EXTENSION collegedb;
\set VERBOSITY terse
\i sql/common/env.sql
\i sql/common/try.sql
SELECT current_user AS me \gset
\set ok_db :sqlite_dir '/health_ok.db'
\set gone_db :sqlite_dir '/health_gone.db'
\set nowhere_db :sqlite_dir '/no/such/dir/health.db'
CREATE DATABASE collegedb_health;
CREATE SERVER h_ok FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'ok_db');
CREATE SERVER h_gone FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'gone_db');
CREATE SERVER h_pg FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'postgres', host :'pg_host', port :'pg_port', dbname 'collegedb_health');
CREATE USER MAPPING FOR PUBLIC SERVER h_pg OPTIONS (user :'me');
SELECT collegedb.add_shard('h_ok'), collegedb.add_shard('h_gone'), collegedb.add_shard('h_pg');

-- the view's shape
SELECT attname, format_type(atttypid, atttypmod)
  FROM pg_attribute WHERE attrelid = 'collegedb.shard_health'::regclass AND attnum > 0
 ORDER BY attnum;

-- every shard answered add_shard; keys are stored mappings
SELECT collegedb.set_mapping('k1', 'h_ok'), collegedb.set_mapping('k2', 'h_ok'),
       collegedb.set_mapping('k3', 'h_pg');
SELECT shard, dialect, reachable, last_contact IS NOT NULL AS contacted,
       last_error IS NULL AS no_error, statements > 0 AS counted, scope,
       size_bytes > 0 AS sized, key_count, drain, writable
  FROM collegedb.shard_health ORDER BY shard;

-- connections are this backend's
SELECT collegedb.disconnect_all() IS NOT NULL AS disconnected;
SELECT shard, connections FROM collegedb.shard_health ORDER BY shard;
SELECT count(*) FROM collegedb.all_on_shard('h_pg', 'SELECT 1 AS one');
SELECT shard, connections FROM collegedb.shard_health ORDER BY shard;

-- a SQLite file in a directory that does not exist, a closed port: the
-- view still answers, those shards unreachable with their error
ALTER SERVER h_gone OPTIONS (SET database :'nowhere_db');
ALTER SERVER h_pg OPTIONS (SET port '1');
SELECT collegedb.set_shard_state('h_gone', drain => 'draining');
-- each failure names its shard
SELECT try($$SELECT collegedb.run_on_shard('h_gone', 'SELECT 1')$$) ~ '^08.*"h_gone"' AS named;
SELECT try($$SELECT collegedb.run_on_shard('h_pg', 'SELECT 1')$$) ~ '^08.*"h_pg"' AS named;
SELECT shard, error ~ 'h_pg|connect' AS named FROM collegedb.fanout('SELECT 1 AS one')
 WHERE error IS NOT NULL ORDER BY shard;
SELECT collegedb.database_size('h_gone') IS NULL AS no_size,
       collegedb.database_size('h_pg') IS NULL AS no_size;
SELECT shard, reachable, last_error IS NOT NULL AS has_error,
       last_error_at >= last_contact AS error_after_contact, errors > 0 AS errors_counted,
       size_bytes IS NULL AS no_size, drain
  FROM collegedb.shard_health ORDER BY shard;
SELECT shard, last_error ~ '^could not connect' AS connect_error
  FROM collegedb.shard_health WHERE NOT reachable ORDER BY shard;

-- a row the front cannot convert: the error's context names the shard
CREATE FUNCTION error_context(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  ctx text;
BEGIN
  EXECUTE sql;
  RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS ctx = PG_EXCEPTION_CONTEXT;
  RETURN SQLSTATE || ': ' || (ctx ~ '\nshard "h_ok" \(sqlite\): SELECT')::text;
END $$;
SELECT collegedb.run_on_shard('h_ok', 'CREATE TABLE vals (id INTEGER, v TEXT)');
SELECT collegedb.run_on_shard('h_ok', 'INSERT INTO vals VALUES (1, ''abc'')');
CREATE FOREIGN TABLE vals (id int, v int) SERVER h_ok;
SELECT error_context($$SELECT * FROM vals$$);
DROP FOREIGN TABLE vals;
DROP FUNCTION error_context(text);

-- back again: the next contact succeeds and the shard is reachable
ALTER SERVER h_gone OPTIONS (SET database :'gone_db');
ALTER SERVER h_pg OPTIONS (SET port :'pg_port');
SELECT collegedb.run_on_shard('h_gone', 'SELECT 1'), collegedb.run_on_shard('h_pg', 'SELECT 1');
SELECT shard, reachable, last_contact > last_error_at AS recovered
  FROM collegedb.shard_health WHERE last_error IS NOT NULL ORDER BY shard;

-- under computed placement keys have no row: no key count
SELECT collegedb.delete_mapping('k1'), collegedb.delete_mapping('k2'), collegedb.delete_mapping('k3');
SELECT collegedb.configure(placement => 'computed');
SELECT shard, key_count FROM collegedb.shard_health ORDER BY shard;

DROP FUNCTION try(text);
DROP EXTENSION collegedb CASCADE;
DROP DATABASE collegedb_health;
