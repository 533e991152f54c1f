# 180_bulk_load: loads of 200,000 rows in one statement through a sharded foreign table.
#
# Shards: PostgreSQL p, MariaDB m, SQLite l, under the default commit protocol
# (two-phase: p and m prepare, l is the last participant; a fleet with two SQLite
# shards needs collegedb.commit_protocol = 'sequential', see README "Bulk loads").
# Table items(id int, grp int, v int, pad text), key id, registered (so moves and
# tombstones apply and every write is guarded).  Loads, each one statement of
# COLLEGEDB_BULK_ROWS rows (default 200,000), each of fresh keys:
#   - COPY FROM a file, text format;
#   - COPY FROM STDIN, CSV with a header;
#   - INSERT ... SELECT from generate_series, inside a transaction block, with the
#     PostgreSQL shard's locks counted before the commit.
# After each: every row is read once through the front (count, distinct ids, sums of
# v), each key's row is on the shard its key routes to and on no other (every shard
# read directly), each new key's mapping is the rendezvous owner that a one-row INSERT
# of the key gets (checked against one-row INSERTs of other keys), the locks that the
# load's connection held on the PostgreSQL shard stayed under the bound (1,000), and
# nothing is left prepared.  A crash in any server log fails the run (scripts/test).
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use CollegeDB::TestHarness;

my $rows = $ENV{COLLEGEDB_BULK_ROWS} // 200_000;

my $front = front_node('front', extension => 1);
my $pg    = pg_shard_node('p', conf => { max_locks_per_transaction => 64, log_statement => 'none' });
add_pg_shards($front, $pg, p => 'app');
my $mdb    = start_mariadb();
my $mdbname = mysql_database($mdb);
my $sqlite = sqlite_dir() . '/l.db';

$front->safe_psql(
	'postgres', qq{
	@{[ mysql_shard_server($mdb, 'm', dbname => $mdbname) ]}
	@{[ sqlite_shard_server('l', $sqlite, options => { busy_timeout => 10000 }) ]}
	SELECT collegedb.add_shard(s) FROM unnest(ARRAY['m', 'l']) AS s;
	SELECT count(*) FROM collegedb.run_on_all('CREATE TABLE items (id INT PRIMARY KEY, grp INT, v INT, pad VARCHAR(100))');
	SELECT collegedb.register_table('items', 'id');
	CREATE FOREIGN TABLE items (id int, grp int, v int, pad text) SERVER collegedb OPTIONS (key_column 'id');
});

# Every shard's ids of items, read directly, into the front's table shard_rows.
sub shard_rows
{
	$front->safe_psql('postgres',
		q{DROP TABLE IF EXISTS shard_rows;
		  CREATE TABLE shard_rows (shard text, id int);});
	my $psql_copy = sub {
		my ($shard, $lines) = @_;
		my $tsv = join("\n", map { "$shard\t$_" } split /\n/, $lines);
		$front->safe_psql('postgres', "COPY shard_rows FROM STDIN;\n$tsv\n\\.\n") if $tsv ne '';
	};
	$psql_copy->('p', $pg->safe_psql('app', 'SELECT id FROM items'));
	$psql_copy->('m', mysql_query($mdb, 'SELECT id FROM items', database => $mdbname));
	$psql_copy->('l', sqlite_exec($sqlite, 'SELECT id FROM items;'));
}

# Checks after a load of ids $lo .. $hi (and everything before it).
sub check_load
{
	my ($what, $lo, $hi) = @_;
	my $n = $hi - $lo + 1;
	is( $front->safe_psql('postgres',
			"SELECT count(*), count(DISTINCT id), sum(v) FROM items WHERE id BETWEEN $lo AND $hi"),
		"$n|$n|$n",
		"$what: every row read once through the front");
	shard_rows();
	is( $front->safe_psql('postgres',
			"SELECT count(*), count(DISTINCT id) FROM shard_rows WHERE id BETWEEN $lo AND $hi"),
		"$n|$n",
		"$what: each row on exactly one shard");
	is( $front->safe_psql('postgres',
			qq{SELECT count(*) FROM shard_rows r
			   LEFT JOIN collegedb.mappings m ON m.key = collegedb.mapping_key(r.id::text)
			   WHERE r.id BETWEEN $lo AND $hi AND m.shard IS DISTINCT FROM r.shard}),
		'0', "$what: each row on the shard its key's mapping names");
	is( $front->safe_psql('postgres',
			qq{SELECT count(*) FROM shard_rows r
			   WHERE r.id BETWEEN $lo AND $hi
			     AND collegedb.rendezvous_owner(r.id::text, ARRAY['l', 'm', 'p']) <> r.shard}),
		'0', "$what: each key placed where a one-row INSERT places it (rendezvous)");
	is( $front->safe_psql('postgres',
			"SELECT count(*) FROM collegedb.mapping WHERE key IN (SELECT collegedb.mapping_id(i::text) FROM generate_series($lo, $hi) AS i)"),
		$n, "$what: one mapping per new key");
	is($pg->safe_psql('app', 'SELECT count(*) FROM pg_prepared_xacts'),
		'0', "$what: nothing left prepared on the PostgreSQL shard");
	is(mysql_query($mdb, 'XA RECOVER', database => $mdbname), '',
		"$what: nothing left prepared on the MariaDB shard");
}

# One-row INSERTs place keys by rendezvous: the reference the loads are held to.
$front->safe_psql('postgres',
	join("\n", map { "INSERT INTO items VALUES (-$_, 0, 1, 'one');" } 1 .. 300));
is( $front->safe_psql('postgres',
		q{SELECT count(*) FROM collegedb.mappings m
		  JOIN generate_series(1, 300) AS i ON m.key = collegedb.mapping_key((-i)::text)
		  WHERE m.shard = collegedb.rendezvous_owner((-i)::text, ARRAY['l', 'm', 'p'])}),
	'300', 'one-row INSERTs: each key mapped to its rendezvous owner');
is( $front->safe_psql('postgres',
		q{SELECT count(DISTINCT m.shard) FROM collegedb.mappings m
		  JOIN generate_series(1, 300) AS i ON m.key = collegedb.mapping_key((-i)::text)}),
	'3', '... over all three shards');

my $pad = 'x' x 40;

# 1. COPY FROM a file, text format
my $file = PostgreSQL::Test::Utils::tempdir() . '/items.tsv';
open(my $fh, '>', $file) or die "$file: $!";
print $fh join("\t", $_, $_ % 100, 1, $pad), "\n" for 1 .. $rows;
close $fh;
chmod 0644, $file;
my $t0 = time;
my $r  = psql_outcome($front, "COPY items FROM '$file'", timeout => 3600);
is($r->{stderr}, '', "COPY FROM a file of $rows rows: no error");
note sprintf('COPY FROM file, %d rows: %.1f s', $rows, time - $t0);
check_load('COPY FROM file', 1, $rows);

# 2. COPY FROM STDIN, CSV with a header
my $csv = "id,grp,v,pad\n"
  . join('', map { join(',', $_, $_ % 100, 1, "\"$pad\"") . "\n" } ($rows + 1) .. (2 * $rows));
$t0 = time;
my ($stdout, $stderr) = ('', '');
$front->psql('postgres', "COPY items FROM STDIN (FORMAT csv, HEADER true);\n$csv\\.\n",
	stdout => \$stdout, stderr => \$stderr, timeout => 3600);
is($stderr, '', "COPY FROM STDIN (CSV) of $rows rows: no error");
note sprintf('COPY FROM STDIN csv, %d rows: %.1f s', $rows, time - $t0);
check_load('COPY FROM STDIN', $rows + 1, 2 * $rows);

# 3. INSERT ... SELECT in a transaction block; the PostgreSQL shard's locks counted
#    before the commit
my $bg = bg_session($front, timeout => 3600);
bg_query($bg, 'BEGIN');
$t0 = time;
$r = bg_query($bg,
	"INSERT INTO items SELECT i, i % 100, 1, '$pad' FROM generate_series(" . (2 * $rows + 1) . ', ' . (3 * $rows) . ') AS i');
is($r->{stderr}, '', "INSERT ... SELECT of $rows rows: no error");
note sprintf('INSERT ... SELECT, %d rows: %.1f s', $rows, time - $t0);
my $locks = $pg->safe_psql('app',
	q{SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
	  WHERE a.datname = 'app' AND a.pid <> pg_backend_pid()});
cmp_ok($locks, '<=', 1000, "... the load's connection holds $locks locks on the PostgreSQL shard (bound 1,000)");
cmp_ok($locks, '>', 0, '... and holds some (the guard is there)');
$r = bg_query($bg, 'COMMIT');
is($r->{stderr}, '', '... and commits (two-phase over p, m, l)');
$bg->quit;
check_load('INSERT ... SELECT', 2 * $rows + 1, 3 * $rows);

# UPDATE by 10,000 keys: one statement per shard (with its guard), every key once
my $step = int(3 * $rows / 10_000) || 1;
my $keys = join(',', map { $_ * $step } 1 .. 10_000);
# (the session's first batched guard on a PostgreSQL shard checks once that the
# shard has collegedb_guard_keys: a warm-up statement takes that round trip)
my $explain = $front->safe_psql('postgres',
	"UPDATE items SET v = v WHERE id = ANY('{" . join(',', 1 .. 30) . "}'::int[]);
	 EXPLAIN (ANALYZE, TIMING OFF, COSTS OFF, SUMMARY OFF) UPDATE items SET v = v + 1 WHERE id = ANY('{$keys}'::int[])");
my %statements = $explain =~ /Shard (\w+) \(\w+\): statements=(\d+)/g;
is($statements{p} // 'none', 2, 'UPDATE ... = ANY(10,000 keys): the PostgreSQL shard gets its guard and one UPDATE')
  or diag($explain);
my $per_statement = 998;    # 999 parameters a statement, one of them the SET's
for my $s ('m', 'l')
{
	my $n = $front->safe_psql('postgres',
		"SELECT count(*) FROM unnest('{$keys}'::int[]) AS k WHERE collegedb.shard_for_key(k::text) = '$s'");
	cmp_ok($statements{$s} // 0, '<=', 1 + int(($n + $per_statement - 1) / $per_statement),
		"... shard $s its guard and one UPDATE per $per_statement of its $n keys");
}
is($front->safe_psql('postgres', "SELECT count(*), sum(v) FROM items WHERE id = ANY('{$keys}'::int[])"),
	'10000|20000', '... and every key was updated once');

# with a stale mapping: the key moved, its old shard's guard finds the tombstone and
# that shard's keys go one by one, the moved key where it lives now
my $moved = $step * 5;
my $from  = $front->safe_psql('postgres', "SELECT collegedb.shard_for_key('$moved')");
my $to    = $from eq 'p' ? 'm' : 'p';
$front->safe_psql('postgres', "SELECT collegedb.reassign_shard('$moved', '$to')");
$front->safe_psql('postgres',
	"UPDATE collegedb.mapping SET shard = (SELECT n.number FROM collegedb.shard_number n WHERE n.name = '$from') WHERE key = collegedb.mapping_id('$moved')");
$r = psql_outcome($front, "UPDATE items SET v = v + 1 WHERE id = ANY('{$keys}'::int[])");
is($r->{stderr}, '', 'UPDATE ... = ANY with a key behind a stale mapping: no error');
is($front->safe_psql('postgres', "SELECT count(*), sum(v) FROM items WHERE id = ANY('{$keys}'::int[])"),
	'10000|30000', '... every key updated once more, the moved one too');

# progress of a load that is not a COPY: a NOTICE every collegedb.insert_progress
$r = psql_outcome($front,
	"SET collegedb.insert_progress = 1;
	 INSERT INTO items SELECT i, 0, 1, 'p' FROM generate_series(3 * $rows + 1, 3 * $rows + 20000) AS i");
like($r->{stderr}, qr/NOTICE:  (?:00000: )?\d+ rows sent to the shards so far/,
	'collegedb.insert_progress: an INSERT ... SELECT reports the rows it has sent');

# a fleet with two SQLite shards: a load that reaches both cannot commit with
# two-phase commit (SQLite cannot prepare; one may be the last participant), and
# says what to do; with commit_protocol 'sequential' it loads
my $sqlite2 = sqlite_dir() . '/l2.db';
$front->safe_psql('postgres', qq{
	CREATE SERVER l2 FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ sqlite_server_options($sqlite2) ]}, busy_timeout '10000');
	SELECT collegedb.add_shard('l2');
	SELECT count(*) FROM collegedb.run_on_shard('l2', 'CREATE TABLE items (id INT PRIMARY KEY, grp INT, v INT, pad VARCHAR(100))');
});
my $lo = 3 * $rows + 20001;
my $hi = $lo + 4999;
$r = psql_outcome($front, "INSERT INTO items SELECT i, 0, 1, 's' FROM generate_series($lo, $hi) AS i");
like($r->{stderr}, qr/cannot write on shard "l2?" in a transaction that wrote on shard "l2?"/,
	'two SQLite shards: a load over both is refused at its first write on the second');
like($r->{stderr}, qr/commit_protocol = 'sequential'/, '... with a hint saying what to do');
is($front->safe_psql('postgres', "SELECT count(*) FROM items WHERE id BETWEEN $lo AND $hi"),
	'0', '... and nothing of it stays');
$r = psql_outcome($front,
	"SET collegedb.commit_protocol = 'sequential';
	 INSERT INTO items SELECT i, 0, 1, 's' FROM generate_series($lo, $hi) AS i");
is($r->{stderr}, '', "with commit_protocol 'sequential' the load commits");
is($front->safe_psql('postgres', "SELECT count(*), count(DISTINCT id) FROM items WHERE id BETWEEN $lo AND $hi"),
	'5000|5000', '... every row once');

done_testing();
