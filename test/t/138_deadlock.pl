# 138_deadlock: a deadlock across shards (issue 30) ends within a few seconds with
# 40P01 for one transaction, while the other's statement completes and it commits.
#
# S1 writes k1 (shard A), S2 writes k2 (shard B), S1 writes k2 (waits on B for S2),
# S2 writes k1 (waits on A for S1): no shard sees a cycle.  The coordinator builds the
# wait-for graph from every shard's lock waits and cancels one side.  Run for two
# databases of one PostgreSQL cluster (whose pg_locks answers are cluster-wide), for
# two clusters, and for a PostgreSQL and a MariaDB shard.  A long wait without a cycle
# is not cancelled, and with collegedb.deadlock_detection off nothing is.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use CollegeDB::TestHarness;

my $front = front_node('front', extension => 1,
	conf => { deadlock_timeout => '1s' });
my $pg1 = pg_shard_node('pg1');
my $pg2 = pg_shard_node('pg2');
my $mdb = start_mariadb();
my $mdb_db = mysql_database($mdb);

# one cluster, two databases; a second cluster; MariaDB
add_pg_shards($front, $pg1, a1 => 'a1', b1 => 'b1');
add_pg_shards($front, $pg2, b2 => 'b2');
$front->safe_psql('postgres',
	mysql_shard_server($mdb, 'm', dbname => $mdb_db)
	  . q{SELECT collegedb.add_shard('m');});
for my $s (qw(a1 b1 b2))
{
	$front->safe_psql('postgres',
		"SELECT collegedb.run_on_shard('$s', 'CREATE TABLE kv (k text PRIMARY KEY, v int)')");
}
mysql_query($mdb, 'CREATE TABLE kv (k varchar(64) PRIMARY KEY, v int) ENGINE=InnoDB',
	database => $mdb_db);

# the coordinator must be up before anything waits
ok(poll_until($front,
		q{SELECT count(*) > 0 FROM pg_stat_activity WHERE backend_type = 'collegedb coordinator'},
		't', 60),
	'the coordinator runs');

# pins two keys to two shards and writes their first values
sub pin
{
	my ($k1, $s1, $k2, $s2) = @_;
	$front->safe_psql('postgres', qq{
		SELECT collegedb.set_mapping('$k1', '$s1');
		SELECT collegedb.set_mapping('$k2', '$s2');
		SELECT collegedb.run('$k1', 'INSERT INTO kv VALUES (\$1, 0)', '$k1');
		SELECT collegedb.run('$k2', 'INSERT INTO kv VALUES (\$1, 0)', '$k2');
	});
}

sub write_sql
{
	my ($k, $v) = @_;
	return "SELECT collegedb.run('$k', 'UPDATE kv SET v = $v WHERE k = \$1', '$k')";
}

sub value_of
{
	my ($k) = @_;
	return $front->safe_psql('postgres',
		"SELECT collegedb.first('$k', 'SELECT v FROM kv WHERE k = \$1', '$k')->>'v'");
}

# waits until 'n' backends of the front wait for a shard (their query runs and a
# remote lock wait shows on the shard side as a long-running statement)
sub wait_running
{
	my ($pattern) = @_;
	$pattern =~ s/'/''/g;
	return poll_until($front,
		qq{SELECT count(*) > 0 FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%$pattern%' AND pid <> pg_backend_pid()},
		't', 30);
}

sub deadlock_case
{
	my ($name, $k1, $s1, $k2, $s2) = @_;
	pin($k1, $s1, $k2, $s2);
	my $a = bg_session($front);
	my $b = bg_session($front);
	bg_query($a, 'BEGIN');
	bg_query($b, 'BEGIN');
	is(bg_query($a, write_sql($k1, 1))->{sqlstate}, undef, "$name: S1 writes $k1");
	is(bg_query($b, write_sql($k2, 2))->{sqlstate}, undef, "$name: S2 writes $k2");
	bg_send($a, write_sql($k2, 1));
	ok(wait_running("v = 1 WHERE k = \$1', '$k2'"), "$name: S1 waits for $k2");
	usleep(200_000);
	bg_send($b, write_sql($k1, 2));
	my $ra = bg_wait($a);
	my $rb = bg_wait($b);
	my @states = sort map { $_->{sqlstate} // 'ok' } ($ra, $rb);
	is_deeply(\@states, [ '40P01', 'ok' ], "$name: one side gets 40P01, the other's write completes")
	  or diag("S1: $ra->{stderr}\nS2: $rb->{stderr}");
	my ($loser, $winner, $lv) = ($ra->{sqlstate} // '') eq '40P01' ? ($ra, $b, 2) : ($rb, $a, 1);
	ok($loser->{seconds} < 10, "$name: the victim is cancelled within 10 s")
	  or diag("took $loser->{seconds} s");
	note sprintf("%s: victim cancelled after %.2f s", $name, $loser->{seconds});
	like($loser->{stderr}, qr/deadlock across shards/, "$name: the error names the deadlock");
	like($loser->{stderr}, qr/waits on shard/, "$name: its detail names the waits");
	bg_query(($winner == $a ? $b : $a), 'ROLLBACK');
	is(bg_query($winner, 'COMMIT')->{sqlstate}, undef, "$name: the other side commits");
	is(value_of($k1), $lv, "$name: $k1 has the committed value");
	is(value_of($k2), $lv, "$name: $k2 has the committed value");
	$a->quit;
	$b->quit;
}

deadlock_case('one cluster', 'x1', 'a1', 'y1', 'b1');
deadlock_case('two clusters', 'x2', 'a1', 'y2', 'b2');
deadlock_case('postgres and mariadb', 'x3', 'a1', 'y3', 'm');
deadlock_case('mariadb and postgres', 'x4', 'm', 'y4', 'b2');

# --- a long wait without a cycle is not cancelled ---------------------------------

{
	pin('w1', 'a1', 'w2', 'b1');
	my $a = bg_session($front);
	my $b = bg_session($front);
	bg_query($a, 'BEGIN');
	bg_query($a, write_sql('w1', 5));
	bg_send($b, write_sql('w1', 6));
	ok(wait_running("v = 6 WHERE"), 'no cycle: S2 waits for w1');
	sleep 3;
	is(bg_query($a, 'COMMIT')->{sqlstate}, undef, 'no cycle: S1 commits after 3 s');
	my $rb = bg_wait($b);
	is($rb->{sqlstate}, undef, 'no cycle: the waiting write is not cancelled')
	  or diag($rb->{stderr});
	ok($rb->{seconds} >= 3, 'no cycle: it waited for the commit');
	is(value_of('w1'), 6, 'no cycle: the later write wins');
	$a->quit;
	$b->quit;
}

# --- with collegedb.deadlock_detection off, statement_timeout ends it ---------------

{
	$front->append_conf('postgresql.conf', "collegedb.deadlock_detection = off\n");
	$front->reload;
	ok(poll_until($front, 'SHOW collegedb.deadlock_detection', 'off', 30),
		'detection off: the setting is reloaded');
	# the coordinator reads it at its next loop
	sleep 1;
	pin('z1', 'a1', 'z2', 'b1');
	my $a = bg_session($front);
	my $b = bg_session($front);
	bg_query($a, 'BEGIN');
	bg_query($b, 'BEGIN');
	bg_query($a, write_sql('z1', 1));
	bg_query($b, write_sql('z2', 2));
	bg_query($b, "SET statement_timeout = '6s'");
	bg_send($a, write_sql('z2', 1));
	ok(wait_running("v = 1 WHERE k = \$1', 'z2'"), 'detection off: S1 waits for z2');
	bg_send($b, write_sql('z1', 2));
	my $rb = bg_wait($b);
	is($rb->{sqlstate}, '57014', 'detection off: statement_timeout ends the wait, not 40P01')
	  or diag($rb->{stderr});
	ok($rb->{seconds} >= 5, 'detection off: nothing cancelled it before');
	bg_query($b, 'ROLLBACK');
	my $ra = bg_wait($a);
	is($ra->{sqlstate}, undef, 'detection off: S1 goes on');
	bg_query($a, 'ROLLBACK');
	$a->quit;
	$b->quit;
}

done_testing();
