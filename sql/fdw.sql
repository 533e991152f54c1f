-- Sharded foreign tables over shards of two dialects: table and column
-- options, plans, rows that follow a moved key, and failed shards.
CREATE EXTENSION collegedb;
\set VERBOSITY terse
\i sql/common/env.sql
-- statements here write on several SQLite shards at once, which cannot
-- take part in one two-phase commit (see twophase.sql): they commit in turn
SET collegedb.commit_protocol = 'sequential';
SELECT current_user AS me \gset
\set a_db :sqlite_dir '/fdw_a.db'
\set b_db :sqlite_dir '/fdw_b.db'
CREATE DATABASE collegedb_fdw;
CREATE SERVER a FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'a_db');
CREATE SERVER b FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'b_db');
CREATE SERVER p FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'postgres', host :'pg_host', port :'pg_port', dbname 'collegedb_fdw');
CREATE USER MAPPING FOR PUBLIC SERVER p OPTIONS (user :'me');
SELECT collegedb.add_shard('a'), collegedb.add_shard('b'), collegedb.add_shard('p');
\i sql/common/try.sql
SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE IF EXISTS events') ORDER BY shard;
SELECT shard, ok FROM collegedb.run_on_all(
  'CREATE TABLE events (id BIGINT PRIMARY KEY, account VARCHAR(20), amount DECIMAL(12,2), at TIMESTAMP)')
  ORDER BY shard;

-- bad definitions: refused when created, or when first used
SELECT try($$CREATE FOREIGN TABLE bad (id int) SERVER collegedb OPTIONS (colour 'red')$$);
SELECT try($$CREATE FOREIGN TABLE bad (id int OPTIONS (colour 'red')) SERVER collegedb OPTIONS (key_column 'id')$$);
SELECT try($$CREATE FOREIGN TABLE bad (id int) SERVER collegedb OPTIONS (key_column '')$$);
CREATE FOREIGN TABLE no_key (id int) SERVER collegedb;
SELECT try($$SELECT * FROM no_key$$);
SELECT try($$INSERT INTO no_key VALUES (1)$$);
CREATE FOREIGN TABLE wrong_key (id int) SERVER collegedb OPTIONS (key_column 'nope');
SELECT try($$SELECT * FROM wrong_key$$);
DROP FOREIGN TABLE no_key, wrong_key;

-- local names may differ from the shards' (table_name, column_name)
CREATE FOREIGN TABLE ev (
  event_id bigint OPTIONS (column_name 'id'),
  account text,
  amount numeric(12,2),
  at timestamp
) SERVER collegedb OPTIONS (key_column 'event_id', table_name 'events');
INSERT INTO ev SELECT i, 'acct-' || (i % 5), i * 1.5, '2026-01-01'::timestamp + i * interval '1 hour'
  FROM generate_series(1, 90) AS i;
SELECT shard, (value->>'n')::int > 0 AS used FROM collegedb.fanout('SELECT count(*) AS n FROM events') ORDER BY shard;
SELECT sum((value->>'n')::int) AS total FROM collegedb.fanout('SELECT count(*) AS n FROM events');
SELECT account, count(*), sum(amount) FROM ev GROUP BY account ORDER BY account;
SELECT * FROM ev WHERE event_id = 42;
SELECT event_id, at FROM ev WHERE at >= '2026-01-04 16:00' AND amount < 134 ORDER BY event_id;
SELECT event_id FROM ev WHERE event_id IN (1, 2, 3, 1000) ORDER BY event_id;
-- a scan run again for each outer row (rescans)
SELECT i, (SELECT account FROM ev WHERE event_id = i) FROM generate_series(1, 4) AS i;
SELECT i, (SELECT count(*) FROM ev WHERE amount > i * 30) FROM generate_series(1, 3) AS i;
-- plans: the shards a statement reaches and its text in each dialect
EXPLAIN (COSTS OFF, VERBOSE) SELECT * FROM ev WHERE event_id = 42;
EXPLAIN (COSTS OFF, VERBOSE) SELECT event_id FROM ev WHERE amount > 10 AND account = 'acct-1';
EXPLAIN (COSTS OFF, VERBOSE) SELECT event_id FROM ev WHERE account < 'acct-2';
EXPLAIN (COSTS OFF, VERBOSE) UPDATE ev SET amount = amount * 2 WHERE event_id = 42;

-- on shards of two dialects an UPDATE that SQLite does not compute exactly
-- (numeric arithmetic) runs row by row, new values computed here; compared
-- with a local table of the same rows, and rolled back
CREATE TEMP TABLE ev_local AS SELECT * FROM ev;
BEGIN;
UPDATE ev SET amount = amount * 2 WHERE event_id = 42 RETURNING event_id, amount;
UPDATE ev_local SET amount = amount * 2 WHERE event_id = 42 RETURNING event_id, amount;
SET LOCAL collegedb.allow_multi_shard_modify = on;
UPDATE ev SET amount = amount / 3 + 0.01 WHERE amount > 120;
UPDATE ev_local SET amount = amount / 3 + 0.01 WHERE amount > 120;
UPDATE ev e SET account = upper(l.account) FROM ev_local l WHERE e.event_id = l.event_id AND l.event_id % 10 = 0;
UPDATE ev_local SET account = upper(account) WHERE event_id % 10 = 0;
DELETE FROM ev e USING ev_local l WHERE e.event_id = l.event_id AND l.amount < 3;
DELETE FROM ev_local WHERE amount < 3;
SELECT (SELECT array_agg(e::text ORDER BY e.event_id) FROM ev e) =
       (SELECT array_agg(l::text ORDER BY l.event_id) FROM ev_local l) AS same_rows,
       (SELECT count(*) FROM ev) AS rows;
ROLLBACK;
DROP TABLE ev_local;
SELECT count(*), sum(amount) FROM ev;

-- a foreign table may name one shard: then it reads and writes only there
CREATE FOREIGN TABLE events_on_p (id bigint, account text, amount numeric, at timestamp)
  SERVER p OPTIONS (table_name 'events');
SELECT count(*) = (SELECT (value->>'n')::int FROM collegedb.fanout('SELECT count(*) AS n FROM events') WHERE shard = 'p')
  AS only_p FROM events_on_p;
-- a LIMIT goes to the shard when the scan reaches one shard and needs no local filter
EXPLAIN (COSTS OFF, VERBOSE) SELECT id FROM events_on_p LIMIT 5 OFFSET 2;
SELECT count(*) FROM (SELECT id FROM events_on_p LIMIT 5 OFFSET 2) AS five;
EXPLAIN (COSTS OFF, VERBOSE) SELECT id FROM events_on_p ORDER BY id LIMIT 5;
-- row by row there too: by the row's ctid on that shard, without a key
BEGIN;
EXPLAIN (COSTS OFF, VERBOSE) UPDATE events_on_p SET account = upper(account) WHERE id < 40 AND length(md5(account)) = 32;
WITH u AS (UPDATE events_on_p SET account = upper(account) WHERE id < 40 AND length(md5(account)) = 32
           RETURNING id, account)
SELECT * FROM u ORDER BY id;
WITH d AS (DELETE FROM events_on_p WHERE id < 40 AND upper(account) = account RETURNING id)
SELECT * FROM d ORDER BY id;
SELECT count(*) FROM ev WHERE event_id < 40;
ROLLBACK;
EXPLAIN (COSTS OFF, VERBOSE) SELECT event_id FROM ev LIMIT 5;

-- sharded foreign tables move with their keys: rows go, a tombstone stays,
-- and reads and writes through a stale mapping still reach the key
SELECT (SELECT n.name FROM collegedb.shard_number n WHERE n.number = shard) AS from_shard FROM collegedb.mapping WHERE key = collegedb.mapping_id('42') \gset
SELECT CASE WHEN :'from_shard' = 'p' THEN 'a' ELSE 'p' END AS to_shard \gset
SELECT collegedb.reassign_shard('42', :'to_shard') ->> 'rows' AS rows_moved;
SELECT shard = (SELECT n.number FROM collegedb.shard_number n WHERE n.name = :'to_shard') AS moved FROM collegedb.mapping WHERE key = collegedb.mapping_id('42');
SELECT * FROM ev WHERE event_id = 42;
SELECT count(*) FROM collegedb.all_on_shard(:'from_shard', 'SELECT id FROM events WHERE id = 42');
-- make the mapping stale: point it back at the old shard
UPDATE collegedb.mapping SET shard = (SELECT n.number FROM collegedb.shard_number n WHERE n.name = :'from_shard') WHERE key = collegedb.mapping_id('42');
SELECT * FROM ev WHERE event_id = 42;
UPDATE ev SET amount = 1 WHERE event_id = 42 RETURNING event_id, amount;
DELETE FROM ev WHERE event_id = 41 RETURNING *;
SELECT count(*) FROM collegedb.all_on_shard(:'from_shard', 'SELECT id FROM events WHERE id = 42');
SELECT r->>'amount' AS amount FROM collegedb.all_on_shard(:'to_shard', 'SELECT amount FROM events WHERE id = 42') AS r;
UPDATE collegedb.mapping SET shard = (SELECT n.number FROM collegedb.shard_number n WHERE n.name = :'to_shard') WHERE key = collegedb.mapping_id('42');
SELECT count(*), sum(amount) FROM ev;

-- a shard value the column's type cannot hold: a clear error naming the
-- column, at first use; the session and its transaction go on
SELECT shard, ok FROM collegedb.run_on_all('CREATE TABLE odd (id VARCHAR(10) PRIMARY KEY, tags TEXT)') ORDER BY shard;
CREATE FOREIGN TABLE odd (id text, tags int[]) SERVER collegedb OPTIONS (key_column 'id');
INSERT INTO odd VALUES ('o1', '{1,2}'), ('o2', NULL), ('o3', '{}');
SELECT * FROM odd ORDER BY id;
SELECT collegedb.run('o2', 'UPDATE odd SET tags = $1 WHERE id = $2', 'not an array', 'o2');
\set VERBOSITY default
SELECT * FROM odd ORDER BY id;
SELECT * FROM odd WHERE id = 'o2';
\set VERBOSITY terse
BEGIN;
SELECT * FROM odd WHERE id = 'o1';
SAVEPOINT s;
SELECT * FROM odd;
ROLLBACK TO s;
SELECT * FROM odd WHERE id = 'o3';
COMMIT;
DROP FOREIGN TABLE odd;
SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE odd') ORDER BY shard;

-- batched rows reach a PostgreSQL shard by COPY (collegedb.insert_by_copy):
-- each value is stored as a multi-row INSERT stores it, whatever it holds
SELECT collegedb.run_on_shard('p', 'CREATE TABLE awkward (id int PRIMARY KEY, t text, b bytea, '
  'ts timestamptz, n numeric, f bool, j jsonb, a int[])');
SELECT collegedb.run_on_shard(s, 'CREATE TABLE awkward (id INTEGER PRIMARY KEY, t TEXT, b BLOB, '
  'ts TEXT, n TEXT, f INTEGER, j TEXT, a TEXT)') FROM unnest(ARRAY['a', 'b']) AS s;
CREATE FOREIGN TABLE awkward (id int, t text, b bytea, ts timestamptz, n numeric, f bool, j jsonb, a int[])
  SERVER collegedb OPTIONS (key_column 'id');
SELECT count(collegedb.set_mapping(i::text, 'p')) FROM generate_series(1, 40) AS i;
CREATE TEMP TABLE awkward_local (id int, t text, b bytea, ts timestamptz, n numeric, f bool, j jsonb, a int[]);
INSERT INTO awkward_local VALUES
  (1, E'tab\there', '\x00015c0a'::bytea, '2026-01-02 03:04:05.678+05', 1.50, true, '{"a": "\\t"}', '{1,NULL,3}'),
  (2, E'new\nline and\r return', '\x'::bytea, '-infinity', 'NaN', false, '[]', '{}'),
  (3, E'back\\slash \\N \\. and \\\\', NULL, NULL, NULL, NULL, NULL, NULL),
  (4, '', E'\\x5c2e0a'::bytea, 'epoch', -0.000001, NULL, 'null', '{-2147483648}'),
  (5, E'\\.', NULL, '2026-06-30 23:59:59.999999 UTC', 12345678901234567890.123, true, '"x\ty"', NULL),
  (6, 'ünïcødé ✓ 日本', E'\\xff'::bytea, 'infinity', 0, false, '{"k": [1, 2.5e3]}', '{7}');
INSERT INTO awkward SELECT * FROM awkward_local;
SET collegedb.insert_by_copy = off;
INSERT INTO awkward SELECT id + 20, t, b, ts, n, f, j, a FROM awkward_local;
RESET collegedb.insert_by_copy;
SELECT id FROM awkward_local l
 WHERE NOT EXISTS (SELECT FROM awkward r WHERE r.id = l.id AND
                   (r.t, r.b, r.ts, r.n, r.f, r.j, r.a) IS NOT DISTINCT FROM (l.t, l.b, l.ts, l.n, l.f, l.j, l.a))
    OR NOT EXISTS (SELECT FROM awkward r WHERE r.id = l.id + 20 AND
                   (r.t, r.b, r.ts, r.n, r.f, r.j, r.a) IS NOT DISTINCT FROM (l.t, l.b, l.ts, l.n, l.f, l.j, l.a));
SELECT count(*) AS rows, count(*) FILTER (WHERE t IS NULL) AS null_texts FROM awkward;
-- COPY FROM STDIN takes the same path; a duplicate key fails it whole
COPY awkward (id, t) FROM STDIN;
7	seven\tand a tab
8	\N
\.
SELECT id, replace(t, E'\t', '<tab>') AS t, t IS NULL AS is_null FROM awkward WHERE id IN (7, 8) ORDER BY id;
SELECT try($$INSERT INTO awkward SELECT i, 'dup' FROM generate_series(9, 12) AS i UNION ALL SELECT 1, 'again'$$);
SELECT count(*) FROM awkward WHERE id BETWEEN 9 AND 12;
-- on an SQLite shard a batch is one prepared one-row INSERT run for each
-- row: it stores what one INSERT per row stores
SELECT count(collegedb.set_mapping(i::text, 'a')) FROM generate_series(101, 112) AS i;
INSERT INTO awkward SELECT id + 100, t, b, ts, n, f, j, a FROM awkward_local;
SET collegedb.insert_batch_rows = 1;
INSERT INTO awkward SELECT id + 106, t, b, ts, n, f, j, a FROM awkward_local;
RESET collegedb.insert_batch_rows;
SELECT count(*) AS same FROM awkward x JOIN awkward y ON y.id = x.id + 6
 WHERE x.id BETWEEN 101 AND 106
   AND (x.t, x.b, x.ts, x.n, x.f, x.j, x.a) IS NOT DISTINCT FROM (y.t, y.b, y.ts, y.n, y.f, y.j, y.a);
SELECT count(*) FROM collegedb.all_on_shard('a', 'SELECT id FROM awkward');
DROP FOREIGN TABLE awkward;
SELECT collegedb.run_on_shard(s, 'DROP TABLE awkward') FROM unnest(ARRAY['a', 'b', 'p']) AS s;
DELETE FROM collegedb.mapping WHERE key IN (SELECT collegedb.mapping_id(i::text) FROM generate_series(1, 112) AS i);

-- a shard that cannot be reached fails a read of every shard, unless
-- collegedb.fanout_partial lets the others answer; writes always fail
ALTER SERVER p OPTIONS (SET port '1');
SELECT collegedb.disconnect_all();
SELECT try($$SELECT count(*) FROM ev$$) ~ '^08' AS failed;
SET collegedb.fanout_partial = on;
SELECT count(*) < 90 AS partial FROM ev;
SET collegedb.allow_multi_shard_modify = on;
SELECT try($$UPDATE ev SET amount = 0$$) ~ '^08' AS write_failed;
RESET collegedb.allow_multi_shard_modify;
RESET collegedb.fanout_partial;
ALTER SERVER p OPTIONS (SET port :'pg_port');
SELECT count(*), sum(amount) FROM ev;

DROP FOREIGN TABLE ev, events_on_p;
DROP FUNCTION try(text);
DROP EXTENSION collegedb CASCADE;
DROP DATABASE collegedb_fdw;
