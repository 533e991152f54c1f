-- Computed placement: epochs, exceptions and published eligibility, on
-- SQLite shards.
CREATE EXTENSION collegedb;
\set VERBOSITY terse
\i sql/common/env.sql
-- statements here write on several SQLite shards at once, which cannot
-- take part in one two-phase commit (see twophase.sql): they commit in turn
SET collegedb.commit_protocol = 'sequential';

\i sql/common/try.sql
-- how many of n keys are found with a read
CREATE FUNCTION readable(prefix text, n int) RETURNS bigint LANGUAGE sql AS $$
  SELECT count(collegedb.first(prefix || i, 'SELECT id FROM users WHERE id = $1', prefix || i))
    FROM generate_series(1, n) AS i
$$;

-- outside computed placement nothing is published
SELECT * FROM collegedb.publish_eligibility();

\set a_db :sqlite_dir '/computed_a.db'
\set b_db :sqlite_dir '/computed_b.db'
\set c_db :sqlite_dir '/computed_c.db'
\set d_db :sqlite_dir '/computed_d.db'
CREATE SERVER "db-a" FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'a_db');
CREATE SERVER "db-b" FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'b_db');
CREATE SERVER "db-c" FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'c_db');
CREATE SERVER "db-d" FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'d_db');
SELECT collegedb.add_shard('db-a'), collegedb.add_shard('db-b'), collegedb.add_shard('db-c');
-- computed placement needs the hash strategy; switching on publishes epoch 1
SELECT try($$SELECT collegedb.configure(placement => 'computed', strategy => 'round-robin')$$);
SELECT collegedb.configure(placement => 'computed');
SELECT epoch, shards FROM collegedb.epochs;
SELECT * FROM collegedb.publish_eligibility();
SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE IF EXISTS users') ORDER BY shard;
SELECT shard, ok FROM collegedb.run_on_all('CREATE TABLE users (id TEXT PRIMARY KEY, n INTEGER DEFAULT 0)') ORDER BY shard;
SELECT collegedb.register_table('users', 'id');
SELECT table_name, key_column FROM collegedb.tables;

-- 300 keys: placed by the newest epoch, and no mapping stored for them
SELECT sum(collegedb.run('user-' || i, 'INSERT INTO users (id) VALUES ($1)', 'user-' || i))
  FROM generate_series(1, 300) AS i;
SELECT count(*) AS mappings FROM collegedb.mapping;
SELECT s.name, (SELECT (j->>'n')::int FROM collegedb.all_on_shard(s.name, 'SELECT count(*) AS n FROM users') AS j) AS rows,
       (SELECT count(*) FROM generate_series(1, 300) AS i
         WHERE collegedb.rendezvous_owner('user-' || i, ARRAY['db-a', 'db-b', 'db-c']) = s.name) AS owned
  FROM collegedb.shards s ORDER BY 1;
SELECT shard, source, hops, epoch, has_key FROM collegedb.route('user-1');

-- a fourth shard added under computed placement publishes a new epoch;
-- every key is still readable
SELECT collegedb.add_shard('db-d');
SELECT epoch, shards FROM collegedb.epochs;
SELECT collegedb.run_on_shard('db-d', 'CREATE TABLE users (id TEXT PRIMARY KEY, n INTEGER DEFAULT 0)');
-- the keys db-d now owns are found under epoch 1 and get exceptions
SELECT count(*) AS now_owned_by_d FROM generate_series(1, 300) AS i
 WHERE collegedb.rendezvous_owner('user-' || i, ARRAY['db-a', 'db-b', 'db-c', 'db-d']) = 'db-d';
SELECT readable('user-', 300);
SELECT count(*) AS exceptions FROM collegedb.mapping;
-- the next read of such a key goes straight to its shard: one statement
SELECT i AS moved_key FROM generate_series(1, 300) AS i
 WHERE collegedb.rendezvous_owner('user-' || i, ARRAY['db-a', 'db-b', 'db-c', 'db-d']) = 'db-d'
 ORDER BY i LIMIT 1 \gset
SELECT shard, source, epoch FROM collegedb.route('user-' || :moved_key);
SELECT sum(statements) AS before FROM collegedb.shard_activity() \gset
SELECT collegedb.first('user-' || :moved_key, 'SELECT id FROM users WHERE id = $1', 'user-' || :moved_key);
SELECT sum(statements) - :before AS statements_sent FROM collegedb.shard_activity();

-- new keys land on their newest owner
SELECT sum(collegedb.run('new-' || i, 'INSERT INTO users (id) VALUES ($1)', 'new-' || i))
  FROM generate_series(1, 100) AS i;
SELECT count(*) AS on_newest_owner FROM generate_series(1, 100) AS i
 WHERE (SELECT (j->>'n')::int FROM collegedb.all_on_shard(
          collegedb.rendezvous_owner('new-' || i, ARRAY['db-a', 'db-b', 'db-c', 'db-d']),
          'SELECT count(*) AS n FROM users WHERE id = $1', 'new-' || i) AS j) = 1;

-- an update of an old key (never read since) lands where the key lives
SELECT i AS old_key FROM generate_series(1, 300) AS i
 WHERE collegedb.rendezvous_owner('user-' || i, ARRAY['db-a', 'db-b', 'db-c', 'db-d']) = 'db-d'
 ORDER BY i DESC LIMIT 1 \gset
SELECT collegedb.delete_mapping('user-' || :old_key);
SELECT shard, source, epoch, has_key FROM collegedb.route('user-' || :old_key);
SELECT collegedb.run('user-' || :old_key, 'UPDATE users SET n = n + 1 WHERE id = $1', 'user-' || :old_key) AS updated;
SELECT shard, source FROM collegedb.route('user-' || :old_key);

-- a draining shard leaves the newest epoch; its keys stay readable
SELECT collegedb.set_shard_state('db-b', drain => 'draining');
SELECT epoch, shards FROM collegedb.epochs ORDER BY epoch DESC LIMIT 1;
SELECT readable('user-', 300), readable('new-', 100);

-- the predicate, re-evaluated by publish_eligibility (operation "publish")
CREATE TABLE seen (op text);
CREATE FUNCTION not_c(shard text, context jsonb) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.seen VALUES (context->>'operation');
  RETURN shard <> 'db-c';
END $$;
SELECT collegedb.configure(eligible => 'not_c(text, jsonb)');
SELECT epoch, shards FROM collegedb.epochs ORDER BY epoch DESC LIMIT 1;
SELECT * FROM collegedb.publish_eligibility();
SELECT * FROM collegedb.publish_eligibility();
SELECT DISTINCT op FROM seen;
-- a predicate that raises: ELIGIBILITY_FAILED, and no epoch published
CREATE FUNCTION broken(shard text, context jsonb) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'policy service down';
END $$;
SELECT collegedb.configure(eligible => 'broken(text, jsonb)');
SELECT try($$SELECT * FROM collegedb.publish_eligibility()$$);
SELECT max(epoch) FROM collegedb.epochs;
SELECT collegedb.reset_setting('eligible');
SELECT * FROM collegedb.publish_eligibility();

-- no eligible shard: nothing published, reads work, the cluster is
-- read-only (writes of new keys and of existing ones fail)
SELECT collegedb.set_shard_state(s, drain => 'draining') FROM unnest(ARRAY['db-a', 'db-c', 'db-d']) AS s;
SELECT * FROM collegedb.publish_eligibility();
SELECT readable('user-', 300);
SELECT try($$SELECT collegedb.run('brand-new', 'INSERT INTO users (id) VALUES ($1)', 'brand-new')$$);
SELECT try($$SELECT collegedb.run('user-2', 'UPDATE users SET n = n + 1 WHERE id = $1', 'user-2')$$) AS existing_key;
SELECT collegedb.first('user-2', 'SELECT n FROM users WHERE id = $1', 'user-2') AS unchanged;
SELECT collegedb.set_shard_state(s, drain => 'active') FROM unnest(ARRAY['db-a', 'db-b', 'db-c', 'db-d']) AS s;
SELECT epoch, shards FROM collegedb.epochs ORDER BY epoch DESC LIMIT 1;

-- a warm routed statement on a key without an exception reads no catalog table
SELECT readable('new-', 10);
BEGIN;
SELECT sum(idx_scan) AS idx_before, sum(seq_scan) AS seq_before, (SELECT catalog_reads FROM collegedb.cache_stats()) AS reads_before
  FROM pg_stat_xact_user_tables WHERE schemaname = 'collegedb' \gset
SELECT count(f) FROM generate_series(1, 1000) AS i,
       LATERAL collegedb.first('new-' || (i % 10 + 1), 'SELECT id FROM users WHERE id = $1', 'new-' || (i % 10 + 1)) AS f;
SELECT sum(idx_scan) - :idx_before AS index_scans, sum(seq_scan) - :seq_before AS seq_scans,
       (SELECT catalog_reads FROM collegedb.cache_stats()) - :reads_before AS catalog_reads
  FROM pg_stat_xact_user_tables WHERE schemaname = 'collegedb';
COMMIT;

-- epochs cannot be edited, skipped, emptied or unsorted
SELECT try($$UPDATE collegedb.epoch SET shards = '{db-a}' WHERE epoch = 1$$);
SELECT try($$INSERT INTO collegedb.epoch (epoch, shards) VALUES (42, '{db-a}')$$);
SELECT try($$INSERT INTO collegedb.epoch (epoch, shards) SELECT max(epoch) + 1, '{}' FROM collegedb.epoch$$);
SELECT try($$INSERT INTO collegedb.epoch (epoch, shards) SELECT max(epoch) + 1, '{db-b,db-a}' FROM collegedb.epoch$$);
SELECT try($$INSERT INTO collegedb.epoch (epoch, shards) SELECT max(epoch) + 1, '{db-a,db-a}' FROM collegedb.epoch$$);
SELECT try($$INSERT INTO collegedb.epoch (epoch, shards) VALUES (0, '{db-a}')$$);
-- a multi-row INSERT through a sharded foreign table batches its rows per
-- computed owner, and looks up the batch's exceptions in one statement: a
-- key with an exception gets its rows where the exception says
SELECT count(*) FROM collegedb.run_on_all('CREATE TABLE events (id TEXT, n INTEGER)');
CREATE FOREIGN TABLE events (id text, n int) SERVER collegedb OPTIONS (key_column 'id');
SELECT 'ev-' || i AS excepted,
       collegedb.rendezvous_owner('ev-' || i, ARRAY['db-a', 'db-b', 'db-c', 'db-d']) AS owner
  FROM generate_series(1, 100) AS i
 WHERE collegedb.rendezvous_owner('ev-' || i, ARRAY['db-a', 'db-b', 'db-c'])
     = collegedb.rendezvous_owner('ev-' || i, ARRAY['db-a', 'db-b', 'db-c', 'db-d'])
 ORDER BY i LIMIT 1 \gset
SELECT CASE WHEN :'owner' = 'db-a' THEN 'db-b' ELSE 'db-a' END AS exception_shard \gset
SELECT collegedb.set_mapping(:'excepted', :'exception_shard') IS NOT NULL AS excepted;
INSERT INTO events SELECT 'ev-' || (i % 100 + 1), i FROM generate_series(1, 1000) AS i;
SELECT count(*) AS on_exception_shard
  FROM collegedb.all_on_shard(:'exception_shard', format('SELECT id FROM events WHERE id = %L', :'excepted'));
SELECT count(*) AS on_computed_owner
  FROM collegedb.all_on_shard(:'owner', format('SELECT id FROM events WHERE id = %L', :'excepted'));
-- every other key's rows are on its newest owner (one candidate) or on one of its
-- epochs' owners (several: each such row goes by itself, probing them)
SELECT count(*) AS rows, count(DISTINCT r->>'id') AS keys
  FROM unnest(ARRAY['db-a', 'db-b', 'db-c', 'db-d']) AS s,
       collegedb.all_on_shard(s, 'SELECT id FROM events') AS r;
SELECT count(*) AS misplaced
  FROM unnest(ARRAY['db-a', 'db-b', 'db-c', 'db-d']) AS s,
       collegedb.all_on_shard(s, 'SELECT id FROM events') AS r
 WHERE r->>'id' <> :'excepted'
   AND s NOT IN (collegedb.rendezvous_owner(r->>'id', ARRAY['db-a', 'db-b', 'db-c']),
                 collegedb.rendezvous_owner(r->>'id', ARRAY['db-a', 'db-b', 'db-c', 'db-d']));
SELECT collegedb.delete_mapping(:'excepted');
DROP FOREIGN TABLE events;
SELECT count(*) FROM collegedb.run_on_all('DROP TABLE events');

-- a shard that epochs place keys on is not dropped without force
SELECT try($$SELECT collegedb.drop_shard('db-d')$$);

-- back to KV placement: the keys the epochs placed get mappings to where
-- they are first, so that every key is still read and written there
CREATE TABLE placed_before AS
  SELECT r->>'id' AS k, s AS shard
    FROM unnest(ARRAY['db-a', 'db-b', 'db-c', 'db-d']) AS s,
         collegedb.all_on_shard(s, 'SELECT id FROM users') AS r;
SELECT count(*) > 0 AS keys_in_tables FROM placed_before;
SELECT try($$SELECT collegedb.configure(placement => 'kv', hash_mappings => false)$$);
SELECT collegedb.configure(placement => 'kv');
SELECT count(*) AS unmapped FROM placed_before p
 WHERE NOT EXISTS (SELECT 1 FROM collegedb.mapping m WHERE m.key = collegedb.mapping_id(p.k));
SELECT count(*) AS elsewhere FROM placed_before p WHERE collegedb.shard_for_key(p.k) <> p.shard;
SELECT count(*) AS readable FROM placed_before p
 WHERE collegedb.first(p.k, 'SELECT id FROM users WHERE id = $1', p.k) IS NOT NULL;
DROP TABLE placed_before;
SELECT * FROM collegedb.publish_eligibility();

SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE users') ORDER BY shard;
DROP EXTENSION collegedb CASCADE;
DROP FUNCTION try(text), readable(text, int), not_c(text, jsonb), broken(text, jsonb);
DROP TABLE seen;
