# 080_moves_concurrency: writes and reads running while rebalance moves their keys.
#
# Reads through a stale mapping cache follow the tombstone: a session that cached a
# key's shard reads (and writes) it correctly right after another session moved it,
# both when the move's invalidation reaches it and when it does not (the mapping
# table's invalidation trigger disabled, so the cache is genuinely stale).
#
# Then writer sessions (independent psql processes) increment a counter row of each
# key (UPDATE counters SET n = n + 1 via collegedb.run), insert uniquely tagged rows
# under the keys (INSERT INTO events), run transactions kept open across statements
# (BEGIN; increment; sleep; increment; insert; COMMIT: they hold the key's lock on its
# shard while they sleep) and read the keys, while collegedb.rebalance moves those
# keys around: between two PostgreSQL databases (a shard added, then one drained, then
# back), from a SQLite shard being drained to PostgreSQL, from PostgreSQL to MariaDB
# and back; then, on a second front under computed placement, from the epoch's old
# owners (PostgreSQL, SQLite) to new shards (PostgreSQL, MariaDB), then off SQLite and
# off MariaDB.  Every statement's outcome is counted on the client side: afterwards
# each counter equals the number of increments that returned 1 (two for a committed
# transaction), every insert that returned 1 (or committed) is there exactly once (and
# no other), each key's rows are on one shard, every read during the moves found its
# key, no move went from a shard to itself and no tombstone points at its own shard.
use strict;
use warnings;

use IPC::Run ();
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use CollegeDB::TestHarness;

my $t_start = time;
my $front = front_node(
	'front',
	extension => 1,
	conf      => {
		max_connections      => 60,
		max_worker_processes => 20,
		shared_buffers       => '32MB',
		log_statement        => 'none',    # thousands of writer statements
		# batches of two keys: the rebalances last long enough for the writers to
		# meet them (on SQLite, batches of 8 ended before 20 writes landed in the
		# window), and every batch step runs among the writers many times;
		# t/093 moves full batches among writers
		'collegedb.move_batch_keys' => 2,
	});
my $shard = pg_shard_node('shards', conf => { max_connections => 100, log_statement => 'none' });
$shard->safe_psql('postgres', 'CREATE DATABASE p1');
$shard->safe_psql('postgres', 'CREATE DATABASE p2');
my $sqlite = sqlite_dir() . '/l1.db';

$front->safe_psql(
	'postgres', qq{
	CREATE SERVER p1 FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ pg_server_options($shard, dbname => 'p1') ]});
	CREATE USER MAPPING FOR PUBLIC SERVER p1 OPTIONS (user 'postgres');
	CREATE SERVER p2 FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ pg_server_options($shard, dbname => 'p2') ]});
	CREATE USER MAPPING FOR PUBLIC SERVER p2 OPTIONS (user 'postgres');
	CREATE SERVER l1 FOREIGN DATA WRAPPER collegedb
	  OPTIONS (@{[ sqlite_server_options($sqlite) ]}, busy_timeout '10000');
	SELECT collegedb.add_shard(s) FROM unnest(ARRAY['p1', 'p2', 'l1']) AS s;
	SELECT count(*) FROM collegedb.run_on_all('CREATE TABLE counters (id TEXT PRIMARY KEY, n INTEGER NOT NULL)');
	SELECT count(*) FROM collegedb.run_on_all('CREATE TABLE events (ekey TEXT NOT NULL, tag TEXT NOT NULL)');
	SELECT collegedb.register_table('counters', 'id');
	SELECT collegedb.register_table('events', 'ekey');
});

# Creates keys with a zero counter, each pinned to a shard.
sub make_keys
{
	my ($shard_name, @keys) = @_;
	my $array = 'ARRAY[' . join(', ', map { "'$_'" } @keys) . ']';
	$front->safe_psql('postgres', qq{
		SELECT count(collegedb.set_mapping(k, '$shard_name')) FROM unnest($array) AS k;
		SELECT sum(collegedb.run(k, 'INSERT INTO counters VALUES (\$1, 0)', k)) FROM unnest($array) AS k;
	});
	return;
}

# --- stale caches follow the tombstone -------------------------------------------

make_keys('p1', 'stale1', 'stale2');
my $sa = bg_session($front);
my $sb = bg_session($front);
my $read = q{SELECT collegedb.first('%s', 'SELECT n FROM counters WHERE id = $1', '%s')->>'n'};

is(bg_query($sa, sprintf($read, 'stale1', 'stale1'))->{stdout}, '0', 'session A reads stale1 (p1)');
my $r = bg_query($sb, q{SELECT collegedb.reassign_shard('stale1', 'p2')->>'to'});
is($r->{stdout}, 'p2', 'session B moves stale1 to p2') or diag $r->{stderr};
is(bg_query($sa, sprintf($read, 'stale1', 'stale1'))->{stdout}, '0',
	'session A reads stale1 right after the move');
is(bg_query($sa, q{SELECT shard || '/' || source || '/' || hops FROM collegedb.route('stale1')})->{stdout},
	'p2/mapping/0', "session A's cache was invalidated by the move");

# A genuinely stale cache: the trigger that invalidates every backend's cache is off,
# so session A keeps believing stale2 is on p1 after B moves it.
bg_query($sb, 'ALTER TABLE collegedb.mapping DISABLE TRIGGER mapping_changed');
is(bg_query($sa, sprintf($read, 'stale2', 'stale2'))->{stdout}, '0',
	'session A reads stale2 (caches p1)');
$r = bg_query($sb, q{SELECT collegedb.reassign_shard('stale2', 'l1')->>'to'});
is($r->{stdout}, 'l1', 'session B moves stale2 to l1 (SQLite)') or diag $r->{stderr};
is(bg_query($sa, q{SELECT shard || '/' || source || '/' || hops FROM collegedb.route('stale2')})->{stdout},
	'l1/tombstone/1', "session A's mapping is stale: route() follows p1's tombstone");
is(bg_query($sa, sprintf($read, 'stale2', 'stale2'))->{stdout}, '0',
	'session A reads stale2 through the tombstone');
$r = bg_query($sa,
	q{SELECT collegedb.run('stale2', 'UPDATE counters SET n = n + 1 WHERE id = $1', 'stale2')});
is($r->{stdout}, '1', 'session A updates stale2 through its stale mapping') or diag $r->{stderr};
is( $front->safe_psql('postgres', q{
		SELECT string_agg(shard || '=' || (value->>'n'), ' ' ORDER BY shard)
		  FROM collegedb.fanout('SELECT n FROM counters WHERE id = $1', 'stale2') WHERE error IS NULL}),
	'l1=1', 'the update landed on l1 only, once');
is(bg_query($sa, sprintf($read, 'stale2', 'stale2'))->{stdout}, '1',
	'session A reads the updated value');
bg_query($sb, 'ALTER TABLE collegedb.mapping ENABLE TRIGGER mapping_changed');
$sa->quit;
$sb->quit;

# --- writers ----------------------------------------------------------------------

# A writer: a psql process fed one statement at a time.  An operation's result line
# is "R|<op>|<value>"; the line "E <op>" follows it, success or not.
sub writer_start
{
	my ($name) = @_;
	my $w = { name => $name, in => '', out => '', err => '', pending => undef };
	$w->{run} = IPC::Run::start(
		[
			'psql', '-X', '-A', '-t', '-q', '-v', 'VERBOSITY=verbose',
			'-d', $front->connstr('postgres')
		],
		'<', \$w->{in}, '>', \$w->{out}, '2>', \$w->{err});
	return $w;
}

my $op_seq = 0;
my %ops;    # op id => { kind, key, tag, ok, t_end }

sub writer_send
{
	my ($w, $kind, $key) = @_;
	my $id = ++$op_seq;
	my $sql;
	if ($kind eq 'inc')
	{
		$sql = sprintf q{SELECT 'R', %d, collegedb.run('%s', 'UPDATE counters SET n = n + 1 WHERE id = $1', '%s');},
		  $id, $key, $key;
	}
	elsif ($kind eq 'txn')
	{
		# a transaction kept open across statements: it holds the key's lock on its
		# shard (SQLite: the write lock) while it sleeps; it counts only if it
		# reaches its last statement and commits
		$sql = sprintf q{BEGIN;
SELECT collegedb.run('%1$s', 'UPDATE counters SET n = n + 1 WHERE id = $1', '%1$s');
SELECT pg_sleep(0.05);
SELECT collegedb.run('%1$s', 'UPDATE counters SET n = n + 1 WHERE id = $1', '%1$s');
SELECT collegedb.run('%1$s', 'INSERT INTO events VALUES ($1, $2)', '%1$s', 'tag%2$d');
SELECT 'R', %2$d, 'ok';
COMMIT;
\if :ERROR
\echo F %2$d
\endif}, $key, $id;
	}
	elsif ($kind eq 'ins')
	{
		$sql = sprintf q{SELECT 'R', %d, collegedb.run('%s', 'INSERT INTO events VALUES ($1, $2)', '%s', 'tag%d');},
		  $id, $key, $key, $id;
	}
	else
	{
		$sql = sprintf q{SELECT 'R', %d, count(*) FROM collegedb.all_json('%s', 'SELECT id FROM counters WHERE id = $1', '%s');},
		  $id, $key, $key;
	}
	$ops{$id} = { kind => $kind, key => $key, w => $w->{name} };
	$w->{pending} = $id;
	$w->{in} .= "$sql\n\\echo E $id\n";
	return;
}

# Collects finished operations; true when one finished.
sub writer_collect
{
	my ($w) = @_;
	eval { $w->{run}->pump_nb; 1 } if $w->{run}->pumpable;
	my $progress = 0;
	while ($w->{out} =~ s/\A([^\n]*)\n//)
	{
		my $line = $1;
		if ($line =~ /^R\|(\d+)\|(.*)$/)
		{
			$ops{$1}{value} = $2;
		}
		elsif ($line =~ /^F (\d+)$/)
		{
			$ops{$1}{commit_failed} = 1;
		}
		elsif ($line =~ /^E (\d+)$/)
		{
			my $op = $ops{$1};
			$op->{t_end} = time;
			$op->{ok} =
			  $op->{kind} eq 'txn'
			  ? defined $op->{value} && $op->{value} eq 'ok' && !$op->{commit_failed}
			  : defined $op->{value} && $op->{value} eq '1';
			$w->{pending} = undef;
			$progress = 1;
		}
	}
	while ($w->{err} =~ s/\A([^\n]*)\n//)
	{
		my $line = $1;
		$w->{errors}{$1}++ if $line =~ /^ERROR:\s+([0-9A-Z]{5}: .{0,60})/;
	}
	return $progress;
}

sub writers_stop
{
	my (@writers) = @_;
	for my $w (@writers)
	{
		$w->{in} .= "\\q\n";
		$w->{run}->finish;
	}
	return;
}

# Runs $nwriters writers on @keys while the steps run one after the other: each step
# is [setup SQL, rebalance SQL]; writers start 0.5 s before the first and go on 0.5 s
# after the last, and until they sent 400 operations in all (so that the count of
# writes check_outcome wants does not depend on how fast the moves were).  Returns the
# rebalances' outputs and their time windows.
sub write_during
{
	my ($nwriters, $keys, @steps) = @_;
	my @writers = map { writer_start("w$_") } 1 .. $nwriters;
	my (@results, @windows);
	my $t_first = time + 0.5;
	my $stop_at;
	my ($step, $reb, $reb_t0) = (0, undef, undef);
	my $sent = 0;
	while (1)
	{
		my $now = time;
		my $progress = 0;
		for my $w (@writers)
		{
			$progress |= writer_collect($w);
			next if defined $w->{pending} || defined $stop_at && $now > $stop_at;
			my $key = $keys->[ int(rand(@$keys)) ];
			my $dice = rand;
			writer_send($w, $dice < 0.45 ? 'inc' : $dice < 0.7 ? 'ins' : $dice < 0.9 ? 'txn' : 'read', $key);
			$sent++;
		}
		if (!defined $reb && !defined $stop_at && $now >= $t_first)
		{
			if ($step < @steps)
			{
				$front->safe_psql('postgres', $steps[$step][0]) if $steps[$step][0];
				$reb = psql_start($front, $steps[$step][1]);
				$reb_t0 = time;
			}
			elsif ($sent >= 400)
			{
				$stop_at = $now + 0.5;
			}
		}
		if (defined $reb)
		{
			# pump_nb dies when the process ended since pumpable was last true
			eval { $reb->{run}->pump_nb; 1 } if $reb->{run}->pumpable;
			if (!$reb->{run}->pumpable)
			{
				push @results, psql_finish($reb);
				push @windows, [ $reb_t0, time ];
				$reb = undef;
				$step++;
			}
		}
		last if defined $stop_at && $now > $stop_at && !grep { defined $_->{pending} } @writers;
		usleep(1000) unless $progress;
	}
	my %errors;
	for my $w (@writers)
	{
		$errors{$_} += $w->{errors}{$_} for keys %{ $w->{errors} // {} };
	}
	writers_stop(@writers);
	note 'writer errors: ' . join('; ', map { "$_ x$errors{$_}" } sort keys %errors)
	  if %errors;
	return (\@results, \@windows);
}

# Checks the outcome of the operations on @keys (since op id $first_op).
sub check_outcome
{
	my ($label, $first_op, $keys, $windows) = @_;
	my (%inc, %tags, $nok, $nfail, $during, $reads_bad);
	my %of_keys = map { $_ => 1 } @$keys;
	for my $id (keys %ops)
	{
		my $op = $ops{$id};
		next unless $of_keys{ $op->{key} };
		# the expected state counts every operation on these keys, also of earlier parts
		if ($op->{ok})
		{
			$inc{ $op->{key} }++ if $op->{kind} eq 'inc';
			$inc{ $op->{key} } += 2 if $op->{kind} eq 'txn';
			$tags{"tag$id"} = $op->{key} if $op->{kind} eq 'ins' || $op->{kind} eq 'txn';
		}
		next unless $id > $first_op;
		my $in_window = grep { $op->{t_end} >= $_->[0] && $op->{t_end} <= $_->[1] } @$windows;
		if ($op->{kind} eq 'read')
		{
			$reads_bad++ unless $op->{ok};
			next;
		}
		$op->{ok} ? $nok++ : $nfail++;
		$during++ if $op->{ok} && $in_window;
	}
	$nfail //= 0;
	note "$label: $nok writes succeeded ($during while a rebalance ran), $nfail failed";
	cmp_ok($nok // 0, '>', 200, "$label: the writers got work done");
	cmp_ok($during // 0, '>', 20, "$label: writes succeeded while keys were moving");
	is($reads_bad // 0, 0, "$label: every read during the moves found its key");

	# a move from a shard to itself deletes the key's rows and leaves a tombstone that
	# points at its own shard, which every later read follows until CD006: said first
	is( $front->safe_psql('postgres', q{
		SELECT count(*) FROM collegedb.moves WHERE source = target}),
		'0', "$label: no move went from a shard to itself");
	is( $front->safe_psql('postgres', q{
		SELECT coalesce(string_agg(DISTINCT shard, ' '), '')
		  FROM collegedb.fanout('SELECT moved_to FROM collegedb_tombstones')
		 WHERE error IS NULL AND value->>'moved_to' = shard}),
		'', "$label: no tombstone points at its own shard");

	# the state of the keys' rows
	my $array = 'ARRAY[' . join(', ', map { "'$_'" } @$keys) . ']';
	my $counters = $front->safe_psql('postgres', qq{
		SELECT string_agg(k || '=' || coalesce(collegedb.first(k, 'SELECT n FROM counters WHERE id = \$1', k)->>'n', 'missing'),
		                  ' ' ORDER BY k)
		  FROM unnest($array) AS k});
	{
		is($counters, join(' ', map { "$_=" . ($inc{$_} // 0) } sort @$keys),
			"$label: each counter equals its successful increments");
	}

	my $placement = $front->safe_psql('postgres', qq{
		SELECT count(*) FILTER (WHERE shards = 1), sum(total)
		  FROM (SELECT value->>'id' AS k, count(DISTINCT shard) AS shards, sum((value->>'n')::int) AS total
		          FROM collegedb.fanout('SELECT id, n FROM counters') WHERE error IS NULL
		         GROUP BY 1) s WHERE k = ANY ($array)});
	my $total = 0;
	$total += $_ for values %inc;
	{
		is($placement, scalar(@$keys) . "|$total",
			"$label: each counter row is on one shard; the sum across shards is $total");
	}

	my $events = $front->safe_psql('postgres', qq{
		SELECT value->>'tag', value->>'ekey', count(*) OVER (PARTITION BY value->>'tag')
		  FROM collegedb.fanout('SELECT ekey, tag FROM events') WHERE error IS NULL AND value->>'ekey' = ANY ($array)});
	my (%seen, @dupes, @extra, @wrong);
	for my $line (split /\n/, $events)
	{
		my ($tag, $key, $n) = split /\|/, $line;
		push @dupes, $tag if $n > 1 && !$seen{$tag};
		$seen{$tag} = 1;
		push @extra, $tag unless exists $tags{$tag};
		push @wrong, $tag if exists $tags{$tag} && $tags{$tag} ne $key;
	}
	my @missing = grep { !$seen{$_} } sort keys %tags;
	{
		is(scalar(keys %seen), scalar(keys %tags), "$label: " . scalar(keys %tags) . ' inserted rows');
		is("@missing", '', "$label: no successful insert is missing");
	}
	is("@dupes", '', "$label: no inserted row is there twice");
	is("@extra @wrong", ' ', "$label: no row that was not inserted (or under another key)");
	return;
}

# --- PostgreSQL to PostgreSQL --------------------------------------------------

my @pkeys = map { "c$_" } 1 .. 40;
$front->safe_psql('postgres', q{SELECT collegedb.set_shard_state('l1', writable => false)});
make_keys('p1', @pkeys);
my $first_op = $op_seq;
my $rebalance = q{SELECT moved || ' ' || failed FROM collegedb.rebalance('counters', concurrency => %d)};
my ($results, $windows) = write_during(
	4, \@pkeys,
	[ undef, sprintf($rebalance, 2) ],    # p2 takes its rendezvous share
	[ q{SELECT collegedb.set_shard_state('p1', drain => 'draining')}, sprintf($rebalance, 4) ],
	[
		q{SELECT collegedb.set_shard_state('p1', drain => 'active');
		  SELECT collegedb.set_shard_state('p2', drain => 'draining')}, sprintf($rebalance, 3)
	]);
my $moved = 0;
for my $i (0 .. 2)
{
	my ($n, $failed) = split / /, $results->[$i]{stdout} // '', 2;
	is($failed, '[]', "pg: rebalance " . ($i + 1) . " reports no failed key")
	  or diag "$results->[$i]{stdout} $results->[$i]{stderr}";
	$moved += $n // 0;
	note sprintf 'pg: rebalance %d moved %s keys in %.2f s', $i + 1, $n // '?',
	  $windows->[$i][1] - $windows->[$i][0];
}
cmp_ok($moved, '>=', 40, "pg: the rebalances moved keys ($moved moves)");
is( $front->safe_psql('postgres', q{
		SELECT value->>'n' FROM collegedb.fanout('SELECT count(*) AS n FROM counters WHERE id LIKE ''c%''')
		 WHERE shard = 'p2'}),
	'0', 'pg: after draining p2 it has no counter row left');
check_outcome('pg', $first_op, \@pkeys, $windows);
$front->safe_psql('postgres', q{SELECT collegedb.set_shard_state('p2', drain => 'active')});

# --- SQLite to PostgreSQL ------------------------------------------------------

my @lkeys = map { "d$_" } 1 .. 30;
$front->safe_psql('postgres', q{SELECT collegedb.set_shard_state('l1', writable => true)});
make_keys('l1', @lkeys);
$first_op = $op_seq;
($results, $windows) = write_during(
	4, \@lkeys,
	[ q{SELECT collegedb.set_shard_state('l1', drain => 'draining')}, sprintf($rebalance, 3) ]);
my ($n, $failed) = split / /, $results->[0]{stdout} // '', 2;
is($failed, '[]', 'sqlite: the rebalance reports no failed key')
  or diag "$results->[0]{stdout} $results->[0]{stderr}";
note sprintf 'sqlite: rebalance moved %s keys in %.2f s', $n // '?', $windows->[0][1] - $windows->[0][0];
is( $front->safe_psql('postgres', q{
		SELECT value->>'n' FROM collegedb.fanout('SELECT count(*) AS n FROM counters') WHERE shard = 'l1'}),
	'0', 'sqlite: the drained SQLite shard has no counter row left');
check_outcome('sqlite', $first_op, \@lkeys, $windows);

# --- PostgreSQL to MariaDB ------------------------------------------------------

my $mdb = start_mariadb();
my $mydb = mysql_database($mdb);
mysql_query($mdb, q{
	CREATE TABLE counters (id VARCHAR(64) PRIMARY KEY, n INTEGER NOT NULL);
	CREATE TABLE events (ekey VARCHAR(64) NOT NULL, tag VARCHAR(64) NOT NULL);
}, database => $mydb);
$front->safe_psql('postgres', qq{
	CREATE SERVER my1 FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ mysql_server_options($mdb, dbname => $mydb) ]});
	CREATE USER MAPPING FOR PUBLIC SERVER my1 OPTIONS (@{[ mysql_user_mapping_options($mdb) ]});
	SELECT collegedb.add_shard('my1');
});
# the keys under test on p2; the others of earlier parts stay where they are
my @mkeys = map { "m$_" } 1 .. 30;
make_keys('p2', @mkeys);
$first_op = $op_seq;
($results, $windows) = write_during(
	4, \@mkeys,
	[
		q{SELECT collegedb.set_shard_state(s, drain => 'draining') FROM unnest(ARRAY['p1', 'p2']) AS s},
		sprintf($rebalance, 3)
	]);
($n, $failed) = split / /, $results->[0]{stdout} // '', 2;
{
	# Concurrent movers copying into the same InnoDB table deadlock on gap locks
	# (DELETE of the key's absent rows, then INSERT): the key is reported failed
	# (the coordinator finishes its move later).
	is($failed, '[]', 'to mariadb: the rebalance reports no failed key');
}
note "to mariadb: failed keys: $failed" if ($failed // '') ne '[]';
note sprintf 'to mariadb: rebalance moved %s keys in %.2f s', $n // '?', $windows->[0][1] - $windows->[0][0];
ok(poll_until($front, q{SELECT count(*) FROM collegedb.moves WHERE step <> 'done'}, '0', 60),
	'to mariadb: every move is done in the end (the coordinator finishes failed ones)');
is(mysql_query($mdb, q{SELECT COUNT(*) FROM counters WHERE id LIKE 'm%'}, database => $mydb),
	'30', 'to mariadb: every key under test is on MariaDB');
check_outcome('to mariadb', $first_op, \@mkeys, $windows);

# --- MariaDB to PostgreSQL ------------------------------------------------------

# One mover: this part is about writers against a MariaDB source, not about movers
# deadlocking each other on the target.
$first_op = $op_seq;
($results, $windows) = write_during(
	4, \@mkeys,
	[
		q{SELECT collegedb.set_shard_state(s, drain => 'active') FROM unnest(ARRAY['p1', 'p2']) AS s;
		  SELECT collegedb.set_shard_state('my1', drain => 'draining')},
		sprintf($rebalance, 1)
	]);
($n, $failed) = split / /, $results->[0]{stdout} // '', 2;
is($failed, '[]', 'from mariadb: the rebalance reports no failed key')
  or diag "$results->[0]{stdout} $results->[0]{stderr}";
note sprintf 'from mariadb: rebalance moved %s keys in %.2f s', $n // '?', $windows->[0][1] - $windows->[0][0];
ok(poll_until($front, q{SELECT count(*) FROM collegedb.moves WHERE step <> 'done'}, '0', 60),
	'from mariadb: every move is done');
is(mysql_query($mdb, q{SELECT COUNT(*) FROM counters}, database => $mydb),
	'0', 'from mariadb: the drained MariaDB shard has no counter row left');
# The MariaDB key lock does not exclude writers: the mover's "SELECT count(*) FROM
# collegedb_tombstones WHERE shard_key = ? FOR UPDATE" and the writers' guard "...
# LOCK IN SHARE MODE" both take only InnoDB gap locks when the key has no tombstone,
# and gap locks never conflict; the mover reads the rows from a REPEATABLE READ
# snapshot and then deletes the current rows, so a write committed in between is
# deleted without having been copied.
check_outcome('from mariadb', $first_op, \@mkeys, $windows);

# --- computed placement: a second front ---------------------------------------

$front->stop;
$shard->safe_psql('postgres', "CREATE DATABASE $_") for qw(p3 p4);
my $sqlite2 = sqlite_dir() . '/l2.db';
my $mydb2 = mysql_database($mdb, 'collegedb_080_computed');
mysql_query($mdb, q{
	CREATE TABLE counters (id VARCHAR(64) PRIMARY KEY, n INTEGER NOT NULL);
	CREATE TABLE events (ekey VARCHAR(64) NOT NULL, tag VARCHAR(64) NOT NULL);
}, database => $mydb2);
$front = front_node(
	'front2',
	extension => 1,
	conf      => {
		max_connections      => 60,
		max_worker_processes => 20,
		shared_buffers       => '32MB',
		log_statement        => 'none',
	});
$front->safe_psql('postgres', qq{
	CREATE SERVER p3 FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ pg_server_options($shard, dbname => 'p3') ]});
	CREATE USER MAPPING FOR PUBLIC SERVER p3 OPTIONS (user 'postgres');
	CREATE SERVER p4 FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ pg_server_options($shard, dbname => 'p4') ]});
	CREATE USER MAPPING FOR PUBLIC SERVER p4 OPTIONS (user 'postgres');
	CREATE SERVER l2 FOREIGN DATA WRAPPER collegedb
	  OPTIONS (@{[ sqlite_server_options($sqlite2) ]}, busy_timeout '10000');
	CREATE SERVER my2 FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ mysql_server_options($mdb, dbname => $mydb2) ]});
	CREATE USER MAPPING FOR PUBLIC SERVER my2 OPTIONS (@{[ mysql_user_mapping_options($mdb) ]});
	SELECT collegedb.add_shard(s) FROM unnest(ARRAY['p3', 'p4', 'l2', 'my2']) AS s;
	SELECT collegedb.run_on_shard(s, 'CREATE TABLE counters (id TEXT PRIMARY KEY, n INTEGER NOT NULL)')
	  FROM unnest(ARRAY['p3', 'p4', 'l2']) AS s;
	SELECT collegedb.run_on_shard(s, 'CREATE TABLE events (ekey TEXT NOT NULL, tag TEXT NOT NULL)')
	  FROM unnest(ARRAY['p3', 'p4', 'l2']) AS s;
	SELECT collegedb.register_table('counters', 'id');
	SELECT collegedb.register_table('events', 'ekey');
	SELECT collegedb.set_shard_state(s, writable => false) FROM unnest(ARRAY['p4', 'my2']) AS s;
	SELECT collegedb.configure(placement => 'computed');
});
my @ckeys = map { "e$_" } 1 .. 40;
{
	my $array = 'ARRAY[' . join(', ', map { "'$_'" } @ckeys) . ']';
	$front->safe_psql('postgres',
		qq{SELECT sum(collegedb.run(k, 'INSERT INTO counters VALUES (\$1, 0)', k)) FROM unnest($array) AS k});
}
$first_op = $op_seq;
($results, $windows) = write_during(
	4, \@ckeys,
	[
		q{SELECT collegedb.set_shard_state(s, writable => true) FROM unnest(ARRAY['p4', 'my2']) AS s},
		sprintf($rebalance, 3)
	],
	[ q{SELECT collegedb.set_shard_state('l2', drain => 'draining')}, sprintf($rebalance, 3) ],
	[ q{SELECT collegedb.set_shard_state('my2', drain => 'draining')}, sprintf($rebalance, 2) ]);
for my $i (0 .. 2)
{
	my ($n, $failed) = split / /, $results->[$i]{stdout} // '', 2;
	is($failed, '[]', "computed: rebalance " . ($i + 1) . " reports no failed key")
	  or diag "$results->[$i]{stdout} $results->[$i]{stderr}";
	note sprintf 'computed: rebalance %d moved %s keys in %.2f s', $i + 1, $n // '?',
	  $windows->[$i][1] - $windows->[$i][0];
}
is($front->safe_psql('postgres', 'SELECT max(epoch) FROM collegedb.epochs'), '5',
	'computed: each change of the eligible shards published an epoch');
ok(poll_until($front, q{SELECT count(*) FROM collegedb.moves WHERE step <> 'done'}, '0', 60),
	'computed: every move is done');
is( $front->safe_psql('postgres', q{
		SELECT coalesce(sum((value->>'n')::int), 0) FROM collegedb.fanout('SELECT count(*) AS n FROM counters')
		 WHERE shard IN ('l2', 'my2')}),
	'0', 'computed: the drained SQLite and MariaDB shards hold no counter row');
check_outcome('computed', $first_op, \@ckeys, $windows);

note sprintf "080 took %.1f s", time - $t_start;
done_testing();
