# 092_job_failures: jobs that cannot crash-loop the server, that stop when cancelled,
# and that say why they cannot run.
# collegedb-test: expects-crash-signals
#
# (a)+(c) 100,000 keys (one items row each, seeded straight onto two PostgreSQL
# shards with their mappings) get a third shard.  A scheduled rebalance with
# concurrency 8 is cancelled once it has moved keys: it ends cancelled within 10 s,
# no move or key is left in flight, and every key is read once, on the shard its
# mapping names.  A second rebalance finishes the rest: every key is read once, on
# its rendezvous owner among the three, and the log has no process killed by a signal
# (the plan of the job used to be read after the commit that freed it: SIGSEGV).
# (b) A job whose worker (the coordinator, paused by a test hook inside a move) gets
# SIGSEGV three times in a row ends failed with its deaths shown; nothing runs it
# again (a later job runs past it); the front answers a fresh query.  retry_job runs it
# again; with collegedb.job_max_deaths = 2, two SIGKILLs fail it; without the hook,
# retry_job then finishes it with every key read once.  A SIGTERM of its worker
# requeues it without a death.
# (d) A front whose max_worker_processes leaves no slot for a second database's
# coordinator: that database's queued job says so in collegedb.jobs.detail, and
# wait_for_job and a synchronous rebalance fail at once with 53000, naming
# max_worker_processes.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use CollegeDB::TestHarness;

my $t_start = time;
# COLLEGEDB_092_KEYS: fewer keys, for a quick run while working on the later parts
my $NKEYS = $ENV{COLLEGEDB_092_KEYS} // 100_000;

my $front = front_node(
	'front',
	conf => {
		max_connections      => 80,
		max_worker_processes => 24,
		restart_after_crash  => 'on',
		log_statement        => 'none',
	});
my $shard = pg_shard_node('shards', conf => { max_connections => 120, log_statement => 'none' });
$shard->safe_psql('postgres', "CREATE DATABASE $_") for qw(s1 s2 s3);
$front->safe_psql('postgres', 'CREATE EXTENSION collegedb');

sub sql { return $front->safe_psql('postgres', $_[0], timeout => $_[1] // 180) }

sql(qq{
	@{[ pg_shard_servers($shard, s1 => 's1', s2 => 's2', s3 => 's3') ]}
	SELECT collegedb.add_shard(s) FROM unnest(ARRAY['s1', 's2']) AS s;
	SELECT count(*) FROM collegedb.run_on_all('CREATE TABLE items (id TEXT PRIMARY KEY, v INTEGER)');
	SELECT collegedb.register_table('items', 'id');
	CREATE FOREIGN TABLE items (id text, v integer) SERVER collegedb OPTIONS (key_column 'id');
});

# --- 100,000 keys on s1 and s2, seeded on the shards and in the mapping catalog ------

my $t0 = time;
my $keys = "SELECT 'k' || i AS k FROM generate_series(1, $NKEYS) AS i";
for my $s (qw(s1 s2))
{
	my $list = sql(qq{SELECT string_agg(k, ',') FROM ($keys) AS s
		WHERE collegedb.rendezvous_owner(k, ARRAY['s1', 's2']) = '$s'});
	$shard->safe_psql($s,
		"INSERT INTO items SELECT k, 1 FROM unnest(string_to_array('$list', ',')) AS k");
}
sql(qq{INSERT INTO collegedb.mapping (key, shard)
	SELECT collegedb.mapping_id(k), n.number
	  FROM ($keys) AS s JOIN collegedb.shard_number n ON n.name = collegedb.rendezvous_owner(k, ARRAY['s1', 's2'])});
note sprintf 'seeding %d keys took %.1f s', $NKEYS, time - $t0;

# "rows read through the front / distinct keys / rows on the shard their mapping
# names / rows on their rendezvous owner among $owners"
sub placement
{
	my ($owners) = @_;
	return sql(qq{
		WITH placed AS (SELECT value->>'id' AS k, shard FROM collegedb.fanout('SELECT id FROM items')
		                 WHERE error IS NULL)
		SELECT (SELECT count(*) FROM items) || '/' ||
		       (SELECT count(DISTINCT id) FROM items) || '/' ||
		       (SELECT count(*) FROM placed p JOIN collegedb.mappings m
		            ON m.key = collegedb.mapping_key(p.k) AND m.shard = p.shard) || '/' ||
		       (SELECT count(*) FROM placed p WHERE p.shard = collegedb.rendezvous_owner(p.k, $owners))});
}

is(placement(q{ARRAY['s1', 's2']}), "$NKEYS/$NKEYS/$NKEYS/$NKEYS",
	'seeded: every key is read once through the front, on its mapped shard and owner');

# --- (c) cancel_job stops a running 100,000-key rebalance ------------------------------

$shard->safe_psql('s3', 'CREATE TABLE items (id TEXT PRIMARY KEY, v INTEGER)');
sql(q{SELECT collegedb.add_shard('s3')});
my $job = sql(q{SELECT collegedb.schedule_rebalance('items', concurrency => 8)});
ok( poll_until($front, "SELECT keys_planned > 0 AND keys_done >= least(300, keys_planned / 10) FROM collegedb.jobs WHERE id = $job", 't', 300),
	'the rebalance plans its keys and moves some');
my $planned = sql("SELECT keys_planned FROM collegedb.jobs WHERE id = $job");
cmp_ok($planned, '>', $NKEYS / 4, "it planned $planned moves onto s3");
$t0 = time;
is(sql("SELECT collegedb.cancel_job($job)"), 't', 'cancel_job returns true');
ok(poll_until($front, "SELECT state FROM collegedb.jobs WHERE id = $job", 'cancelled', 10),
	'the job ends cancelled within 10 s');
my $cancel_s = time - $t0;
note sprintf 'the cancel took %.2f s', $cancel_s;
my ($moved, $pending) = split /\|/, sql(qq{SELECT count(*) FILTER (WHERE state = 'moved'),
	count(*) FILTER (WHERE state IN ('pending', 'moving')) FROM collegedb.job_key WHERE job_id = $job});
cmp_ok($moved, '>', 0, "some keys moved ($moved)");
cmp_ok($pending, '>', 0, "and some never started ($pending)");
is(sql(qq{SELECT count(*) FROM collegedb.job_key WHERE job_id = $job AND state = 'moving'}), '0',
	'no key is left claimed');
is(sql(qq{SELECT count(*) FROM collegedb.moves WHERE step NOT IN ('done', 'failed')}), '0',
	'no move is left in flight');
is(placement(q{ARRAY['s1', 's2', 's3']}) =~ s{/\d+$}{}r, "$NKEYS/$NKEYS/$NKEYS",
	'after the cancel every key is read once, on the shard its mapping names');

# --- (a) a rebalance of 100,000 keys finishes ------------------------------------------

$t0 = time;
my $job2 = sql(q{SELECT collegedb.schedule_rebalance('items', concurrency => 8)});
is( sql(qq{SELECT state || '/' || examined || '/' || failed FROM collegedb.wait_for_job($job2, '15 min')},
		1000),
	"done/$NKEYS/0", 'the second rebalance examines every key and ends done, with no key failed');
my $rebalance_s = time - $t0;
my $moved2 = sql("SELECT moved FROM collegedb.jobs WHERE id = $job2");
note sprintf 'the rebalance moved %d keys in %.1f s (%.0f keys/s)', $moved2, $rebalance_s,
  $moved2 / ($rebalance_s || 1);
is($moved + $moved2, $planned, 'the two runs moved the planned keys between them');
is(placement(q{ARRAY['s1', 's2', 's3']}), "$NKEYS/$NKEYS/$NKEYS/$NKEYS",
	'every key is read once, on its mapped shard, which is its owner among the three');
unlike(slurp_file($front->logfile), qr/terminated by signal/,
	'no process of the front was killed by a signal');

# --- (b) a job whose worker keeps dying ends failed ------------------------------------

sql(q{
	SELECT count(*) FROM collegedb.run_on_all('CREATE TABLE crash (id TEXT PRIMARY KEY)');
	SELECT collegedb.register_table('crash', 'id');
	SELECT collegedb.set_shard_state('s3', writable => false);
	SELECT sum(collegedb.run('c' || i, 'INSERT INTO crash VALUES ($1)', 'c' || i)) FROM generate_series(1, 40) AS i;
	SELECT collegedb.set_shard_state('s3', writable => true);
});
my $to_move = sql(q{SELECT moved FROM collegedb.rebalance('crash', dry_run => true)});
cmp_ok($to_move, '>=', 5, "the crash table has keys to move ($to_move)");

sub set_conf
{
	my ($name, $value) = @_;
	sql(defined $value
		? "ALTER SYSTEM SET $name = '$value'; SELECT pg_reload_conf()"
		: "ALTER SYSTEM RESET $name; SELECT pg_reload_conf()");
	ok(poll_until($front, "SHOW $name", $value // ($name =~ /max_deaths/ ? '3' : ''), 30),
		"$name is '" . ($value // 'reset') . "'");
	return;
}

# the job's worker, once it is paused after the copied step of one of its moves
sub paused_worker
{
	my ($id) = @_;
	my $q = qq{SELECT DISTINCT j.lease_pid FROM collegedb.job j JOIN collegedb.move m ON m.job_id = j.id
		WHERE j.id = $id AND j.state = 'running' AND m.step = 'copied' AND m.lease_pid = j.lease_pid
		  AND EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = j.lease_pid)};
	return undef unless poll_until($front, "SELECT count(*) > 0 FROM ($q) AS w", 't', 120);
	return sql($q);
}

# kills the paused worker of job $id with $signal, $times times; each death is counted
sub kill_times
{
	my ($id, $signal, $times) = @_;
	for my $n (1 .. $times)
	{
		my $pid = paused_worker($id);
		ok(defined $pid, "death $n: the job's worker is paused inside a move");
		return unless defined $pid;
		kill $signal, $pid;
		ok(poll_until($front, "SELECT deaths FROM collegedb.jobs WHERE id = $id", $n, 120),
			"death $n by SIG$signal is counted");
	}
	return;
}

# batches of two keys: each death below takes one batch, with its keys at copied
set_conf('collegedb.move_batch_keys', '2');
set_conf('collegedb.test_pause_after_step', 'copied');
my $cjob = sql(q{SELECT collegedb.schedule_rebalance('crash', concurrency => 1)});
kill_times($cjob, 'SEGV', 3);
is( sql(qq{SELECT state || '/' || deaths || '/' || (last_error LIKE '%died 3 times%retry_job($cjob)%')
	FROM collegedb.jobs WHERE id = $cjob}),
	'failed/3/true', 'after three SIGSEGVs the job is failed, with its deaths and how to retry it');
is(sql('SELECT 1'), '1', 'the front answers a fresh query');
# the coordinator goes on, past the failed job: a later job runs to its end
my $later = sql(q{SELECT collegedb.schedule_rebalance('items', concurrency => 1)});
is(sql(qq{SELECT state FROM collegedb.wait_for_job($later, '120 s')}), 'done',
	'a later job runs to its end');
is(sql(qq{SELECT state || '/' || deaths FROM collegedb.jobs WHERE id = $cjob}), 'failed/3',
	'nothing ran the failed job again');
is( sql(q{SELECT sum((value->>'n')::int) FROM collegedb.fanout('SELECT count(*) AS n FROM crash')
	WHERE error IS NULL}),
	'40', 'the crash table still has its 40 rows');

# SIGKILL, with job_max_deaths = 2
set_conf('collegedb.job_max_deaths', '2');
is(sql("SELECT collegedb.retry_job($cjob)"), 't', 'retry_job queues the failed job again');
kill_times($cjob, 'KILL', 2);
is(sql(qq{SELECT state || '/' || deaths FROM collegedb.jobs WHERE id = $cjob}), 'failed/2',
	'with job_max_deaths = 2, two SIGKILLs fail it');
set_conf('collegedb.job_max_deaths', undef);

# a SIGTERM is no death: the worker requeues the job as it exits (the hook holds a
# paused worker until it is killed, so this one also lets the job go on without it)
is(sql("SELECT collegedb.retry_job($cjob)"), 't', 'retry_job queues it again');
my $pid = paused_worker($cjob);
ok(defined $pid, "the job's worker is paused inside a move again");
set_conf('collegedb.test_pause_after_step', undef);
kill 'TERM', $pid if defined $pid;
is(sql(qq{SELECT state || '/' || deaths FROM collegedb.wait_for_job($cjob, '120 s')}), 'done/0',
	'after a SIGTERM of its worker the job runs again, to done, and no death was counted');
is( sql(q{SELECT count(*) || '/' || count(DISTINCT id) FROM collegedb.fanout('SELECT id FROM crash') f,
	LATERAL (SELECT f.value->>'id' AS id) AS k
	WHERE f.error IS NULL AND f.shard = collegedb.rendezvous_owner(k.id, ARRAY['s1', 's2', 's3'])}),
	'40/40', 'every key of the crash table is on its owner, once');
is(sql(qq{SELECT count(*) FROM collegedb.moves WHERE step NOT IN ('done', 'failed')}), '0',
	'no move is left unfinished');

# --- (d) no background worker slot for a database's coordinator ------------------------

my $small = front_node(
	'small',
	conf => {
		# the launcher and one dynamic worker: one coordinator at most
		max_worker_processes            => 2,
		max_logical_replication_workers => 0,
		log_statement                   => 'none',
	});
$small->safe_psql('postgres', "CREATE DATABASE $_") for qw(app1 app2 sh);
$small->safe_psql('sh', 'CREATE TABLE t (id TEXT PRIMARY KEY)');
$small->safe_psql('app1', 'CREATE EXTENSION collegedb');
ok( poll_until(
		$small,
		q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'collegedb coordinator' AND datname = 'app1'},
		'1', 60),
	'app1 has its coordinator');
$small->safe_psql('app2', qq{
	CREATE EXTENSION collegedb;
	CREATE SERVER sh FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ pg_server_options($small, dbname => 'sh') ]});
	CREATE USER MAPPING FOR PUBLIC SERVER sh OPTIONS (user 'postgres');
	SELECT collegedb.add_shard('sh');
	SELECT collegedb.register_table('t', 'id');
});
ok( poll_until(
		$small, q{SELECT collegedb.coordinator_status() LIKE '%no background worker slot%max_worker_processes%'},
		't', 60, 'app2'),
	'app2: coordinator_status says no worker slot is free and names max_worker_processes');
my $qjob = $small->safe_psql('app2', q{SELECT collegedb.schedule_rebalance('t')});
like($small->safe_psql('app2', qq{SELECT state || ': ' || detail FROM collegedb.jobs WHERE id = $qjob}),
	qr/^queued: no background worker slot is free .*raise max_worker_processes \(now 2\)/,
	'collegedb.jobs: the queued job says why it does not run');
my $r = psql_outcome($small, "SELECT state FROM collegedb.wait_for_job($qjob, '60 s')", dbname => 'app2');
is($r->{sqlstate}, '53000', 'wait_for_job fails with insufficient_resources');
like($r->{stderr}, qr/no coordinator can run it.*max_worker_processes/s, 'naming max_worker_processes');
cmp_ok($r->{seconds}, '<', 30, 'at once, not at its timeout');
$r = psql_outcome($small, q{SELECT * FROM collegedb.rebalance('t')}, dbname => 'app2');
is($r->{sqlstate}, '53000', 'a synchronous rebalance fails with insufficient_resources');
like($r->{stderr}, qr/max_worker_processes/, 'naming max_worker_processes');
is($small->safe_psql('app1', 'SELECT collegedb.coordinator_status() IS NULL'), 't',
	'app1, which has its coordinator, reports nothing');

note sprintf '092_job_failures took %.0f s', time - $t_start;
done_testing();
