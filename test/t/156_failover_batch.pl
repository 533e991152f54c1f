# 156_failover_batch: a front promoted from its standby finishes a batch of moves
# the old primary left in the middle (issue 29).
#
# A primary front streams synchronously to a hot standby (collegedb preloaded and
# collegedb.database set, both copied by the base backup, so the standby's
# coordinator starts once it is promoted); 3,000 keys are on PostgreSQL shards p1
# and p2; moves go in batches of 200 keys (collegedb.move_batch_keys = 200,
# collegedb.move_batch_time = 0: batches are not resized).
#  - A third shard is added and the table rebalanced; the movers wait inside a
#    batch's source step, after the target committed its copy and before the
#    source's delete (the batch's keys have their rows on both shards).  The
#    primary is stopped with -m immediate and the standby promoted: its coordinator
#    finishes the job and the interrupted batch.
#  - The same on the promoted front, with a fourth shard, the movers waiting after
#    a batch's step source_done, before the mapping step (the rows are on the
#    target, the mappings still name the source, tombstones on the source).
# After each failover: every key's row is on exactly one shard, the one its mapping
# on the new primary names (its owner among the shards, the job being done); no
# move is unfinished; nothing is left prepared on the shards; the job ended done;
# a routed read of every key, and of every moved key, through the new primary
# returns its row.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use CollegeDB::TestHarness;

my $t_start = time;
my $NKEYS   = 3_000;
my $primary = front_node(
	'primary',
	init => { allows_streaming => 1 },
	conf => {
		max_worker_processes        => 16,
		max_connections             => 40,
		'collegedb.database'        => 'postgres',
		'collegedb.move_batch_keys' => 200,
		'collegedb.move_batch_time' => 0,
	});
my $pg = pg_shard_node('shards', conf => { max_connections => 80 });
$primary->safe_psql('postgres', 'CREATE EXTENSION collegedb');
add_pg_shards($primary, $pg, p1 => 'p1', p2 => 'p2');
my $create = 'CREATE TABLE items (id VARCHAR(64) PRIMARY KEY, v INTEGER NOT NULL)';
$pg->safe_psql($_, $create) for qw(p1 p2);
# the shards added later have the table already
for my $db (qw(p3 p4))
{
	$pg->safe_psql('postgres', "CREATE DATABASE $db");
	$pg->safe_psql($db, $create);
}
$primary->safe_psql('postgres', pg_shard_servers($pg, p3 => 'p3', p4 => 'p4')
	  . q{SELECT collegedb.register_table('items', 'id')});

# seeding: on the shards directly, and in the mapping catalog
my $keys_sql = "SELECT 'k' || i AS k FROM generate_series(1, $NKEYS) AS i";
for my $s (qw(p1 p2))
{
	my $list = $primary->safe_psql('postgres', qq{SELECT string_agg(k, ',') FROM ($keys_sql) AS s
		WHERE collegedb.rendezvous_owner(k, ARRAY['p1', 'p2']) = '$s'});
	$pg->safe_psql($s, "INSERT INTO items SELECT k, 1 FROM unnest(string_to_array('$list', ',')) AS k");
}
$primary->safe_psql('postgres', qq{INSERT INTO collegedb.mapping (key, shard)
	SELECT collegedb.mapping_id(k), n.number
	  FROM ($keys_sql) AS s JOIN collegedb.shard_number n ON n.name = collegedb.rendezvous_owner(k, ARRAY['p1', 'p2'])});

# Rows of items on the shards, read on the shards themselves: "rows/distinct keys".
sub on_shards
{
	my %seen;
	my $rows = 0;
	for my $db (qw(p1 p2 p3 p4))
	{
		for my $k (split /\n/, $pg->safe_psql($db, 'SELECT id FROM items'))
		{
			$rows++;
			$seen{$k}++;
		}
	}
	return $rows . '/' . scalar(keys %seen);
}

# Through front $node: "rows read by fan-out / distinct keys / rows on the shard their
# mapping names / rows on their rendezvous owner among $owners / routed reads of
# every key".
sub placement
{
	my ($node, $owners) = @_;
	return $node->safe_psql('postgres', qq{
		WITH placed AS (SELECT value->>'id' AS k, shard FROM collegedb.fanout('SELECT id FROM items')
		                 WHERE error IS NULL)
		SELECT (SELECT count(*) FROM placed) || '/' ||
		       (SELECT count(DISTINCT k) FROM placed) || '/' ||
		       (SELECT count(*) FROM placed p JOIN collegedb.mappings m
		            ON m.key = collegedb.mapping_key(p.k) AND m.shard = p.shard) || '/' ||
		       (SELECT count(*) FROM placed p WHERE p.shard = collegedb.rendezvous_owner(p.k, $owners)) || '/' ||
		       (SELECT count(*) FROM ($keys_sql) AS s,
		          collegedb.all_json(k, 'SELECT id FROM items WHERE id = \$1', k) AS r
		         WHERE r->>'id' = k)});
}

is(placement($primary, q{ARRAY['p1', 'p2']}), "$NKEYS/$NKEYS/$NKEYS/$NKEYS/$NKEYS",
	'seeded: every key is read once, on its mapped shard');

# Per case: the pause setting and its value, its log line, the step the paused
# batch's moves are at, whether the batch's rows are on both shards, the shard
# added, the shards afterwards.  Each case runs on the front the case before
# promoted, with a new standby made before the pause is set (a base backup copies
# postgresql.auto.conf).
my $front = $primary;
my @cases = (
	[ 'test_pause_in_step',    'source',      'paused inside step source',     'copied',      1, 'p3', [qw(p1 p2 p3)] ],
	[ 'test_pause_after_step', 'source_done', 'paused after step source_done', 'source_done', 0, 'p4', [qw(p1 p2 p3 p4)] ]);
for my $case (@cases)
{
	my ($guc, $value, $logged, $at, $doubled, $added, $shards) = @$case;
	my $label  = "$value (adding $added)";
	my $owners = 'ARRAY[' . join(', ', map { "'$_'" } @$shards) . ']';
	my $before = 'ARRAY[' . join(', ', map { "'$_'" } grep { $_ ne $added } @$shards) . ']';
	my $next   = standby_of($front, "standby_$value");
	is($next->safe_psql('postgres', 'SHOW collegedb.database'), 'postgres',
		"$label: the standby's coordinator is set to database postgres");
	is(placement($next, $before), "$NKEYS/$NKEYS/$NKEYS/$NKEYS/$NKEYS",
		"$label: the standby reads every key once, on its mapped shard");

	# synchronous replication: what the front committed is on the standby too
	$front->safe_psql('postgres',
		"ALTER SYSTEM SET synchronous_standby_names = '*'; SELECT pg_reload_conf()");
	ok(poll_until($front, q{SELECT sync_state FROM pg_stat_replication}, 'sync', 30),
		"$label: the standby is synchronous");
	$front->safe_psql('postgres', "ALTER SYSTEM SET collegedb.$guc = '$value'; SELECT pg_reload_conf()");
	ok(poll_until($front, "SHOW collegedb.$guc", $value, 30), "$label: the front pauses moves");

	$front->safe_psql('postgres', "SELECT collegedb.add_shard('$added')");
	my $planned = $front->safe_psql('postgres', q{SELECT moved FROM collegedb.rebalance('items', dry_run => true)});
	cmp_ok($planned, '>=', 400, "$label: the rebalance has $planned keys to move (two batches or more)");
	my $off = -s $front->logfile;
	my $job = $front->safe_psql('postgres', q{SELECT collegedb.schedule_rebalance('items', concurrency => 2)});
	my ($id) = wait_for_log_match($front, qr/collegedb: move (\d+) \Q$logged\E\b/, $off, 120);
	ok(defined $id, "$label: a mover waits") or BAIL_OUT('the mover did not pause');
	# one read: the other mover may reach its pause meanwhile
	my ($in_batch, $paused_ids) = split /\|/, $front->safe_psql('postgres',
		qq{SELECT count(*), string_agg(id::text, ',' ORDER BY id) FROM collegedb.move WHERE step = '$at'});
	cmp_ok($in_batch, '>', 1, "$label: the paused batches (of both movers, or one) hold $in_batch moves at step $at");
	my ($rows) = split m{/}, on_shards();
	if ($doubled)
	{
		cmp_ok($rows, '>', $NKEYS, "$label: the paused batch's rows are on source and target ($rows rows)");
	}
	else
	{
		is($rows, $NKEYS, "$label: the paused batch's rows are on the target only");
	}
	$front->wait_for_catchup($next);

	my $t_fail = time;
	$front->stop('immediate');
	$next->promote;
	ok(poll_until($next, 'SELECT pg_is_in_recovery()', 'f', 30), "$label: the standby is promoted");
	ok( poll_until($next, qq{SELECT state NOT IN ('queued', 'running') FROM collegedb.jobs WHERE id = $job},
			't', 180),
		"$label: the promoted front's coordinator ends the job");
	ok( poll_until($next, q{SELECT count(*) FROM collegedb.moves WHERE step NOT IN ('done', 'failed')},
			'0', 120),
		"$label: no move is left unfinished");
	note sprintf '%s: the promoted front finished the work in %.1f s', $label, time - $t_fail;
	my $state = $next->safe_psql('postgres',
		qq{SELECT state || '/' || moved || '/' || failed || ' ' || coalesce(last_error, '') FROM collegedb.jobs WHERE id = $job});
	note "$label: the job ended $state";
	is($state =~ s/ .*//sr, "done/$planned/0", "$label: the job ends done, every planned key moved");
	is( $next->safe_psql('postgres',
			qq{SELECT count(*) FROM collegedb.moves WHERE id IN ($paused_ids) AND step = 'done'}),
		$in_batch, "$label: the interrupted batches' $in_batch moves are done");
	is($next->safe_psql('postgres', q{SELECT count(*) FROM collegedb.moves WHERE step = 'failed'}), '0',
		"$label: no move failed");
	is($pg->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'), '0',
		"$label: nothing is left prepared on the shards");
	is(on_shards(), "$NKEYS/$NKEYS", "$label: every key's row is on exactly one shard");
	is(placement($next, $owners), "$NKEYS/$NKEYS/$NKEYS/$NKEYS/$NKEYS",
		"$label: every key is read once, on the shard its mapping names, its owner, and routed");
	my $moved = $next->safe_psql('postgres', qq{SELECT count(DISTINCT key) FROM collegedb.moves
		WHERE job_id = $job AND step = 'done'});
	is($moved, $planned, "$label: each planned key has a finished move");
	# the journal holds keys in their stored form (SHA-256 under hash_mappings)
	is( $next->safe_psql('postgres', qq{SELECT count(*) FROM ($keys_sql) AS s,
			collegedb.all_json(k, 'SELECT id FROM items WHERE id = \$1', k) AS r
		  WHERE r->>'id' = k AND collegedb.mapping_key(k) IN
		        (SELECT key FROM collegedb.moves WHERE job_id = $job AND step = 'done')}),
		$moved, "$label: a routed read of every moved key returns its row");
	is( $next->safe_psql('postgres', q{SELECT count(*) FROM collegedb.fanout('SELECT shard_key FROM collegedb_tombstones') t
		JOIN collegedb.mappings m ON m.key = collegedb.mapping_key(t.value->>'shard_key')
		WHERE t.error IS NULL AND m.shard = t.shard}),
		'0', "$label: no shard holds a tombstone of a key that lives on it");
	$front = $next;
}

note sprintf('156_failover_batch took %.1f s', time - $t_start);
done_testing();
