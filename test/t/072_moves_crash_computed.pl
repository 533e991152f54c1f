# 072_moves_crash_computed: moves under computed placement, with writes during the
# move and crashes inside its source step.
#
# Keys are placed by epoch 1 (shards a and c), then shard b becomes eligible (epoch
# 2): a key whose newest owner is b has the candidates b (nothing there yet) and its
# old owner.
#   - The reproduced loss: while reassign_shard of such a key waits at 'copied', a
#     third session's UPDATE through collegedb.run returns 1; the move then finishes
#     (its worker terminated, the coordinator taking it over) and the row holds that
#     update, once.
#   - The crash window: the mover is killed (SIGKILL) inside the source step after the
#     target committed its copy, and no coordinator runs (collegedb.database names
#     another database) so the move stays interrupted: the key's rows are on both
#     shards, yet route() names only the source, and a write lands there and reads
#     back; once the coordinator runs again the move finishes with that write, once.
#   - A rebalance onto b killed inside a source step (key locked, nothing copied):
#     the requeued job finishes, every key ends on its newest owner exactly once with
#     its value.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use CollegeDB::TestHarness;

my $t_start = time;
my $front = front_node(
	'front',
	extension => 1,
	conf      => {
		restart_after_crash  => 'on',
		max_worker_processes => 16,
	});
my $shard = pg_shard_node('shards', conf => { max_connections => 40 });
$shard->safe_psql('postgres', "CREATE DATABASE $_") for qw(a b);
my $sqlite = sqlite_dir() . '/c.db';

$front->safe_psql('postgres', qq{
	CREATE SERVER a FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ pg_server_options($shard, dbname => 'a') ]});
	CREATE SERVER b FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ pg_server_options($shard, dbname => 'b') ]});
	CREATE USER MAPPING FOR PUBLIC SERVER a OPTIONS (user 'postgres');
	CREATE USER MAPPING FOR PUBLIC SERVER b OPTIONS (user 'postgres');
	CREATE SERVER c FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ sqlite_server_options($sqlite) ]});
	SELECT collegedb.add_shard(s) FROM unnest(ARRAY['a', 'b', 'c']) AS s;
	SELECT count(*) FROM collegedb.run_on_all('CREATE TABLE counters (id TEXT PRIMARY KEY, v TEXT)');
	SELECT count(*) FROM collegedb.run_on_all('CREATE TABLE events (user_id TEXT, seq INTEGER)');
	SELECT collegedb.register_table('counters', 'id');
	SELECT collegedb.register_table('events', 'user_id');
	SELECT collegedb.set_shard_state('b', writable => false);
	SELECT collegedb.configure(placement => 'computed');
});

sub sql { return $front->safe_psql('postgres', $_[0]) }

my @keys = map { "k$_" } 1 .. 30;
my $key_array = 'ARRAY[' . join(', ', map { "'$_'" } @keys) . ']';
sql(qq{
	SELECT sum(collegedb.run(k, 'INSERT INTO counters VALUES (\$1, \$2)', k, 'v1')) FROM unnest($key_array) AS k;
	SELECT sum(collegedb.run(k, 'INSERT INTO events VALUES (\$1, \$2), (\$1, \$3)', k, 1, 2)) FROM unnest($key_array) AS k;
	SELECT collegedb.set_shard_state('b', writable => true);
});
is(sql('SELECT max(epoch) FROM collegedb.epochs'), '2', 'b joins: epoch 2 is published');
my @to_b = split /\n/, sql(qq{SELECT k FROM unnest($key_array) AS k
	WHERE collegedb.rendezvous_owner(k, ARRAY['a', 'b', 'c']) = 'b' ORDER BY k});
cmp_ok(scalar(@to_b), '>=', 4, 'several keys have b as their newest owner (' . scalar(@to_b) . ')');

sub set_guc
{
	my ($name, $value) = @_;
	sql(defined $value
		? "ALTER SYSTEM SET collegedb.$name = '$value'; SELECT pg_reload_conf()"
		: "ALTER SYSTEM RESET collegedb.$name; SELECT pg_reload_conf()");
	ok(poll_until($front, "SHOW collegedb.$name", $value // '', 30),
		"collegedb.$name is '" . ($value // '') . "'");
	return;
}

# where a key's rows are: "shard:counters/events ..." for every shard with some
sub where_is
{
	my ($k) = @_;
	my $c = sql(qq{SELECT string_agg(shard, ' ' ORDER BY shard) FROM collegedb.fanout(
		'SELECT 1 AS x FROM counters WHERE id = \$1', '$k') WHERE error IS NULL AND value IS NOT NULL});
	my $e = sql(qq{SELECT string_agg(shard || '=' || (value->>'n'), ' ' ORDER BY shard) FROM collegedb.fanout(
		'SELECT count(*) AS n FROM events WHERE user_id = \$1', '$k') WHERE error IS NULL AND (value->>'n')::int > 0});
	return "$c / $e";
}

sub value_of
{
	my ($k) = @_;
	return sql(qq{SELECT collegedb.first('$k', 'SELECT v FROM counters WHERE id = \$1', '$k')->>'v'});
}

sub old_owner
{
	my ($k) = @_;
	return sql(qq{SELECT collegedb.rendezvous_owner('$k', ARRAY['a', 'c'])});
}

# --- the reproduced loss: a write while the move waits at 'copied' -------------

{
	my $k = $to_b[0];
	my $from = old_owner($k);
	my $label = "write during copied ($k $from -> b)";
	is(sql(qq{SELECT collegedb.run('$k', 'UPDATE counters SET v = \$2 WHERE id = \$1', '$k', 'v2')}),
		'1', "$label: v2 written before the move");
	set_guc('test_pause_after_step', 'copied');
	my $off = -s $front->logfile;
	my $caller = psql_start($front, qq{SELECT collegedb.reassign_shard('$k', 'b')});
	my ($id) = wait_for_log_match($front, qr/collegedb: move (\d+) paused after step copied/, $off, 60);
	ok(defined $id, "$label: the move waits at copied");
	is(sql(qq{SELECT string_agg(shard, ',') FROM collegedb.route('$k')}), $from,
		"$label: route() names only the move's source");
	is(sql(qq{SELECT collegedb.run('$k', 'UPDATE counters SET v = \$2 WHERE id = \$1', '$k', 'v3')}),
		'1', "$label: a third session's update returns 1");
	is(value_of($k), 'v3', "$label: and reads back");
	set_guc('test_pause_after_step', undef);
	sql(q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'collegedb job'});
	psql_finish($caller, 60);
	ok(poll_until($front, "SELECT step FROM collegedb.moves WHERE id = $id", 'done', 60),
		"$label: the coordinator finishes the move");
	is(where_is($k), 'b / b=2', "$label: the key's rows are on b, once");
	is(value_of($k), 'v3', "$label: the acknowledged update is there");
}

# --- the crash window, with no coordinator to close it --------------------------

{
	my $k = $to_b[1];
	my $from = old_owner($k);
	my $label = "crash between the commits ($k $from -> b)";
	set_guc('test_pause_in_step', 'source');
	my $off = -s $front->logfile;
	my $caller = psql_start($front, qq{SELECT collegedb.reassign_shard('$k', 'b')});
	my ($id) = wait_for_log_match($front, qr/collegedb: move (\d+) paused inside step source\b/, $off, 60);
	ok(defined $id, "$label: the mover pauses after the target's commit");
	set_guc('database', 'nowhere');
	ok(poll_until($front, q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'collegedb coordinator'},
			'0', 30),
		"$label: with collegedb.database = 'nowhere' no coordinator runs");
	my $pid = sql("SELECT lease_pid FROM collegedb.moves WHERE id = $id");
	kill 'KILL', $pid;
	psql_finish($caller, 60);
	ok(wait_for_log_match($front, qr/all server processes terminated; reinitializing/, $off, 30),
		"$label: the postmaster restarts every process");
	$front->poll_query_until('postgres', 'SELECT true')
	  or die 'the front did not accept connections after the crash';
	ok(poll_until($front, 'SELECT 1', '1', 30), "$label: the front is back");
	is(sql("SELECT step FROM collegedb.moves WHERE id = $id"), 'copied', "$label: the move is interrupted at copied");
	is(where_is($k), join(' ', sort 'b', $from) . ' / ' . join(' ', map { "$_=2" } sort 'b', $from),
		"$label: the target kept its copy, the source still has the rows");
	is(sql(qq{SELECT string_agg(shard || '/' || source, ',') FROM collegedb.route('$k')}), "$from/computed",
		"$label: route() names only the source");
	is(sql(qq{SELECT collegedb.run('$k', 'UPDATE counters SET v = \$2 WHERE id = \$1', '$k', 'window')}),
		'1', "$label: a write returns 1");
	is(value_of($k), 'window', "$label: and reads back");
	is($shard->safe_psql('b', qq{SELECT v FROM counters WHERE id = '$k'}), 'v1',
		"$label: the write went to the source, not to the target's copy");
	set_guc('test_pause_in_step', undef);
	set_guc('database', undef);
	ok(poll_until($front, "SELECT step FROM collegedb.moves WHERE id = $id", 'done', 60),
		"$label: a coordinator runs again and finishes the move");
	is(sql("SELECT generation FROM collegedb.moves WHERE id = $id"), '2', "$label: taken over once");
	is(where_is($k), 'b / b=2', "$label: the key's rows are on b, once");
	is(value_of($k), 'window', "$label: with the write made in the window");
}

# --- a rebalance killed inside a source step ----------------------------------

{
	my $label = 'rebalance killed inside the source step';
	set_guc('test_pause_in_step', 'source_lock');
	my $off = -s $front->logfile;
	my $caller = psql_start($front, q{SELECT moved FROM collegedb.rebalance('counters', concurrency => 1)});
	my ($id) = wait_for_log_match($front, qr/collegedb: move (\d+) paused inside step source_lock/, $off, 60);
	ok(defined $id, "$label: a mover pauses with the key locked");
	my $pid = sql("SELECT lease_pid FROM collegedb.moves WHERE id = $id");
	set_guc('test_pause_in_step', undef);
	kill 'KILL', $pid;
	psql_finish($caller, 60);
	ok(wait_for_log_match($front, qr/all server processes terminated; reinitializing/, $off, 30),
		"$label: the postmaster restarts every process");
	$front->poll_query_until('postgres', 'SELECT true')
	  or die 'the front did not accept connections after the crash';
	ok(poll_until($front, q{SELECT count(*) FROM collegedb.jobs WHERE state IN ('queued', 'running')}, '0', 90),
		"$label: the requeued rebalance ends");
	ok(poll_until($front, q{SELECT count(*) FROM collegedb.moves WHERE step <> 'done'}, '0', 60),
		"$label: every move is done");
	my $placed = sql(qq{SELECT count(*) FROM unnest($key_array) AS k
		WHERE (SELECT string_agg(shard, ' ') FROM collegedb.fanout('SELECT 1 AS x FROM counters WHERE id = \$1', k)
		        WHERE error IS NULL AND value IS NOT NULL) = collegedb.rendezvous_owner(k, ARRAY['a', 'b', 'c'])});
	is($placed, scalar(@keys), "$label: every key's row is on its newest owner, once");
	is(sql(q{SELECT sum((value->>'n')::int) FROM collegedb.fanout('SELECT count(*) AS n FROM events') WHERE error IS NULL}),
		2 * @keys, "$label: no events row lost or doubled");
	is(sql(qq{SELECT count(*) FROM unnest($key_array) AS k
		WHERE collegedb.first(k, 'SELECT v FROM counters WHERE id = \$1', k)->>'v' = 'v1'}),
		scalar(@keys) - 2, "$label: every other key keeps its value");
}

note sprintf '072 took %.1f s', time - $t_start;
done_testing();
