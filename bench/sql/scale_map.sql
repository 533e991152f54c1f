-- Bulk load of the scale part's mappings: keys :from .. :to pinned to shard
-- sc<n>_<hashtext(key) & (n - 1)>, each key's row as set_mapping writes it
-- (its id, collegedb.mapping_id(key), and its shard's number; a key that is
-- its own record, no lookup keys).  One INSERT ... SELECT instead of a
-- set_mapping call per key, the rows in the order of the keys: the ids in
-- a random order, as a load through the front inserts them (in the order of
-- the ids, into a tree that already holds the first keys, every leaf would
-- be split in half and stay half full).  psql variables: from, to, nshards
-- (a power of two).
\set ON_ERROR_STOP on
SET work_mem = '1GB';
INSERT INTO collegedb.mapping (key, shard)
SELECT k, n.number
  FROM generate_series(:from, :to) AS i
       CROSS JOIN LATERAL collegedb.mapping_id(i::text) AS k
       JOIN collegedb.shard_number n ON n.name = 'sc' || :nshards || '_' || (hashtext(i::text) & (:nshards - 1));
VACUUM (ANALYZE) collegedb.mapping;
