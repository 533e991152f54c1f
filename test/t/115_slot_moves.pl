# 115_slot_moves: collegedb.move_slot moves a slot's keys between PostgreSQL, SQLite and
# MySQL shards while writers run, survives a kill -9 of its worker, and installs the
# next slot map version with a new digest after each move.
#
# Under the slots strategy (default map of 16 slots over l = SQLite, m = MySQL,
# p = PostgreSQL), keys have no mapping row.  Three writer sessions (psql processes)
# increment the counters of the moving slot's keys (and of others), read them, and
# insert new keys of that slot, while move_slot moves the slot: SQLite -> PostgreSQL,
# PostgreSQL -> MySQL, MySQL -> SQLite.  Every outcome is counted on the client side:
# afterwards each counter equals its acknowledged increments, every new key that was
# acknowledged exists exactly once (on the slot's new shard), every read found its
# key, every row of the slot is on the target, no mapping row was written, the map's
# version grew by one and its digest is the SHA-256 of its text.  Then the job worker
# of a move is killed with SIGKILL while its movers wait after the step 'copied': in
# the pause the keys read and write (a new key lands on the target), and after the
# postmaster's restart the coordinator resumes the job and the moves, and the same
# invariants hold.  Last, a transaction that wrote a new key of a slot before
# the slot's move began, and commits only after the move has started, finds its
# key moved with the slot: the move waits for it before it scans.
use strict;
use warnings;

use IPC::Run ();
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use CollegeDB::TestHarness;

my $front = front_node(
	'front',
	extension => 1,
	conf      => {
		restart_after_crash  => 'on',    # the TAP default is off
		max_connections      => 40,
		max_worker_processes => 20,
		shared_buffers       => '32MB',
		log_statement        => 'none',    # thousands of writer statements
	});
my $pg = pg_shard_node('pshard', conf => { max_connections => 60, log_statement => 'none' });
$pg->safe_psql('postgres', 'CREATE DATABASE p');
my $mdb  = start_mariadb();
my $mydb = mysql_database($mdb);
my $sqlite = sqlite_dir() . '/l.db';

$front->safe_psql(
	'postgres', qq{
	@{[ pg_shard_server($pg, 'p', dbname => 'p') ]}
	@{[ mysql_shard_server($mdb, 'm', dbname => $mydb) ]}
	@{[ sqlite_shard_server('l', $sqlite, options => { busy_timeout => 10000 }) ]}
	SELECT collegedb.add_shard(s) FROM unnest(ARRAY['p', 'm', 'l']) AS s;
	SELECT count(*) FROM collegedb.run_on_all('CREATE TABLE counters (id VARCHAR(64) PRIMARY KEY, n INTEGER NOT NULL)');
	SELECT collegedb.register_table('counters', 'id');
	SELECT collegedb.configure(strategy => 'slots', migration_concurrency => 3);
});
my $v1 = $front->safe_psql('postgres',
	q{SELECT s->>'version' || ' ' || (s->>'slots') FROM collegedb.initialize_shard_map(16) AS s});
is($v1, '1 16', 'the default map of 16 slots is installed as version 1');

# 160 keys with a zero counter, placed by their slots
my @keys = map { "key-$_" } 1 .. 160;
is( $front->safe_psql(
		'postgres', q{
		SELECT sum(collegedb.run('key-' || i, 'INSERT INTO counters VALUES ($1, 0)', 'key-' || i))
		  FROM generate_series(1, 160) AS i}),
	'160', '160 keys written under the slots strategy');
is($front->safe_psql('postgres', 'SELECT count(*) FROM collegedb.mapping'), '0', 'no mapping row');

my %count;      # acknowledged increments per key
my @all_new;    # new keys written during the moves

sub slot_of
{
	my ($k) = @_;
	return $front->safe_psql('postgres', "SELECT collegedb.slot_of('$k', 16)");
}

# The keys of a slot among @keys, and new keys of the slot (not written yet).
sub slot_keys
{
	my ($slot) = @_;
	return grep { slot_of($_) == $slot } @keys;
}

sub new_keys
{
	my ($slot, $prefix, $n) = @_;
	return split /\n/, $front->safe_psql('postgres', qq{
		SELECT k FROM (SELECT '$prefix-' || i AS k FROM generate_series(1, 5000) AS i) AS s
		 WHERE collegedb.slot_of(k, 16) = $slot ORDER BY k LIMIT $n});
}

# The shard the installed map gives a slot.
sub map_shard
{
	my ($slot) = @_;
	return $front->safe_psql('postgres', qq{
		SELECT r->>'shard' FROM collegedb.shard_map m, jsonb_array_elements(m.ranges) AS r
		 WHERE m.version = (SELECT max(version) FROM collegedb.shard_map)
		   AND $slot >= (r->>'start')::int AND $slot < (r->>'end')::int});
}

# A writer: a psql process running a script of statements; each prints
# "<tag>|<key>|<value>" when it succeeds, and its error on stderr when it fails.
sub writer_start
{
	my ($script) = @_;
	my $w = { in => $script, out => '', err => '' };
	$w->{run} = IPC::Run::start(
		[ 'psql', '-X', '-A', '-t', '-q', '-v', 'ON_ERROR_STOP=0', '-d', $front->connstr('postgres') ],
		'<', \$w->{in}, '>', \$w->{out}, '2>', \$w->{err});
	return $w;
}

sub writer_script
{
	my ($seed, $moving, $others, $new) = @_;
	my @moving = @$moving;
	my @others = @$others;
	my @lines;
	my $n = 0;
	for my $i (1 .. 700)
	{
		my $k = $i % 4 == 0 ? $others[ ($i + $seed) % @others ] : $moving[ ($i + $seed) % @moving ];
		push @lines,
		  sprintf(q{SELECT 'I|%s|' || collegedb.run('%s', 'UPDATE counters SET n = n + 1 WHERE id = $1', '%s');},
			$k, $k, $k);
		push @lines,
		  sprintf(q{SELECT 'Q|%s|' || count(*) FROM collegedb.all_json('%s', 'SELECT id FROM counters WHERE id = $1', '%s');},
			$k, $k, $k)
		  if $i % 3 == 0;
		if ($i % 35 == 0 && $n < @$new)
		{
			my $nk = $new->[ $n++ ];
			push @lines,
			  sprintf(q{SELECT 'N|%s|' || collegedb.run('%s', 'INSERT INTO counters VALUES ($1, 0)', '%s');},
				$nk, $nk, $nk);
		}
	}
	return join("\n", @lines) . "\n";
}

# Parses a finished writer's output: acknowledged increments into %count, new keys
# written into $written, and the number of reads that did not find their key.
sub writer_tally
{
	my ($w, $written) = @_;
	my ($reads, $missed) = (0, 0);
	for my $line (split /\n/, $w->{out})
	{
		my ($tag, $k, $v) = split /\|/, $line;
		next unless defined $v;
		if ($tag eq 'I') { $count{$k} += $v; }
		elsif ($tag eq 'N') { push @$written, $k if $v eq '1'; }
		elsif ($tag eq 'Q') { $reads++; $missed++ if $v ne '1'; }
	}
	return ($reads, $missed);
}

# Rows of counters per key and shard, from every shard: { key => { shard => n } }.
sub rows_by_shard
{
	return fanout_by_shard($front, 'SELECT id AS k, n FROM counters');
}

# The invariants after a slot's move to $to, with $version expected in force.
sub check_after_move
{
	my ($label, $slot, $to, $version, $new) = @_;
	my $rows = rows_by_shard();
	my @bad;
	for my $k (@keys, @all_new)
	{
		my @where = sort keys %{ $rows->{$k} // {} };
		push @bad, "$k on (@where)" if @where != 1;
	}
	is(join(', ', @bad), '', "$label: every key's row is on exactly one shard");
	my @wrong = grep { ($count{$_} // 0) != (values %{ $rows->{$_} // {} })[0] } @keys;
	is( join(', ', map { "$_: " . ($count{$_} // 0) . ' acknowledged, ' . join('/', values %{ $rows->{$_} }) } @wrong),
		'', "$label: every counter equals its acknowledged increments");
	my @off = grep { !exists $rows->{$_}{$to} } (grep({ slot_of($_) == $slot } @keys), @$new);
	is(join(', ', @off), '', "$label: every key of slot $slot (and every new one) is on $to");
	is(map_shard($slot), $to, "$label: version $version puts slot $slot on $to");
	is( $front->safe_psql(
			'postgres', q{
			SELECT version || ' ' || (digest = encode(sha256(convert_to('slots=' || slots ||
			         (SELECT string_agg(format(';%s-%s=%s', r->>'start', r->>'end', r->>'shard'), ''
			                            ORDER BY (r->>'start')::int)
			            FROM jsonb_array_elements(ranges) AS r), 'UTF8')), 'hex'))
			  FROM collegedb.shard_map ORDER BY version DESC LIMIT 1}),
		"$version true", "$label: the newest version is $version, its digest the SHA-256 of its text");
	is($front->safe_psql('postgres', 'SELECT count(*) FROM collegedb.mapping'),
		'0', "$label: no mapping row");
	is($front->safe_psql('postgres', 'SELECT count(*) FROM collegedb.slot_moves'),
		'0', "$label: no slot is moving");
	is( $front->safe_psql('postgres',
			q{SELECT (v->>'mismatches') || '/' || (v->>'version') FROM collegedb.verify_shard_map('counters') AS v}),
		"0/$version", "$label: verify_shard_map finds every row where version $version says");
	return;
}

# --- moves with writers running ---------------------------------------------------

my $version = 1;
# slot k starts on [l, m, p][k mod 3]: three slots whose moves go SQLite ->
# PostgreSQL, PostgreSQL -> MySQL and MySQL -> SQLite
for my $move ([ 3, 'l', 'p' ], [ 5, 'p', 'm' ], [ 7, 'm', 'l' ])
{
	my ($slot, $from, $to) = @$move;
	my $label = "slot $slot $from -> $to with writers";
	is(map_shard($slot), $from, "$label: the slot starts on $from");
	my @moving = slot_keys($slot);
	ok(@moving >= 3, "$label: the slot holds " . scalar(@moving) . ' keys');
	my @others = grep { slot_of($_) != $slot } @keys[ 0 .. 40 ];
	my @new = new_keys($slot, "new$slot", 30);
	my @writers = map {
		writer_start(writer_script($_, \@moving, \@others, [ @new[ ($_ * 10) .. ($_ * 10 + 9) ] ]))
	} 0 .. 2;
	# the writers are under way before the move starts
	my $deadline = time + 60;
	while (time < $deadline && grep({ $_->{out} !~ /\n.*\n/ } @writers))
	{
		$_->{run}->pump_nb for grep { $_->{run}->pumpable } @writers;
		usleep(20_000);
	}
	my $t0 = time;
	my $r = psql_outcome($front,
		qq{SELECT (s->>'version') || ' ' || (s->>'digest') FROM collegedb.move_slot($slot, '$to') AS s});
	my $t1 = time;
	my ($snap_version, $snap_digest) = split / /, $r->{stdout} // '';
	is($snap_version, $version + 1, "$label: move_slot returns version " . ($version + 1))
	  or diag $r->{stderr};
	my $running = grep { $_->{run}->pumpable } @writers;
	ok($running > 0, "$label: writers still ran when the move ended ($running of 3)");
	$_->{run}->finish for @writers;
	my @written;
	my ($reads, $missed) = (0, 0);
	for my $w (@writers)
	{
		my ($r1, $m1) = writer_tally($w, \@written);
		$reads  += $r1;
		$missed += $m1;
		my @errors = grep { /ERROR/ } split /\n/, $w->{err};
		is(join("\n", @errors), '', "$label: no writer statement failed");
	}
	is($missed, 0, "$label: all $reads reads during the move found their key");
	is(scalar(@written), 30, "$label: the 30 new keys of the slot were written");
	push @all_new, @written;
	$version++;
	is( $front->safe_psql('postgres', 'SELECT digest FROM collegedb.shard_map ORDER BY version DESC LIMIT 1'),
		$snap_digest, "$label: the snapshot's digest is the installed one");
	note sprintf('%s: moved in %.2f s', $label, $t1 - $t0);
	check_after_move($label, $slot, $to, $version, \@written);
}

# --- kill -9 of the mover mid-move --------------------------------------------------

{
	my ($slot, $from, $to) = (6, 'l', 'm');
	my $label = "slot $slot $from -> $to, job worker killed";
	is(map_shard($slot), $from, "$label: the slot starts on $from");
	my @moving = slot_keys($slot);
	ok(@moving >= 3, "$label: the slot holds " . scalar(@moving) . ' keys');

	$front->safe_psql('postgres',
		"ALTER SYSTEM SET collegedb.test_pause_after_step = 'copied'; SELECT pg_reload_conf()");
	ok(poll_until($front, 'SHOW collegedb.test_pause_after_step', 'copied', 30), "$label: movers pause after copied");
	my $off = -s $front->logfile;
	my $caller = psql_start($front, "SELECT collegedb.move_slot($slot, '$to')");
	ok(wait_for_log_match($front, qr/collegedb: move \d+ paused after step copied/, $off, 60),
		"$label: a mover waits after copied");

	# in the pause: the slot routes to both shards, keys read and write, a new key
	# lands on the target
	my ($unwritten) = new_keys($slot, "route$slot", 1);
	is( $front->safe_psql('postgres',
			"SELECT string_agg(shard || ':' || source || ':' || slot, ' ') FROM collegedb.route('$unwritten')"),
		"$to:slot:$slot $from:slot:$slot", "$label: route() gives a key of the slot the target, then the source");
	my $found = $front->safe_psql('postgres', join ' UNION ALL ',
		map { "SELECT count(*) FROM collegedb.all_json('$_', 'SELECT id FROM counters WHERE id = \$1', '$_')" } @moving);
	is(join(',', split /\n/, $found), join(',', map { 1 } @moving), "$label: every key of the slot reads once");
	for my $k (@moving)
	{
		my $v = $front->safe_psql('postgres',
			"SELECT collegedb.run('$k', 'UPDATE counters SET n = n + 1 WHERE id = \$1', '$k')");
		is($v, '1', "$label: $k is incremented during the move");
		$count{$k} += $v;
	}
	my ($nk) = new_keys($slot, "pause$slot", 1);
	is($front->safe_psql('postgres', "SELECT collegedb.run('$nk', 'INSERT INTO counters VALUES (\$1, 0)', '$nk')"),
		'1', "$label: a new key of the slot is written");
	is( $front->safe_psql('postgres',
			"SELECT string_agg(shard, ',') FROM collegedb.fanout('SELECT id FROM counters WHERE id = \$1', '$nk') WHERE value IS NOT NULL"),
		$to, "$label: the new key is on the target");
	push @all_new, $nk;
	my @written = ($nk);

	my $pid = $front->safe_psql('postgres',
		q{SELECT lease_pid FROM collegedb.job WHERE kind = 'move_slot' AND state = 'running'});
	ok($pid =~ /^\d+$/, "$label: the job's worker is pid $pid");
	$front->safe_psql('postgres', 'ALTER SYSTEM RESET collegedb.test_pause_after_step; SELECT pg_reload_conf()');
	ok(poll_until($front, 'SHOW collegedb.test_pause_after_step', '', 30), "$label: the pause is off for new workers");
	kill 'KILL', $pid;
	my $r = psql_finish($caller, 60);
	isnt($r->{rc}, 0, "$label: the caller's move_slot fails with the crash");
	ok(wait_for_log_match($front, qr/all server processes terminated; reinitializing/, $off, 30),
		"$label: the postmaster restarts every process");
	$front->poll_query_until('postgres', 'SELECT true')
	  or die 'the front did not accept connections after the crash';
	ok( poll_until(
			$front, q{SELECT string_agg(state, ',') FROM collegedb.jobs WHERE kind = 'move_slot' AND id = (SELECT max(id) FROM collegedb.jobs)},
			'done', 120),
		"$label: the coordinator resumes the job to its end");
	ok( poll_until(
			$front, q{SELECT count(*) FROM collegedb.moves WHERE step NOT IN ('done', 'failed')}, '0', 60),
		"$label: every key's move is done");
	$version++;
	check_after_move($label, $slot, $to, $version, \@written);
	is( $front->safe_psql('postgres',
			q{SELECT (result->>'version') FROM collegedb.jobs WHERE id = (SELECT max(id) FROM collegedb.jobs)}),
		$version, "$label: the job's result is the snapshot of version $version");
}

# --- a transaction that wrote a new key of the slot before its move began ---------

{
	my ($slot, $from, $to) = (10, 'm', 'p');
	my $label = "slot $slot $from -> $to, a writer's transaction open";
	is(map_shard($slot), $from, "$label: the slot starts on $from");
	my ($nk) = new_keys($slot, "open$slot", 1);
	# the writer's INSERT routes by the map alone (no move yet), then its
	# transaction stays open until the job waits for it
	my $writer = psql_start($front, qq{
		BEGIN;
		SELECT collegedb.run('$nk', 'INSERT INTO counters VALUES (\$1, 7)', '$nk');
		SET application_name = 'slot_writer_open';
		DO \$\$
		BEGIN
			FOR i IN 1 .. 1200 LOOP
				PERFORM pg_stat_clear_snapshot();
				IF EXISTS (SELECT 1 FROM pg_stat_activity
				            WHERE backend_type = 'collegedb job' AND wait_event = 'advisory') THEN
					RETURN;
				END IF;
				PERFORM pg_sleep(0.05);
			END LOOP;
			RAISE EXCEPTION 'the slot move never waited for this transaction';
		END \$\$;
		COMMIT;});
	ok( poll_until(
			$front, q{SELECT count(*) FROM pg_stat_activity WHERE application_name = 'slot_writer_open'},
			'1', 60),
		"$label: the writer wrote its new key and keeps its transaction open");
	my $caller = psql_start($front,
		qq{SELECT (s->>'version') FROM collegedb.move_slot($slot, '$to') AS s});
	my $w = psql_finish($writer, 90);
	is($w->{rc}, 0, "$label: the job waited for the writer's transaction, which committed")
	  or diag $w->{stderr};
	my $r = psql_finish($caller, 90);
	$version++;
	is($r->{stdout}, $version, "$label: move_slot returns version $version") or diag $r->{stderr};
	$count{$nk} = 7;
	push @keys, $nk;
	check_after_move($label, $slot, $to, $version, [$nk]);
}

# every key still reads once
is( $front->safe_psql('postgres', q{
		SELECT count(*) FROM generate_series(1, 160) AS i
		 WHERE (SELECT count(*) FROM collegedb.all_json('key-' || i, 'SELECT id FROM counters WHERE id = $1', 'key-' || i)) = 1}),
	'160', 'every key reads exactly once at the end');

done_testing();
