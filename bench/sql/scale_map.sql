-- Bulk load of the scale part's mappings: keys :from .. :to pinned to shard
-- sc<n>_<hashtext(key) & (n - 1)>, the stored form of each key being
-- collegedb.mapping_key(key), as set_mapping stores it (a key that is its own
-- record, no lookup keys).  One INSERT ... SELECT instead of a set_mapping
-- call per key, the rows in the order of the stored key: the primary key and
-- the index on record (the same value) then grow at their right edge instead
-- of taking every row at a random leaf page, which with a table larger than
-- shared_buffers reads and writes a page per row.  psql variables: from, to,
-- nshards (a power of two).
\set ON_ERROR_STOP on
SET work_mem = '1GB';
INSERT INTO collegedb.mapping (key, record, shard)
SELECT k, k, 'sc' || :nshards || '_' || (hashtext(i::text) & (:nshards - 1))
  FROM generate_series(:from, :to) AS i,
       LATERAL collegedb.mapping_key(i::text) AS k
 ORDER BY k;
VACUUM (ANALYZE) collegedb.mapping;
