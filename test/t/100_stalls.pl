# 100_stalls: every wait on a shard ends, for every dialect, on query cancel,
# pg_terminate_backend and statement_timeout, also when the shard never answers.
#
# A stalled shard is, for PostgreSQL, its backend stopped with SIGSTOP; for MySQL, a
# TCP proxy in front of the run's MariaDB that is stopped with SIGSTOP (the MariaDB
# server is shared and not ours to stop); for a connect, a TCP listener that accepts
# and never answers.  Each wait is tried at connect, send (a 64 MB parameter that
# fills the socket buffers), receive, commit and abort (the front's ROLLBACK, with
# interrupts held), against each of the three interrupts, and must end within a few
# seconds with the interrupt's SQLSTATE; abort-time cleanup without an interrupt
# gives up after collegedb.cleanup_timeout.  SQLite's wait is another connection's
# lock.  The $70000-parameter statement of the issue fails before it is sent, and
# the transaction around it rolls back at once.  The front stays up throughout.
use strict;
use warnings;

use IO::Select;
use IO::Socket::INET;
use POSIX ();
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use CollegeDB::TestHarness;

my $front = front_node('front', extension => 1,
	conf => { 'collegedb.cleanup_timeout' => '2s' });
my $shard = pg_shard_node('shard');
my $mdb = start_mariadb();
my $mdb_db = mysql_database($mdb);

# --- a listener that accepts and never answers ----------------------------------

my $hole = IO::Socket::INET->new(
	LocalAddr => '127.0.0.1',
	LocalPort => 0,
	Listen    => 64,
	ReuseAddr => 1) or die "listen: $!";
my $hole_port = $hole->sockport;

# --- a TCP proxy to MariaDB, frozen with SIGSTOP --------------------------------

my $proxy_listen = IO::Socket::INET->new(
	LocalAddr => '127.0.0.1',
	LocalPort => 0,
	Listen    => 64,
	ReuseAddr => 1) or die "listen: $!";
my $proxy_port = $proxy_listen->sockport;
my $proxy_pid = fork();
die "fork: $!" unless defined $proxy_pid;
if ($proxy_pid == 0)
{
	# the proxy: forwards bytes both ways until killed; it leaves with _exit, so
	# that the test's END blocks (which stop the nodes) run in the test only
	my $sel = IO::Select->new($proxy_listen);
	my %peer;
	eval { while (1)
	{
		for my $fh ($sel->can_read(1))
		{
			if ($fh == $proxy_listen)
			{
				my $c = $proxy_listen->accept or next;
				my $u = IO::Socket::INET->new(
					PeerAddr => $mdb->host,
					PeerPort => $mdb->port) or do { close $c; next };
				$peer{$c} = $u;
				$peer{$u} = $c;
				$sel->add($c, $u);
				next;
			}
			my $buf;
			my $other = $peer{$fh};
			next unless defined $other;    # closed with its peer just now
			my $n = sysread($fh, $buf, 65536);
			if (!$n)
			{
				$sel->remove($fh, $other);
				delete @peer{ $fh, $other };
				close $fh;
				close $other;
				next;
			}
			my $off = 0;
			while ($off < $n)
			{
				my $w = syswrite($other, $buf, $n - $off, $off);
				last unless defined $w;
				$off += $w;
			}
		}
	} };
	POSIX::_exit(0);
}
close $proxy_listen;

END
{
	local $?;    # waitpid must not become the test's exit status
	if ($proxy_pid)
	{
		kill 'CONT', $proxy_pid;
		kill 'KILL', $proxy_pid;
		waitpid($proxy_pid, 0);
	}
}

# --- shards --------------------------------------------------------------------

$shard->safe_psql('postgres', 'CREATE TABLE items (id text PRIMARY KEY, body text)');
mysql_query($mdb, 'CREATE TABLE items (id VARCHAR(40) PRIMARY KEY, body TEXT)',
	database => $mdb_db);
my $lite = sqlite_dir() . '/stall.db';
sqlite_exec($lite, 'CREATE TABLE items (id TEXT PRIMARY KEY, body TEXT)');

$front->safe_psql(
	'postgres', qq{
	CREATE SERVER p FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ pg_server_options($shard) ]});
	CREATE USER MAPPING FOR PUBLIC SERVER p OPTIONS (user 'postgres');
	CREATE SERVER m FOREIGN DATA WRAPPER collegedb
	  OPTIONS (dialect 'mysql', host '127.0.0.1', port '$proxy_port', dbname '$mdb_db');
	CREATE USER MAPPING FOR PUBLIC SERVER m OPTIONS (@{[ mysql_user_mapping_options($mdb) ]});
	CREATE SERVER l FOREIGN DATA WRAPPER collegedb
	  OPTIONS (dialect 'sqlite', database '$lite', busy_timeout '60000');
	SELECT collegedb.add_shard('p'), collegedb.add_shard('m'), collegedb.add_shard('l');
	SELECT collegedb.set_mapping('pk', 'p'), collegedb.set_mapping('mk', 'm'),
	       collegedb.set_mapping('lk', 'l');
	CREATE SERVER pg_hole FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ pg_server_options($shard) ]});
	CREATE USER MAPPING FOR PUBLIC SERVER pg_hole OPTIONS (user 'postgres');
	CREATE SERVER my_hole FOREIGN DATA WRAPPER collegedb
	  OPTIONS (@{[ mysql_server_options($mdb, dbname => $mdb_db) ]});
	CREATE USER MAPPING FOR PUBLIC SERVER my_hole OPTIONS (@{[ mysql_user_mapping_options($mdb) ]});
	SELECT collegedb.add_shard('pg_hole'), collegedb.add_shard('my_hole');
	-- registered while they answered; from now on they lead to the listener
	ALTER SERVER pg_hole OPTIONS (SET host '127.0.0.1', SET port '$hole_port');
	ALTER SERVER my_hole OPTIONS (SET port '$hole_port');
});

# --- helpers ---------------------------------------------------------------------

# The collegedb backends on the PostgreSQL shard, by state.
sub shard_backends
{
	my ($state) = @_;
	my $cond = defined $state ? "AND state = '$state'" : '';
	return grep { $_ ne '' } split /\n/, $shard->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE application_name = 'collegedb' $cond");
}

# Closes the shard's collegedb connections and lets stopped ones go on.
my @stopped;

sub release_all
{
	kill 'CONT', $_ for @stopped;
	@stopped = ();
	kill 'CONT', $proxy_pid;
	$shard->safe_psql('postgres',
		"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'collegedb'");
	poll_until($shard,
		"SELECT count(*) FROM pg_stat_activity WHERE application_name = 'collegedb'", '0', 30);
}

# Stops the shard's backend that is in 'state' (waits for one to be).
sub stop_pg_backend
{
	my ($state) = @_;
	my $t0 = time;
	my @pids;
	while (!(@pids = shard_backends($state)) && time - $t0 < 30)
	{
		usleep(20_000);
	}
	die "no shard backend in state $state" unless @pids == 1;
	kill 'STOP', $pids[0];
	push @stopped, $pids[0];
	return;
}

sub stop_proxy
{
	kill 'STOP', $proxy_pid;
	return;
}

# Waits until the front session named 'app' waits on a shard (wait event class
# Extension).
sub wait_for_extension_wait
{
	my ($app) = @_;
	return poll_until($front,
		"SELECT count(*) FROM pg_stat_activity WHERE application_name = '$app' AND wait_event_type = 'Extension'",
		'1', 30);
}

my $case = 0;

# Runs one stalled case: 'sql' in a new front session (after SET application_name),
# 'stall' (a code ref: it stops the shard at the right moment; with 'before', ahead
# of the session), then the interrupt 'how' (cancel, terminate, or timeout:
# statement_timeout was set in 'sql': 3 s, so that the poll, one psql per try,
# sees the wait before the timeout ends it also on a loaded machine).  Checks
# the SQLSTATE (against 'sqlstate', a pattern) and that it ended within 'within'
# seconds of the interrupt.
sub stalled
{
	my (%a) = @_;
	my $app = 'stall_' . ++$case;
	$a{stall}->() if $a{before};
	my $h = psql_start($front, "SET application_name = '$app'; $a{sql}");
	$a{stall}->() unless $a{before};
	ok(wait_for_extension_wait($app), "$a{name}: the front waits on the shard");
	my $t0 = time;
	if ($a{how} eq 'cancel')
	{
		$front->safe_psql('postgres',
			"SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = '$app'");
	}
	elsif ($a{how} eq 'terminate')
	{
		$front->safe_psql('postgres',
			"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '$app'");
	}
	my $r = psql_finish($h, 60);
	my $took = time - $t0;
	my $want = $a{sqlstate} // ($a{how} eq 'terminate' ? qr/^57P01$/ : qr/^57014$/);
	like($r->{sqlstate} // '', $want, "$a{name}: ended by $a{how}") or diag $r->{stderr};
	cmp_ok($took, '<', $a{within} // 8, "$a{name}: within bounds (${took}s)");
	if ($a{how} eq 'terminate')
	{
		ok( poll_until($front, "SELECT count(*) FROM pg_stat_activity WHERE application_name = '$app'",
				'0', 30),
			"$a{name}: the terminated session is gone");
	}
	release_all();
	return $r;
}

# --- PostgreSQL: connect to a listener that never answers ------------------------

for my $how (qw(cancel terminate timeout))
{
	my $timeout = $how eq 'timeout' ? "SET statement_timeout = '3s';" : '';
	stalled(
		name  => "PostgreSQL connect",
		how   => $how,
		sql   => "$timeout SELECT collegedb.run_on_shard('pg_hole', 'SELECT 1')",
		stall => sub { });
}

# --- PostgreSQL: a stopped backend -------------------------------------------------

for my $how (qw(cancel terminate timeout))
{
	my $timeout = $how eq 'timeout' ? "SET statement_timeout = '3s';" : '';

	# the shard's backend is stopped while it sleeps: 1.5 s, so that a poll
	# slowed by a loaded machine still finds it active (0.3 s was missed once)
	stalled(
		name => 'PostgreSQL receive',
		how  => $how,
		sql  => "$timeout SELECT collegedb.first('pk', 'SELECT pg_sleep(1.5), 1 AS one')",
		stall => sub { stop_pg_backend('active') });

	stalled(
		name => 'PostgreSQL send',
		how  => $how,
		sql  => "SELECT collegedb.first('pk', 'SELECT 1 AS warm'); SELECT pg_sleep(1.5); $timeout "
		  . "SELECT collegedb.first('pk', 'SELECT length(\$1) AS n', repeat('x', 64 * 1024 * 1024))",
		# the statements of one psql -c share an implicit transaction
		stall => sub { stop_pg_backend('idle in transaction') });

	stalled(
		name => 'PostgreSQL commit',
		how  => $how,
		sql  => "BEGIN; SELECT collegedb.run('pk', 'INSERT INTO items VALUES (\$1, \$2)', 'c-$how', 'x'); "
		  . "SELECT pg_sleep(1.5); "
		  . ($how eq 'timeout' ? "SET LOCAL statement_timeout = '3s'; " : '')
		  . "COMMIT",
		stall => sub { stop_pg_backend('idle in transaction') });

	stalled(
		name => 'PostgreSQL abort',
		how  => $how,
		sql  => "BEGIN; SELECT collegedb.run('pk', 'INSERT INTO items VALUES (\$1, \$2)', 'a-$how', 'x'); "
		  . "SELECT pg_sleep(1.5); "
		  . ($how eq 'timeout' ? "SET LOCAL statement_timeout = '3s'; " : '')
		  . "ROLLBACK",
		stall => sub { stop_pg_backend('idle in transaction') },
		# the front's ROLLBACK itself succeeds: the interrupt ends the cleanup's wait,
		# and is served after the abort, when psql may have read ROLLBACK's answer
		# and gone (it is the session's last command), so the error may not reach it
		sqlstate => $how eq 'terminate' ? qr/^(57P01)?$/ : qr/^(57014)?$/);
}
is($shard->safe_psql('postgres', "SELECT count(*) FROM items WHERE id LIKE 'a-%'"), '0',
	'the aborted transactions left nothing on the shard');

# abort-time cleanup without an interrupt gives up after collegedb.cleanup_timeout
{
	my $app = 'stall_cleanup';
	my $h = psql_start($front,
		"SET application_name = '$app'; BEGIN; "
		  . "SELECT collegedb.run('pk', 'INSERT INTO items VALUES (\$1, \$2)', 'a-cleanup', 'x'); "
		  . "SELECT pg_sleep(1.5); ROLLBACK; SELECT 'rolled back'");
	stop_pg_backend('idle in transaction');
	my $r = psql_finish($h, 60);
	is($r->{rc}, 0, 'abort with a stopped shard: the ROLLBACK succeeds') or diag $r->{stderr};
	like($r->{stdout}, qr/rolled back/, '... and the session goes on');
	cmp_ok($r->{seconds}, '<', 1.5 + 2 + 4, "... after the cleanup timeout (took $r->{seconds}s)");
	release_all();
}

# the statement of the issue: more parameters than the protocol carries fails before
# anything is sent, and the transaction around it rolls back at once
{
	my $r = psql_outcome($front, q{
		BEGIN;
		SELECT collegedb.run('pk', 'INSERT INTO items VALUES ($1, $2)', 'p-1', 'x');
		SELECT collegedb.run('pk', 'INSERT INTO items VALUES ($70000)',
		                     VARIADIC array_fill('x'::text, ARRAY[70000]));});
	is($r->{sqlstate}, '54023', '70000 parameters: refused before anything is sent');
	cmp_ok($r->{seconds}, '<', 5, "... and the session ends at once ($r->{seconds}s)");
	is($shard->safe_psql('postgres', "SELECT count(*) FROM items WHERE id = 'p-1'"), '0',
		'... and its transaction rolled back');
}

# --- MySQL: connect to a listener that never answers, and a frozen proxy -----------

for my $how (qw(cancel terminate timeout))
{
	my $timeout = $how eq 'timeout' ? "SET statement_timeout = '3s';" : '';
	stalled(
		name  => "MySQL connect",
		how   => $how,
		sql   => "$timeout SELECT collegedb.run_on_shard('my_hole', 'SELECT 1')",
		stall => sub { });

	stalled(
		name  => "MySQL connect through a stopped proxy",
		how   => $how,
		sql   => "$timeout SELECT collegedb.first('mk', 'SELECT 1 AS one')",
		stall => sub { stop_proxy() },
		before => 1);

	stalled(
		name => 'MySQL receive',
		how  => $how,
		sql  => "SELECT collegedb.first('mk', 'SELECT 1 AS warm'); SELECT pg_sleep(1); $timeout "
		  . "SELECT collegedb.first('mk', 'SELECT 2 AS two')",
		stall => sub { usleep(400_000); stop_proxy() });

	stalled(
		name => 'MySQL send',
		how  => $how,
		sql  => "SELECT collegedb.first('mk', 'SELECT 1 AS warm'); SELECT pg_sleep(1); $timeout "
		  . "SELECT collegedb.first('mk', 'SELECT length(\$1) AS n', repeat('x', 15 * 1024 * 1024))",
		stall => sub { usleep(400_000); stop_proxy() });

	stalled(
		name => 'MySQL commit',
		how  => $how,
		sql  => "BEGIN; SELECT collegedb.run('mk', 'INSERT INTO items VALUES (\$1, \$2)', 'c-$how', 'x'); "
		  . "SELECT pg_sleep(1); "
		  . ($how eq 'timeout' ? "SET LOCAL statement_timeout = '3s'; " : '')
		  . "COMMIT",
		stall => sub { usleep(400_000); stop_proxy() });

	stalled(
		name => 'MySQL abort',
		how  => $how,
		sql  => "BEGIN; SELECT collegedb.run('mk', 'INSERT INTO items VALUES (\$1, \$2)', 'a-$how', 'x'); "
		  . "SELECT pg_sleep(1); "
		  . ($how eq 'timeout' ? "SET LOCAL statement_timeout = '3s'; " : '')
		  . "ROLLBACK",
		stall => sub { usleep(400_000); stop_proxy() },
		# an abort holds interrupts until its cleanup gave up: the ROLLBACK then
		# succeeds, and the termination comes after it, which psql may not read
		sqlstate => $how eq 'terminate' ? qr/^(57P01)?$/ : qr/^(57014)?$/);
}
ok(poll_mysql_until($mdb, "SELECT count(*) FROM items WHERE id LIKE 'a-%'", '0', 30,
		database => $mdb_db),
	'the aborted MySQL transactions left nothing');

# --- SQLite: another connection holds the write lock -------------------------------

for my $how (qw(cancel terminate timeout))
{
	my $timeout = $how eq 'timeout' ? "SET statement_timeout = '3s';" : '';
	my $lock = sqlite_hold_lock($lite);
	my $app = 'stall_sqlite_' . $how;
	my $h = psql_start($front,
		"SET application_name = '$app'; $timeout "
		  . "SELECT collegedb.run('lk', 'INSERT INTO items VALUES (\$1, \$2)', 'l-$how', 'x')");
	ok(poll_until($front,
			"SELECT count(*) FROM pg_stat_activity WHERE application_name = '$app' AND state = 'active'",
			'1', 30),
		"SQLite lock wait ($how): the front waits");
	usleep(300_000);
	my $t0 = time;
	$front->safe_psql('postgres',
		"SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = '$app'")
	  if $how eq 'cancel';
	$front->safe_psql('postgres',
		"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '$app'")
	  if $how eq 'terminate';
	my $r = psql_finish($h, 60);
	my $took = time - $t0;
	is($r->{sqlstate}, $how eq 'terminate' ? '57P01' : '57014', "SQLite lock wait: ended by $how")
	  or diag $r->{stderr};
	cmp_ok($took, '<', 5, "SQLite lock wait ($how): within bounds (${took}s)");
	$lock->release;
}
is(sqlite_exec($lite, "SELECT count(*) FROM items WHERE id LIKE 'l-%'"), '0',
	'the interrupted SQLite writes left nothing');

# --- the front survived all of it --------------------------------------------------

is($front->safe_psql('postgres', q{SELECT collegedb.first('pk', 'SELECT 42 AS x')->>'x'}),
	'42', 'the front still routes');
my $log = slurp_file($front->logfile);
unlike($log, qr/terminated by signal|was terminated by/, 'no backend crashed');

done_testing();
