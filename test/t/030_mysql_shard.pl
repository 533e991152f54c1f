# 030_mysql_shard: a MariaDB shard (the run's server, this test's own database).
#
# DDL and typed parameters round-trip; query cancel and statement_timeout on the front
# stop a remote SLEEP(30) (MariaDB's processlist shows it gone); remote transactions
# follow the front's BEGIN / ROLLBACK / COMMIT; a wrong password gives 08001 naming
# the shard, without the password in the error or in the front's log.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use CollegeDB::TestHarness;

my $mdb   = start_mariadb();
my $db    = mysql_database($mdb);
my $front = front_node('front', extension => 1);

$front->safe_psql(
	'postgres', qq{
	CREATE SERVER m FOREIGN DATA WRAPPER collegedb
	  OPTIONS (@{[ mysql_server_options($mdb, dbname => $db) ]});
	CREATE USER MAPPING FOR PUBLIC SERVER m OPTIONS (@{[ mysql_user_mapping_options($mdb) ]});
	CREATE TABLE local_log (note text);
});

my $bg = bg_session($front);
my $front_pid = bg_query($bg, 'SELECT pg_backend_pid()')->{stdout};

# --- (a) add_shard, DDL, typed parameters -----------------------------------------

my $r = bg_query($bg, q{SELECT collegedb.add_shard('m')});
is($r->{stderr}, '', 'add_shard registers the MariaDB shard');
is( $front->safe_psql('postgres', q{SELECT dialect FROM collegedb.shards WHERE name = 'm'}),
	'mysql', 'collegedb.shards lists it as mysql');

$r = bg_query(
	$bg, q{SELECT shard, ok, error FROM collegedb.run_on_all(
	'CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(100), price DECIMAL(12,2),
	 ratio DOUBLE, flag BOOLEAN, born DATE, at DATETIME(6), raw LONGBLOB, doc JSON)
	 ENGINE=InnoDB')});
is($r->{stdout}, 'm|t|', 'run_on_all creates the table') or diag $r->{stderr};

$r = bg_query(
	$bg, q{SELECT collegedb.run_on_shard('m',
	'INSERT INTO items (id, name, price, ratio, flag, born, at, raw, doc)
	 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)',
	1, 'it''s "ünïcödé" \ ok'::text, 1234.56::numeric, 0.25::float8, true,
	'2024-02-29'::date, '2024-01-02 03:04:05.25'::timestamp, '\x00ff0a'::bytea,
	'{"k": [1, 2]}'::jsonb)});
is($r->{stdout}, '1', 'insert with parameters of several types') or diag $r->{stderr};
$r = bg_query(
	$bg, q{SELECT collegedb.run_on_shard('m',
	'INSERT INTO items (id, name, price, ratio, flag, born, at, raw, doc)
	 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)',
	2::int8, NULL::text, NULL::numeric, NULL::float8, false, NULL::date,
	NULL::timestamp, NULL::bytea, NULL::jsonb)});
is($r->{stdout}, '1', 'insert with NULL parameters') or diag $r->{stderr};

is( mysql_query(
		$mdb,
		'SELECT id, name, price, ratio, flag, born, at, HEX(raw), doc FROM items ORDER BY id',
		database => $db),
	qq(1\tit's "ünïcödé" \\\\ ok\t1234.56\t0.25\t1\t2024-02-29\t2024-01-02 03:04:05.250000\t00FF0A\t{"k": [1, 2]}\n)
	  . qq(2\tNULL\tNULL\tNULL\t0\tNULL\tNULL\tNULL\tNULL),
	'MariaDB holds the native values');

$r = bg_query($bg,
	q{SELECT j FROM collegedb.all_on_shard('m', 'SELECT id, name, price, ratio, born, at, raw FROM items ORDER BY id') AS j});
is( $r->{stdout},
	qq({"at": "2024-01-02 03:04:05.250000", "id": 1, "raw": "\\\\x00ff0a", "born": "2024-02-29", "name": "it's \\"ünïcödé\\" \\\\ ok", "price": 1234.56, "ratio": 0.25}\n)
	  . qq({"at": null, "id": 2, "raw": null, "born": null, "name": null, "price": null, "ratio": null}),
	'all_on_shard reads the values back as jsonb') or diag $r->{stderr};
$r = bg_query($bg,
	q{SELECT j->>'flag', j->'doc' FROM collegedb.all_on_shard('m', 'SELECT flag, doc FROM items WHERE id = $1', 1) AS j});
like($r->{stdout}, qr/^(1|true)\|/, 'a boolean parameter reads back as true')
  or diag $r->{stderr};
like($r->{stdout}, qr/\|"?\{\\?"k\\?": \[1, 2\]\}"?$/, 'a jsonb parameter reads back as its JSON text');

# --- (b) query cancel reaches MariaDB ---------------------------------------------

my $sleepers =
  q{SELECT COUNT(*) FROM information_schema.processlist WHERE info LIKE 'SELECT SLEEP(30)%'};

bg_send($bg, q{SELECT collegedb.run_on_shard('m', 'SELECT SLEEP(30)')});
ok(poll_mysql_until($mdb, $sleepers, '1', 10, database => $db),
	'SLEEP(30) is running on MariaDB');
my $canceled_pid = $front->safe_psql(
	'postgres', q{
	SELECT pid FROM pg_stat_activity
	 WHERE query LIKE '%run_on_shard(''m'', ''SELECT SLEEP(30)'')%'
	   AND state = 'active' AND pid <> pg_backend_pid()});
is($canceled_pid, $front_pid, 'the front backend is found by its query text');
is($front->safe_psql('postgres', "SELECT pg_cancel_backend($canceled_pid)"),
	't', 'pg_cancel_backend on the front backend');
$r = bg_wait($bg);
like($r->{stderr}, qr/canceling statement due to user request/,
	'the front session gets "canceling statement due to user request"');
is($r->{sqlstate}, '57014', 'SQLSTATE 57014');
cmp_ok($r->{seconds}, '<', 10, 'the statement ends long before SLEEP(30) would');
ok(poll_mysql_until($mdb, $sleepers, '0', 10, database => $db),
	'SLEEP(30) is gone from the processlist (KILL QUERY reached MariaDB)');

$r = bg_query($bg, q{SELECT collegedb.run_on_shard('m', 'SELECT 1')});
is($r->{stdout}, '1', 'the session works after the cancel') or diag $r->{stderr};

# --- (c) statement_timeout ---------------------------------------------------------

bg_query($bg, q{SET statement_timeout = '300ms'});
$r = bg_query($bg, q{SELECT collegedb.run_on_shard('m', 'SELECT SLEEP(30)')});
like($r->{stderr}, qr/canceling statement due to statement timeout/,
	'statement_timeout interrupts a remote SLEEP(30)');
is($r->{sqlstate}, '57014', 'SQLSTATE 57014');
cmp_ok($r->{seconds}, '<', 10, 'the statement ends soon after the timeout');
ok(poll_mysql_until($mdb, $sleepers, '0', 10, database => $db),
	'SLEEP(30) is gone from the processlist');

# a statement with a parameter runs prepared on MariaDB: statement_timeout kills it
# there too, and the session goes on
my $any_sleepers =
  q{SELECT COUNT(*) FROM information_schema.processlist WHERE info LIKE 'SELECT SLEEP(%'};
bg_query($bg, q{SET statement_timeout = '3s'});
bg_send($bg, q{SELECT collegedb.run_on_shard('m', 'SELECT SLEEP($1)', 30)});
ok(poll_mysql_until($mdb, $any_sleepers, '1', 10, database => $db),
	'the prepared SLEEP is running on MariaDB');
$r = bg_wait($bg);
is($r->{sqlstate}, '57014', 'statement_timeout interrupts the prepared SLEEP');
cmp_ok($r->{seconds}, '<', 10, 'the prepared statement ends soon after the timeout');
ok(poll_mysql_until($mdb, $any_sleepers, '0', 10, database => $db),
	'the prepared SLEEP is gone from the processlist');
bg_query($bg, 'RESET statement_timeout');
$r = bg_query($bg, q{SELECT r->>'v' FROM collegedb.all_on_shard('m', 'SELECT $1 + 1 AS v', 1) AS r});
is($r->{stdout}, '2', 'the session works after the prepared statement was cancelled')
  or diag $r->{stderr};

# inside a transaction block: the block's earlier shard write goes with it
bg_query($bg, 'RESET statement_timeout');
bg_query($bg, 'BEGIN');
$r = bg_query($bg, q{SELECT collegedb.run_on_shard('m', 'INSERT INTO items (id, name) VALUES ($1, $2)', 7, 'timed out')});
is($r->{stdout}, '1', 'a write inside BEGIN') or diag $r->{stderr};
bg_query($bg, q{SET LOCAL statement_timeout = '300ms'});
$r = bg_query($bg, q{SELECT collegedb.run_on_shard('m', 'SELECT SLEEP(30)')});
is($r->{sqlstate}, '57014', 'statement_timeout interrupts a remote SLEEP(30) inside BEGIN');
bg_query($bg, 'ROLLBACK');
ok(poll_mysql_until($mdb, $sleepers, '0', 10, database => $db),
	'SLEEP(30) is gone from the processlist');
is(mysql_query($mdb, 'SELECT COUNT(*) FROM items WHERE id = 7', database => $db),
	'0', "the block's earlier write is not on the shard");
# an open remote transaction would still hold the row lock of id 7
ok( poll_mysql_until(
		$mdb, q{SET SESSION innodb_lock_wait_timeout = 1;
		INSERT INTO items (id, name) VALUES (7, 'probe');
		DELETE FROM items WHERE id = 7;
		SELECT 'free'}, 'free', 10, database => $db),
	'no remote transaction is left open (its row lock is gone)');

$r = bg_query($bg, q{SELECT collegedb.run_on_shard('m', 'SELECT 1')});
is($r->{stdout}, '1', 'the session works after the timeout') or diag $r->{stderr};

# --- (d) transactions --------------------------------------------------------------

my $count_sql = 'SELECT COUNT(*) FROM items WHERE id = %d';

bg_query($bg, 'BEGIN');
$r = bg_query($bg, q{SELECT collegedb.run_on_shard('m', 'INSERT INTO items (id, name) VALUES ($1, $2)', 10, 'rolled back')});
is($r->{stdout}, '1', 'insert inside BEGIN') or diag $r->{stderr};
is(mysql_query($mdb, sprintf($count_sql, 10), database => $db),
	'0', 'the uncommitted row is not visible to another MariaDB session');
bg_query($bg, 'ROLLBACK');
is(mysql_query($mdb, sprintf($count_sql, 10), database => $db), '0', 'ROLLBACK undoes the insert');

bg_query($bg, 'BEGIN');
bg_query($bg, q{INSERT INTO local_log VALUES ('committed')});
$r = bg_query($bg, q{SELECT collegedb.run_on_shard('m', 'INSERT INTO items (id, name) VALUES ($1, $2)', 11, 'committed')});
is($r->{stdout}, '1', 'insert inside BEGIN, with a front write') or diag $r->{stderr};
$r = bg_query($bg, 'COMMIT');
is($r->{stderr}, '', 'COMMIT succeeds');
is(mysql_query($mdb, sprintf($count_sql, 11), database => $db), '1', 'COMMIT keeps the insert');
is($front->safe_psql('postgres', 'SELECT note FROM local_log'), 'committed',
	'COMMIT keeps the front write');

bg_query($bg, 'BEGIN');
$r = bg_query($bg, q{SELECT collegedb.run_on_shard('m', 'INSERT INTO items (id, name) VALUES ($1, $2)', 12, 'front failed')});
is($r->{stdout}, '1', 'insert inside BEGIN before a front error') or diag $r->{stderr};
is(bg_query($bg, 'SELECT 1 / 0')->{sqlstate}, '22012', 'the front fails');
bg_query($bg, 'COMMIT');
is(mysql_query($mdb, sprintf($count_sql, 12), database => $db),
	'0', 'a front error after a shard write rolls the shard write back');

# --- (e) wrong password ------------------------------------------------------------

my $secret = 'Wr0ng-s3cret-Pw';
$front->safe_psql(
	'postgres', qq{
	CREATE SERVER m_bad FOREIGN DATA WRAPPER collegedb
	  OPTIONS (@{[ mysql_server_options($mdb, dbname => $db) ]});
	CREATE USER MAPPING FOR PUBLIC SERVER m_bad
	  OPTIONS (user @{[ sql_literal($mdb->user) ]}, password @{[ sql_literal($secret) ]});
});
my $log_offset = -s $front->logfile;
$r = psql_outcome($front, q{SELECT collegedb.add_shard('m_bad')});
note "wrong password:\n$r->{stderr}";
is($r->{sqlstate}, '08001', 'a wrong password: SQLSTATE 08001') or diag $r->{stderr};
like($r->{stderr}, qr/ERROR:  08001: .*shard "m_bad"/, 'the message names the shard');
like($r->{stderr}, qr/Access denied/, 'the detail gives the server\'s reason');
unlike($r->{stderr}, qr/\Q$secret\E/, 'the password is not in the error');
my $log = slurp_file($front->logfile, $log_offset);
like($log, qr/shard "m_bad"/, 'the front log has the error');
unlike($log, qr/\Q$secret\E/, 'the password is not in the front log');

$bg->quit;
$front->stop;

done_testing();
