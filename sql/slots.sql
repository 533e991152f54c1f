-- Slot maps (issue 18): the slot hash, installed maps and their digests,
-- routing under the slots strategy, verify_shard_map and slot moves, on
-- an SQLite (db-a), a PostgreSQL (db-b) and a MySQL (db-c) shard.
CREATE EXTENSION collegedb;
\set VERBOSITY terse
-- progress NOTICEs depend on timing
SET collegedb.progress_notices = off;
\getenv sqlite_dir COLLEGEDB_TEST_SQLITE_DIR
\getenv pg_port COLLEGEDB_TEST_PG_PORT
\getenv my_port COLLEGEDB_TEST_MYSQL_PORT
SELECT current_user AS me \gset
\set a_db :sqlite_dir '/slots_a.db'

\i sql/common/try.sql
-- try_detail also shows the error's detail
CREATE FUNCTION try_detail(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  d text;
BEGIN
  EXECUTE sql;
  RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
  RETURN SQLSTATE || ': ' || SQLERRM || coalesce(' (' || nullif(d, '') || ')', '');
END $$;
-- the shard the newest installed map gives a key
CREATE FUNCTION map_shard(k text) RETURNS text LANGUAGE sql AS $$
  SELECT r->>'shard'
    FROM collegedb.shard_map m, jsonb_array_elements(m.ranges) AS r
   WHERE m.version = (SELECT max(version) FROM collegedb.shard_map)
     AND collegedb.slot_of(k, m.slots) >= (r->>'start')::int
     AND collegedb.slot_of(k, m.slots) < (r->>'end')::int
$$;
-- the digest of a map's text, computed here
CREATE FUNCTION text_digest(t text) RETURNS text LANGUAGE sql AS $$
  SELECT encode(sha256(convert_to(t, 'UTF8')), 'hex')
$$;
-- rows of slot_users per shard, and how many of them the map puts there
CREATE FUNCTION placed() RETURNS TABLE (shard text, rows bigint, where_the_map_says bigint)
LANGUAGE sql AS $$
  SELECT s.name, count(r.j), count(r.j) FILTER (WHERE map_shard(r.j->>'id') = s.name)
    FROM collegedb.shards s
    LEFT JOIN LATERAL collegedb.all_on_shard(s.name, 'SELECT id FROM slot_users') AS r(j) ON true
   GROUP BY s.name ORDER BY s.name
$$;
DROP DATABASE IF EXISTS collegedb_slots;
CREATE DATABASE collegedb_slots;
CREATE FUNCTION make_shards(sqlite_file text, pg_port text, me text, my_port text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('CREATE SERVER "db-a" FOREIGN DATA WRAPPER collegedb OPTIONS (dialect %L, database %L)',
                 'sqlite', sqlite_file);
  EXECUTE format('CREATE SERVER "db-b" FOREIGN DATA WRAPPER collegedb '
                 'OPTIONS (dialect %L, host %L, port %L, dbname %L)',
                 'postgres', '127.0.0.1', pg_port, 'collegedb_slots');
  EXECUTE format('CREATE USER MAPPING FOR PUBLIC SERVER "db-b" OPTIONS (user %L)', me);
  EXECUTE format('CREATE SERVER "db-c" FOREIGN DATA WRAPPER collegedb '
                 'OPTIONS (dialect %L, host %L, port %L, dbname %L)',
                 'mysql', '127.0.0.1', my_port, 'collegedb_test');
  CREATE USER MAPPING FOR PUBLIC SERVER "db-c" OPTIONS (user 'collegedb', password 'collegedb');
  PERFORM collegedb.add_shard(s) FROM unnest(ARRAY['db-a', 'db-b', 'db-c']) AS s;
END $$;

-- the vectors of reference/vectors.txt
SELECT k, collegedb.slot_of(k, 1024) AS slot1024, collegedb.slot_of(k, 1) AS slot1
  FROM (VALUES ('user-1'), ('order:42'), ('tenant-acme'), ('hello world'), ('Zürich'), (''),
               (E'\x01abc')) AS v(k);

SELECT make_shards(:'a_db', :'pg_port', :'me', :'my_port');
SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE IF EXISTS slot_users') ORDER BY shard;
SELECT shard, ok FROM collegedb.run_on_all(
  'CREATE TABLE slot_users (id VARCHAR(64) PRIMARY KEY, n INTEGER NOT NULL DEFAULT 0)') ORDER BY shard;
SELECT collegedb.register_table('slot_users', 'id');

-- the slots strategy without an installed map: a clear error and a hint
SELECT collegedb.configure(strategy => 'slots');
\set VERBOSITY default
SELECT collegedb.run('k', 'INSERT INTO slot_users (id) VALUES ($1)', 'k');
\set VERBOSITY terse
SELECT try($$SELECT collegedb.shard_for_key('k')$$);
SELECT try($$SELECT * FROM collegedb.route('k')$$);
SELECT count(*) AS versions FROM collegedb.shard_map;
-- slots needs KV placement (computed placement is hash only)
SELECT try($$SELECT collegedb.configure(placement => 'computed')$$);

-- invalid slot counts and ranges: 22023 saying what is wrong; unknown shards CD001
SELECT try($$SELECT collegedb.initialize_shard_map(0)$$);
SELECT try($$SELECT collegedb.initialize_shard_map(65537)$$);
SELECT try($$SELECT collegedb.initialize_shard_map(NULL)$$);
SELECT try($$SELECT collegedb.initialize_shard_map(4, '{"start": 0, "end": 4, "shard": "db-a"}')$$);
SELECT try($$SELECT collegedb.initialize_shard_map(4, '[]')$$);
SELECT try($$SELECT collegedb.initialize_shard_map(4, '[1]')$$);
SELECT try($$SELECT collegedb.initialize_shard_map(4, '[{"start": "0", "end": 4, "shard": "db-a"}]')$$);
SELECT try($$SELECT collegedb.initialize_shard_map(4, '[{"start": 0.5, "end": 4, "shard": "db-a"}]')$$);
SELECT try($$SELECT collegedb.initialize_shard_map(4, '[{"start": 0, "end": 4}]')$$);
SELECT try($$SELECT collegedb.initialize_shard_map(4, '[{"start": 0, "end": 4, "shard": 7}]')$$);
SELECT try($$SELECT collegedb.initialize_shard_map(4, '[{"start": 0, "end": 4, "shard": "db-a", "x": 1}]')$$);
SELECT try($$SELECT collegedb.initialize_shard_map(4, '[{"start": 2, "end": 2, "shard": "db-a"}]')$$);
SELECT try($$SELECT collegedb.initialize_shard_map(4, '[{"start": -1, "end": 4, "shard": "db-a"}]')$$);
SELECT try($$SELECT collegedb.initialize_shard_map(4, '[{"start": 0, "end": 5, "shard": "db-a"}]')$$);
SELECT try($$SELECT collegedb.initialize_shard_map(4, '[{"start": 0, "end": 1, "shard": "db-a"}, {"start": 2, "end": 4, "shard": "db-b"}]')$$);
SELECT try($$SELECT collegedb.initialize_shard_map(4, '[{"start": 0, "end": 3, "shard": "db-a"}, {"start": 2, "end": 4, "shard": "db-b"}]')$$);
SELECT try($$SELECT collegedb.initialize_shard_map(4, '[{"start": 1, "end": 4, "shard": "db-a"}]')$$);
SELECT try($$SELECT collegedb.initialize_shard_map(4, '[{"start": 0, "end": 3, "shard": "db-a"}]')$$);
SELECT try($$SELECT collegedb.initialize_shard_map(4, '[{"start": 0, "end": 4, "shard": "nowhere"}]')$$);
SELECT count(*) AS versions FROM collegedb.shard_map;

-- a custom map, written unsorted and split: stored normalised, and its
-- digest is the SHA-256 of the issue's text
SELECT collegedb.initialize_shard_map(8, '[{"start": 6, "end": 8, "shard": "db-c"},
  {"start": 0, "end": 2, "shard": "db-a"}, {"start": 2, "end": 3, "shard": "db-a"},
  {"start": 3, "end": 6, "shard": "db-b"}]') AS snapshot;
SELECT digest = text_digest('slots=8;0-3=db-a;3-6=db-b;6-8=db-c') AS digest_ok FROM collegedb.shard_map;
SELECT version, slots, ranges, installed_at <= now() AS installed FROM collegedb.shard_map;
-- an exact retry (written another way) returns the installed snapshot and changes nothing
SELECT collegedb.initialize_shard_map(8, '[{"start": 0, "end": 3, "shard": "db-a"},
  {"start": 3, "end": 6, "shard": "db-b"}, {"start": 6, "end": 7, "shard": "db-c"},
  {"start": 7, "end": 8, "shard": "db-c"}]') = collegedb.initialize_shard_map(8, (SELECT ranges FROM collegedb.shard_map)) AS same;
SELECT count(*) AS versions FROM collegedb.shard_map;
-- anything else is a conflict naming both digests
SELECT try_detail($$SELECT collegedb.initialize_shard_map(8, '[{"start": 0, "end": 8, "shard": "db-a"}]')$$);
SELECT try_detail($$SELECT collegedb.initialize_shard_map()$$);
-- and the map cannot be edited behind collegedb's back
SELECT try($$UPDATE collegedb.slot_map SET slots = 9$$);
SELECT try($$DELETE FROM collegedb.slot_map$$);
SELECT try($$TRUNCATE collegedb.slot_map$$);

-- 300 keys under the slots strategy: each lands where the map says, and no mapping is written
SELECT sum(collegedb.run('user-' || i, 'INSERT INTO slot_users (id, n) VALUES ($1, $2)', 'user-' || i, i))
  FROM generate_series(1, 300) AS i;
SELECT count(*) AS mappings FROM collegedb.mapping;
SELECT * FROM placed();
SELECT count(*) FILTER (WHERE collegedb.shard_for_key('user-' || i, true) = map_shard('user-' || i)) AS agree
  FROM generate_series(1, 300) AS i;
SELECT count(collegedb.first('user-' || i, 'SELECT n FROM slot_users WHERE id = $1', 'user-' || i)) AS readable
  FROM generate_series(1, 300) AS i;
-- route() reports the slot; a warm routed statement reads no catalog
SELECT shard, source, hops, epoch, has_key, slot, collegedb.slot_of('user-1', 8) AS slot_of
  FROM collegedb.route('user-1');
SELECT collegedb.first('user-2', 'SELECT n FROM slot_users WHERE id = $1', 'user-2');
SELECT catalog_reads AS before FROM collegedb.cache_stats() \gset
SELECT collegedb.first('user-2', 'SELECT n FROM slot_users WHERE id = $1', 'user-2');
SELECT collegedb.run('user-2', 'UPDATE slot_users SET n = n + 1 WHERE id = $1', 'user-2');
SELECT catalog_reads - :before AS catalog_reads FROM collegedb.cache_stats();
-- a key with a mapping keeps it
SELECT collegedb.set_mapping('pinned', 'db-a');
SELECT map_shard('pinned') AS map_says;
SELECT collegedb.run('pinned', 'INSERT INTO slot_users (id) VALUES ($1)', 'pinned');
SELECT shard, source, slot FROM collegedb.route('pinned');
SELECT count(*) FROM collegedb.all_on_shard('db-a', 'SELECT id FROM slot_users WHERE id = $1', 'pinned');
SELECT collegedb.run('pinned', 'DELETE FROM slot_users WHERE id = $1', 'pinned'), collegedb.delete_mapping('pinned');

-- a slot whose shard takes no writes refuses them, naming the slot; reads still go there
SELECT collegedb.set_shard_state('db-c', drain => 'draining');
SELECT min(i) AS k FROM generate_series(1, 300) AS i WHERE map_shard('user-' || i) = 'db-c' \gset
SELECT try(format($$SELECT collegedb.run(%L, 'UPDATE slot_users SET n = 0 WHERE id = $1', %1$L)$$,
                  'user-' || :k));
SELECT collegedb.first('user-' || :k, 'SELECT id FROM slot_users WHERE id = $1', 'user-' || :k);
SELECT collegedb.set_shard_state('db-c', drain => 'active');

-- verify_shard_map: every row where the map says; then one put on the wrong shard by hand
SELECT collegedb.verify_shard_map('slot_users') - 'digest' AS verified;
SELECT min(i) AS wrong FROM generate_series(1, 300) AS i WHERE map_shard('extra-' || i) = 'db-a' \gset
SELECT collegedb.run_on_shard('db-b', 'INSERT INTO slot_users (id) VALUES ($1)', 'extra-' || :wrong);
SELECT v->'checked' AS checked, v->'mismatches' AS mismatches, v->'samples' AS samples,
       v->'observed_slots' AS observed_slots, v->'version' AS version,
       v->>'digest' = (SELECT digest FROM collegedb.shard_map) AS digest_ok
  FROM collegedb.verify_shard_map('slot_users') AS v;
SELECT collegedb.run_on_shard('db-b', 'DELETE FROM slot_users WHERE id = $1', 'extra-' || :wrong);
SELECT try($$SELECT collegedb.verify_shard_map('slot_users', 16)$$);
SELECT try($$SELECT collegedb.verify_shard_map('no_such_table')$$);

-- move_slot: the keys of slot 7 go from MySQL to SQLite, and version 2 is installed
SELECT try($$SELECT collegedb.move_slot(8, 'db-a')$$);
SELECT try($$SELECT collegedb.move_slot(7, 'nowhere')$$);
SELECT collegedb.set_shard_state('db-b', writable => false);
SELECT try($$SELECT collegedb.move_slot(7, 'db-b')$$);
SELECT collegedb.set_shard_state('db-b', writable => true);
SELECT count(*) AS in_slot_7 FROM generate_series(1, 300) AS i WHERE collegedb.slot_of('user-' || i, 8) = 7;
SELECT collegedb.move_slot(7, 'db-a') AS snapshot;
SELECT version, digest = text_digest('slots=8;0-3=db-a;3-6=db-b;6-7=db-c;7-8=db-a') AS digest_ok, ranges
  FROM collegedb.shard_map ORDER BY version;
SELECT * FROM placed();
SELECT count(*) AS mappings FROM collegedb.mapping;
SELECT count(*) AS slot_moves FROM collegedb.slot_moves;
SELECT count(collegedb.first('user-' || i, 'SELECT n FROM slot_users WHERE id = $1', 'user-' || i)) AS readable,
       sum((collegedb.first('user-' || i, 'SELECT n FROM slot_users WHERE id = $1', 'user-' || i)->>'n')::int) AS total
  FROM generate_series(1, 300) AS i;
SELECT kind, state, examined, moved, failed FROM collegedb.jobs WHERE kind = 'move_slot';
SELECT (collegedb.verify_shard_map('slot_users')->>'mismatches')::int AS mismatches;
-- the slot is on db-a already: the installed snapshot, nothing new
SELECT (collegedb.move_slot(7, 'db-a'))->'version' AS version;
-- a scheduled move, back to MySQL
SELECT collegedb.schedule_move_slot(7, 'db-c') AS job \gset
SELECT state FROM collegedb.wait_for_job(:job, '2 minutes');
SELECT version, digest = text_digest('slots=8;0-3=db-a;3-6=db-b;6-8=db-c') AS digest_ok
  FROM collegedb.shard_map ORDER BY version;
SELECT * FROM placed();
SELECT count(*) AS mappings FROM collegedb.mapping;

-- a slot that is moving (as a move_slot that failed halfway leaves it): its keys
-- have two candidates, the target first; a new key is written to the target, an
-- existing one where it is; a move elsewhere is refused, one to the target finishes it
INSERT INTO collegedb.slot_move (slot, source, target) VALUES (6, 'db-c', 'db-b');
SELECT min(i) AS six FROM generate_series(1, 300) AS i WHERE collegedb.slot_of('user-' || i, 8) = 6 \gset
SELECT shard, source, has_key, slot FROM collegedb.route('user-' || :six);
SELECT min(i) AS fresh FROM generate_series(1, 1000) AS i WHERE collegedb.slot_of('fresh-' || i, 8) = 6 \gset
SELECT collegedb.run('fresh-' || :fresh, 'INSERT INTO slot_users (id, n) VALUES ($1, 1)', 'fresh-' || :fresh);
SELECT collegedb.run('user-' || :six, 'UPDATE slot_users SET n = n + 1000 WHERE id = $1', 'user-' || :six);
SELECT s.name, r.j->>'id' AS id, r.j->>'n' AS n
  FROM collegedb.shards s,
       LATERAL collegedb.all_on_shard(s.name, 'SELECT id, n FROM slot_users WHERE id IN ($1, $2)',
                                      'fresh-' || :fresh, 'user-' || :six) AS r(j)
 ORDER BY 1, 2;
SELECT collegedb.first('fresh-' || :fresh, 'SELECT n FROM slot_users WHERE id = $1', 'fresh-' || :fresh);
SELECT try($$SELECT collegedb.move_slot(6, 'db-a')$$);
SELECT (collegedb.move_slot(6, 'db-b'))->'version' AS version;
SELECT count(*) AS slot_moves FROM collegedb.slot_moves;
SELECT * FROM placed();
SELECT shard, source, slot FROM collegedb.route('user-' || :six);
SELECT collegedb.run('fresh-' || :fresh, 'DELETE FROM slot_users WHERE id = $1', 'fresh-' || :fresh);

-- the default map: slot k on the active shards sorted by name, k mod 3
SELECT collegedb.configure(strategy => 'hash');
DROP EXTENSION collegedb CASCADE;
CREATE EXTENSION collegedb;
SELECT make_shards(:'a_db', :'pg_port', :'me', :'my_port');
SELECT collegedb.register_table('slot_users', 'id');
SELECT collegedb.set_shard_state('db-c', drain => 'retired');
-- before any map: verify compares with the default map of the given slots (version null)
SELECT v->'checked' AS checked, v->'mismatches' AS mismatches, v->'observed_slots' AS observed_slots,
       v->'version' AS version, jsonb_array_length(v->'samples') AS samples,
       v->'samples'->0 AS first_sample,
       v->>'digest' = text_digest('slots=3;0-1=db-a;1-2=db-b;2-3=db-a') AS digest_ok
  FROM collegedb.verify_shard_map('slot_users', 3) AS v;
SELECT collegedb.set_shard_state('db-c', drain => 'active');
SELECT s->'version' AS version, s->'slots' AS slots, jsonb_array_length(s->'ranges') AS ranges,
       s->'ranges'->0 AS first, s->'ranges'->1 AS second, s->'ranges'->2 AS third,
       s->'ranges'->1023 AS last,
       s->>'digest' = text_digest('slots=1024' || (SELECT string_agg(format(';%s-%s=%s', k, k + 1,
                         (ARRAY['db-a', 'db-b', 'db-c'])[k % 3 + 1]), '' ORDER BY k)
                    FROM generate_series(0, 1023) AS k)) AS digest_ok
  FROM collegedb.initialize_shard_map() AS s;
SELECT collegedb.initialize_shard_map() = collegedb.initialize_shard_map(1024) AS exact_retry;
SELECT count(*) AS versions FROM collegedb.shard_map;
SELECT try($$SELECT collegedb.initialize_shard_map(512)$$);
-- a slot that holds no key moves at once: only the new version
SELECT collegedb.configure(strategy => 'slots');
SELECT count(*) AS keys_in_slot_5 FROM generate_series(1, 300) AS i WHERE collegedb.slot_of('user-' || i, 1024) = 5;
SELECT s->'version' AS version, s->'ranges'->5 AS slot5, s->'ranges'->6 AS slot6
  FROM collegedb.move_slot(5, 'db-a') AS s;
SELECT kind, state, examined, moved FROM collegedb.jobs;
-- a shard the map uses is not dropped unless forced
SELECT try($$SELECT collegedb.drop_shard('db-c')$$);
SELECT shard, source, slot FROM collegedb.route('user-1');
SELECT version, jsonb_array_length(ranges) FROM collegedb.shard_map ORDER BY version;

SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE slot_users') ORDER BY shard;
SELECT collegedb.configure(strategy => 'hash');
DROP EXTENSION collegedb CASCADE;
DROP DATABASE collegedb_slots;
DROP FUNCTION try(text), try_detail(text), map_shard(text), text_digest(text), placed(),
  make_shards(text, text, text, text);
