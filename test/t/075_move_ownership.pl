# 075_move_ownership: one executor per move, whatever its lease says; failures
# retried with backoff, then failed with nothing left behind.
#
# The lease is 1 s (collegedb.move_lease) and a move gets 3 attempts
# (collegedb.move_max_attempts).
#   - An application transaction holds a key's lock on the PostgreSQL source (a
#     guarded write, then it stays open) far longer than the lease while
#     reassign_shard waits for it: the coordinator logs that the live mover is past
#     its lease and leaves the move to it; a second reassign_shard of the key is
#     MOVE_IN_PROGRESS, and the move's row stays locked by the waiting step (no
#     process could take the move over); when the application commits, the move finishes once, with
#     generation 1 and no resume, and the key's row is on the target exactly once
#     with both committed updates.
#   - A source step that outlasts the lease with no writer (3000 rows to a target
#     whose insert trigger sleeps): the same.
#   - A move whose target table is missing fails: reassign_shard says so at once
#     (CD014), the coordinator retries it after about 1 s and 2 s, and it ends
#     failed after 3 attempts, the key untouched at its source.
#   - A source whose DELETE removes fewer rows than were copied (a trigger keeps one):
#     the step fails and the source keeps everything, the target's copy (committed
#     already) is removed, and after 3 attempts the move is failed.
#   - A job worker terminated while its move waits: the caller gets CD014 naming the
#     job (its session lives on), the coordinator finishes the job and the move.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use CollegeDB::TestHarness;

my $t_start = time;
my $front = front_node(
	'front',
	extension => 1,
	conf      => {
		'collegedb.move_lease'        => '1s',
		'collegedb.move_max_attempts' => 3,
		max_worker_processes          => 16,
	});
my $shard = pg_shard_node('shards', conf => { max_connections => 40 });
$shard->safe_psql('postgres', "CREATE DATABASE $_") for qw(a b);
for my $db (qw(a b))
{
	$shard->safe_psql($db, q{
		CREATE TABLE counters (id text PRIMARY KEY, n integer NOT NULL);
		CREATE TABLE events (user_id text NOT NULL, seq integer NOT NULL, note text);
	});
}
$front->safe_psql('postgres', qq{
	CREATE SERVER a FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ pg_server_options($shard, dbname => 'a') ]});
	CREATE SERVER b FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ pg_server_options($shard, dbname => 'b') ]});
	CREATE USER MAPPING FOR PUBLIC SERVER a OPTIONS (user 'postgres');
	CREATE USER MAPPING FOR PUBLIC SERVER b OPTIONS (user 'postgres');
	SELECT collegedb.add_shard('a'), collegedb.add_shard('b');
	SELECT collegedb.register_table('counters', 'id');
	SELECT collegedb.register_table('events', 'user_id');
});

sub front_sql { return $front->safe_psql('postgres', $_[0]) }

# "rows on a / rows on b" of a key in a table
sub placement
{
	my ($table, $column, $key) = @_;
	return join '/', map {
		$shard->safe_psql($_, "SELECT count(*) FROM $table WHERE $column = '$key'")
	} qw(a b);
}

sub move_of
{
	my ($key, $fields) = @_;
	return front_sql(qq{SELECT $fields FROM collegedb.moves
		WHERE key = collegedb.mapping_key('$key') ORDER BY id DESC LIMIT 1});
}

# --- an application holds the key's lock far past the lease ----------------------

front_sql(q{
	SELECT collegedb.set_mapping('held', 'a');
	SELECT collegedb.run('held', 'INSERT INTO counters VALUES ($1, 0)', 'held');
});
my $app = bg_session($front);
bg_query($app, 'BEGIN');
is( bg_query($app,
		q{SELECT collegedb.run('held', 'UPDATE counters SET n = n + 1 WHERE id = $1', 'held')})->{stdout},
	'1', 'the application updates the key in an open transaction (holding its lock on a)');

my $off = -s $front->logfile;
my $t0 = time;
my $mover = psql_start($front, q{SELECT collegedb.reassign_shard('held', 'b') - 'move_id'});
ok( poll_until(
		$shard,
		q{SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND wait_event = 'advisory'},
		'1', 30, 'a'),
	"the mover waits for the key's lock on the source");
ok( wait_for_log_match($front,
		qr/move (\d+) is past its lease, and its mover \(pid \d+\) is still at work: it keeps the move/,
		$off, 30),
	'the coordinator sees the live mover past its lease and leaves the move to it');
ok(poll_until($front, q{SELECT lease_until < now() - interval '3 seconds' FROM collegedb.moves}, 't', 30),
	'the lock is held for more than three times the lease');
my $locked = psql_outcome($front, q{SELECT id FROM collegedb.move FOR UPDATE NOWAIT});
is($locked->{sqlstate}, '55P03',
	"the waiting step holds its move's row (the fence): nobody can take the move meanwhile");
my $second = psql_outcome($front, q{SELECT collegedb.reassign_shard('held', 'b')});
is($second->{sqlstate}, 'CD007', 'a second reassign_shard of the key is MOVE_IN_PROGRESS');
is( bg_query($app,
		q{SELECT collegedb.run('held', 'UPDATE counters SET n = n + 1 WHERE id = $1', 'held')})->{stdout},
	'1', 'the application updates the key again, still in its transaction');
note sprintf 'the key was locked for %.1f s', time - $t0;
bg_query($app, 'COMMIT');
my $r = psql_finish($mover, 60);
is($r->{rc}, 0, 'reassign_shard returns once the application commits') or diag $r->{stderr};
like($r->{stdout}, qr/"moved": true/, '... and reports the move');
is(move_of('held', q{step || '/' || generation}), 'done/1',
	'the move is done, by the one executor that started it (generation 1)');
is(placement('counters', 'id', 'held'), '0/1', "the key's row is on the target only");
is($shard->safe_psql('b', q{SELECT n FROM counters WHERE id = 'held'}), '2',
	'with both committed updates');
unlike(slurp_file($front->logfile, $off), qr/resuming move/, 'the coordinator resumed no move');
$app->quit;

# --- a source step longer than the lease, no writer --------------------------------

$shard->safe_psql('b', q{
	CREATE FUNCTION slow_insert() RETURNS trigger LANGUAGE plpgsql AS
	  $$ BEGIN PERFORM pg_sleep(0.001); RETURN NEW; END $$;
	CREATE TRIGGER slow BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION slow_insert();
});
front_sql(q{SELECT collegedb.set_mapping('many', 'a')});
$shard->safe_psql('a',
	q{INSERT INTO events SELECT 'many', i, repeat('x', 50) FROM generate_series(1, 3000) AS i});
$off = -s $front->logfile;
$t0 = time;
$r = psql_outcome($front, q{SELECT collegedb.reassign_shard('many', 'b')->'rows'});
my $took = time - $t0;
is($r->{stdout}, '{"events": 3000, "counters": 0}', 'the move of 3000 rows completes')
  or diag $r->{stderr};
cmp_ok($took, '>', 2, sprintf('its source step outlasted the 1 s lease (%.1f s)', $took));
is(placement('events', 'user_id', 'many'), '0/3000', "the key's rows are on the target, once");
is(move_of('many', q{step || '/' || generation}), 'done/1', 'one executor (generation 1)');
unlike(slurp_file($front->logfile, $off), qr/resuming move/, 'the coordinator resumed no move');
$shard->safe_psql('b', 'DROP TRIGGER slow ON events');

# --- a move that keeps failing: retried with backoff, then failed --------------------

front_sql(q{
	SELECT collegedb.set_mapping('doomed', 'a');
	SELECT collegedb.run('doomed', 'INSERT INTO counters VALUES ($1, 7)', 'doomed');
});
$shard->safe_psql('b', 'ALTER TABLE counters RENAME TO counters_gone');
$off = -s $front->logfile;
$r = psql_outcome($front, q{SELECT collegedb.reassign_shard('doomed', 'b')});
is($r->{sqlstate}, 'CD014', 'reassign_shard to a shard without the table fails at once (CD014)');
like($r->{stderr}, qr/DETAIL:  Move \d+ stays at step journaled, the key where it was; the coordinator tries it again \(1 of at most 3 attempts made\)/,
	'... saying that the coordinator tries it again');
ok(poll_until($front, q{SELECT step || '/' || attempts FROM collegedb.moves
		WHERE key = collegedb.mapping_key('doomed')}, 'failed/3', 30),
	'the coordinator retries it, and after 3 attempts the move is failed');
my @resumes = (slurp_file($front->logfile, $off) =~ /(\d\d:\d\d:\d\d\.\d+) UTC \[\d+\] LOG:  collegedb coordinator: resuming move/g);
is(scalar(@resumes), 2, 'the coordinator tried twice more (no retry storm)');
if (@resumes == 2)
{
	my @s = map { my ($h, $m, $s) = split /:/; $h * 3600 + $m * 60 + $s } @resumes;
	cmp_ok($s[1] - $s[0], '>=', 0.9, sprintf('the second retry waited longer (%.2f s after the first)', $s[1] - $s[0]));
}
like(move_of('doomed', 'error'), qr/counters/, "the failed move keeps its error");
$shard->safe_psql('b', 'ALTER TABLE counters_gone RENAME TO counters');
is(placement('counters', 'id', 'doomed'), '1/0', 'the key stays on its source');
is(front_sql(q{SELECT collegedb.first('doomed', 'SELECT n FROM counters WHERE id = $1', 'doomed')->>'n'}),
	'7', 'and reads as before');

# --- the source deletes fewer rows than were copied ---------------------------------

$shard->safe_psql('a', q{
	CREATE FUNCTION keep_one() RETURNS trigger LANGUAGE plpgsql AS
	  $$ BEGIN IF OLD.seq = 2 THEN RETURN NULL; END IF; RETURN OLD; END $$;
	CREATE TRIGGER keep_one BEFORE DELETE ON events FOR EACH ROW EXECUTE FUNCTION keep_one();
});
front_sql(q{SELECT collegedb.set_mapping('sticky', 'a')});
$shard->safe_psql('a', q{INSERT INTO events SELECT 'sticky', i, 'e' FROM generate_series(1, 3) AS i});
$r = psql_outcome($front, q{SELECT collegedb.reassign_shard('sticky', 'b')});
is($r->{sqlstate}, 'CD014', 'a source DELETE that removes fewer rows than were copied fails the move');
like($r->{stderr}, qr/changed during move \d+/, '... saying the rows changed');
is(placement('events', 'user_id', 'sticky'), '3/0',
	"the source keeps all its rows, and the target's committed copy is gone");
ok(poll_until($front, q{SELECT step || '/' || attempts FROM collegedb.moves
		WHERE key = collegedb.mapping_key('sticky')}, 'failed/3', 30),
	'after 3 attempts the move is failed');
is(placement('events', 'user_id', 'sticky'), '3/0', 'and nothing is left on the target');
is(front_sql(q{SELECT shard FROM collegedb.route('sticky')}), 'a', 'the key still maps to its source');
$shard->safe_psql('a', 'DROP TRIGGER keep_one ON events');

# --- a job worker that dies gives its caller an error ------------------------------

front_sql(q{
	SELECT collegedb.set_mapping('orphan', 'a');
	SELECT collegedb.run('orphan', 'INSERT INTO counters VALUES ($1, 1)', 'orphan');
	ALTER SYSTEM SET collegedb.test_pause_after_step = 'copied';
	SELECT pg_reload_conf();
});
ok(poll_until($front, 'SHOW collegedb.test_pause_after_step', 'copied', 30), 'movers pause after copied');
$off = -s $front->logfile;
my $caller = bg_session($front);
bg_send($caller, q{SELECT collegedb.reassign_shard('orphan', 'b')});
ok(wait_for_log_match($front, qr/collegedb: move \d+ paused after step copied/, $off, 30),
	'the move pauses after copied');
front_sql(q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'collegedb job'});
$r = bg_wait($caller);
is($r->{sqlstate}, 'CD014', 'the caller of a job whose worker died gets CD014');
like($r->{stderr}, qr/the background worker of job \d+ exited before the job ended/, '... naming the job');
is(bg_query($caller, 'SELECT 1')->{stdout}, '1', "the caller's session lives on");
$caller->quit;
front_sql(q{ALTER SYSTEM RESET collegedb.test_pause_after_step; SELECT pg_reload_conf()});
ok(poll_until($front, 'SHOW collegedb.test_pause_after_step', '', 30), 'movers no longer pause');
ok(poll_until($front, q{SELECT step FROM collegedb.moves WHERE key = collegedb.mapping_key('orphan')}, 'done', 60),
	'the coordinator finishes the move');
ok(poll_until($front, q{SELECT state FROM collegedb.jobs ORDER BY id DESC LIMIT 1}, 'done', 60),
	'and the job');
is(placement('counters', 'id', 'orphan'), '0/1', 'the key moved once');

note sprintf '075 took %.1f s', time - $t_start;
done_testing();
