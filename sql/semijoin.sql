-- "key IN (SELECT ...)" on a sharded foreign table: read by the list of the
-- subquery's keys, one statement per shard (fdw/semijoin.c), with the same
-- answers as the semi join it replaces: NULLs, repeats, missing keys, an
-- empty subquery; NOT IN, OR and correlated subqueries stay as they were.
-- A join of the key with a smaller local table is read by its keys too.
-- Both forms keep a key read's guarantees: a moved key is followed through
-- its tombstone, text keys compare on the shard as in a key read.
CREATE EXTENSION collegedb;
\set VERBOSITY terse
\i sql/common/env.sql
SET collegedb.commit_protocol = 'sequential';
SELECT current_user AS me \gset
\set a_db :sqlite_dir '/semijoin_a.db'
CREATE DATABASE collegedb_semijoin;
CREATE SERVER sj_a FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'a_db');
CREATE SERVER sj_p FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'postgres', host :'pg_host', port :'pg_port', dbname 'collegedb_semijoin');
CREATE USER MAPPING FOR PUBLIC SERVER sj_p OPTIONS (user :'me');
CREATE SERVER sj_m FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'mysql', host :'my_host', port :'my_port', dbname 'collegedb_test');
CREATE USER MAPPING FOR PUBLIC SERVER sj_m OPTIONS (user :'my_user', password :'my_password');
SELECT collegedb.add_shard('sj_a'), collegedb.add_shard('sj_p'), collegedb.add_shard('sj_m');
SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE IF EXISTS sj') ORDER BY shard;
SELECT shard, ok FROM collegedb.run_on_all(
  'CREATE TABLE sj (id BIGINT, v VARCHAR(20))') ORDER BY shard;
CREATE FOREIGN TABLE sj (id bigint, v text) SERVER collegedb OPTIONS (key_column 'id');
-- 30 keys over the three shards, keys 1-3 with two rows each
INSERT INTO sj SELECT g, 'v' || g FROM generate_series(1, 30) AS g;
INSERT INTO sj SELECT g, 'w' || g FROM generate_series(1, 3) AS g;
CREATE TABLE sj_local AS SELECT * FROM sj;
-- the outer keys: repeats, a NULL, keys without rows
CREATE TABLE keys (k bigint, tag text);
INSERT INTO keys VALUES (1, 'a'), (1, 'a'), (2, 'b'), (7, 'c'), (NULL, 'd'), (99, 'e'),
  (12, 'f'), (25, 'g');

-- the rewritten form: the subquery once (an InitPlan), the shards by key
EXPLAIN (COSTS OFF) SELECT * FROM sj WHERE id IN (SELECT k FROM keys);
EXPLAIN (COSTS OFF) SELECT * FROM sj WHERE id IN (SELECT k FROM keys WHERE tag < 'c') AND v > 'a';
-- the same rows as the semi join on the local copy, also with a condition on the keys
SELECT id, v FROM sj WHERE id IN (SELECT k FROM keys) ORDER BY id, v;
SELECT (SELECT array_agg(t ORDER BY t) FROM (SELECT id, v FROM sj WHERE id IN (SELECT k FROM keys)) t)
     = (SELECT array_agg(t ORDER BY t) FROM (SELECT id, v FROM sj_local WHERE id IN (SELECT k FROM keys)) t)
  AS same_as_local;
SELECT id, v FROM sj WHERE id IN (SELECT k FROM keys WHERE tag < 'c') AND v > 'v' ORDER BY id, v;
-- no key at all, only NULL, only missing keys: no row
SELECT count(*) FROM sj WHERE id IN (SELECT k FROM keys WHERE false);
SELECT count(*) FROM sj WHERE id IN (SELECT k FROM keys WHERE k IS NULL);
SELECT count(*) FROM sj WHERE id IN (SELECT k FROM keys WHERE k > 90);
-- in a subquery in FROM and in a CTE
SELECT count(*) FROM (SELECT * FROM sj WHERE id IN (SELECT k FROM keys)) s;
WITH w AS (SELECT * FROM sj WHERE id IN (SELECT k FROM keys)) SELECT count(*) FROM w;
-- one statement per shard that has keys, not one per key
CREATE FUNCTION statements(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
  ln text;
BEGIN
  FOR ln IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q LOOP
    IF ln ~ 'Shard |statements' THEN
      RETURN NEXT regexp_replace(ln, '\m\d+\.\d+\M', 'N', 'g');
    END IF;
  END LOOP;
END $$;
SELECT statements($$SELECT * FROM sj WHERE id IN (SELECT k FROM keys)$$);

-- not rewritten: NOT IN, under OR, a subquery that reads the outer row, a
-- column that is not the key; the answers stay the semi join's
EXPLAIN (COSTS OFF) SELECT * FROM sj WHERE id NOT IN (SELECT k FROM keys WHERE k IS NOT NULL);
SELECT count(*) FROM sj WHERE id NOT IN (SELECT k FROM keys WHERE k IS NOT NULL);
SELECT count(*) FROM sj WHERE id IN (SELECT k FROM keys) OR v = 'v30';
SELECT count(*) FROM sj WHERE id IN (SELECT k FROM keys WHERE keys.tag < sj.v);
SELECT count(*) FROM sj WHERE v IN (SELECT 'v' || k FROM keys);
-- collegedb.semi_join_key_lists = off: the semi join, the same rows
SET collegedb.semi_join_key_lists = off;
EXPLAIN (COSTS OFF) SELECT * FROM sj WHERE id IN (SELECT k FROM keys);
SELECT id, v FROM sj WHERE id IN (SELECT k FROM keys) ORDER BY id, v;
RESET collegedb.semi_join_key_lists;
-- a prepared statement, planned generic
PREPARE p(text) AS SELECT id, v FROM sj WHERE id IN (SELECT k FROM keys WHERE tag = $1) ORDER BY id, v;
SET plan_cache_mode = force_generic_plan;
EXECUTE p('a');
EXECUTE p('c');
RESET plan_cache_mode;

-- a join of the key with a smaller local table (by ANALYZE's counts): the
-- sharded table read by the local table's keys, then joined as before
ANALYZE sj;
ANALYZE keys;
EXPLAIN (COSTS OFF) SELECT k, v FROM keys JOIN sj ON sj.id = keys.k;
SELECT statements($$SELECT k, v FROM keys JOIN sj ON sj.id = keys.k$$);
SELECT k, tag, v FROM keys JOIN sj ON sj.id = keys.k ORDER BY k, tag, v;
-- every join type, either side, USING: the local copy's rows
CREATE FUNCTION same_rows(q text) RETURNS bool LANGUAGE plpgsql AS $$
DECLARE
  a text[];
  b text[];
BEGIN
  EXECUTE format('SELECT array_agg(t::text ORDER BY t::text) FROM (%s) t', q) INTO a;
  EXECUTE format('SELECT array_agg(t::text ORDER BY t::text) FROM (%s) t',
                 replace(q, ' sj ', ' sj_local ')) INTO b;
  RETURN a IS NOT DISTINCT FROM b;
END $$;
SELECT same_rows('SELECT k, tag, v FROM keys JOIN sj s ON s.id = keys.k') AS inner_join,
       same_rows('SELECT k, tag, v FROM keys LEFT JOIN sj s ON s.id = keys.k') AS left_join,
       same_rows('SELECT k, tag, id, v FROM sj s LEFT JOIN keys ON s.id = keys.k') AS preserved_sharded,
       same_rows('SELECT k, tag, id, v FROM keys FULL JOIN sj s ON keys.k = s.id') AS full_join,
       same_rows('SELECT id, v FROM sj s JOIN (SELECT k AS id FROM keys) k USING (id)') AS using_join,
       same_rows('SELECT k, v FROM keys, sj s WHERE s.id = keys.k AND tag > ''b''') AS in_where;
-- the nullable side of an outer join is read by the keys; the preserved
-- side is read whole: nothing is added there
EXPLAIN (COSTS OFF) SELECT k, tag, id, v FROM keys LEFT JOIN sj ON sj.id = keys.k;
EXPLAIN (COSTS OFF) SELECT k, tag, id, v FROM sj LEFT JOIN keys ON sj.id = keys.k;
-- a local table larger than the sharded one: a scan of every shard
CREATE TABLE many AS SELECT g::bigint AS k FROM generate_series(1, 1000) AS g;
ANALYZE many;
EXPLAIN (COSTS OFF) SELECT count(*) FROM many JOIN sj ON sj.id = many.k;
SELECT count(*) FROM many JOIN sj ON sj.id = many.k;

-- an empty local table: its join reads no key, and no row comes
CREATE TABLE none_local (k bigint);
ANALYZE none_local;
SELECT statements($$SELECT k, v FROM none_local JOIN sj ON sj.id = none_local.k$$);
SELECT count(*) FROM none_local JOIN sj ON sj.id = none_local.k;
SELECT count(*) FROM sj WHERE id IN (SELECT k FROM none_local);

-- a key that moved, behind a stale mapping: followed through its tombstone,
-- its rows once, in both forms
SELECT collegedb.shard_for_key('7') AS old_shard \gset
SELECT s AS new_shard FROM unnest(ARRAY['sj_a', 'sj_p', 'sj_m']) AS s
 WHERE s <> :'old_shard' ORDER BY s LIMIT 1 \gset
SELECT collegedb.reassign_shard('7', :'new_shard') ->> 'rows' AS rows_moved;
UPDATE collegedb.mapping SET shard = (SELECT n.number FROM collegedb.shard_number n WHERE n.name = :'old_shard') WHERE key = collegedb.mapping_id('7');
SELECT collegedb.disconnect_all() IS NOT NULL AS disconnected;
SELECT id, v FROM sj WHERE id IN (SELECT k FROM keys) ORDER BY id, v;
SELECT same_rows('SELECT k, tag, v FROM keys JOIN sj s ON s.id = keys.k') AS inner_join_after_move;
SELECT statements($$SELECT k, v FROM keys JOIN sj ON sj.id = keys.k$$);

-- text keys, on each dialect: the rows of one key read per distinct key,
-- byte for byte as a key read compares them, whatever the shard's
-- collation ('kB' and 'kb' on MariaDB, whose default one ignores case and
-- trailing spaces: its list of keys also finds 'kb' for 'kB', which the
-- front leaves out)
SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE IF EXISTS sjt') ORDER BY shard;
SELECT shard, ok FROM collegedb.run_on_all(
  'CREATE TABLE sjt (id VARCHAR(20), v VARCHAR(20))') ORDER BY shard;
CREATE FOREIGN TABLE sjt (id text, v text) SERVER collegedb OPTIONS (key_column 'id');
SELECT count(collegedb.set_mapping(k, s))
  FROM unnest(ARRAY['ka', 'kB', 'kb', 'k c', 'kä'],
              ARRAY['sj_a', 'sj_m', 'sj_m', 'sj_p', 'sj_m']) AS t(k, s);
INSERT INTO sjt VALUES ('ka', 'a'), ('kB', 'B'), ('kb', 'b'), ('k c', 'c'), ('kä', 'd'), ('ka', 'a2');
-- 'kB' and 'kb' share a shard; 'KA' and 'k c ' have no mapping of their own
CREATE TABLE tkeys (k text);
INSERT INTO tkeys VALUES ('ka'), ('kB'), ('k c'), ('kä'), ('ka'), (NULL), ('nope'), ('KA'), ('k c ');
ANALYZE tkeys;
CREATE FUNCTION key_reads() RETURNS SETOF sjt LANGUAGE plpgsql AS $$
DECLARE
  k text;
BEGIN
  FOR k IN SELECT DISTINCT t.k FROM tkeys t WHERE t.k IS NOT NULL LOOP
    RETURN QUERY SELECT * FROM sjt WHERE id = k;
  END LOOP;
END $$;
EXPLAIN (COSTS OFF) SELECT * FROM sjt WHERE id IN (SELECT k FROM tkeys);
SELECT id, v FROM sjt WHERE id IN (SELECT k FROM tkeys) ORDER BY id, v;
SELECT id, v FROM key_reads() ORDER BY id, v;
SELECT (SELECT array_agg(t::text ORDER BY t::text) FROM (SELECT id, v FROM sjt WHERE id IN (SELECT k FROM tkeys)) t)
     = (SELECT array_agg(t::text ORDER BY t::text) FROM key_reads() t) AS same_as_key_reads;
-- a key read of 'kB' alone, and the list of it: the same shard's answer
SELECT id, v FROM sjt WHERE id = 'kB' ORDER BY id, v;
SELECT id, v FROM sjt WHERE id IN (SELECT 'kB'::text) ORDER BY id, v;
SELECT statements($$SELECT * FROM sjt WHERE id IN (SELECT k FROM tkeys)$$);
-- a join compares its rows again on the front: 'ka' twice in tkeys, twice each
SELECT tkeys.k, sjt.v FROM tkeys JOIN sjt ON sjt.id = tkeys.k ORDER BY 1, 2;
-- writes by a list of text keys change those keys' rows only, byte for byte
-- as a write of one key does: 'kb' is not 'kB', 'KA' not 'ka', 'k c ' not 'k c'
UPDATE sjt SET v = 'u1' WHERE id IN ('kB', 'zz', 'k c ', 'KA');
SELECT id, v FROM sjt ORDER BY id, v;
UPDATE sjt SET v = 'u2' WHERE id = ANY(ARRAY['kb', 'ka', 'KB', 'kä']);
SELECT id, v FROM sjt ORDER BY id, v;
SELECT statements($$UPDATE sjt SET v = 'u3' WHERE id = ANY(ARRAY['kb', 'ka', 'KB', 'kä', 'k c'])$$);
DELETE FROM sjt WHERE id IN ('KB', 'kä', 'k c ', 'kb');
SELECT id, v FROM sjt ORDER BY id, v;
SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE sjt') ORDER BY shard;
DROP FUNCTION key_reads();
DROP FOREIGN TABLE sjt;

SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE sj') ORDER BY shard;
DROP FOREIGN TABLE sj;
DROP EXTENSION collegedb CASCADE;
DROP DATABASE collegedb_semijoin;
