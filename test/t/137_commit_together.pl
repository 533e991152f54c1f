# 137_commit_together: the commits (and a fan-out's savepoint releases) of a front
# transaction's remote transactions go out to every shard before any is awaited.
#
# Three PostgreSQL shards are databases of one cluster that logs every statement with its
# database.  A fan-out in a transaction block gives each shard BEGIN, SAVEPOINT, the
# query, RELEASE and one COMMIT.  That the COMMITs are sent together is shown without
# timing: each shard's commit runs a deferred trigger that waits for a lock the test
# holds on that shard, and all three shards are seen waiting in their COMMIT at once
# (one after another, only the first could ever be).  A commit that fails (a deferred
# unique constraint) aborts the front with the shard's SQLSTATE, and a lost connection
# fails the commit; either way every shard's answer was read (the same session's next
# fan-out works on every shard).  MariaDB (asynchronous, XA) and SQLite (run while the
# others are in flight) participants commit correctly among them.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use CollegeDB::TestHarness;

my $front = front_node('front', extension => 1);
my $shard = pg_shard_node('shard',
	conf => { log_statement => 'all', log_line_prefix => '%m [%p] db=%d app=%a ' });
my @dbs = map { "app$_" } 1 .. 3;
add_pg_shards($front, $shard, map { ("s$_", $dbs[$_ - 1]) } 1 .. 3);

# gate_touch() is a read to collegedb (a SELECT) that leaves a row whose deferred
# trigger, at the shard's COMMIT, waits for advisory lock 17 (held by the test)
for my $db (@dbs)
{
	$shard->safe_psql(
		$db, q{
		CREATE TABLE gate_log (n int);
		CREATE FUNCTION gate_wait() RETURNS trigger LANGUAGE plpgsql AS
		  $$ BEGIN PERFORM pg_advisory_xact_lock_shared(17); RETURN NULL; END $$;
		CREATE CONSTRAINT TRIGGER gate AFTER INSERT ON gate_log
		  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION gate_wait();
		CREATE FUNCTION gate_touch() RETURNS int LANGUAGE sql AS
		  'INSERT INTO gate_log VALUES (1) RETURNING n';
	});
}

$front->safe_psql(
	'postgres', qq{
	SELECT collegedb.run_on_all('CREATE TABLE items (id text PRIMARY KEY, v text)');
	SELECT collegedb.set_mapping('k1', 's2');
	CREATE TABLE front_log (n int);
});

# The statements collegedb's connections sent since log offset $from, per database.
sub sent_since
{
	my ($from) = @_;
	my %sent = map { $_ => [] } @dbs;
	for my $line (split /\n/, slurp_file($shard->logfile, $from))
	{
		next unless $line =~ /db=(\S+) app=collegedb/;
		my $db = $1;
		next unless $line =~ /LOG:\s+(?:execute [^:]+|statement): (.*)$/;
		push @{ $sent{$db} }, $1 unless $1 =~ /^SET datestyle/;
	}
	return \%sent;
}

my $bg = bg_session($front);
my $fan = q{SELECT count(*) FROM collegedb.fanout('SELECT count(*) AS n FROM items') WHERE error IS NULL};
is(bg_query($bg, $fan)->{stdout}, '3', 'a fan-out read reaches the three shards');

# --- what each shard receives ---------------------------------------------------------

my $from = -s $shard->logfile;
my $r = bg_query($bg, "BEGIN; $fan; COMMIT;");
is($r->{stderr}, '', 'a fan-out in a transaction block commits');
my $sent = sent_since($from);
for my $db (@dbs)
{
	is_deeply(
		$sent->{$db},
		[ 'BEGIN', 'SAVEPOINT s2', 'SELECT count(*) AS n FROM items', 'RELEASE SAVEPOINT s2', 'COMMIT' ],
		"$db: BEGIN, SAVEPOINT and the query, then RELEASE, then one COMMIT");
}

$from = -s $shard->logfile;
bg_query($bg, $fan);
$sent = sent_since($from);
is_deeply([ map { scalar @{ $sent->{$_} } } @dbs ], [ 1, 1, 1 ],
	'in autocommit each shard gets the query alone, nothing to commit');

# --- the COMMITs are all sent before any is awaited -----------------------------------

my @holders = map { bg_session($shard, dbname => $_) } @dbs;
bg_query($_, 'SELECT pg_advisory_lock(17)') for @holders;
bg_send($bg,
	q{BEGIN; SELECT count(*) FROM collegedb.fanout('SELECT gate_touch() AS n') WHERE error IS NULL; COMMIT});
ok( poll_until(
		$shard,
		q{SELECT count(DISTINCT datname) FROM pg_stat_activity
		   WHERE application_name = 'collegedb' AND query = 'COMMIT' AND wait_event_type = 'Lock'},
		'3', 60),
	'the three shards wait in their COMMIT at the same time');
is($front->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'COMMIT%' AND state = 'active'}),
	'1', 'the front transaction is still committing');
bg_query($_, 'SELECT pg_advisory_unlock(17)') for @holders;
$r = bg_wait($bg);
is($r->{stderr}, '', 'once the locks are released the front commits');
is(join(',', map { $shard->safe_psql($_, 'SELECT count(*) FROM gate_log') } @dbs),
	'1,1,1', 'each shard committed its part');

# statement_timeout ends a commit that waits: every shard's commit is cancelled
bg_query($_, 'SELECT pg_advisory_lock(17)') for @holders;
$r = bg_query($bg,
	q{SET statement_timeout = '2s'; BEGIN; SELECT count(*) FROM collegedb.fanout('SELECT gate_touch() AS n'); COMMIT;});
is($r->{sqlstate}, '57014', 'a commit still waiting at statement_timeout fails with 57014');
like($r->{stderr}, qr/could not commit on shard/, '... as the commit of a shard');
ok( poll_until(
		$shard,
		q{SELECT count(*) FROM pg_stat_activity
		   WHERE application_name = 'collegedb' AND query = 'COMMIT' AND state = 'active'},
		'0', 60),
	'... and no shard is left committing');
bg_query($_, 'SELECT pg_advisory_unlock(17)') for @holders;
$r = bg_query($bg, "RESET statement_timeout; $fan;");
is($r->{stdout}, '3', 'the session reconnects and reads from every shard');
$_->quit for @holders;

# --- a failing commit -------------------------------------------------------------------

# a deferred unique constraint on s2 fails at COMMIT, not at the INSERT
$shard->safe_psql('app2', q{
	ALTER TABLE items ADD CONSTRAINT items_v UNIQUE (v) DEFERRABLE INITIALLY DEFERRED;
	INSERT INTO items VALUES ('k0', 'taken');
});
$r = bg_query(
	$bg, qq{BEGIN;
	INSERT INTO front_log VALUES (1);
	SELECT collegedb.run('k1', 'INSERT INTO items VALUES (\$1, \$2)', 'k1', 'taken');
	$fan;
	COMMIT;});
is($r->{sqlstate}, '23505', "a commit failing on one shard aborts the front with the shard's SQLSTATE");
like($r->{stderr}, qr/s2/, '... naming the shard');
is($front->safe_psql('postgres', 'SELECT count(*) FROM front_log'), '0',
	"... and the front's own write is rolled back");
is($shard->safe_psql('app2', q{SELECT count(*) FROM items WHERE id = 'k1'}), '0',
	'... as is the write on the failing shard');
is(bg_query($bg, "SELECT count(*) FROM collegedb.connections() WHERE in_transaction")->{stdout},
	'0', 'no remote transaction is left open');
is(bg_query($bg, $fan)->{stdout}, '3', 'the next fan-out of the session works on every shard');
is(bg_query($bg, "BEGIN; $fan; COMMIT;")->{stderr}, '', '... in a transaction block too');

# a read whose shard fails its COMMIT (a function that writes behind a SELECT) while one
# other shard wrote: the readers commit before the writer, so the write is rolled back
$shard->safe_psql('app3', q{
	CREATE TABLE dups (v int UNIQUE DEFERRABLE INITIALLY DEFERRED);
	INSERT INTO dups VALUES (1);
	CREATE FUNCTION dup_touch() RETURNS int LANGUAGE sql AS 'INSERT INTO dups VALUES (1) RETURNING v';
});
$r = bg_query(
	$bg, q{BEGIN;
	SELECT collegedb.run('k1', 'INSERT INTO items VALUES ($1, $2)', 'k1', 'fresh');
	SELECT collegedb.run_on_shard('s3', 'SELECT dup_touch()');
	COMMIT;});
is($r->{sqlstate}, '23505', "a reader's failing commit aborts the front with the shard's SQLSTATE");
like($r->{stderr}, qr/s3/, '... naming the reader');
is($shard->safe_psql('app2', q{SELECT count(*) FROM items WHERE id = 'k1'}), '0',
	'... before the one writer committed: its write is rolled back');
is(bg_query($bg, "SELECT count(*) FROM collegedb.connections() WHERE in_transaction")->{stdout},
	'0', 'no remote transaction is left open');

# --- a connection lost before the commit -------------------------------------------------

$r = bg_query($bg, "BEGIN; $fan;");
is($r->{stdout}, '3', 'a transaction block reads from the three shards');
$shard->safe_psql('postgres', q{
	SELECT pg_terminate_backend(pid) FROM pg_stat_activity
	 WHERE application_name = 'collegedb' AND datname = 'app3'});
ok(poll_until($shard,
		q{SELECT count(*) FROM pg_stat_activity WHERE application_name = 'collegedb' AND datname = 'app3'}, '0', 60),
	"s3's backend is gone");
$r = bg_query($bg, 'COMMIT;');
like($r->{sqlstate} // '', qr/^(08|57P01)/, 'the commit fails with a connection error');
like($r->{stderr}, qr/s3/, '... naming the shard whose connection was lost');
is(bg_query($bg, "SELECT count(*) FROM collegedb.connections() WHERE in_transaction")->{stdout},
	'0', 'no remote transaction is left open');
is(bg_query($bg, $fan)->{stdout}, '3', 'the next fan-out reconnects and works on every shard');

# --- MariaDB and SQLite participants among them ------------------------------------------

my $mdb = start_mariadb();
my $mdbname = mysql_database($mdb);
my $sqlite = sqlite_dir() . '/q.db';
sqlite_exec($sqlite, 'SELECT 1');
$front->safe_psql(
	'postgres', qq{
	CREATE SERVER m FOREIGN DATA WRAPPER collegedb
	  OPTIONS (@{[ mysql_server_options($mdb, dbname => $mdbname) ]});
	CREATE USER MAPPING FOR PUBLIC SERVER m OPTIONS (@{[ mysql_user_mapping_options($mdb) ]});
	CREATE SERVER q FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ sqlite_server_options($sqlite) ]});
	SELECT collegedb.add_shard('m');
	SELECT collegedb.add_shard('q');
	SELECT collegedb.run_on_shard('m', 'CREATE TABLE items (id varchar(20) PRIMARY KEY, v text)');
	SELECT collegedb.run_on_shard('q', 'CREATE TABLE items (id text PRIMARY KEY, v text)');
});
# one writer (SQLite, then MariaDB) and readers everywhere: the readers commit at once, then the writer
my %read_back = (
	q => sub { sqlite_exec($sqlite, q{SELECT v FROM items WHERE id = 'w'}) },
	m => sub { mysql_query($mdb, q{SELECT v FROM items WHERE id = 'w'}, database => $mdbname) });
for my $writer (qw(q m))
{
	$r = bg_query(
		$bg, qq{BEGIN;
		SELECT collegedb.run_on_shard('$writer', 'INSERT INTO items VALUES (''w'', ''one'')');
		$fan;
		COMMIT;});
	is($r->{stderr}, '', "a transaction over PostgreSQL, MariaDB and SQLite shards that wrote on $writer commits");
	like($r->{stdout}, qr/^5$/m, '... its fan-out read every shard');
	is($read_back{$writer}->(), 'one', "... and the row written on $writer is committed");
}
is(bg_query($bg, "SELECT count(*) FROM collegedb.connections() WHERE in_transaction")->{stdout},
	'0', 'no remote transaction is left open');

$bg->quit;
done_testing();
