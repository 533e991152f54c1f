-- Registering shards: add_shard, drop_shard, set_shard_state and the
-- shards view, with their bad inputs.  SQLite shards need no server.
CREATE EXTENSION collegedb;
\i sql/common/env.sql
\set a_db :sqlite_dir '/shards_a.db'
\set b_db :sqlite_dir '/shards_b.db'

CREATE SERVER "db-a" FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'a_db');
CREATE SERVER "db-b" FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'b_db');
SELECT collegedb.add_shard('db-a');
SELECT collegedb.add_shard('db-b', region => 'wnam', priority => 2, physical_id => 'b-uuid',
                           tags => '{"jurisdiction": "eu"}');
SELECT name, dialect, physical_id, writable, drain, tags, region, priority FROM collegedb.shards;

-- add_shard created the tombstone table on the shard
SELECT * FROM collegedb.all_on_shard('db-a',
  'SELECT name FROM sqlite_master WHERE type = ''table'' ORDER BY name');

-- state changes
SELECT collegedb.set_shard_state('db-a', writable => false, drain => 'draining');
SELECT collegedb.set_shard_state('db-a', tags => '{"tier": "cold"}', region => 'weur', priority => 0.5);
SELECT name, writable, drain, tags, region, priority FROM collegedb.shards;
SELECT collegedb.set_shard_state('db-a', writable => true, drain => 'active');
SELECT name, writable, drain FROM collegedb.shards;

\set VERBOSITY default
-- bad input: each fails, nothing changes
SELECT collegedb.add_shard('db-a');                       -- already registered
SELECT collegedb.add_shard('no-such-server');             -- no server
SELECT collegedb.add_shard('collegedb');                  -- the router
SELECT collegedb.add_shard(NULL);
CREATE FOREIGN DATA WRAPPER other_fdw;
CREATE SERVER other FOREIGN DATA WRAPPER other_fdw;
SELECT collegedb.add_shard('other');                      -- not a collegedb server
CREATE SERVER lost FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'sqlite', database '/nonexistent-collegedb-dir/x.db');
SELECT collegedb.add_shard('lost');                       -- directory does not exist
CREATE SERVER "db-c" FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'a_db');
SELECT collegedb.add_shard('db-c', region => 'mars');     -- INVALID_REGION_HINT
SELECT collegedb.add_shard('db-c', priority => 0);
SELECT collegedb.add_shard('db-c', tags => '[1, 2]');
SELECT collegedb.add_shard('db-c', physical_id => 'b-uuid');  -- physical id taken
SELECT collegedb.set_shard_state('db-a', drain => 'sleeping');
SELECT collegedb.set_shard_state('db-a', region => 'moon');
SELECT collegedb.set_shard_state('db-a', priority => -1);
SELECT collegedb.set_shard_state('db-z', writable => false);
SELECT collegedb.drop_shard('db-z');
SELECT name, writable, drain, region, priority FROM collegedb.shards;

-- catalog rows cannot be edited around the functions' checks
\set VERBOSITY terse
UPDATE collegedb.shard SET drain = 'gone' WHERE name = 'db-a';

\set VERBOSITY default

-- names with quotes, semicolons and spaces are data, never SQL
CREATE SERVER "we""ird; DROP TABLE x; --" FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'sqlite', database :'b_db');
SELECT collegedb.add_shard('we"ird; DROP TABLE x; --');
SELECT collegedb.run_on_shard('we"ird; DROP TABLE x; --', 'SELECT 1');
SELECT name FROM collegedb.shards;
SELECT collegedb.drop_shard('we"ird; DROP TABLE x; --');

-- drop_shard unregisters; the server stays
SELECT collegedb.drop_shard('db-b');
SELECT name FROM collegedb.shards;
SELECT count(*) FROM pg_foreign_server WHERE srvname = 'db-b';
SELECT collegedb.run_on_shard('db-b', 'SELECT 1');        -- SHARD_NOT_FOUND

-- a registered shard whose server was dropped is reported, not used
SELECT collegedb.add_shard('db-b');
DROP SERVER "db-b";
SELECT collegedb.run_on_shard('db-b', 'SELECT 1');
SELECT collegedb.drop_shard('db-b');

DROP SERVER other;
DROP FOREIGN DATA WRAPPER other_fdw;
DROP EXTENSION collegedb CASCADE;
