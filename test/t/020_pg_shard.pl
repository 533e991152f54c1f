# 020_pg_shard: a PostgreSQL shard on its own cluster, seen from one front session.
#
# The cached connection survives a shard restart (the next statement reconnects, data
# intact); a stopped shard gives class 08 naming the shard, and the shard is usable
# again once it is back; a dead connection inside a transaction block is not silently
# replaced; query cancel and statement_timeout on the front stop the remote statement
# (the shard's pg_stat_activity shows it gone, well before it would have ended);
# ALTER SERVER sends the next statement to the new database; remote transactions
# follow the front's BEGIN / ROLLBACK / COMMIT, also when the front fails.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use CollegeDB::TestHarness;

my $front = front_node('front', extension => 1);
my $shard = pg_shard_node('shard');
$shard->safe_psql('postgres', 'CREATE DATABASE app');
$shard->safe_psql('postgres', 'CREATE DATABASE other');

$front->safe_psql(
	'postgres', qq{
	CREATE SERVER s FOREIGN DATA WRAPPER collegedb
	  OPTIONS (@{[ pg_server_options($shard, dbname => 'app') ]});
	CREATE USER MAPPING FOR PUBLIC SERVER s OPTIONS (user 'postgres');
	SELECT collegedb.add_shard('s');
	CREATE TABLE local_log (note text);
});

# Rows of app.items as "id|v" lines, read on the shard itself.
sub shard_rows
{
	my ($where) = @_;
	return $shard->safe_psql('app',
		'SELECT id, v FROM items' . ($where ? " WHERE $where" : '') . ' ORDER BY id');
}

# The number of statements running pg_sleep(30) on the shard.
my $sleepers = q{SELECT count(*) FROM pg_stat_activity
	WHERE query = 'SELECT pg_sleep(30)' AND state = 'active'};

# --- (a) DDL and a write with parameters -----------------------------------------

my $bg = bg_session($front);
my $front_pid = bg_query($bg, 'SELECT pg_backend_pid()')->{stdout};
like($front_pid, qr/^\d+$/, 'the front session has a backend');

my $r = bg_query($bg,
	q{SELECT collegedb.run_on_shard('s', 'CREATE TABLE items (id int PRIMARY KEY, v text)')});
is($r->{stderr}, '', 'run_on_shard creates a table on the shard');
$r = bg_query($bg,
	q{SELECT collegedb.run_on_shard('s', 'INSERT INTO items VALUES ($1, $2), ($3, $4)', 1, 'one', 2, 'two')});
is($r->{stdout}, '2', 'run_on_shard inserts two rows and says so') or diag $r->{stderr};
is(shard_rows(), "1|one\n2|two", 'the rows are on the shard');

# --- (b) the shard restarts under a cached connection ----------------------------

my $pid_sql = q{SELECT j->>'pid' FROM collegedb.all_on_shard('s', 'SELECT pg_backend_pid() AS pid') AS j};
my $remote_pid = bg_query($bg, $pid_sql)->{stdout};
like($remote_pid, qr/^\d+$/, 'the session holds a connection to the shard');

$shard->restart;

$r = bg_query($bg, q{SELECT j FROM collegedb.all_on_shard('s', 'SELECT id, v FROM items ORDER BY id') AS j});
is($r->{stderr}, '', 'a read after the shard restarted succeeds (stale connection replaced)');
is( $r->{stdout},
	qq({"v": "one", "id": 1}\n{"v": "two", "id": 2}),
	'the data is intact after the restart');
my $new_pid = bg_query($bg, $pid_sql)->{stdout};
isnt($new_pid, $remote_pid, 'the front reconnected (another shard backend)');

$shard->restart;

$r = bg_query($bg, q{SELECT collegedb.run_on_shard('s', 'INSERT INTO items VALUES ($1, $2)', 3, 'three')});
is($r->{stdout}, '1', 'a write after the shard restarted succeeds')
  or diag $r->{stderr};
is(shard_rows('id = 3'), '3|three', 'the write reached the restarted shard once');

# --- (c) the shard is down, then back --------------------------------------------

$shard->stop;
$r = bg_query($bg, q{SELECT collegedb.run_on_shard('s', 'SELECT 1')});
like($r->{sqlstate} // '', qr/^08/, 'a statement on a stopped shard fails with class 08')
  or diag $r->{stderr};
like($r->{stderr}, qr/ERROR:  08...: .*shard "s"/, 'the message names the shard');
cmp_ok($r->{seconds}, '<', 10, 'the failure comes quickly');

$r = bg_query($bg, q{SELECT collegedb.run_on_shard('s', 'SELECT 1')});
like($r->{sqlstate} // '', qr/^08/, 'it keeps failing with class 08 while the shard is down');

$shard->start;
$r = bg_query($bg, q{SELECT collegedb.run_on_shard('s', 'SELECT 1')});
is($r->{stdout}, '1', 'the next statement works once the shard is back')
  or diag $r->{stderr};

# A connection lost inside a transaction block is not replaced behind its back: the
# statement fails naming the shard, and the block's earlier write is gone.
bg_query($bg, 'BEGIN');
$r = bg_query($bg, q{SELECT collegedb.run_on_shard('s', 'INSERT INTO items VALUES ($1, $2)', 4, 'lost')});
is($r->{stderr}, '', 'a write inside BEGIN');
$shard->restart;
$r = bg_query($bg, q{SELECT collegedb.run_on_shard('s', 'INSERT INTO items VALUES ($1, $2)', 5, 'lost')});
like($r->{sqlstate} // '', qr/^08/,
	'the next statement in the block fails: the remote transaction was lost')
  or diag $r->{stderr};
like($r->{stderr}, qr/shard "s"/, 'that error names the shard');
$r = bg_query($bg, 'COMMIT');
is(shard_rows('id IN (4, 5)'), '', 'nothing of the lost transaction is on the shard');
$r = bg_query($bg, q{SELECT collegedb.run_on_shard('s', 'SELECT 1')});
is($r->{stdout}, '1', 'the session works again after the block')
  or diag $r->{stderr};

# The same when the connection dies just before COMMIT: the COMMIT fails naming the
# shard, and the front's own write in the block is rolled back with it.
bg_query($bg, 'BEGIN');
bg_query($bg, q{INSERT INTO local_log VALUES ('lost with the shard')});
$r = bg_query($bg, q{SELECT collegedb.run_on_shard('s', 'INSERT INTO items VALUES ($1, $2)', 6, 'lost')});
is($r->{stderr}, '', 'a write inside BEGIN, next to a front write');
$shard->restart;
$r = bg_query($bg, 'COMMIT');
ok(defined $r->{sqlstate}, 'COMMIT fails when the shard connection died before it')
  or diag $r->{stdout};
like($r->{stderr}, qr/shard "s"/, 'the COMMIT error names the shard');
is(shard_rows('id = 6'), '', 'the shard write of the failed COMMIT is not there');
is($front->safe_psql('postgres', 'SELECT count(*) FROM local_log'),
	'0', 'the front write of the failed COMMIT is rolled back');
$r = bg_query($bg, q{SELECT collegedb.run_on_shard('s', 'SELECT 1')});
is($r->{stdout}, '1', 'the session works after the failed COMMIT')
  or diag $r->{stderr};

# --- (d) query cancel reaches the shard -------------------------------------------

my $log_offset = -s $shard->logfile;
bg_send($bg, q{SELECT collegedb.run_on_shard('s', 'SELECT pg_sleep(30)')});
ok(poll_until($shard, $sleepers, '1', 10), 'the remote pg_sleep(30) is running on the shard');

my $canceled_pid = $front->safe_psql(
	'postgres', q{
	SELECT pid FROM pg_stat_activity
	 WHERE query LIKE '%run_on_shard(''s'', ''SELECT pg_sleep(30)'')%'
	   AND state = 'active' AND pid <> pg_backend_pid()});
is($canceled_pid, $front_pid, 'the front backend is found by its query text');
is($front->safe_psql('postgres', "SELECT pg_cancel_backend($canceled_pid)"),
	't', 'pg_cancel_backend on the front backend');

$r = bg_wait($bg);
like($r->{stderr}, qr/canceling statement due to user request/,
	'the front session gets "canceling statement due to user request"');
is($r->{sqlstate}, '57014', 'SQLSTATE 57014 (query_canceled)');
cmp_ok($r->{seconds}, '<', 10, 'the statement ends long before the remote sleep would');
ok(poll_until($shard, $sleepers, '0', 10), 'the remote pg_sleep(30) is gone from the shard');
ok($shard->log_contains(qr/ERROR:  canceling statement due to user request/, $log_offset),
	'the shard canceled the statement (the cancel reached it)');

$r = bg_query($bg, q{SELECT collegedb.run_on_shard('s', 'SELECT 1')});
is($r->{stdout}, '1', 'the session works after the cancel') or diag $r->{stderr};

# --- (e) statement_timeout on the front ------------------------------------------

$log_offset = -s $shard->logfile;
bg_query($bg, q{SET statement_timeout = '300ms'});
$r = bg_query($bg, q{SELECT collegedb.run_on_shard('s', 'SELECT pg_sleep(30)')});
like($r->{stderr}, qr/canceling statement due to statement timeout/,
	'statement_timeout interrupts a remote pg_sleep(30)');
is($r->{sqlstate}, '57014', 'SQLSTATE 57014');
cmp_ok($r->{seconds}, '<', 10, 'the statement ends soon after the timeout');
ok(poll_until($shard, $sleepers, '0', 10), 'no pg_sleep(30) left on the shard');
ok($shard->log_contains(qr/ERROR:  canceling statement due to user request/, $log_offset),
	'the shard canceled the statement');

# inside a transaction block: the block's earlier shard write goes with it
bg_query($bg, 'RESET statement_timeout');
bg_query($bg, 'BEGIN');
$r = bg_query($bg, q{SELECT collegedb.run_on_shard('s', 'INSERT INTO items VALUES ($1, $2)', 7, 'timed out')});
is($r->{stdout}, '1', 'a write inside BEGIN') or diag $r->{stderr};
bg_query($bg, q{SET LOCAL statement_timeout = '300ms'});
$r = bg_query($bg, q{SELECT collegedb.run_on_shard('s', 'SELECT pg_sleep(30)')});
is($r->{sqlstate}, '57014', 'statement_timeout interrupts a remote pg_sleep(30) inside BEGIN');
bg_query($bg, 'ROLLBACK');
ok(poll_until($shard, $sleepers, '0', 10), 'no pg_sleep(30) left on the shard');
is(shard_rows('id = 7'), '', "the block's earlier write is not on the shard");
ok( poll_until(
		$shard, q{SELECT count(*) FROM pg_stat_activity
		WHERE datname = 'app' AND state LIKE 'idle in transaction%'}, '0', 10),
	'no remote transaction is left open');

$r = bg_query($bg, q{SELECT collegedb.run_on_shard('s', 'SELECT 1')});
is($r->{stdout}, '1', 'the session works after the timeout') or diag $r->{stderr};

# --- (f) ALTER SERVER moves the connection ----------------------------------------

my $db_sql = q{SELECT j->>'db' FROM collegedb.all_on_shard('s', 'SELECT current_database() AS db') AS j};
is(bg_query($bg, $db_sql)->{stdout}, 'app', 'the shard connection is on database app');

# from another backend: the session's cached connection is invalidated
$front->safe_psql('postgres', q{ALTER SERVER s OPTIONS (SET dbname 'other')});
$r = bg_query($bg, $db_sql);
is($r->{stdout}, 'other', 'after ALTER SERVER in another session, the next statement reaches the new database')
  or diag $r->{stderr};

# and in the session itself
bg_query($bg, q{ALTER SERVER s OPTIONS (SET dbname 'app')});
$r = bg_query($bg, $db_sql);
is($r->{stdout}, 'app', 'after ALTER SERVER in the same session, too') or diag $r->{stderr};

# --- (g) remote transactions follow the front's -----------------------------------

my $idle_in_xact = q{SELECT count(*) FROM pg_stat_activity
	WHERE datname = 'app' AND state LIKE 'idle in transaction%'};

bg_query($bg, 'BEGIN');
$r = bg_query($bg, q{SELECT collegedb.run_on_shard('s', 'INSERT INTO items VALUES ($1, $2)', 10, 'rolled back')});
is($r->{stdout}, '1', 'insert inside BEGIN') or diag $r->{stderr};
is(shard_rows('id = 10'), '', 'the uncommitted row is not visible on the shard');
is($shard->safe_psql('postgres', $idle_in_xact), '1', 'the shard holds an open transaction');
bg_query($bg, 'ROLLBACK');
is(shard_rows('id = 10'), '', 'ROLLBACK: the row is absent');
ok(poll_until($shard, $idle_in_xact, '0', 10), 'ROLLBACK: the remote transaction is closed');

bg_query($bg, 'BEGIN');
bg_query($bg, q{INSERT INTO local_log VALUES ('committed')});
$r = bg_query($bg, q{SELECT collegedb.run_on_shard('s', 'INSERT INTO items VALUES ($1, $2)', 11, 'committed')});
is($r->{stdout}, '1', 'insert inside BEGIN, with a front write') or diag $r->{stderr};
$r = bg_query($bg, 'COMMIT');
is($r->{stderr}, '', 'COMMIT succeeds');
is(shard_rows('id = 11'), '11|committed', 'COMMIT: the row is on the shard');
is($front->safe_psql('postgres', 'SELECT note FROM local_log'),
	'committed', 'COMMIT: the front write is kept as well');
ok(poll_until($shard, $idle_in_xact, '0', 10), 'COMMIT: the remote transaction is closed');

bg_query($bg, 'BEGIN');
$r = bg_query($bg, q{SELECT collegedb.run_on_shard('s', 'INSERT INTO items VALUES ($1, $2)', 12, 'front failed')});
is($r->{stdout}, '1', 'insert inside BEGIN before a front error') or diag $r->{stderr};
$r = bg_query($bg, 'SELECT 1 / 0');
is($r->{sqlstate}, '22012', 'the front fails (division by zero)');
$r = bg_query($bg, 'COMMIT');
is(shard_rows('id = 12'), '', 'a front error after a shard write rolls the shard write back');
ok(poll_until($shard, $idle_in_xact, '0', 10), 'no remote transaction is left open');

is(shard_rows(), "1|one\n2|two\n3|three\n11|committed", 'the shard holds exactly the committed rows');

$bg->quit;
$front->stop;
$shard->stop;

done_testing();
