# 070_moves_crash: a key move survives a crash or a restart at every journal step.
#
# With collegedb.test_pause_after_step the mover stops after a step (copied,
# source_done, mapped, done) and waits to be killed.  For every step: the move's
# worker is killed with SIGKILL (the postmaster then restarts every process, and the
# coordinator resumes the move from its journal), and separately the whole front is
# restarted (fast) while the mover waits.  Moves go between two PostgreSQL clusters
# and between SQLite and PostgreSQL.  While a mover waits, the key is readable once;
# after recovery the move is done, every key is readable exactly once (through
# collegedb.all_json, which follows tombstones), each key's rows sit on exactly one
# shard, the total row count of each table across shards is unchanged, every
# tombstone points at a shard that holds the key's rows (or that has a tombstone of
# its own: moved again), the mapping names the shard with the rows, and no job is left
# queued or running.  The coordinator itself pauses and is killed when it runs a
# scheduled rebalance; a rebalance's extra 'collegedb mover' is killed too (the
# requeued job's bookkeeping is checked).  A target shard that goes down after
# 'copied': the move cannot finish (the key stays readable and writable at its
# source, the failure is reported), and it completes once the target is back, with
# the write made in between.  The mover is also killed inside the source step (with
# the key's lock held, and after the target committed its copy), between PostgreSQL,
# SQLite and MySQL shards; while a move waits at 'copied', a foreign-table scan of
# every shard counts each row once.
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
		restart_after_crash  => 'on',    # the TAP default is off
		max_connections      => 40,
		max_worker_processes => 20,
		shared_buffers       => '32MB',
	});
my $pga = pg_shard_node('pga', conf => { max_connections => 40 });
my $pgb = pg_shard_node('pgb', conf => { max_connections => 40 });
$pga->safe_psql('postgres', 'CREATE DATABASE a');
$pgb->safe_psql('postgres', 'CREATE DATABASE b');
my $sqlite = sqlite_dir() . '/c.db';

$front->safe_psql(
	'postgres', qq{
	@{[ pg_shard_server($pga, 'a', dbname => 'a') ]}
	@{[ pg_shard_server($pgb, 'b', dbname => 'b', options => { connect_timeout => 2 }) ]}
	@{[ sqlite_shard_server('c', $sqlite) ]}
	SELECT collegedb.add_shard(s) FROM unnest(ARRAY['a', 'b', 'c']) AS s;
	SELECT count(*) FROM collegedb.run_on_all('CREATE TABLE users (id TEXT PRIMARY KEY, name TEXT)');
	SELECT count(*) FROM collegedb.run_on_all('CREATE TABLE events (user_id TEXT, seq INTEGER, note TEXT)');
	SELECT count(*) FROM collegedb.run_on_all('CREATE TABLE solo (id TEXT PRIMARY KEY)');
	SELECT collegedb.register_table('users', 'id');
	SELECT collegedb.register_table('events', 'user_id');
	SELECT collegedb.register_table('solo', 'id');
	-- a scan of every shard, through the wrapper
	CREATE FOREIGN TABLE users_ft (id text, name text) SERVER collegedb
	  OPTIONS (key_column 'id', table_name 'users');
});

# Twelve keys, each with one users row and three events rows, pinned to a shard.
my @shards = qw(a b c);
my %home;
my @keys = map { "k$_" } 1 .. 12;
for my $i (0 .. $#keys)
{
	my $k = $keys[$i];
	$home{$k} = $shards[ $i % 3 ];
	$front->safe_psql(
		'postgres', qq{
		SELECT collegedb.set_mapping('$k', '$home{$k}');
		SELECT collegedb.run('$k', 'INSERT INTO users VALUES (\$1, \$2)', '$k', 'name of $k');
		SELECT collegedb.run('$k', 'INSERT INTO events VALUES (\$1, \$2, \$3)', '$k', i, 'e' || i)
		  FROM generate_series(1, 3) AS i;
	});
}
my $key_array = 'ARRAY[' . join(', ', map { "'$_'" } @keys) . ']';

# --- checks -----------------------------------------------------------------------

# Rows per key and shard of a table, from every shard: { key => { shard => n } }.
sub rows_by_shard
{
	my ($table, $column) = @_;
	return fanout_by_shard($front, "SELECT $column AS k, count(*) AS n FROM $table GROUP BY $column");
}

# Tombstones on every shard: list of [shard, table, key, moved_to].
sub tombstones
{
	my $out = $front->safe_psql('postgres', q{
		SELECT shard, value->>'t', value->>'k', value->>'m'
		  FROM collegedb.fanout('SELECT table_name AS t, shard_key AS k, moved_to AS m FROM collegedb_tombstones')
		 WHERE error IS NULL ORDER BY 1, 2, 3});
	return [ map { [ split /\|/ ] } grep { $_ ne '' } split /\n/, $out ];
}

# The invariants after recovery; %$where (key => shard) says where some keys must be.
sub check_invariants
{
	my ($label, $where) = @_;
	my $users  = rows_by_shard('users',  'id');
	my $events = rows_by_shard('events', 'user_id');

	# every key readable exactly once, through the router (tombstones followed)
	my $routed = $front->safe_psql('postgres', qq{
		SELECT string_agg(k || '=' ||
		         (SELECT count(*) FROM collegedb.all_json(k, 'SELECT id FROM users WHERE id = \$1', k)) || '/' ||
		         (SELECT count(*) FROM collegedb.all_json(k, 'SELECT seq FROM events WHERE user_id = \$1', k)),
		         ' ' ORDER BY k)
		  FROM unnest($key_array) AS k});
	is($routed, join(' ', map { "$_=1/3" } sort @keys),
		"$label: every key reads one users row and three events rows");

	my (@dupes, @misplaced);
	my ($nusers, $nevents) = (0, 0);
	for my $k (@keys)
	{
		my @u = sort keys %{ $users->{$k} // {} };
		my @e = sort keys %{ $events->{$k} // {} };
		push @dupes, "$k: users on @u, events on @e"
		  unless @u == 1 && @e == 1 && $u[0] eq $e[0];
		push @misplaced, "$k on @u, expected $where->{$k}"
		  if defined $where->{$k} && "@u" ne $where->{$k};
		$nusers  += $users->{$k}{$_}  for @u;
		$nevents += $events->{$k}{$_} for @e;
	}
	is(join('; ', @dupes), '', "$label: each key's rows are on exactly one shard");
	is("$nusers/$nevents", scalar(@keys) . '/' . 3 * @keys,
		"$label: row counts across shards unchanged (users/events)");
	is(join('; ', @misplaced), '', "$label: the moved keys are on their targets");

	# a tombstone points at a shard that has the key's rows, or moved it on again
	my @bad;
	my %tomb = map { ("$_->[0]|$_->[2]" => $_->[3]) } @{ tombstones() };
	for my $t (@{ tombstones() })
	{
		my ($shard, $table, $k, $to) = @$t;
		next if $users->{$k}{$to} && $events->{$k}{$to};
		next if exists $tomb{"$to|$k"};
		push @bad, "$shard: $table/$k -> $to";
	}
	is(join('; ', @bad), '', "$label: every tombstone leads to the key's rows");

	# the mapping agrees with where the rows are, without hops
	my $route = $front->safe_psql('postgres', qq{
		SELECT string_agg(k || '=' || r.shard || '/' || r.hops, ' ' ORDER BY k)
		  FROM unnest($key_array) AS k, collegedb.route(k) AS r});
	my $expect = join ' ',
	  map { "$_=" . (keys %{ $users->{$_} // {} })[0] . '/0' } sort @keys;
	is($route, $expect, "$label: every key's mapping names the shard with its rows");
	return;
}

# Counts for a key while a mover waits: "users/events" read through the router.
sub read_key
{
	my ($k) = @_;
	return $front->safe_psql('postgres', qq{
		SELECT (SELECT count(*) FROM collegedb.all_json('$k', 'SELECT id FROM users WHERE id = \$1', '$k'))
		    || '/' ||
		       (SELECT count(*) FROM collegedb.all_json('$k', 'SELECT seq FROM events WHERE user_id = \$1', '$k'))});
}

sub set_pause
{
	my ($step) = @_;
	if (defined $step)
	{
		$front->safe_psql('postgres',
			"ALTER SYSTEM SET collegedb.test_pause_after_step = '$step'; SELECT pg_reload_conf()");
	}
	else
	{
		$front->safe_psql('postgres',
			'ALTER SYSTEM RESET collegedb.test_pause_after_step; SELECT pg_reload_conf()');
		$step = '';
	}
	# a new backend forks from the postmaster: once it sees the value, new workers do
	ok(poll_until($front, 'SHOW collegedb.test_pause_after_step', $step, 30),
		"collegedb.test_pause_after_step is '$step'");
	return;
}

# Waits for "move N paused after step S" after log offset $off; returns N (or undef).
sub wait_paused
{
	my ($step, $off) = @_;
	my ($id) = wait_for_log_match($front,
		qr/collegedb: move (\d+) paused after step \Q$step\E\b/, $off, 60);
	return $id;
}

# The same, also returning the log offset after the match.
sub wait_paused_at
{
	my ($step, $off) = @_;
	return wait_for_log_match($front,
		qr/collegedb: move (\d+) paused after step \Q$step\E\b/, $off, 60);
}

sub wait_done
{
	my ($id, $label) = @_;
	ok(poll_until($front, "SELECT step FROM collegedb.moves WHERE id = $id", 'done', 60),
		"$label: move $id reaches step done");
	ok( poll_until(
			$front,
			q{SELECT count(*) FROM collegedb.jobs WHERE state IN ('queued', 'running')},
			'0', 60),
		"$label: no job is left queued or running");
	return;
}

sub move_field
{
	my ($id, $field) = @_;
	return $front->safe_psql('postgres', "SELECT $field FROM collegedb.moves WHERE id = $id");
}

# --- every step: kill -9 the job worker, and restart the front -------------------

my @steps = qw(copied source_done mapped done);
my %expected_where;
my $n = 0;
for my $mode (qw(kill restart))
{
	for my $step (@steps)
	{
		my $k = $keys[ $n++ ];
		my $from = $home{$k};
		# kill: a <-> b (PostgreSQL) and c -> a; restart: to and from SQLite
		my $to =
			$mode eq 'kill'
		  ? ($from eq 'a' ? 'b' : 'a')
		  : ($from eq 'c' ? 'a' : 'c');
		my $label = "$mode after $step ($k $from -> $to)";
		my $t0 = time;

		set_pause($step);
		my $off = -s $front->logfile;
		my $caller = psql_start($front, "SELECT collegedb.reassign_shard('$k', '$to') - 'move_id'");
		my $id = wait_paused($step, $off);
		if (!ok(defined $id, "$label: the mover pauses after $step"))
		{
			my $r = psql_finish($caller, 5);
			diag "reassign_shard: rc $r->{rc}, out '$r->{stdout}', err '$r->{stderr}'";
			BAIL_OUT('the mover did not pause');
		}

		is(read_key($k), '1/3', "$label: the key reads once while the mover waits");
		is($front->safe_psql('postgres', 'SELECT count(*) FROM users_ft'), scalar(@keys),
			"$label: a foreign-table scan of every shard counts each row once")
		  if $step eq 'copied';
		my $pid = move_field($id, 'lease_pid');
		is( $front->safe_psql('postgres',
				"SELECT backend_type FROM pg_stat_activity WHERE pid = $pid"),
			'collegedb job',
			"$label: the waiting mover is the 'collegedb job' worker");

		if ($mode eq 'kill')
		{
			kill 'KILL', $pid;
			my $r = psql_finish($caller, 60);
			isnt($r->{rc}, 0, "$label: the caller's session is lost in the crash");
			ok( wait_for_log_match($front, qr/all server processes terminated; reinitializing/,
					$off, 30),
				"$label: the postmaster restarts every process");
			$front->poll_query_until('postgres', 'SELECT true')
			  or die 'the front did not accept connections after the crash';
			wait_done($id, $label);
			set_pause(undef);
		}
		else
		{
			$front->restart;
			psql_finish($caller, 60);
			set_pause(undef);
			wait_done($id, $label);
		}
		$expected_where{$k} = $to;
		$home{$k} = $to;
		is(move_field($id, "source || '>' || target"), "$from>$to", "$label: the journal names the move");
		check_invariants($label, \%expected_where);
		note sprintf "%s took %.1f s", $label, time - $t0;
	}
}

# --- kill -9 inside the source step, MySQL shards too -------------------------

# 'source_lock': the mover holds the key's lock on the source and has copied
# nothing; 'source': the target has committed its copy and the source has not yet
# written its tombstone nor deleted anything (the window between the two commits).
# A MySQL shard joins (taking no new keys, so the rebalances below stay on a, b, c).
my $mdb = start_mariadb();
my $mydb = mysql_database($mdb);
mysql_query($mdb, q{
	CREATE TABLE users (id VARCHAR(64) PRIMARY KEY, name TEXT);
	CREATE TABLE events (user_id VARCHAR(64) NOT NULL, seq INTEGER, note TEXT);
	CREATE TABLE solo (id VARCHAR(64) PRIMARY KEY);
}, database => $mydb);
$front->safe_psql('postgres', qq{
	CREATE SERVER m FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ mysql_server_options($mdb, dbname => $mydb) ]});
	CREATE USER MAPPING FOR PUBLIC SERVER m OPTIONS (@{[ mysql_user_mapping_options($mdb) ]});
	SELECT collegedb.add_shard('m');
	SELECT collegedb.set_shard_state('m', writable => false);
});

sub set_pause_in
{
	my ($where) = @_;
	$front->safe_psql('postgres', defined $where
		? "ALTER SYSTEM SET collegedb.test_pause_in_step = '$where'; SELECT pg_reload_conf()"
		: 'ALTER SYSTEM RESET collegedb.test_pause_in_step; SELECT pg_reload_conf()');
	ok(poll_until($front, 'SHOW collegedb.test_pause_in_step', $where // '', 30),
		"collegedb.test_pause_in_step is '" . ($where // '') . "'");
	return;
}

my @inside = (
	[ 'source',      'a', 'b' ],
	[ 'source_lock', 'b', 'a' ],
	[ 'source',      'c', 'a' ],
	[ 'source',      'a', 'c' ],
	[ 'source',      'a', 'm' ],
	[ 'source_lock', 'm', 'c' ],
	[ 'source',      'm', 'b' ]);
for my $i (0 .. $#inside)
{
	my ($where, $from, $to) = @{ $inside[$i] };
	my $k = $keys[$i];
	if ($home{$k} ne $from)
	{
		$front->safe_psql('postgres', "SELECT collegedb.reassign_shard('$k', '$from', force => true)");
		$home{$k} = $from;
	}
	my $label = "kill inside the source step at $where ($k $from -> $to)";
	set_pause_in($where);
	my $off = -s $front->logfile;
	my $caller = psql_start($front, "SELECT collegedb.reassign_shard('$k', '$to', force => true) - 'move_id'");
	my ($id) = wait_for_log_match($front, qr/collegedb: move (\d+) paused inside step \Q$where\E\b/, $off, 60);
	if (!ok(defined $id, "$label: the mover pauses inside the source step"))
	{
		my $r = psql_finish($caller, 5);
		diag "reassign_shard: rc $r->{rc}, out '$r->{stdout}', err '$r->{stderr}'";
		BAIL_OUT('the mover did not pause');
	}
	is(move_field($id, 'step'), 'copied', "$label: the journal says copied");
	is(read_key($k), '1/3', "$label: the key reads once through the router");
	my $users = rows_by_shard('users', 'id');
	is(join(',', sort keys %{ $users->{$k} }), $where eq 'source' ? join(',', sort $from, $to) : $from,
		$where eq 'source'
		? "$label: the target has committed its copy, the source still has the rows"
		: "$label: nothing is on the target yet");
	my $pid = move_field($id, 'lease_pid');
	# (the paused mover stays paused; the coordinator's attempt must not)
	set_pause_in(undef);
	kill 'KILL', $pid;
	psql_finish($caller, 60);
	ok(wait_for_log_match($front, qr/all server processes terminated; reinitializing/, $off, 30),
		"$label: the postmaster restarts every process");
	$front->poll_query_until('postgres', 'SELECT true')
	  or die 'the front did not accept connections after the crash';
	wait_done($id, $label);
	is(move_field($id, 'generation'), '2', "$label: the coordinator took the move over once (generation 2)");
	$expected_where{$k} = $to;
	$home{$k} = $to;
	check_invariants($label, \%expected_where);
}

# --- the coordinator pauses (scheduled rebalance) and is killed -----------------

{
	# a key in 'solo' away from its rendezvous owner: a rebalance of solo moves it alone
	my $k = $keys[8];
	my $owner = $front->safe_psql('postgres',
		"SELECT collegedb.rendezvous_owner('$k', ARRAY['a', 'b', 'c'])");
	my $from = (grep { $_ ne $owner } qw(a b c))[0];
	if ($home{$k} ne $from)
	{
		$front->safe_psql('postgres', "SELECT collegedb.reassign_shard('$k', '$from')");
		$home{$k} = $from;
	}
	$front->safe_psql('postgres',
		"SELECT collegedb.run('$k', 'INSERT INTO solo VALUES (\$1)', '$k')");
	my $label = "coordinator killed after source_done ($k $from -> $owner)";

	set_pause('source_done');
	my $off = -s $front->logfile;
	my $job = $front->safe_psql('postgres', q{SELECT collegedb.schedule_rebalance('solo')});
	my $id = wait_paused('source_done', $off);
	ok(defined $id, "$label: the mover pauses");
	is(read_key($k), '1/3', "$label: the key reads once (through its tombstone)");
	my $pid = move_field($id, 'lease_pid');
	is( $front->safe_psql('postgres',
			"SELECT backend_type FROM pg_stat_activity WHERE pid = $pid"),
		'collegedb coordinator',
		"$label: the waiting mover is the coordinator");
	kill 'KILL', $pid;
	ok(wait_for_log_match($front, qr/all server processes terminated; reinitializing/, $off, 30),
		"$label: the postmaster restarts every process");
	$front->poll_query_until('postgres', 'SELECT true')
	  or die 'the front did not accept connections after the crash';
	wait_done($id, $label);
	is( $front->safe_psql('postgres',
			"SELECT state, moved + agreed >= 1 FROM collegedb.wait_for_job($job, '30 s')"),
		'done|t', "$label: the rebalance job ends done");
	set_pause(undef);
	$expected_where{$k} = $owner;
	$home{$k} = $owner;
	check_invariants($label, \%expected_where);
	is( $front->safe_psql('postgres',
			"SELECT count(*) FROM collegedb.fanout('SELECT id FROM solo') WHERE error IS NULL"),
		'1', "$label: the solo row exists once");
}

# --- a rebalance's extra mover ('collegedb mover') is killed ---------------------

{
	# two more keys in solo, away from their owners: a rebalance of solo with
	# concurrency 2 moves one in the job worker and one in a mover
	my @two = @keys[ 10, 11 ];
	my %owner;
	for my $k (@two)
	{
		$owner{$k} = $front->safe_psql('postgres',
			"SELECT collegedb.rendezvous_owner('$k', ARRAY['a', 'b', 'c'])");
		if ($home{$k} eq $owner{$k})
		{
			my $away = (grep { $_ ne $owner{$k} } qw(a b c))[0];
			$front->safe_psql('postgres', "SELECT collegedb.reassign_shard('$k', '$away')");
			$home{$k} = $away;
		}
		$front->safe_psql('postgres',
			"SELECT collegedb.run('$k', 'INSERT INTO solo VALUES (\$1)', '$k')");
	}
	my $label = "mover killed after copied (@two)";
	set_pause('copied');
	my $off = -s $front->logfile;
	my $caller = psql_start($front,
		q{SELECT moved || '/' || failed FROM collegedb.rebalance('solo', concurrency => 2)});
	my ($id1, $off1) = wait_paused_at('copied', $off);
	my ($id2) = defined $off1 ? wait_paused_at('copied', $off1) : ();
	ok(defined $id1 && defined $id2, "$label: both movers pause after copied");
	my %type = map {
		my $pid = move_field($_, 'lease_pid');
		($front->safe_psql('postgres', "SELECT backend_type FROM pg_stat_activity WHERE pid = $pid") => $pid)
	} grep { defined } $id1, $id2;
	is(join(',', sort keys %type), 'collegedb job,collegedb mover',
		"$label: one waits in the job worker, one in a 'collegedb mover'");
	my $job = $front->safe_psql('postgres',
		q{SELECT id FROM collegedb.jobs WHERE state = 'running' AND table_name = 'solo'});
	kill 'KILL', $type{'collegedb mover'};
	psql_finish($caller, 60);
	ok(wait_for_log_match($front, qr/all server processes terminated; reinitializing/, $off, 30),
		"$label: the postmaster restarts every process");
	$front->poll_query_until('postgres', 'SELECT true')
	  or die 'the front did not accept connections after the crash';
	set_pause(undef);
	wait_done($_, $label) for grep { defined } $id1, $id2;
	is($front->safe_psql('postgres', "SELECT state FROM collegedb.jobs WHERE id = $job"),
		'done', "$label: the requeued rebalance job ends done");
	{
		# The requeued job plans again: the keys claimed before the crash do not
		# stay 'moving', and no key is counted twice.
		is( $front->safe_psql('postgres',
				"SELECT count(*) FROM collegedb.job_key WHERE job_id = $job AND state = 'moving'"),
			'0', "$label: no key of the job is left 'moving'");
		is( $front->safe_psql('postgres',
				"SELECT examined FROM collegedb.jobs WHERE id = $job"),
			'3', "$label: collegedb.jobs counts the 3 keys of solo once");
	}
	for my $k (@two)
	{
		$expected_where{$k} = $owner{$k};
		$home{$k} = $owner{$k};
	}
	check_invariants($label, \%expected_where);
}

# --- the target shard goes down after 'copied' ---------------------------------

{
	my $k = $keys[9];
	if ($home{$k} ne 'a')
	{
		$front->safe_psql('postgres', "SELECT collegedb.reassign_shard('$k', 'a')");
		$home{$k} = 'a';
	}
	my $label = "target down after copied ($k a -> b)";
	set_pause('copied');
	my $off = -s $front->logfile;
	my $caller = psql_start($front, "SELECT collegedb.reassign_shard('$k', 'b') - 'move_id'");
	my $id = wait_paused('copied', $off);
	ok(defined $id, "$label: the mover pauses after copied");
	my $pid = move_field($id, 'lease_pid');

	$pgb->stop;
	set_pause(undef);
	kill 'KILL', $pid;
	psql_finish($caller, 60);
	ok(wait_for_log_match($front, qr/all server processes terminated; reinitializing/, $off, 30),
		"$label: the postmaster restarts every process");
	$front->poll_query_until('postgres', 'SELECT true')
	  or die 'the front did not accept connections after the crash';

	# the coordinator retries and fails while b is down
	ok( wait_for_log_match($front,
			qr/collegedb coordinator: move $id did not finish; it will be retried/, $off, 30),
		"$label: the coordinator's retry fails while the target is down");
	is(move_field($id, 'step'), 'copied', "$label: the move stays at copied");
	{
		ok( poll_until($front,
				"SELECT coalesce(error, '') ~ 'shard \"b\"' FROM collegedb.moves WHERE id = $id", 't', 5),
			"$label: collegedb.moves.error says why (shard b unreachable)");
	}
	is(read_key($k), '1/3', "$label: the key reads once at its source meanwhile");
	is( $front->safe_psql('postgres',
			"SELECT collegedb.run('$k', 'UPDATE users SET name = \$2 WHERE id = \$1', '$k', 'written during the outage')"),
		'1', "$label: the key takes a write at its source meanwhile");

	# the reassign_shard job, requeued after the crash, failed and says why
	ok( poll_until($front,
			q{SELECT state || ': ' || coalesce(last_error, '') FROM collegedb.jobs WHERE kind = 'move' ORDER BY id DESC LIMIT 1},
			'failed: could not connect to shard "b"', 30),
		"$label: the requeued reassign_shard job fails, naming the shard");

	note "$label: the move's lease: " . $front->safe_psql('postgres', qq{
		SELECT coalesce(a.backend_type, 'no process') || ', ' || round(extract(epoch FROM m.lease_until - now())) || ' s left'
		  FROM collegedb.moves m LEFT JOIN pg_stat_activity a ON a.pid = m.lease_pid WHERE m.id = $id});
	my $t0 = time;
	$pgb->start;
	{
		# A failed attempt lets the move go at once and schedules the next one with
		# backoff (1 s, 2 s, 4 s, ...): the target was down for a few attempts, so the
		# next comes within seconds.
		ok(poll_until($front, "SELECT step FROM collegedb.moves WHERE id = $id", 'done', 30),
			"$label: the move completes soon after the target is back");
	}
	wait_done($id, $label);
	note sprintf "$label: done %.1f s after the target came back", time - $t0;
	$expected_where{$k} = 'b';
	$home{$k} = 'b';
	is( $front->safe_psql('postgres',
			"SELECT collegedb.first('$k', 'SELECT name FROM users WHERE id = \$1', '$k')->>'name'"),
		'written during the outage', "$label: the write made during the outage moved with the key");
	check_invariants($label, \%expected_where);
}

note sprintf "070 took %.1f s", time - $t_start;
done_testing();
