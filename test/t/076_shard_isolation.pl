# 076_shard_isolation: the move protocol holds on a PostgreSQL shard whose
# database defaults to REPEATABLE READ.  The protocol needs each statement of a
# writer's and a mover's shard transaction to see what committed before it (a
# lock wait, then a read): collegedb begins every PostgreSQL shard transaction
# at READ COMMITTED, whatever the shard's default_transaction_isolation.
#   - A mover that waited for a writer's key lock copies the row the writer
#     inserted: the row ends on the target, not left behind its tombstone on the
#     source (at REPEATABLE READ the mover's copy and delete read the snapshot of
#     its lock statement, before the writer's commit: both found nothing, the
#     counts agreed, and the row stayed on the source where no read finds it).
#   - A writer that waited for a mover's key lock finds the tombstone the mover
#     committed and writes on the target (at REPEATABLE READ the guard's
#     tombstone lookup read the snapshot of its lock wait and let the write land
#     on the source).
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use CollegeDB::TestHarness;

my $front = front_node('front', extension => 1, conf => { max_worker_processes => 16 });
my $shard = pg_shard_node('shards', conf => { max_connections => 40 });
for my $db (qw(a b))
{
	$shard->safe_psql('postgres', "CREATE DATABASE $db");
	$shard->safe_psql('postgres', "ALTER DATABASE $db SET default_transaction_isolation = 'repeatable read'");
	$shard->safe_psql($db, q{
		CREATE TABLE counters (id text PRIMARY KEY, n integer NOT NULL);
		CREATE TABLE events (user_id text NOT NULL, seq integer NOT NULL, note text);
	});
}
is($shard->safe_psql('a', 'SHOW default_transaction_isolation'), 'repeatable read',
	'the shard databases default to REPEATABLE READ');
$front->safe_psql('postgres', pg_shard_servers($shard, a => 'a', b => 'b') . q{
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

is( front_sql(q{SELECT collegedb.first('probe', 'SELECT current_setting(''transaction_isolation'') AS i') ->> 'i'}),
	'read committed', 'a routed statement runs at READ COMMITTED on the shard');

# --- a mover waits for a writer of a new row, then copies it -------------------

front_sql(q{
	SELECT collegedb.set_mapping('k', 'a');
	SELECT collegedb.run('k', 'INSERT INTO counters VALUES ($1, 0)', 'k');
});
my $app = bg_session($front);
bg_query($app, 'BEGIN');
is( bg_query($app, q{SELECT collegedb.run('k', 'INSERT INTO events VALUES ($1, 1, ''w'')', 'k')})
	  ->{stdout},
	'1', "a writer inserts a new row of the key in an open transaction (holding the key's lock on a)");
my $mover = psql_start($front, q{SELECT collegedb.reassign_shard('k', 'b') -> 'moved'});
ok( poll_until(
		$shard,
		q{SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND wait_event = 'advisory'},
		'1', 30, 'a'),
	"the mover waits for the key's lock on the source");
bg_query($app, 'COMMIT');
my $r = psql_finish($mover, 60);
is($r->{rc}, 0, 'the move finishes once the writer commits') or diag $r->{stderr};
is($r->{stdout}, 'true', '... and moved the key');
is(placement('events', 'user_id', 'k'), '0/1', "the writer's row moved with the key: on the target only");
is(placement('counters', 'id', 'k'), '0/1', "the key's other row too");
is(front_sql(q{SELECT count(*) FROM collegedb.moves WHERE step <> 'done'}), '0', 'no move is left unfinished');

# --- a writer waits for a mover, then follows its tombstone --------------------

front_sql(q{SELECT collegedb.set_mapping('w', 'a')});
my $m = bg_session($shard, dbname => 'a');
bg_query($m, 'BEGIN');
bg_query($m, q{SELECT pg_advisory_xact_lock(hashtextextended('collegedb:' || 'w', 0))});
my $writer = psql_start($front, q{SELECT collegedb.run('w', 'INSERT INTO events VALUES ($1, 1, ''late'')', 'w')});
ok( poll_until(
		$shard,
		q{SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND wait_event = 'advisory'},
		'1', 30, 'a'),
	"the writer waits for the key's lock, which a mover holds on the source");
bg_query($m, q{INSERT INTO collegedb_tombstones (table_name, shard_key, moved_to, move_id)
	VALUES ('counters', 'w', 'b', 1), ('events', 'w', 'b', 1)});
front_sql(q{SELECT collegedb.set_mapping('w', 'b')});
bg_query($m, 'COMMIT');
$r = psql_finish($writer, 60);
is($r->{rc}, 0, 'the write finishes once the mover commits') or diag $r->{stderr};
is(placement('events', 'user_id', 'w'), '0/1', "the write followed the mover's tombstone to the target");
$m->quit;
$app->quit;

done_testing();
