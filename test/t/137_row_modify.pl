# 137_row_modify: an UPDATE that no shard computes runs row by row, and two of them on
# the same rows do not lose an update.
#
# Two PostgreSQL shards (two databases of one server).  "SET n = n + length(md5(k))" is
# computed on the front: the scan fetches the key's rows FOR UPDATE with their ctid,
# then each row is updated by key and ctid.  A second session's same UPDATE waits on
# the shard for the first one's row locks, then reads the rows the first one committed
# (their new ctids) and adds to them; a DELETE ... USING a local table joined on the key
# waits for an UPDATE ... FROM of rows of both shards, and deletes what it committed.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use CollegeDB::TestHarness;

my $front = front_node('front', extension => 1);
my $shard = pg_shard_node('shard');
add_pg_shards($front, $shard, s => 'app', s2 => 'app2');

$front->safe_psql(
	'postgres', qq{
	SELECT collegedb.run_on_all('CREATE TABLE items (k text, i int, n int, PRIMARY KEY (k, i))');
	SELECT collegedb.set_mapping('a', 's'), collegedb.set_mapping('b', 's2');
	CREATE FOREIGN TABLE items (k text, i int, n int) SERVER collegedb OPTIONS (key_column 'k');
	INSERT INTO items SELECT k, i, 0 FROM unnest(ARRAY['a', 'b']) k, generate_series(1, 3) i;
	CREATE TABLE picks (k text);
	INSERT INTO picks VALUES ('a'), ('b');
});

my $plan = $front->safe_psql('postgres',
	q{EXPLAIN (VERBOSE, COSTS OFF) UPDATE items SET n = n + length(md5(k)) WHERE k = 'a'});
like($plan, qr/Row by Row/, 'the UPDATE runs row by row');
like($plan, qr/FOR UPDATE/, 'its fetch locks the rows');

my $waiting = q{SELECT (SELECT count(*) FROM pg_stat_activity
	WHERE application_name = 'collegedb' AND wait_event_type = 'Lock') > 0};

my $a = bg_session($front);
my $b = bg_session($front);
bg_query($a, 'BEGIN');
my $r = bg_query($a, q{UPDATE items SET n = n + length(md5(k)) WHERE k = 'a' AND i < 3});
is($r->{sqlstate}, undef, 'the first UPDATE runs') or diag($r->{stderr});
bg_send($b, q{UPDATE items SET n = n + length(md5(k)) WHERE k = 'a' RETURNING i, n});
ok(poll_until($shard, $waiting, 't', 30), "the second UPDATE's fetch waits for the first one's rows");
bg_query($a, 'COMMIT');
$r = bg_wait($b);
is($r->{sqlstate}, undef, 'the second UPDATE ends once the first commits') or diag($r->{stderr});
is( $front->safe_psql('postgres', q{SELECT string_agg(i || ':' || n, ',' ORDER BY i) FROM items WHERE k = 'a'}),
	'1:64,2:64,3:32', 'no update is lost: each row has what both added');

# a join on the key: rows of both shards, the second session waiting for the first
bg_query($a, 'BEGIN');
$r = bg_query($a, q{UPDATE items t SET n = t.n + 1 FROM picks p WHERE t.k = p.k AND upper(t.k) = upper(p.k)});
is($r->{sqlstate}, undef, 'UPDATE ... FROM a local table joined on the key runs') or diag($r->{stderr});
bg_send($b,
	q{DELETE FROM items t USING picks p WHERE t.k = p.k AND p.k = 'b' AND length(md5(t.k)) = 32 RETURNING t.n});
ok(poll_until($shard, $waiting, 't', 30), 'the DELETE waits for the UPDATE on the shard');
bg_query($a, 'COMMIT');
$r = bg_wait($b);
is($r->{sqlstate}, undef, 'the DELETE ends once the UPDATE commits') or diag($r->{stderr});
is($r->{stdout}, "1\n1\n1", 'it deleted the rows the UPDATE committed');
is( $front->safe_psql('postgres', q{SELECT string_agg(k || i || ':' || n, ',' ORDER BY k, i) FROM items}),
	'a1:65,a2:65,a3:33', "b's rows are gone, a's have the UPDATE's values");

$a->quit;
$b->quit;
done_testing();
