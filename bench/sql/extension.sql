-- CREATE EXTENSION collegedb, with its C functions pointed at the library
-- the front preloads through dynamic_library_path: bench/run's private copy
-- of the build it installed (so that another `make install` during the run
-- cannot change what is measured).  Included by the front set-up scripts.
CREATE EXTENSION collegedb;
UPDATE pg_catalog.pg_proc SET probin = 'collegedb' WHERE probin = '$libdir/collegedb';
