# 090_jobs: scheduled rebalances run by the coordinator; waiting for and cancelling jobs.
#
# collegedb.database restricts the coordinators to one database (here 'app').  A
# scheduled rebalance completes: collegedb.jobs says done with the right counts, every
# key sits on its rendezvous owner once.  wait_for_job fails with 57014 at its
# timeout while a job runs, naming the job and its state.  cancel_job on a long rebalance (hundreds of keys,
# concurrency 1) stops it between keys: state cancelled, some keys moved and some not,
# no move left in a step other than done, no key claimed but not moved, every key
# readable once; a second rebalance finishes the rest.  A job cancelled while still
# queued behind another moves nothing.  A synchronous rebalance cancelled from
# another session returns what it moved.  A key moved by reassign_shard while a
# rebalance has it pending, and two rebalances of one table at once, keep every key's
# rows.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use CollegeDB::TestHarness;

my $t_start = time;
my $front = front_node(
	'front',
	conf => {
		'collegedb.database' => 'app',
		max_connections      => 40,
		max_worker_processes => 20,
		log_statement        => 'none',
		# one key a move: the cancels below find the rebalances under way (with
		# batches of four, the 206 keys below were all moved before the cancel)
		'collegedb.move_batch_keys' => 1,
	});
$front->safe_psql('postgres', 'CREATE DATABASE app');
$front->safe_psql('app', 'CREATE EXTENSION collegedb');
my $shard = pg_shard_node('shards', conf => { max_connections => 60, log_statement => 'none' });
$shard->safe_psql('postgres', "CREATE DATABASE $_") for qw(s1 s2 s3);

ok( poll_until(
		$front,
		q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'collegedb coordinator' AND datname = 'app'},
		'1', 30),
	'the coordinator serves the database named by collegedb.database');

sub app { return $front->safe_psql('app', $_[0]) }

app(qq{
	@{[ pg_shard_servers($shard, s1 => 's1', s2 => 's2', s3 => 's3') ]}
	SELECT collegedb.add_shard(s) FROM unnest(ARRAY['s1', 's2', 's3']) AS s;
	SELECT count(*) FROM collegedb.run_on_all('CREATE TABLE items (id TEXT PRIMARY KEY, v INTEGER)');
	SELECT count(*) FROM collegedb.run_on_all('CREATE TABLE tags (item TEXT, tag TEXT)');
	SELECT count(*) FROM collegedb.run_on_all('CREATE TABLE other (id TEXT PRIMARY KEY)');
	SELECT collegedb.register_table('items', 'id');
	SELECT collegedb.register_table('tags', 'item');
	SELECT collegedb.register_table('other', 'id');
	-- new keys go to s1 only
	SELECT collegedb.set_shard_state(s, writable => false) FROM unnest(ARRAY['s2', 's3']) AS s;
});

# $n keys "$prefix<i>" with one items row and two tags rows each, all on s1.
sub make_keys
{
	my ($prefix, $n) = @_;
	app(qq{
		SELECT sum(collegedb.run('$prefix' || i, 'INSERT INTO items VALUES (\$1, \$2)', '$prefix' || i, i))
		  FROM generate_series(1, $n) AS i;
		SELECT sum(collegedb.run('$prefix' || i, 'INSERT INTO tags VALUES (\$1, \$2), (\$1, \$3)', '$prefix' || i, 'x', 'y'))
		  FROM generate_series(1, $n) AS i;
	});
	return;
}

# "keys on their owner / keys readable once / items rows / tags rows" for a prefix
sub state_of
{
	my ($prefix, $n, $shards) = @_;
	return app(qq{
		WITH k AS (SELECT '$prefix' || i AS k FROM generate_series(1, $n) AS i),
		     placed AS (SELECT value->>'id' AS k, shard FROM collegedb.fanout('SELECT id FROM items') WHERE error IS NULL)
		SELECT (SELECT count(*) FROM k JOIN placed p USING (k)
		         WHERE p.shard = collegedb.rendezvous_owner(k.k, $shards)) || '/' ||
		       (SELECT count(*) FROM k
		         WHERE (SELECT count(*) FROM collegedb.all_json(k.k, 'SELECT id FROM items WHERE id = \$1', k.k)) = 1
		           AND (SELECT count(*) FROM collegedb.all_json(k.k, 'SELECT tag FROM tags WHERE item = \$1', k.k)) = 2)
		       || '/' ||
		       (SELECT count(*) FROM placed WHERE k LIKE '$prefix%') || '/' ||
		       (SELECT sum((value->>'n')::int) FROM collegedb.fanout(
		          'SELECT count(*) AS n FROM tags WHERE item LIKE \$1', '$prefix%') WHERE error IS NULL)});
}

# --- a scheduled rebalance completes ------------------------------------------

make_keys('a', 60);
app(q{SELECT collegedb.set_shard_state('s2', writable => true)});
my $plan = app(q{SELECT examined || '/' || agreed || '/' || moved FROM collegedb.rebalance('items', dry_run => true)});
my ($examined, $agreed, $to_move) = split m{/}, $plan;
is($examined, 60, 'the dry run examines the 60 keys');
cmp_ok($to_move, '>', 10, "the dry run plans moves to s2 ($to_move)");

my $job = app(q{SELECT collegedb.schedule_rebalance('items', concurrency => 3)});
like($job, qr/^\d+$/, 'schedule_rebalance returns a job id at once');
my $t0 = time;
is( app(qq{SELECT state || '/' || examined || '/' || agreed || '/' || moved || '/' || failed
	          FROM collegedb.wait_for_job($job, '60 s')}),
	"done/60/$agreed/$to_move/0",
	'wait_for_job: the coordinator ran the rebalance to done, with the dry run\'s counts');
note sprintf 'scheduled rebalance of %d keys took %.2f s', $to_move, time - $t0;
is(app(qq{SELECT kind || '/' || coalesce(last_error, '') || '/' || (started_at IS NOT NULL AND finished_at >= started_at)
	         FROM collegedb.jobs WHERE id = $job}),
	'rebalance//true', 'collegedb.jobs: a rebalance, no error, started and finished');
is(state_of('a', 60, q{ARRAY['s1', 's2']}), '60/60/60/120',
	'every key is on its owner, readable once, with all its rows');
is(app(qq{SELECT count(*) FROM collegedb.moves WHERE job_id = $job AND step = 'done'}),
	$to_move, 'the journal has one done move per moved key');
is(app(q{SELECT moved FROM collegedb.rebalance('items')}), '0', 'a second pass finds nothing to move');

# --- cancel_job stops a long rebalance between keys ------------------------------

make_keys('b', 600);
app(q{SELECT collegedb.set_shard_state('s3', writable => true)});
my $before = app(q{SELECT count(*) FROM collegedb.moves});
$job = app(q{SELECT collegedb.schedule_rebalance('items', concurrency => 1)});
ok(poll_until($front, "SELECT moved >= 5 FROM collegedb.jobs WHERE id = $job", 't', 60, 'app'),
	'the long rebalance is under way');
my $r = psql_outcome($front, qq{SELECT state FROM collegedb.wait_for_job($job, '200 ms')}, dbname => 'app');
is($r->{sqlstate}, '57014', 'wait_for_job fails with 57014 at its timeout while the job runs');
like($r->{stderr}, qr/timed out waiting for job $job\b.*\n.*DETAIL:  The job is still running\./,
	'... naming the job and its state');
cmp_ok($r->{seconds}, '<', 5, sprintf('... soon (%.2f s)', $r->{seconds}));
is(app(qq{SELECT collegedb.cancel_job($job)}), 't', 'cancel_job says the job was asked to stop');
is( app(qq{SELECT state || '/' || cancel_requested FROM collegedb.wait_for_job($job, '60 s')}),
	'cancelled/true', 'the job ends cancelled');
my ($moved, $total, $pending) = split /\|/, app(qq{
	SELECT moved, examined - agreed, (SELECT count(*) FROM collegedb.job_key WHERE job_id = $job AND state = 'pending')
	  FROM collegedb.jobs WHERE id = $job});
note "cancelled after $moved of $total keys";
cmp_ok($moved, '>', 0, 'some keys were moved before the cancel');
cmp_ok($moved, '<', $total, 'the cancel stopped the rebalance before the end');
is($pending, $total - $moved, 'every key not moved is still pending (none failed)');
is(app(qq{SELECT count(*) FROM collegedb.job_key WHERE job_id = $job AND state = 'moving'}),
	'0', 'no key was left claimed but not moved');
is(app(qq{SELECT count(*) FROM collegedb.moves WHERE step <> 'done'}), '0',
	'no move is left in a step other than done');
is(app(qq{SELECT count(*) FROM collegedb.moves WHERE id > $before}),
	$moved, 'the journal has exactly the moved keys');
is(app(q{SELECT collegedb.cancel_job(id) FROM collegedb.jobs WHERE id = } . $job), 'f',
	'cancel_job of an ended job returns false');
my ($ok_owner, $readable, $rows, $tags) = split m{/}, state_of('b', 600, q{ARRAY['s1', 's2', 's3']});
is("$readable/$rows/$tags", '600/600/1200', 'after the cancel every key is readable once, with all its rows');

$r = app(q{SELECT moved || '/' || failed FROM collegedb.rebalance('items', concurrency => 4)});
is($r, ($total - $moved) . '/[]', 'a second rebalance moves exactly the keys the cancelled one left');
is(state_of('b', 600, q{ARRAY['s1', 's2', 's3']}), '600/600/600/1200',
	'now every key is on its owner, readable once, with all its rows');

# --- a job cancelled while queued; a synchronous rebalance cancelled -----------

app(q{SELECT collegedb.set_shard_state('s1', drain => 'draining')});
$job = app(q{SELECT collegedb.schedule_rebalance('items', concurrency => 1)});
my $queued = app(q{SELECT collegedb.schedule_rebalance('other')});
ok(poll_until($front, "SELECT moved >= 3 FROM collegedb.jobs WHERE id = $job", 't', 60, 'app'),
	'a long rebalance runs (draining s1)');
is(app(qq{SELECT state FROM collegedb.jobs WHERE id = $queued}), 'queued',
	'a second scheduled job waits in the queue');
is(app(qq{SELECT collegedb.cancel_job($queued)}), 't', 'cancel_job on the queued job');
is(app(qq{SELECT collegedb.cancel_job($job)}), 't', 'cancel_job on the running job');
is(app(qq{SELECT state FROM collegedb.wait_for_job($job, '60 s')}), 'cancelled', 'the running job ends cancelled');
is( app(qq{SELECT state || '/' || moved FROM collegedb.wait_for_job($queued, '60 s')}),
	'cancelled/0', 'the queued job ends cancelled without moving anything');

# A synchronous rebalance (its job in a dynamic worker) cancelled from another session
my $caller = psql_start($front,
	q{SELECT moved || '/' || failed FROM collegedb.rebalance('items', concurrency => 1)},
	dbname => 'app');
ok( poll_until(
		$front,
		q{SELECT count(*) FROM collegedb.jobs WHERE state = 'running' AND moved >= 3},
		'1', 60, 'app'),
	'a synchronous rebalance runs');
my $sync = app(q{SELECT id FROM collegedb.jobs WHERE state = 'running'});
is(app(qq{SELECT collegedb.cancel_job($sync)}), 't', 'cancel_job on the synchronous rebalance');
$r = psql_finish($caller, 60);
is($r->{rc}, 0, 'the synchronous rebalance returns') or diag $r->{stderr};
my $sync_moved = app(qq{SELECT moved FROM collegedb.jobs WHERE id = $sync});
is($r->{stdout}, "$sync_moved/[]", 'it returns what it moved before the cancel');
is(app(qq{SELECT state FROM collegedb.jobs WHERE id = $sync}), 'cancelled', 'its job is cancelled');
is(app(q{SELECT count(*) FROM collegedb.moves WHERE step <> 'done'}), '0',
	'no move is left in a step other than done');
my $left = app(q{SELECT value->>'n' FROM collegedb.fanout('SELECT count(*) AS n FROM items') WHERE shard = 's1'});
cmp_ok($left, '>', 0, "s1 still has keys ($left)");
is(app(q{SELECT failed FROM collegedb.rebalance('items', concurrency => 8)}), '[]', 'the drain completes');
is(app(q{SELECT value->>'n' FROM collegedb.fanout('SELECT count(*) AS n FROM items') WHERE shard = 's1'}),
	'0', 's1 is empty');
my (undef, $readable2, $rows2, $tags2) = split m{/}, state_of('b', 600, q{ARRAY['s2', 's3']});
is("$readable2/$rows2/$tags2", '600/600/1200', 'every key is readable once, with all its rows');
is(app(q{SELECT count(*) FROM collegedb.jobs WHERE state IN ('queued', 'running', 'failed')}), '0',
	'no job is left queued, running or failed');

# --- a key moved by someone else while a rebalance has it pending -------------

# A rebalance records each key's source and target when it plans; a key moved by
# reassign_shard before the rebalance reaches it must not be moved from its old
# source again (that would copy nothing and wipe or strand its rows).
app(q{SELECT collegedb.set_shard_state('s1', drain => 'active')});
$job = app(q{SELECT collegedb.schedule_rebalance('items', concurrency => 1)});
ok(poll_until($front, "SELECT count(*) > 10 FROM collegedb.job_key WHERE job_id = $job", 't', 60, 'app'),
	'a rebalance back onto s1 has planned its keys');
my @pending = split /\n/, app(qq{
	SELECT raw_key || '|' || source || '|' || target FROM collegedb.job_key
	 WHERE job_id = $job AND state = 'pending' AND raw_key LIKE 'b%' ORDER BY key DESC LIMIT 2});    # movers claim keys in stored-key order: these last
my ($k1, $src1, $dst1) = split /\|/, $pending[0];
my ($k2, $src2, $dst2) = split /\|/, $pending[1];
my ($other2) = grep { $_ ne $src2 && $_ ne $dst2 } qw(s1 s2 s3);
is(app(qq{SELECT collegedb.reassign_shard('$k1', '$dst1')->>'to'}), $dst1,
	"reassign_shard moves $k1 ($src1) to $dst1, where the pending rebalance would move it");
is(app(qq{SELECT collegedb.reassign_shard('$k2', '$other2')->>'to'}), $other2,
	"reassign_shard moves $k2 ($src2) to $other2, not where the rebalance would ($dst2)");
is(app(qq{SELECT state FROM collegedb.wait_for_job($job, '60 s')}), 'done', 'the rebalance ends');
my $key_state = q{SELECT (SELECT count(*) FROM collegedb.all_json('%1$s', 'SELECT id FROM items WHERE id = $1', '%1$s'))
	|| '/' || (SELECT count(*) FROM collegedb.all_json('%1$s', 'SELECT tag FROM tags WHERE item = $1', '%1$s'))
	|| '/' || coalesce((SELECT string_agg(shard, ',' ORDER BY shard)
	                      FROM collegedb.fanout('SELECT 1 FROM items WHERE id = $1', '%1$s') WHERE error IS NULL), 'nowhere')};
{
	is(app(sprintf($key_state, $k1)), "1/2/$dst1",
		"$k1 still reads one items row and two tags rows, on $dst1");
	is(app(sprintf($key_state, $k2)), "1/2/$other2",
		"$k2 still reads one items row and two tags rows, on $other2");
}

# The same with two rebalances of one table at once: each plans the same keys, and
# the one that comes second to a key moves it again from its planned source.
my $readable_sql = q{SELECT count(*) FROM generate_series(1, 600) AS i
	WHERE (SELECT count(*) FROM collegedb.all_json('b' || i, 'SELECT id FROM items WHERE id = $1', 'b' || i)) = 1};
my $readable_before = app($readable_sql);
app(q{SELECT collegedb.set_shard_state('s1', drain => 'draining')});
# the second starts once the first is under way, so that it trails it
my $two = q{SELECT moved || '/' || failed FROM collegedb.rebalance('items', concurrency => 1)};
my @callers = (psql_start($front, $two, dbname => 'app'));
ok( poll_until(
		$front,
		q{SELECT count(*) FROM collegedb.jobs WHERE state = 'running' AND moved >= 20},
		'1', 60, 'app'),
	'the first of two rebalances is under way');
push @callers, psql_start($front, $two, dbname => 'app');
my @outcomes = map { psql_finish($_, 60) } @callers;
{
	# (rebalance() once returned its failed list from memory SPI_finish had freed)
	is(join(' ', map { $_->{rc} } @outcomes), '0 0', 'two concurrent rebalances of one table both return')
	  or diag join "\n", map { $_->{stderr} } @outcomes;
}
note 'the two rebalances returned: ' . join(' and ', map { $_->{stdout} } @outcomes);
{
	is(app($readable_sql), $readable_before,
		"after two concurrent rebalances as many keys are readable as before ($readable_before)");
}

note sprintf "090 took %.1f s", time - $t_start;
done_testing();
