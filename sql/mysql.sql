-- Statements on MySQL/MariaDB shards (see common/dialect.sql): the test
-- MariaDB server that scripts/test starts.
CREATE EXTENSION collegedb;
\set VERBOSITY terse
\i sql/common/env.sql
CREATE SERVER s1 FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'mysql', host :'my_host', port :'my_port', dbname 'collegedb_test');
CREATE USER MAPPING FOR PUBLIC SERVER s1 OPTIONS (user :'my_user', password :'my_password');
SELECT collegedb.add_shard('s1');
SELECT collegedb.run_on_shard('s1', 'CREATE DATABASE IF NOT EXISTS collegedb_test2');
CREATE SERVER s2 FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'mysql', host :'my_host', port :'my_port', dbname 'collegedb_test2');
CREATE USER MAPPING FOR PUBLIC SERVER s2 OPTIONS (user :'my_user', password :'my_password');
SELECT collegedb.add_shard('s2');
\set bytes_t LONGBLOB
\set ts_t DATETIME(6)
\set tstz_t DATETIME(6)
\set uuid_t CHAR(36)
\set json_t JSON
\i sql/common/dialect.sql
\i sql/common/fidelity.sql

-- wrong credentials and an unreachable server: class 08, the shard named
CREATE SERVER s3 FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'mysql', host :'my_host', port :'my_port', dbname 'collegedb_test');
CREATE USER MAPPING FOR PUBLIC SERVER s3 OPTIONS (user :'my_user', password 'wrong');
SELECT try($$SELECT collegedb.add_shard('s3')$$);
ALTER SERVER s3 OPTIONS (SET port '1');
SELECT try($$SELECT collegedb.add_shard('s3')$$);
SELECT name FROM collegedb.shards;

-- MySQL commits its transaction before DDL: DDL runs on its own, and is
-- refused inside a remote transaction rather than silently committing it
BEGIN;
SELECT collegedb.run_on_shard('s1', 'CREATE TABLE ddl_alone (id INT)');
SELECT collegedb.run_on_shard('s1', 'INSERT INTO ddl_alone VALUES (1)');
SELECT try($$SELECT collegedb.run_on_shard('s1', 'DROP TABLE ddl_alone')$$);
ROLLBACK;
SELECT * FROM collegedb.all_on_shard('s1', 'SELECT count(*) AS n FROM ddl_alone');
SELECT collegedb.run_on_shard('s1', 'DROP TABLE ddl_alone');

DROP FUNCTION try(text);

SELECT collegedb.run_on_shard('s1', 'DROP DATABASE collegedb_test2');
DROP EXTENSION collegedb CASCADE;
