-- Statements on PostgreSQL shards (see common/dialect.sql): two databases
-- of the test server itself, reached over libpq.
CREATE EXTENSION collegedb;
\set VERBOSITY terse
\i sql/common/env.sql
SELECT current_user AS me \gset
CREATE DATABASE collegedb_shard1;
CREATE DATABASE collegedb_shard2;
CREATE SERVER s1 FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'postgres', host :'pg_host', port :'pg_port', dbname 'collegedb_shard1');
CREATE SERVER s2 FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'postgres', host :'pg_host', port :'pg_port', dbname 'collegedb_shard2');
CREATE USER MAPPING FOR PUBLIC SERVER s1 OPTIONS (user :'me');
CREATE USER MAPPING FOR PUBLIC SERVER s2 OPTIONS (user :'me');
SELECT collegedb.add_shard('s1');
SELECT collegedb.add_shard('s2');
-- add_shard is idempotent on the shard side
SELECT collegedb.drop_shard('s2');
SELECT collegedb.add_shard('s2');
\set bytes_t BYTEA
\set ts_t TIMESTAMP
\set tstz_t TIMESTAMPTZ
\set uuid_t UUID
\set json_t JSONB
\i sql/common/dialect.sql
\i sql/common/fidelity.sql

-- no user mapping: a clear error, nothing sent
CREATE SERVER s3 FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'postgres', host :'pg_host', port :'pg_port', dbname 'collegedb_shard1');
SELECT try($$SELECT collegedb.add_shard('s3')$$);
-- wrong credentials and an unreachable server: class 08, the shard named
CREATE USER MAPPING FOR PUBLIC SERVER s3 OPTIONS (user 'no_such_role');
SELECT try($$SELECT collegedb.add_shard('s3')$$);
ALTER SERVER s3 OPTIONS (SET port '1');
SELECT try($$SELECT collegedb.add_shard('s3')$$);
SELECT name FROM collegedb.shards;

-- a statement on a shard that went away: class 08, then it reconnects
-- (the TAP test restarts a real shard server; here the connection is cut)
SELECT collegedb.run_on_shard('s1', 'SELECT 1');
SELECT try($$SELECT collegedb.run_on_shard('s1', 'SELECT pg_terminate_backend(pg_backend_pid())')$$) ~ '^08' AS cut;
SELECT collegedb.run_on_shard('s1', 'SELECT 1');

DROP FUNCTION try(text);

DROP EXTENSION collegedb CASCADE;
DROP DATABASE collegedb_shard1;
DROP DATABASE collegedb_shard2;
