# Batched moves under faults (issue 29's proof).  A rebalance moves its keys in full
# batches (collegedb.move_batch_keys = 1000, collegedb.move_batch_time = 0) from two
# PostgreSQL shards onto a third, at concurrency 2, while two writers update random
# keys of the table being moved through collegedb.run, each acknowledged update
# recorded by key.
#
# Size: COLLEGEDB_094_KEYS keys (default 200,000) are seeded on p1 and p2, split over
# five tables of one fifth each, one table per fault case below; a case rebalances
# its own table only (a rebalance plans the keys of its table), so each moves about
# a third of its fifth onto p3 (about 13,000 keys at the default size) and the whole
# test moves a third of the 200,000 keys while it stays within a few minutes on two
# cores.  Every tenth key of every table also has a row in a sixth table, notes,
# which moves with its key.
#
# (a) For each step of a batch: after 'journaled', after 'copied', inside the source
#     step once the target committed its copy (test_pause_in_step 'source'), after
#     'source_done': the movers pause there, a paused mover is killed with SIGKILL
#     (the front restarts, restart_after_crash = on), the coordinator runs the job
#     again, and once it ends:
# (b) and the shard cluster restarted (pg_ctl restart -m immediate) while a batch is
#     inside its source step (the target's copy committed, the source's DELETE
#     waiting for a row lock the test holds on the source):
# the job is done (in (b) it is retried once if the restart failed it, and the test
# says which happened), every key's rows are on exactly one of the three shards, the
# one its mapping names, which is its owner among the three; every acknowledged
# update is there (an update whose outcome the writer did not see, at a crash or an
# error, may or may not be); collegedb.moves has no step but done and failed; the
# shard cluster has no prepared transaction and, once idle, no advisory lock.
#
# While the movers wait inside the source step, a scan of every shard counts the
# paused batches' rows twice (documented: README, "Reads during a move"); the test
# notes the count and checks that such a key reads once through the router.  After
# the shard restart the job ends done with some keys counted failed while the
# coordinator still finishes their moves (the target's copy still there, the mapping
# on the source): a TODO test records it, and the checks wait for the moves.
#
# Runtime: about 160 s on an idle 2-core machine, mostly the coordinator resuming the
# killed batches' moves one key at a time (two paused batches, 2,000 keys, per kill
# before source_done); under load that part alone took 100 s in one run.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use CollegeDB::TestHarness;

my $t_start = time;
my $NKEYS = $ENV{COLLEGEDB_094_KEYS} // 200_000;
# table => [key prefix, fault]
my @cases = (
	[ 'tj', 'j', 'after journaled' ],
	[ 'tc', 'c', 'after copied' ],
	[ 'ts', 's', 'inside source' ],
	[ 'td', 'd', 'after source_done' ],
	[ 'tr', 'r', 'shard restart' ]);
my $PER = int($NKEYS / @cases);

my $front = front_node(
	'front',
	conf => {
		max_connections               => 80,
		max_worker_processes          => 24,
		restart_after_crash           => 'on',
		log_statement                 => 'none',
		'collegedb.recovery_interval' => '500ms',
		'collegedb.move_batch_keys'   => 1000,
		'collegedb.move_batch_time'   => 0,
	});
my $pg = pg_shard_node('shards', conf => { max_connections => 120, log_statement => 'none' });
$front->safe_psql('postgres', 'CREATE EXTENSION collegedb');
add_pg_shards($front, $pg, p1 => 'p1', p2 => 'p2');
$pg->safe_psql('postgres', 'CREATE DATABASE p3');
my @tables = ((map { $_->[0] } @cases), 'notes');
my $create = 'CREATE TABLE %s (id VARCHAR(64) PRIMARY KEY, v INTEGER NOT NULL)';
$pg->safe_psql('p3', join ';', map { sprintf $create, $_ } @tables);

sub sql { return $front->safe_psql('postgres', $_[0], timeout => $_[1] // 300) }

sql(pg_shard_servers($pg, p3 => 'p3')
	  . join('', map { sprintf "SELECT count(*) FROM collegedb.run_on_all('$create');\n", $_ } @tables)
	  . join('', map { "SELECT collegedb.register_table('$_', 'id');\n" } @tables)
	  . join('', map { "CREATE FOREIGN TABLE $_ (id text, v integer) SERVER collegedb OPTIONS (key_column 'id');\n" } @tables));

# --- seeding: on the shards directly, and in the mapping catalog -----------------------

my $t0 = time;
my $allkeys = join ' UNION ALL ',
  map { "SELECT '$_->[1]' || i AS k FROM generate_series(1, $PER) AS i" } @cases;
for my $s (qw(p1 p2))
{
	my $list = sql(qq{SELECT string_agg(k, ',') FROM ($allkeys) AS s
		WHERE collegedb.rendezvous_owner(k, ARRAY['p1', 'p2']) = '$s'});
	$pg->safe_psql($s, join('', map { qq{
		INSERT INTO $_->[0] SELECT k, 1 FROM unnest(string_to_array('$list', ',')) AS k
		 WHERE left(k, 1) = '$_->[1]';} } @cases) . qq{
		-- every tenth key has a row in notes as well
		INSERT INTO notes SELECT k, 7 FROM unnest(string_to_array('$list', ',')) AS k
		 WHERE substr(k, 2)::int % 10 = 0;});
}
sql(qq{INSERT INTO collegedb.mapping (key, shard)
	SELECT collegedb.mapping_id(k), n.number
	  FROM ($allkeys) AS s JOIN collegedb.shard_number n ON n.name = collegedb.rendezvous_owner(k, ARRAY['p1', 'p2'])});
note sprintf 'seeding %d keys took %.1f s', $PER * @cases, time - $t0;
sql(q{SELECT collegedb.add_shard('p3')});

# --- writers ----------------------------------------------------------------------------

# A writer runs psql on batches of updates of random keys of one table through
# collegedb.run, each update numbered; when psql ends (a batch done, or its
# connection lost in a crash) it records by key what was acknowledged ("A key"),
# what updated no row ("Z key n"), and what it sent without seeing the outcome
# ("U key": an error, or the statement in flight when the connection was lost),
# then starts again until the stop file exists.
my $tmp = PostgreSQL::Test::Utils::tempdir();
my $writer = "$tmp/writer.pl";
open my $wfh, '>', $writer or die "$writer: $!";
print $wfh <<'WRITER';
use strict;
use warnings;
my ($connstr, $table, $prefix, $n, $exclude, $stop, $out, $seed) = @ARGV;
srand($seed);
open STDERR, '>>', "$out.err" or die "$out.err: $!";
open my $o, '>>', $out or die "$out: $!";
$o->autoflush(1);
my $seq = 0;
until (-e $stop)
{
	my @batch;
	open my $f, '>', "$out.sql" or die "$out.sql: $!";
	for (1 .. 200)
	{
		my $k;
		do { $k = $prefix . (1 + int rand $n) } while $k eq $exclude;
		$seq++;
		push @batch, [ $seq, $k ];
		print $f "SELECT $seq, collegedb.run('$k', 'UPDATE $table SET v = v + 1 WHERE id = \$1', '$k');\n";
		# at most about 200 updates a second: the movers share two cores with them
		print $f "SELECT pg_sleep(0.005);\n";
	}
	close $f;
	open my $p, '-|', 'psql', '-X', '-A', '-t', '-q', '-f', "$out.sql", '-d', $connstr
	  or die "psql: $!";
	my %got;
	while (my $line = <$p>)
	{
		chomp $line;
		my ($s, $c) = split /\|/, $line;
		$got{$s} = $c if defined $c;
	}
	close $p;
	my $max = $batch[0][0] - 1;
	$max = $_ > $max ? $_ : $max for keys %got;
	for my $b (@batch)
	{
		my ($s, $k) = @$b;
		if (exists $got{$s}) { print $o ($got{$s} eq '1' ? "A $k\n" : "Z $k $got{$s}\n") }
		elsif ($s <= $max + 1) { print $o "U $k\n" }
	}
	select undef, undef, undef, 0.2 unless %got;
}
WRITER
close $wfh;

sub start_writers
{
	my ($table, $prefix, $exclude) = @_;
	my @w;
	for my $i (1, 2)
	{
		my $out = "$tmp/$table.w$i";
		push @w, {
			out => $out,
			run => IPC::Run::start(
				[ 'perl', $writer, $front->connstr('postgres'), $table, $prefix, $PER,
				  $exclude // '', "$tmp/$table.stop", $out, $i ],
				'<', '/dev/null', '>', '/dev/null', '2>', "$out.perl-err") };
	}
	return { table => $table, w => \@w };
}

# Stops the writers; returns { acked => { key => n }, unsure => { key => n },
# zero => [lines], nacked, nunsure, errors => { message => n } }.
sub stop_writers
{
	my ($ws) = @_;
	open my $fh, '>', "$tmp/$ws->{table}.stop" or die $!;
	close $fh;
	my %r = (acked => {}, unsure => {}, zero => [], nacked => 0, nunsure => 0, errors => {});
	for my $w (@{ $ws->{w} })
	{
		$w->{run}->finish;
		open my $in, '<', $w->{out} or next;
		while (<$in>)
		{
			chomp;
			my ($t, $k) = split / /;
			if ($t eq 'A') { $r{acked}{$k}++; $r{nacked}++ }
			elsif ($t eq 'U') { $r{unsure}{$k}++; $r{nunsure}++ }
			else { push @{ $r{zero} }, $_ }
		}
		close $in;
		if (open my $err, '<', "$w->{out}.err")
		{
			while (<$err>)
			{
				next unless /(?:ERROR|FATAL):\s+(.*)/ || /(server closed the connection|connection to server)/;
				(my $m = $1) =~ s/\d+/N/g;
				$r{errors}{$m}++;
			}
		}
	}
	return \%r;
}

# --- checks -----------------------------------------------------------------------------

my $owners3 = q{ARRAY['p1', 'p2', 'p3']};

# Every row of $table once, on its mapped shard, which is its owner among the three;
# every acknowledged update there ($w: stop_writers' result, or undef: v as seeded).
sub check_table
{
	my ($label, $table, $keys, $moved, $seeded, $w) = @_;
	my $nkeys = @$keys;
	my $rows = sql(qq{
		WITH placed AS (SELECT value->>'id' AS k, value->>'v' AS v, shard
		                  FROM collegedb.fanout('SELECT id, v FROM $table') WHERE error IS NULL)
		SELECT p.k, p.v, p.shard, coalesce(m.shard, '-'), collegedb.rendezvous_owner(p.k, $owners3)
		  FROM placed p LEFT JOIN collegedb.mappings m ON m.key = collegedb.mapping_key(p.k)});
	my (%seen, @twice, @unmapped, @unowned, @lost_ack, @extra);
	for my $line (split /\n/, $rows)
	{
		my ($k, $v, $shard, $mapped, $owner) = split /\|/, $line;
		push @twice, "$k on $seen{$k}{shard} and $shard" if $seen{$k};
		$seen{$k} = { v => $v, shard => $shard };
		push @unmapped, "$k on $shard, mapped to $mapped" if $mapped ne $shard;
		push @unowned, "$k on $shard, owner $owner" if $owner ne $shard && $moved->{ substr($k, 0, 1) };
		if ($w)
		{
			my $a = $w->{acked}{$k} // 0;
			my $u = $w->{unsure}{$k} // 0;
			push @lost_ack, "$k: v $v on $shard, seeded $seeded + $a acknowledged" if $v - $seeded < $a;
			push @extra, "$k: v $v, seeded $seeded + $a acknowledged + $u unsure" if $v - $seeded > $a + $u;
		}
		elsif ($v != $seeded)
		{
			push @extra, "$k: v $v, seeded $seeded";
		}
	}
	my @missing = grep { !$seen{$_} } @$keys;
	my $cut = sub { my @l = @_; return scalar(@l) . (@l ? ': ' . join('; ', @l[ 0 .. ($#l < 9 ? $#l : 9) ]) : '') };
	is(scalar(keys %seen), $nkeys, "$label: $table has $nkeys keys on the shards");
	is($cut->(@missing), '0', "$label: no key of $table is missing");
	is($cut->(@twice), '0', "$label: no key of $table has rows on two shards");
	is($cut->(@unmapped), '0', "$label: every row of $table is on the shard its mapping names");
	is($cut->(@unowned), '0', "$label: ... which is its owner among the three (tables rebalanced so far)");
	is($cut->(@lost_ack), '0', "$label: every acknowledged update of $table is there");
	is($cut->(@extra), '0', "$label: no update of $table is there that was not made");
	return;
}

my %moved;    # the key prefixes of the tables rebalanced so far
my @notes = map { my $p = $_->[1]; map { "$p$_" } grep { $_ % 10 == 0 } 1 .. $PER } @cases;

sub check_after
{
	my ($label, $table, $prefix, $w) = @_;
	$moved{$prefix} = 1;
	ok( poll_until($front,
			q{SELECT count(*) FROM collegedb.moves WHERE step NOT IN ('done', 'failed')}, '0', 60),
		"$label: collegedb.moves has no step but done and failed");
	is(sql(q{SELECT count(*) FROM collegedb.fanout('SELECT 1') WHERE error IS NOT NULL}), '0',
		"$label: every shard answers");
	check_table($label, $table, [ map { "$prefix$_" } 1 .. $PER ], \%moved, 1, $w);
	# the notes of the keys moved so far moved with them; the others' stay as they were
	check_table($label, 'notes', \@notes, \%moved, 7, undef);
	is(join(', ', @{ $w->{zero} }), '', "$label: no writer's update found no row");
	ok(poll_until($pg, 'SELECT count(*) FROM pg_prepared_xacts', '0', 60),
		"$label: no prepared transaction on the shards");
	ok(poll_until($pg, q{SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'}, '0', 60),
		"$label: no advisory lock held on the shards once idle")
	  or diag $pg->safe_psql('postgres', q{SELECT l.pid, l.database, a.state, left(a.query, 80)
		  FROM pg_locks l LEFT JOIN pg_stat_activity a USING (pid) WHERE l.locktype = 'advisory'});
	note sprintf '%s: writers: %d acknowledged, %d unsure; moves failed: %s; errors seen: %s',
	  $label, $w->{nacked}, $w->{nunsure},
	  sql(q{SELECT count(*) FROM collegedb.moves WHERE step = 'failed'}),
	  join('; ', map { "$_ x$w->{errors}{$_}" } sort keys %{ $w->{errors} }) || 'none';
	cmp_ok($w->{nacked}, '>', 0, "$label: the writers' updates were acknowledged");
	return;
}

sub set_conf
{
	my ($name, $value) = @_;
	sql(defined $value
		? "ALTER SYSTEM SET $name = '$value'; SELECT pg_reload_conf()"
		: "ALTER SYSTEM RESET $name; SELECT pg_reload_conf()");
	ok(poll_until($front, "SHOW $name", $value // '', 30), "$name is '" . ($value // 'reset') . "'");
	return;
}

# --- (a) a SIGKILL at each step of a batch ----------------------------------------------

for my $case (@cases[ 0 .. 3 ])
{
	my ($table, $prefix, $label) = @$case;
	my ($where, $step) = split / /, $label;
	my $guc = $where eq 'inside' ? 'collegedb.test_pause_in_step' : 'collegedb.test_pause_after_step';
	my $tc = time;
	my $planned = sql(qq{SELECT moved FROM collegedb.rebalance('$table', dry_run => true)});
	cmp_ok($planned, '>=', $PER / 4, "$label: $table has $planned keys to move");

	set_conf($guc, $step);
	my $w = start_writers($table, $prefix);
	my $off = -s $front->logfile;
	my $job = sql(qq{SELECT collegedb.schedule_rebalance('$table', concurrency => 2)});
	my ($pid, $id) = wait_for_log_match($front,
		qr/\[(\d+)\] LOG:  collegedb: move (\d+) paused \Q$where\E step \Q$step\E\b/, $off, 120);
	if (!ok(defined $pid, "$label: a mover pauses"))
	{
		stop_writers($w);
		BAIL_OUT("the mover did not pause $label");
	}
	my $at = $where eq 'inside' ? 'copied' : $step;
	my $inbatch = sql(qq{SELECT count(*) FROM collegedb.moves WHERE step = '$at'
		AND lease_pid = (SELECT lease_pid FROM collegedb.moves WHERE id = $id)});
	cmp_ok($inbatch, '>', 1, "$label: the paused batch holds $inbatch moves at step $at");
	if ($where eq 'inside')
	{
		# between the target's commit and the source's a scan of every shard counts
		# the batch's rows twice (README, "Reads during a move"); a routed read, once
		my ($all, $distinct) = split /\|/, sql(qq{SELECT count(*), count(DISTINCT id) FROM $table});
		is($distinct, $PER, "$label: a scan through the front reads every key while the movers wait");
		note "$label: the scan counts $all rows of $PER keys (a paused batch's are on both shards)";
		my $k = sql(qq{SELECT min(k) FROM (SELECT value->>'id' AS k FROM collegedb.fanout('SELECT id FROM $table')
			WHERE error IS NULL GROUP BY 1 HAVING count(*) > 1) AS d});
		is(sql(qq{SELECT count(*) FROM collegedb.all_json('$k', 'SELECT id FROM $table WHERE id = \$1', '$k')}),
			'1', "$label: a key of a paused batch, on both shards, reads once through the router ($k)");
	}
	else
	{
		is(sql(qq{SELECT count(*) || '/' || count(DISTINCT id) FROM $table}), "$PER/$PER",
			"$label: a scan through the front reads every row once while the movers wait");
	}
	set_conf($guc, undef);
	kill 'KILL', $pid;
	ok(wait_for_log_match($front, qr/all server processes terminated; reinitializing/, $off, 60),
		"$label: the postmaster restarts every process");
	$front->poll_query_until('postgres', 'SELECT true')
	  or die 'the front did not accept connections after the crash';
	is(sql(qq{SELECT state || '/' || failed FROM collegedb.wait_for_job($job, '300 s')}, 400), 'done/0',
		"$label: the coordinator runs the job again, to done");
	my $res = stop_writers($w);
	check_after($label, $table, $prefix, $res);
	note sprintf '%s: %d keys, %.1f s', $label, $planned, time - $tc;
}

# --- (b) the shard cluster restarts while a batch is inside its source step ---------------

{
	my ($table, $prefix, $label) = @{ $cases[4] };
	my $tc = time;
	my $planned = sql(qq{SELECT moved FROM collegedb.rebalance('$table', dry_run => true)});
	cmp_ok($planned, '>=', $PER / 4, "$label: $table has $planned keys to move");
	# a key that moves to p3; the test holds its row on the source, so the DELETE of
	# its batch's source step waits after the target committed its copy (the
	# writers leave it alone: their guard would keep it out of any batch)
	my ($key, $source) = split /\|/, sql(qq{SELECT k, collegedb.rendezvous_owner(k, ARRAY['p1', 'p2'])
		FROM (SELECT '$prefix' || i AS k FROM generate_series(1, 1000) AS i) AS s
		WHERE collegedb.rendezvous_owner(k, $owners3) = 'p3' ORDER BY k DESC LIMIT 1});
	my $blocker = bg_session($pg, dbname => $source);
	bg_query($blocker, 'BEGIN');
	is(bg_query($blocker, "SELECT id FROM $table WHERE id = '$key' FOR UPDATE")->{stdout}, $key,
		"$label: the test holds $key\'s row on $source");
	my $w = start_writers($table, $prefix, $key);
	my $job = sql(qq{SELECT collegedb.schedule_rebalance('$table', concurrency => 2)});
	ok( poll_until($pg, qq{SELECT count(*) > 0 FROM pg_stat_activity
			WHERE datname = '$source' AND wait_event_type = 'Lock' AND query ~* '^delete'}, 't', 120),
		"$label: a DELETE of a batch waits for the row on $source");
	note "$label: the front's movers: " . sql(q{SELECT string_agg(query, '; ' ORDER BY query)
		FROM pg_stat_activity WHERE query LIKE 'collegedb move batch of %'});
	cmp_ok(sql(q{SELECT count(*) FROM pg_stat_activity WHERE query ~ '^collegedb move batch of \d+ keys: source_done$'}),
		'>=', 1, "$label: a mover is in a batch's source step");
	system_or_bail('pg_ctl', '-D', $pg->data_dir, '-l', $pg->logfile, '-m', 'immediate', '-w', 'restart');
	eval { $blocker->quit };
	my ($state, $jmoved, $jfailed) = split /\|/,
	  sql(qq{SELECT state, moved, failed FROM collegedb.wait_for_job($job, '300 s')}, 400);
	note "$label: the job ended $state after the shard restart ($jmoved keys moved, $jfailed failed, of $planned)";
	if ($state ne 'done')
	{
		note "$label: its error: " . sql(qq{SELECT last_error FROM collegedb.jobs WHERE id = $job});
		sql(qq{SELECT collegedb.retry_job($job)});
		$state = sql(qq{SELECT state FROM collegedb.wait_for_job($job, '300 s')}, 400);
		note "$label: retried, it ended $state";
	}
	is($state, 'done', "$label: the job ends done (retried if the restart failed it)");
	my ($unfinished, $twice) = split /\|/, sql(qq{SELECT
		(SELECT count(*) FROM collegedb.moves WHERE step NOT IN ('done', 'failed')),
		(SELECT count(*) FROM (SELECT value->>'id' FROM collegedb.fanout('SELECT id FROM $table')
		   WHERE error IS NULL GROUP BY 1 HAVING count(*) > 1) AS d)});
	note "$label: as the job ended: $unfinished moves unfinished, $twice keys with rows on two shards";
	TODO:
	{
		local $TODO = 'after a shard restart a job can end before the coordinator has finished its moves';
		is("$unfinished/$twice", '0/0', "$label: the job ends with its moves finished");
	}
	my $res = stop_writers($w);
	check_after($label, $table, $prefix, $res);
	note sprintf '%s: %d keys, %.1f s', $label, $planned, time - $tc;
}

# every table reads each of its rows once through the front at the end
is(sql(qq{SELECT count(*) || '/' || count(DISTINCT id) FROM $_->[0]}), "$PER/$PER",
	"at the end: $_->[0] reads each row once") for @cases;
note sprintf '094 took %.1f s', time - $t_start;
done_testing();
