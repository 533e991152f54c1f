-- Allocation strategies, shard eligibility, the size limit and statistics,
-- on SQLite shards.
CREATE EXTENSION collegedb;
\set VERBOSITY terse
\i sql/common/env.sql
-- statements here write on several SQLite shards at once, which cannot
-- take part in one two-phase commit (see twophase.sql): they commit in turn
SET collegedb.commit_protocol = 'sequential';

\i sql/common/try.sql

-- where each of a set of keys is mapped
CREATE FUNCTION placed(prefix text, n int) RETURNS TABLE (shard text, keys bigint)
LANGUAGE sql AS $$
  SELECT r.shard, count(*) FROM generate_series(1, n) AS i, collegedb.route(prefix || i) AS r
   WHERE r.source = 'mapping' GROUP BY 1 ORDER BY 1
$$;
-- write n new keys
CREATE FUNCTION write_keys(prefix text, n int) RETURNS bigint
LANGUAGE sql AS $$
  SELECT sum(collegedb.run(prefix || i, 'INSERT INTO kv (k) VALUES ($1)', prefix || i))
    FROM generate_series(1, n) AS i
$$;

\set west_db :sqlite_dir '/strat_west.db'
\set east_db :sqlite_dir '/strat_east.db'
\set europe_db :sqlite_dir '/strat_europe.db'
CREATE SERVER "db-east" FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'east_db');
CREATE SERVER "db-europe" FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'europe_db');
CREATE SERVER "db-west" FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'west_db');
SELECT collegedb.add_shard('db-east'), collegedb.add_shard('db-europe'), collegedb.add_shard('db-west');
SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE IF EXISTS kv') ORDER BY shard;
SELECT shard, ok FROM collegedb.run_on_all('CREATE TABLE kv (k TEXT PRIMARY KEY, pad BLOB)') ORDER BY shard;

-- hash: 300 keys spread as rendezvous hashing says
SELECT write_keys('h-', 300);
SELECT * FROM placed('h-', 300);
SELECT count(*) AS agree FROM generate_series(1, 300) AS i
 WHERE (SELECT shard FROM collegedb.route('h-' || i))
     = collegedb.rendezvous_owner('h-' || i, ARRAY['db-east', 'db-europe', 'db-west']);

-- round-robin: an exact split, in shard name order
SELECT collegedb.configure(strategy => 'round-robin');
SELECT write_keys('rr-', 300);
SELECT * FROM placed('rr-', 300);
SELECT array_agg((SELECT shard FROM collegedb.route('rr-' || i)) ORDER BY i) AS first_six
  FROM generate_series(1, 6) AS i;

-- random: every shard gets some
SELECT collegedb.configure(strategy => 'random');
SELECT write_keys('rnd-', 300);
SELECT shard, keys BETWEEN 60 AND 140 AS plausible FROM placed('rnd-', 300);

-- jump: the bucket of the key among the shards in name order
SELECT collegedb.configure(strategy => 'jump');
SELECT write_keys('j-', 100);
SELECT count(*) AS agree FROM generate_series(1, 100) AS i
 WHERE (SELECT shard FROM collegedb.route('j-' || i))
     = (ARRAY['db-east', 'db-europe', 'db-west'])[collegedb.jump_bucket('j-' || i, 3) + 1];

-- location (seed 001): wnam target; west wnam priority 2, east enam 1, europe weur 0.5
SELECT collegedb.configure(strategy => 'location');
SELECT collegedb.shard_for_key('loc-1', true) AS no_regions_yet_falls_back_to_hash,
       collegedb.rendezvous_owner('loc-1', ARRAY['db-east', 'db-europe', 'db-west']) AS hash_owner;
SELECT collegedb.set_shard_state('db-west', region => 'wnam', priority => 2);
SELECT collegedb.set_shard_state('db-east', region => 'enam', priority => 1);
SELECT collegedb.set_shard_state('db-europe', region => 'weur', priority => 0.5);
SELECT collegedb.shard_for_key('loc-1', true) AS no_target_falls_back_to_hash;
SELECT collegedb.configure(target_region => 'wnam');
SELECT write_keys('loc-', 5);
SELECT * FROM placed('loc-', 5);
-- the session's GUC overrides the setting
SET collegedb.target_region = 'weur';
SELECT collegedb.shard_for_key('loc-new', true);
SET collegedb.target_region = 'apac-ne';
SELECT collegedb.shard_for_key('loc-new', true);
RESET collegedb.target_region;
SELECT collegedb.shard_for_key('loc-new', true);
SELECT try($$SET collegedb.target_region = 'mars'$$);
-- region-prefixed keys take their hint from the prefix (only one of the 11 codes)
SELECT collegedb.configure(region_prefixed_keys => true);
SELECT collegedb.shard_for_key('weur:room1', true), collegedb.shard_for_key('enam:room1', true),
       collegedb.shard_for_key('mars:room1', true);
SELECT collegedb.reset_setting('region_prefixed_keys');
-- shards without a region are never picked by location
SELECT collegedb.set_shard_state('db-west', priority => 1);
SELECT collegedb.configure(target_region => 'enam');
SELECT collegedb.shard_for_key('loc-x', true);

-- mixed: writes by location, unmapped reads by hash
SELECT collegedb.configure(write_strategy => 'location', read_strategy => 'hash');
SELECT collegedb.shard_for_key('mixed-1', true) AS write_goes_to,
       collegedb.shard_for_key('mixed-1', false) AS unmapped_read_goes_to,
       collegedb.rendezvous_owner('mixed-1', ARRAY['db-east', 'db-europe', 'db-west']) AS hash_owner;
SELECT collegedb.run('mixed-1', 'INSERT INTO kv (k) VALUES ($1)', 'mixed-1');
SELECT shard, source FROM collegedb.route('mixed-1');
SELECT collegedb.reset_setting(s)
  FROM unnest(ARRAY['write_strategy', 'read_strategy', 'target_region']) AS s;
SELECT collegedb.configure(strategy => 'hash');

-- eligibility by state: draining, retired and read-only shards take no new keys
SELECT collegedb.set_shard_state('db-east', drain => 'draining');
SELECT collegedb.set_shard_state('db-europe', writable => false);
SELECT write_keys('st-', 30);
SELECT * FROM placed('st-', 30);
-- their keys stay readable and writable
SELECT collegedb.run('h-1', 'UPDATE kv SET pad = NULL WHERE k = $1', 'h-1');
SELECT collegedb.set_shard_state('db-west', drain => 'retired');
SELECT try($$SELECT write_keys('none-', 1)$$);
SELECT collegedb.set_shard_state(s, writable => true, drain => 'active')
  FROM unnest(ARRAY['db-east', 'db-europe', 'db-west']) AS s;

-- the eligible predicate: only true keeps a shard; it sees the key, tags and state
SELECT collegedb.set_shard_state('db-europe', tags => '{"jurisdiction": "eu"}');
CREATE TABLE seen (shard text, context jsonb);
CREATE FUNCTION eu_only(shard text, context jsonb) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.seen VALUES (shard, context);
  RETURN CASE context->'tags'->>'jurisdiction' WHEN 'eu' THEN true
                                               WHEN 'us' THEN NULL
                                               ELSE false END;
END $$;
SELECT collegedb.configure(eligible => 'eu_only(text, jsonb)');
SELECT write_keys('eu-', 10);
SELECT * FROM placed('eu-', 10);
SELECT context FROM seen WHERE shard = 'db-europe' LIMIT 1;
-- NULL is not true
SELECT collegedb.set_shard_state('db-europe', tags => '{"jurisdiction": "us"}');
SELECT try($$SELECT write_keys('us-', 1)$$);
-- a predicate that raises: ELIGIBILITY_FAILED with its message
CREATE FUNCTION broken(shard text, context jsonb) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'jurisdiction service unavailable';
END $$;
SELECT collegedb.configure(eligible => 'broken(text, jsonb)');
\set VERBOSITY default
SELECT collegedb.run('b-1', 'INSERT INTO kv (k) VALUES ($1)', 'b-1');
\set VERBOSITY terse
-- mapped keys do not consult the predicate
SELECT collegedb.run('h-2', 'UPDATE kv SET pad = NULL WHERE k = $1', 'h-2');
SELECT collegedb.reset_setting('eligible');
SELECT collegedb.set_shard_state('db-europe', tags => '{}');

-- the size limit: shards at or above it take no new keys
SELECT collegedb.run_on_shard('db-east', 'INSERT INTO kv VALUES ($1, zeroblob(400000))', 'ballast');
SELECT shard, size_bytes > 400000 AS big FROM collegedb.shard_stats() ORDER BY shard;
SELECT collegedb.configure(max_shard_size => 200000, size_cache_ttl => '0');
SET collegedb.debug = on;
SELECT write_keys('sz-', 2);
-- every shard full: the limit is ignored rather than refusing writes
SELECT collegedb.configure(max_shard_size => 1);
SELECT write_keys('full-', 1);
RESET collegedb.debug;
SELECT collegedb.configure(max_shard_size => 200000);
SELECT write_keys('sz-more-', 18);
SELECT * FROM placed('sz-', 2) UNION ALL SELECT * FROM placed('sz-more-', 18);
SELECT collegedb.reset_setting('max_shard_size');
SELECT collegedb.reset_setting('size_cache_ttl');

-- statistics
SELECT collegedb.set_shard_state('db-west', drain => 'draining');
SELECT shard, key_count > 0 AS has_keys, size_bytes > 0 AS sized, writable, drain, eligible
  FROM collegedb.shard_stats() ORDER BY shard;
SELECT sum(key_count) = (SELECT count(*) FROM collegedb.mapping) AS counts_match FROM collegedb.shard_stats();
SELECT collegedb.database_size('db-east') > 400000 AS east_is_big, collegedb.database_size('db-west') > 0;
SELECT try($$SELECT collegedb.database_size('db-nowhere')$$);

-- bad input
SELECT try($$SELECT collegedb.configure(strategy => 'nearest')$$);
SELECT try($$SELECT collegedb.configure(strategy => 'location', target_region => 'mars')$$);
SELECT try($$SELECT collegedb.set_shard_state('db-east', region => 'mars')$$);
SELECT try($$SELECT collegedb.set_shard_state('db-east', drain => 'paused')$$);
SELECT try($$SELECT collegedb.configure(max_shard_size => 0)$$);
SELECT try($$SELECT collegedb.configure(eligible => 'eu_only(text, text)')$$);

SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE kv') ORDER BY shard;
DROP EXTENSION collegedb CASCADE;
DROP FUNCTION try(text), placed(text, int), write_keys(text, int),
              eu_only(text, jsonb), broken(text, jsonb);
DROP TABLE seen;
