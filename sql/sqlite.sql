-- Statements on SQLite shards (see common/dialect.sql)
CREATE EXTENSION collegedb;
\set VERBOSITY terse
\i sql/common/env.sql
-- statements here write on several SQLite shards at once, which cannot
-- take part in one two-phase commit (see twophase.sql): they commit in turn
SET collegedb.commit_protocol = 'sequential';
\set s1_db :sqlite_dir '/dialect_s1.db'
\set s2_db :sqlite_dir '/dialect_s2.db'
CREATE SERVER s1 FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'s1_db');
CREATE SERVER s2 FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'s2_db', busy_timeout '2000');
SELECT collegedb.add_shard('s1');
SELECT collegedb.add_shard('s2');
\set bytes_t BLOB
\set ts_t TIMESTAMP
\set tstz_t TIMESTAMPTZ
\set uuid_t UUID
\set json_t JSON
\i sql/common/dialect.sql
\i sql/common/fidelity.sql
DROP FUNCTION try(text);
DROP EXTENSION collegedb CASCADE;
