-- Prepared statements on SQLite shards: a row statement is prepared once
-- per connection and reused (reset, parameters unbound); the cache is
-- bounded, a schema change under a cached statement gives what a fresh
-- statement would, the sandbox refuses what it refused before, and a
-- statement that failed or was cancelled mid-step does not stay so.
CREATE EXTENSION collegedb;
\set VERBOSITY terse
\i sql/common/env.sql
\i sql/common/try.sql
\set sp_db :sqlite_dir '/prepared_sp1.db'
CREATE SERVER sp1 FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'sp_db');
SELECT collegedb.add_shard('sp1');
SELECT collegedb.run_on_shard('sp1', 'CREATE TABLE items (id TEXT PRIMARY KEY, n INTEGER)');
SELECT collegedb.run_on_shard('sp1', 'INSERT INTO items VALUES (''a'', 1), (''b'', 2)');

-- the same text with other values: each run binds its own
SELECT collegedb.first('k', 'SELECT n FROM items WHERE id = $1', 'a');
SELECT collegedb.first('k', 'SELECT n FROM items WHERE id = $1', 'b');
SELECT collegedb.first('k', 'SELECT n FROM items WHERE id = $1', 'c');
-- a value bound before is not left bound: fewer parameters are refused
SELECT try($$SELECT collegedb.first('k', 'SELECT n FROM items WHERE id = $1')$$);
-- writes too, out of a transaction block and in one
SELECT collegedb.run('k', 'UPDATE items SET n = n + $2 WHERE id = $1', 'a', 10);
BEGIN;
SELECT collegedb.run('k', 'UPDATE items SET n = n + $2 WHERE id = $1', 'b', 10);
SELECT collegedb.run('k', 'UPDATE items SET n = n + $2 WHERE id = $1', 'a', 100);
COMMIT;
BEGIN;
SELECT collegedb.run('k', 'UPDATE items SET n = n + $2 WHERE id = $1', 'b', 1000);
ROLLBACK;
SELECT collegedb.first('k', 'SELECT group_concat(id || n, '','') AS all_rows FROM (SELECT id, n FROM items WHERE $1 ORDER BY id)', true);

-- a column added under a cached SELECT *: SQLite prepares it anew
SELECT collegedb.first('k', 'SELECT * FROM items WHERE id = $1', 'a');
SELECT collegedb.run_on_shard('sp1', 'ALTER TABLE items ADD COLUMN note TEXT DEFAULT ''x''');
SELECT collegedb.first('k', 'SELECT * FROM items WHERE id = $1', 'a');
-- the table dropped: the cached statement fails as a fresh one would,
-- and works again once the table is back
SELECT collegedb.run_on_shard('sp1', 'ALTER TABLE items RENAME TO items_old');
SELECT try($$SELECT collegedb.first('k', 'SELECT * FROM items WHERE id = $1', 'a')$$);
SELECT collegedb.run_on_shard('sp1', 'ALTER TABLE items_old RENAME TO items');
SELECT collegedb.first('k', 'SELECT * FROM items WHERE id = $1', 'a');

-- the sandbox: a trigger writing collegedb's table, created after a
-- statement that fires it was cached, still refuses that statement
SELECT collegedb.run('k', 'UPDATE items SET n = n + 1 WHERE id = $1', 'a');
SELECT collegedb.run_on_shard('sp1', $$CREATE TRIGGER items_sneak AFTER UPDATE ON items BEGIN
  DELETE FROM collegedb_tombstones; END$$);
SELECT try($$SELECT collegedb.run('k', 'UPDATE items SET n = n + 1 WHERE id = $1', 'a')$$);
SELECT try($$SELECT collegedb.run('k', 'UPDATE items SET n = n + 1 WHERE id = $1', 'a')$$);
SELECT collegedb.run_on_shard('sp1', 'DROP TRIGGER items_sneak');
SELECT collegedb.run('k', 'UPDATE items SET n = n + 1 WHERE id = $1', 'a');
-- collegedb's own statements do not lend a caller their rights: a
-- caller's write to collegedb's table stays refused, every time
SELECT try($$SELECT collegedb.run('k', 'DELETE FROM collegedb_tombstones WHERE shard_key = $1', 'a')$$);
SELECT try($$SELECT collegedb.run('k', 'DELETE FROM collegedb_tombstones WHERE shard_key = $1', 'a')$$);
SELECT try($$SELECT collegedb.first('k', 'SELECT load_extension($1) AS x', 'a')$$);
SELECT try($$SELECT collegedb.first('k', 'SELECT load_extension($1) AS x', 'a')$$);
-- past the bound: 80 other statements evict the first, which is
-- prepared again and still right
SELECT collegedb.first('k', 'SELECT n * 2 AS v FROM items WHERE id = $1', 'b');
SELECT count(*), sum((collegedb.first('k', format('SELECT n + %s AS v FROM items WHERE id = $1', i), 'b')->>'v')::int)
  FROM generate_series(1, 80) AS i;
SELECT collegedb.first('k', 'SELECT n * 2 AS v FROM items WHERE id = $1', 'b');

-- an error in the middle of the rows, then the same statement again
SELECT try($$SELECT count(*) FROM collegedb.all('k', 'SELECT id, json(CASE WHEN id = $1 THEN ''{bad'' ELSE ''1'' END) AS j FROM items ORDER BY id', 'b') AS t(id text, j text)$$);
SELECT * FROM collegedb.all('k', 'SELECT id, json(CASE WHEN id = $1 THEN ''{bad'' ELSE ''1'' END) AS j FROM items ORDER BY id', 'none') AS t(id text, j text);
BEGIN;
SELECT try($$SELECT collegedb.run('k', 'UPDATE items SET n = json($2) WHERE id = $1', 'a', '{bad')$$);
ROLLBACK;
SELECT collegedb.run('k', 'UPDATE items SET n = json($2) WHERE id = $1', 'a', '5');
-- cancelled mid-step, then the same statement finishes
SET statement_timeout = '300ms';
SELECT collegedb.first('k', 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c WHERE x = $1 LIMIT 1', -1);
RESET statement_timeout;
SELECT collegedb.first('k', 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c WHERE x = $1 LIMIT 1', 5);
SELECT collegedb.first('k', 'SELECT group_concat(id || n, '','') AS all_rows FROM (SELECT id, n FROM items WHERE $1 ORDER BY id)', true);

-- a reconnect starts with an empty cache and the same results
SELECT collegedb.disconnect('sp1');
SELECT collegedb.first('k', 'SELECT n FROM items WHERE id = $1', 'a');

DROP FUNCTION try(text);
DROP EXTENSION collegedb CASCADE;
