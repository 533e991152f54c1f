# 050_fanout: one read on many shards at once.
#
# Eight PostgreSQL shard databases that each sleep 0.2 s answer a fan-out in about the
# time of one (and in about four rounds with concurrency 2); MariaDB shards join the
# same wait; a stopped shard is an error row naming it while the others answer; a
# shard slower than collegedb.fanout_timeout is reported as a timeout and no longer
# runs the query; a cancel of the front cancels every shard's query.  Times are
# checked only to their order of magnitude.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use CollegeDB::TestHarness;

my $front = front_node('front', extension => 1);
my $shard = pg_shard_node('shards');
my $down = pg_shard_node('down');
my $mdb = start_mariadb();

my $setup = '';
for my $i (1 .. 8)
{
	$shard->safe_psql('postgres', "CREATE DATABASE s$i");
	$setup .= qq{
	CREATE SERVER p$i FOREIGN DATA WRAPPER collegedb
	  OPTIONS (@{[ pg_server_options($shard, dbname => "s$i") ]});
	CREATE USER MAPPING FOR PUBLIC SERVER p$i OPTIONS (user 'postgres');
	SELECT collegedb.add_shard('p$i');};
}
$front->safe_psql('postgres', $setup);

# Run SQL on the front and return (stdout, seconds).
sub timed
{
	my ($sql) = @_;
	my $t0 = time;
	my $out = $front->safe_psql('postgres', $sql);
	return ($out, time - $t0);
}

# --- eight shards in parallel ----------------------------------------------------

my ($out, $secs) = timed(q{
	SELECT count(*) FILTER (WHERE error IS NULL), count(DISTINCT shard)
	  FROM collegedb.fanout('SELECT pg_sleep(0.2) AS slept')});
is($out, '8|8', 'every shard answers the fan-out');
cmp_ok($secs, '<', 1.0, "8 shards of 0.2 s answer in well under 1.6 s (took ${secs}s)");

($out, $secs) = timed(q{
	SET collegedb.fanout_concurrency = 2;
	SELECT count(*) FROM collegedb.fanout('SELECT pg_sleep(0.2) AS slept') WHERE error IS NULL});
is($out, '8', 'with concurrency 2 every shard answers too');
cmp_ok($secs, '>=', 0.7, "concurrency 2 takes about four rounds (took ${secs}s)");
cmp_ok($secs, '<', 1.6, "... and still less than one shard after the other");

# rows are tagged with their shard, parameters reach every shard
$out = $front->safe_psql('postgres', q{
	SELECT string_agg(shard || '=' || (value->>'db'), ',' ORDER BY shard)
	  FROM collegedb.fanout('SELECT current_database() AS db WHERE $1 > 0', 1)});
is($out, join(',', map { "p$_=s$_" } 1 .. 8), 'each row comes with its shard');

# --- MariaDB shards join the same wait ------------------------------------------

my @mdbs = map { mysql_database($mdb, "collegedb_fan$_") } 1 .. 4;
$setup = '';
for my $i (1 .. 4)
{
	$setup .= qq{
	CREATE SERVER m$i FOREIGN DATA WRAPPER collegedb
	  OPTIONS (@{[ mysql_server_options($mdb, dbname => $mdbs[$i - 1]) ]});
	CREATE USER MAPPING FOR PUBLIC SERVER m$i OPTIONS (@{[ mysql_user_mapping_options($mdb) ]});
	SELECT collegedb.add_shard('m$i');};
}
$front->safe_psql('postgres', $setup);
($out, $secs) = timed(q{
	SELECT count(*) FILTER (WHERE error IS NULL)
	  FROM collegedb.fanout('SELECT SLEEP(0.2) AS slept') WHERE shard LIKE 'm%'});
is($out, '4', 'MariaDB shards answer SELECT SLEEP(0.2)');
cmp_ok($secs, '<', 0.7, "4 MariaDB shards of 0.2 s answer together (took ${secs}s)");

# a statement that fails on one dialect only is reported per shard
$out = $front->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE error IS NULL AND shard LIKE 'p%'),
	       count(*) FILTER (WHERE error IS NOT NULL AND shard LIKE 'm%')
	  FROM collegedb.fanout('SELECT now()::text AS t')});
is($out, '8|4', 'PostgreSQL syntax works on the PostgreSQL shards and fails, per shard, on MariaDB');
$front->safe_psql('postgres', q{
	SELECT collegedb.drop_shard(s) FROM unnest(ARRAY['m1', 'm2', 'm3', 'm4']) AS s});

# --- a shard that is down --------------------------------------------------------

$down->safe_psql('postgres', 'SELECT 1');
$front->safe_psql('postgres', qq{
	CREATE SERVER down FOREIGN DATA WRAPPER collegedb
	  OPTIONS (@{[ pg_server_options($down, dbname => 'postgres') ]}, connect_timeout '2');
	CREATE USER MAPPING FOR PUBLIC SERVER down OPTIONS (user 'postgres');
	SELECT collegedb.add_shard('down');});
$down->stop;
$out = $front->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE error IS NULL),
	       string_agg(shard || ': ' || left(error, 40), ',') FILTER (WHERE error IS NOT NULL)
	  FROM collegedb.fanout('SELECT 1 AS one')});
like($out, qr/^8\|down: could not connect to shard "down"/,
	'a stopped shard is one error row naming it; the others answer');
$front->safe_psql('postgres', q{SELECT collegedb.drop_shard('down')});

# --- a shard slower than the timeout --------------------------------------------

my $sleepers = q{SELECT count(*) FROM pg_stat_activity
	WHERE query LIKE 'SELECT pg_sleep(CASE%' AND state = 'active'};
($out, $secs) = timed(q{
	SET collegedb.fanout_timeout = '300ms';
	SELECT string_agg(shard || ': ' || error, ',') FILTER (WHERE error IS NOT NULL),
	       count(*) FILTER (WHERE error IS NULL)
	  FROM collegedb.fanout('SELECT pg_sleep(CASE current_database() WHEN ''s3'' THEN 30 ELSE 0 END) AS s')});
is($out, 'p3: timeout after 300 ms on shard "p3"|7', 'the slow shard is reported as a timeout');
cmp_ok($secs, '<', 5, "the fan-out does not wait for it (took ${secs}s)");
ok(poll_until($shard, $sleepers, '0', 10),
	'the timed-out shard no longer runs the query');

# timeout 0 means no limit
$out = $front->safe_psql('postgres', q{
	SET collegedb.fanout_timeout = 0;
	SELECT count(*) FROM collegedb.fanout('SELECT pg_sleep(0.1) AS s') WHERE error IS NULL});
is($out, '8', 'fanout_timeout 0 waits without limit');

# --- cancel on the front cancels every shard ------------------------------------

my $bg = bg_session($front);
my $pid = bg_query($bg, 'SELECT pg_backend_pid()')->{stdout};
bg_send($bg, q{SELECT count(*) FROM collegedb.fanout('SELECT pg_sleep(CASE WHEN true THEN 30 END) AS s')});
my $running = q{SELECT count(*) FROM pg_stat_activity
	WHERE query LIKE 'SELECT pg_sleep(CASE WHEN true%' AND state = 'active'};
ok(poll_until($shard, $running, '8', 10), 'the fan-out runs on all eight shards');
$front->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
my $r = bg_wait($bg);
is($r->{sqlstate} // '', '57014', 'the front statement is cancelled');
ok(poll_until($shard, $running, '0', 10), 'no shard still runs the query');

# --- bad input -------------------------------------------------------------------

$r = psql_outcome($front, q{SELECT * FROM collegedb.fanout('DELETE FROM t')});
is($r->{sqlstate}, '0A000', 'a write is refused');
$r = psql_outcome($front, q{SET collegedb.fanout_concurrency = 0});
is($r->{sqlstate}, '22023', 'concurrency 0 is refused');
$r = psql_outcome($front, q{SET collegedb.fanout_timeout = '-1'});
is($r->{sqlstate}, '22023', 'a negative timeout is refused');

done_testing();
