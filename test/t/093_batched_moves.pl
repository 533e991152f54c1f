# Batched moves (issue 29): a rebalance moves its keys in batches of
# collegedb.move_batch_keys keys with one source and target, through the journaled
# protocol of a one-key move, one statement per table and step for the batch.
#
# (a) 100,000 keys on PostgreSQL shards p1 and p2, 2,000 on a MariaDB shard and 2,000
#     on an SQLite shard (both draining), two registered tables: a third PostgreSQL
#     shard is added and the table rebalanced at concurrency 4 while two pgbench
#     clients update random keys.  Afterwards every row is read exactly once, on the
#     shard its mapping names, which is its owner, and every acknowledged update is
#     there.  The rate is noted (keys leave the MariaDB shard one by one: its
#     adapter has no batch lock, see mysql.c).
# (b) A second table's keys move into the MariaDB and SQLite shards (and among the
#     PostgreSQL ones) in batches; the mover is killed with SIGKILL (the front
#     restarts) inside a batch's source step, after the target committed its copy:
#     the job runs again and every row ends exactly once on its owner, with no move
#     unfinished and no tombstone on a shard that still holds the key.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use CollegeDB::TestHarness;

my $NKEYS  = $ENV{COLLEGEDB_093_KEYS} // 100_000;
my $NOTHER = 2_000;     # keys on the MariaDB shard, and on the SQLite shard
my $NSMALL = 4_000;     # keys of the second table

my $front = front_node(
	'front',
	conf => {
		max_connections               => 80,
		max_worker_processes          => 24,
		restart_after_crash           => 'on',
		log_statement                 => 'none',
		'collegedb.recovery_interval' => '500ms',
		# COLLEGEDB_093_BATCH=1: the same run with one-key moves, for comparison
		'collegedb.move_batch_keys' => $ENV{COLLEGEDB_093_BATCH} // 1000,
	});
my $pg = pg_shard_node('shards', conf => { max_connections => 120, log_statement => 'none' });
my $mdb    = start_mariadb();
my $mdbname = mysql_database($mdb);
my $sqlite = sqlite_dir() . '/l1.db';
$front->safe_psql('postgres', 'CREATE EXTENSION collegedb');
add_pg_shards($front, $pg, p1 => 'p1', p2 => 'p2');
$pg->safe_psql('postgres', 'CREATE DATABASE p3');
# the shard added later has the tables already
$pg->safe_psql('p3', join ';', map { sprintf 'CREATE TABLE %s (id VARCHAR(64) PRIMARY KEY, v INTEGER NOT NULL)', $_ } qw(items notes small));

sub sql { return $front->safe_psql('postgres', $_[0], timeout => $_[1] // 300) }

my $create = 'CREATE TABLE %s (id VARCHAR(64) PRIMARY KEY, v INTEGER NOT NULL)';
sql(pg_shard_servers($pg, p3 => 'p3')
	  . mysql_shard_server($mdb, 'm1', dbname => $mdbname)
	  . sqlite_shard_server('l1', $sqlite) . qq{
	SELECT collegedb.add_shard(s) FROM unnest(ARRAY['m1', 'l1']) AS s;
	SELECT count(*) FROM collegedb.run_on_all('@{[ sprintf $create, 'items' ]}');
	SELECT count(*) FROM collegedb.run_on_all('@{[ sprintf $create, 'notes' ]}');
	SELECT count(*) FROM collegedb.run_on_all('@{[ sprintf $create, 'small' ]}');
	SELECT collegedb.register_table(t, 'id') FROM unnest(ARRAY['items', 'notes', 'small']) AS t;
	CREATE FOREIGN TABLE items (id text, v integer) SERVER collegedb OPTIONS (key_column 'id');
	CREATE FOREIGN TABLE notes (id text, v integer) SERVER collegedb OPTIONS (key_column 'id');
	CREATE FOREIGN TABLE small (id text, v integer) SERVER collegedb OPTIONS (key_column 'id');
});

# --- seeding: on the shards directly, and in the mapping catalog -----------------------

my $t0 = time;
my $pkeys = "SELECT 'k' || i AS k FROM generate_series(1, $NKEYS) AS i";
for my $s (qw(p1 p2))
{
	my $list = sql(qq{SELECT string_agg(k, ',') FROM ($pkeys) AS s
		WHERE collegedb.rendezvous_owner(k, ARRAY['p1', 'p2']) = '$s'});
	$pg->safe_psql($s, qq{
		INSERT INTO items SELECT k, 1 FROM unnest(string_to_array('$list', ',')) AS k;
		-- every tenth key has a row in the second table as well
		INSERT INTO notes SELECT k, 7 FROM unnest(string_to_array('$list', ',')) AS k
		 WHERE substr(k, 2)::int % 10 = 0;
	});
}
my $small = "SELECT 's' || i AS k FROM generate_series(1, $NSMALL) AS i";
for my $s (qw(p1 p2))
{
	my $list = sql(qq{SELECT string_agg(k, ',') FROM ($small) AS s
		WHERE collegedb.rendezvous_owner(k, ARRAY['p1', 'p2']) = '$s'});
	$pg->safe_psql($s, "INSERT INTO small SELECT k, 3 FROM unnest(string_to_array('$list', ',')) AS k");
}
mysql_query($mdb,
	'INSERT INTO items VALUES ' . join(', ', map { "('m$_', 1)" } 1 .. $NOTHER) . ';'
	  . 'INSERT INTO notes VALUES ' . join(', ', map { "('m$_', 7)" } grep { $_ % 10 == 0 } 1 .. $NOTHER),
	database => $mdbname);
sqlite_exec($sqlite,
	'BEGIN; INSERT INTO items VALUES ' . join(', ', map { "('l$_', 1)" } 1 .. $NOTHER) . ';'
	  . 'INSERT INTO notes VALUES ' . join(', ', map { "('l$_', 7)" } grep { $_ % 10 == 0 } 1 .. $NOTHER)
	  . '; COMMIT;');
sql(qq{INSERT INTO collegedb.mapping (key, shard)
	SELECT collegedb.mapping_id(k), n.number
	  FROM ($pkeys UNION ALL $small) AS s JOIN collegedb.shard_number n ON n.name = collegedb.rendezvous_owner(k, ARRAY['p1', 'p2']);
	INSERT INTO collegedb.mapping (key, shard)
	SELECT collegedb.mapping_id(p || i), n.number
	  FROM generate_series(1, $NOTHER) AS i, unnest(ARRAY['m', 'l']) AS p
	  JOIN collegedb.shard_number n ON n.name = CASE p WHEN 'm' THEN 'm1' ELSE 'l1' END});
note sprintf 'seeding took %.1f s', time - $t0;
my $nitems = $NKEYS + 2 * $NOTHER;
my $nnotes = int($NKEYS / 10) + 2 * int($NOTHER / 10);

# "rows read through the front / distinct keys / rows on the shard their mapping names
# / rows on their rendezvous owner among $owners"
sub placement
{
	my ($table, $owners) = @_;
	return sql(qq{
		WITH placed AS (SELECT value->>'id' AS k, shard FROM collegedb.fanout('SELECT id FROM $table')
		                 WHERE error IS NULL)
		SELECT (SELECT count(*) FROM $table) || '/' ||
		       (SELECT count(DISTINCT id) FROM $table) || '/' ||
		       (SELECT count(*) FROM placed p JOIN collegedb.mappings m
		            ON m.key = collegedb.mapping_key(p.k) AND m.shard = p.shard) || '/' ||
		       (SELECT count(*) FROM placed p WHERE p.shard = collegedb.rendezvous_owner(p.k, $owners))});
}

is(placement('items', q{ARRAY['p1', 'p2']}), "$nitems/$nitems/$nitems/$NKEYS",
	'seeded: every key is read once, on its mapped shard');

# --- (a) 100,000 keys rebalanced onto a new shard while two clients write ----------------

sql(q{SELECT collegedb.add_shard('p3');
	SELECT collegedb.set_shard_state(s, drain => 'draining') FROM unnest(ARRAY['m1', 'l1']) AS s});
my $planned = sql(q{SELECT moved FROM collegedb.rebalance('items', dry_run => true)});
cmp_ok($planned, '>=', $NKEYS / 4, "the rebalance has $planned keys to move");

my $script = PostgreSQL::Test::Utils::tempdir() . '/update.sql';
open my $fh, '>', $script or die "$script: $!";
print $fh "\\set r random(1, $NKEYS)\nUPDATE items SET v = v + 1 WHERE id = 'k:r';\n";
close $fh;
my ($pgb_out, $pgb_err) = ('', '');
my $pgbench = IPC::Run::start(
	[ 'pgbench', '-n', '-c', '2', '-j', '2', '-T', '20', '-f', $script, '-d', $front->connstr('postgres') ],
	'>', \$pgb_out, '2>', \$pgb_err);

$t0 = time;
my $job = sql(q{SELECT collegedb.schedule_rebalance('items', concurrency => 4)});
is(sql(qq{SELECT state || '/' || moved || '/' || failed FROM collegedb.wait_for_job($job, '600 s')}, 700),
	"done/$planned/0", 'the rebalance ends done, every planned key moved');
my $secs = time - $t0;
note sprintf 'batched rebalance: %d keys in %.1f s (%.0f keys/s; the job view says %s keys/s)',
  $planned, $secs, $planned / ($secs || 1),
  sql(qq{SELECT keys_per_second FROM collegedb.jobs WHERE id = $job});
$pgbench->finish;
my ($acked) = $pgb_out =~ /number of transactions actually processed: (\d+)/;
my ($failed_tx) = $pgb_out =~ /number of failed transactions: (\d+)/;
my ($latency) = $pgb_out =~ /latency average = ([\d.]+ ms)/;
note "the writers' updates: " . ($acked // 0) . ' in 20 s, latency average ' . ($latency // '?');
ok(defined $acked && $acked > 0, "the writers' updates were acknowledged (" . ($acked // 'none') . ')')
  or diag "pgbench: $pgb_out\n$pgb_err";
is($failed_tx // 0, 0, 'no writer transaction failed');
unlike($pgb_err, qr/aborted|ERROR/, 'no writer client aborted') or diag $pgb_err;

is(placement('items', q{ARRAY['p1', 'p2', 'p3']}), "$nitems/$nitems/$nitems/$nitems",
	'every key of items is read once, on its mapped shard, which is its owner among the three');
is(placement('notes', q{ARRAY['p1', 'p2', 'p3']}), "$nnotes/$nnotes/$nnotes/$nnotes",
	'the second table\'s rows moved with their keys');
is(sql('SELECT sum(v) FROM items'), $nitems + ($acked // 0),
	'every acknowledged update is there, none twice');
is(sql(q{SELECT count(*) FROM collegedb.moves WHERE step NOT IN ('done', 'failed')}), '0',
	'no move is left unfinished');
cmp_ok(sql(q{SELECT count(*) FROM collegedb.moves WHERE step = 'done'}), '>=', $planned,
	'each key has its own finished move');

# --- (b) keys into MariaDB and SQLite, with a SIGKILL inside a batch ----------------------

sub set_conf
{
	my ($name, $value) = @_;
	sql(defined $value
		? "ALTER SYSTEM SET $name = '$value'; SELECT pg_reload_conf()"
		: "ALTER SYSTEM RESET $name; SELECT pg_reload_conf()");
	ok(poll_until($front, "SHOW $name", $value // '', 30), "$name is '" . ($value // 'reset') . "'");
	return;
}

sql(q{SELECT collegedb.set_shard_state(s, drain => 'active') FROM unnest(ARRAY['m1', 'l1']) AS s});
my $owners5 = q{ARRAY['p1', 'p2', 'p3', 'm1', 'l1']};
my $to_move = sql(q{SELECT moved FROM collegedb.rebalance('small', dry_run => true)});
cmp_ok($to_move, '>=', $NSMALL / 2, "the second table has $to_move keys to move");
my $to_others = sql(qq{SELECT count(*) FROM ($small) AS s
	WHERE collegedb.rendezvous_owner(k, $owners5) IN ('m1', 'l1')});
note "$to_others of them go to the MariaDB and SQLite shards";

set_conf('collegedb.test_pause_in_step', 'source');
my $log_offset = -s $front->logfile;
my $kjob = sql(q{SELECT collegedb.schedule_rebalance('small', concurrency => 2)});
my ($paused) = wait_for_log_match($front,
	qr/\[(\d+)\] LOG:  collegedb: move \d+ paused inside (?:batch )?step source/, $log_offset, 120);
ok(defined $paused, 'a mover is paused inside a batch, its target\'s copy committed');
$paused //= 0;
my $copies = sql(q{SELECT count(*) FROM collegedb.move WHERE step = 'copied'});
cmp_ok($copies, '>', 1, "the paused batch holds $copies moves at step copied");
set_conf('collegedb.test_pause_in_step', undef);
kill 'KILL', $paused if $paused > 0;
# the postmaster restarts everything; the job is run again
ok(wait_for_log_match($front, qr/all server processes terminated; reinitializing/, $log_offset, 60),
	'the postmaster restarts every process');
$front->poll_query_until('postgres', 'SELECT true')
  or die 'the front did not accept connections after the crash';
ok(poll_until($front, 'SELECT 1', '1', 120), 'the front is back after the SIGKILL');
is(sql(qq{SELECT state FROM collegedb.wait_for_job($kjob, '600 s')}, 700), 'done',
	'the killed job runs again, to done');
ok( poll_until(
		$front, q{SELECT count(*) FROM collegedb.moves WHERE step NOT IN ('done', 'failed')},
		'0', 120),
	'the killed batch\'s moves all finished');
is(placement('small', $owners5), "$NSMALL/$NSMALL/$NSMALL/$NSMALL",
	'every key of the second table is read once, on its mapped shard, which is its owner among five');
is(sql(q{SELECT sum(v) FROM small}), 3 * $NSMALL, 'no row of it was lost or doubled');
is(sql(qq{SELECT count(*) FROM collegedb.fanout('SELECT id FROM small') f
	WHERE f.error IS NULL AND f.shard IN ('m1', 'l1')}), $to_others,
	'the MariaDB and SQLite shards hold their keys of it');
is(placement('items', q{ARRAY['p1', 'p2', 'p3']}), "$nitems/$nitems/$nitems/$nitems",
	'the first table is as it was');
# a tombstone names where its key went, never the shard it is on
is( sql(q{SELECT count(*) FROM collegedb.fanout('SELECT shard_key, moved_to FROM collegedb_tombstones WHERE table_name <> ''''') t
	JOIN collegedb.mappings m ON m.key = collegedb.mapping_key(t.value->>'shard_key')
	WHERE t.error IS NULL AND m.shard = t.shard}),
	'0', 'no shard holds a tombstone of a key that lives on it');

done_testing();
