-- Journaled key moves, tombstones, guarded writes and rebalancing, on
-- SQLite shards and a PostgreSQL shard (the test server itself).
CREATE EXTENSION collegedb;
\set VERBOSITY terse
-- progress NOTICEs depend on timing
SET collegedb.progress_notices = off;
\i sql/common/env.sql
-- statements here write on several SQLite shards at once, which cannot
-- take part in one two-phase commit (see twophase.sql): they commit in turn
SET collegedb.commit_protocol = 'sequential';
SELECT current_user AS me \gset
SET collegedb_test.sqlite_dir = :'sqlite_dir';

\i sql/common/try.sql
-- where a key's rows are: "shard:rows" for every shard that has some
CREATE FUNCTION placement(k text) RETURNS text LANGUAGE sql AS $$
  SELECT coalesce(string_agg(shard || ':' || (value->>'n'), ' ' ORDER BY shard), '(none)')
    FROM collegedb.fanout('SELECT count(*) AS n FROM users WHERE id = $1', k)
   WHERE (value->>'n')::int > 0
$$;

DO $$
BEGIN
  FOR i IN 1..5 LOOP
    EXECUTE format('CREATE SERVER l%s FOREIGN DATA WRAPPER collegedb OPTIONS (dialect %L, database %L)',
                   i, 'sqlite', current_setting('collegedb_test.sqlite_dir') || '/moves_' || i || '.db');
  END LOOP;
END $$;
CREATE DATABASE collegedb_moves;
CREATE SERVER pg FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'postgres', host :'pg_host', port :'pg_port', dbname 'collegedb_moves');
CREATE USER MAPPING FOR PUBLIC SERVER pg OPTIONS (user :'me');
SELECT count(collegedb.add_shard(s)) FROM unnest(ARRAY['l1', 'l2', 'l3', 'l4', 'l5', 'pg']) AS s;
SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE IF EXISTS users') ORDER BY shard;
SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE IF EXISTS visits') ORDER BY shard;
SELECT shard, ok FROM collegedb.run_on_all(
  'CREATE TABLE users (id TEXT PRIMARY KEY, name TEXT, score NUMERIC(10,2), active BOOLEAN, '
  'avatar BYTEA, seen TIMESTAMP, doc TEXT)') ORDER BY shard;
SELECT shard, ok FROM collegedb.run_on_all('CREATE TABLE visits (user_id TEXT, n INTEGER)') ORDER BY shard;

-- moves need registered tables; the rows of every one move with the key
SELECT try($$SELECT collegedb.rebalance('users')$$);
SELECT collegedb.register_table('users', 'id');
SELECT collegedb.register_table('visits', 'user_id');
SELECT table_name, key_column FROM collegedb.tables;

SELECT collegedb.set_mapping('ann', 'l1');
SELECT collegedb.run('ann', 'INSERT INTO users VALUES ($1, $2, $3, $4, $5, $6, $7)',
                     'ann', 'Ann', 12.5, true, '\x00ff'::bytea, '2024-05-01 10:00:00'::timestamp, '{"a": 1}');
SELECT collegedb.run('ann', 'INSERT INTO visits VALUES ($1, $2)', 'ann', i) FROM generate_series(1, 3) AS i;
SELECT placement('ann');

-- a move between dialects keeps every value
SELECT collegedb.reassign_shard('ann', 'pg') - 'move_id';
SELECT placement('ann');
SELECT * FROM collegedb.all('ann', 'SELECT id, name, score, active, avatar, seen, doc FROM users WHERE id = $1', 'ann')
  AS t(id text, name text, score numeric, active boolean, avatar bytea, seen timestamp, doc jsonb);
SELECT collegedb.first('ann', 'SELECT count(*) AS n, sum(n) AS total FROM visits WHERE user_id = $1', 'ann');
SELECT collegedb.reassign_shard('ann', 'l2') - 'move_id';
SELECT * FROM collegedb.all('ann', 'SELECT id, name, score, active, avatar, seen, doc FROM users WHERE id = $1', 'ann')
  AS t(id text, name text, score numeric, active boolean, avatar bytea, seen timestamp, doc jsonb);
SELECT placement('ann');
SELECT shard, source, hops FROM collegedb.route('ann');
-- the journal keeps the key's stored form (hashed, as in collegedb.mapping)
SELECT key = collegedb.mapping_key('ann') AS stored_key, source, target, step, rows, generation, attempts
  FROM collegedb.moves ORDER BY id;
SELECT count(*) AS clear_keys FROM collegedb.move WHERE raw_key IS NOT NULL OR key = 'ann';
-- the source keeps a tombstone
SELECT * FROM collegedb.all_on_shard('pg', 'SELECT table_name, shard_key, moved_to FROM collegedb_tombstones ORDER BY table_name');

-- the same shard: nothing to do
SELECT collegedb.reassign_shard('ann', 'l2');

-- reads through a stale mapping follow the tombstones; writes are re-sent
-- where the key lives (the mapping is pointed back by hand here)
SELECT collegedb.update_mapping('ann', 'l1');
SELECT shard, source, hops FROM collegedb.route('ann');
SELECT collegedb.first('ann', 'SELECT name FROM users WHERE id = $1', 'ann');
SELECT collegedb.run('ann', 'UPDATE users SET name = $2 WHERE id = $1', 'ann', 'Ann B.');
SELECT placement('ann');
SELECT collegedb.first('ann', 'SELECT name FROM users WHERE id = $1', 'ann');
-- a write inside a transaction that already wrote there follows the key too
BEGIN;
SELECT collegedb.run_on_shard('l1', 'INSERT INTO visits VALUES ($1, $2)', 'other', 1);
SELECT collegedb.run('ann', 'INSERT INTO visits VALUES ($1, $2)', 'ann', 4);
COMMIT;
SELECT (SELECT count(*) FROM collegedb.all_json('ann', 'SELECT n FROM visits WHERE user_id = $1', 'ann')) AS ann_visits,
       (SELECT value->>'n' FROM collegedb.all_on_shard('l1', 'SELECT count(*) AS n FROM visits') AS t(value)) AS l1_visits;
SELECT collegedb.update_mapping('ann', 'l2');

-- a chain of moves: four hops are followed, five are too many
SELECT collegedb.set_mapping('bob', 'l1');
SELECT collegedb.run('bob', 'INSERT INTO users (id, name) VALUES ($1, $2)', 'bob', 'Bob');
SELECT collegedb.reassign_shard('bob', s)->>'to' FROM unnest(ARRAY['l2', 'l3', 'l4', 'l5']) AS s;
SELECT collegedb.update_mapping('bob', 'l1');
SELECT shard, source, hops FROM collegedb.route('bob');
SELECT collegedb.first('bob', 'SELECT name FROM users WHERE id = $1', 'bob');
SELECT collegedb.update_mapping('bob', 'l5');
SELECT collegedb.reassign_shard('bob', 'pg')->>'to';
SELECT collegedb.update_mapping('bob', 'l1');
SELECT try($$SELECT collegedb.first('bob', 'SELECT name FROM users WHERE id = $1', 'bob')$$);
SELECT try($$SELECT collegedb.run('bob', 'UPDATE users SET name = name WHERE id = $1', 'bob')$$);
SET collegedb.best_effort = on;
SELECT collegedb.first('bob', 'SELECT name FROM users WHERE id = $1', 'bob') IS NULL AS no_rows;
RESET collegedb.best_effort;
SELECT collegedb.update_mapping('bob', 'pg');
SELECT collegedb.first('bob', 'SELECT name FROM users WHERE id = $1', 'bob');

-- rebalance: 60 keys on l1, then every shard takes keys
SELECT collegedb.set_shard_state(s, writable => false) FROM unnest(ARRAY['l2', 'l3', 'l4', 'l5', 'pg']) AS s;
SELECT sum(collegedb.run('k' || i, 'INSERT INTO users (id, name) VALUES ($1, $2)', 'k' || i, 'K' || i))
  FROM generate_series(1, 60) AS i;
SELECT collegedb.set_shard_state(s, writable => true) FROM unnest(ARRAY['l2', 'l3', 'l4', 'l5', 'pg']) AS s;
SELECT * FROM collegedb.rebalance('users', dry_run => true);
SELECT count(*) AS moves_so_far FROM collegedb.moves;
SELECT examined, agreed, moved, failed FROM collegedb.rebalance('users', concurrency => 3);
-- every key now sits on its rendezvous owner, once
SELECT count(*) AS on_owner FROM generate_series(1, 60) AS i
 WHERE placement('k' || i) = collegedb.rendezvous_owner('k' || i, ARRAY['l1', 'l2', 'l3', 'l4', 'l5', 'pg']) || ':1';
-- a second pass finds nothing to do
SELECT examined, agreed, moved, failed FROM collegedb.rebalance('users');
-- draining a shard, then rebalancing, empties it
SELECT collegedb.set_shard_state('l1', drain => 'draining');
SELECT moved > 0 AS moved_some, failed FROM collegedb.rebalance('users');
SELECT shard, value FROM collegedb.fanout('SELECT count(*) AS n FROM users') WHERE shard = 'l1';
SELECT count(*) AS readable FROM generate_series(1, 60) AS i
 WHERE collegedb.first('k' || i, 'SELECT id FROM users WHERE id = $1', 'k' || i) IS NOT NULL;
SELECT sum((value->>'n')::int) AS total_rows FROM collegedb.fanout('SELECT count(*) AS n FROM users');
SELECT collegedb.set_shard_state('l1', drain => 'active');
SELECT kind, state, examined >= moved AS sane, failed FROM collegedb.jobs ORDER BY id;

-- a failing key is listed with its error and the others go on
SELECT collegedb.run_on_shard('l3', 'ALTER TABLE visits RENAME TO visits_gone');
SELECT collegedb.set_shard_state('l2', drain => 'draining');
SELECT examined > 0 AS examined, failed <> '[]' AS some_failed,
       (failed->0->>'error') LIKE '%visits%' AS error_names_table
  FROM collegedb.rebalance('users');
SELECT collegedb.run_on_shard('l3', 'ALTER TABLE visits_gone RENAME TO visits');
SELECT failed FROM collegedb.rebalance('users');
SELECT collegedb.set_shard_state('l2', drain => 'active');

-- bad input
SELECT try($$SELECT collegedb.reassign_shard('ann', 'nowhere')$$);
SELECT try($$SELECT collegedb.reassign_shard('never-mapped', 'l1')$$);
SELECT collegedb.set_shard_state('l4', drain => 'draining');
SELECT try($$SELECT collegedb.reassign_shard('ann', 'l4')$$);
SELECT (collegedb.reassign_shard('ann', 'l4', force => true))->>'to' AS forced;
SELECT collegedb.set_shard_state('l4', drain => 'active');
SELECT try($$SELECT collegedb.rebalance('no_such_table')$$);
SELECT try($$SELECT collegedb.rebalance('users', concurrency => 0)$$);
SELECT try($$SELECT collegedb.rebalance('users', concurrency => -2)$$);
SELECT try($$SELECT collegedb.cancel_job(424242)$$);
SELECT try($$SELECT collegedb.wait_for_job(424242)$$);
SELECT try($$SELECT collegedb.reassign_shard(NULL, 'l1')$$);
-- a table (or key column) that a shard does not have is not registered,
-- and a registered table keeps its key column
SELECT try($$SELECT collegedb.register_table('ghosts', 'id')$$);
SELECT shard, ok FROM collegedb.run_on_all('CREATE TABLE extra (id TEXT)') ORDER BY shard;
SELECT try($$SELECT collegedb.register_table('extra', 'nope')$$);
SELECT try($$SELECT collegedb.register_table('users', 'nope')$$);
SELECT try($$SELECT collegedb.register_table('visits', 'id')$$);
SELECT try($$SELECT collegedb.register_table('visits', 'user_id')$$) AS same_again;
SELECT try($$SELECT collegedb.register_table('', 'id')$$);
SELECT table_name, key_column FROM collegedb.tables;
SELECT try($$SELECT collegedb.rebalance('ghosts')$$);
-- a lookup key's record is moved by its primary key: with hash_mappings the
-- primary key is not known, so the move is refused, and nothing changes
SELECT collegedb.add_lookup_keys('ann', ARRAY['email:ann@example.com']);
SELECT try($$SELECT collegedb.reassign_shard('email:ann@example.com', 'l3')$$);
SELECT placement('ann'), (SELECT shard FROM collegedb.route('email:ann@example.com'));
-- waiting for a job that does not end in time is an error naming it
INSERT INTO collegedb.job (kind, table_name, owner, state, lease_pid, lease_backend_start)
VALUES ('rebalance', 'users', 10, 'running', pg_backend_pid(),
        (SELECT backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()))
RETURNING id AS stuck_job \gset
\set VERBOSITY default
SELECT collegedb.wait_for_job(:stuck_job, '10 ms');
\set VERBOSITY terse
DELETE FROM collegedb.job WHERE id = :stuck_job;

SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE users') ORDER BY shard;
SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE visits') ORDER BY shard;
SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE extra') ORDER BY shard;
DROP EXTENSION collegedb CASCADE;
DROP DATABASE collegedb_moves;
DROP FUNCTION try(text), placement(text);
