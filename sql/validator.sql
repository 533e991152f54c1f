-- The wrapper's validator: options per dialect, credentials only in user
-- mappings, a router server without options.  Nothing here connects.
CREATE EXTENSION collegedb;
\set VERBOSITY default

-- the extension's router server
SELECT srvname, srvoptions FROM pg_foreign_server WHERE srvname = 'collegedb';

-- good shard servers of each dialect
CREATE SERVER v_pg FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'postgres', host '127.0.0.1', port '5432', dbname 'app', sslmode 'disable');
CREATE SERVER v_lite FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'sqlite', database '/tmp/v.db', busy_timeout '1000');
CREATE SERVER v_my FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'mysql', host '127.0.0.1', port '3306', dbname 'app');
CREATE SERVER v_maria FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'mariadb', socket '/run/mysqld/mysqld.sock');
CREATE USER MAPPING FOR PUBLIC SERVER v_pg OPTIONS (user 'app', password 'secret');
CREATE USER MAPPING FOR PUBLIC SERVER v_my OPTIONS (user 'app', password 'secret');

-- unknown dialect
CREATE SERVER bad FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'oracle');
-- options without a dialect
CREATE SERVER bad FOREIGN DATA WRAPPER collegedb OPTIONS (host 'x');
-- a missing required option
CREATE SERVER bad FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite');
-- an option of another dialect
CREATE SERVER bad FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database '/tmp/x.db', host 'x');
CREATE SERVER bad FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'mysql', database '/tmp/x.db');
CREATE SERVER bad FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'postgres', busy_timeout '10');
-- credentials are never server options
CREATE SERVER bad FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'postgres', password 'secret');
CREATE SERVER bad FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'mysql', user 'root');
-- bad values
CREATE SERVER bad FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'mysql', port 'eighty');
CREATE SERVER bad FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'postgres', port '-1');
CREATE SERVER bad FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database '/tmp/x.db', busy_timeout '-5');
CREATE SERVER bad FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database '');
-- ALTER SERVER is checked too, and nothing changes on failure
ALTER SERVER v_lite OPTIONS (ADD host 'x');
ALTER SERVER v_lite OPTIONS (DROP database);
SELECT srvoptions FROM pg_foreign_server WHERE srvname = 'v_lite';
SELECT count(*) FROM pg_foreign_server WHERE srvname = 'bad';

-- user mappings take credentials only
CREATE USER MAPPING FOR CURRENT_USER SERVER v_pg OPTIONS (host 'x');
CREATE USER MAPPING FOR CURRENT_USER SERVER v_pg OPTIONS (user 'me', dbname 'x');

-- foreign tables and columns
CREATE FOREIGN TABLE v_t (id text OPTIONS (column_name 'user_id'), name text)
  SERVER collegedb OPTIONS (key_column 'id', table_name 'users');
CREATE FOREIGN TABLE v_bad (id text) SERVER collegedb OPTIONS (key 'id');
CREATE FOREIGN TABLE v_bad (id text) SERVER collegedb OPTIONS (key_column '');
CREATE FOREIGN TABLE v_bad (id text OPTIONS (colname 'x')) SERVER collegedb;
-- with no shard registered, a scan of one reads nothing
SELECT * FROM v_t;

-- the wrapper itself takes no options
ALTER FOREIGN DATA WRAPPER collegedb OPTIONS (ADD debug 'on');

DROP FOREIGN TABLE v_t;
DROP SERVER v_pg, v_lite, v_my, v_maria CASCADE;
DROP EXTENSION collegedb;
