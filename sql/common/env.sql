-- The shards' settings, from the environment: scripts/test sets them, and
-- the Makefile for make installcheck (README.md, "Running the regression
-- tests against your own server").
\getenv pg_host COLLEGEDB_TEST_PG_HOST
\getenv pg_port COLLEGEDB_TEST_PG_PORT
\getenv my_host COLLEGEDB_TEST_MYSQL_HOST
\getenv my_port COLLEGEDB_TEST_MYSQL_PORT
\getenv my_user COLLEGEDB_TEST_MYSQL_USER
\getenv my_password COLLEGEDB_TEST_MYSQL_PASSWORD
\getenv sqlite_dir COLLEGEDB_TEST_SQLITE_DIR
