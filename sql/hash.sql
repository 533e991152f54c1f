-- The placement hash functions against reference/vectors.txt, and the
-- properties rendezvous hashing promises.
CREATE EXTENSION collegedb;

-- rendezvous scores and owners (vectors.txt)
SELECT k,
       collegedb.rendezvous_score('db-a', k) AS a,
       collegedb.rendezvous_score('db-b', k) AS b,
       collegedb.rendezvous_score('db-c', k) AS c,
       collegedb.rendezvous_owner(k, ARRAY['db-a', 'db-b', 'db-c']) AS owner3,
       collegedb.rendezvous_owner(k, ARRAY['db-a', 'db-b', 'db-c', 'db-d']) AS owner4
  FROM unnest(ARRAY['user-0', 'user-1', 'user-2', 'user-3', 'user-123',
                    'tenant-acme', 'Zürich', '']) WITH ORDINALITY AS t(k, i)
 ORDER BY i;

-- 300 keys over three shards: 99 / 101 / 100
SELECT collegedb.rendezvous_owner('user-' || i, ARRAY['db-a', 'db-b', 'db-c']) AS shard, count(*)
  FROM generate_series(0, 299) AS i GROUP BY 1 ORDER BY 1;

-- the owner does not depend on the order the shards are listed in
SELECT count(*) AS differ
  FROM generate_series(0, 999) AS i
 WHERE collegedb.rendezvous_owner('k' || i, ARRAY['db-a', 'db-b', 'db-c'])
    <> collegedb.rendezvous_owner('k' || i, ARRAY['db-c', 'db-a', 'db-b']);

-- adding a fourth shard moves about 1/4 of 10,000 keys (2504 in vectors.txt),
-- and only onto the new shard
WITH o AS (
  SELECT collegedb.rendezvous_owner('user-' || i, ARRAY['db-a', 'db-b', 'db-c']) AS before,
         collegedb.rendezvous_owner('user-' || i, ARRAY['db-a', 'db-b', 'db-c', 'db-d']) AS after
    FROM generate_series(0, 9999) AS i)
SELECT count(*) FILTER (WHERE before <> after) AS moved,
       count(*) FILTER (WHERE before <> after) BETWEEN 2000 AND 3000 AS about_a_quarter,
       count(*) FILTER (WHERE before <> after AND after <> 'db-d') AS moved_elsewhere
  FROM o;

-- removing a shard moves only that shard's keys
WITH o AS (
  SELECT collegedb.rendezvous_owner('user-' || i, ARRAY['db-a', 'db-b', 'db-c', 'db-d']) AS before,
         collegedb.rendezvous_owner('user-' || i, ARRAY['db-a', 'db-c', 'db-d']) AS after
    FROM generate_series(0, 9999) AS i)
SELECT count(*) FILTER (WHERE before <> after AND before <> 'db-b') AS moved_not_from_b,
       count(*) FILTER (WHERE before = 'db-b') AS moved_from_b
  FROM o;

-- keys with ':' and shard names with '-' are hashed as the bytes
-- shard || ':' || key, as src/README.md ("Placement") defines
SELECT collegedb.rendezvous_score('db-a', 'room:1') = collegedb.rendezvous_score('db-a:room', '1') AS same_bytes,
       collegedb.rendezvous_owner('enam:room:1', ARRAY['db-east-1', 'db-west-2']) AS owner;

-- jump consistent hash (vectors.txt)
SELECT k, n, collegedb.jump_bucket(k, n) AS bucket
  FROM (VALUES ('chan-3', 8), ('chan-1', 8), ('chan-5', 8), ('chan-13', 8), ('chan-0', 8),
               ('roomA', 4), ('roomA', 16), ('roomB', 8), ('tenant-xyz', 8)) AS v(k, n);
-- growing from 8 to 9 buckets moves keys only to the new bucket
SELECT count(*) FILTER (WHERE collegedb.jump_bucket('k' || i, 8) <> collegedb.jump_bucket('k' || i, 9)
                          AND collegedb.jump_bucket('k' || i, 9) <> 8) AS moved_elsewhere
  FROM generate_series(1, 5000) AS i;

-- slots (vectors.txt)
SELECT k, collegedb.slot_of(k, 1024) AS slot
  FROM unnest(ARRAY['user-1', 'order:42', 'tenant-acme', 'hello world', 'Zürich', '', E'\x01abc'])
       WITH ORDINALITY AS t(k, i)
 ORDER BY i;

-- strict, immutable, parallel safe
SELECT collegedb.rendezvous_score(NULL, 'k'), collegedb.jump_bucket('k', NULL),
       collegedb.slot_of(NULL, 8), collegedb.rendezvous_owner('k', NULL);
SELECT proname, provolatile, proisstrict, proparallel FROM pg_proc
 WHERE pronamespace = 'collegedb'::regnamespace
   AND proname IN ('rendezvous_score', 'rendezvous_owner', 'jump_bucket', 'slot_of')
 ORDER BY proname;

-- bad input
\set VERBOSITY terse
SELECT collegedb.jump_bucket('k', 0);
SELECT collegedb.slot_of('k', -1);
SELECT collegedb.rendezvous_owner('k', ARRAY['a', NULL]);
SELECT collegedb.rendezvous_owner('k', '{}');

DROP EXTENSION collegedb;
