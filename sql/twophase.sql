-- Two-phase commit of front transactions that wrote on several shards
-- (README "Transactions across shards"): the setting, the commit's effects,
-- the refusals, recovery's function and view.  The crashes and restarts at
-- each commit step are in test/t/120_two_phase.pl.
CREATE EXTENSION collegedb;
\set VERBOSITY terse
\i sql/common/try.sql
\getenv pg_port COLLEGEDB_TEST_PG_PORT
\getenv my_port COLLEGEDB_TEST_MYSQL_PORT
\getenv sqlite_dir COLLEGEDB_TEST_SQLITE_DIR
SELECT current_user AS me \gset
\set l1_db :sqlite_dir '/twophase_l1.db'
\set l2_db :sqlite_dir '/twophase_l2.db'
CREATE DATABASE collegedb_2pc_a;
CREATE DATABASE collegedb_2pc_b;
CREATE SERVER pa FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'postgres', host '127.0.0.1', port :'pg_port', dbname 'collegedb_2pc_a');
CREATE SERVER pb FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'postgres', host '127.0.0.1', port :'pg_port', dbname 'collegedb_2pc_b');
CREATE SERVER my FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'mysql', host '127.0.0.1', port :'my_port', dbname 'collegedb_test');
CREATE SERVER l1 FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'l1_db');
CREATE SERVER l2 FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'l2_db');
CREATE USER MAPPING FOR PUBLIC SERVER pa OPTIONS (user :'me');
CREATE USER MAPPING FOR PUBLIC SERVER pb OPTIONS (user :'me');
CREATE USER MAPPING FOR PUBLIC SERVER my OPTIONS (user 'collegedb', password 'collegedb');
SELECT collegedb.add_shard(s) FROM unnest(ARRAY['pa', 'pb', 'my', 'l1', 'l2']) s;
SELECT collegedb.run_on_shard('my', 'DROP TABLE IF EXISTS t');
-- run_on_all outside a transaction block commits each shard's part at once
SELECT shard, ok FROM collegedb.run_on_all('CREATE TABLE t (k VARCHAR(20) PRIMARY KEY, v INT)')
 ORDER BY shard;
-- a deferred constraint on pb: it fails at commit, once PREPARE checks it
SELECT collegedb.run_on_shard('pb', $$CREATE TABLE d (v int CONSTRAINT pos CHECK (v > 0))$$);
SELECT collegedb.run_on_shard('pb', $$CREATE TABLE u (k int PRIMARY KEY DEFERRABLE INITIALLY DEFERRED)$$);

-- the setting: 2pc (the default) or sequential
SHOW collegedb.commit_protocol;
SET collegedb.commit_protocol = 'sequential';
SHOW collegedb.commit_protocol;
SELECT try($$SET collegedb.commit_protocol = 'three-phase'$$);
RESET collegedb.commit_protocol;
-- test-only and server-level settings are not for everyone to change
SELECT name, context FROM pg_settings
 WHERE name IN ('collegedb.commit_protocol', 'collegedb.recovery_interval')
 ORDER BY name;
-- the test hooks are hidden from SHOW ALL and pg_settings, and only a superuser reads them
SELECT count(*) FROM pg_settings WHERE name LIKE 'collegedb.test\_%';
SELECT current_setting('collegedb.test_pause_commit') = '' AS unset;
CREATE ROLE regress_cd_no_tests;
SET ROLE regress_cd_no_tests;
SELECT current_setting('collegedb.test_pause_commit');
RESET ROLE;
DROP ROLE regress_cd_no_tests;

-- a transaction on PostgreSQL, MariaDB and SQLite shards commits on all of them
BEGIN;
SELECT collegedb.run_on_shard('pa', $$INSERT INTO t VALUES ('a', 1)$$);
SELECT collegedb.run_on_shard('pb', $$INSERT INTO t VALUES ('b', 2)$$);
SELECT collegedb.run_on_shard('my', $$INSERT INTO t VALUES ('m', 3)$$);
SELECT collegedb.run_on_shard('l1', $$INSERT INTO t VALUES ('l', 4)$$);
COMMIT;
SELECT s, collegedb.all_on_shard(s, 'SELECT k, v FROM t ORDER BY k')
  FROM unnest(ARRAY['pa', 'pb', 'my', 'l1']) s ORDER BY 1;
-- nothing stays prepared (the decision record may be forgotten already: the
-- coordinator runs recovery passes too)
SELECT * FROM collegedb.prepared_transactions;
-- recovery finds nothing to do and forgets the record
SELECT * FROM collegedb.recover_prepared_transactions();
SELECT count(*) AS decisions FROM collegedb.commit_decision;
-- the SQLite last participant kept the marker of the decision, forgotten too
SELECT collegedb.all_on_shard('l1', 'SELECT count(*) AS markers FROM collegedb_decisions');

-- a failure at PREPARE (a deferred constraint) rolls back every shard
BEGIN;
SELECT collegedb.run_on_shard('pa', $$INSERT INTO t VALUES ('a2', 1)$$);
SELECT collegedb.run_on_shard('my', $$INSERT INTO t VALUES ('m2', 1)$$);
SELECT collegedb.run_on_shard('l1', $$INSERT INTO t VALUES ('l2', 1)$$);
SELECT collegedb.run_on_shard('pb', 'INSERT INTO u VALUES (1), (1)');
COMMIT;
SELECT s, collegedb.all_on_shard(s, 'SELECT count(*) AS n FROM t')
  FROM unnest(ARRAY['pa', 'pb', 'my', 'l1']) s ORDER BY 1;
SELECT count(*) AS decisions FROM collegedb.commit_decision;
SELECT * FROM collegedb.prepared_transactions;

-- a failure before the commit rolls back every shard as before
BEGIN;
SELECT collegedb.run_on_shard('pa', $$INSERT INTO t VALUES ('a3', 1)$$);
SELECT try($$SELECT collegedb.run_on_shard('pb', 'INSERT INTO d VALUES (-1)')$$);
ROLLBACK;
SELECT collegedb.all_on_shard('pa', 'SELECT count(*) AS n FROM t');

-- a single-shard transaction commits in one phase: no decision record
BEGIN;
SELECT collegedb.run_on_shard('my', $$INSERT INTO t VALUES ('m4', 4)$$);
SELECT collegedb.run_on_shard('my', $$UPDATE t SET v = 5 WHERE k = 'm4'$$);
COMMIT;
SELECT collegedb.all_on_shard('my', $$SELECT v FROM t WHERE k = 'm4'$$);
-- readers beside one writer: one phase too
BEGIN;
SELECT collegedb.all_on_shard('pa', 'SELECT count(*) AS n FROM t');
SELECT collegedb.all_on_shard('my', 'SELECT count(*) AS n FROM t');
SELECT collegedb.run_on_shard('pb', $$INSERT INTO t VALUES ('b5', 5)$$);
COMMIT;
SELECT count(*) AS decisions FROM collegedb.commit_decision;

-- two SQLite writers: the second write is refused before it is sent
-- (neither can prepare), and the transaction keeps nothing
BEGIN;
SELECT collegedb.run_on_shard('pa', $$INSERT INTO t VALUES ('a6', 6)$$);
SELECT collegedb.run_on_shard('l1', $$INSERT INTO t VALUES ('l6', 6)$$);
SELECT collegedb.run_on_shard('l2', $$INSERT INTO t VALUES ('l6', 6)$$);
\set VERBOSITY default
COMMIT;
\set VERBOSITY terse
SELECT s, collegedb.all_on_shard(s, $$SELECT count(*) AS n FROM t WHERE k LIKE '%6'$$)
  FROM unnest(ARRAY['pa', 'l1', 'l2']) s ORDER BY 1;
-- ... unless the one-after-another commit is asked for
BEGIN;
SET LOCAL collegedb.commit_protocol = 'sequential';
SELECT collegedb.run_on_shard('pa', $$INSERT INTO t VALUES ('a6', 6)$$);
SELECT collegedb.run_on_shard('l1', $$INSERT INTO t VALUES ('l6', 6)$$);
SELECT collegedb.run_on_shard('l2', $$INSERT INTO t VALUES ('l6', 6)$$);
COMMIT;
SELECT s, collegedb.all_on_shard(s, $$SELECT count(*) AS n FROM t WHERE k LIKE '%6'$$)
  FROM unnest(ARRAY['pa', 'l1', 'l2']) s ORDER BY 1;
-- sequential commits keep no decision
SELECT count(*) AS decisions FROM collegedb.commit_decision;

-- run_on_all in a transaction block: every row says what the commit keeps
-- (the second SQLite shard refuses the write, the others commit together)
BEGIN;
SELECT shard, ok, error FROM collegedb.run_on_all($$INSERT INTO t VALUES ('r8', 8)$$) ORDER BY shard;
COMMIT;
SELECT s, collegedb.all_on_shard(s, $$SELECT count(*) AS n FROM t WHERE k = 'r8'$$)
  FROM unnest(ARRAY['l1', 'l2', 'my', 'pa', 'pb']) s ORDER BY 1;
SELECT shard, ok FROM collegedb.run_on_all($$DELETE FROM t WHERE k = 'r8'$$) ORDER BY shard;
SELECT count(*) AS decisions FROM collegedb.commit_decision;

-- savepoints inside a two-phase transaction, also on MariaDB (XA)
BEGIN;
SELECT collegedb.run_on_shard('my', $$INSERT INTO t VALUES ('m7', 7)$$);
SAVEPOINT x;
SELECT collegedb.run_on_shard('my', $$INSERT INTO t VALUES ('m8', 8)$$);
SELECT collegedb.run_on_shard('pa', $$INSERT INTO t VALUES ('a8', 8)$$);
ROLLBACK TO SAVEPOINT x;
SELECT collegedb.run_on_shard('pa', $$INSERT INTO t VALUES ('a7', 7)$$);
COMMIT;
SELECT s, collegedb.all_on_shard(s, $$SELECT k FROM t WHERE k LIKE '%7' OR k LIKE '%8' ORDER BY k$$)
  FROM unnest(ARRAY['pa', 'my']) s ORDER BY 1, 2;
-- an implicit-commit statement stays refused inside the transaction
BEGIN;
SELECT collegedb.run_on_shard('my', $$INSERT INTO t VALUES ('m9', 9)$$);
SELECT try($$SELECT collegedb.run_on_shard('my', 'CREATE TABLE t9 (k INT)')$$);
ROLLBACK;

-- PREPARE TRANSACTION on the front stays refused once shards took part
BEGIN;
SELECT collegedb.run_on_shard('pa', $$INSERT INTO t VALUES ('a10', 10)$$);
SELECT collegedb.run_on_shard('pb', $$INSERT INTO t VALUES ('b10', 10)$$);
\set VERBOSITY default
PREPARE TRANSACTION 'front';
\set VERBOSITY terse
SELECT s, collegedb.all_on_shard(s, $$SELECT count(*) AS n FROM t WHERE k LIKE '%10'$$)
  FROM unnest(ARRAY['pa', 'pb']) s ORDER BY 1;

-- recovery on demand runs outside a transaction block; its shapes
BEGIN;
SELECT try('SELECT * FROM collegedb.recover_prepared_transactions()');
ROLLBACK;
SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute
 WHERE attrelid = 'collegedb.prepared_transactions'::regclass AND attnum > 0 ORDER BY attnum;
SELECT pg_get_function_result('collegedb.recover_prepared_transactions()'::regprocedure);
DROP FUNCTION try(text);
DROP EXTENSION collegedb CASCADE;
DROP DATABASE collegedb_2pc_a;
DROP DATABASE collegedb_2pc_b;
