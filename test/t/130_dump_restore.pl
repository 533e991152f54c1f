# 130_dump_restore: pg_dump of a front, restored into a new front, routes every key to
# the same shard and goes on working.
#
# The old front serves two databases.  'app' (KV placement) has a PostgreSQL, an SQLite
# and a MariaDB shard (shard state: region, tags, priority), keys with rows, a record
# with lookup keys, a registered table and a sharded foreign table, settings, a slot
# map, a topology group with a channel, a role granted routing, finished jobs and moves,
# and one move in flight: paused after its step 'copied' when pg_dump -Fc runs, then
# finished by the old front, so the dump's journal is behind the shards.  'comp'
# (computed placement) has two epochs and exceptions, dumped in plain format.  'reb' is
# dumped while a scheduled rebalance runs, its first move paused after 'copied'.  The old
# front's roles go over with pg_dumpall --globals-only, then the old front stops, as a
# dead front would.
#
# The new front: 'app' is restored with pg_restore section by section into a new
# database; a session that cached the empty fleet between the schema and the data sees
# the restored rows; 'comp' is restored with psql from the plain dump, which creates the extension.
# Then: the catalog views equal the old front's; every key (lookup keys too) has the
# same shard and route source; every row reads through the restored front, also as
# the routing role and through the foreign table; the move in flight is resumed by the
# restored coordinator and ends with its key where the old front put it; job and move
# ids go on from the dumped ones; a rebalance drains a shard; the topology group takes
# a new state; a computed key resolves through its exception; the rebalance in flight
# runs again to done with every key moved once, its coordinator having waited while
# pg_restore was half-way through the catalog's rows.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use CollegeDB::TestHarness;

my %conf = (max_worker_processes => 20, log_statement => 'none', 'collegedb.recovery_interval' => '1s');
my $old = front_node('old', conf => \%conf);
my $pg  = pg_shard_node('shards', conf => { log_statement => 'none' });
$pg->safe_psql('postgres', "CREATE DATABASE $_") for qw(p pc1 pc2 r1 r2);
my $mdb    = start_mariadb();
my $mydb   = mysql_database($mdb);
my $dir    = sqlite_dir();
my $tmp    = PostgreSQL::Test::Utils::tempdir();
my $nkeys  = 60;
my @keys   = ((map { "k$_" } 1 .. $nkeys), 'rec-1', 'mail-1', 'phone-1');
my @ckeys  = map { "c$_" } 1 .. 40;

# The servers and user mappings of PostgreSQL shards, each on the database of its name.
sub pg_servers
{
	return pg_shard_servers($pg, map { ($_, $_) } @_);
}

$old->safe_psql('postgres', q{
	CREATE ROLE cd_app LOGIN;
	CREATE DATABASE app;
	CREATE DATABASE comp;
	CREATE DATABASE reb;
});

# --- the old front's 'app': KV placement on three dialects ---------------------------

$old->safe_psql('app', qq{
	CREATE EXTENSION collegedb;
	CREATE SERVER p FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ pg_server_options($pg, dbname => 'p') ]});
	CREATE USER MAPPING FOR PUBLIC SERVER p OPTIONS (user 'postgres', password_required 'false');
	CREATE SERVER l FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ sqlite_server_options("$dir/l.db") ]}, busy_timeout '5000');
	CREATE SERVER m FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ mysql_server_options($mdb, dbname => $mydb) ]});
	CREATE USER MAPPING FOR PUBLIC SERVER m OPTIONS (@{[ mysql_user_mapping_options($mdb) ]});
	SELECT collegedb.add_shard('p');
	SELECT collegedb.add_shard('l', region => 'weur', priority => 2, tags => '{"tier": "local"}');
	SELECT collegedb.add_shard('m', physical_id => 'maria-1');
	SELECT count(*) FROM collegedb.run_on_all('CREATE TABLE items (id VARCHAR(64) PRIMARY KEY, v INTEGER)');
	SELECT collegedb.register_table('items', 'id');
	CREATE FOREIGN TABLE items_ft (id text, v integer) SERVER collegedb
	  OPTIONS (key_column 'id', table_name 'items');
	SELECT collegedb.configure(mapping_cache_ttl => '1 minute', migration_concurrency => 4,
	                           size_cache_ttl => '10 seconds');
	SELECT sum(collegedb.run('k' || i, 'INSERT INTO items VALUES (\$1, \$2)', 'k' || i, i))
	  FROM generate_series(1, $nkeys) AS i;
	SELECT collegedb.set_mapping('rec-1', 'm', ARRAY['mail-1', 'phone-1']);
	SELECT collegedb.run('rec-1', 'INSERT INTO items VALUES (\$1, \$2)', 'rec-1', 1000);
	SELECT collegedb.initialize_shard_map(16);
	SELECT collegedb.topology_define_channel('limits');
	SELECT collegedb.topology_update('tenant-1',
	  '[{"id": "p", "state": "active"}, {"id": "l", "state": "active"}]', '{"limits": {"rps": 100}}');
	SELECT collegedb.grant_routing('cd_app');
});
is($old->safe_psql('app', q{SELECT collegedb.topology_wait('tenant-1', '60 s')}),
	't', 'old front: the topology group reached its members');

sub other_shard
{
	my ($node, $db, $k) = @_;
	return $node->safe_psql($db, qq{
		SELECT s FROM unnest(ARRAY['p', 'l', 'm']) AS s
		 WHERE s <> collegedb.shard_for_key('$k') ORDER BY s LIMIT 1});
}

# a finished move (a job and a move in the journal)
my $t1 = other_shard($old, 'app', 'k1');
$old->safe_psql('app', qq{SELECT collegedb.reassign_shard('k1', '$t1')});

# 'reb': a rebalance draining r1 into r2, one key at a time
$old->safe_psql('reb', qq{
	CREATE EXTENSION collegedb;
	@{[ pg_servers('r1', 'r2') ]}
	SELECT collegedb.add_shard('r1');
	SELECT collegedb.add_shard('r2');
	SELECT collegedb.set_shard_state('r2', writable => false);
	SELECT count(*) FROM collegedb.run_on_all('CREATE TABLE items (id TEXT PRIMARY KEY, v INTEGER)');
	SELECT collegedb.register_table('items', 'id');
	SELECT sum(collegedb.run('r' || i, 'INSERT INTO items VALUES (\$1, \$2)', 'r' || i, i))
	  FROM generate_series(1, 20) AS i;
	SELECT collegedb.set_shard_state('r2', writable => true);
	SELECT collegedb.set_shard_state('r1', drain => 'draining');
});

# the move in flight: paused after 'copied' while pg_dump runs
$old->safe_psql('postgres',
	"ALTER SYSTEM SET collegedb.test_pause_after_step = 'copied'; SELECT pg_reload_conf()");
ok(poll_until($old, 'SHOW collegedb.test_pause_after_step', 'copied', 30), 'old front: movers pause after copied');
my $t2  = other_shard($old, 'app', 'k2');
my $off = -s $old->logfile;
my $mover = psql_start($old, qq{SELECT collegedb.reassign_shard('k2', '$t2') IS NOT NULL}, dbname => 'app');
my ($mover_pid, $move_id, $after_k2) =
  wait_for_log_match($old, qr/\[(\d+)\] LOG:  collegedb: move (\d+) paused after step copied\b/, $off, 60);
ok($move_id, "old front: move $move_id of k2 to $t2 paused after copied");

# the rebalance in flight: its first move paused after 'copied', the other keys pending
my $reb_job = $old->safe_psql('reb', q{SELECT collegedb.schedule_rebalance('items', concurrency => 1)});
my (undef, $reb_move) =
  wait_for_log_match($old, qr/\[(\d+)\] LOG:  collegedb: move (\d+) paused after step copied\b/, $after_k2, 60);
ok($reb_move, "old front: rebalance job $reb_job paused its move $reb_move after copied");
$old->command_ok([ 'pg_dump', '-Fc', '-f', "$tmp/reb.dump", '-d', 'reb' ], 'pg_dump -Fc of reb, its rebalance running');

$old->command_ok([ 'pg_dump', '-Fc', '-f', "$tmp/app.dump", '-d', 'app' ], 'pg_dump -Fc of app');
my $dumped_job = $old->safe_psql('app', 'SELECT max(id) FROM collegedb.job');
my $dumped_move = $old->safe_psql('app', 'SELECT max(id) FROM collegedb.move');

# the paused mover ends; the old front's coordinator takes the move over and finishes it
$old->safe_psql('postgres', 'ALTER SYSTEM RESET collegedb.test_pause_after_step; SELECT pg_reload_conf()');
ok(poll_until($old, 'SHOW collegedb.test_pause_after_step', '', 30), 'old front: movers pause no more');
$old->safe_psql('postgres', "SELECT pg_terminate_backend($mover_pid)");
psql_finish($mover, 120);
ok(poll_until($old, "SELECT step FROM collegedb.moves WHERE id = $move_id", 'done', 90, 'app'),
	'old front: the move went on after the dump to done, past what the dump holds');
ok(poll_until($old, q{SELECT count(*) FROM collegedb.jobs WHERE state IN ('queued', 'running')}, '0', 60, 'app'),
	'old front: no job is left queued or running');

# --- the old front's 'comp': computed placement, epochs and exceptions ---------------

$old->safe_psql('comp', qq{
	CREATE EXTENSION collegedb;
	@{[ pg_servers('pc1', 'pc2') ]}
	CREATE SERVER c FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ sqlite_server_options("$dir/c.db") ]});
	SELECT collegedb.configure(placement => 'computed');
	SELECT collegedb.add_shard('pc1');
	SELECT collegedb.add_shard('c');
	SELECT count(*) FROM collegedb.run_on_all('CREATE TABLE events (user_id VARCHAR(64), n INTEGER)');
	SELECT collegedb.register_table('events', 'user_id');
	SELECT epoch FROM collegedb.publish_eligibility();
	SELECT sum(collegedb.run('c' || i, 'INSERT INTO events VALUES (\$1, \$2)', 'c' || i, i))
	  FROM generate_series(1, 40) AS i;
	SELECT collegedb.add_shard('pc2');
	SELECT count(*) FROM collegedb.run_on_all('CREATE TABLE events (user_id VARCHAR(64), n INTEGER)');
	SELECT epoch FROM collegedb.publish_eligibility();
	-- reads find the keys that epoch 2 gives pc2 under epoch 1, and record exceptions
	SELECT count(collegedb.first('c' || i, 'SELECT n FROM events WHERE user_id = \$1', 'c' || i))
	  FROM generate_series(1, 40) AS i;
});
my $exceptions = $old->safe_psql('comp', 'SELECT count(*) FROM collegedb.mapping');
cmp_ok($exceptions, '>', 0, "old front: comp has two epochs and $exceptions exceptions");
$old->command_ok([ 'pg_dump', '-Fp', '-f', "$tmp/comp.sql", '-d', 'comp' ], 'pg_dump -Fp of comp');
$old->command_ok([ 'pg_dumpall', '--globals-only', '-f', "$tmp/globals.sql" ], 'pg_dumpall --globals-only');

# What the fronts say: catalog views, and every key's shard, route and row.
my %views = (
	shards   => 'SELECT * FROM collegedb.shards',
	settings => 'SELECT * FROM collegedb.settings ORDER BY 1',
	tables   => 'SELECT * FROM collegedb.tables',
	epochs   => 'SELECT * FROM collegedb.epochs',
	map      => 'SELECT version, digest, slots, ranges FROM collegedb.shard_map',
	topology => q{SELECT collegedb.topology_snapshot('tenant-1') - 'coordinator', (SELECT array_agg(channel || ':' || members ORDER BY channel) FROM collegedb.topology_channel)},
	lookups  => q{SELECT collegedb.get_lookup_keys('rec-1')},
	mapping  => 'SELECT key, shard, record, keys, name FROM collegedb.mapping ORDER BY key',
	numbers  => 'SELECT number, name FROM collegedb.shard_number ORDER BY number');

sub views
{
	my ($node, $db, @names) = @_;
	return { map { $_ => $node->safe_psql($db, $views{$_}) } @names };
}

sub routes
{
	my ($node, $db, $table, $column, $value, @k) = @_;
	my $list = join ', ', map { sql_literal($_) } @k;
	return $node->safe_psql($db, qq{
		SELECT k, collegedb.shard_for_key(k), (SELECT string_agg(shard || ':' || source, ',') FROM collegedb.route(k)),
		       collegedb.first(k, 'SELECT $value AS v FROM $table WHERE $column = \$1', k)
		  FROM unnest(ARRAY[$list]) AS k ORDER BY k});
}

my @app_views = qw(shards settings tables map topology lookups mapping numbers);
my $app_before = views($old, 'app', @app_views);
my $app_routes = routes($old, 'app', 'items', 'id', 'v', grep { !/^(mail|phone)-/ } @keys);
my $lookup_routes = $old->safe_psql('app', q{SELECT collegedb.shard_for_key(k) FROM unnest(ARRAY['mail-1', 'phone-1']) AS k});
my $comp_routes = routes($old, 'comp', 'events', 'user_id', 'n', @ckeys);
my $comp_before = views($old, 'comp', qw(shards settings tables epochs mapping numbers));
$old->stop('fast');

# --- the new front -------------------------------------------------------------------

my $new = front_node('new', conf => \%conf);
$new->psql('postgres', undef, extra_params => [ '-f', "$tmp/globals.sql" ]);
is($new->safe_psql('postgres', q{SELECT count(*) FROM pg_roles WHERE rolname = 'cd_app'}),
	'1', 'new front: the routing role came over with the globals');
$new->safe_psql('postgres', 'CREATE DATABASE app');
$new->safe_psql('postgres', 'CREATE DATABASE comp');

# a session that created the extension and cached an empty fleet before the restore
# pg_restore in its three sections; between the schema and the data, a session
# caches the empty fleet that CREATE EXTENSION made
$new->command_ok([ 'pg_restore', '--exit-on-error', '--section=pre-data', '-d', 'app', "$tmp/app.dump" ],
	'pg_restore of app, pre-data: the extension, servers, user mappings, foreign table');
is($new->safe_psql('app', q{SELECT extversion FROM pg_extension WHERE extname = 'collegedb'}),
	'0.3', 'pg_restore created the extension');
my $early = bg_session($new, dbname => 'app');
is(bg_query($early, q{SELECT collegedb.shard_for_key('k3')})->{sqlstate},
	'CD002', 'new front: before the data there is no shard (NO_SHARDS)');
$new->command_ok([ 'pg_restore', '--exit-on-error', '--section=data', '-d', 'app', "$tmp/app.dump" ],
	'pg_restore of app, data: the catalog rows and sequences');
$new->command_ok([ 'pg_restore', '--exit-on-error', '--section=post-data', '-d', 'app', "$tmp/app.dump" ],
	'pg_restore of app, post-data');
$new->command_ok([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', 'comp', '-f', "$tmp/comp.sql" ],
	'psql of the plain dump of comp into an empty database');
is($new->safe_psql('comp', q{SELECT extversion FROM pg_extension WHERE extname = 'collegedb'}),
	'0.3', 'the plain dump created the extension');

my %shard_of = map { (split /\|/)[ 0, 1 ] } split /\n/, $app_routes;
is(bg_query($early, q{SELECT collegedb.shard_for_key('k3')})->{stdout},
	$shard_of{k3}, 'the session from before the restore sees the restored fleet');
$early->quit;

# the move in flight: the restored coordinator takes it over and finishes it
ok(poll_until($new, "SELECT step FROM collegedb.moves WHERE id = $move_id", 'done', 90, 'app'),
	"new front: the restored coordinator resumed move $move_id to done");
ok(poll_until($new, q{SELECT count(*) FROM collegedb.jobs WHERE state IN ('queued', 'running')}, '0', 60, 'app'),
	'new front: no job is left queued or running');

my $app_after = views($new, 'app', @app_views);
is($app_after->{$_}, $app_before->{$_}, "app: collegedb.$_ is as on the old front") for @app_views;
is(routes($new, 'app', 'items', 'id', 'v', grep { !/^(mail|phone)-/ } @keys),
	$app_routes, 'app: every key has the same shard, route and row (k2 where the old front moved it)');
is($new->safe_psql('app', q{SELECT collegedb.shard_for_key(k) FROM unnest(ARRAY['mail-1', 'phone-1']) AS k}),
	$lookup_routes, 'app: the lookup keys go to their record\'s shard');
is($new->safe_psql('app', q{SELECT count(*) || '/' || sum(v) FROM items_ft}),
	($nkeys + 1) . '/' . ($nkeys * ($nkeys + 1) / 2 + 1000),
	'app: the sharded foreign table reads every row once');
is( $new->safe_psql('app', q{
		SET ROLE cd_app;
		SELECT count(*) FROM generate_series(1, 60) AS i
		 WHERE (collegedb.first('k' || i, 'SELECT v FROM items WHERE id = $1', 'k' || i))->>'v' = i::text}),
	$nkeys, 'app: the routing role reads every key through the restored grants and user mappings');
is(psql_outcome($new, q{SET ROLE cd_app; SELECT collegedb.add_shard('x')}, dbname => 'app')->{sqlstate},
	'42501', 'app: the routing role still may not add a shard');

# ids go on from the dump
my $t3 = other_shard($new, 'app', 'k3');
$new->safe_psql('app', qq{SELECT collegedb.reassign_shard('k3', '$t3')});
cmp_ok($new->safe_psql('app', q{SELECT max(id) FROM collegedb.job}), '>', $dumped_job,
	'app: a new job id follows the dumped ones');
cmp_ok($new->safe_psql('app', q{SELECT max(id) FROM collegedb.move}), '>', $dumped_move,
	'app: a new move id follows the dumped ones');

# a rebalance drains the SQLite shard
$new->safe_psql('app', q{SELECT collegedb.set_shard_state('l', drain => 'draining')});
is($new->safe_psql('app', q{SELECT failed FROM collegedb.rebalance('items')}), '[]',
	'app: a rebalance on the restored front fails no key');
is($new->safe_psql('app', q{SELECT count(*) FROM collegedb.all_on_shard('l', 'SELECT id FROM items')}),
	'0', 'app: the draining shard is empty');
is( $new->safe_psql('app', qq{
		SELECT count(*) FROM unnest(ARRAY[@{[ join ', ', map { sql_literal($_) } grep { /^k/ } @keys ]}]) AS k
		 WHERE (SELECT count(*) FROM collegedb.all_json(k, 'SELECT v FROM items WHERE id = \$1', k)) = 1}),
	$nkeys, 'app: every key is readable once after the rebalance');

# the topology group takes a new state
$new->safe_psql('app', q{SELECT collegedb.topology_update('tenant-1', states => '{"limits": {"rps": 200}}')});
is($new->safe_psql('app', q{SELECT collegedb.topology_wait('tenant-1', '60 s')}), 't',
	'app: a new state of the topology group reaches its members');
like( $new->safe_psql('app', q{
		SELECT a->>'value' FROM collegedb.all_on_shard('p',
		  'SELECT value FROM collegedb_topology_state WHERE group_name = ''tenant-1'' AND channel = ''limits''') AS a}),
	qr/"rps": ?200/, 'app: the member holds the new value');

# comp: computed placement
is(routes($new, 'comp', 'events', 'user_id', 'n', @ckeys), $comp_routes,
	'comp: every key has the same shard, route (computed or exception) and row');
my $comp_after = views($new, 'comp', qw(shards settings tables epochs mapping numbers));
is($comp_after->{$_}, $comp_before->{$_}, "comp: collegedb.$_ is as on the old front")
  for qw(shards settings tables epochs mapping numbers);
like($comp_routes, qr/:exception/, 'comp: some keys route through their exception');

# reb: the rebalance in flight at the dump (and still at the old front's end) is run
# again by the restored coordinator, its paused move resumed
#
# pg_restore loads the catalog table by table, each in a transaction of its own, and
# the coordinator of the new database looks at it meanwhile: collegedb.job comes before
# collegedb.move, collegedb.registered_table and collegedb.shard.  The restore stops
# right after collegedb.job (its running job's worker is gone) until the coordinator
# has looked: it must wait for the rest, not run the job (which then failed: 'table
# "items" is not registered') nor its moves ('shard "r1" is not registered').
$new->safe_psql('postgres', 'CREATE DATABASE reb');
my ($listing) = run_command([ 'pg_restore', '-l', "$tmp/reb.dump" ]);
my @toc = grep { !/^;/ } split /\n/, $listing;
my ($cut) = grep { $toc[$_] =~ /\bTABLE DATA collegedb job\b/ } 0 .. $#toc;
ok(defined $cut && $cut < $#toc, 'reb: the dump holds data after collegedb.job\'s');
PostgreSQL::Test::Utils::append_to_file("$tmp/reb.head", join("\n", @toc[ 0 .. $cut ]) . "\n");
PostgreSQL::Test::Utils::append_to_file("$tmp/reb.tail", join("\n", @toc[ $cut + 1 .. $#toc ]) . "\n");
$off = -s $new->logfile;
$new->command_ok([ 'pg_restore', '--exit-on-error', '-L', "$tmp/reb.head", '-d', 'reb', "$tmp/reb.dump" ],
	'pg_restore of reb up to the data of collegedb.job');
my ($seen) = wait_for_log_match($new,
	qr/collegedb coordinator: (the catalog of database "reb" is being restored|job $reb_job is queued again)/, $off, 60);
like($seen // '', qr/being restored/, 'reb: the coordinator waits for the restore instead of running the job');
$new->command_ok([ 'pg_restore', '--exit-on-error', '-L', "$tmp/reb.tail", '-d', 'reb', "$tmp/reb.dump" ],
	'pg_restore of reb, the rest');
ok(poll_until($new, qq{SELECT state IN ('done', 'failed') FROM collegedb.jobs WHERE id = $reb_job}, 't', 90, 'reb'),
	'reb: the restored rebalance job ends');
ok(poll_until($new, qq{SELECT state || '/' || keys_done || '/' || keys_planned || '/' || failed
		           FROM collegedb.jobs WHERE id = $reb_job}, 'done/20/20/0', 10, 'reb'),
	'reb: the restored rebalance job ends done, every key moved')
  or diag('reb: ' . $new->safe_psql('reb', qq{
	SELECT state || ', error: ' || coalesce(last_error, '-') || ', deaths: ' || deaths
	  FROM collegedb.jobs WHERE id = $reb_job}));
ok(poll_until($new, q{SELECT count(*) FROM collegedb.moves WHERE step <> 'done'}, '0', 60, 'reb'),
	"reb: every move is done, also move $reb_move paused at the dump");
is( $new->safe_psql('reb', q{
		SELECT (SELECT count(*) FROM collegedb.all_on_shard('r1', 'SELECT id FROM items')) || '/' ||
		       (SELECT count(*) FROM collegedb.all_on_shard('r2', 'SELECT id FROM items')) || '/' ||
		       (SELECT count(*) FROM generate_series(1, 20) AS i
		         WHERE (SELECT count(*) FROM collegedb.all_json('r' || i, 'SELECT v FROM items WHERE id = $1', 'r' || i)) = 1)}),
	'0/20/20', 'reb: every key is on r2 once and readable');

done_testing();
