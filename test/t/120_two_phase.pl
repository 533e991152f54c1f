# 120_two_phase: a front transaction that wrote on several shards is one
# transaction, through every fault at commit.
#
# pgbench's TPC-B transaction (update an account, a teller and a branch, insert a
# history row) runs through sharded foreign tables: accounts on PostgreSQL shard a,
# tellers on PostgreSQL shard b, branches on a MariaDB shard m, history on an SQLite
# shard l (the last participant).  After each fault the four sums agree (accounts,
# tellers, branches, history deltas), the outcome is the one the step implies
# (before the decision: rolled back; after it: committed), and once the coordinator
# recovered (collegedb.recovery_interval is 300 ms here) no prepared transaction is
# left on any shard and collegedb.prepared_transactions is empty.  The faults:
#   - concurrent writers (pgbench, 2 clients) with nothing wrong;
#   - a deferred constraint on shard b that fails at PREPARE;
#   - kill -9 of the committing backend (the front restarts, as after a crash) at
#     each commit step of the test-only hook collegedb.test_pause_commit: after
#     every shard prepared, after the last participant committed, after the
#     decision committed, between two shards' COMMIT PREPARED; once with pgbench
#     writers running beside it;
#   - shard a restarted with -m immediate while the commit waits at each step (the
#     commit goes on once the shard is down: a file collegedb_resume_commit in the
#     front's data directory releases the hook);
#   - the MariaDB server killed with SIGKILL while the commit waits before its
#     XA COMMIT, and restarted.
# MariaDB: the run's shared server must not be killed, so this test starts its own
# (CollegeDB::PrivateMariaDB, as the test's user, from a temp datadir, on a free
# loopback port).  Also: a PostgreSQL shard with max_prepared_transactions = 0 makes
# add_shard warn and the first multi-shard commit fail clearly.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use CollegeDB::TestHarness;
use CollegeDB::PrivateMariaDB;

my $front = front_node(
	'front',
	extension => 1,
	conf      => {
		restart_after_crash           => 'on',
		max_connections               => 40,
		'collegedb.recovery_interval' => '300ms',
	});
my $pga = pg_shard_node('pga');
my $pgb = pg_shard_node('pgb');
$pga->safe_psql('postgres', 'CREATE DATABASE a');
$pgb->safe_psql('postgres', 'CREATE DATABASE b');
my $mdb = CollegeDB::PrivateMariaDB->start('110');
$mdb->query('CREATE DATABASE collegedb_m', database => 'mysql');
my $sqlite = sqlite_dir() . '/l.db';

$front->safe_psql(
	'postgres', qq{
	@{[ pg_shard_server($pga, 'a', dbname => 'a') ]}
	@{[ pg_shard_server($pgb, 'b', dbname => 'b') ]}
	@{[ mysql_shard_server($mdb, 'm', dbname => 'collegedb_m', options => { connect_timeout => 2 }) ]}
	@{[ sqlite_shard_server('l', $sqlite, options => { busy_timeout => 10000 }) ]}
	SELECT collegedb.add_shard(s) FROM unnest(ARRAY['a', 'b', 'm', 'l']) AS s;
	SELECT count(*) FROM collegedb.run_on_all('CREATE TABLE accounts (aid VARCHAR(20) PRIMARY KEY, abalance BIGINT NOT NULL)');
	SELECT count(*) FROM collegedb.run_on_all('CREATE TABLE tellers (tid VARCHAR(20) PRIMARY KEY, tbalance BIGINT NOT NULL)');
	SELECT count(*) FROM collegedb.run_on_all('CREATE TABLE branches (bid VARCHAR(20) PRIMARY KEY, bbalance BIGINT NOT NULL)');
	SELECT count(*) FROM collegedb.run_on_all('CREATE TABLE history (hkey VARCHAR(20), tid VARCHAR(20), bid VARCHAR(20), aid VARCHAR(20), delta BIGINT NOT NULL)');
	CREATE FOREIGN TABLE accounts (aid text, abalance bigint) SERVER collegedb OPTIONS (key_column 'aid');
	CREATE FOREIGN TABLE tellers (tid text, tbalance bigint) SERVER collegedb OPTIONS (key_column 'tid');
	CREATE FOREIGN TABLE branches (bid text, bbalance bigint) SERVER collegedb OPTIONS (key_column 'bid');
	CREATE FOREIGN TABLE history (hkey text, tid text, bid text, aid text, delta bigint)
	  SERVER collegedb OPTIONS (key_column 'hkey');
	SELECT collegedb.set_mapping('acc-' || i, 'a') FROM generate_series(1, 20) AS i;
	SELECT collegedb.set_mapping('tel-' || i, 'b') FROM generate_series(1, 4) AS i;
	SELECT collegedb.set_mapping('br-' || i, 'm') FROM generate_series(1, 2) AS i;
	SELECT collegedb.set_mapping('hist', 'l');
	INSERT INTO accounts SELECT 'acc-' || i, 0 FROM generate_series(1, 20) AS i;
	INSERT INTO tellers SELECT 'tel-' || i, 0 FROM generate_series(1, 4) AS i;
	INSERT INTO branches SELECT 'br-' || i, 0 FROM generate_series(1, 2) AS i;
});

# the deferred constraint of the fault below: a teller may not go under -10^9
$pgb->safe_psql(
	'b', q{
	CREATE FUNCTION no_overdraft() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
	  IF NEW.tbalance < -1000000000 THEN
	    RAISE EXCEPTION 'teller % overdrawn', NEW.tid USING ERRCODE = 'check_violation';
	  END IF;
	  RETURN NULL;
	END $$;
	CREATE CONSTRAINT TRIGGER no_overdraft AFTER UPDATE ON tellers
	  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION no_overdraft();
});

# one TPC-B transaction, as pgbench runs it (tpcb-like), on given keys
sub tpcb
{
	my ($n, $t, $b, $delta) = @_;
	return qq{BEGIN;
UPDATE accounts SET abalance = abalance + $delta WHERE aid = 'acc-$n';
SELECT abalance FROM accounts WHERE aid = 'acc-$n';
UPDATE tellers SET tbalance = tbalance + $delta WHERE tid = 'tel-$t';
UPDATE branches SET bbalance = bbalance + $delta WHERE bid = 'br-$b';
INSERT INTO history (hkey, tid, bid, aid, delta) VALUES ('hist', 'tel-$t', 'br-$b', 'acc-$n', $delta);
COMMIT;};
}

my $script = PostgreSQL::Test::Utils::tempdir() . '/tpcb.sql';
open(my $fh, '>', $script) or die;
print $fh q{\set n random(1, 20)
\set t random(1, 4)
\set b random(1, 2)
\set delta random(-5000, 5000)
BEGIN;
UPDATE accounts SET abalance = abalance + :delta WHERE aid = 'acc-' || :n;
SELECT abalance FROM accounts WHERE aid = 'acc-' || :n;
UPDATE tellers SET tbalance = tbalance + :delta WHERE tid = 'tel-' || :t;
UPDATE branches SET bbalance = bbalance + :delta WHERE bid = 'br-' || :b;
INSERT INTO history (hkey, tid, bid, aid, delta) VALUES ('hist', 'tel-' || :t, 'br-' || :b, 'acc-' || :n, :delta);
END;
};
close($fh);

sub pgbench_start
{
	my ($transactions) = @_;
	my ($out, $err) = ('', '');
	return IPC::Run::start(
		[
			'pgbench', '-n', '-c', '2', '-t', $transactions, '-f', $script,
			'-h', $front->host, '-p', $front->port, 'postgres'
		],
		'<', '/dev/null', '>', \$out, '2>', \$err);
}

sub sums
{
	return $front->safe_psql(
		'postgres', q{
		SELECT (SELECT coalesce(sum(abalance), 0) FROM accounts) || ' ' ||
		       (SELECT coalesce(sum(tbalance), 0) FROM tellers) || ' ' ||
		       (SELECT coalesce(sum(bbalance), 0) FROM branches) || ' ' ||
		       (SELECT coalesce(sum(delta), 0) FROM history) || ' ' ||
		       (SELECT count(*) FROM history)});
}

# the four sums agree, and nothing stays prepared anywhere once recovered
sub check_consistent
{
	my ($what) = @_;
	ok( poll_until(
			$front, 'SELECT count(*) FROM collegedb.prepared_transactions', '0', 60),
		"$what: the coordinator resolved every prepared transaction");
	is($pga->safe_psql('a', 'SELECT count(*) FROM pg_prepared_xacts'),
		'0', "$what: nothing prepared on shard a");
	is($pgb->safe_psql('b', 'SELECT count(*) FROM pg_prepared_xacts'),
		'0', "$what: nothing prepared on shard b");
	is($mdb->query('XA RECOVER'), '', "$what: nothing prepared on MariaDB");
	my ($acc, $tel, $br, $hist, $n) = split / /, sums();
	ok($acc == $tel && $tel == $br && $br == $hist,
		"$what: the four sums agree ($acc $tel $br $hist, $n history rows)");
	return $n;
}

sub history_count
{
	return $front->safe_psql('postgres', 'SELECT count(*) FROM history');
}

# 1. concurrent writers, nothing wrong
my $bench = pgbench_start(40);
ok($bench->finish, 'pgbench with 2 clients ran its transactions');
my $n = check_consistent('concurrent writers');
is($n, 80, 'every pgbench transaction committed');
is($front->safe_psql('postgres', 'SELECT count(*) > 0 FROM pg_stat_activity WHERE backend_type = \'collegedb coordinator\''),
	't', 'the coordinator runs');

# 2. a deferred constraint fails at commit on shard b: every shard rolls back
my $r = psql_outcome($front, tpcb(1, 1, 1, -2000000000));
like($r->{stderr}, qr/could not prepare the transaction on shard "b".*overdrawn/s,
	'the deferred constraint failed the commit, naming the shard');
is(history_count(), $n, 'nothing of the failed transaction committed');
check_consistent('deferred constraint');

# 3. kill -9 of the committing backend at each commit step
my %committed = (
	prepared        => 0,
	last_committed  => 1,
	decided         => 1,
	between_commits => 1);
my $seven = $front->safe_psql('postgres', q{SELECT count(*) FROM history WHERE delta = 7});
for my $step (qw(prepared last_committed decided between_commits))
{
	my $off    = -s $front->logfile;
	my $with_bench = $step eq 'decided';
	my $h = psql_start($front, "SET collegedb.test_pause_commit = '$step'; " . tpcb(2, 2, 2, 7));
	my ($pid) = wait_for_log_match($front, qr/commit paused at \Q$step\E \(pid (\d+)\)/, $off, 60);
	ok($pid, "the commit paused at $step");
	my $bg = $with_bench ? pgbench_start(1000) : undef;
	sleep 1 if $with_bench;
	kill 'KILL', $pid;
	ok(wait_for_log_match($front, qr/all server processes terminated; reinitializing/, $off, 60),
		"the front restarts after kill -9 at $step");
	psql_finish($h, 30);
	if ($bg) { eval { $bg->finish; 1 } or $bg->kill_kill; }
	$front->poll_query_until('postgres', 'SELECT true');
	my $after = check_consistent("kill -9 at $step" . ($with_bench ? ' with writers' : ''));
	# the paused transaction's own outcome (pgbench's rows have other amounts)
	is( $front->safe_psql('postgres', q{SELECT count(*) FROM history WHERE delta = 7}) -
		  $seven,
		$committed{$step},
		"kill -9 at $step: the transaction " . ($committed{$step} ? 'committed' : 'rolled back'));
	$seven += $committed{$step};
}

# 4. shard a restarted with -m immediate while the commit waits at each step
for my $step (qw(prepared last_committed decided between_commits))
{
	my $before = history_count();
	my $off    = -s $front->logfile;
	my $h = psql_start($front, "SET collegedb.test_pause_commit = '$step'; " . tpcb(3, 3, 1, 11));
	ok(wait_for_log_match($front, qr/commit paused at \Q$step\E/, $off, 60),
		"the commit paused at $step");
	$pga->stop('immediate');
	$pga->start;
	open(my $resume, '>', $front->data_dir . '/collegedb_resume_commit') or die;
	close($resume);
	my $res = psql_finish($h, 60);
	ok(defined $res->{rc}, "shard restart at $step: the commit returned");
	check_consistent("shard restart at $step");
	# the shard was prepared before the restart: its part survives and commits;
	# at 'prepared' nothing went wrong for the commit to notice but the lost
	# connection, so it commits as the other steps do
	is(history_count() - $before, 1, "shard restart at $step: the transaction committed");
}

# 5. the MariaDB server killed with SIGKILL mid-commit, then restarted
for my $step (qw(prepared decided))
{
	my $before = history_count();
	my $off    = -s $front->logfile;
	my $h = psql_start($front, "SET collegedb.test_pause_commit = '$step'; " . tpcb(4, 4, 2, 13));
	ok(wait_for_log_match($front, qr/commit paused at \Q$step\E/, $off, 60),
		"the commit paused at $step");
	$mdb->kill9;
	open(my $resume, '>', $front->data_dir . '/collegedb_resume_commit') or die;
	close($resume);
	my $res = psql_finish($h, 60);
	ok(defined $res->{rc}, "MariaDB killed at $step: the commit returned");
	$mdb->restart;
	check_consistent("MariaDB killed at $step");
	is(history_count() - $before, 1, "MariaDB killed at $step: the transaction committed");
}

# 6. a PostgreSQL shard that cannot prepare: add_shard warns, the commit fails clearly
my $pgc = pg_shard_node('pgc', conf => { max_prepared_transactions => 0 });
$pgc->safe_psql(
	'postgres', q{
	CREATE TABLE accounts (aid text PRIMARY KEY, abalance bigint NOT NULL);
	CREATE TABLE tellers (tid text PRIMARY KEY, tbalance bigint NOT NULL);
	CREATE TABLE branches (bid text PRIMARY KEY, bbalance bigint NOT NULL);
	CREATE TABLE history (hkey text, tid text, bid text, aid text, delta bigint NOT NULL);});
$r = psql_outcome(
	$front, qq{
	CREATE SERVER c FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ pg_server_options($pgc) ]});
	CREATE USER MAPPING FOR PUBLIC SERVER c OPTIONS (user 'postgres');
	SELECT collegedb.add_shard('c');
	SELECT collegedb.set_shard_state('c', writable => false);});
like($r->{stderr}, qr/WARNING:.*shard "c" cannot prepare transactions/, 'add_shard warns');
$r = psql_outcome(
	$front, q{
	BEGIN;
	SELECT collegedb.run_on_shard('c', $$INSERT INTO accounts VALUES ('x', 1)$$);
	SELECT collegedb.run_on_shard('a', $$INSERT INTO accounts VALUES ('x', 1)$$);
	COMMIT;});
like($r->{stderr}, qr/could not prepare the transaction on shard "c": prepared transactions are disabled/,
	'the multi-shard commit fails clearly');
is($pga->safe_psql('a', q{SELECT count(*) FROM accounts WHERE aid = 'x'}), '0',
	'nothing of it committed on the other shard');
check_consistent('a shard that cannot prepare');

done_testing();
