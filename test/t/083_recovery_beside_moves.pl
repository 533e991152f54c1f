# 083_recovery_beside_moves: prepared transactions are resolved while the coordinator
# runs a move that waits for them.
#
# A transfer over two PostgreSQL shards stops with both shards prepared (the test-only
# hook collegedb.test_pause_commit at 'prepared'); its prepared part on p1 keeps the
# guard's lock of key 1.  reassign_shard moves key 1 meanwhile, and waits for that
# lock.  Then the writer's front backend is killed: the front restarts, the
# coordinator takes the orphaned move over and waits for the lock in its turn.  Only
# a recovery pass can release it (the writer died before its decision, so its
# prepared parts roll back), and it must come although the coordinator is busy: the
# passes run in a resolver worker while the coordinator runs moves.  Afterwards nothing is prepared, the
# move ended with key 1 on p2, and the transfer left no trace.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use CollegeDB::TestHarness;

my $front = front_node(
	'front',
	extension => 1,
	conf      => {
		restart_after_crash           => 'on',
		max_worker_processes          => 16,
		'collegedb.recovery_interval' => '300ms',
	});
my $shard = pg_shard_node('shards');
$shard->safe_psql('postgres', 'CREATE DATABASE p1');
$shard->safe_psql('postgres', 'CREATE DATABASE p2');
$front->safe_psql(
	'postgres', pg_shard_servers($shard, p1 => 'p1', p2 => 'p2') . q{
	SELECT collegedb.add_shard(s) FROM unnest(ARRAY['p1', 'p2']) AS s;
	SELECT count(*) FROM collegedb.run_on_all(
	  'CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance INTEGER NOT NULL)');
	SELECT collegedb.register_table('accounts', 'id');
	CREATE FOREIGN TABLE accounts (id int, balance int) SERVER collegedb OPTIONS (key_column 'id');
	SELECT collegedb.set_mapping('1', 'p1');
	SELECT collegedb.set_mapping('2', 'p2');
	INSERT INTO accounts VALUES (1, 1000), (2, 1000);
});

my $offset = -s $front->logfile;
my $writer = psql_start(
	$front, q{
	SET collegedb.test_pause_commit = 'prepared';
	BEGIN;
	UPDATE accounts SET balance = balance + 39 WHERE id = 1;
	UPDATE accounts SET balance = balance - 39 WHERE id = 2;
	COMMIT;});
ok(wait_for_log_match($front, qr/commit paused at prepared/, $offset),
	"the writer's shards are prepared");
my ($writer_pid) = slurp_file($front->logfile, $offset) =~ /commit paused at prepared \(pid (\d+)\)/;

my $mover = psql_start($front, q{SELECT collegedb.reassign_shard('1', 'p2')->>'to'});
ok( poll_until(
		$shard,
		q{SELECT count(*) > 0 FROM pg_stat_activity
		   WHERE datname = 'p1' AND wait_event_type = 'Lock' AND query LIKE '%pg_advisory_xact_lock%'},
		't'),
	"the move waits for the prepared writer's key lock");

# the writer dies before its decision: every session of the front restarts
kill 'KILL', $writer_pid;
psql_finish($writer);
psql_finish($mover);
$front->poll_query_until('postgres', 'SELECT true') or die 'the front did not come back';

ok( poll_until(
		$front, q{SELECT count(*) FROM collegedb.moves WHERE step NOT IN ('done', 'failed')},
		'0', 120),
	'the move the coordinator took over ended');
ok( poll_until($front, q{SELECT count(*) FROM collegedb.prepared_transactions}, '0', 60),
	"the writer's prepared parts were resolved");
is($shard->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'),
	'0', 'nothing is prepared on the shards');
is($front->safe_psql('postgres', q{SELECT collegedb.shard_for_key('1')}), 'p2', 'key 1 moved to p2');
is( $front->safe_psql('postgres', q{SELECT string_agg(id || '=' || balance, ' ' ORDER BY id) FROM accounts}),
	'1=1000 2=1000', 'the transfer that never decided left no trace');
is( $front->safe_psql(
		'postgres', q{
		SELECT string_agg(shard || ':' || (value->>'id'), ' ' ORDER BY shard, value->>'id')
		  FROM collegedb.fanout('SELECT id FROM accounts') WHERE error IS NULL}),
	'p2:1 p2:2', "each key's row is on one shard, once");

# the resolver ran while the coordinator was busy, and stops with that work
like(slurp_file($front->logfile, $offset), qr/collegedb: rolled back prepared transaction/,
	"a recovery pass rolled the writer's parts back");
ok( poll_until(
		$front, q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'collegedb resolver'},
		'0', 30),
	'the resolver stopped once the coordinator was idle');

done_testing();
