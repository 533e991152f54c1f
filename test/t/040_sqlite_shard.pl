# 040_sqlite_shard: SQLite shards, with other processes holding their locks.
#
# Remote transactions on two SQLite files follow the front's BEGIN / ROLLBACK /
# COMMIT; a write blocked by another process's lock fails with 55P03 once the shard's
# busy_timeout passes, and a long lock wait gives way to statement_timeout and
# pg_cancel_backend; once the lock goes the write succeeds; a runaway recursive query
# is stopped by statement_timeout and by a cancel.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use CollegeDB::TestHarness;

my $dir   = sqlite_dir();
my $file1 = "$dir/l1.db";
my $file2 = "$dir/l2.db";
my $front = front_node('front', extension => 1);

$front->safe_psql(
	'postgres', qq{
	CREATE SERVER l1 FOREIGN DATA WRAPPER collegedb
	  OPTIONS (@{[ sqlite_server_options($file1) ]}, busy_timeout '500');
	CREATE SERVER l2 FOREIGN DATA WRAPPER collegedb
	  OPTIONS (@{[ sqlite_server_options($file2) ]});
	SELECT collegedb.add_shard('l1');
	SELECT collegedb.add_shard('l2');
	CREATE TABLE local_log (note text);
});

my $bg = bg_session($front);
my $front_pid = bg_query($bg, 'SELECT pg_backend_pid()')->{stdout};

# --- (a) transactions on two SQLite shards ---------------------------------------

my $r = bg_query($bg,
	q{SELECT shard, ok, error FROM collegedb.run_on_all('CREATE TABLE items (id INTEGER PRIMARY KEY, v TEXT)') ORDER BY shard});
is($r->{stdout}, "l1|t|\nl2|t|", 'run_on_all creates the table on both shards')
  or diag $r->{stderr};

# id = $id on a file, read by the sqlite3 CLI (another process)
sub row_of
{
	my ($file, $id) = @_;
	return sqlite_exec($file, "SELECT id, v FROM items WHERE id = $id");
}

my $insert = q{SELECT collegedb.run_on_shard('%s', 'INSERT INTO items VALUES ($1, $2)', %d, '%s')};

bg_query($bg, 'BEGIN');
$r = bg_query($bg, sprintf($insert, 'l1', 1, 'rolled back'));
is($r->{stdout}, '1', 'insert on l1 inside BEGIN') or diag $r->{stderr};
is(row_of($file1, 1), '', 'the uncommitted row is not visible to another process');
bg_query($bg, 'ROLLBACK');
is(row_of($file1, 1), '', 'ROLLBACK: the row is absent on l1');
is(row_of($file2, 1), '', 'ROLLBACK: the row is absent on l2');

# two SQLite shards cannot both take part in one two-phase commit (neither can
# prepare): the write on the second is refused before it is sent, and the
# transaction commits nothing anywhere
bg_query($bg, 'BEGIN');
bg_query($bg, q{INSERT INTO local_log VALUES ('refused')});
bg_query($bg, sprintf($insert, 'l1', 2, 'refused'));
$r = bg_query($bg, sprintf($insert, 'l2', 2, 'refused'));
is($r->{sqlstate}, 'CD009', 'a write on a second SQLite shard is refused under 2pc');
like($r->{stderr}, qr/cannot write on shard "l2" in a transaction that wrote on shard "l1"/,
	'... naming both shards');
$r = bg_query($bg, 'COMMIT');
is(row_of($file1, 2), '', 'refused COMMIT: nothing on l1');
is(row_of($file2, 2), '', 'refused COMMIT: nothing on l2');

# the one-after-another commit takes them
bg_query($bg, 'BEGIN');
bg_query($bg, q{SET LOCAL collegedb.commit_protocol = 'sequential'});
bg_query($bg, q{INSERT INTO local_log VALUES ('committed')});
bg_query($bg, sprintf($insert, 'l1', 2, 'committed'));
bg_query($bg, sprintf($insert, 'l2', 2, 'committed'));
$r = bg_query($bg, 'COMMIT');
is($r->{stderr}, '', 'COMMIT succeeds');
is(row_of($file1, 2), '2|committed', 'COMMIT: the row is on l1');
is(row_of($file2, 2), '2|committed', 'COMMIT: the row is on l2');
is($front->safe_psql('postgres', 'SELECT note FROM local_log'),
	'committed', 'COMMIT: the front write is kept');

bg_query($bg, 'BEGIN');
bg_query($bg, sprintf($insert, 'l1', 3, 'front failed'));
is(bg_query($bg, 'SELECT 1 / 0')->{sqlstate}, '22012', 'the front fails after a shard write');
bg_query($bg, 'COMMIT');
is(row_of($file1, 3), '', 'the front error rolled the shard write back');

# --- (b) another process holds the write lock ------------------------------------

my $lock = sqlite_hold_lock($file1);

# busy_timeout '500': the write gives up with 55P03 soon after half a second
$r = psql_outcome($front, sprintf($insert, 'l1', 4, 'busy'));
is($r->{sqlstate}, '55P03', 'a write blocked by a lock fails with 55P03 (lock_not_available)')
  or diag $r->{stderr};
like($r->{stderr}, qr/shard "l1"/, 'the error names the shard');
like($r->{stderr}, qr/^HINT:  .*busy_timeout/m, 'the hint mentions busy_timeout');
cmp_ok($r->{seconds}, '>=', 0.45, 'it waited for the busy_timeout');
cmp_ok($r->{seconds}, '<', 5, 'and not much longer');

# reading needs no write lock
$r = bg_query($bg, q{SELECT count(*) FROM collegedb.all_on_shard('l1', 'SELECT id FROM items')});
is($r->{stdout}, '1', 'a read works while another process holds the write lock')
  or diag $r->{stderr};

# busy_timeout '60000' (through ALTER SERVER, which replaces the session's
# connection): statement_timeout ends the wait
bg_query($bg, q{ALTER SERVER l1 OPTIONS (SET busy_timeout '60000')});
bg_query($bg, q{SET statement_timeout = '500ms'});
$r = bg_query($bg, sprintf($insert, 'l1', 5, 'timeout'));
like($r->{stderr}, qr/canceling statement due to statement timeout/,
	'statement_timeout interrupts a write waiting for the lock (busy_timeout 60 s)');
is($r->{sqlstate}, '57014', 'SQLSTATE 57014');
cmp_ok($r->{seconds}, '<', 5, 'the wait ends soon after the timeout');
bg_query($bg, 'RESET statement_timeout');

# ... and so does pg_cancel_backend
bg_send($bg, sprintf($insert, 'l1', 6, 'cancel'));
ok( poll_until(
		$front, qq{SELECT count(*) FROM pg_stat_activity
		 WHERE pid = $front_pid AND state = 'active'
		   AND query LIKE '%run_on_shard(''l1''%'
		   AND clock_timestamp() - query_start > interval '200 ms'},
		'1', 10),
	'the write waits for the lock');
is($front->safe_psql('postgres', "SELECT pg_cancel_backend($front_pid)"),
	't', 'pg_cancel_backend on the waiting backend');
$r = bg_wait($bg);
like($r->{stderr}, qr/canceling statement due to user request/,
	'the waiting write is canceled');
is($r->{sqlstate}, '57014', 'SQLSTATE 57014');
cmp_ok($r->{seconds}, '<', 10, 'the wait ends long before the busy_timeout');

$lock->release;
$r = bg_query($bg, sprintf($insert, 'l1', 7, 'after the lock'));
is($r->{stdout}, '1', 'the write succeeds once the lock is released') or diag $r->{stderr};
is(row_of($file1, 7), '7|after the lock', 'the row is in the file');
is(sqlite_exec($file1, 'SELECT count(*) FROM items WHERE id IN (4, 5, 6)'),
	'0', 'nothing of the failed writes landed');

# --- (c) a runaway recursive query -----------------------------------------------

my $runaway = q{SELECT * FROM collegedb.all_on_shard('l2',
	'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c')};

bg_query($bg, q{SET statement_timeout = '500ms'});
$r = bg_query($bg, $runaway);
like($r->{stderr}, qr/canceling statement due to statement timeout/,
	'statement_timeout stops a runaway recursive query');
is($r->{sqlstate}, '57014', 'SQLSTATE 57014');
cmp_ok($r->{seconds}, '<', 5, 'it stops soon after the timeout');
bg_query($bg, 'RESET statement_timeout');

bg_send($bg, $runaway);
ok( poll_until(
		$front, qq{SELECT count(*) FROM pg_stat_activity
		 WHERE pid = $front_pid AND state = 'active' AND query LIKE '%WITH RECURSIVE%'
		   AND clock_timestamp() - query_start > interval '200 ms'},
		'1', 10),
	'the runaway query is running');
$front->safe_psql('postgres', "SELECT pg_cancel_backend($front_pid)");
$r = bg_wait($bg);
like($r->{stderr}, qr/canceling statement due to user request/,
	'pg_cancel_backend stops a runaway recursive query');
cmp_ok($r->{seconds}, '<', 10, 'it stops soon after the cancel');

$r = bg_query($bg, q{SELECT count(*) FROM collegedb.all_on_shard('l2', 'SELECT id FROM items')});
is($r->{stdout}, '1', 'the session still works with the shard') or diag $r->{stderr};

$bg->quit;
$front->stop;

done_testing();
