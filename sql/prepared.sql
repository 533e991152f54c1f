-- Prepared statements on PostgreSQL shards: a statement with parameters is
-- prepared on its connection the first time and executed by name after;
-- the cache forgets what the shard no longer has (a routed DEALLOCATE or
-- DISCARD, one behind collegedb's back, a table whose columns changed, a
-- reconnect) and stays bounded.
CREATE EXTENSION collegedb;
\set VERBOSITY terse
\i sql/common/env.sql
\i sql/common/try.sql
SELECT current_user AS me \gset
CREATE DATABASE collegedb_prep1;
CREATE SERVER p1 FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'postgres', host :'pg_host', port :'pg_port', dbname 'collegedb_prep1');
CREATE USER MAPPING FOR PUBLIC SERVER p1 OPTIONS (user :'me');
SELECT collegedb.add_shard('p1');
SELECT collegedb.run_on_shard('p1', 'CREATE TABLE items (id text PRIMARY KEY, n int)');
SELECT collegedb.run_on_shard('p1', 'INSERT INTO items VALUES (''a'', 1), (''b'', 2)');
SELECT collegedb.run_on_shard('p1', $$CREATE FUNCTION forget_all(x int) RETURNS int
  LANGUAGE plpgsql AS 'BEGIN EXECUTE ''DEALLOCATE ALL''; RETURN x; END'$$);

-- what the shard holds for a statement text: how many prepared forms, and
-- how often they ran (parameterless, so it is not prepared itself)
CREATE FUNCTION held(stmt text) RETURNS jsonb LANGUAGE sql AS $$
  SELECT collegedb.first('k',
    format('SELECT count(*) AS held, coalesce(sum(generic_plans + custom_plans), 0) AS runs '
           'FROM pg_prepared_statements WHERE statement = %L', stmt))
$$;

-- prepared once, then executed by name
SELECT collegedb.first('k', 'SELECT n FROM items WHERE id = $1', 'a');
SELECT collegedb.first('k', 'SELECT n FROM items WHERE id = $1', 'b');
SELECT collegedb.first('k', 'SELECT n FROM items WHERE id = $1', 'c');
SELECT held('SELECT n FROM items WHERE id = $1');
-- parameter types are part of the prepared form
SELECT collegedb.first('k', 'SELECT $1 AS v', 7);
SELECT collegedb.first('k', 'SELECT $1 AS v', 'seven'::text);
SELECT collegedb.first('k', 'SELECT $1 AS v', 7.5);
SELECT held('SELECT $1 AS v');
-- writes too, in a transaction block and out of one
SELECT collegedb.run('k', 'UPDATE items SET n = n + $2 WHERE id = $1', 'a', 10);
BEGIN;
SELECT collegedb.run('k', 'UPDATE items SET n = n + $2 WHERE id = $1', 'b', 10);
COMMIT;
SELECT collegedb.first('k', 'SELECT string_agg(id || n, '','' ORDER BY id) AS all FROM items WHERE $1', true);
SELECT held('UPDATE items SET n = n + $2 WHERE id = $1');

-- a table altered under a prepared SELECT *: outside a transaction block
-- the statement is prepared anew and sent once more, unseen by the caller
SELECT collegedb.first('k', 'SELECT * FROM items WHERE id = $1', 'a');
SELECT collegedb.run_on_shard('p1', 'ALTER TABLE items ADD COLUMN note text DEFAULT ''x''');
SELECT collegedb.first('k', 'SELECT * FROM items WHERE id = $1', 'a');
SELECT collegedb.first('k', 'SELECT * FROM items WHERE id = $1', 'b');
-- in a transaction block the shard's transaction is aborted already: the
-- statement fails once, and the next transaction prepares it anew
SELECT collegedb.run_on_shard('p1', 'ALTER TABLE items DROP COLUMN note');
BEGIN;
SELECT try($$SELECT collegedb.first('k', 'SELECT * FROM items WHERE id = $1', 'a')$$);
ROLLBACK;
SELECT collegedb.first('k', 'SELECT * FROM items WHERE id = $1', 'a');

-- a routed DEALLOCATE ALL: the cache forgets, the statement is prepared again
SELECT collegedb.run('k', 'DEALLOCATE ALL');
SELECT held('SELECT n FROM items WHERE id = $1');
SELECT collegedb.first('k', 'SELECT n FROM items WHERE id = $1', 'a');
SELECT held('SELECT n FROM items WHERE id = $1');
-- so does a routed DISCARD ALL (it cannot run in a transaction: an error,
-- and the cache is emptied all the same)
SELECT try($$SELECT collegedb.run('k', 'DISCARD ALL')$$);
SELECT collegedb.first('k', 'SELECT n FROM items WHERE id = $1', 'a');
SELECT held('SELECT n FROM items WHERE id = $1');

-- behind collegedb's back (a function on the shard): the execution by name
-- fails with 26000, and the statement is prepared anew and sent once more
SELECT collegedb.first('k', 'SELECT forget_all($1) AS x', 1);
SELECT collegedb.first('k', 'SELECT n FROM items WHERE id = $1', 'b');
SELECT held('SELECT n FROM items WHERE id = $1');
SELECT collegedb.first('k', 'SELECT n FROM items WHERE id = $1', 'b');
SELECT held('SELECT n FROM items WHERE id = $1');

-- errors: a statement the shard cannot parse fails as before, every time,
-- and nothing of it stays prepared
SELECT try($$SELECT collegedb.first('k', 'SELECT nope FROM items WHERE id = $1', 'a')$$);
SELECT try($$SELECT collegedb.first('k', 'SELECT nope FROM items WHERE id = $1', 'a')$$);
SELECT held('SELECT nope FROM items WHERE id = $1');

-- prepared statements named collegedb_... are the cache's: a caller's
-- PREPARE, EXECUTE or DEALLOCATE of one, quoted or not, is refused (42939)
-- before anything is sent, and the cache's statements go on by name
SELECT try($$SELECT collegedb.run('k', 'PREPARE collegedb_p1 AS SELECT 1')$$);
SELECT try($$SELECT collegedb.run('k', 'EXECUTE collegedb_p1')$$);
SELECT try($$SELECT collegedb.first('k', 'EXECUTE "collegedb_p2"')$$);
SELECT try($$SELECT collegedb.run('k', 'DEALLOCATE PREPARE COLLEGEDB_P1')$$);
SELECT try($$SELECT collegedb.run('k', 'EXPLAIN EXECUTE collegedb_p1')$$);
SELECT try($$SELECT collegedb.run('k', 'CREATE TABLE t AS EXECUTE /* c */ collegedb_p3')$$);
SELECT try($$SELECT collegedb.run_on_shard('p1', 'EXECUTE collegedb_p1')$$);
SELECT held('SELECT n FROM items WHERE id = $1');
SELECT collegedb.first('k', 'SELECT n FROM items WHERE id = $1', 'b');
SELECT held('SELECT n FROM items WHERE id = $1');
-- collegedb_... elsewhere is no statement name; PREPARE TRANSACTION stays
-- collegedb's
SELECT collegedb.first('k', 'SELECT count(*) AS n FROM collegedb_tombstones');
SELECT try($$SELECT collegedb.run('k', 'PREPARE TRANSACTION ''collegedb_x''')$$);
-- the caller's own names work, and outlive the cache's resets below
SELECT collegedb.run('k', 'PREPARE mine AS SELECT n FROM items WHERE id = ''b''');
SELECT collegedb.first('k', 'EXECUTE mine');
SELECT collegedb.first('k', 'SELECT count(*) AS n FROM pg_prepared_statements WHERE name = ''mine''');

-- bounded: 300 distinct statements leave at most 128 prepared on the shard
SELECT count(collegedb.first('k', format('SELECT %s + $1 AS v', i), i)) FROM generate_series(1, 300) AS i;
SELECT (collegedb.first('k', 'SELECT count(*) AS n FROM pg_prepared_statements')->>'n')::int BETWEEN 1 AND 128 AS bounded;
SELECT collegedb.first('k', 'SELECT n FROM items WHERE id = $1', 'a');
SELECT collegedb.first('k', 'EXECUTE mine');
-- the caller's DEALLOCATE of its own name: the cache starts again
SELECT collegedb.run('k', 'DEALLOCATE mine');
SELECT collegedb.first('k', 'SELECT count(*) AS n FROM pg_prepared_statements WHERE name = ''mine''');
SELECT collegedb.first('k', 'SELECT n FROM items WHERE id = $1', 'a');
SELECT held('SELECT n FROM items WHERE id = $1');

-- a reconnect starts with an empty cache, as the shard's new session does
SELECT try($$SELECT collegedb.run_on_shard('p1', 'SELECT pg_terminate_backend(pg_backend_pid())')$$) ~ '^08' AS cut;
SELECT collegedb.first('k', 'SELECT n FROM items WHERE id = $1', 'a');
SELECT held('SELECT n FROM items WHERE id = $1');

DROP FUNCTION held(text);
DROP FUNCTION try(text);
DROP EXTENSION collegedb CASCADE;
DROP DATABASE collegedb_prep1;
