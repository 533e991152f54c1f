# 160_shared_cache: the mapping cache shared by the front's backends.
#
# A front (preloaded, shared_mapping_cache_size 1024) with two PostgreSQL shards, and
# a hot standby of it:
#  - connection A's first read of a key misses the shared cache and publishes it; a
#    new connection B's first read is a shared hit that reads no catalog table;
#  - after a move (reassign_shard), update_mapping and a rebalance, the warm backend B
#    and new connections read every key where the mapping table says, at once;
#  - a stress of concurrent mapping changes and reads from new connections leaves no
#    shared entry that disagrees with the committed mappings;
#  - an allocation rolled back, and a mapping changed and read in a transaction that
#    rolls back, never reach the shared cache, and a transaction that changed a
#    mapping routes by its change even when another backend published the old one;
#  - an entry expires after mapping_cache_ttl like a backend's own;
#  - reading more keys than the cache holds keeps it at its size;
#  - two databases never share entries;
#  - on the standby a shared entry follows a move replayed from the primary;
#  - with shared_mapping_cache_size 0, and without preload, every connection reads
#    the catalog as before and cache_stats() reports no shared cache.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use CollegeDB::TestHarness;

my $t_start = time;
# without autovacuum: its ANALYZE of collegedb.mapping is a relcache invalidation
# of the table too, which makes every shared entry stale at a moment the counts
# below cannot foresee
my $front = front_node('front', init => { allows_streaming => 1 }, extension => 1,
	conf => { 'collegedb.shared_mapping_cache_size' => 1024, autovacuum => 'off' });
my $pg = pg_shard_node('pg');
$pg->safe_psql('postgres', "CREATE DATABASE $_") for qw(a b a2 b2);

sub setup_db
{
	my ($db, $sa, $sb) = @_;
	$front->safe_psql(
		$db, qq{
		CREATE SERVER a FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ pg_server_options($pg, dbname => $sa) ]});
		CREATE SERVER b FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ pg_server_options($pg, dbname => $sb) ]});
		CREATE USER MAPPING FOR PUBLIC SERVER a OPTIONS (user 'postgres');
		CREATE USER MAPPING FOR PUBLIC SERVER b OPTIONS (user 'postgres');
		SELECT collegedb.add_shard('a'), collegedb.add_shard('b');
		SELECT count(*) FROM collegedb.run_on_all('CREATE TABLE items (id text PRIMARY KEY, v int NOT NULL)');
		SELECT collegedb.register_table('items', 'id');
		SELECT collegedb.configure(strategy => 'hash');
	});
}
setup_db('postgres', 'a', 'b');
$front->safe_psql(
	'postgres', q{
	SELECT count(collegedb.set_mapping('k' || i, CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END))
	  FROM generate_series(1, 200) AS i;
	SELECT sum(collegedb.run('k' || i, 'INSERT INTO items VALUES ($1, $2)', 'k' || i, i))
	  FROM generate_series(1, 200) AS i;
});

my $stats = q{SELECT shared_hits || '/' || shared_misses || '/' || catalog_reads FROM collegedb.cache_stats()};

# One new connection: the statements, then its cache counters.
sub fresh
{
	my ($node, $db, $sql) = @_;
	return $node->safe_psql($db, "$sql; $stats");
}

is($front->safe_psql('postgres', q{SELECT shared_entries >= 0 FROM collegedb.cache_stats()}),
	't', 'the shared cache is there');
like($front->safe_psql('postgres', q{SELECT sum(allocated_size) FROM pg_shmem_allocations
	WHERE name LIKE 'collegedb mapping cache%'}), qr/^\d+$/, 'and in pg_shmem_allocations');

# --- a new connection starts warm -----------------------------------------------

# a change of any mapping makes every shared entry stale
$front->safe_psql('postgres', q{SELECT collegedb.update_mapping('k1', 'b')});

is(fresh($front, 'postgres', q{SELECT collegedb.first('k1', 'SELECT v FROM items WHERE id = $1', 'k1')->>'v'}),
	"1\n0/1/1", 'A reads k1: a shared miss, one catalog read');
is(fresh($front, 'postgres', q{SELECT collegedb.first('k1', 'SELECT v FROM items WHERE id = $1', 'k1')->>'v'}),
	"1\n1/0/0", 'a new connection B reads k1: a shared hit, no catalog read');
is(fresh($front, 'postgres', q{SELECT shard FROM collegedb.route('k1')}),
	"b\n1/0/0", 'route() is served from the shared cache too');

# --- moves reach the warm backend and new connections at once ---------------------

# warms the shared cache with every key, from a new connection
sub warm_all
{
	$front->safe_psql('postgres', q{SELECT count(r.shard) FROM generate_series(1, 200) i, collegedb.route('k' || i) r});
}

# how many of keys <prefix>1 .. <prefix>n route elsewhere than the mapping table says
sub disagree
{
	my ($prefix, $n) = @_;
	return qq{
	SELECT count(*) FROM generate_series(1, $n) AS i, collegedb.route('$prefix' || i) AS r
	 WHERE r.shard IS DISTINCT FROM (SELECT m.shard FROM collegedb.mappings m
	                                  WHERE m.key = collegedb.mapping_key('$prefix' || i))};
}
my $disagree = disagree('k', 200);

warm_all();
my $b = bg_session($front);
is(bg_query($b, q{SELECT shard FROM collegedb.route('k3')})->{stdout}, 'b', 'the warm backend has k3 on b');
$front->safe_psql('postgres', q{SELECT collegedb.reassign_shard('k3', 'a')});
is(fresh($front, 'postgres', q{SELECT collegedb.first('k3', 'SELECT v FROM items WHERE id = $1', 'k3')->>'v' || '/' ||
	(SELECT shard || '/' || hops FROM collegedb.route('k3'))}),
	"3/a/0\n0/1/1", 'after reassign_shard a new connection C reads k3 on a: the old shared entry is gone');
is(fresh($front, 'postgres', q{SELECT shard FROM collegedb.route('k3')}), "a\n1/0/0",
	'C published the new mapping for the next one');
is(bg_query($b, q{SELECT shard || '/' || hops FROM collegedb.route('k3')})->{stdout}, 'a/0',
	'the warm backend routes k3 to a by its mapping');

warm_all();
$front->safe_psql('postgres', q{SELECT collegedb.update_mapping('k5', 'a')});
is(bg_query($b, q{SELECT shard FROM collegedb.route('k5')})->{stdout}, 'a',
	'update_mapping reaches the warm backend');
is($front->safe_psql('postgres', q{SELECT shard FROM collegedb.route('k5')}), 'a', 'and a new connection');
$front->safe_psql('postgres', q{SELECT collegedb.update_mapping('k5', 'b')});

warm_all();
my $moved = $front->safe_psql('postgres', q{SELECT moved FROM collegedb.rebalance('items')});
ok($moved > 0, "a rebalance moved $moved keys");
is($front->safe_psql('postgres', $disagree), '0', 'after the rebalance a new connection routes every key by the table');
is(bg_query($b, $disagree)->{stdout}, '0', 'and so does the warm backend');
is($front->safe_psql('postgres', q{SELECT string_agg(shard || ':' || (value->>'n'), ' ' ORDER BY shard)
	FROM collegedb.fanout('SELECT count(*) AS n FROM items')}),
	$front->safe_psql('postgres', q{SELECT string_agg(shard || ':' || n, ' ' ORDER BY shard)
	FROM (SELECT shard, count(*) AS n FROM collegedb.mappings GROUP BY shard) s}),
	'the rows are where the mappings say');

# --- concurrent changes and reads -------------------------------------------------

# keys without rows: no tombstone ever leads a route elsewhere than the mapping
$front->safe_psql('postgres', q{SELECT count(collegedb.set_mapping('z' || i, 'a')) FROM generate_series(1, 40) AS i});

my $dir = PostgreSQL::Test::Utils::tempdir;
open my $w, '>', "$dir/write.sql" or die;
print $w "\\set k random(1, 40)\n",
  "SELECT collegedb.update_mapping('z' || :k, CASE WHEN random() < 0.5 THEN 'a' ELSE 'b' END);\n";
close $w;
open my $r, '>', "$dir/read.sql" or die;
print $r "\\set k random(1, 40)\n", "SELECT shard FROM collegedb.route('z' || :k);\n";
close $r;
$front->command_ok(
	[ 'pgbench', '-n', '-C', '-c', '4', '-t', '150', '-f', "$dir/write.sql\@1", '-f', "$dir/read.sql\@4", 'postgres' ],
	'a stress of mapping changes and reads from new connections runs');
is($front->safe_psql('postgres', disagree('z', 40)), '0',
	'afterwards no shared entry disagrees with the committed mappings');
is(bg_query($b, disagree('z', 40))->{stdout}, '0', 'nor does the warm backend');

# --- what a transaction wrote and rolled back is never shared ---------------------

my $out = psql_outcome($front, q{
	BEGIN;
	SELECT collegedb.run('new1', 'INSERT INTO items VALUES ($1, 1)', 'new1');
	SELECT collegedb.first('new1', 'SELECT v FROM items WHERE id = $1', 'new1')->>'v';
	ROLLBACK;});
is($out->{rc}, 0, 'an allocation, read back, rolled back') or diag $out->{stderr};
is(fresh($front, 'postgres', q{SELECT source FROM collegedb.route('new1')}), "strategy\n0/1/1",
	'a new connection finds new1 unmapped, from the table');

# the mapping table's shard of a key, and the other shard
sub mapped
{
	my ($db, $key) = @_;
	my $m = $front->safe_psql($db, qq{SELECT shard FROM collegedb.mappings WHERE key = collegedb.mapping_key('$key')});
	return ($m, $m eq 'a' ? 'b' : 'a');
}

warm_all();
my ($m50, $o50) = mapped('postgres', 'k50');
$out = psql_outcome($front, qq{
	BEGIN;
	SELECT collegedb.update_mapping('k50', '$o50');
	SELECT shard FROM collegedb.route('k50');
	ROLLBACK;});
is($out->{rc}, 0, 'a mapping changed, read back, rolled back') or diag $out->{stderr};
# the rolled-back change never committed, so it makes nothing stale: the entry
# warm_all published (the committed mapping) still serves
is(fresh($front, 'postgres', q{SELECT shard FROM collegedb.route('k50')}), "$m50\n1/0/0",
	"a new connection reads k50 on $m50, the committed mapping, from the shared cache");
is(fresh($front, 'postgres', q{SELECT shard FROM collegedb.route('k50')}), "$m50\n1/0/0",
	'the next one from the shared cache');

# a transaction that changed a mapping routes by its change, even once another
# backend has published the committed mapping it replaces (y1 has no rows, so no
# tombstone of the rebalance leads its route elsewhere)
$front->safe_psql('postgres', q{SELECT collegedb.set_mapping('y1', 'a')});
my ($y_was, $y_now) = ('a', 'b');
my $tx = bg_session($front);
bg_query($tx, 'BEGIN');
bg_query($tx, qq{SELECT collegedb.update_mapping('y1', '$y_now')});
is(fresh($front, 'postgres', q{SELECT shard FROM collegedb.route('y1')}), "$y_was\n0/1/1",
	'meanwhile another connection reads the committed mapping of y1 and publishes it');
is(bg_query($tx, q{SELECT shard FROM collegedb.route('y1')})->{stdout}, $y_now,
	'the transaction that changed y1 still routes it by its own change');
bg_query($tx, 'ROLLBACK');
$tx->quit;
is(fresh($front, 'postgres', q{SELECT shard FROM collegedb.route('y1')}), "$y_was\n1/0/0",
	'after its rollback a new connection reads the committed mapping, published meanwhile');

# --- the TTL counts from the catalog read -----------------------------------------

$front->safe_psql('postgres', q{SELECT collegedb.configure(mapping_cache_ttl => '8 s')});
my ($m60, $o60) = mapped('postgres', 'k60');
is(fresh($front, 'postgres', q{SELECT shard FROM collegedb.route('k60')}), "$m60\n0/1/1", 'k60 read and published');
# behind collegedb's back: no trigger, no invalidation
$front->safe_psql('postgres', qq{SET session_replication_role = replica;
	UPDATE collegedb.mapping SET shard = (SELECT n.number FROM collegedb.shard_number n WHERE n.name = '$o60') WHERE key = collegedb.mapping_id('k60')});
is(fresh($front, 'postgres', q{SELECT shard FROM collegedb.route('k60')}), "$m60\n1/0/0",
	'within the TTL a new connection still gets the shared entry');
ok(poll_until($front, q{SELECT shard FROM collegedb.route('k60')}, $o60, 30),
	'once it expires new connections read the table');
$front->safe_psql('postgres', qq{SELECT collegedb.reset_setting('mapping_cache_ttl');
	SELECT collegedb.update_mapping('k60', '$m60')});

# --- bounded ----------------------------------------------------------------------

$front->safe_psql('postgres', q{SELECT count(collegedb.set_mapping('m' || i, 'a')) FROM generate_series(1, 3000) AS i});
is( $front->safe_psql('postgres', q{SELECT count(*) FILTER (WHERE r.shard = 'a')
	FROM generate_series(1, 3000) i, collegedb.route('m' || i) r}),
	'3000', '3,000 keys read in one connection');
my ($entries) = $front->safe_psql('postgres', q{SELECT shared_entries FROM collegedb.cache_stats()});
ok($entries > 0 && $entries <= 1024, "the shared cache holds $entries entries, at most its 1,024");
is( $front->safe_psql('postgres', q{SELECT count(*) FILTER (WHERE r.shard = 'a')
	FROM generate_series(1, 3000) i, collegedb.route('m' || i) r}),
	'3000', 'read again from a new connection, with evictions, every key still right');

# --- two databases ----------------------------------------------------------------

$front->safe_psql('postgres', 'CREATE DATABASE other');
$front->safe_psql('other', 'CREATE EXTENSION collegedb');
setup_db('other', 'a2', 'b2');
my ($m1, $o1) = mapped('postgres', 'k1');
$front->safe_psql('other', qq{SELECT collegedb.set_mapping('k1', '$o1')});
warm_all();
is(fresh($front, 'other', q{SELECT shard FROM collegedb.route('k1')}), "$o1\n0/1/1",
	'another database reads its own mapping of k1, not the shared entry of postgres');
is(fresh($front, 'other', q{SELECT shard FROM collegedb.route('k1')}), "$o1\n1/0/0",
	'and shares it with its own connections');
is(fresh($front, 'postgres', q{SELECT shard FROM collegedb.route('k1')}), "$m1\n1/0/0",
	'postgres still gets its own');

# --- a hot standby ----------------------------------------------------------------

my $standby = standby_of($front, 'standby');
my ($m70, $o70) = mapped('postgres', 'k70');
is(fresh($standby, 'postgres', q{SELECT shard FROM collegedb.route('k70')}), "$m70\n0/1/1",
	'a standby connection reads k70 from the replicated table');
# A standby uses an entry only while nothing was replayed since its reader noted the
# replay position: WAL the primary writes meanwhile (a standby snapshot record, say)
# makes it read the catalog again, so try until two reads fall between records.
my ($sb, $warm);
for my $try (1 .. 20)
{
	fresh($standby, 'postgres', q{SELECT shard FROM collegedb.route('k70')});
	$sb = bg_session($standby);
	$warm = bg_query($sb, q{SELECT shard FROM collegedb.route('k70')} . "; $stats")->{stdout};
	last if $warm eq "$m70\n1/0/0";
	$sb->quit;
}
is($warm, "$m70\n1/0/0", 'a new standby backend gets it from the standby\'s shared cache');
$front->safe_psql('postgres', qq{SELECT collegedb.reassign_shard('k70', '$o70')});
$front->wait_for_catchup($standby);
is(bg_query($sb, q{SELECT shard || '/' || hops FROM collegedb.route('k70')})->{stdout}, "$o70/0",
	'after replay of a move the warm standby backend follows it');
is(fresh($standby, 'postgres', q{SELECT collegedb.first('k70', 'SELECT v FROM items WHERE id = $1', 'k70')->>'v' || '/' ||
	(SELECT shard FROM collegedb.route('k70'))}) =~ s/\n.*//sr, "70/$o70",
	'and a new standby connection reads it there');
$sb->quit;

# A change replayed while no standby backend runs reaches nobody's relcache callback:
# the next standby connection must not answer from the entry read before it.
my ($m71, $o71) = mapped('postgres', 'k71');
is(fresh($standby, 'postgres', q{SELECT shard FROM collegedb.route('k71')}) =~ s/\n.*//sr, $m71,
	'a standby connection reads k71 and publishes it');
ok( poll_until($standby, q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'
	AND pid <> pg_backend_pid()}, '0', 30),
	'no other backend runs on the standby');
$front->safe_psql('postgres', qq{SELECT collegedb.reassign_shard('k71', '$o71')});
$front->wait_for_catchup($standby);
is( $standby->safe_psql(
		'postgres', q{SELECT collegedb.shard_for_key('k71') || '/' ||
		(SELECT shard || '/' || hops FROM collegedb.route('k71'))}),
	"$o71/$o71/0",
	'after a move replayed with no standby backend running, a new standby connection routes k71 to its new shard');
$standby->safe_psql('postgres', q{SELECT collegedb.run('k71', 'UPDATE items SET v = v + 1000 WHERE id = $1', 'k71')});
is( $front->safe_psql('postgres', qq{SELECT string_agg(shard || ':' || (value->>'v'), ',')
		FROM collegedb.fanout('SELECT v FROM items WHERE id = \$1', 'k71') WHERE error IS NULL}),
	"$o71:1071", 'and its write of k71 lands on the new shard');
$standby->stop;

# --- size 0, and no preload: as without a shared cache ------------------------------

$b->quit;
($m1) = mapped('postgres', 'k1');
$front->append_conf('postgresql.conf', "collegedb.shared_mapping_cache_size = 0\n");
$front->restart;
is($front->safe_psql('postgres', q{SELECT count(*) FROM pg_shmem_allocations WHERE name LIKE 'collegedb mapping cache%'}),
	'0', 'size 0: no shared memory for it');
is(fresh($front, 'postgres', q{SELECT shard FROM collegedb.route('k1')}), "$m1\n0/0/1", 'size 0: a catalog read');
is(fresh($front, 'postgres', q{SELECT shard FROM collegedb.route('k1')} . q{; SELECT shared_entries IS NULL FROM collegedb.cache_stats()}),
	"$m1\nt\n0/0/1", 'and again for the next connection; no entries reported');

$front->append_conf('postgresql.conf', "shared_preload_libraries = ''\n");
$front->restart;
is(fresh($front, 'postgres', q{SELECT shard FROM collegedb.route('k1')}), "$m1\n0/0/1", 'no preload: a catalog read');
is(fresh($front, 'postgres', q{SELECT shard FROM collegedb.route('k1')} . q{; SELECT shared_entries IS NULL FROM collegedb.cache_stats()}),
	"$m1\nt\n0/0/1", 'and again for the next connection');

note sprintf('160_shared_cache took %.1f s', time - $t_start);
done_testing();
