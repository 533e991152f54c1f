# 170_upgrade_store: ALTER EXTENSION collegedb UPDATE from 0.2 converts a mapping
# store of 100,000 keys in place.
#
# A front database at 0.2 holds 100,000 mapped keys over two PostgreSQL shards, 1,000 of
# them with a lookup key, and a move that a front process left at its 'copied' step; a
# second database under computed placement holds keys computed by its epoch and
# exceptions away from it.  The rows are written as 0.2 wrote them, with triggers off:
# the library serves the newest catalog only, and refuses the old one until the update
# (tested first).  After the update every key routes to the shard it was mapped or
# computed to, lookup keys reach their record, every row is read through the front,
# the move finishes onto its target, and the store takes at most 100 bytes a key.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use CollegeDB::TestHarness;

my $NKEYS = $ENV{COLLEGEDB_170_KEYS} // 100_000;
my $NLOOKUP = 1_000;

my $front = front_node('front', conf => { log_statement => 'none' });
my $shard = pg_shard_node('shards', conf => { log_statement => 'none' });
for my $db (qw(p1 p2 c1 c2))
{
	$shard->safe_psql('postgres', "CREATE DATABASE $db");
	$shard->safe_psql($db, 'CREATE TABLE items (id TEXT PRIMARY KEY, v INTEGER)');
}
$front->safe_psql('postgres', 'CREATE DATABASE comp');

sub sql { my ($db, $q) = @_; return $front->safe_psql($db, $q, timeout => 600) }

# the hex SHA-256 of a key, 0.2's stored form under hash_mappings
sub h { return "encode(sha256(($_[0])::bytea), 'hex')" }

# --- the 0.2 front: mapped keys, lookup keys, an unfinished move ------------------------

sql('postgres', qq{
	CREATE EXTENSION collegedb VERSION '0.2';
	@{[ pg_shard_servers($shard, p1 => 'p1', p2 => 'p2') ]}
});
my $refused = $front->psql('postgres', q{SELECT collegedb.shard_for_key('k1')}, stderr => \my $stderr);
like($stderr, qr/catalog in this database is version 0\.2.*\n.*ALTER EXTENSION collegedb UPDATE/,
	'before the update the library refuses the 0.2 catalog, and says what to run');

# key k<i> on p1 when i is even, p2 when odd
sql('postgres', qq{
	SET session_replication_role = replica;
	INSERT INTO collegedb.shard (name) VALUES ('p1'), ('p2');
	INSERT INTO collegedb.registered_table (table_name, key_column) VALUES ('items', 'id');
	INSERT INTO collegedb.mapping (key, record, shard, keys)
	SELECT @{[ h("'k' || i") ]}, @{[ h("'k' || i") ]}, 'p' || (1 + i % 2),
	       CASE WHEN i <= $NLOOKUP THEN ARRAY[@{[ h("'k' || i") ]}, @{[ h("'mail-' || i") ]}] END
	  FROM generate_series(1, $NKEYS) AS i;
	INSERT INTO collegedb.mapping (key, record, shard)
	SELECT @{[ h("'mail-' || i") ]}, @{[ h("'k' || i") ]}, 'p' || (1 + i % 2)
	  FROM generate_series(1, $NLOOKUP) AS i;
	-- k7 from p2 to p1, validated ('copied') by a process that is gone
	INSERT INTO collegedb.move (key, raw_key, source, target, step, lease_pid, lease_backend_start,
	                            lease_until)
	VALUES (@{[ h("'k7'") ]}, 'k7', 'p2', 'p1', 'copied', 2147483647, now() - interval '1 hour',
	        now() - interval '1 hour');
});
for my $s (1, 2)
{
	$shard->safe_psql("p$s", qq{INSERT INTO items SELECT 'k' || i, i FROM generate_series(1, $NKEYS) AS i
		WHERE 1 + i % 2 = $s});
}

# --- the 0.2 database under computed placement: epoch 1 and exceptions ------------------

sql('comp', qq{
	CREATE EXTENSION collegedb VERSION '0.2';
	@{[ pg_shard_servers($shard, c1 => 'c1', c2 => 'c2') ]}
	SET session_replication_role = replica;
	INSERT INTO collegedb.shard (name) VALUES ('c1'), ('c2');
	INSERT INTO collegedb.registered_table (table_name, key_column) VALUES ('items', 'id');
	UPDATE collegedb.config SET placement = 'computed';
	INSERT INTO collegedb.epoch (epoch, shards) VALUES (1, ARRAY['c1', 'c2']);
	-- where each key is: every tenth away from the shard the epoch computes
	CREATE TABLE placed AS
	SELECT 'e' || i AS k,
	       CASE WHEN i % 10 = 0
	            THEN CASE collegedb.rendezvous_owner('e' || i, ARRAY['c1', 'c2']) WHEN 'c1' THEN 'c2' ELSE 'c1' END
	            ELSE collegedb.rendezvous_owner('e' || i, ARRAY['c1', 'c2']) END AS shard,
	       i % 10 = 0 AS exception
	  FROM generate_series(1, 2000) AS i;
	INSERT INTO collegedb.mapping (key, record, shard)
	SELECT @{[ h('k') ]}, @{[ h('k') ]}, shard FROM placed WHERE exception;
});
for my $s (qw(c1 c2))
{
	my $list = sql('comp', "SELECT string_agg(k, ',') FROM placed WHERE shard = '$s'");
	$shard->safe_psql($s, "INSERT INTO items SELECT k, 1 FROM unnest(string_to_array('$list', ',')) AS k");
}

# what add_shard made on each shard (its tombstone table and guard), made by the
# library itself from a database of its own version
$front->safe_psql('postgres', 'CREATE DATABASE prep');
$front->safe_psql('prep', qq{
	CREATE EXTENSION collegedb;
	@{[ pg_shard_servers($shard, p1 => 'p1', p2 => 'p2', c1 => 'c1', c2 => 'c2') ]}
	SELECT collegedb.add_shard(s) FROM unnest(ARRAY['p1', 'p2', 'c1', 'c2']) AS s;
});
$front->safe_psql('postgres', 'DROP DATABASE prep');

# --- the update ---------------------------------------------------------------------------

my $t0 = time;
sql('postgres', 'ALTER EXTENSION collegedb UPDATE');
my $update_s = time - $t0;
note sprintf 'the update converted %d mappings in %.1f s', $NKEYS + $NLOOKUP, $update_s;
sql('comp', 'ALTER EXTENSION collegedb UPDATE');
is(sql('postgres', q{SELECT extversion FROM pg_extension WHERE extname = 'collegedb'}), '0.3',
	'the extension is at 0.3');

# --- every key routes as before -----------------------------------------------------------

is(sql('postgres', 'SELECT count(*) FROM collegedb.mapping'), $NKEYS + $NLOOKUP,
	'one mapping row per key and lookup key');
is( sql('postgres', qq{SELECT count(*) FROM generate_series(1, $NKEYS) AS i
		WHERE i <> 7 AND collegedb.shard_for_key('k' || i) IS DISTINCT FROM 'p' || (1 + i % 2)}),
	'0', 'every key routes to the shard its 0.2 mapping named');
is( sql('postgres', qq{SELECT count(*) FROM generate_series(1, $NLOOKUP) AS i
		WHERE i <> 7 AND collegedb.shard_for_key('mail-' || i) IS DISTINCT FROM 'p' || (1 + i % 2)}),
	'0', 'every lookup key routes to its record\'s shard');
is( sql('postgres', q{SELECT collegedb.get_lookup_keys('mail-5') =
		ARRAY[collegedb.mapping_key('k5'), collegedb.mapping_key('mail-5')]}),
	't', 'a record lists its lookup keys in their new stored form');
is( sql('postgres', q{SELECT collegedb.first_by_lookup_key('mail-8', 'SELECT v FROM items WHERE id = $1', 'k8')}),
	'{"v": 8}', 'a read by lookup key reaches the record\'s row');
sql('postgres', q{CREATE FOREIGN TABLE items (id text, v integer) SERVER collegedb OPTIONS (key_column 'id')});
is(sql('postgres', 'SELECT count(*), count(DISTINCT id), sum(v) FROM items'),
	"$NKEYS|$NKEYS|" . ($NKEYS * ($NKEYS + 1) / 2), 'every row is read once through the front');
is( sql('postgres', qq{SELECT count(*) FROM generate_series(1, $NKEYS, 101) AS i
		WHERE (SELECT v FROM items WHERE id = 'k' || i) = i}),
	int(($NKEYS - 1) / 101) + 1, 'reads by key find their rows');
cmp_ok(sql('postgres', q{SELECT pg_total_relation_size('collegedb.mapping') / count(*) FROM collegedb.mapping}),
	'<=', 100, 'the converted store takes at most 100 bytes a key');

is( sql('comp', q{SELECT count(*) FROM placed WHERE collegedb.shard_for_key(k) IS DISTINCT FROM shard}),
	'0', 'computed placement: every key routes where it did, through its exception or its epoch');
is( sql('comp', q{SELECT count(*) FROM placed p WHERE collegedb.first(k, 'SELECT id FROM items WHERE id = $1', k)->>'id' = k}),
	'2000', 'computed placement: every key reads its row');
is(sql('comp', 'SELECT count(*) FROM collegedb.mapping'), '200', 'the exceptions are kept, no more');

# --- the unfinished move finishes ---------------------------------------------------------

ok(poll_until($front, q{SELECT step FROM collegedb.moves WHERE key = collegedb.mapping_key('k7')}, 'done', 120),
	'the move the old front left unfinished is resumed and ends done');
is(sql('postgres', q{SELECT collegedb.shard_for_key('k7') || ' ' || collegedb.shard_for_key('mail-7')}), 'p1 p1',
	'k7 and its lookup key now route to the move\'s target');
is($shard->safe_psql('p1', q{SELECT v FROM items WHERE id = 'k7'}), '7', 'its row is on the target');
is($shard->safe_psql('p2', q{SELECT count(*) FROM items WHERE id = 'k7'}), '0', 'and gone from the source');
is(sql('postgres', q{SELECT v FROM items WHERE id = 'k7'}), '7', 'a read through the front finds it');
unlike(slurp_file($front->logfile), qr/terminated by signal/, 'no process of the front was killed by a signal');

done_testing();
