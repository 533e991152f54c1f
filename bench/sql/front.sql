-- The front: collegedb, PL/Proxy and postgres_fdw, all pointing at the two
-- shard databases shard0 and shard1.  psql variables: host, port (the shard
-- cluster), user.
\set ON_ERROR_STOP on

-- collegedb: two PostgreSQL shards, every key pinned where hashtext puts it;
-- users is registered (its rows move with their key), as with moves in use
\ir extension.sql
CREATE SERVER shard0 FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'postgres', host :'host', port :'port', dbname 'shard0');
CREATE SERVER shard1 FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'postgres', host :'host', port :'port', dbname 'shard1');
CREATE USER MAPPING FOR PUBLIC SERVER shard0 OPTIONS (user :'user');
CREATE USER MAPPING FOR PUBLIC SERVER shard1 OPTIONS (user :'user');
SELECT collegedb.add_shard('shard0'), collegedb.add_shard('shard1');
SELECT collegedb.register_table('users', 'id');
SELECT count(*) AS keys_pinned
  FROM (SELECT collegedb.set_mapping(i::text,
                                     'shard' || (hashtext(i::text) & 1))
          FROM generate_series(1, 100000) AS i) AS s;

-- PL/Proxy: partitions p0, p1; partition = hashtext(id) & 1
CREATE EXTENSION plproxy;
SELECT format('CREATE SERVER bench FOREIGN DATA WRAPPER plproxy OPTIONS (p0 %L, p1 %L)',
              format('host=%s port=%s dbname=shard0', :'host', :'port'),
              format('host=%s port=%s dbname=shard1', :'host', :'port')) \gexec
CREATE USER MAPPING FOR PUBLIC SERVER bench OPTIONS (user :'user');
CREATE TYPE users_row AS (id text, name text, visits integer);
CREATE FUNCTION get_user(i_id text) RETURNS SETOF users_row
LANGUAGE plproxy AS $$
    CLUSTER 'bench';
    RUN ON hashtext(i_id);
    SELECT id, name, visits FROM users WHERE id = i_id;
$$;

-- The no-routing forwarder (scenario forward): a PL/pgSQL function keeping
-- one dblink connection per backend to the database holding every key,
-- which PREPAREs the read once and then sends EXECUTE p(key): the cost of
-- one extra backend hop with a prepared statement and nothing else.
CREATE EXTENSION dblink;
SELECT format($fmt$
CREATE FUNCTION forward_get(k text) RETURNS TABLE (id text, name text, visits integer)
LANGUAGE plpgsql AS $body$
BEGIN
    IF NOT coalesce('fwd' = ANY (dblink_get_connections()), false) THEN
        PERFORM dblink_connect('fwd', %L);
        PERFORM dblink_exec('fwd', 'PREPARE p(text) AS SELECT id, name, visits FROM users WHERE id = $1');
    END IF;
    RETURN QUERY SELECT * FROM dblink('fwd', 'EXECUTE p(' || quote_literal(k) || ')')
        AS t(id text, name text, visits integer);
END
$body$$fmt$, format('host=%s port=%s dbname=direct', :'host', :'port')) \gexec

-- postgres_fdw: one foreign table per shard database, as the partitions of a
-- table partitioned by the same expression PL/Proxy routes on
CREATE EXTENSION postgres_fdw;
CREATE SERVER fdw0 FOREIGN DATA WRAPPER postgres_fdw
  OPTIONS (host :'host', port :'port', dbname 'shard0');
CREATE SERVER fdw1 FOREIGN DATA WRAPPER postgres_fdw
  OPTIONS (host :'host', port :'port', dbname 'shard1');
CREATE USER MAPPING FOR PUBLIC SERVER fdw0 OPTIONS (user :'user');
CREATE USER MAPPING FOR PUBLIC SERVER fdw1 OPTIONS (user :'user');
CREATE TABLE users_fdw (id text, name text, visits integer)
  PARTITION BY LIST ((hashtext(id) & 1));
CREATE FOREIGN TABLE users_fdw_0 PARTITION OF users_fdw FOR VALUES IN (0)
  SERVER fdw0 OPTIONS (table_name 'users');
CREATE FOREIGN TABLE users_fdw_1 PARTITION OF users_fdw FOR VALUES IN (1)
  SERVER fdw1 OPTIONS (table_name 'users');
VACUUM ANALYZE collegedb.mapping;

-- collegedb's sharded foreign table (DESIGN.md 7): plain SQL, routed by key
CREATE FOREIGN TABLE users_cdb (id text, name text, visits integer)
  SERVER collegedb OPTIONS (key_column 'id', table_name 'users');
