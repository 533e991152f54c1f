# 155_failover: a standby front promoted after the primary died loses nothing.
#
# A primary front streams to a hot standby; two PostgreSQL shards hold 100 keys.
#  - A move started on the primary waits after its step 'copied'; the standby has
#    replayed the journal, the primary is killed with SIGKILL (postmaster and every
#    process), the standby is promoted: its coordinator takes the move over (the
#    holder recorded in the journal ran on the old primary), the move completes, and
#    every key is readable exactly once (100 rows for 100 keys).
#  - The same inside the source step, once the target committed its copy (the key's
#    row is on both shards: 101 rows until the move resumes), and after
#    'source_done'.  Each case runs on the front the case before promoted.
#  - Under synchronous replication (synchronous_standby_names = '*', and no waiting
#    for the standby to catch up) a multi-shard transaction waits between PREPARE and
#    COMMIT PREPARED ('decided': its decision committed); the front is killed the same
#    way and its standby promoted: the promoted front commits the prepared
#    transactions from the replicated decision, the sums agree and no prepared
#    transaction is left on any shard.  One killed before its decision ('prepared')
#    is rolled back by the promoted front instead.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use CollegeDB::TestHarness;

my $t_start = time;
my %conf = (max_worker_processes => 16, max_connections => 40);
my $primary = front_node('primary', init => { allows_streaming => 1 }, extension => 1,
	conf => \%conf);
my $pga = pg_shard_node('pga');
my $pgb = pg_shard_node('pgb');
$pga->safe_psql('postgres', 'CREATE DATABASE a');
$pgb->safe_psql('postgres', 'CREATE DATABASE b');
$pga->safe_psql('a', 'CREATE TABLE items (id text PRIMARY KEY, v int NOT NULL)');
$pgb->safe_psql('b', 'CREATE TABLE items (id text PRIMARY KEY, v int NOT NULL)');

my @keys = map { "k$_" } 1 .. 100;
$primary->safe_psql(
	'postgres', qq{
	CREATE SERVER a FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ pg_server_options($pga, dbname => 'a') ]});
	CREATE SERVER b FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ pg_server_options($pgb, dbname => 'b') ]});
	CREATE USER MAPPING FOR PUBLIC SERVER a OPTIONS (user 'postgres');
	CREATE USER MAPPING FOR PUBLIC SERVER b OPTIONS (user 'postgres');
	SELECT collegedb.add_shard('a'), collegedb.add_shard('b');
	SELECT collegedb.register_table('items', 'id');
	SELECT count(collegedb.set_mapping('k' || i, CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END))
	  FROM generate_series(1, 100) AS i;
	SELECT sum(collegedb.run('k' || i, 'INSERT INTO items VALUES (\$1, 100)', 'k' || i))
	  FROM generate_series(1, 100) AS i;
});

# Kills every process of a front with SIGKILL, the postmaster first, and waits
# until none is left (the children notice the postmaster's death).
sub kill_front
{
	my ($node) = @_;
	my @pids = split /\n/,
	  $node->safe_psql('postgres', 'SELECT pid FROM pg_stat_activity WHERE pid <> pg_backend_pid()');
	$node->kill9;
	kill 'KILL', @pids;
	my $deadline = time + 30;
	while (grep { kill 0, $_ } @pids)
	{
		die 'processes of the killed front survive' if time > $deadline;
		Time::HiRes::usleep(50_000);
	}
	return;
}

# Rows per shard of items, and the routed read of every key: "a/b total=reads".
sub census
{
	my ($node) = @_;
	my $na = $pga->safe_psql('a', 'SELECT count(*) FROM items');
	my $nb = $pgb->safe_psql('b', 'SELECT count(*) FROM items');
	my $reads = $node->safe_psql('postgres', q{
		SELECT count(*) FROM generate_series(1, 100) AS i,
		  collegedb.all_json('k' || i, 'SELECT id FROM items WHERE id = $1', 'k' || i)});
	return ($na + $nb) . " rows, $reads reads";
}

# Rows of key $k on shard a and b: "a/b".
sub rows_of
{
	my ($k) = @_;
	return $pga->safe_psql('a', "SELECT count(*) FROM items WHERE id = '$k'") . '/'
	  . $pgb->safe_psql('b', "SELECT count(*) FROM items WHERE id = '$k'");
}

sub prepared_left
{
	return $pga->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts') . '/'
	  . $pgb->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts');
}

# --- 1. a move paused mid-way, the primary killed, the standby promoted ----------

# Per case: the pause setting and its value, its log line, where k2's row is while
# the move waits (a/b), the key moved and its target.  Each case runs on the front
# promoted by the case before, with a new standby made before the pause is set (a
# base backup copies postgresql.auto.conf).
my $front = $primary;
my @move_cases = (
	[ 'test_pause_after_step', 'copied', 'paused after step copied', '1/0', 'k2', 'a', 'b' ],
	[ 'test_pause_in_step', 'source', 'paused inside step source', '1/1', 'k4', 'a', 'b' ],
	[ 'test_pause_after_step', 'source_done', 'paused after step source_done', '1/0', 'k3', 'b', 'a' ]);
for my $case (@move_cases)
{
	my ($guc, $value, $logged, $during, $k, $from, $to) = @$case;
	my $label = "$value ($k $from -> $to)";
	my $next = standby_of($front, "standby_$value");
	is(census($next), '100 rows, 100 reads', "$label: the standby reads every key once");

	$front->safe_psql('postgres', "ALTER SYSTEM SET collegedb.$guc = '$value'; SELECT pg_reload_conf()");
	ok(poll_until($front, "SHOW collegedb.$guc", $value, 30), "$label: the front pauses moves");
	my $off = -s $front->logfile;
	my $caller = psql_start($front, "SELECT collegedb.reassign_shard('$k', '$to') - 'move_id'");
	my ($id) = wait_for_log_match($front, qr/collegedb: move (\d+) \Q$logged\E\b/, $off, 60);
	ok(defined $id, "$label: the move waits") or BAIL_OUT('the mover did not pause');
	is(rows_of($k), $during, "$label: where the key's row is while the move waits");
	$front->wait_for_catchup($next);

	kill_front($front);
	psql_finish($caller, 30);
	$next->promote;
	ok(poll_until($next, "SELECT step FROM collegedb.moves WHERE id = $id", 'done', 60),
		"$label: the promoted standby completes the move");
	ok( poll_until($next, q{SELECT count(*) FROM collegedb.jobs WHERE state IN ('queued', 'running')},
			'0', 60),
		"$label: the move's job, interrupted with the primary, is not left queued or running");
	is(census($next), '100 rows, 100 reads', "$label: after failover every key reads exactly once");
	is(rows_of($k), $to eq 'b' ? '0/1' : '1/0', "$label: the key's row is on its target only");
	is($next->safe_psql('postgres', qq{SELECT shard FROM collegedb.route('$k')}),
		$to, "$label: the mapping names the target");
	$front = $next;
}

# --- 2. a multi-shard commit killed between prepare and commit -------------------

my $sum_sql = q{SELECT sum((value->>'v')::int) FROM collegedb.fanout('SELECT sum(v) AS v FROM items')};
for my $case (['decided', 'committed'], ['prepared', 'rolled back'])
{
	my ($step, $outcome) = @$case;
	my $next = standby_of($front, "standby_$step");
	# synchronous replication: what the front flushed is on the standby too
	$front->safe_psql('postgres',
		"ALTER SYSTEM SET synchronous_standby_names = '*'; SELECT pg_reload_conf()");
	ok(poll_until($front, q{SELECT sync_state FROM pg_stat_replication}, 'sync', 30),
		"$step: the standby is synchronous");
	my $before = $front->safe_psql('postgres', $sum_sql);
	my $off = -s $front->logfile;
	# k1 is on b, k6 on a: 10 moves from one to the other
	my $h = psql_start($front, qq{
		SET collegedb.test_pause_commit = '$step';
		BEGIN;
		SELECT collegedb.run('k1', 'UPDATE items SET v = v - 10 WHERE id = \$1', 'k1');
		SELECT collegedb.run('k6', 'UPDATE items SET v = v + 10 WHERE id = \$1', 'k6');
		COMMIT;});
	ok(wait_for_log_match($front, qr/commit paused at \Q$step\E/, $off, 60),
		"the commit waits at $step");
	is(prepared_left(), '1/1', "$step: both shards hold a prepared transaction");
	kill_front($front);
	psql_finish($h, 30);
	$next->promote;
	ok(poll_until($next, 'SELECT pg_is_in_recovery()', 'f', 30), "$step: the standby is promoted");
	ok(poll_until($pga, 'SELECT count(*) FROM pg_prepared_xacts', '0', 60)
		  && poll_until($pgb, 'SELECT count(*) FROM pg_prepared_xacts', '0', 60),
		"$step: the promoted front resolves the prepared transactions");
	is($next->safe_psql('postgres', $sum_sql), $before, "$step: the sums agree");
	my $k1 = $next->safe_psql('postgres',
		q{SELECT value->>'v' FROM collegedb.all_json('k1', 'SELECT v FROM items WHERE id = $1', 'k1') AS value});
	is($k1 eq '90' ? 'committed' : $k1 eq '100' ? 'rolled back' : "k1 = $k1", $outcome,
		"$step: the transaction is $outcome");
	$front = $next;
	# the next case starts from these values
	$front->safe_psql('postgres',
		q{SELECT collegedb.run('k1', 'UPDATE items SET v = 100 WHERE id = $1', 'k1'),
		         collegedb.run('k6', 'UPDATE items SET v = 100 WHERE id = $1', 'k6')});
}
is(census($front), '100 rows, 100 reads', 'at the end every key reads exactly once');

note sprintf('155_failover took %.1f s', time - $t_start);
done_testing();
