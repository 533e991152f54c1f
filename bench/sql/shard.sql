-- One database of the shard cluster: users '1' .. '100000' (ids are text).  psql
-- variables: part (0 or 1), or 'all' for the database "direct" that holds every user.
\set ON_ERROR_STOP on
CREATE TABLE users (id text NOT NULL, name text, visits integer);
INSERT INTO users (id, name, visits)
SELECT i::text, 'User ' || i, 0
  FROM generate_series(1, 100000) AS i
 WHERE :'part' = 'all' OR (hashtext(i::text) & 1)::text = :'part';
-- built after the load, the primary key's index is compact: 2 levels both for
-- 50,000 keys (a shard) and for 100,000 (database "direct")
ALTER TABLE users ADD PRIMARY KEY (id);
VACUUM (ANALYZE) users;
