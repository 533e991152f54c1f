# 181_bulk_faults: a bulk load interrupted, and a bulk load with moves running beside it.
#
# Two PostgreSQL shards a and b (separate clusters, so that one can be restarted), a
# front with restart_after_crash and a fast recovery pass.  Each load is one COPY of
# COLLEGEDB_BULK_FAULT_ROWS rows (default 60,000) sent in small batches
# (collegedb.insert_batch_rows = 200), so that it is midway when the fault comes:
#   - kill -9 of the loading backend once COPY has sent 10,000 rows: the front
#     restarts; no row of the load is on either shard, no mapping of it in the front,
#     nothing prepared is left on the shards; the same COPY then loads every row;
#   - shard b restarted with -m immediate midway: the COPY fails with a connection
#     error (class 08) naming the shard; no row of it anywhere, nothing prepared; run
#     again, it loads every row;
#   - moves during a load: 300 keys exist (a row in items each); a COPY of 100 rows
#     per key into events (registered with items, colocated by key) runs while
#     another session moves 60 of the keys to the other shard one by one.  After
#     both: every event row is read once through the front, all of a key's events
#     are on the shard its mapping names (with its items row), and none elsewhere.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use CollegeDB::TestHarness;

my $rows = $ENV{COLLEGEDB_BULK_FAULT_ROWS} // 60_000;

my $front = front_node(
	'front',
	extension => 1,
	conf      => {
		restart_after_crash           => 'on',
		'collegedb.recovery_interval' => '300ms',
	});
my $pa = pg_shard_node('pa', conf => { log_statement => 'none' });
my $pb = pg_shard_node('pb', conf => { log_statement => 'none' });
$pa->safe_psql('postgres', 'CREATE DATABASE a');
$pb->safe_psql('postgres', 'CREATE DATABASE b');

$front->safe_psql(
	'postgres', qq{
	CREATE SERVER a FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ pg_server_options($pa, dbname => 'a') ]});
	CREATE USER MAPPING FOR PUBLIC SERVER a OPTIONS (user 'postgres');
	CREATE SERVER b FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ pg_server_options($pb, dbname => 'b') ]});
	CREATE USER MAPPING FOR PUBLIC SERVER b OPTIONS (user 'postgres');
	SELECT collegedb.add_shard('a');
	SELECT collegedb.add_shard('b');
	SELECT count(*) FROM collegedb.run_on_all('CREATE TABLE items (id INT PRIMARY KEY, grp INT, v INT, pad TEXT)');
	SELECT count(*) FROM collegedb.run_on_all('CREATE TABLE events (id INT NOT NULL, seq INT NOT NULL, PRIMARY KEY (id, seq))');
	SELECT collegedb.register_table('items', 'id');
	SELECT collegedb.register_table('events', 'id');
	CREATE FOREIGN TABLE items (id int, grp int, v int, pad text) SERVER collegedb OPTIONS (key_column 'id');
	CREATE FOREIGN TABLE events (id int, seq int) SERVER collegedb OPTIONS (key_column 'id');
	ALTER ROLE postgres SET collegedb.insert_batch_rows = 200;
});

my $dir = PostgreSQL::Test::Utils::tempdir();
chmod 0755, $dir;
sub write_file
{
	my ($name, $lo, $hi) = @_;
	my $file = "$dir/$name";
	open(my $fh, '>', $file) or die "$file: $!";
	print $fh "$_\t" . ($_ % 100) . "\t1\t" . ('x' x 40) . "\n" for $lo .. $hi;
	close $fh;
	chmod 0644, $file;
	return $file;
}

# rows of ids lo .. hi on shard node $node, database $db
sub rows_on
{
	my ($node, $db, $lo, $hi) = @_;
	return $node->safe_psql($db, "SELECT count(*) FROM items WHERE id BETWEEN $lo AND $hi");
}

sub nothing_prepared
{
	my ($what) = @_;
	ok( poll_until($pa, 'SELECT count(*) FROM pg_prepared_xacts', '0', undef, 'a')
		  && poll_until($pb, 'SELECT count(*) FROM pg_prepared_xacts', '0', undef, 'b'),
		"$what: nothing prepared on either shard");
}

# The COPY of a load in a background session; returns once it has sent $after rows
# (pg_stat_progress_copy), with the session and the loading backend's pid.
sub start_load
{
	my ($file, $after) = @_;
	my $bg = bg_session($front, timeout => 600);
	bg_send($bg, "COPY items FROM '$file'");
	ok( poll_until(
			$front,
			"SELECT count(*) > 0 FROM pg_stat_progress_copy WHERE tuples_processed >= $after AND relid = 'items'::regclass",
			't'),
		"the load is midway (COPY has processed $after rows)");
	my $pid = $front->safe_psql('postgres',
		q{SELECT pid FROM pg_stat_progress_copy WHERE relid = 'items'::regclass});
	return ($bg, $pid);
}

# 1. kill -9 of the loading backend
my $file1 = write_file('load1.tsv', 1, $rows);
my ($bg, $pid) = start_load($file1, 10_000);
kill 'KILL', $pid;
eval { bg_wait($bg) };
eval { $bg->quit };
ok(poll_until($front, 'SELECT 1', '1'), 'the front is back after the kill -9');
nothing_prepared('after kill -9');
is(rows_on($pa, 'a', 1, $rows) + rows_on($pb, 'b', 1, $rows), 0,
	'after kill -9: no row of the load on either shard');
is($front->safe_psql('postgres', 'SELECT count(*) FROM collegedb.mapping'),
	'0', 'after kill -9: no mapping of the load in the front');
my $r = psql_outcome($front, "COPY items FROM '$file1'", timeout => 600);
is($r->{stderr}, '', 'the same COPY runs again');
is($front->safe_psql('postgres', "SELECT count(*), count(DISTINCT id) FROM items WHERE id BETWEEN 1 AND $rows"),
	"$rows|$rows", '... and loads every row once');
is(rows_on($pa, 'a', 1, $rows) + rows_on($pb, 'b', 1, $rows), $rows, '... on the shards');

# 2. shard b restarted midway
my $file2 = write_file('load2.tsv', $rows + 1, 2 * $rows);
($bg, $pid) = start_load($file2, 10_000);
$pb->stop('immediate');
$pb->start;
$r = bg_wait($bg);
like($r->{stderr}, qr/ERROR:  08\d\d\d:/, 'a shard restarted midway: the COPY fails with a connection error');
like($r->{stderr}, qr/"b"/, '... naming the shard');
$bg->quit;
nothing_prepared('after the shard restart');
is(rows_on($pa, 'a', $rows + 1, 2 * $rows) + rows_on($pb, 'b', $rows + 1, 2 * $rows), 0,
	'after the shard restart: no row of the load on either shard');
is( $front->safe_psql('postgres',
		"SELECT count(*) FROM collegedb.mapping WHERE key IN (SELECT collegedb.mapping_id(i::text) FROM generate_series($rows + 1, 2 * $rows) AS i)"),
	'0', '... and no mapping of it');
$r = psql_outcome($front, "COPY items FROM '$file2'", timeout => 600);
is($r->{stderr}, '', 'the COPY runs again after the restart');
is( $front->safe_psql('postgres',
		"SELECT count(*), count(DISTINCT id) FROM items WHERE id BETWEEN $rows + 1 AND 2 * $rows"),
	"$rows|$rows", '... and loads every row once');

# 3. moves during a load of events for existing keys
my $keys = 300;
my $per_key = 100;
$front->safe_psql('postgres',
	"INSERT INTO items SELECT -i, 0, 0, 'k' FROM generate_series(1, $keys) AS i");
my $events = "$dir/events.tsv";
open(my $fh, '>', $events) or die "$events: $!";
for my $seq (1 .. $per_key)
{
	print $fh "-$_\t$seq\n" for 1 .. $keys;
}
close $fh;
chmod 0644, $events;
my $before = $front->safe_psql('postgres',
	"SELECT string_agg(shard, ',' ORDER BY i) FROM generate_series(1, 60) AS i, collegedb.shard_for_key((-i)::text) AS shard");

# the shards take each event row a little slower, so that the load is
# still running when the moves come (a batch of 200 rows takes 40 ms)
for my $shard ([ $pa, 'a' ], [ $pb, 'b' ])
{
	$shard->[0]->safe_psql(
		$shard->[1], q{
		CREATE FUNCTION slow_row() RETURNS trigger LANGUAGE plpgsql
		  AS $$BEGIN PERFORM pg_sleep(0.0002); RETURN NEW; END$$;
		CREATE TRIGGER slow_row BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION slow_row();
	});
}

my $loader = bg_session($front, timeout => 600);
my $mover  = bg_session($front, timeout => 600);
bg_send($loader, "COPY events FROM '$events'");
ok( poll_until($front,
		q{SELECT count(*) > 0 FROM pg_stat_progress_copy WHERE tuples_processed >= 2000 AND relid = 'events'::regclass},
		't'),
	'the events load is midway');
$r = bg_query($mover,
	q{SELECT count(*) FROM generate_series(1, 60) AS i,
	    LATERAL (SELECT collegedb.reassign_shard((-i)::text,
	               CASE collegedb.shard_for_key((-i)::text) WHEN 'a' THEN 'b' ELSE 'a' END)) AS m});
is($r->{stderr}, '', 'sixty keys moved while the load ran');
$r = bg_wait($loader);
is($r->{stderr}, '', 'the events load finished without an error');
$loader->quit;
$mover->quit;
$_->[0]->safe_psql($_->[1], 'DROP TRIGGER slow_row ON events') for ([ $pa, 'a' ], [ $pb, 'b' ]);
isnt( $front->safe_psql('postgres',
		"SELECT string_agg(shard, ',' ORDER BY i) FROM generate_series(1, 60) AS i, collegedb.shard_for_key((-i)::text) AS shard"),
	$before, 'the sixty keys are on other shards now');
is( $front->safe_psql('postgres', 'SELECT count(*), count(DISTINCT (id, seq)) FROM events'),
	($keys * $per_key) . '|' . ($keys * $per_key), 'every event row read once through the front');
my $misplaced = 0;
my $total     = 0;
for my $s ([ $pa, 'a' ], [ $pb, 'b' ])
{
	my ($node, $name) = @$s;
	my $ids = $node->safe_psql($name, 'SELECT id, count(*) FROM events GROUP BY id');
	my %owner = split /[|\n]/, $front->safe_psql('postgres',
		"SELECT -i, collegedb.shard_for_key((-i)::text) FROM generate_series(1, $keys) AS i");
	for my $line (split /\n/, $ids)
	{
		my ($id, $n) = split /\|/, $line;
		$total += $n;
		$misplaced += $n if ($owner{$id} // '') ne $name;
	}
}
is($total, $keys * $per_key, 'the shards hold every event row once');
is( $pa->safe_psql('a', "SELECT count(*) FROM collegedb_tombstones WHERE table_name = 'events'")
	  + $pb->safe_psql('b', "SELECT count(*) FROM collegedb_tombstones WHERE table_name = 'events'"),
	60, '... and the sixty moves left their tombstones');
is($misplaced, 0, "each key's events are on the shard its mapping names");
nothing_prepared('after the moves');

done_testing();
