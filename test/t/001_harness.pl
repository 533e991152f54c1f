# 001_harness: proves the test harness itself, before any collegedb feature.
#
# A front node starts with collegedb preloaded and answers; a plain Postgres shard
# cluster answers; the run's MariaDB server answers for the test user over TCP
# (user@127.0.0.1) and over the socket (user@localhost), and that user can create and
# use a collegedb_% database; the sqlite3 CLI writes a file in sqlite_dir() that the
# front's backend (user postgres) can see.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use CollegeDB::TestHarness;

# Front and Postgres shard.
my $front = front_node('front');
is($front->safe_psql('postgres', 'SELECT 1'), '1', 'front node answers');
is( $front->safe_psql('postgres', 'SHOW shared_preload_libraries'),
	$ENV{COLLEGEDB_TEST_PRELOAD} // 'collegedb',
	'front node preloads collegedb');

my $shard = pg_shard_node('shard_pg');
is($shard->safe_psql('postgres', 'SELECT 2'), '2', 'Postgres shard answers');
like(pg_server_options($shard, dbname => 'app'),
	qr/^dialect 'postgres', host '.+', port '\d+', dbname 'app'$/,
	'pg_server_options');

# MariaDB.
my $mdb = start_mariadb();
is(mysql_query($mdb, 'SELECT 1 + 1'), '2', 'MariaDB answers');
is( mysql_query($mdb, 'SELECT CURRENT_USER()'),
	"$ENV{COLLEGEDB_TEST_MYSQL_USER}\@127.0.0.1",
	'test user over TCP is user@127.0.0.1');
is( mysql_query($mdb, 'SELECT CURRENT_USER()', via => 'socket'),
	"$ENV{COLLEGEDB_TEST_MYSQL_USER}\@localhost",
	'test user over the socket is user@localhost');

my $db = mysql_database($mdb);
is($db, 'collegedb_001_harness', 'mysql_database names the database after the test');
mysql_query($mdb, q{
	CREATE TABLE kv (k VARCHAR(32) PRIMARY KEY, v INT NOT NULL);
	INSERT INTO kv VALUES ('a', 1), ('b', 2);
}, database => $db);
is( mysql_query($mdb, 'SELECT k, v FROM kv ORDER BY k', database => $db),
	"a\t1\nb\t2", 'rows round-trip through the test database');

eval { mysql_query($mdb, 'SELEC 1') };
like($@, qr/syntax/, 'mysql_query dies with the server error');

# SQLite.
my $dir  = sqlite_dir();
my $file = "$dir/shard.db";
sqlite_exec($file, q{
	CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER NOT NULL);
	INSERT INTO kv VALUES ('a', 1), ('b', 2);
});
ok(-f $file, 'sqlite3 created the database file');
is(sqlite_exec($file, 'SELECT k, v FROM kv ORDER BY k'),
	"a|1\nb|2", 'rows round-trip through the SQLite file');
is( $front->safe_psql(
		'postgres', 'SELECT size > 0 FROM pg_stat_file(' . sql_literal($file) . ')'),
	't',
	'the front backend sees the SQLite file');

# Polling.
ok(poll_until($front, 'SELECT 40 + 2', '42', 10), 'poll_until sees the value');
ok(wait_for_backend_type($front, 'checkpointer', 10),
	'wait_for_backend_type finds a running process type');

done_testing();
