-- The scale part's staging database on the shard cluster: users '1' .. :nkeys
-- with hashtext(id), from which each shard database of the scale part copies
-- its own rows (bench/run, scale part).  psql variable: nkeys.
\set ON_ERROR_STOP on
CREATE TABLE users_all AS
SELECT i::text AS id, 'User ' || i AS name, 0 AS visits, hashtext(i::text) AS h
  FROM generate_series(1, :nkeys) AS i;
