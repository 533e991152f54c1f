# 082_moves_prepared: a move never overtakes a write it must see, while the writer's
# front transaction is committing (prepared on its shards, or half committed).
#
# A transfer (+39 on key b, -39 on key a, a on PostgreSQL shard p1) stops at a commit
# step of the test-only hook collegedb.test_pause_commit, and reassign_shard moves key
# b off its shard meanwhile:
#   - with two-phase commit at 'prepared' (every shard that can prepare is prepared;
#     the SQLite shard, the last participant, still holds its write lock) and at
#     'between_commits' (one prepared shard committed, the other still prepared);
#   - with commit_protocol 'sequential' at 'between_commits' (one writer committed,
#     the other not yet);
# for key b on a MariaDB, a PostgreSQL and an SQLite shard.  MariaDB releases a
# prepared XA transaction's shared and gap locks, so the guard's shared lock on the
# key's tombstone no longer holds the mover off; the mover must read the rows with a
# lock the prepared writer still conflicts with, or it copies the old balance and its
# delete then lands on the writer's new row.  Afterwards the two balances add up, key
# b holds the transfer on its new shard, each key's row exists exactly once in the
# fleet, and no prepared transaction is left.  Last, a slot's move and a writer of a
# new key of the slot whose COMMIT PREPARED failed (the shards restarted under it):
# the move resolves the source's prepared transactions before it scans, so the key
# moves with its slot.
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
		max_connections               => 40,
		'collegedb.recovery_interval' => '300ms',
	});
my $shard = pg_shard_node('shards');
add_pg_shards($front, $shard, p1 => 'p1', p2 => 'p2');
my $mdb = start_mariadb();
my $mydb = mysql_database($mdb);
my $sqlite = sqlite_dir() . '/l1.db';

$front->safe_psql(
	'postgres', mysql_shard_server($mdb, 'm1', dbname => $mydb)
	  . sqlite_shard_server('l1', $sqlite, options => { busy_timeout => 30000 }) . qq{
	SELECT collegedb.add_shard(s) FROM unnest(ARRAY['m1', 'l1']) AS s;
	SELECT count(*) FROM collegedb.run_on_all(
	  'CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance INTEGER NOT NULL)');
});
$front->safe_psql(
	'postgres', q{
	SELECT collegedb.register_table('accounts', 'id');
	CREATE FOREIGN TABLE accounts (id int, balance int) SERVER collegedb OPTIONS (key_column 'id');
});

# where each source's key goes
my %target = (m1 => 'p2', p2 => 'm1', l1 => 'p2');

my $case = 0;
for my $c (
	[ 'm1', '2pc', 'prepared' ],        [ 'm1', '2pc', 'between_commits' ],
	[ 'm1', 'sequential', 'between_commits' ],
	[ 'p2', '2pc', 'prepared' ],        [ 'p2', '2pc', 'between_commits' ],
	[ 'p2', 'sequential', 'between_commits' ],
	[ 'l1', '2pc', 'prepared' ],        [ 'l1', 'sequential', 'between_commits' ])
{
	my ($source, $protocol, $step) = @$c;
	my $target = $target{$source};
	$case++;
	my ($ka, $kb) = (100 * $case + 1, 100 * $case + 2);
	my $name = "$source -> $target, $protocol at $step";

	$front->safe_psql(
		'postgres', qq{
		SELECT collegedb.set_mapping('$ka', 'p1');
		SELECT collegedb.set_mapping('$kb', '$source');
		INSERT INTO accounts VALUES ($ka, 1000);
		INSERT INTO accounts VALUES ($kb, 1000);
	});

	my $offset = -s $front->logfile;
	my $writer = psql_start(
		$front, qq{
		SET collegedb.commit_protocol = '$protocol';
		SET collegedb.test_pause_commit = '$step';
		BEGIN;
		UPDATE accounts SET balance = balance + 39 WHERE id = $kb;
		UPDATE accounts SET balance = balance - 39 WHERE id = $ka;
		COMMIT;});
	ok(wait_for_log_match($front, qr/commit paused at $step/, $offset),
		"$name: the writer's commit paused");

	my $mover = psql_start($front, "SELECT collegedb.reassign_shard('$kb', '$target')->>'to'");
	# the move gets as far as it can: it is journaled and works on its source step
	ok( poll_until(
			$front,
			"SELECT count(*) > 0 FROM collegedb.moves WHERE step IN ('copied', 'source_done', 'mapped', 'done')"
			  . " AND key = collegedb.mapping_key('$kb')",
			't'),
		"$name: the move started");
	usleep(1_500_000);

	# let the writer go on
	my $resume = $front->data_dir . '/collegedb_resume_commit';
	open(my $fh, '>', $resume) or die "$resume: $!";
	close($fh);
	my $w = psql_finish($writer);
	is($w->{rc}, 0, "$name: the transfer committed") or diag $w->{stderr};
	my $m = psql_finish($mover);
	is($m->{stdout}, $target, "$name: the key moved") or diag $m->{stderr};

	is( $front->safe_psql('postgres',
			"SELECT string_agg(id || '=' || balance, ' ' ORDER BY id) FROM accounts WHERE id IN ($ka, $kb)"),
		"$ka=961 $kb=1039",
		"$name: the transfer is whole, on the key's new shard too");
	is( $front->safe_psql(
			'postgres', qq{
		SELECT string_agg(shard || ':' || (value->>'id') || '=' || (value->>'balance'), ' ' ORDER BY shard)
		  FROM collegedb.fanout('SELECT id, balance FROM accounts WHERE id IN ($ka, $kb)')
		 WHERE error IS NULL}),
		join(' ', sort("$target:$kb=1039", "p1:$ka=961")),
		"$name: each key's row is on one shard, once");
	is($front->safe_psql('postgres', "SELECT collegedb.shard_for_key('$kb')"),
		$target, "$name: the mapping follows the move");
}

ok( poll_until(
		$front,
		q{SELECT count(*) FROM collegedb.fanout('SELECT gid FROM pg_prepared_xacts')
		   WHERE error IS NULL AND value IS NOT NULL},
		'0'),
	'no prepared transaction is left on the PostgreSQL shards');
is(mysql_query($mdb, 'XA RECOVER', database => $mydb), '',
	'no prepared XA transaction is left on MariaDB');

# --- a slot's move and a writer whose COMMIT PREPARED failed ------------------------
#
# The slot's lock is the front's: a writer of a new key of the slot holds it until its
# front transaction ends, which also happens when COMMIT PREPARED on the source fails
# (the shard restarted under it) and leaves the row prepared there, to recovery.  The
# slot's move then must resolve the source's prepared transactions before it scans for
# the slot's keys, or the key stays behind, committed later on the shard the slot left.
# (No coordinator pass comes in between: recovery_interval is an hour on this front.)
my $front2 = front_node(
	'front2',
	extension => 1,
	conf      => { 'collegedb.recovery_interval' => '1h', max_worker_processes => 16 });
add_pg_shards($front2, $shard, s1 => 's1', s2 => 's2');
$front2->safe_psql(
	'postgres', q{
	SELECT count(*) FROM collegedb.run_on_all(
	  'CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance INTEGER NOT NULL)');
	SELECT collegedb.register_table('accounts', 'id');
	CREATE FOREIGN TABLE accounts (id int, balance int) SERVER collegedb OPTIONS (key_column 'id');
	SELECT collegedb.configure(strategy => 'slots');
	SELECT collegedb.initialize_shard_map(4) IS NOT NULL;
});
# a new key whose slot is on s1, and a mapped key on s2 for the same transaction
my ($knew, $slot) = split /\|/, $front2->safe_psql(
	'postgres', q{
	SELECT k, collegedb.slot_of(k::text, 4) FROM generate_series(1000, 1100) AS k
	 WHERE collegedb.shard_for_key(k::text, true) = 's1' ORDER BY k LIMIT 1});
$front2->safe_psql('postgres', q{
	SELECT collegedb.set_mapping('7', 's2');
	INSERT INTO accounts VALUES (7, 100);});

my $offset = -s $front2->logfile;
my $writer = psql_start(
	$front2, qq{
	SET collegedb.test_pause_commit = 'decided';
	BEGIN;
	INSERT INTO accounts VALUES ($knew, 5);
	UPDATE accounts SET balance = balance - 5 WHERE id = 7;
	COMMIT;});
ok(wait_for_log_match($front2, qr/commit paused at decided/, $offset),
	'slots: the writer of a new key of the slot decided, its shards still prepared');
my $mover = psql_start($front2, "SELECT collegedb.move_slot($slot, 's2') IS NOT NULL");
usleep(500_000);
# the shards' cluster restarts: the writer's COMMIT PREPARED cannot reach them
$shard->stop('immediate');
$shard->start;
open(my $fh, '>', $front2->data_dir . '/collegedb_resume_commit') or die;
close($fh);
my $w = psql_finish($writer);
is($w->{rc}, 0, 'slots: the writer committed') or diag $w->{stderr};
like($w->{stderr}, qr/could not commit prepared transaction/,
	"slots: the writer's prepared parts were left to recovery");
my $m = psql_finish($mover);
is($m->{stdout}, 't', "slots: the slot's move finished") or diag $m->{stderr};
is($front2->safe_psql('postgres', "SELECT balance FROM accounts WHERE id = $knew"),
	'5', "slots: the writer's new key is read on the slot's new shard");
is( $front2->safe_psql(
		'postgres', qq{
		SELECT string_agg(shard || ':' || (value->>'balance'), ' ' ORDER BY shard)
		  FROM collegedb.fanout('SELECT balance FROM accounts WHERE id = $knew') WHERE error IS NULL}),
	's2:5', 'slots: its row is on s2 only');
is($front2->safe_psql('postgres', 'SELECT balance FROM accounts WHERE id = 7'),
	'95', "slots: the writer's other shard committed too");

done_testing();
