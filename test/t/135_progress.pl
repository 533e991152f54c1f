# 135_progress: a running rebalance or slot move shows its progress.
#
# Hundreds of keys move one at a time (concurrency 1) between two PostgreSQL shards.
# While a scheduled rebalance runs, collegedb.jobs is sampled: keys done never go
# down, reach keys planned at the end (100 %), and while running it shows a rate
# above zero and a time left.  psql's stderr shows NOTICE progress lines from
# wait_for_job ("job N: D of P keys (X%), R keys/s, about S s left") with keys done
# growing, the synchronous rebalance and move_slot show them too, and with
# collegedb.progress_notices off none appears.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use CollegeDB::TestHarness;

my $front = front_node(
	'front',
	extension => 1,
	conf      => {
		max_worker_processes => 20,
		log_statement        => 'none',
		# one key at a time: the jobs run long enough to show their progress
		# every second (batches of 4 ended a 500-key job within 1.7 s, before a
		# second progress line); t/093 and t/092 move batches
		'collegedb.move_batch_keys' => 1,
	});
my $shard = pg_shard_node('shards', conf => { log_statement => 'none' });
$shard->safe_psql('postgres', "CREATE DATABASE $_") for qw(s1 s2);

my $nkeys = 500;

sub sql { return $front->safe_psql('postgres', $_[0]) }

# Runs a script in psql and returns (stdout, stderr).
sub psql_with_stderr
{
	my ($script) = @_;
	my ($out, $err) = ('', '');
	$front->psql('postgres', $script, stdout => \$out, stderr => \$err, on_error_die => 1);
	return ($out, $err);
}

# The progress lines of psql's stderr, as [done, planned, percent].
sub progress_lines
{
	my ($err, $job) = @_;
	my @lines;
	while ($err =~ /NOTICE:  job (\d+): (\d+) of (\d+) keys \((\d+)%\), [\d.]+ keys\/s, about \d+ s left/g)
	{
		push @lines, [ $2, $3, $4 ] if !defined $job || $1 == $job;
	}
	return @lines;
}

sub monotone
{
	my @v = @_;
	for my $i (1 .. $#v)
	{
		return 0 if $v[$i] < $v[ $i - 1 ];
	}
	return 1;
}

sql(qq{
	CREATE SERVER s1 FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ pg_server_options($shard, dbname => 's1') ]});
	CREATE SERVER s2 FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ pg_server_options($shard, dbname => 's2') ]});
	CREATE USER MAPPING FOR PUBLIC SERVER s1 OPTIONS (user 'postgres');
	CREATE USER MAPPING FOR PUBLIC SERVER s2 OPTIONS (user 'postgres');
	SELECT collegedb.add_shard(s) FROM unnest(ARRAY['s1', 's2']) AS s;
	SELECT count(*) FROM collegedb.run_on_all('CREATE TABLE items (id TEXT PRIMARY KEY, v INTEGER)');
	SELECT collegedb.register_table('items', 'id');
	SELECT collegedb.set_shard_state('s2', writable => false);
	SELECT sum(collegedb.run('k' || i, 'INSERT INTO items VALUES (\$1, \$2)', 'k' || i, i))
	  FROM generate_series(1, $nkeys) AS i;
});

# Every key to one shard: the other takes no keys, so the rebalance moves them all.
sub all_to
{
	my ($to) = @_;
	my $from = $to eq 's1' ? 's2' : 's1';
	sql(qq{SELECT collegedb.set_shard_state('$to', writable => true);
	       SELECT collegedb.set_shard_state('$from', writable => false)});
	return;
}

sub count_on
{
	my ($shard_name) = @_;
	return sql(qq{SELECT count(*) FROM collegedb.all_on_shard('$shard_name', 'SELECT id FROM items')});
}

# --- the jobs view while a scheduled rebalance runs -------------------------------

all_to('s2');
my $job = sql(q{SELECT collegedb.schedule_rebalance('items', concurrency => 1)});
my (@done, @seen_rate, @seen_left);
my $t0 = time;
my $state = '';
while (time - $t0 < 300)
{
	my $row = sql(qq{
		SELECT state, coalesce(keys_done::text, ''), coalesce(keys_planned::text, ''),
		       coalesce(percent::text, ''), coalesce(keys_per_second::text, ''),
		       coalesce(extract(epoch FROM time_left)::text, '')
		  FROM collegedb.jobs WHERE id = $job});
	my ($st, $d, $p, $pct, $rate, $left) = split /\|/, $row, -1;
	$state = $st;
	last if $st ne 'running' && $st ne 'queued';
	if ($st eq 'running' && $p ne '' && $p > 0)
	{
		push @done, $d;
		push @seen_rate, $rate if $rate ne '' && $rate > 0;
		push @seen_left, $left if $left ne '';
		is($p, $nkeys, "keys planned is $nkeys while running") if @done == 1;
	}
	usleep(100_000);
}
my $took = time - $t0;
note sprintf 'the rebalance of %d keys took %.1f s; %d samples of the view while running',
  $nkeys, $took, scalar @done;
is($state, 'done', 'the scheduled rebalance ended done');
cmp_ok(scalar(@done), '>=', 3, 'the view was sampled at least three times while the job ran');
ok(monotone(@done), 'keys done never went down (' . join(',', @done[ 0 .. ($#done < 9 ? $#done : 9) ]) . ' ...)');
cmp_ok($done[-1], '>', $done[0], 'keys done grew while the job ran');
cmp_ok(scalar(@seen_rate), '>', 0, 'a rate above zero was shown while running');
cmp_ok(scalar(@seen_left), '>', 0, 'a time left was shown while running');
is( sql(qq{SELECT keys_done || '/' || keys_planned || '/' || percent || '/' || (keys_per_second > 0)
	         || '/' || (time_left IS NULL) FROM collegedb.jobs WHERE id = $job}),
	"$nkeys/$nkeys/100.0/true/true",
	'at the end: every key done, 100 %, an overall rate, no time left');
is(count_on('s2'), $nkeys, 'every key is on s2');

# --- wait_for_job reports progress as NOTICE lines ----------------------------------

all_to('s1');
my ($out, $err) = psql_with_stderr(q{
	SELECT collegedb.schedule_rebalance('items', concurrency => 1) AS job \gset
	SELECT :job AS job, state FROM collegedb.wait_for_job(:job, '300 s');
});
my ($wjob, $wstate) = split /\|/, $out;
is($wstate, 'done', 'wait_for_job returned the done job');
my @lines = progress_lines($err, $wjob);
note 'wait_for_job printed ' . scalar(@lines) . ' progress lines, the first: '
  . ($err =~ /^(.*NOTICE:  job.*)$/m ? $1 : 'none');
cmp_ok(scalar(@lines), '>=', 2, 'wait_for_job printed at least two progress lines');
ok(monotone(map { $_->[0] } @lines), 'keys done in the lines never go down');
ok(!(grep { $_->[1] != $nkeys } @lines), "every line counts $nkeys keys planned");
ok(!(grep { $_->[2] != int(100 * $_->[0] / $_->[1]) } @lines), 'each percent is keys done of keys planned');
is(count_on('s1'), $nkeys, 'every key is back on s1');

# a job that has ended: wait_for_job returns at once, without a line
($out, $err) = psql_with_stderr(qq{SELECT state FROM collegedb.wait_for_job($wjob)});
is($out, 'done', 'wait_for_job of an ended job returns it');
unlike($err, qr/NOTICE/, '... and prints no progress line');

# --- the same with collegedb.progress_notices off -------------------------------------

all_to('s2');
($out, $err) = psql_with_stderr(q{
	SET collegedb.progress_notices = off;
	SELECT collegedb.schedule_rebalance('items', concurrency => 1) AS job \gset
	SELECT state FROM collegedb.wait_for_job(:job, '300 s');
});
is($out, 'done', 'wait_for_job with progress_notices off: done');
unlike($err, qr/NOTICE/, 'and no NOTICE line');

# --- the synchronous rebalance reports its progress too -------------------------------

all_to('s1');
($out, $err) = psql_with_stderr(q{SELECT moved FROM collegedb.rebalance('items', concurrency => 1)});
is($out, $nkeys, "the synchronous rebalance moved the $nkeys keys");
@lines = progress_lines($err);
cmp_ok(scalar(@lines), '>=', 2, 'the synchronous rebalance printed at least two progress lines');
ok(monotone(map { $_->[0] } @lines), 'keys done in its lines never go down');

# --- a slot move: the view and the NOTICE lines -------------------------------------

# the slots strategy: keys have no mapping; one slot holds every key, on s1
sql(q{SELECT collegedb.set_shard_state('s2', writable => true);
	  SELECT collegedb.configure(strategy => 'slots', migration_concurrency => 1);
	  SELECT collegedb.initialize_shard_map(1, '[{"start": 0, "end": 1, "shard": "s1"}]')});
sql(qq{SELECT sum(collegedb.run('n' || i, 'INSERT INTO items VALUES (\$1, \$2)', 'n' || i, i))
         FROM generate_series(1, $nkeys) AS i});
($out, $err) = psql_with_stderr(q{SELECT collegedb.move_slot(0, 's2') IS NOT NULL});
is($out, 't', 'move_slot moved slot 0 to s2');
@lines = progress_lines($err);
note 'move_slot printed ' . scalar(@lines) . ' progress lines';
cmp_ok(scalar(@lines), '>=', 2, 'move_slot printed at least two progress lines');
ok(monotone(map { $_->[0] } @lines), 'keys done in its lines never go down');
is( sql(q{SELECT keys_done || '/' || keys_planned || '/' || percent FROM collegedb.jobs
	       WHERE kind = 'move_slot' ORDER BY id DESC LIMIT 1}),
	"$nkeys/$nkeys/100.0",
	'collegedb.jobs: the slot move did every key of the slot, 100 %');
is(count_on('s2'), $nkeys, "the slot's $nkeys keys are on s2");

done_testing();
