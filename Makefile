# collegedb: the front database of a sharded SQL fleet, as a PostgreSQL extension.

MODULE_big = collegedb
EXTENSION = collegedb
# sql/collegedb.sql is the one readable source of the current version's
# objects; the install script sql/collegedb--$(EXTVERSION).sql is a copy of
# it, built here.  The released full script (0.1) and the upgrade scripts
# collegedb--A--B.sql are written by hand; sql/upgrade.sql checks that an
# upgraded 0.1 ends with the objects of a fresh install.
EXTVERSION = 0.3
DATA = sql/collegedb--0.1.sql $(wildcard sql/collegedb--*--*.sql)
DATA_built = sql/collegedb--$(EXTVERSION).sql
PGFILEDESC = "collegedb - route keyed statements to PostgreSQL, SQLite and MySQL shards"

OBJS = \
	src/init.o \
	src/guc.o \
	src/common/shmem.o \
	src/common/waits.o \
	src/adapters/common.o \
	src/adapters/registry.o \
	src/adapters/lexer.o \
	src/adapters/pg.o \
	src/adapters/pg_connect.o \
	src/adapters/pg_copy.o \
	src/adapters/pg_options.o \
	src/adapters/pg_prepared.o \
	src/adapters/sqlite.o \
	src/adapters/sqlite_connect.o \
	src/adapters/sqlite_errors.o \
	src/adapters/sqlite_options.o \
	src/adapters/sqlite_values.o \
	src/adapters/sqlite_sandbox.o \
	src/adapters/sqlite_stmtcache.o \
	src/adapters/mysql.o \
	src/adapters/mysql_connect.o \
	src/adapters/mysql_errors.o \
	src/adapters/mysql_options.o \
	src/adapters/mysql_prepared.o \
	src/adapters/mysql_values.o \
	src/remote/activity.o \
	src/remote/connection.o \
	src/remote/values.o \
	src/remote/errors.o \
	src/remote/observe.o \
	src/remote/execute.o \
	src/remote/fanout.o \
	src/remote/group.o \
	src/remote/tombstones.o \
	src/remote/twophase.o \
	src/remote/xact.o \
	src/remote/recovery.o \
	src/remote/deadlock.o \
	src/catalog/catalog.o \
	src/catalog/config.o \
	src/catalog/epochs.o \
	src/catalog/invalidate.o \
	src/catalog/journal.o \
	src/catalog/job_journal.o \
	src/catalog/mappings.o \
	src/catalog/shards.o \
	src/catalog/slotmaps.o \
	src/catalog/standby.o \
	src/catalog/tables.o \
	src/catalog/topology.o \
	src/catalog/decisions.o \
	src/placement/hash.o \
	src/placement/regions.o \
	src/placement/slots.o \
	src/placement/strategy.o \
	src/router/allocate.o \
	src/router/computed.o \
	src/router/locate.o \
	src/router/routed.o \
	src/router/slotroute.o \
	src/router/router.o \
	src/router/shared_cache.o \
	src/fdw/deparse.o \
	src/fdw/options.o \
	src/fdw/handler.o \
	src/fdw/fdw_plan.o \
	src/fdw/shippable.o \
	src/fdw/upper.o \
	src/fdw/upper_sql.o \
	src/fdw/upper_exec.o \
	src/fdw/topn.o \
	src/fdw/shard_run.o \
	src/fdw/table.o \
	src/fdw/explain.o \
	src/fdw/fdw_exec.o \
	src/fdw/insert.o \
	src/fdw/truncate.o \
	src/fdw/analyze.o \
	src/fdw/estimate.o \
	src/fdw/import.o \
	src/fdw/join_paths.o \
	src/fdw/semijoin.o \
	src/fdw/modify_keys.o \
	src/fdw/row_modify.o \
	src/fdw/fdw_keys.o \
	src/sqlfuncs/shard_funcs.o \
	src/sqlfuncs/config_funcs.o \
	src/sqlfuncs/exec_funcs.o \
	src/sqlfuncs/conn_funcs.o \
	src/sqlfuncs/hash_funcs.o \
	src/sqlfuncs/route_funcs.o \
	src/sqlfuncs/stats_funcs.o \
	src/sqlfuncs/move_funcs.o \
	src/sqlfuncs/table_funcs.o \
	src/sqlfuncs/slot_funcs.o \
	src/sqlfuncs/topology_funcs.o \
	src/sqlfuncs/twophase_funcs.o \
	src/worker/coordinator.o \
	src/worker/progress.o \
	src/worker/jobs.o \
	src/worker/launcher.o \
	src/worker/move_shards.o \
	src/worker/move_batches.o \
	src/worker/movers.o \
	src/worker/moves.o \
	src/worker/outbox.o \
	src/worker/resolver.o \
	src/worker/slot_moves.o \
	src/worker/unit.o

PG_CPPFLAGS = -I$(srcdir)/src -I$(srcdir)/src/include -I$(libpq_srcdir) -Wall -Werror \
	-DCOLLEGEDB_VERSION='"$(EXTVERSION)"'
SHLIB_LINK_INTERNAL = $(libpq)
SHLIB_LINK = -lsqlite3 $(shell mariadb_config --libs)

# The test suites.  `make installcheck` runs all three against a running
# server (README.md, "Running the regression tests against your own
# server"); each is left out or narrowed with its usual PGXS variable:
#   pg_regress  REGRESS: every sql/*.sql but the extension's source and
#               scripts, in name order; expected output in expected/.
#   isolation   ISOLATION: the specs test/specs/*.spec; expected output in
#               test/expected/ (pg_isolation_regress reads test/).
#   TAP         TAP_TESTS: prove over PROVE_TESTS (test/t/*.pl), with the
#               harness in test/lib; each file starts the servers it needs.
# e.g.  make installcheck ISOLATION= TAP_TESTS=          pg_regress only
#       make installcheck REGRESS= ISOLATION= PROVE_TESTS=test/t/020_pg_shard.pl
# scripts/test runs the same targets, one suite (and one TAP file) at a time.
REGRESS = $(sort $(filter-out collegedb collegedb--%,$(basename $(notdir $(wildcard sql/*.sql)))))
REGRESS_OPTS = --encoding=UTF8
ISOLATION = $(sort $(basename $(notdir $(wildcard test/specs/*.spec))))
ISOLATION_OPTS = --inputdir=$(srcdir)/test --encoding=UTF8
TAP_TESTS = 1
PROVE_TESTS ?= $(sort $(wildcard test/t/*.pl))

# The tests read their shards' settings from the environment (psql's
# \getenv; the TAP harness).  PostgreSQL shards of the pg_regress tests are
# databases of the server under test.
COLLEGEDB_TEST_PG_HOST ?= 127.0.0.1
COLLEGEDB_TEST_PG_PORT ?= $(or $(PGPORT),5432)
COLLEGEDB_TEST_MYSQL_HOST ?= 127.0.0.1
COLLEGEDB_TEST_MYSQL_USER ?= collegedb
COLLEGEDB_TEST_MYSQL_PASSWORD ?= collegedb
export COLLEGEDB_TEST_PG_HOST COLLEGEDB_TEST_PG_PORT COLLEGEDB_TEST_SQLITE_DIR
export COLLEGEDB_TEST_MYSQL_HOST COLLEGEDB_TEST_MYSQL_PORT COLLEGEDB_TEST_MYSQL_USER
export COLLEGEDB_TEST_MYSQL_PASSWORD

# A pg_regress test that uses :'my_port' (COLLEGEDB_TEST_MYSQL_PORT), or a
# TAP file that uses the run's MariaDB server or starts its own, needs
# MySQL or MariaDB: without that variable it is left out, and said so.
REGRESS_MYSQL = $(basename $(notdir $(shell grep -l ":'my_port'" sql/*.sql)))
PROVE_MYSQL = $(shell grep -l 'start_mariadb\|PrivateMariaDB' test/t/*.pl)
ifeq ($(COLLEGEDB_TEST_MYSQL_PORT),)
REGRESS := $(filter-out $(REGRESS_MYSQL),$(REGRESS))
PROVE_TESTS := $(filter-out $(PROVE_MYSQL),$(PROVE_TESTS))
endif

# installcheck's checks of the environment, before pg_regress starts (set
# before PGXS reads its installcheck rule)
REGRESS_PREP = installcheck-settings

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# the TAP tests' own modules (CollegeDB::TestHarness), beside PostgreSQL's
PG_PROVE_FLAGS += -I $(srcdir)/test/lib

.PHONY: installcheck-settings print-regress
installcheck-settings:
ifneq ($(REGRESS),)
ifeq ($(COLLEGEDB_TEST_SQLITE_DIR),)
	@echo 'Set COLLEGEDB_TEST_SQLITE_DIR to a directory the server'"'"'s OS user can write (the SQLite shards'"'"' files).' >&2
	@exit 1
endif
endif
ifeq ($(COLLEGEDB_TEST_MYSQL_PORT),)
	@echo 'COLLEGEDB_TEST_MYSQL_PORT is not set: leaving out the tests that need MySQL ($(REGRESS_MYSQL) $(notdir $(PROVE_MYSQL))).'
endif

# the pg_regress tests installcheck runs (scripts/test reads the list)
print-regress:
	@echo $(REGRESS)

sql/collegedb--$(EXTVERSION).sql: sql/collegedb.sql
	cp $< $@

# without configure's dependency tracking, rebuild everything when a header changes
SRC_HEADERS = $(wildcard src/*.h src/*/*.h)
$(OBJS) $(OBJS:.o=.bc): $(SRC_HEADERS)

# mysql.h clashes with PostgreSQL's headers: only the MySQL adapter's files see it.
MYSQL_OBJS = $(filter src/adapters/mysql%.o,$(OBJS))
$(MYSQL_OBJS) $(MYSQL_OBJS:.o=.bc): override CPPFLAGS += $(shell mariadb_config --include)
