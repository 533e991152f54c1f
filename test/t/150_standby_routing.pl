# 150_standby_routing: a hot standby of the front routes from its replicated catalog.
#
# A primary front with two PostgreSQL shards and a MariaDB shard, and a streaming
# standby of it (init_from_backup, has_streaming):
#  - reads of 1,000 keys on the standby (first, all_json, fanout, lookup keys, a
#    sharded foreign table) equal the primary's;
#  - a move on the primary reaches a standby backend with a warm cache through
#    replay (its route has no tombstone hop), and with replay paused the standby
#    reads and writes the moved key through its tombstone;
#  - writes of existing keys on the standby land on the right shards;
#  - a new key's write and every catalog change are refused with 25006, a hint names
#    the primary's host and port, and nothing changes on any shard or in the catalog
#    (add_shard leaves its server's database untouched); a write through a sharded
#    foreign table is refused too (PostgreSQL runs a standby's transactions
#    read-only, foreign tables included), with a hint to use collegedb.run();
#  - a shard made read-only, a new strategy and a slot map installed on the primary
#    reach the same warm standby backend;
#  - under the slots strategy an existing unmapped key is written from the standby,
#    a new one is refused;
#  - the hint reads host and port from a URI or keyword primary_conninfo, and never
#    shows the rest of it;
#  - a SQLite shard whose file is missing on the standby's host is a clear error
#    naming the path, and the file is not created.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use CollegeDB::TestHarness;

my $t_start = time;
my $mdb     = start_mariadb();
my $mdbname = mysql_database($mdb);
my $primary = front_node('primary', init => { allows_streaming => 1 }, extension => 1,
	conf => { max_worker_processes => 16 });
my $pga = pg_shard_node('pga');
my $pgb = pg_shard_node('pgb');
$pga->safe_psql('postgres', $_) for ('CREATE DATABASE a', 'CREATE DATABASE d');
$pgb->safe_psql('postgres', 'CREATE DATABASE b');
my $sqlite = sqlite_dir() . '/s.db';

$primary->safe_psql(
	'postgres', qq{
	CREATE SERVER a FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ pg_server_options($pga, dbname => 'a') ]});
	CREATE SERVER b FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ pg_server_options($pgb, dbname => 'b') ]});
	CREATE SERVER m FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ mysql_server_options($mdb, dbname => $mdbname) ]});
	-- registered only on the standby's attempt (refused): nothing may reach it
	CREATE SERVER d FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ pg_server_options($pga, dbname => 'd') ]});
	CREATE USER MAPPING FOR PUBLIC SERVER a OPTIONS (user 'postgres');
	CREATE USER MAPPING FOR PUBLIC SERVER b OPTIONS (user 'postgres');
	CREATE USER MAPPING FOR PUBLIC SERVER d OPTIONS (user 'postgres');
	CREATE USER MAPPING FOR PUBLIC SERVER m OPTIONS (@{[ mysql_user_mapping_options($mdb) ]});
	SELECT collegedb.add_shard('a'), collegedb.add_shard('b'), collegedb.add_shard('m');
	SELECT count(*) FROM collegedb.run_on_all('CREATE TABLE items (id VARCHAR(40) PRIMARY KEY, v INT NOT NULL)');
	SELECT collegedb.register_table('items', 'id');
	CREATE FOREIGN TABLE items_ft (id text, v int) SERVER collegedb
	  OPTIONS (key_column 'id', table_name 'items');
	SELECT count(collegedb.set_mapping('k' || i, (ARRAY['a', 'b', 'm'])[i % 3 + 1],
	                                   ARRAY['mail' || i]))
	  FROM generate_series(1, 1000) AS i;
	SELECT sum(collegedb.run('k' || i, 'INSERT INTO items VALUES (\$1, \$2)', 'k' || i, i))
	  FROM generate_series(1, 1000) AS i;
});

my $standby = standby_of($primary, 'standby');
is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'), 't', 'the standby is in recovery');

# What the front reads: every key through first, all_json and its lookup key, the
# fan-out and the foreign table, as one text.
my $reads_sql = q{
	SELECT md5(string_agg(k || '=' || coalesce(f->>'v', '-') || '/' || j || '/' ||
	                      coalesce(l->>'v', '-'), ' ' ORDER BY k))
	  FROM (SELECT 'k' || i AS k, 'mail' || i AS mail FROM generate_series(1, 1000) AS i) keys,
	       LATERAL (SELECT collegedb.first(k, 'SELECT v FROM items WHERE id = $1', k) AS f) f,
	       LATERAL (SELECT count(*) AS j FROM collegedb.all_json(k, 'SELECT v FROM items WHERE id = $1', k)) j,
	       LATERAL (SELECT collegedb.first_by_lookup_key(mail, 'SELECT v FROM items WHERE id = $1', k) AS l) l;
	SELECT string_agg(shard || ':' || (value->>'n'), ' ' ORDER BY shard)
	  FROM collegedb.fanout('SELECT count(*) AS n, sum(v) AS s FROM items');
	SELECT count(*), sum(v) FROM items_ft;
	SELECT string_agg(id || '=' || v, ' ' ORDER BY id) FROM items_ft WHERE id IN ('k1', 'k2', 'k3', 'k999');
	SELECT string_agg(r.shard || '/' || r.source || '/' || r.hops, ' ' ORDER BY k)
	  FROM unnest(ARRAY['k1', 'k2', 'k3']) AS k, collegedb.route(k) AS r};
my $on_primary = $primary->safe_psql('postgres', $reads_sql);
is($standby->safe_psql('postgres', $reads_sql), $on_primary,
	'reads of 1,000 keys on the standby equal the primary\'s');
like($on_primary, qr/a:333 b:334 m:333/, 'the keys are spread over the three shards');
like($on_primary, qr/k1=1 k2=2 k3=3 k999=999/, 'the foreign table reads the keys by id');

# Rows and sum per shard, read on the shards themselves.
sub shard_state
{
	return join ' ',
	  $pga->safe_psql('a', q{SELECT count(*) || '/' || sum(v) FROM items}),
	  $pgb->safe_psql('b', q{SELECT count(*) || '/' || sum(v) FROM items}),
	  mysql_query($mdb, q{SELECT CONCAT(COUNT(*), '/', SUM(v)) FROM items}, database => $mdbname);
}

# The key's row on each shard: "a/b/m" counts.
sub where_is
{
	my ($k) = @_;
	return join '/',
	  $pga->safe_psql('a', "SELECT count(*) FROM items WHERE id = '$k'"),
	  $pgb->safe_psql('b', "SELECT count(*) FROM items WHERE id = '$k'"),
	  mysql_query($mdb, "SELECT COUNT(*) FROM items WHERE id = '$k'", database => $mdbname);
}

# --- a mapping changed on the primary reaches the standby -------------------------

my $warm = bg_session($standby);
is(bg_query($warm, q{SELECT shard || '/' || hops FROM collegedb.route('k4')})->{stdout},
	'b/0', 'a standby backend has k4 on b, cached');
$primary->safe_psql('postgres', q{SELECT collegedb.reassign_shard('k4', 'a')});
$primary->wait_for_catchup($standby);
is(bg_query($warm, q{SELECT shard || '/' || source || '/' || hops FROM collegedb.route('k4')})->{stdout},
	'a/mapping/0', 'after replay the same backend routes k4 to a by its mapping, no tombstone hop');
is(bg_query($warm, q{SELECT collegedb.first('k4', 'SELECT v FROM items WHERE id = $1', 'k4')->>'v'})->{stdout},
	'4', 'and reads it there');
$primary->safe_psql('postgres', q{SELECT collegedb.set_mapping('k4', 'a', ARRAY['mail4', 'alias4'])});
$primary->wait_for_catchup($standby);
is(bg_query($warm, q{SELECT collegedb.first_by_lookup_key('alias4', 'SELECT v FROM items WHERE id = $1', 'k4')->>'v'})->{stdout},
	'4', 'a lookup key added on the primary resolves on the standby');

# Replay paused: the standby's mapping is stale, the tombstone leads on.
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_pause()');
ok(poll_until($standby, 'SELECT pg_get_wal_replay_pause_state()', 'paused', 30), 'replay is paused');
$primary->safe_psql('postgres', q{SELECT collegedb.reassign_shard('k7', 'm')});
is(where_is('k7'), '0/0/1', 'k7 moved from b to m on the primary');
is(bg_query($warm, q{SELECT shard || '/' || hops FROM collegedb.route('k7')})->{stdout},
	'm/1', 'the stale standby reaches k7 through its tombstone');
is(bg_query($warm, q{SELECT collegedb.first('k7', 'SELECT v FROM items WHERE id = $1', 'k7')->>'v'})->{stdout},
	'7', 'and reads it');
is(bg_query($warm, q{SELECT collegedb.run('k7', 'UPDATE items SET v = v + 1000 WHERE id = $1', 'k7')})->{stdout},
	'1', 'a write of k7 on the stale standby follows the tombstone');
is(mysql_query($mdb, q{SELECT v FROM items WHERE id = 'k7'}, database => $mdbname), '1007',
	'and lands on m');
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
$primary->wait_for_catchup($standby);
is(bg_query($warm, q{SELECT shard || '/' || hops FROM collegedb.route('k7')})->{stdout},
	'm/0', 'after replay the mapping names m');

# --- writes of existing keys on the standby ---------------------------------------

my $r = psql_outcome($standby, q{
	SELECT collegedb.run('k3', 'UPDATE items SET v = v + 1 WHERE id = $1', 'k3');
	SELECT collegedb.run('k1', 'UPDATE items SET v = v + 1 WHERE id = $1', 'k1');
	SELECT collegedb.run('k2', 'UPDATE items SET v = v + 1 WHERE id = $1', 'k2');
	SELECT collegedb.run('k5', 'UPDATE items SET v = v + 100 WHERE id = $1', 'k5');
	SELECT collegedb.run('k6', 'DELETE FROM items WHERE id = $1', 'k6');});
is($r->{rc}, 0, 'writes of existing keys run on the standby') or diag $r->{stderr};
is( join(' ',
		$pga->safe_psql('a', q{SELECT string_agg(id || '=' || v, ' ' ORDER BY id) FROM items WHERE id IN ('k3', 'k6')}),
		$pgb->safe_psql('b', q{SELECT string_agg(id || '=' || v, ' ' ORDER BY id) FROM items WHERE id IN ('k1')}),
		mysql_query($mdb, q{SELECT GROUP_CONCAT(CONCAT(id, '=', v) ORDER BY id SEPARATOR ' ') FROM items WHERE id IN ('k2', 'k5')},
			database => $mdbname)),
	'k3=4 k1=2 k2=3 k5=105', 'each write landed on its key\'s shard (k6 deleted on a)');
$r = psql_outcome($standby, q{
	BEGIN;
	SELECT collegedb.run('k3', 'UPDATE items SET v = v + 1 WHERE id = $1', 'k3');
	SELECT collegedb.run('k9', 'UPDATE items SET v = v + 1 WHERE id = $1', 'k9');
	COMMIT;});
is($r->{rc}, 0, 'a transaction of two writes on one shard commits on the standby') or diag $r->{stderr};
is($pga->safe_psql('a', q{SELECT string_agg(id || '=' || v, ' ' ORDER BY id) FROM items WHERE id IN ('k3', 'k9')}),
	'k3=5 k9=10', 'both on a');

# --- what needs the catalog is refused, and nothing changes -----------------------

my $catalog_sql = q{
	SELECT md5(string_agg(t, ' ' ORDER BY t)) FROM (
	  SELECT key || shard AS t FROM collegedb.mappings
	  UNION ALL SELECT name || drain || writable FROM collegedb.shard
	  UNION ALL SELECT row_to_json(c)::text FROM collegedb.config c
	  UNION ALL SELECT id || step FROM collegedb.move
	  UNION ALL SELECT id || state FROM collegedb.job) s};
my $catalog_before = $standby->safe_psql('postgres', $catalog_sql);
my $shards_before  = shard_state();
my ($host, $port) = ($primary->host, $primary->port);

my @refused = (
	[ 'new key', q{SELECT collegedb.run('fresh1', 'INSERT INTO items VALUES ($1, 1)', 'fresh1')} ],
	[ 'new key (foreign table)', q{INSERT INTO items_ft VALUES ('fresh2', 2)} ],
	[ 'existing key (foreign table)', q{UPDATE items_ft SET v = 0 WHERE id = 'k1'} ],
	[ 'set_mapping', q{SELECT collegedb.set_mapping('k1', 'a')} ],
	[ 'update_mapping', q{SELECT collegedb.update_mapping('k1', 'a')} ],
	[ 'delete_mapping', q{SELECT collegedb.delete_mapping('k1')} ],
	[ 'add_lookup_keys', q{SELECT collegedb.add_lookup_keys('k1', ARRAY['x1'])} ],
	[ 'configure', q{SELECT collegedb.configure(strategy => 'random')} ],
	[ 'reset_setting', q{SELECT collegedb.reset_setting('strategy')} ],
	[ 'register_table', q{SELECT collegedb.register_table('other', 'id')} ],
	[ 'unregister_table', q{SELECT collegedb.unregister_table('items')} ],
	[ 'add_shard', q{SELECT collegedb.add_shard('d')} ],
	[ 'drop_shard', q{SELECT collegedb.drop_shard('m', force => true)} ],
	[ 'set_shard_state', q{SELECT collegedb.set_shard_state('a', writable => false)} ],
	[ 'publish_eligibility', q{SELECT * FROM collegedb.publish_eligibility()} ],
	[ 'reassign_shard', q{SELECT collegedb.reassign_shard('k1', 'a')} ],
	[ 'rebalance', q{SELECT * FROM collegedb.rebalance('items')} ],
	[ 'schedule_rebalance', q{SELECT collegedb.schedule_rebalance('items')} ],
	[ 'initialize_shard_map', q{SELECT collegedb.initialize_shard_map(16)} ],
	[ 'move_slot', q{SELECT collegedb.move_slot(1, 'a')} ],
	[ 'topology_update', q{SELECT collegedb.topology_update('g', '{"members": ["a"]}')} ],
	[ 'topology_delete', q{SELECT collegedb.topology_delete('g')} ],
	[ 'topology_define_channel', q{SELECT collegedb.topology_define_channel('limits')} ],
	[ 'cancel_job', q{SELECT collegedb.cancel_job(1)} ],
	[ 'recover_prepared_transactions', q{SELECT * FROM collegedb.recover_prepared_transactions()} ],
	[ 'two-phase commit', q{BEGIN;
		SELECT collegedb.run('k1', 'UPDATE items SET v = v + 1 WHERE id = $1', 'k1');
		SELECT collegedb.run('k3', 'UPDATE items SET v = v + 1 WHERE id = $1', 'k3');
		COMMIT;} ]);
for my $case (@refused)
{
	my ($label, $sql) = @$case;
	$r = psql_outcome($standby, $sql);
	is($r->{sqlstate}, '25006', "$label on the standby: 25006") or diag $r->{stderr};
	like($r->{stderr}, qr/HINT:.*on the primary \(host "\Q$host\E", port \Q$port\E\)/,
		"$label: the hint names the primary");
}
is($standby->safe_psql('postgres', $catalog_sql), $catalog_before, 'the standby\'s catalog is unchanged');
$primary->wait_for_catchup($standby);
is($primary->safe_psql('postgres', $catalog_sql), $catalog_before, 'and so is the primary\'s');
is(shard_state(), $shards_before, 'no shard changed');
is($pga->safe_psql('d', q{SELECT count(*) FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')}),
	'0', 'the refused add_shard sent nothing to its server');
is($standby->safe_psql('postgres', q{SELECT collegedb.shard_for_key('fresh1', true) IS NOT NULL}), 't',
	'shard_for_key of a new key, which saves nothing, answers on the standby');
$r = psql_outcome($standby, q{SELECT * FROM collegedb.rebalance('items', dry_run => true)});
is($r->{rc}, 0, 'a dry-run rebalance runs on the standby') or diag $r->{stderr};

# advisory locks (the slot lock the slots strategy takes) work during recovery
is($standby->safe_psql('postgres', q{SELECT pg_advisory_xact_lock(1), pg_try_advisory_lock_shared(2)}),
	'|t', 'advisory locks are granted on the standby');

# --- shard state, settings and slot maps reach a warm standby backend -------------

my $pick = bg_query($warm, q{SELECT collegedb.shard_for_key('zz', true)})->{stdout};
is(bg_query($warm, q{SELECT source FROM collegedb.route('s1')})->{stdout}, 'strategy',
	'the warm backend routes an unmapped key by the hash strategy');
$primary->safe_psql('postgres', qq{SELECT collegedb.set_shard_state('$pick', writable => false)});
$primary->wait_for_catchup($standby);
my $repick = bg_query($warm, q{SELECT collegedb.shard_for_key('zz', true)})->{stdout};
is($repick, $primary->safe_psql('postgres', q{SELECT collegedb.shard_for_key('zz', true)}),
	'after replay it places a new key as the primary does');
isnt($repick, $pick, 'not on the shard the primary made read-only');
$primary->safe_psql('postgres', qq{SELECT collegedb.set_shard_state('$pick', writable => true)});

# --- the slots strategy: existing unmapped keys are written, new ones refused ------

$primary->safe_psql('postgres', q{
	SELECT collegedb.initialize_shard_map(16);
	SELECT collegedb.configure(strategy => 'slots');
	SELECT sum(collegedb.run('s' || i, 'INSERT INTO items VALUES ($1, 0)', 's' || i))
	  FROM generate_series(1, 20) AS i;});
$primary->wait_for_catchup($standby);
is(bg_query($warm, q{SELECT shard || '/' || source FROM collegedb.route('s1')})->{stdout},
	$primary->safe_psql('postgres', q{SELECT shard || '/' || source FROM collegedb.route('s1')}),
	'the warm backend follows the new strategy and slot map to the same shard');
# one statement per key: each commits on its own shard
$r = psql_outcome($standby,
	join("\n", map { "SELECT collegedb.run('s$_', 'UPDATE items SET v = 1 WHERE id = \$1', 's$_');" } 1 .. 20));
is(join(',', split /\n/, $r->{stdout}), join(',', (1) x 20),
	'the standby writes existing keys of the slots strategy') or diag $r->{stderr};
is($primary->safe_psql('postgres',
		q{SELECT sum((value->>'v')::int) FROM collegedb.fanout($$SELECT sum(v) AS v FROM items WHERE id LIKE 's%'$$)}),
	'20', 'on their slots\' shards');
$r = psql_outcome($standby, q{SELECT collegedb.run('s_new', 'INSERT INTO items VALUES ($1, 0)', 's_new')});
is($r->{sqlstate}, '25006', 'a new key of the slots strategy is refused on the standby') or diag $r->{stderr};
like($r->{stderr}, qr/cannot write a new key of slot \d+ on a hot standby/, 'naming its slot');
is($primary->safe_psql('postgres',
		q{SELECT sum((value->>'n')::int) FROM collegedb.fanout($$SELECT count(*) AS n FROM items WHERE id = 's_new'$$)}),
	'0', 'and it is on no shard');
$primary->safe_psql('postgres', q{SELECT collegedb.configure(strategy => 'hash')});

# --- a SQLite shard's file on the standby's host ----------------------------------

$primary->safe_psql('postgres', qq{
	CREATE SERVER s FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ sqlite_server_options($sqlite) ]});
	SELECT collegedb.add_shard('s');
	SELECT collegedb.run_on_shard('s', 'CREATE TABLE items (id TEXT PRIMARY KEY, v INT NOT NULL)');
	SELECT collegedb.set_mapping('q1', 's');
	SELECT collegedb.run('q1', 'INSERT INTO items VALUES (\$1, 5)', 'q1');});
$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres', q{SELECT collegedb.first('q1', 'SELECT v FROM items WHERE id = $1', 'q1')->>'v'}),
	'5', 'a standby on the primary\'s host reads the SQLite shard\'s file');
rename $sqlite, "$sqlite.away" or die "rename: $!";
$r = psql_outcome($standby, q{SELECT collegedb.first('q1', 'SELECT v FROM items WHERE id = $1', 'q1')});
is($r->{sqlstate}, '08006', 'without the file the standby cannot reach the SQLite shard') or diag $r->{stderr};
like($r->{stderr}, qr/could not connect to shard "s".*DETAIL:  could not open SQLite database "\Q$sqlite\E": The front is a hot standby and the file does not exist on this host/s,
	'the error names the path and the reason');
ok(!-e $sqlite, 'the standby did not create the file');
rename "$sqlite.away", $sqlite or die "rename: $!";

$warm->quit;

# The hint reads host and port from primary_conninfo in both of its forms, and
# nothing else of it (replication stops here: this is the end of the test).
for my $case ([ q{postgresql://rep:secret@[::1]:5999/postgres?sslmode=disable}, 'host "::1", port 5999' ],
	[ q{user=rep password='se cret' host='/tmp/a b' port = 6001}, 'host "/tmp/a b", port 6001' ],
	[ q{port=6002}, undef ])
{
	my ($conninfo, $named) = @$case;
	$standby->safe_psql('postgres',
		'ALTER SYSTEM SET primary_conninfo = ' . sql_literal($conninfo) . '; SELECT pg_reload_conf()');
	ok(poll_until($standby, 'SHOW primary_conninfo', $conninfo, 30), "primary_conninfo is $conninfo");
	$r = psql_outcome($standby, q{SELECT collegedb.set_mapping('k1', 'a')});
	like($r->{stderr}, defined $named ? qr/HINT:  Run it on the primary \(\Q$named\E\)\./ : qr/HINT:  Run it on the primary\./,
		'the hint names ' . ($named // 'no host'));
	unlike($r->{stderr}, qr/secret|se cret|rep\b/, 'and nothing else of the connection string');
}
note sprintf('150_standby_routing took %.1f s', time - $t_start);
done_testing();
