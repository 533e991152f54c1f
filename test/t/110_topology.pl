# 110_topology: topology groups delivered by the coordinator to PostgreSQL, MySQL and
# SQLite members.
#
# A group with four members (PostgreSQL 'a' and 'b' on two clusters, MySQL 'm', SQLite
# 's') and two state channels ('limits' for the write role, 'flags' for the read
# role).  Every member keeps a log of what was applied to its topology tables (a
# trigger on each), so that a value applied twice or out of order shows.  Proved:
# values and the snapshot reach every member; a member down for a while (its cluster
# stopped) is retried with its attempts and error visible (what is staged for it
# meanwhile waits for its retry), gets the value once it is back, and the others get
# theirs meanwhile; a member that hangs (its backend and
# postmaster stopped with SIGSTOP) holds up nobody: the others hold the new value
# before the hung member's attempt times out; the coordinator killed with SIGKILL
# between the shards' commits and the outbox's (collegedb.test_pause_after_delivery)
# delivers after the restart, applying nothing twice or out of order; a newcomer gets
# the current values staged with the change that adds it; a removed member's pending
# delivery is dropped (it never gets the value it missed, and its snapshot is
# removed); three quick updates end with the newest value everywhere; and an older
# version staged by hand (the same statements the coordinator sends) is never
# applied over a newer one, nor a newer version a member holds overwritten.  A shard
# without the shard-side tables (as one registered before 0.2) gets them at its first
# delivery, and again after they were dropped.  The README's tutorial runs as it stands.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use CollegeDB::TestHarness;

my $t_start = time;
my $front = front_node(
	'front',
	extension => 1,
	conf      => {
		restart_after_crash        => 'on',
		'collegedb.topology_timeout' => '4s',
		'collegedb.cleanup_timeout'  => '2s',
	});
my $pga = pg_shard_node('pga');
my $pgb = pg_shard_node('pgb');
$pga->safe_psql('postgres', 'CREATE DATABASE a');
$pga->safe_psql('postgres', 'CREATE DATABASE c');
$pgb->safe_psql('postgres', 'CREATE DATABASE b');
my $mdb = start_mariadb();
my $mdb_db = mysql_database($mdb);
my $sqlite = sqlite_dir() . '/s.db';

$front->safe_psql(
	'postgres', qq{
	@{[ pg_shard_server($pga, 'a', dbname => 'a') ]}
	@{[ pg_shard_server($pgb, 'b', dbname => 'b', options => { connect_timeout => 2 }) ]}
	@{[ pg_shard_server($pga, 'c', dbname => 'c') ]}
	@{[ mysql_shard_server($mdb, 'm', dbname => $mdb_db) ]}
	@{[ sqlite_shard_server('s', $sqlite) ]}
	SELECT collegedb.add_shard(x) FROM unnest(ARRAY['a', 'b', 'c', 'm', 's']) AS x;
	SELECT collegedb.topology_define_channel('limits');
	SELECT collegedb.topology_define_channel('flags', 'read');
});

# --- every member logs what is applied to its topology tables --------------------

for my $node ([ $pga, 'a' ], [ $pga, 'c' ], [ $pgb, 'b' ])
{
	$node->[0]->safe_psql(
		$node->[1], q{
		CREATE TABLE topology_log (seq bigserial PRIMARY KEY, tbl text, entry jsonb);
		CREATE FUNCTION log_topology() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO topology_log (tbl, entry) VALUES (TG_TABLE_NAME, to_jsonb(NEW));
			RETURN NEW;
		END $$;
		CREATE TRIGGER log_state AFTER INSERT OR UPDATE ON collegedb_topology_state
		  FOR EACH ROW EXECUTE FUNCTION log_topology();
		CREATE TRIGGER log_snapshot AFTER INSERT OR UPDATE ON collegedb_topology
		  FOR EACH ROW EXECUTE FUNCTION log_topology();
	});
}
mysql_query(
	$mdb, q{
	CREATE TABLE topology_log (seq BIGINT AUTO_INCREMENT PRIMARY KEY, tbl VARCHAR(32),
	                           group_name VARCHAR(255), channel VARCHAR(255), version BIGINT);
	CREATE TRIGGER log_state_ins AFTER INSERT ON collegedb_topology_state FOR EACH ROW
	  INSERT INTO topology_log (tbl, group_name, channel, version)
	  VALUES ('collegedb_topology_state', NEW.group_name, NEW.channel, NEW.version);
	CREATE TRIGGER log_state_upd AFTER UPDATE ON collegedb_topology_state FOR EACH ROW
	  INSERT INTO topology_log (tbl, group_name, channel, version)
	  SELECT 'collegedb_topology_state', NEW.group_name, NEW.channel, NEW.version FROM DUAL
	   WHERE NOT (NEW.version <=> OLD.version AND NEW.value <=> OLD.value);
	CREATE TRIGGER log_snapshot_ins AFTER INSERT ON collegedb_topology FOR EACH ROW
	  INSERT INTO topology_log (tbl, group_name, channel, version)
	  VALUES ('collegedb_topology', NEW.group_name, NULL, NEW.version);
	CREATE TRIGGER log_snapshot_upd AFTER UPDATE ON collegedb_topology FOR EACH ROW
	  INSERT INTO topology_log (tbl, group_name, channel, version)
	  SELECT 'collegedb_topology', NEW.group_name, NULL, NEW.version FROM DUAL
	   WHERE NOT (NEW.version <=> OLD.version AND NEW.snapshot <=> OLD.snapshot);
}, database => $mdb_db);
sqlite_exec(
	$sqlite, q{
	CREATE TABLE topology_log (seq INTEGER PRIMARY KEY AUTOINCREMENT, tbl TEXT,
	                           group_name TEXT, channel TEXT, version INTEGER);
	CREATE TRIGGER log_state_ins AFTER INSERT ON collegedb_topology_state BEGIN
	  INSERT INTO topology_log (tbl, group_name, channel, version)
	  VALUES ('collegedb_topology_state', NEW.group_name, NEW.channel, NEW.version); END;
	CREATE TRIGGER log_state_upd AFTER UPDATE ON collegedb_topology_state BEGIN
	  INSERT INTO topology_log (tbl, group_name, channel, version)
	  VALUES ('collegedb_topology_state', NEW.group_name, NEW.channel, NEW.version); END;
	CREATE TRIGGER log_snapshot_ins AFTER INSERT ON collegedb_topology BEGIN
	  INSERT INTO topology_log (tbl, group_name, channel, version)
	  VALUES ('collegedb_topology', NEW.group_name, NULL, NEW.version); END;
	CREATE TRIGGER log_snapshot_upd AFTER UPDATE ON collegedb_topology BEGIN
	  INSERT INTO topology_log (tbl, group_name, channel, version)
	  VALUES ('collegedb_topology', NEW.group_name, NULL, NEW.version); END;
});

# Applied entries, as "tbl channel version" lines in the order applied, per member.
sub applied
{
	my ($member) = @_;
	if ($member eq 'm')
	{
		return mysql_query($mdb,
			"SELECT tbl, coalesce(channel, '-'), version FROM topology_log ORDER BY seq",
			database => $mdb_db);
	}
	if ($member eq 's')
	{
		return sqlite_exec($sqlite,
			"SELECT tbl, coalesce(channel, '-'), version FROM topology_log ORDER BY seq");
	}
	my $node = $member eq 'b' ? $pgb : $pga;
	return $node->safe_psql($member,
		"SELECT tbl, coalesce(entry->>'channel', '-'), entry->>'version' FROM topology_log ORDER BY seq");
}

# Every member's log shows each (table, channel) at strictly increasing versions:
# nothing applied twice, nothing older after newer.
sub check_logs
{
	my ($label, @members) = @_;
	for my $member (@members)
	{
		my (%last, @bad);
		my $n = 0;
		for my $line (split /\n/, applied($member))
		{
			my ($tbl, $channel, $version) = split /[|\t]/, $line;
			my $k = "$tbl $channel";
			push @bad, "$k: $version after $last{$k}"
			  if defined $last{$k} && $version <= $last{$k};
			$last{$k} = $version;
			$n++;
		}
		is(join('; ', @bad), '', "$label: member $member applied $n changes, each once and in order");
	}
	return;
}

# --- what a member holds ------------------------------------------------------------

# The column of JSON text, whatever the member's dialect (jsonb on PostgreSQL).
sub json_text
{
	my ($member, $column) = @_;
	return $member =~ /^[abc]$/ ? "${column}::text AS $column" : $column;
}

# The channel values a member holds for a group: "channel=version:value; ...".
sub held
{
	my ($member, $group) = @_;
	my $value = json_text($member, 'value');
	return $front->safe_psql('postgres', qq{
		SELECT coalesce(string_agg((r->>'channel') || '=' || (r->>'version') || ':' ||
		                           ((r->>'value')::jsonb)::text, '; ' ORDER BY r->>'channel'), '')
		  FROM collegedb.all_on_shard('$member',
		         'SELECT channel, version, $value FROM collegedb_topology_state WHERE group_name = \$1',
		         '$group') AS r});
}

# The snapshot a member holds: "version:member/state,..." or "version:removed".
sub snapshot_on
{
	my ($member, $group) = @_;
	my $snapshot = json_text($member, 'snapshot');
	return $front->safe_psql('postgres', qq{
		SELECT (r->>'version') || ':' ||
		       coalesce((SELECT string_agg((e->>'id') || '/' || (e->>'state'), ',' ORDER BY e->>'id')
		                   FROM jsonb_array_elements(((r->>'snapshot')::jsonb)->'members') AS e),
		                'removed')
		  FROM collegedb.all_on_shard('$member',
		         'SELECT version, $snapshot FROM collegedb_topology WHERE group_name = \$1',
		         '$group') AS r});
}

sub limits_on
{
	my ($member) = @_;
	my ($limits) = grep { /^limits=/ } split /; /, held($member, 'g1');
	return $limits // '';
}

sub wait_delivered
{
	my ($label, $timeout) = @_;
	is($front->safe_psql('postgres', "SELECT collegedb.topology_wait('g1', '${\ ($timeout // 60)} s')"),
		't', "$label: topology_wait says every delivery of g1 is done");
	return;
}

sub state_version
{
	return $front->safe_psql('postgres',
		"SELECT state_version FROM collegedb.topology_group WHERE name = 'g1'");
}

my @all = qw(a b m s);
my @writers = qw(a b m);    # 's' drains: it gets 'flags' only

# --- 1. values and the snapshot reach every member --------------------------------

$front->safe_psql('postgres', q{
	SELECT collegedb.topology_update('g1',
	  '[{"id": "a", "state": "active"}, {"id": "b", "state": "active"},
	    {"id": "m", "state": "active"}, {"id": "s", "state": "draining"}]',
	  '{"limits": {"rps": 100}, "flags": {"beta": true}}')});
wait_delivered('first update');
for my $member (@all)
{
	is(snapshot_on($member, 'g1'), '1:a/active,b/active,m/active,s/draining',
		"first update: member $member holds snapshot version 1");
	is( held($member, 'g1'),
		$member eq 's'
		? 'flags=1:{"beta": true}'
		: 'flags=1:{"beta": true}; limits=1:{"rps": 100}',
		"first update: member $member holds the values of its roles");
}
is(snapshot_on('c', 'g1'), '', 'first update: a shard outside the group holds nothing');

# --- 2. a member down for a while, then back --------------------------------------

$pgb->stop('fast');
$front->safe_psql('postgres',
	q{SELECT collegedb.topology_update('g1', states => '{"limits": {"rps": 200}}')});
my $v = state_version();
my $t0 = time;
ok( poll_until(
		$front,
		q{SELECT count(*) FROM collegedb.topology_outbox WHERE group_name = 'g1' AND member <> 'b'},
		'0', 30),
	'member down: the other members are done');
is(limits_on($_), qq{limits=$v:{"rps": 200}}, "member down: member $_ got the new value")
  for qw(a m);
ok( poll_until(
		$front,
		q{SELECT attempts >= 2 AND last_error IS NOT NULL FROM collegedb.topology_outbox
		   WHERE group_name = 'g1' AND member = 'b' AND kind = 'state'},
		't', 30),
	'member down: its delivery is retried, attempts and error visible');
my $error = $front->safe_psql('postgres',
	q{SELECT last_error FROM collegedb.topology_outbox WHERE group_name = 'g1' AND member = 'b'});
like($error, qr/shard "b"/, "member down: the error names the shard ($error)");
my $backoff = $front->safe_psql('postgres', q{
	SELECT next_attempt_at > now() FROM collegedb.topology_outbox
	 WHERE group_name = 'g1' AND member = 'b'});
is($backoff, 't', 'member down: its next attempt waits (backoff)');
# what is staged for a member while it waits for its retry waits with it: b's retry is
# put off by hand, and a new value goes out to the others but not to b
$front->safe_psql('postgres', q{
	UPDATE collegedb.topology_delivery SET next_attempt_at = now() + interval '1 hour'
	 WHERE group_name = 'g1' AND member = 'b'});
$front->safe_psql('postgres',
	q{SELECT collegedb.topology_update('g1', states => '{"flags": {"beta": true, "gamma": 1}}')});
ok( poll_until(
		$front,
		q{SELECT count(*) FROM collegedb.topology_outbox WHERE group_name = 'g1' AND member <> 'b'},
		'0', 30),
	'member down: a value staged meanwhile reached the other members');
is( $front->safe_psql('postgres', q{
		SELECT attempts FROM collegedb.topology_outbox
		 WHERE group_name = 'g1' AND member = 'b' AND channel = 'flags'}),
	'0', 'member down: the value staged for it meanwhile waits for its retry');
$front->safe_psql('postgres', q{
	UPDATE collegedb.topology_delivery SET next_attempt_at = now()
	 WHERE group_name = 'g1' AND member = 'b'});
$pgb->start;
wait_delivered('member back', 90);
is(limits_on('b'), qq{limits=$v:{"rps": 200}}, 'member back: it got the value');
note sprintf 'member down and back: %.1f s', time - $t0;

# --- 3. a member that hangs holds up nobody ----------------------------------------

{
	# the coordinator's connection to b is open (it delivered); stop its backend and
	# the postmaster, so that the statement and any new connection hang
	ok( poll_until(
			$pgb,
			q{SELECT count(*) FROM pg_stat_activity WHERE application_name = 'collegedb'},
			'1', 30, 'b'),
		'member hangs: one collegedb connection on b, the coordinator\'s');
	my $backend = $pgb->safe_psql('b',
		q{SELECT pid FROM pg_stat_activity WHERE application_name = 'collegedb'});
	my ($postmaster) = split /\n/, slurp_file($pgb->data_dir . '/postmaster.pid');
	ok($backend =~ /^\d+$/, "member hangs: the coordinator's backend on b is $backend");
	kill 'STOP', $backend, $postmaster;
	my $t1 = time;
	$front->safe_psql('postgres',
		q{SELECT collegedb.topology_update('g1', states => '{"limits": {"rps": 300}}')});
	$v = state_version();
	my $ok = 1;
	for my $member (qw(a m))
	{
		$ok &&= poll_until($front,
			qq{SELECT (SELECT r->>'version' FROM collegedb.all_on_shard('$member',
			     'SELECT version FROM collegedb_topology_state WHERE group_name = ''g1'' AND channel = ''limits''') AS r)},
			$v, 30);
	}
	my $others_took = time - $t1;
	ok($ok, 'member hangs: the other members hold the new value');
	cmp_ok($others_took, '<', 4,
		sprintf('member hangs: they had it in %.2f s, before the hung attempt could time out (4 s)',
			$others_took));
	ok( poll_until(
			$front,
			q{SELECT attempts >= 1 FROM collegedb.topology_outbox
			   WHERE group_name = 'g1' AND member = 'b' AND kind = 'state'},
			't', 30),
		'member hangs: its attempt timed out and is counted');
	like(
		$front->safe_psql('postgres',
			q{SELECT last_error FROM collegedb.topology_outbox WHERE group_name = 'g1' AND member = 'b' AND kind = 'state'}),
		qr/timeout|lost connection|could not connect/,
		'member hangs: the error says it did not answer');
	# meanwhile a new value still reaches the others at once
	my $t2 = time;
	$front->safe_psql('postgres',
		q{SELECT collegedb.topology_update('g1', states => '{"limits": {"rps": 301}}')});
	$v = state_version();
	$ok = 1;
	for my $member (qw(a m))
	{
		$ok &&= poll_until($front,
			qq{SELECT (SELECT r->>'version' FROM collegedb.all_on_shard('$member',
			     'SELECT version FROM collegedb_topology_state WHERE group_name = ''g1'' AND channel = ''limits''') AS r)},
			$v, 30);
	}
	ok($ok, 'member hangs: a later value reaches the others too');
	note sprintf 'member hangs: the others got the later value in %.2f s', time - $t2;
	kill 'CONT', $postmaster, $backend;
	wait_delivered('hung member back', 120);
	is(limits_on('b'), qq{limits=$v:{"rps": 301}}, 'hung member back: it got the newest value');
	check_logs('after the hang', @all);
}

# --- 4. kill -9 of the coordinator between the shards' commits and the outbox's -----

{
	$front->safe_psql('postgres',
		"ALTER SYSTEM SET collegedb.test_pause_after_delivery = 'g1'; SELECT pg_reload_conf()");
	ok(poll_until($front, 'SHOW collegedb.test_pause_after_delivery', 'g1', 30),
		'kill: the pause is set');
	my $off = -s $front->logfile;
	$front->safe_psql('postgres',
		q{SELECT collegedb.topology_update('g1', states => '{"limits": {"rps": 400}}')});
	my $v400 = state_version();
	ok( wait_for_log_match($front,
			qr/delivery of topology group "g1" paused after the shards answered/, $off, 60),
		'kill: the coordinator pauses after the shards answered');
	is(limits_on($_), qq{limits=$v400:{"rps": 400}}, "kill: member $_ holds the value")
	  for @writers;
	is( $front->safe_psql('postgres',
			q{SELECT count(*) FROM collegedb.topology_outbox WHERE group_name = 'g1'}),
		'3', 'kill: the outbox still holds the deliveries');
	# a newer value staged while the coordinator waits replaces the pending ones
	$front->safe_psql('postgres',
		q{SELECT collegedb.topology_update('g1', states => '{"limits": {"rps": 500}}')});
	my $v500 = state_version();
	my $pid = $front->safe_psql('postgres',
		q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'collegedb coordinator'});
	kill 'KILL', $pid;
	ok(wait_for_log_match($front, qr/all server processes terminated; reinitializing/, $off, 30),
		'kill: the postmaster restarts every process');
	ok(poll_until($front, 'SELECT 1', '1', 60), 'kill: the front is back');
	$front->safe_psql('postgres',
		'ALTER SYSTEM RESET collegedb.test_pause_after_delivery; SELECT pg_reload_conf()');
	wait_delivered('kill', 60);
	is(limits_on($_), qq{limits=$v500:{"rps": 500}}, "kill: member $_ holds the newest value")
	  for @writers;
	check_logs('kill', @all);
}

# --- 5. a newcomer gets the current values ----------------------------------------

{
	my $staged = $front->safe_psql('postgres', q{
		BEGIN;
		SELECT collegedb.topology_update('g1',
		  '[{"id": "a", "state": "active"}, {"id": "b", "state": "active"},
		    {"id": "c", "state": "active"}, {"id": "m", "state": "active"},
		    {"id": "s", "state": "draining"}]') IS NOT NULL;
		SELECT string_agg(kind || ':' || coalesce(channel, '-'), ' ' ORDER BY kind, channel NULLS FIRST)
		  FROM collegedb.topology_outbox WHERE group_name = 'g1' AND member = 'c';
		COMMIT;});
	is((split /\n/, $staged)[1], 'snapshot:- state:flags state:limits',
		'newcomer: its snapshot and the current values are staged with the change that adds it');
	wait_delivered('newcomer');
	my $sv = state_version();
	like(held('c', 'g1'), qr/^flags=\d+:\{"beta": true, "gamma": 1\}; limits=$sv:\{"rps": 500\}$/,
		'newcomer: it holds the current values');
	is(snapshot_on('c', 'g1'), '2:a/active,b/active,c/active,m/active,s/draining',
		'newcomer: it holds the new snapshot');
	is(snapshot_on('a', 'g1'), '2:a/active,b/active,c/active,m/active,s/draining',
		'newcomer: the others hold the new snapshot');
}

# --- 6. a removed member's pending delivery is dropped -----------------------------

{
	my $before = limits_on('b');
	$pgb->stop('fast');
	$front->safe_psql('postgres',
		q{SELECT collegedb.topology_update('g1', states => '{"limits": {"rps": 600}}')});
	ok( poll_until(
			$front,
			q{SELECT count(*) FROM collegedb.topology_outbox WHERE group_name = 'g1' AND member = 'b' AND kind = 'state'},
			'1', 30),
		'removed member: the down member has a pending value');
	$front->safe_psql('postgres', q{
		SELECT collegedb.topology_update('g1',
		  '[{"id": "a", "state": "active"}, {"id": "c", "state": "active"},
		    {"id": "m", "state": "active"}, {"id": "s", "state": "draining"}]')});
	is( $front->safe_psql('postgres', q{
			SELECT string_agg(kind || ':' || coalesce(channel, '-') || ':' || removal, ' ')
			  FROM collegedb.topology_outbox WHERE group_name = 'g1' AND member = 'b'}),
		'snapshot:-:true', 'removed member: its pending value is dropped, its snapshot removal staged');
	$pgb->start;
	wait_delivered('removed member', 90);
	is(limits_on('b'), $before, 'removed member: it never got the value it missed');
	is(snapshot_on('b', 'g1'), '3:removed', 'removed member: its snapshot is removed at version 3');
	is(limits_on('a'), 'limits=' . state_version() . ':{"rps": 600}', 'removed member: the others got it');
}

# --- 7. three quick updates end with the newest value everywhere ------------------

{
	$front->safe_psql('postgres', q{
		SELECT collegedb.topology_update('g1', states => '{"limits": {"rps": 701}}');
		SELECT collegedb.topology_update('g1', states => '{"limits": {"rps": 702}}');
		SELECT collegedb.topology_update('g1', states => '{"limits": {"rps": 703}}');});
	my $sv = state_version();
	wait_delivered('three updates');
	is(limits_on($_), qq{limits=$sv:{"rps": 703}}, "three updates: member $_ holds the newest")
	  for qw(a c m);
	check_logs('three updates', qw(a c m s));
}

# --- 8. an older version is never applied over a newer one ------------------------

{
	my $sv = state_version();
	my $owner = $front->safe_psql('postgres', 'SELECT current_user');
	# staged by hand, as a late delivery would be: the coordinator sends them
	$front->safe_psql('postgres', qq{
		INSERT INTO collegedb.topology_delivery (group_name, kind, channel, member, version, payload, owner)
		SELECT 'g1', 'state', 'limits', x, 1, '{"rps": 1}'::jsonb, '$owner'::regrole
		  FROM unnest(ARRAY['a', 'm', 'c']) AS x
		UNION ALL
		SELECT 'g1', 'snapshot', '', x, 1, '{"group": "g1", "version": 1, "members": []}'::jsonb, '$owner'::regrole
		  FROM unnest(ARRAY['a', 'm', 's']) AS x});
	wait_delivered('older by hand');
	is(limits_on($_), qq{limits=$sv:{"rps": 703}}, "older by hand: member $_ keeps the newer value")
	  for qw(a c m);
	is(snapshot_on($_, 'g1'), '3:a/active,c/active,m/active,s/draining',
		"older by hand: member $_ keeps the newer snapshot")
	  for qw(a m s);

	# a member that holds a newer version than the coordinator's keeps it
	$pga->safe_psql('a',
		q{UPDATE collegedb_topology_state SET version = 1000, value = '"by hand"' WHERE group_name = 'g1' AND channel = 'limits'});
	mysql_query($mdb,
		q{UPDATE collegedb_topology_state SET version = 1000, value = '"by hand"' WHERE group_name = 'g1' AND channel = 'limits'},
		database => $mdb_db);
	$front->safe_psql('postgres',
		q{SELECT collegedb.topology_update('g1', states => '{"limits": {"rps": 800}}')});
	wait_delivered('newer on the member');
	is(limits_on($_), 'limits=1000:"by hand"', "newer on the member: member $_ keeps version 1000")
	  for qw(a m);
	is(limits_on('c'), 'limits=' . state_version() . ':{"rps": 800}', 'newer on the member: member c takes the new value');
	check_logs('at the end', qw(a c m s));
}

# --- a shard without the shard-side tables (registered before 0.2) gets them -------

{
	$pga->safe_psql('postgres', 'CREATE DATABASE d');
	$front->safe_psql('postgres', qq{
		@{[ pg_shard_server($pga, 'd', dbname => 'd') ]}
		SELECT collegedb.add_shard('d');});
	$pga->safe_psql('d', 'DROP TABLE collegedb_topology, collegedb_topology_state');
	my $off = -s $front->logfile;
	$front->safe_psql('postgres', q{
		SELECT collegedb.topology_update('g2', '[{"id": "d", "state": "active"}]', '{"limits": 1}')});
	is($front->safe_psql('postgres', q{SELECT collegedb.topology_wait('g2', '60 s')}), 't',
		'old shard: the delivery is done');
	unlike(slurp_file($front->logfile, $off), qr/could not deliver topology to shard "d"/,
		'old shard: at the first attempt');
	is(held('d', 'g2'), 'limits=' . $front->safe_psql('postgres',
			q{SELECT state_version FROM collegedb.topology_group WHERE name = 'g2'}) . ':1',
		'old shard: the coordinator created the tables and delivered');
	# dropped again behind the coordinator's back: it fails once, then creates them again
	$pga->safe_psql('d', 'DROP TABLE collegedb_topology, collegedb_topology_state');
	$front->safe_psql('postgres', q{SELECT collegedb.topology_update('g2', states => '{"limits": 2}')});
	is($front->safe_psql('postgres', q{SELECT collegedb.topology_wait('g2', '60 s')}), 't',
		'tables dropped: the delivery is done');
	like(held('d', 'g2'), qr/^limits=\d+:2$/, 'tables dropped: the coordinator created them again');
	$front->safe_psql('postgres', q{SELECT collegedb.topology_delete('g2')});
}

# --- routing within the group ------------------------------------------------------

is( $front->safe_psql('postgres', q{
		SELECT count(*) FILTER (WHERE collegedb.topology_shard_for_key('g1', 'k' || i)
		                              = collegedb.rendezvous_owner('k' || i, ARRAY['a', 'c', 'm']))
		  FROM generate_series(1, 100) AS i}),
	'100', 'routing: keys go to the rendezvous owner among the active members');
is( $front->safe_psql('postgres', q{
		SELECT string_agg(shard || '=' || coalesce(value->>'n', error), ' ' ORDER BY shard)
		  FROM collegedb.fanout_group('g1', 'SELECT count(*) AS n FROM collegedb_topology')}),
	'a=1 c=1 m=1 s=1', 'routing: fanout_group reads every member of the read set');

# --- the README's tutorial pastes into psql -----------------------------------------

{
	my $readme = slurp_file(source_file('README.md'));
	my ($tutorial) = $readme =~ /^## Topology groups\n.*?^```sql\n(.*?)^```$/ms;
	ok(defined $tutorial, 'README: the topology tutorial is there');
	my $dir = sqlite_dir();
	$tutorial =~ s{/tmp/}{$dir/}g;
	$front->safe_psql('postgres', 'CREATE DATABASE tutorial');
	my $r = psql_outcome($front, $tutorial, dbname => 'tutorial');
	is($r->{rc}, 0, 'README: the tutorial runs without an error') or diag $r->{stderr};
	# its booleans: three topology_wait and two topology_delete, each true
	my @booleans = grep { /^(t|f)$/ } split /\n/, $r->{stdout};
	is(join(',', @booleans), 't,t,t,t,t',
		'README: every topology_wait and topology_delete of the tutorial returns true');
}

note sprintf 'total %.1f s', time - $t_start;
done_testing();
