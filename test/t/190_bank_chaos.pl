# 190_bank_chaos: a randomized bank that runs the features together and checks that
# no money is made or lost.
#
# Sixteen accounts (COLLEGEDB_BANK_ACCOUNTS) of 1,000 each live on four shards: two PostgreSQL databases, a
# MariaDB server of this test's own and an SQLite file.  Client sessions transfer
# money between random accounts through the sharded foreign table (and, half of the
# time, the debit through collegedb.run), every transfer one front transaction
# committed with two-phase commit; two mover sessions reassign random accounts to random
# shards (every direction between the three dialects) and now and then rebalances;
# and every few seconds something is killed: the PostgreSQL shards' cluster
# (immediate stop), the MariaDB server (SIGKILL) or a front backend (SIGKILL, so the
# postmaster restarts every session).  Sessions that die start again.
#
# When the time is up and every move and prepared transaction has settled: the
# balances add up read through the front and read on the shards; every
# account is on exactly one shard, read once by key and once by scan; no tombstone
# points at its own shard; the coordinator resolved every prepared transaction; and no
# server process died of a signal other than the SIGKILLs sent here.
#
# COLLEGEDB_BANK_SECONDS sets how long the chaos runs (default 60; run it for 600 or
# more by hand when a protocol changes), COLLEGEDB_BANK_SEED the random seed (printed).
use strict;
use warnings;

use IPC::Run ();
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use CollegeDB::TestHarness;
use CollegeDB::PrivateMariaDB;

my $seconds = $ENV{COLLEGEDB_BANK_SECONDS} // 60;
my $seed    = $ENV{COLLEGEDB_BANK_SEED}    // int(time);
srand($seed);
note "seed $seed, $seconds s of chaos";

my $accounts = $ENV{COLLEGEDB_BANK_ACCOUNTS} // 16;
my @shards   = qw(p1 p2 m1 l1);

my $front = front_node(
	'front',
	extension => 1,
	conf      => {
		restart_after_crash           => 'on',
		max_connections               => 60,
		max_worker_processes          => 20,
		log_statement                 => 'none',
		'collegedb.recovery_interval' => '500ms',
	});
my $pg = pg_shard_node('pshards', conf => { max_connections => 100, log_statement => 'none' });
$pg->safe_psql('postgres', 'CREATE DATABASE p1');
$pg->safe_psql('postgres', 'CREATE DATABASE p2');
my $mdb = CollegeDB::PrivateMariaDB->start('bank');
$mdb->query('CREATE DATABASE collegedb_bank', database => 'mysql');
my $sqlite = sqlite_dir() . '/l1.db';

$front->safe_psql(
	'postgres', pg_shard_servers($pg, p1 => 'p1', p2 => 'p2')
	  . mysql_shard_server($mdb, 'm1', dbname => 'collegedb_bank', options => { connect_timeout => 2 })
	  . sqlite_shard_server('l1', $sqlite, options => { busy_timeout => 5000 }) . qq{
	SELECT collegedb.add_shard(s) FROM unnest(ARRAY['p1', 'p2', 'm1', 'l1']) AS s;
	SELECT count(*) FROM collegedb.run_on_all(
	  'CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance BIGINT NOT NULL)');
	SELECT collegedb.register_table('accounts', 'id');
	CREATE FOREIGN TABLE accounts (id int, balance bigint) SERVER collegedb OPTIONS (key_column 'id');
	SELECT count(collegedb.set_mapping(i::text, (ARRAY['p1', 'p2', 'm1', 'l1'])[1 + i % 4]))
	  FROM generate_series(1, $accounts) AS i;
	INSERT INTO accounts SELECT i, 1000 FROM generate_series(1, $accounts) AS i;
});
is($front->safe_psql('postgres', 'SELECT sum(balance) FROM accounts'),
	1000 * $accounts, 'the bank opens with 1,000 in every account');

# A session: a psql process fed statements on stdin, restarted when it dies.
# A session that died starts again in the same hash, whose in, out and err the new
# process reads and writes.
sub session_start
{
	my ($name, $s) = @_;
	$s //= {};
	%$s = (name => $name, in => '', out => '', err => '', busy => 0);
	$s->{run} = IPC::Run::start(
		[
			'psql', '-X', '-A', '-t', '-q', '-v', 'VERBOSITY=terse',
			'-d', $front->connstr('postgres')
		],
		'<', \$s->{in}, '>', \$s->{out}, '2>', \$s->{err});
	# a cross-shard wait-for cycle is not detected by any one shard: time it out
	$s->{in} .= "SET statement_timeout = '5s';\n";
	return $s;
}

my %stats;

# session_poll reads what a session printed; false when its process is gone.
sub session_poll
{
	my ($s) = @_;
	eval { $s->{run}->pump_nb; 1 } if $s->{run}->pumpable;
	while ($s->{out} =~ s/\A([^\n]*)\n//)
	{
		my $line = $1;
		if ($line =~ /^E (\w+)/)
		{
			$s->{busy} = 0;
			$stats{"$1 done"}++;
			$stats{'transfers committed'}++ if $1 eq 'transfer' && !$s->{failed};
			$s->{failed} = 0;
		}
		$s->{failed} = 1 if $line eq 'X';
		$stats{'moves done'}++ if $line =~ /^M /;
	}
	while ($s->{err} =~ s/\A([^\n]*)\n//)
	{
		my $line = $1;
		$stats{"error: $1"}++ if $line =~ /^(?:ERROR|FATAL):\s+(.{0,50})/;
	}
	return $s->{run}->pumpable;
}

sub session_send
{
	my ($s, $kind, $sql) = @_;
	$s->{busy} = 1;
	$s->{in} .= "$sql\n\\echo E $kind\n";
	return;
}

sub transfer_sql
{
	my ($a, $b) = (1 + int(rand($accounts)), 1 + int(rand($accounts)));
	$b = 1 + $a % $accounts if $a == $b;
	my $d = 1 + int(rand(100));
	# the lower id first, so that two transfers never wait for each other in a cycle
	my ($lo, $hi, $dlo) = $a < $b ? ($a, $b, -$d) : ($b, $a, $d);
	my $first =
	  rand() < 0.5
	  ? "UPDATE accounts SET balance = balance + ($dlo) WHERE id = $lo;"
	  : "SELECT collegedb.run('$lo', 'UPDATE accounts SET balance = balance + (\$2) WHERE id = \$1', $lo, $dlo);";
	# X after a statement that failed: the transfer did not commit
	my $check = "\\if :ERROR\n\\echo X\n\\endif";
	return qq{BEGIN;
$first
$check
UPDATE accounts SET balance = balance - ($dlo) WHERE id = $hi;
$check
COMMIT;
$check};
}

sub move_sql
{
	return "SELECT 'M ' || collegedb.rebalance('accounts')::text;" if rand() < 0.05;
	my $k = 1 + int(rand($accounts));
	my $to = $shards[ int(rand(@shards)) ];
	return "SELECT 'M ' || collegedb.reassign_shard('$k', '$to')::text;";
}

# the chaos: what is killed next
my @faults = (
	[
		'the PostgreSQL shards restart (immediate)',
		sub { $pg->stop('immediate'); $pg->start; }
	],
	[
		'MariaDB is killed and restarts',
		sub { $mdb->kill9; $mdb->restart; }
	],
	[
		'a front backend is killed (the front restarts)',
		sub {
			my $pid = $front->safe_psql('postgres',
				q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend'
				   AND pid <> pg_backend_pid() AND query LIKE '%accounts%' ORDER BY random() LIMIT 1});
			kill 'KILL', $pid if $pid;
		}
	]);

my @clients = map { session_start("c$_") } 1 .. 4;
my @movers  = map { session_start("mover$_") } 1 .. 2;
my $end     = time + $seconds;
my $next_fault = time + 4 + rand(6);
my %kills;
while (time < $end)
{
	for my $s (@clients, @movers)
	{
		if (!session_poll($s))
		{
			# while the front restarts a new session fails at once: not too often
			next if time < ($s->{retry_at} // 0);
			$stats{'sessions restarted'}++;
			eval { $s->{run}->finish; 1 };
			session_start($s->{name}, $s);
			$s->{retry_at} = time + 0.5;
		}
		next if $s->{busy};
		if (grep { $_ == $s } @movers)
		{
			session_send($s, 'move', move_sql());
		}
		else
		{
			session_send($s, 'transfer', transfer_sql());
		}
	}
	if (time >= $next_fault)
	{
		my $f = $faults[ int(rand(@faults)) ];
		note sprintf('%.1f s: %s', $seconds - ($end - time), $f->[0]);
		eval { $f->[1]->(); 1 } or note "the fault failed: $@";
		$kills{ $f->[0] }++;
		$next_fault = time + 5 + rand(8);
	}
	usleep(2000);
}
# the sessions finish what they are doing (a move may wait a while), then quit
for my $s (@clients, @movers)
{
	$s->{in} .= "\\q\n";
}
# a session whose psql exited (the front restarted under it) leaves its unsent input
# behind, and IPC::Run calls it pumpable until it is finished: done too
sub session_exited
{
	my ($s) = @_;
	my $pid = $s->{run}{KIDS}[0]{PID};
	return 1 unless defined $pid;
	open(my $fh, '<', "/proc/$pid/stat") or return 1;
	my $stat = <$fh> // '';
	close($fh);
	return $stat =~ /^\d+ \(.*\) Z/ ? 1 : 0;
}
my $quit_by = time + 90;
my $noted_slow = 0;
while (grep { session_poll($_) && !session_exited($_) } @clients, @movers)
{
	last if time > $quit_by;
	if (!$noted_slow && time > $quit_by - 60)
	{
		$noted_slow = 1;
		note 'sessions still at work after 30 s: ',
		  join(', ', map { $_->{name} } grep { $_->{run}->pumpable && !session_exited($_) } @clients, @movers), "\n",
		  $front->safe_psql('postgres',
			q{SELECT pid, state, wait_event_type, wait_event, now() - query_start, left(query, 80)
			    FROM pg_stat_activity WHERE backend_type <> 'client backend' OR pid <> pg_backend_pid()});
	}
	usleep(10_000);
}
for my $s (@clients, @movers)
{
	$s->{run}->kill_kill if $s->{run}->pumpable;
	eval { $s->{run}->finish; 1 };
}
note join("\n", 'what happened:', map { "  $_: $kills{$_}" } sort keys %kills);
note join("\n", 'outcomes:', map { "  $_: $stats{$_}" } sort keys %stats);
cmp_ok($stats{'transfers committed'} // 0, '>', 50, 'transfers committed during the chaos');
cmp_ok($stats{'moves done'} // 0, '>', 5, 'keys moved during the chaos');

# everything settles: every server is up, no move unfinished, nothing prepared
$front->poll_query_until('postgres', 'SELECT true') or die 'the front did not come back';
ok( poll_until(
		$front,
		q{SELECT count(*) FROM collegedb.moves WHERE step NOT IN ('done', 'failed')},
		'0', 400),
	'every move ended');
ok( poll_until(
		$front,
		q{SELECT count(*) FROM collegedb.prepared_transactions}, '0', 120),
	'the coordinator resolved every prepared transaction')
  or diag(
	"what is left prepared:\n",
	$front->safe_psql('postgres', 'SELECT * FROM collegedb.prepared_transactions'),
	"\nMariaDB's XA RECOVER:\n",
	$mdb->query('XA RECOVER', database => 'collegedb_bank'),
	"\nfront sessions:\n",
	$front->safe_psql('postgres',
		q{SELECT pid, backend_xid, state, wait_event, left(query, 60) FROM pg_stat_activity
		   WHERE datname = 'postgres' AND pid <> pg_backend_pid()}),
	"\nMariaDB sessions:\n",
	$mdb->query('SELECT id, command, time, state, left(info, 60) FROM information_schema.processlist',
		database => 'collegedb_bank'));
is($mdb->query('XA RECOVER', database => 'collegedb_bank'), '', 'nothing is prepared on MariaDB');
is( $pg->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'),
	'0', 'nothing is prepared on the PostgreSQL shards');

# the books
is($front->safe_psql('postgres', 'SELECT sum(balance) FROM accounts'),
	1000 * $accounts, 'the balances add up, read through the front');
is( $front->safe_psql(
		'postgres', q{
		SELECT count(*) || ' ' || count(DISTINCT value->>'id') || ' ' || sum((value->>'balance')::bigint)
		  FROM collegedb.fanout('SELECT id, balance FROM accounts') WHERE error IS NULL}),
	"$accounts $accounts " . (1000 * $accounts),
	'every account is on exactly one shard, and the shards hold the money');
is( $front->safe_psql(
		'postgres', qq{
		SELECT count(*) FROM generate_series(1, $accounts) AS i
		 WHERE (SELECT count(*) FROM accounts a WHERE a.id = i) = 1}),
	$accounts, 'every account is read once by its key');
is( $front->safe_psql(
		'postgres', q{
		SELECT count(*) FROM accounts a
		  JOIN LATERAL (SELECT value FROM collegedb.fanout('SELECT id, balance FROM accounts') f
		                 WHERE error IS NULL AND (value->>'id')::int = a.id) f ON true
		 WHERE (f.value->>'balance')::bigint = a.balance}),
	$accounts, 'what the front reads is what the shards hold');
is( $front->safe_psql(
		'postgres', q{
		SELECT coalesce(string_agg(DISTINCT shard, ' '), '')
		  FROM collegedb.fanout('SELECT moved_to FROM collegedb_tombstones')
		 WHERE error IS NULL AND value->>'moved_to' = shard}),
	'', 'no tombstone points at its own shard');

# no process died of a signal but the SIGKILLs sent here
my $log = slurp_file($front->logfile);
my @signals = $log =~ /terminated by signal (\d+)/g;
is(join(' ', grep { $_ != 9 } @signals), '', 'no front process died of a signal other than SIGKILL');

done_testing();
