# 095_databases: a coordinator in every database that has the extension.
#
# The launcher starts one coordinator per database with collegedb (here app1 and
# app2, not postgres nor plain, which have none: their probes exit at once).  In app2
# a scheduled rebalance completes, and a move interrupted by a restart of the front
# is recovered there.  DROP EXTENSION stops app1's coordinator, CREATE EXTENSION
# starts it again at once, and DROP DATABASE app1 works while it runs (the launcher
# stops it first).  CREATE DATABASE ... TEMPLATE app2 works too, and the copy gets a
# coordinator of its own.  collegedb.database restricts the coordinators to one
# database: elsewhere schedule_rebalance is refused with a hint, and waiting for a
# queued job there times out saying no coordinator runs.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use CollegeDB::TestHarness;

my $t_start = time;
my $front = front_node('front', conf => { max_worker_processes => 16 });
$front->safe_psql('postgres', "CREATE DATABASE $_") for qw(app1 app2 plain);
$front->safe_psql($_, 'CREATE EXTENSION collegedb') for qw(app1 app2);
my $shard = pg_shard_node('shards');
$shard->safe_psql('postgres', "CREATE DATABASE $_") for qw(s1 s2);

sub coordinators_in
{
	my ($db) = @_;
	return qq{SELECT count(*) FROM pg_stat_activity
		WHERE backend_type = 'collegedb coordinator' AND datname = '$db'};
}

ok(poll_until($front, coordinators_in('app1'), '1', 30), 'app1 has a coordinator');
ok(poll_until($front, coordinators_in('app2'), '1', 30), 'app2 has a coordinator');
is( $front->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'collegedb launcher'}),
	'1', 'one launcher');
ok( poll_until($front, q{SELECT count(*) FROM pg_stat_activity
		WHERE backend_type = 'collegedb coordinator' AND datname IN ('postgres', 'plain')}, '0', 30),
	'databases without the extension run no coordinator');
sleep 1;
is( $front->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_activity
		WHERE backend_type = 'collegedb coordinator' AND datname IN ('postgres', 'plain')}),
	'0', '... not even a second later');

sub app2 { return $front->safe_psql('app2', $_[0]) }

app2(qq{
	CREATE SERVER s1 FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ pg_server_options($shard, dbname => 's1') ]});
	CREATE SERVER s2 FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ pg_server_options($shard, dbname => 's2') ]});
	CREATE USER MAPPING FOR PUBLIC SERVER s1 OPTIONS (user 'postgres');
	CREATE USER MAPPING FOR PUBLIC SERVER s2 OPTIONS (user 'postgres');
	SELECT collegedb.add_shard('s1'), collegedb.add_shard('s2');
	SELECT count(*) FROM collegedb.run_on_all('CREATE TABLE items (id TEXT PRIMARY KEY, v INTEGER)');
	SELECT collegedb.register_table('items', 'id');
	SELECT collegedb.set_shard_state('s2', writable => false);
	SELECT sum(collegedb.run('i' || n, 'INSERT INTO items VALUES (\$1, \$2)', 'i' || n, n))
	  FROM generate_series(1, 40) AS n;
	SELECT collegedb.set_shard_state('s2', writable => true);
});

# --- a scheduled rebalance in the second database ------------------------------

my $to_move = app2(q{SELECT moved FROM collegedb.rebalance('items', dry_run => true)});
cmp_ok($to_move, '>', 5, "the rebalance has keys to move to s2 ($to_move)");
my $job = app2(q{SELECT collegedb.schedule_rebalance('items', concurrency => 2)});
is(app2(qq{SELECT state || '/' || moved || '/' || failed FROM collegedb.wait_for_job($job, '60 s')}),
	"done/$to_move/0", "app2's coordinator runs the scheduled rebalance to done");
is( app2(q{SELECT count(*) FROM generate_series(1, 40) AS n
		WHERE (SELECT count(*) FROM collegedb.all_json('i' || n, 'SELECT id FROM items WHERE id = $1', 'i' || n)) = 1}),
	'40', 'every key reads once');

# --- an interrupted move recovered after a restart, in app2 -------------------

$front->safe_psql('postgres',
	"ALTER SYSTEM SET collegedb.test_pause_after_step = 'source_done'; SELECT pg_reload_conf()");
ok(poll_until($front, 'SHOW collegedb.test_pause_after_step', 'source_done', 30), 'movers pause after source_done');
my $k = app2(q{SELECT id FROM (SELECT value->>'id' AS id FROM collegedb.fanout('SELECT id FROM items')
	WHERE shard = 's1') s ORDER BY id LIMIT 1});
my $off = -s $front->logfile;
my $caller = psql_start($front, qq{SELECT collegedb.reassign_shard('$k', 's2')}, dbname => 'app2');
my ($id) = wait_for_log_match($front, qr/collegedb: move (\d+) paused after step source_done/, $off, 60);
ok(defined $id, "the move of $k pauses after source_done");
$front->restart;
psql_finish($caller, 30);
$front->safe_psql('postgres', 'ALTER SYSTEM RESET collegedb.test_pause_after_step; SELECT pg_reload_conf()');
ok(poll_until($front, "SELECT step FROM collegedb.moves WHERE id = $id", 'done', 60, 'app2'),
	"after the restart app2's coordinator finishes the interrupted move");
is( app2(qq{SELECT string_agg(shard, ',') FROM collegedb.fanout('SELECT id FROM items WHERE id = \$1', '$k')
		WHERE value IS NOT NULL}),
	's2', "$k is on s2 only");
is(app2(qq{SELECT shard FROM collegedb.route('$k')}), 's2', 'and maps there');

# --- DROP and CREATE EXTENSION, DROP DATABASE -------------------------------

ok(poll_until($front, coordinators_in('app1'), '1', 30), 'app1 has its coordinator after the restart');
$front->safe_psql('app1', 'DROP EXTENSION collegedb');
ok(poll_until($front, coordinators_in('app1'), '0', 30), 'DROP EXTENSION stops the coordinator');
my $t0 = time;
$front->safe_psql('app1', 'CREATE EXTENSION collegedb');
ok(poll_until($front, coordinators_in('app1'), '1', 30), 'CREATE EXTENSION starts it again');
cmp_ok(time - $t0, '<', 10, sprintf('... at once (%.1f s), without waiting for the next probe', time - $t0));
my $r = psql_outcome($front, 'DROP DATABASE app1');
is($r->{rc}, 0, 'DROP DATABASE of a database whose coordinator runs works') or diag $r->{stderr};

$r = psql_outcome($front, 'CREATE DATABASE app3 TEMPLATE app2');
is($r->{rc}, 0, 'CREATE DATABASE ... TEMPLATE of a database whose coordinator runs works') or diag $r->{stderr};
ok(poll_until($front, coordinators_in('app3'), '1', 30), 'the copy gets a coordinator of its own');
ok(poll_until($front, coordinators_in('app2'), '1', 30), 'and the template gets its own back');

# --- collegedb.database restricts the coordinators -----------------------------

$front->safe_psql('postgres', "ALTER SYSTEM SET collegedb.database = 'app2'; SELECT pg_reload_conf()");
ok(poll_until($front, coordinators_in('app3'), '0', 30), "collegedb.database = 'app2': app3's coordinator stops");
is($front->safe_psql('postgres', coordinators_in('app2')), '1', "app2's runs on");
$r = psql_outcome($front, q{SELECT collegedb.schedule_rebalance('items')}, dbname => 'app3');
is($r->{sqlstate}, '55000', 'schedule_rebalance where no coordinator will run is refused');
like($r->{stderr}, qr/HINT:  .*collegedb\.database/, '... with a hint naming collegedb.database');
my $queued = $front->safe_psql('app3',
	q{INSERT INTO collegedb.job (kind, table_name, owner) VALUES ('rebalance', 'items', 10) RETURNING id});
$r = psql_outcome($front, qq{SELECT collegedb.wait_for_job($queued, '200 ms')}, dbname => 'app3');
is($r->{sqlstate}, '57014', 'waiting for a queued job that nobody runs times out (57014)');
like($r->{stderr}, qr/timed out waiting for job $queued\b.*\n.*DETAIL:  The job is still queued\.\n.*HINT:  No coordinator runs in this database now/,
	'... saying the job is still queued and no coordinator runs');
$front->safe_psql('postgres', 'ALTER SYSTEM RESET collegedb.database; SELECT pg_reload_conf()');
ok(poll_until($front, coordinators_in('app3'), '1', 30), 'without the restriction app3 has its coordinator again');
is($front->safe_psql('app3', qq{SELECT state FROM collegedb.wait_for_job($queued, '60 s')}), 'done',
	'which runs the queued job');

note sprintf '095 took %.1f s', time - $t_start;
done_testing();
