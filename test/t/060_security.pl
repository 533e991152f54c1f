# 060_security: shard connections use the calling role's user mapping, on a
# PostgreSQL shard that asks for passwords (SCRAM) except from its own superuser
# over the Unix socket (trust).
#
# Two application roles with different mappings reach the shard as different shard
# users (current_user on the shard, and the shard's pg_stat_activity); a mapping
# without a password is refused before connecting; a wrong password fails on the
# shard with an error that does not contain it; a non-superuser whose mapping names
# the shard's superuser reaches the trust line, and is refused because the shard
# asked for no password, unless a superuser set password_required 'false'; the
# front's superuser is not bound by the rule.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use CollegeDB::TestHarness;

my $front = front_node('front', extension => 1);
my $shard = pg_shard_node('shard');

$shard->safe_psql(
	'postgres', q{
	CREATE ROLE alice LOGIN PASSWORD 'alice-pw-1';
	CREATE ROLE bob LOGIN PASSWORD 'bob-pw-2';
	CREATE ROLE carol LOGIN PASSWORD 'carol-pw-3';
	CREATE DATABASE app;
});
$shard->safe_psql(
	'app', q{
	CREATE TABLE notes (id text PRIMARY KEY, by_user text DEFAULT current_user);
	GRANT SELECT, INSERT ON notes TO alice, bob, carol;
});
# the shard's superuser (the OS user) keeps trust over the socket; everyone else
# must give a password
my $os_user = $shard->safe_psql('postgres', 'SELECT current_user');
open my $hba, '>', $shard->data_dir . '/pg_hba.conf' or die "pg_hba.conf: $!";
print $hba "local all $os_user trust\n";
print $hba "local all all scram-sha-256\n";
print $hba "host all all 127.0.0.1/32 scram-sha-256\n";
close $hba;
$shard->reload;

my $server = pg_server_options($shard, dbname => 'app');
$front->safe_psql(
	'postgres', qq{
	CREATE SERVER s FOREIGN DATA WRAPPER collegedb OPTIONS ($server);
	CREATE USER MAPPING FOR CURRENT_USER SERVER s OPTIONS (user '$os_user');
	SELECT collegedb.add_shard('s');
	CREATE ROLE app_alice;
	CREATE ROLE app_bob;
	CREATE ROLE app_nopw;
	CREATE ROLE app_wrong;
	CREATE ROLE app_sneaky;
	CREATE USER MAPPING FOR app_alice SERVER s OPTIONS (user 'alice', password 'alice-pw-1');
	CREATE USER MAPPING FOR app_bob SERVER s OPTIONS (user 'bob', password 'bob-pw-2');
	CREATE USER MAPPING FOR app_nopw SERVER s OPTIONS (user 'carol');
	CREATE USER MAPPING FOR app_wrong SERVER s OPTIONS (user 'alice', password 'not-the-pw-9');
	CREATE USER MAPPING FOR app_sneaky SERVER s OPTIONS (user '$os_user', password 'anything-8');
	SELECT collegedb.grant_routing(r::regrole)
	  FROM unnest(ARRAY['app_alice', 'app_bob', 'app_nopw', 'app_wrong', 'app_sneaky']) AS r;
});

# routed statements look for tombstones: the shard users that route read them
$shard->safe_psql('app', 'GRANT SELECT ON collegedb_tombstones TO alice, bob, carol');

my $whoami = q{SELECT collegedb.first('k', 'SELECT current_user AS u')->>'u'};

# --- two roles, two shard users --------------------------------------------------

my $bg = bg_session($front);
bg_query($bg, 'SET ROLE app_alice');
my $r = bg_query($bg, $whoami);
is($r->{stdout}, 'alice', 'app_alice reaches the shard as alice, with her password')
  or diag $r->{stderr};
$r = bg_query($bg,
	q{SELECT collegedb.run('k1', 'INSERT INTO notes (id) VALUES ($1)', 'k1')});
is($r->{stdout}, '1', 'app_alice writes through routing') or diag $r->{stderr};
bg_query($bg, 'RESET ROLE');
bg_query($bg, 'SET ROLE app_bob');
$r = bg_query($bg, $whoami);
is($r->{stdout}, 'bob', 'app_bob reaches the same shard as bob') or diag $r->{stderr};
$r = bg_query($bg,
	q{SELECT collegedb.run('k2', 'INSERT INTO notes (id) VALUES ($1)', 'k2')});
is($r->{stdout}, '1', 'app_bob writes through routing') or diag $r->{stderr};
bg_query($bg, 'RESET ROLE');

is( $shard->safe_psql('app', 'SELECT id, by_user FROM notes ORDER BY id'),
	"k1|alice\nk2|bob",
	'each write was made by its role\'s shard user');
is( $shard->safe_psql(
		'postgres',
		q{SELECT string_agg(usename, ',' ORDER BY usename) FROM pg_stat_activity
		   WHERE application_name = 'collegedb' AND datname = 'app'}),
	'alice,bob',
	'the front session holds one connection per role, as alice and as bob');
$r = bg_query($bg,
	q{SELECT string_agg(user_name, ',' ORDER BY user_name) FROM collegedb.connections()});
is($r->{stdout}, 'app_alice,app_bob', 'collegedb.connections() lists them by local role');
$bg->quit;

# --- the password rule ----------------------------------------------------------

# Runs $sql as $role in a new session: its outcome.
sub as_role
{
	my ($role, $sql) = @_;
	return psql_outcome($front, "SET ROLE $role;\n$sql");
}

$r = as_role('app_nopw', $whoami);
is($r->{sqlstate}, '2F003', 'a mapping without a password is refused');
like($r->{stderr}, qr/password is required/, '... saying a password is required');
unlike($r->{stderr}, qr/carol-pw/, '... and nothing else');

$r = as_role('app_wrong', $whoami);
is($r->{sqlstate}, '08001', 'a wrong password fails on the shard (class 08)');
like($r->{stderr}, qr/password authentication failed for user "alice"/,
	'... with the shard\'s message');
unlike($r->{stderr}, qr/not-the-pw/, '... which does not contain the password');

$r = as_role('app_sneaky', $whoami);
is($r->{sqlstate}, '2F003',
	'a non-superuser reaching the shard\'s trust line is refused: no password was asked');
like($r->{stderr}, qr/Non-superuser cannot connect if the server does not request a password/,
	'... with postgres_fdw\'s detail');
unlike($r->{stderr}, qr/anything-8/, '... and without the password');

$r = psql_outcome($front, $whoami);
is($r->{stdout}, $os_user, 'the front\'s superuser is not bound by the rule');

# only a superuser may lift it, and lifting it does not skip the shard's checks
$front->safe_psql('postgres', 'GRANT USAGE ON FOREIGN SERVER s TO app_nopw');
$r = as_role('app_nopw',
	q{ALTER USER MAPPING FOR CURRENT_USER SERVER s OPTIONS (ADD password_required 'false')});
is($r->{sqlstate}, '42501', 'a non-superuser cannot set password_required false');
$front->safe_psql(
	'postgres', q{
	ALTER USER MAPPING FOR app_nopw SERVER s OPTIONS (ADD password_required 'false');
	ALTER USER MAPPING FOR app_sneaky SERVER s OPTIONS (ADD password_required 'false');
});
$r = as_role('app_nopw', $whoami);
is($r->{sqlstate}, '08001',
	'without the rule, a shard that asks for a password still refuses a mapping without one');
$r = as_role('app_sneaky', $whoami);
is($r->{stdout}, $os_user,
	'password_required false, set by a superuser, lets a role through the trust line')
  or diag $r->{stderr};

# --- the server's environment and files are never a non-superuser's credentials ----

# The front now runs with alice's password in PGPASSWORD and in a password file
# (PGPASSFILE), and with the MariaDB user's in MYSQL_PWD: libpq and libmariadb
# would use them for a mapping whose password is empty or missing.
my $passfile = PostgreSQL::Test::Utils::tempdir() . '/pgpass';
open my $pf, '>', $passfile or die "pgpass: $!";
print $pf "*:*:*:alice:alice-pw-1\n*:*:*:$os_user:alice-pw-1\n";
close $pf;
chmod 0600, $passfile;
{
	local $ENV{PGPASSWORD} = 'alice-pw-1';
	local $ENV{PGPASSFILE} = $passfile;
	local $ENV{MYSQL_PWD}  = $ENV{COLLEGEDB_TEST_MYSQL_PASSWORD} // 'collegedb';
	$front->restart;
}
my $mdb = start_mariadb();
my $my_server = mysql_server_options($mdb);
my $my_user = $mdb->user;
$front->safe_psql(
	'postgres', qq{
	CREATE ROLE app_empty;
	CREATE ROLE app_none;
	CREATE ROLE app_envwrong;
	CREATE USER MAPPING FOR app_empty SERVER s OPTIONS (user 'alice', password '');
	CREATE USER MAPPING FOR app_none SERVER s OPTIONS (user 'alice');
	CREATE USER MAPPING FOR app_envwrong SERVER s OPTIONS (user 'alice', password 'wrong-pw-7');
	CREATE SERVER my FOREIGN DATA WRAPPER collegedb OPTIONS ($my_server);
	CREATE SERVER my_socket FOREIGN DATA WRAPPER collegedb
	  OPTIONS (dialect 'mysql', socket '@{[ $mdb->socket // '/nonexistent' ]}', dbname '@{[ $mdb->database ]}');
	CREATE USER MAPPING FOR CURRENT_USER SERVER my OPTIONS (@{[ mysql_user_mapping_options($mdb) ]});
	CREATE USER MAPPING FOR CURRENT_USER SERVER my_socket OPTIONS (@{[ mysql_user_mapping_options($mdb) ]});
	SELECT collegedb.add_shard('my'), collegedb.add_shard('my_socket');
	SELECT collegedb.set_mapping('k', 's'), collegedb.set_mapping('mk', 'my'),
	       collegedb.set_mapping('sk', 'my_socket');
	CREATE USER MAPPING FOR app_empty SERVER my OPTIONS (user '$my_user', password '');
	CREATE USER MAPPING FOR app_none SERVER my OPTIONS (user '$my_user');
	CREATE USER MAPPING FOR app_alice SERVER my OPTIONS (@{[ mysql_user_mapping_options($mdb) ]});
	CREATE USER MAPPING FOR app_alice SERVER my_socket OPTIONS (@{[ mysql_user_mapping_options($mdb) ]});
	CREATE USER MAPPING FOR app_nopw SERVER my OPTIONS (user '$my_user', password '', password_required 'false');
	SELECT collegedb.grant_routing(r::regrole)
	  FROM unnest(ARRAY['app_empty', 'app_none', 'app_envwrong']) AS r;
});

$r = as_role('app_empty', $whoami);
is($r->{sqlstate}, '2F003', 'PostgreSQL: an empty password counts as none, PGPASSWORD is not used');
like($r->{stderr}, qr/non-empty password/, '... the error says so');
$r = as_role('app_none', $whoami);
is($r->{sqlstate}, '2F003', 'PostgreSQL: a missing password is refused, the password file is not used');
$r = as_role('app_envwrong', $whoami);
is($r->{sqlstate}, '08001',
	'PostgreSQL: a wrong password fails, though PGPASSWORD and the password file hold the right one');
like($r->{stderr}, qr/password authentication failed for user "alice"/, '... on the shard');
$r = as_role('app_alice', $whoami);
is($r->{stdout}, 'alice', 'the mapping\'s own password still works') or diag $r->{stderr};

my $mywho = q{SELECT collegedb.first('mk', 'SELECT 1 AS one')->>'one'};
$r = as_role('app_empty', $mywho);
is($r->{sqlstate}, '2F003', 'MySQL: an empty password counts as none, MYSQL_PWD is not used');
$r = as_role('app_none', $mywho);
is($r->{sqlstate}, '2F003', 'MySQL: a missing password is refused');
$r = as_role('app_nopw', $mywho);
is($r->{sqlstate}, '08001',
	'MySQL: with password_required false an empty password is sent as empty, never MYSQL_PWD');
like($r->{stderr}, qr/Access denied/, '... and the server refuses it');
$r = as_role('app_alice', $mywho);
is($r->{stdout}, '1', 'MySQL: the mapping\'s password works over TCP') or diag $r->{stderr};
SKIP:
{
	skip 'no MariaDB socket', 2 unless $mdb->socket;
	$r = as_role('app_alice', q{SELECT collegedb.first('sk', 'SELECT 1 AS one')->>'one'});
	is($r->{sqlstate}, '2F003',
		'MySQL: a non-superuser may not connect over a Unix socket (unix_socket authentication)');
	like($r->{stderr}, qr/Unix socket/, '... the error says why');
}
is($front->safe_psql('postgres', q{SELECT collegedb.first('sk', 'SELECT 1 AS one')->>'one'}),
	'1', 'a superuser may');

done_testing();
