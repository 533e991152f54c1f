-- Identifiers that collegedb writes into a shard's SQL are quoted in the
-- shard's dialect: registered tables and key columns named with quotes,
-- backticks, semicolons, spaces, a placeholder and non-ASCII letters work
-- on SQLite, PostgreSQL and MySQL shards, and cannot inject SQL.  Computed
-- placement exercises them: a write of a key that may live on several
-- shards looks for it in the registered tables of each.
CREATE EXTENSION collegedb;
\set VERBOSITY terse
\i sql/common/env.sql
-- statements here write on several SQLite shards at once, which cannot
-- take part in one two-phase commit (see twophase.sql): they commit in turn
SET collegedb.commit_protocol = 'sequential';
SELECT current_user AS me \gset

-- two shards of each dialect
\set lite_a :sqlite_dir '/quoting_a.db'
\set lite_b :sqlite_dir '/quoting_b.db'
CREATE SERVER lite_a FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'lite_a');
CREATE SERVER lite_b FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'lite_b');
CREATE DATABASE collegedb_quoting_a;
CREATE DATABASE collegedb_quoting_b;
CREATE SERVER pg_a FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'postgres', host :'pg_host', port :'pg_port', dbname 'collegedb_quoting_a');
CREATE SERVER pg_b FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'postgres', host :'pg_host', port :'pg_port', dbname 'collegedb_quoting_b');
CREATE USER MAPPING FOR PUBLIC SERVER pg_a OPTIONS (user :'me');
CREATE USER MAPPING FOR PUBLIC SERVER pg_b OPTIONS (user :'me');
CREATE SERVER my_boot FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'mysql', host :'my_host', port :'my_port', dbname 'collegedb_test');
CREATE USER MAPPING FOR PUBLIC SERVER my_boot OPTIONS (user :'my_user', password :'my_password');
SELECT collegedb.add_shard('my_boot');
SELECT collegedb.run_on_shard('my_boot', 'DROP DATABASE IF EXISTS collegedb_quoting_a');
SELECT collegedb.run_on_shard('my_boot', 'DROP DATABASE IF EXISTS collegedb_quoting_b');
SELECT collegedb.run_on_shard('my_boot', 'CREATE DATABASE collegedb_quoting_a');
SELECT collegedb.run_on_shard('my_boot', 'CREATE DATABASE collegedb_quoting_b');
SELECT collegedb.drop_shard('my_boot');
CREATE SERVER my_a FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'mysql', host :'my_host', port :'my_port', dbname 'collegedb_quoting_a');
CREATE SERVER my_b FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'mysql', host :'my_host', port :'my_port', dbname 'collegedb_quoting_b');
CREATE USER MAPPING FOR PUBLIC SERVER my_a OPTIONS (user :'my_user', password :'my_password');
CREATE USER MAPPING FOR PUBLIC SERVER my_b OPTIONS (user :'my_user', password :'my_password');
SELECT collegedb.add_shard(s) FROM unnest(ARRAY['lite_a', 'lite_b', 'pg_a', 'pg_b', 'my_a', 'my_b']) AS s;
SELECT name, dialect FROM collegedb.shards;

-- the names; the test quotes them itself to create the tables
CREATE TABLE q_names (n int PRIMARY KEY, t text, k text);
INSERT INTO q_names VALUES
  (1, 'we"ird ta`ble; DROP TABLE victims; --', 'k"e`y; $1 col'),
  (2, 'tâblé ünïcødé $2', 'clé ''x''');
CREATE FUNCTION qi(dialect text, name text) RETURNS text LANGUAGE sql AS $$
  SELECT CASE dialect WHEN 'mysql' THEN '`' || replace(name, '`', '``') || '`'
                      ELSE '"' || replace(name, '"', '""') || '"' END
$$;
-- (MySQL runs DDL outside transactions: the INSERT comes last)
SELECT s.name, sum(collegedb.run_on_shard(s.name, d.ddl)) AS rows
  FROM collegedb.shards s,
       LATERAL (SELECT 1 AS o, 'DROP TABLE IF EXISTS victims' AS ddl
                UNION ALL SELECT 2, 'DROP TABLE IF EXISTS items'
                UNION ALL SELECT 2 + q.n, format('DROP TABLE IF EXISTS %s', qi(s.dialect, q.t))
                  FROM q_names q
                UNION ALL SELECT 5, 'CREATE TABLE victims (id INTEGER)'
                UNION ALL SELECT 6, 'CREATE TABLE items (id VARCHAR(64) PRIMARY KEY, n INTEGER NOT NULL)'
                UNION ALL SELECT 6 + q.n, format('CREATE TABLE %s (%s VARCHAR(64) PRIMARY KEY)',
                                                 qi(s.dialect, q.t), qi(s.dialect, q.k))
                  FROM q_names q
                UNION ALL SELECT 9, 'INSERT INTO victims VALUES (1)'
                ORDER BY 1) AS d
 GROUP BY s.name ORDER BY s.name;

-- 60 keys where epoch 1 (all six shards) puts them: a row in items and
-- one in the first or the second weirdly named table
SELECT count(*) AS placed
  FROM (SELECT 'q-' || i AS key, i,
               collegedb.rendezvous_owner('q-' || i,
                 ARRAY['lite_a', 'lite_b', 'my_a', 'my_b', 'pg_a', 'pg_b']) AS owner
          FROM generate_series(1, 60) AS i) AS o
  JOIN collegedb.shards s ON s.name = o.owner
  JOIN q_names q ON q.n = 1 + o.i % 2,
  LATERAL (SELECT collegedb.run_on_shard(o.owner, 'INSERT INTO items (id, n) VALUES ($1, 0)', o.key)
           UNION ALL
           SELECT collegedb.run_on_shard(o.owner, format('INSERT INTO %s (%s) VALUES ($1)',
                                                         qi(s.dialect, q.t), qi(s.dialect, q.k)), o.key)) AS w;
SELECT collegedb.register_table(t, k) FROM q_names ORDER BY n;
SELECT table_name, key_column FROM collegedb.tables;
SELECT collegedb.configure(placement => 'computed');
-- one shard of each dialect drains: the keys it holds are written where
-- they are found, which takes the quoted lookups on every dialect
SELECT collegedb.set_shard_state(s, drain => 'draining') FROM unnest(ARRAY['lite_b', 'pg_b', 'my_b']) AS s;
SELECT epoch, shards FROM collegedb.epochs;
SELECT sum(collegedb.run('q-' || i, 'UPDATE items SET n = n + 1 WHERE id = $1', 'q-' || i)) AS updated
  FROM generate_series(1, 60) AS i;
-- the drained shards' keys were found there, on each dialect
SELECT s.name, s.dialect, count(m.key) AS exceptions
  FROM collegedb.shards s JOIN collegedb.shard_number n ON n.name = s.name
  LEFT JOIN collegedb.mapping m ON m.shard = n.number
 GROUP BY s.name, s.dialect ORDER BY s.name;
SELECT s.name,
       (SELECT (j->>'n')::int FROM collegedb.all_on_shard(s.name, 'SELECT count(*) AS n FROM items WHERE n = 1') AS j) AS updated,
       (SELECT (j->>'n')::int FROM collegedb.all_on_shard(s.name, 'SELECT count(*) AS n FROM items') AS j) AS rows,
       (SELECT (j->>'n')::int FROM collegedb.all_on_shard(s.name, 'SELECT count(*) AS n FROM victims') AS j) AS victims
  FROM collegedb.shards s ORDER BY s.name;

SELECT collegedb.run_on_shard('my_a', 'DROP DATABASE collegedb_quoting_b') IS NOT NULL AS dropped;
SELECT collegedb.run_on_shard('my_a', 'DROP DATABASE collegedb_quoting_a') IS NOT NULL AS dropped;
SELECT collegedb.disconnect_all();
DROP EXTENSION collegedb CASCADE;
DROP DATABASE collegedb_quoting_a;
DROP DATABASE collegedb_quoting_b;
DROP FUNCTION qi(text, text);
DROP TABLE q_names;
