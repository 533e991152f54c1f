# 010_preload: what needs shared_preload_libraries and what does not.
#
# Without the preload, CREATE EXTENSION and statements on a (SQLite) shard work, and
# collegedb.shard_activity() fails with SQLSTATE 55000 and a hint naming
# shared_preload_libraries; collegedb.shard_health shows this backend's contacts.  With the preload, shard_activity() counts every statement
# sent to a shard, and its failures, across backends.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use CollegeDB::TestHarness;

my $dir = sqlite_dir();

# --- Without the preload ----------------------------------------------------------

my $plain = front_node('plain', preload => 0);
is($plain->safe_psql('postgres', 'SHOW shared_preload_libraries'),
	'', 'the plain node preloads nothing');

my $plain_db = "$dir/plain.db";
{
	# the library must load in a backend that did not preload it: the
	# server-start GUC is defined only while preloading
	my $r = psql_outcome($plain, 'CREATE EXTENSION collegedb');
	is($r->{rc}, 0, 'CREATE EXTENSION works without the preload')
	  or diag $r->{stderr};

	$r = psql_outcome(
		$plain, qq{
		CREATE SERVER lite FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ sqlite_server_options($plain_db) ]});
		SELECT collegedb.add_shard('lite');
		SELECT collegedb.run_on_shard('lite', 'CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)');
		SELECT collegedb.run_on_shard('lite', 'INSERT INTO t VALUES (\$1, \$2)', 1, 'one');
		SELECT * FROM collegedb.all_on_shard('lite', 'SELECT k, v FROM t ORDER BY k');
	});
	is($r->{rc}, 0, 'an SQLite shard is added and used without the preload')
	  or diag $r->{stderr};
	like($r->{stdout}, qr/^\{"k": 1, "v": "one"\}$/m,
		'the row written through run_on_shard reads back');
	is(eval { sqlite_exec($plain_db, 'SELECT k, v FROM t') } // $@,
		'1|one', 'the row is in the SQLite file');

	# A new backend loads the library on its first call, not at start-up: the
	# check must hold there, not only in the backend that ran CREATE EXTENSION.
	$r = psql_outcome($plain, 'SELECT * FROM collegedb.shard_activity()');
	is($r->{sqlstate}, '55000',
		'shard_activity() without the preload: SQLSTATE 55000 (object_not_in_prerequisite_state)')
	  or diag $r->{stderr};
	like($r->{stderr}, qr/ERROR:  55000: .*shared_preload_libraries/,
		'the message names shared_preload_libraries');
	like($r->{stderr}, qr/^HINT:  .*shared_preload_libraries/m,
		'the hint says to add collegedb to shared_preload_libraries');

	# The same, in a backend that already used a shard.
	$r = psql_outcome(
		$plain, q{
		SELECT collegedb.run_on_shard('lite', 'SELECT 1');
		SELECT * FROM collegedb.shard_activity();
	});
	like($r->{stdout}, qr/^1$/m, 'a statement runs on the shard in a new backend');
	is($r->{sqlstate}, '55000',
		'shard_activity() still fails after statements ran in the same backend')
	  or diag $r->{stderr};

	# shard_health works without the preload, with what this backend saw: in a
	# new backend only the view's own measuring of the size, then the
	# statement it sent as well
	$r = psql_outcome(
		$plain, q{
		SELECT scope, reachable, statements FROM collegedb.shard_health;
		SELECT collegedb.run_on_shard('lite', 'SELECT 1');
		SELECT scope, reachable, statements, size_bytes > 0 FROM collegedb.shard_health;
	});
	is($r->{rc}, 0, 'shard_health works without the preload') or diag $r->{stderr};
	like($r->{stdout}, qr/\Abackend\|t\|1\n1\nbackend\|t\|2\|t\z/,
		'without the preload it shows this backend\'s contacts only (scope backend)')
	  or diag $r->{stdout};
}

$plain->stop;

# --- With the preload -------------------------------------------------------------

my $front = front_node('front', preload => 'collegedb', extension => 1);
is($front->safe_psql('postgres', 'SHOW shared_preload_libraries'),
	'collegedb', 'the front preloads collegedb');

my $db = "$dir/counted.db";
$front->safe_psql(
	'postgres', qq{
	CREATE SERVER counted FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ sqlite_server_options($db) ]});
	SELECT collegedb.add_shard('counted');
	SELECT collegedb.run_on_shard('counted', 'CREATE TABLE t (k INTEGER PRIMARY KEY)');
});

my $activity_sql = q{SELECT coalesce((SELECT statements || ',' || errors
	FROM collegedb.shard_activity() WHERE shard = 'counted'), 'none')};
my $before = $front->safe_psql('postgres', $activity_sql);
like($before, qr/^\d+,\d+$/, 'shard_activity() lists the shard after add_shard');
my ($st0, $err0) = split /,/, $before;

# Three statements from one backend, the second failing (duplicate key).
my $r = psql_outcome(
	$front, q{
	\set ON_ERROR_STOP 0
	SELECT collegedb.run_on_shard('counted', 'INSERT INTO t VALUES (1)');
	SELECT collegedb.run_on_shard('counted', 'INSERT INTO t VALUES (1)');
	SELECT count(*) FROM collegedb.all_on_shard('counted', 'SELECT k FROM t');
});
like($r->{stderr}, qr/ERROR:  23505:/, 'the second statement failed on the shard');

# Read from another backend: the counters live in shared memory.
my $after = $front->safe_psql('postgres', $activity_sql);
my ($st1, $err1) = split /,/, $after;
is($st1 - $st0, 3, 'shard_activity() counted 3 statements (seen from another backend)');
is($err1 - $err0, 1, 'shard_activity() counted 1 error');
is( $front->safe_psql(
		'postgres', q{SELECT count(*) FROM collegedb.shard_activity() WHERE statements < errors}),
	'0',
	'no shard has more errors than statements');

$front->stop;

done_testing();
