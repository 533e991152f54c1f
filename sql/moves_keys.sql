-- Keys in moves: compared byte for byte on every dialect (a MySQL column
-- with a case-insensitive, PAD SPACE collation; an SQLite NOCASE column),
-- keys too long for a shard's tombstones refused before anything is
-- written, lookup keys moved by their record (without hash_mappings), and
-- strategies that do not follow from the key (round-robin, location):
-- explaining a decision takes no round-robin ticket, and a rebalance moves
-- keys only off shards that take none.
CREATE EXTENSION collegedb;
\set VERBOSITY terse
-- progress NOTICEs depend on timing
SET collegedb.progress_notices = off;
\i sql/common/env.sql
-- statements here write on several SQLite shards at once, which cannot
-- take part in one two-phase commit (see twophase.sql): they commit in turn
SET collegedb.commit_protocol = 'sequential';
\set lite_db :sqlite_dir '/moves_keys_lite.db'
\set lite2_db :sqlite_dir '/moves_keys_lite2.db'
\i sql/common/try.sql

-- keys kept as they are, so that lookup keys can name their record
SELECT collegedb.configure(hash_mappings => false);
CREATE SERVER lite FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'lite_db');
CREATE SERVER lite2 FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'lite2_db');
CREATE SERVER my FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'mysql', host :'my_host', port :'my_port', dbname 'collegedb_test');
CREATE USER MAPPING FOR PUBLIC SERVER my OPTIONS (user :'my_user', password :'my_password');
SELECT collegedb.add_shard('lite', region => 'weur');
SELECT collegedb.add_shard('lite2', region => 'weur');
SELECT collegedb.add_shard('my', region => 'enam');
SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE IF EXISTS ci') ORDER BY shard;
SELECT collegedb.run_on_shard('lite', 'CREATE TABLE ci (id TEXT COLLATE NOCASE, v INTEGER)');
SELECT collegedb.run_on_shard('lite2', 'CREATE TABLE ci (id TEXT COLLATE NOCASE, v INTEGER)');
SELECT collegedb.run_on_shard('my',
  'CREATE TABLE ci (id VARCHAR(600) COLLATE utf8mb4_general_ci, v INTEGER, KEY (id)) DEFAULT CHARSET = utf8mb4');
SELECT collegedb.register_table('ci', 'id');
CREATE FUNCTION rows_of(s text) RETURNS text LANGUAGE sql AS $$
  SELECT coalesce(string_agg(format('%L=%s', value->>'id', value->>'v'), ' ' ORDER BY value->>'id' COLLATE "C", value->>'v'), '(none)')
    FROM collegedb.all_on_shard(s, 'SELECT id, v FROM ci') AS t(value)
$$;

-- 'K', 'k' and 'k ' are one key to MySQL's collation, three to collegedb
SELECT collegedb.set_mapping(k, 'my') FROM unnest(ARRAY['K', 'k', 'k ']) AS k;
SELECT collegedb.run(k, 'INSERT INTO ci VALUES ($1, $2)', k, i)
  FROM unnest(ARRAY['K', 'k', 'k ']) WITH ORDINALITY AS u(k, i);
SELECT rows_of('my') AS on_my;
SELECT collegedb.reassign_shard('k', 'lite') - 'move_id';
SELECT rows_of('my') AS on_my, rows_of('lite') AS on_lite;
SELECT collegedb.reassign_shard('K', 'lite') - 'move_id';
SELECT rows_of('my') AS on_my, rows_of('lite') AS on_lite;
-- and back, out of a NOCASE column: again only the key's own row
SELECT collegedb.reassign_shard('k', 'lite2') - 'move_id';
SELECT rows_of('lite') AS on_lite, rows_of('lite2') AS on_lite2;
SELECT k, collegedb.first(k, 'SELECT v FROM ci WHERE id = $1', k) FROM unnest(ARRAY['K', 'k', 'k ']) AS k ORDER BY k;

-- MySQL tombstones hold keys of at most 512 characters: a longer key is
-- refused before anything is written, on either side
SELECT collegedb.set_mapping(repeat('x', 513), 'lite');
SELECT collegedb.run(repeat('x', 513), 'INSERT INTO ci VALUES ($1, 0)', repeat('x', 513));
SELECT try(format($$SELECT collegedb.reassign_shard(%L, 'my')$$, repeat('x', 513)));
SELECT count(*) AS moves_of_long_key FROM collegedb.moves WHERE length(key) > 512;
SELECT (SELECT count(*) FROM collegedb.all_on_shard('lite', 'SELECT id FROM ci WHERE length(id) = 513')) AS on_lite,
       (SELECT count(*) FROM collegedb.all_on_shard('my', 'SELECT id FROM ci WHERE length(id) = 513')) AS on_my;
SELECT collegedb.set_mapping(repeat('y', 512), 'lite');
SELECT collegedb.run(repeat('y', 512), 'INSERT INTO ci VALUES ($1, 0)', repeat('y', 512));
SELECT collegedb.reassign_shard(repeat('y', 512), 'my')->>'to' AS at_the_limit;

-- a lookup key moves its record (its primary key's rows), all keys follow
SELECT collegedb.set_mapping('u1', 'lite', ARRAY['email:u1@example.com']);
SELECT collegedb.run('u1', 'INSERT INTO ci VALUES ($1, $2)', 'u1', 42);
SELECT collegedb.reassign_shard('email:u1@example.com', 'my') - 'move_id';
SELECT (SELECT shard FROM collegedb.route('u1')) AS u1, (SELECT shard FROM collegedb.route('email:u1@example.com')) AS lookup,
       collegedb.first('email:u1@example.com', 'SELECT v FROM ci WHERE id = $1', 'u1');

-- round-robin: explaining where a new key would go takes no ticket, so the
-- split of new keys stays exact
SELECT collegedb.set_shard_state('my', writable => false);
SELECT collegedb.configure(strategy => 'round-robin');
SELECT count(DISTINCT collegedb.shard_for_key('rr-new', for_write => true)) AS same_answer,
       count(DISTINCT (SELECT shard FROM collegedb.route('rr-new'))) AS same_route
  FROM generate_series(1, 5);
SELECT sum(collegedb.run('rr-' || i, 'INSERT INTO ci VALUES ($1, 0)', 'rr-' || i)) FROM generate_series(1, 6) AS i;
SELECT s.name, count(*) FILTER (WHERE m.name LIKE 'rr-%') AS new_keys
  FROM collegedb.shards s JOIN collegedb.shard_number n ON n.name = s.name
  LEFT JOIN collegedb.mapping m ON m.shard = n.number
 WHERE s.name IN ('lite', 'lite2') GROUP BY s.name ORDER BY s.name;
SELECT collegedb.set_shard_state('my', writable => true);

-- (MySQL's tombstone table compares keys with PAD SPACE, so 'k ' and 'k'
-- cannot both have a tombstone there: 'k ' leaves before the drain)
SELECT collegedb.run_on_shard('my', 'DELETE FROM ci WHERE CAST(id AS BINARY) = CAST($1 AS BINARY)', 'k ') AS deleted;
SELECT collegedb.delete_mapping('k ');

-- location does not follow from the key: a rebalance leaves keys on shards
-- that take keys (here the MySQL shard, in another region than the target)
SELECT collegedb.configure(strategy => 'location', target_region => 'weur');
SELECT examined > 0 AS examined, moved FROM collegedb.rebalance('ci', dry_run => true);
SELECT collegedb.set_shard_state('my', drain => 'draining');
SELECT count(*) AS keys_on_my FROM collegedb.mapping WHERE shard = (SELECT n.number FROM collegedb.shard_number n WHERE n.name = 'my') AND record IS NULL;
SELECT moved, failed FROM collegedb.rebalance('ci');
SELECT rows_of('my') AS on_my;

SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE ci') ORDER BY shard;
DROP FUNCTION try(text), rows_of(text);
DROP EXTENSION collegedb CASCADE;
