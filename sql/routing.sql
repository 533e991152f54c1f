-- Routing by key on three SQLite shards: settings, hash placement, the
-- mapping store, run/all/all_json/first, lookup keys, the mapping cache.
CREATE EXTENSION collegedb;
\set VERBOSITY terse
\i sql/common/env.sql
-- statements here write on several SQLite shards at once, which cannot
-- take part in one two-phase commit (see twophase.sql): they commit in turn
SET collegedb.commit_protocol = 'sequential';

\i sql/common/try.sql

-- no shards yet: NO_SHARDS
SELECT try($$SELECT collegedb.run('user-1', 'SELECT 1')$$);

\set a_db :sqlite_dir '/routing_a.db'
\set b_db :sqlite_dir '/routing_b.db'
\set c_db :sqlite_dir '/routing_c.db'
CREATE SERVER "db-a" FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'a_db');
CREATE SERVER "db-b" FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'b_db');
CREATE SERVER "db-c" FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'c_db');
SELECT collegedb.add_shard(s) FROM unnest(ARRAY['db-a', 'db-b', 'db-c']) AS s;
SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE IF EXISTS users') ORDER BY shard;
SELECT shard, ok FROM collegedb.run_on_all(
  'CREATE TABLE users (id TEXT PRIMARY KEY, name TEXT, email TEXT, visits INTEGER DEFAULT 0)') ORDER BY shard;

-- settings: defaults, changes, resets
SELECT name, value, is_default FROM collegedb.settings ORDER BY name;
SELECT collegedb.configure(mapping_cache_ttl => '1 minute', migration_concurrency => 10);
SELECT name, value FROM collegedb.settings WHERE NOT is_default ORDER BY name;
SELECT collegedb.reset_setting('mapping_cache_ttl');
SELECT collegedb.reset_setting('migration_concurrency');
SELECT count(*) AS changed FROM collegedb.settings WHERE NOT is_default;

-- invalid settings are refused and change nothing
CREATE FUNCTION bad_predicate(shard text) RETURNS boolean LANGUAGE sql AS 'SELECT true';
SELECT try($$SELECT collegedb.configure(strategy => 'consistent')$$);
SELECT try($$SELECT collegedb.configure(read_strategy => 'nearest')$$);
SELECT try($$SELECT collegedb.configure(placement => 'both')$$);
SELECT try($$SELECT collegedb.configure(mapping_cache_ttl => '-1 second')$$);
SELECT try($$SELECT collegedb.configure(size_cache_ttl => '-5 minutes')$$);
SELECT try($$SELECT collegedb.configure(max_shard_size => 0)$$);
SELECT try($$SELECT collegedb.configure(max_shard_size => -10)$$);
SELECT try($$SELECT collegedb.configure(migration_concurrency => 0)$$);
SELECT try($$SELECT collegedb.configure(target_region => 'atlantis')$$);
SELECT try($$SELECT collegedb.configure(placement => 'computed', strategy => 'round-robin')$$);
SELECT try($$SELECT collegedb.configure(placement => 'computed', write_strategy => 'random')$$);
SELECT try($$SELECT collegedb.configure(eligible => 'bad_predicate(text)')$$);
SELECT try($$SELECT collegedb.reset_setting('colour')$$);
SELECT count(*) AS changed FROM collegedb.settings WHERE NOT is_default;

-- plain mapping keys first (hash_mappings can change only while no mapping exists)
SELECT collegedb.configure(hash_mappings => false);
SELECT collegedb.run('plain-1', 'INSERT INTO users (id, name) VALUES ($1, $2)', 'plain-1', 'Plain');
SELECT collegedb.mapping_key('plain-1'), collegedb.keys_for_shard(collegedb.shard_for_key('plain-1'));
-- lookup keys are kept as they are too
SELECT collegedb.add_lookup_keys('plain-1', ARRAY['email:plain@example.com']);
SELECT collegedb.get_lookup_keys('email:plain@example.com');
SELECT try($$SELECT collegedb.configure(hash_mappings => true)$$);
SELECT collegedb.run('plain-1', 'DELETE FROM users WHERE id = $1', 'plain-1');
SELECT collegedb.delete_mapping('plain-1');
SELECT collegedb.configure(hash_mappings => true);

-- 300 users written by key land where rendezvous hashing puts them
SELECT sum(collegedb.run('user-' || i, 'INSERT INTO users (id, name, email) VALUES ($1, $2, $3)',
                         'user-' || i, 'User ' || i, 'user' || i || '@example.com'))
  FROM generate_series(0, 299) AS i;
SELECT n.name AS shard, count(*) FROM collegedb.mapping m
  JOIN collegedb.shard_number n ON n.number = m.shard GROUP BY 1 ORDER BY 1;
SELECT s.name,
       (SELECT (j->>'n')::int FROM collegedb.all_on_shard(s.name, 'SELECT count(*) AS n FROM users') AS j) AS rows
  FROM collegedb.shards s ORDER BY s.name;
-- stored keys are the first 128 bits of the SHA-256 of the key by default
SELECT collegedb.mapping_key('user-1') = left(encode(sha256('user-1'::bytea), 'hex'), 32) AS sha256,
       (SELECT (SELECT n.name FROM collegedb.shard_number n WHERE n.number = m.shard) FROM collegedb.mapping m WHERE m.key = collegedb.mapping_id('user-1')) AS shard,
       collegedb.rendezvous_owner('user-1', ARRAY['db-a', 'db-b', 'db-c']) AS owner;

-- reads: first, all with a column definition list, all_json
SELECT collegedb.first('user-7', 'SELECT id, name FROM users WHERE id = $1', 'user-7');
SELECT collegedb.first('user-7', 'SELECT id FROM users WHERE id = $1', 'no-such-row');
SELECT * FROM collegedb.all('user-7', 'SELECT id, name, visits FROM users WHERE id = $1', 'user-7')
  AS t(id text, name text, visits int);
SELECT * FROM collegedb.all_json('user-8', 'SELECT id, email FROM users WHERE id = $1', 'user-8');
SELECT * FROM collegedb.all('user-8', 'SELECT 1, 2') AS t(a int, b int);
SELECT collegedb.run('user-8', 'UPDATE users SET visits = visits + 1 WHERE id = $1', 'user-8');
SELECT count(*) FROM collegedb.all('user-8', 'SELECT visits FROM users') AS t(visits bigint);

-- explaining a decision
SELECT * FROM collegedb.route('user-8');
SELECT collegedb.shard_for_key('user-8'), collegedb.shard_for_key('user-8', true);
SELECT * FROM collegedb.route('never-written');
SELECT collegedb.shard_for_key('never-written', true) = collegedb.rendezvous_owner('never-written', ARRAY['db-a', 'db-b', 'db-c']) AS hash_pick;

-- a read of an unmapped key goes to the strategy's pick and saves nothing
SELECT collegedb.first('ghost-1', 'SELECT count(*) AS n FROM users WHERE id = $1', 'ghost-1');
SELECT count(*) FROM collegedb.mapping WHERE key = collegedb.mapping_id('ghost-1');
-- ... unless allocate_on_read
SELECT collegedb.configure(allocate_on_read => true);
SELECT collegedb.first('ghost-1', 'SELECT count(*) AS n FROM users WHERE id = $1', 'ghost-1');
SELECT source FROM collegedb.route('ghost-1');
SELECT collegedb.reset_setting('allocate_on_read');
SELECT collegedb.delete_mapping('ghost-1');

-- a write is anything but SELECT/VALUES/TABLE/SHOW/EXPLAIN or WITH without a write
SELECT collegedb.run('cte-read', 'WITH x AS (SELECT 1 AS a) SELECT a FROM x');
SELECT count(*) FROM collegedb.mapping WHERE key = collegedb.mapping_id('cte-read');
SELECT collegedb.run('cte-write', 'WITH x AS (SELECT $1 AS id) INSERT INTO users (id) SELECT id FROM x', 'cte-write');
SELECT count(*) FROM collegedb.mapping WHERE key = collegedb.mapping_id('cte-write');

-- a mapped key goes to its mapping, whatever the strategy says now
SELECT collegedb.rendezvous_owner('user-9', ARRAY['db-a', 'db-b', 'db-c']) AS owner;
SELECT collegedb.set_mapping('pinned-1', 'db-a');
SELECT collegedb.run('pinned-1', 'INSERT INTO users (id) VALUES ($1)', 'pinned-1');
SELECT collegedb.rendezvous_owner('pinned-1', ARRAY['db-a', 'db-b', 'db-c']) AS owner, * FROM collegedb.route('pinned-1');
SELECT * FROM collegedb.all_on_shard('db-a', 'SELECT id FROM users WHERE id = $1', 'pinned-1');

-- a rolled-back write leaves no mapping, and the cache forgets it
BEGIN;
SELECT collegedb.run('rolled-1', 'INSERT INTO users (id) VALUES ($1)', 'rolled-1');
SELECT source FROM collegedb.route('rolled-1');
ROLLBACK;
SELECT source FROM collegedb.route('rolled-1');
SELECT count(*) FROM collegedb.mapping WHERE key = collegedb.mapping_id('rolled-1');

-- lookup keys: every key of a record resolves to its shard
SELECT collegedb.set_mapping('user-123', 'db-b', ARRAY['username:john_doe', 'email:john@example.com']);
SELECT collegedb.run('user-123', 'INSERT INTO users (id, name, email) VALUES ($1, $2, $3)',
                     'user-123', 'John', 'john@example.com');
SELECT collegedb.first('username:john_doe', 'SELECT name FROM users WHERE id = $1', 'user-123');
SELECT shard, source FROM collegedb.route('email:john@example.com');
SELECT collegedb.add_lookup_keys('user-123', ARRAY['id:123']);
-- with hash_mappings the lookup keys are stored (and returned) hashed, as
-- mapping_key() shows them
CREATE FUNCTION stored(keys text[]) RETURNS text[] LANGUAGE sql AS
  $$ SELECT array_agg(collegedb.mapping_key(k) ORDER BY o) FROM unnest(keys) WITH ORDINALITY AS u(k, o) $$;
SELECT collegedb.get_lookup_keys('id:123') = stored(ARRAY['user-123', 'username:john_doe', 'email:john@example.com', 'id:123']) AS stored_forms;
SELECT collegedb.get_lookup_keys('user-123') = stored(ARRAY['user-123', 'username:john_doe', 'email:john@example.com', 'id:123']) AS stored_forms;
SELECT count(*) AS clear_text FROM collegedb.mapping m, unnest(m.keys) AS k WHERE k LIKE '%:%' OR k LIKE 'user-%';
SELECT collegedb.get_lookup_keys('nobody');
SELECT count(*) FROM collegedb.mapping WHERE coalesce(record, key) = collegedb.mapping_id('user-123');
-- keys_for_shard lists digests when keys are hashed
SELECT k ~ '^[0-9a-f]{32}$' AS digest, count(*) FROM collegedb.keys_for_shard('db-b') AS k GROUP BY 1;
-- update_mapping moves every key of the record; the cache follows at once
SELECT collegedb.update_mapping('email:john@example.com', 'db-c');
SELECT record IS NULL AS is_primary, (SELECT n.name FROM collegedb.shard_number n WHERE n.number = shard) AS shard FROM collegedb.mapping
 WHERE coalesce(record, key) = collegedb.mapping_id('user-123') ORDER BY 1, 2;
SELECT shard FROM collegedb.route('username:john_doe');
SELECT shard FROM collegedb.route('user-123');
-- reads by lookup key: the mapped shard first, then every shard; never a new mapping
SELECT collegedb.first_by_lookup_key('username:john_doe', 'SELECT id FROM users WHERE email = $1', 'john@example.com');
SELECT collegedb.first_by_lookup_key('email:unknown', 'SELECT id, email FROM users WHERE email = $1', 'user5@example.com');
SELECT j FROM collegedb.all_by_lookup_key('email:unknown', 'SELECT id FROM users WHERE email LIKE $1', 'user1_@example.com') AS j
 ORDER BY j->>'id';
SELECT collegedb.first_by_lookup_key('email:nobody', 'SELECT id FROM users WHERE email = $1', 'nobody@example.com');
SELECT count(*) FROM collegedb.mapping WHERE key = collegedb.mapping_id('email:unknown');
-- a colliding lookup key is refused, and nothing changes
SELECT collegedb.set_mapping('user-456', 'db-a', ARRAY['email:jane@example.com']);
SELECT try($$SELECT collegedb.add_lookup_keys('user-456', ARRAY['email:new@example.com', 'username:john_doe'])$$);
SELECT try($$SELECT collegedb.set_mapping('user-789', 'db-a', ARRAY['email:jane@example.com'])$$);
SELECT try($$SELECT collegedb.set_mapping('email:jane@example.com', 'db-c')$$);
SELECT collegedb.get_lookup_keys('user-456') = stored(ARRAY['user-456', 'email:jane@example.com']) AS stored_forms;
SELECT count(*) FROM collegedb.mapping WHERE key IN (collegedb.mapping_id('email:new@example.com'),
                                                      collegedb.mapping_id('user-789'));
-- delete_mapping removes every key of the record
SELECT collegedb.delete_mapping('username:john_doe');
SELECT count(*) FROM collegedb.mapping WHERE coalesce(record, key) = collegedb.mapping_id('user-123');
SELECT source FROM collegedb.route('email:john@example.com');
-- bad mapping calls
SELECT try($$SELECT collegedb.set_mapping('k', 'db-z')$$);
SELECT try($$SELECT collegedb.update_mapping('user-456', 'db-z')$$);
SELECT try($$SELECT collegedb.update_mapping('nobody', 'db-a')$$);
SELECT try($$SELECT collegedb.delete_mapping('nobody')$$);
SELECT try($$SELECT collegedb.add_lookup_keys('nobody', ARRAY['x'])$$);
SELECT try($$SELECT collegedb.set_mapping('k', 'db-a', ARRAY['x', NULL])$$);
SELECT try($$SELECT collegedb.first_by_lookup_key('k', 'DELETE FROM users')$$);

-- a warm routed statement reads no catalog table: 1,000 reads of 10 keys
SELECT count(*) FROM generate_series(0, 9) AS i,
       LATERAL collegedb.first('user-' || i, 'SELECT id FROM users WHERE id = $1', 'user-' || i) AS f;
BEGIN;
SELECT idx_scan AS scans_before, (SELECT catalog_reads FROM collegedb.cache_stats()) AS reads_before
  FROM pg_stat_xact_user_tables WHERE relid = 'collegedb.mapping'::regclass \gset
SELECT count(f) FROM generate_series(1, 1000) AS i,
       LATERAL collegedb.first('user-' || (i % 10), 'SELECT id FROM users WHERE id = $1', 'user-' || (i % 10)) AS f;
SELECT idx_scan - :scans_before AS mapping_index_scans,
       (SELECT catalog_reads FROM collegedb.cache_stats()) - :reads_before AS catalog_reads
  FROM pg_stat_xact_user_tables WHERE relid = 'collegedb.mapping'::regclass;
COMMIT;

-- a mapping to a shard that is no longer registered is SHARD_NOT_FOUND
SELECT collegedb.set_mapping('orphan-1', 'db-c');
SELECT try($$SELECT collegedb.drop_shard('db-c')$$);
BEGIN;
SELECT collegedb.drop_shard('db-c', force => true);
SELECT try($$SELECT collegedb.run('orphan-1', 'SELECT 1')$$);
-- new keys go to the remaining shards
SELECT collegedb.rendezvous_owner('never-written', ARRAY['db-a', 'db-b', 'db-c']) AS before,
       collegedb.shard_for_key('never-written', true) AS now,
       collegedb.rendezvous_owner('never-written', ARRAY['db-a', 'db-b']) AS owner_of_two;
ROLLBACK;
SELECT name FROM collegedb.shards;

-- no shard takes new keys: NO_ELIGIBLE_SHARD, while mapped keys keep working
SELECT collegedb.set_shard_state(s, writable => false) FROM unnest(ARRAY['db-a', 'db-b', 'db-c']) AS s;
SELECT try($$SELECT collegedb.run('brand-new', 'INSERT INTO users (id) VALUES (''brand-new'')')$$);
SELECT collegedb.run('user-7', 'UPDATE users SET visits = visits + 1 WHERE id = $1', 'user-7');
SELECT collegedb.set_shard_state(s, writable => true) FROM unnest(ARRAY['db-a', 'db-b', 'db-c']) AS s;

-- bad input
SELECT try($$SELECT collegedb.run(NULL, 'SELECT 1')$$);
SELECT try($$SELECT collegedb.first(NULL, 'SELECT 1')$$);
SELECT try($$SELECT collegedb.run('user-1', NULL)$$);
SELECT try($$SELECT collegedb.run('user-1', '')$$);
SELECT try($$SELECT collegedb.run('user-1', '  -- just a comment')$$);
SELECT try($$SELECT collegedb.run('user-1', 'SELECT 1; DELETE FROM users')$$);
SELECT count(*) FROM collegedb.all_on_shard(collegedb.shard_for_key('user-1'), 'SELECT id FROM users WHERE id = $1', 'user-1');
SELECT try($$SELECT * FROM collegedb.all('user-1', 'SELECT id, name FROM users') AS t(id text)$$);
SELECT try($$SELECT * FROM collegedb.all('user-1', 'SELECT name FROM users WHERE id = $1', 'user-1') AS t(n int)$$);
-- a 10 MB key: hashed, it is mapped like any other
SELECT length(repeat('k', 10 * 1024 * 1024)) AS key_length,
       collegedb.run(repeat('k', 10 * 1024 * 1024), 'INSERT INTO users (id) VALUES (''big'')') AS rows;
SELECT count(*) FROM collegedb.mapping WHERE key = collegedb.mapping_id(repeat('k', 10 * 1024 * 1024));
SELECT collegedb.first(repeat('k', 10 * 1024 * 1024), 'SELECT id FROM users WHERE id = ''big''');
-- empty, non-ASCII and ':' keys
SELECT collegedb.run(k, 'INSERT INTO users (id) VALUES ($1)', k) FROM unnest(ARRAY['', 'Zürich', 'enam:room:1']) AS k;
SELECT k, (SELECT shard FROM collegedb.route(k)) = collegedb.rendezvous_owner(k, ARRAY['db-a', 'db-b', 'db-c']) AS hash_owner,
       collegedb.first(k, 'SELECT id FROM users WHERE id = $1', k)
  FROM unnest(ARRAY['', 'Zürich', 'enam:room:1']) AS k;

SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE users') ORDER BY shard;
DROP FUNCTION try(text);
DROP FUNCTION bad_predicate(text);
DROP FUNCTION stored(text[]);
DROP EXTENSION collegedb CASCADE;
