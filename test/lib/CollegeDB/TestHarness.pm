# CollegeDB::TestHarness: helpers for collegedb's TAP tests (test/t/*.pl).
#
# Starts front nodes (collegedb preloaded) and plain Postgres shard clusters on top of
# PostgreSQL::Test::Cluster, hands out the run's MariaDB server and per-test databases
# on it, SQLite dirs, files and write locks, bounded polling, and psql sessions (one-off
# or in the background) whose errors come back with their SQLSTATE.  It does not start MariaDB (the
# tests run as postgres; scripts/test starts the server as root) and it does not create
# the extension or any collegedb server unless asked.

=pod

=head1 NAME

CollegeDB::TestHarness - start a collegedb front and its shard servers in TAP tests

=head1 SYNOPSIS

  use PostgreSQL::Test::Utils;
  use Test::More;
  use CollegeDB::TestHarness;

  my $front = front_node('front');              # initdb, preload collegedb, start
  my $pg    = pg_shard_node('shard_pg');         # a plain second cluster
  my $mdb   = start_mariadb();                   # the MariaDB server of scripts/test
  my $db    = mysql_database($mdb);              # a fresh collegedb_<test> database
  mysql_query($mdb, 'CREATE TABLE t (k int)', database => $db);
  my $file  = sqlite_dir() . '/b.db';
  sqlite_exec($file, 'CREATE TABLE t (k int)');

  $front->safe_psql('postgres', qq{
      CREATE EXTENSION collegedb;
      CREATE SERVER a FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ pg_server_options($pg) ]});
      CREATE SERVER b FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ sqlite_server_options($file) ]});
      CREATE SERVER c FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ mysql_server_options($mdb, dbname => $db) ]});
      CREATE USER MAPPING FOR PUBLIC SERVER c OPTIONS (@{[ mysql_user_mapping_options($mdb) ]});
  });
  ok(poll_until($front, 'SELECT count(*) FROM collegedb.jobs', '0', 30));

A fleet in fewer words: databases s1 and s2 of C<$pg> as shards, then a MariaDB and a
SQLite shard beside them:

  my $front = front_node('front', extension => 1);
  add_pg_shards($front, $pg, s1 => 's1', s2 => 's2');
  $front->safe_psql('postgres',
      mysql_shard_server($mdb, 'm', dbname => $db, options => { connect_timeout => 2 })
        . sqlite_shard_server('l', $file)
        . q{SELECT collegedb.add_shard(s) FROM unnest(ARRAY['m', 'l']) AS s;});

=head1 DESCRIPTION

The TAP tests run as the postgres user (PostgreSQL refuses root), so they cannot start
mariadbd as the mysql user.  B<start_mariadb() therefore reuses the MariaDB server that
scripts/test started> and describes through the COLLEGEDB_TEST_MYSQL_* variables; it never
starts one.  To run a TAP file by hand (from the top of the checkout, as user postgres:
C<make installcheck REGRESS= ISOLATION= PROVE_TESTS=test/t/020_pg_shard.pl>), export those
variables for any MariaDB/MySQL server that has a user allowed to create databases named
collegedb_%:

  COLLEGEDB_TEST_MYSQL_PORT      (required)
  COLLEGEDB_TEST_MYSQL_HOST      default 127.0.0.1
  COLLEGEDB_TEST_MYSQL_SOCKET    default none (then mysql_query(..., via => 'socket') dies)
  COLLEGEDB_TEST_MYSQL_USER      default collegedb
  COLLEGEDB_TEST_MYSQL_PASSWORD  default collegedb
  COLLEGEDB_TEST_MYSQL_DB        default collegedb_test

The MariaDB server is shared by every suite of a run (pg_regress, isolation and all TAP
files): a TAP test works in its own database from mysql_database(), never in
collegedb_test.

Other variables: COLLEGEDB_TEST_PRELOAD (shared_preload_libraries of front nodes,
default 'collegedb'), COLLEGEDB_TEST_SQLITE_DIR (parent of the sqlite_dir() dirs; a TAP
temp dir when unset).

=cut

package CollegeDB::TestHarness;

use strict;
use warnings;

use Exporter 'import';
use Cwd            ();
use File::Basename ();
use File::Temp     ();
use IPC::Run       ();
use Time::HiRes    ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

our @EXPORT = qw(
  front_node
  pg_shard_node
  start_mariadb
  mysql_query
  mysql_database
  sqlite_dir
  sqlite_exec
  poll_until
  wait_for_backend_type
  sql_literal
  pg_server_options
  pg_shard_server
  pg_shard_servers
  mysql_server_options
  sqlite_server_options
  mysql_user_mapping_options
  mysql_shard_server
  sqlite_shard_server
  add_pg_shards
  sqlstate_of
  psql_outcome
  bg_session
  bg_query
  bg_send
  bg_wait
  poll_mysql_until
  sqlite_hold_lock
  psql_start
  psql_finish
  wait_for_log_match
  fanout_by_shard
  standby_of
  source_file
);

# The checkout the tests belong to (this file is its test/lib/CollegeDB/TestHarness.pm),
# found when the module loads, whatever the directory prove runs in.
my $source_dir = Cwd::abs_path(File::Basename::dirname(__FILE__) . '/../../..');

# The name of the running test file without directory and extension ("001_harness").
sub _test_name
{
	my $name = File::Basename::basename($0);
	$name =~ s/\.[^.]*$//;
	return $name;
}

# Append settings to a node's postgresql.conf: a string, or a hash ref of name => value.
sub _append_settings
{
	my ($node, $conf) = @_;
	return unless defined $conf;
	if (ref $conf eq 'HASH')
	{
		$conf = join '',
		  map { "$_ = " . sql_literal($conf->{$_}) . "\n" } sort keys %$conf;
	}
	$node->append_conf('postgresql.conf', $conf);
	return;
}

=pod

=head1 FUNCTIONS

=over

=item source_file($path)

The absolute path of C<$path>, relative to the top of the checkout the tests belong to
(C<source_file('README.md')>), so that a test reads the tree's files from whatever
directory prove runs in (the top, under C<make installcheck>).

=cut

sub source_file
{
	my ($path) = @_;
	return "$source_dir/$path";
}

=pod

=item sql_literal($text)

The text as a single-quoted SQL (and postgresql.conf) literal.

=cut

sub sql_literal
{
	my ($text) = @_;
	$text =~ s/'/''/g;
	return "'$text'";
}

=pod

=item front_node($name, %opts)

A new PostgreSQL::Test::Cluster with C<shared_preload_libraries = 'collegedb'> (or
COLLEGEDB_TEST_PRELOAD), started unless C<< start => 0 >>.  Options: C<init> (hash ref
for C<< $node->init >>, e.g. C<< { allows_streaming => 1 } >>), C<conf> (extra
postgresql.conf settings: a string or a hash ref), C<preload> (replaces the preload
list; a false value, C<< preload => 0 >> or C<< preload => '' >>, preloads nothing, for
tests of collegedb without shared memory), C<extension> (true: C<CREATE EXTENSION
collegedb> in database postgres after the start).

=cut

sub front_node
{
	my ($name, %opts) = @_;
	my $preload = $opts{preload} // $ENV{COLLEGEDB_TEST_PRELOAD} // 'collegedb';
	$preload = '' unless $preload;    # preload => 0: nothing preloaded

	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init(%{ $opts{init} // {} });
	# max_prepared_transactions: a front may serve as a shard of itself,
	# and two-phase commit prepares on shards
	$node->append_conf('postgresql.conf',
		"shared_preload_libraries = " . sql_literal($preload) . "\n"
		  . "max_prepared_transactions = 20\n");
	_append_settings($node, $opts{conf});
	return $node if defined $opts{start} && !$opts{start};

	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION collegedb')
	  if $opts{extension};
	return $node;
}

=pod

=item pg_shard_node($name, %opts)

A plain PostgreSQL cluster to use as a Postgres shard, started unless
C<< start => 0 >>.  Options C<init> and C<conf> as for front_node.  The front reaches it
over its Unix socket: see pg_server_options.

=cut

sub pg_shard_node
{
	my ($name, %opts) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init(%{ $opts{init} // {} });
	# two-phase commit prepares on shards (conf may set it back to 0)
	$node->append_conf('postgresql.conf', "max_prepared_transactions = 20\n");
	_append_settings($node, $opts{conf});
	$node->start unless defined $opts{start} && !$opts{start};
	return $node;
}

=pod

=item start_mariadb()

The MariaDB server of this run, as a CollegeDB::TestHarness::MariaDB object with the
methods C<host port socket user password database stop>.  See DESCRIPTION: the server
comes from scripts/test; without COLLEGEDB_TEST_MYSQL_PORT the test dies (make
installcheck leaves out the files that need MariaDB then).
C<stop> does not stop the shared server: it drops the databases made by mysql_database
on this object (done at exit as well, unless PG_TEST_NOCLEAN is set).

=cut

my @mariadb_handles;

sub start_mariadb
{
	# die, not BAIL_OUT: under make installcheck one prove runs every file, and
	# this file alone fails
	die 'no MariaDB server: run the TAP tests through scripts/test, or export '
	  . 'COLLEGEDB_TEST_MYSQL_PORT (and _HOST, _SOCKET, _USER, _PASSWORD) for a '
	  . "server whose user may create databases named collegedb_%\n"
	  unless $ENV{COLLEGEDB_TEST_MYSQL_PORT};

	my $mdb = bless {
		host     => $ENV{COLLEGEDB_TEST_MYSQL_HOST}     // '127.0.0.1',
		port     => $ENV{COLLEGEDB_TEST_MYSQL_PORT},
		socket   => $ENV{COLLEGEDB_TEST_MYSQL_SOCKET},
		user     => $ENV{COLLEGEDB_TEST_MYSQL_USER}     // 'collegedb',
		password => $ENV{COLLEGEDB_TEST_MYSQL_PASSWORD} // 'collegedb',
		database => $ENV{COLLEGEDB_TEST_MYSQL_DB}       // 'collegedb_test',
		created  => [],
	  },
	  'CollegeDB::TestHarness::MariaDB';

	# Fail early and clearly when the server is not there.
	my $version = mysql_query($mdb, 'SELECT VERSION()');
	note "MariaDB $version on $mdb->{host}:$mdb->{port}";
	push @mariadb_handles, $mdb;
	return $mdb;
}

=pod

=item mysql_query($mdb, $sql, %opts)

Runs C<$sql> (one or more statements) with the C<mariadb> client as the test user and
returns its output without column names: rows separated by newlines, columns by tabs,
NULL as C<NULL>.  Dies with the client's message on error.  Options: C<database>
(default: the object's database, collegedb_test), C<< via => 'socket' >> (connect over
the Unix socket, i.e. as user@localhost; the default is TCP to 127.0.0.1, i.e.
user@127.0.0.1, as the adapter connects), C<timeout> (seconds).

=cut

sub mysql_query
{
	my ($mdb, $sql, %opts) = @_;
	my @conn;
	if (($opts{via} // 'tcp') eq 'socket')
	{
		die "mysql_query: no socket known for this MariaDB server\n"
		  unless $mdb->{socket};
		@conn = ('--protocol=SOCKET', "--socket=$mdb->{socket}");
	}
	else
	{
		@conn = ('--protocol=TCP', "--host=$mdb->{host}", "--port=$mdb->{port}");
	}
	my @cmd = (
		'mariadb', '--no-defaults', @conn, "--user=$mdb->{user}",
		'--batch', '--skip-column-names',
		'--database=' . ($opts{database} // $mdb->{database}));

	# The password goes through the environment, not argv (no warning, no ps leak).
	local $ENV{MYSQL_PWD} = $mdb->{password};
	my ($stdout, $stderr) = ('', '');
	my $ok = IPC::Run::run(\@cmd, '<', \$sql, '>', \$stdout, '2>', \$stderr,
		IPC::Run::timeout($opts{timeout} // $PostgreSQL::Test::Utils::timeout_default));
	die "mysql_query failed: $stderr\nstatement: $sql\n" unless $ok;
	chomp $stdout;
	return $stdout;
}

=pod

=item mysql_database($mdb [, $name])

Drops and creates the database C<collegedb_$name> (C<$name> defaults to the test file's
name, e.g. collegedb_001_harness) and returns its name.  Names must fit the
C<collegedb_%> grant of the test user; a name that already starts with collegedb_ is
used as it is.

=cut

sub mysql_database
{
	my ($mdb, $name) = @_;
	$name //= _test_name();
	$name =~ s/[^A-Za-z0-9_]/_/g;
	$name = "collegedb_$name" unless $name =~ /^collegedb_/;
	mysql_query($mdb,
		"DROP DATABASE IF EXISTS `$name`; CREATE DATABASE `$name`;",
		database => $mdb->{database});
	push @{ $mdb->{created} }, $name
	  unless grep { $_ eq $name } @{ $mdb->{created} };
	return $name;
}

=pod

=item sqlite_dir()

A new empty directory for SQLite database files, readable and writable by the postgres
user (the TAP test and the front's backends both run as postgres).  It sits under
COLLEGEDB_TEST_SQLITE_DIR when that is set, else in the TAP temp dir, and is removed at
exit unless PG_TEST_NOCLEAN is set.

=cut

sub sqlite_dir
{
	my $parent = $ENV{COLLEGEDB_TEST_SQLITE_DIR};
	return PostgreSQL::Test::Utils::tempdir('sqlite')
	  unless defined $parent && -d $parent && -w $parent;
	return File::Temp::tempdir(
		_test_name() . '_XXXX',
		DIR     => $parent,
		CLEANUP => !defined $ENV{PG_TEST_NOCLEAN});
}

=pod

=item sqlite_exec($file, $sql)

Runs C<$sql> with the C<sqlite3> CLI on database file C<$file> (created when missing)
and returns its output (rows by newline, columns by C<|>).  Dies on any error.

=cut

sub sqlite_exec
{
	my ($file, $sql) = @_;
	my ($stdout, $stderr) = ('', '');
	my $ok = IPC::Run::run([ 'sqlite3', '-batch', '-bail', $file ],
		'<', \$sql, '>', \$stdout, '2>', \$stderr,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	die "sqlite_exec failed on $file: $stderr\nstatement: $sql\n"
	  unless $ok && $stderr eq '';
	chomp $stdout;
	return $stdout;
}

=pod

=item fanout_by_shard($node, $sql)

Runs C<$sql>, a read returning columns C<k> and C<n>, on every shard through
C<collegedb.fanout> on C<$node> and returns C<< { k => { shard => n } } >>; dies
naming the shard when one fails.

=cut

sub fanout_by_shard
{
	my ($node, $sql) = @_;
	my %by;
	my $out = $node->safe_psql('postgres',
		q{SELECT shard, coalesce(value->>'k', ''), coalesce(value->>'n', ''), coalesce(error, '')
		    FROM collegedb.fanout(} . sql_literal($sql) . ')');
	for my $line (split /\n/, $out)
	{
		my ($shard, $k, $n, $err) = split /\|/, $line, 4;
		die "fan-out error on shard $shard: $err\n" if $err ne '';
		$by{$k}{$shard} = $n if $k ne '';
	}
	return \%by;
}

=pod

=item standby_of($node, $name)

A new hot standby of front C<$node> (which was initialised with
C<< init => { allows_streaming => 1 } >>): a base backup of it, restored with
C<has_streaming> (so it streams from C<$node>, as C<pg_basebackup -R> sets up), started
and caught up.  The backup copies C<$node>'s configuration, C<postgresql.auto.conf>
included.

=cut

sub standby_of
{
	my ($node, $name) = @_;
	$node->backup("${name}_backup");
	my $standby = PostgreSQL::Test::Cluster->new($name);
	$standby->init_from_backup($node, "${name}_backup", has_streaming => 1);
	$standby->start;
	$node->wait_for_catchup($standby);
	return $standby;
}

=pod

=item poll_until($node, $sql, $expected [, $timeout [, $dbname]])

Runs C<$sql> every 0.1 s until its output (psql -At) equals C<$expected> or
C<$timeout> seconds (default: PostgreSQL::Test::Utils' timeout_default, 180) pass.
Returns true on success, false on timeout (with the last output as diagnostics), so
write C<ok(poll_until(...), 'what')>.  Use it instead of sleeping.

=cut

sub poll_until
{
	my ($node, $sql, $expected, $timeout, $dbname) = @_;
	local $PostgreSQL::Test::Utils::timeout_default =
	  $timeout // $PostgreSQL::Test::Utils::timeout_default;
	return $node->poll_query_until($dbname // 'postgres', $sql, $expected);
}

=pod

=item wait_for_backend_type($node, $backend_type [, $timeout])

poll_until a process with this C<backend_type> (a background worker's C<bgw_type>)
shows in pg_stat_activity.  Returns true or false like poll_until.

=cut

sub wait_for_backend_type
{
	my ($node, $type, $timeout) = @_;
	return poll_until($node,
		'SELECT count(*) > 0 FROM pg_stat_activity WHERE backend_type = '
		  . sql_literal($type),
		't', $timeout);
}

=pod

=item pg_server_options($node, %opts)

The OPTIONS list of C<CREATE SERVER ... FOREIGN DATA WRAPPER collegedb> for a Postgres
shard on cluster C<$node>: dialect, host (its socket dir), port, dbname (C<dbname>
option, default postgres).

=item pg_shard_server($node, $server, %opts)

The SQL that creates collegedb server C<$server> on database C<dbname> (option,
default postgres) of C<$node> and a user mapping for PUBLIC as user postgres.
C<options>, a hash of more server options (C<< { connect_timeout => 2 } >>), are added
to the server's.

=item pg_shard_servers($node, server => dbname, ...)

The SQL that creates, for each pair, a collegedb server on database C<dbname> of
C<$node> and a user mapping for PUBLIC as user postgres (in the order given).

=item mysql_server_options($mdb, %opts)

The same for the MariaDB server: dialect mysql, host 127.0.0.1, port, dbname (C<dbname>
option, default the object's database).

=item sqlite_server_options($file)

The same for a SQLite file: dialect sqlite, database.

=item mysql_user_mapping_options($mdb)

The OPTIONS list of C<CREATE USER MAPPING> for the MariaDB test user.

=item mysql_shard_server($mdb, $server, %opts)

The SQL that creates collegedb server C<$server> on the MariaDB server C<$mdb>
(mysql_server_options; C<dbname> option, default the object's database) and a user
mapping for PUBLIC as the test user.  C<options>, a hash of more server options
(C<< { connect_timeout => 2 } >>), are added to the server's.

=item sqlite_shard_server($server, $file, %opts)

The SQL that creates collegedb server C<$server> on SQLite file C<$file>, with the
server options of C<options> as for mysql_shard_server.

=item add_pg_shards($front, $node, server => dbname, ...)

Builds a fleet of Postgres shards on one cluster: for each pair, in the order given,
creates database C<dbname> on C<$node>, then in database postgres of C<$front> the
server and user mapping of pg_shard_servers, and adds each server as a shard
(collegedb.add_shard).  The front must have the extension.

=back

=cut

sub pg_server_options
{
	my ($node, %opts) = @_;
	return join ', ',
	  "dialect 'postgres'",
	  'host ' . sql_literal($node->host),
	  'port ' . sql_literal($node->port),
	  'dbname ' . sql_literal($opts{dbname} // 'postgres');
}

sub pg_shard_server
{
	my ($node, $server, %opts) = @_;
	return "CREATE SERVER $server FOREIGN DATA WRAPPER collegedb OPTIONS ("
	  . pg_server_options($node, dbname => $opts{dbname})
	  . _more_options($opts{options}) . ");\n"
	  . "CREATE USER MAPPING FOR PUBLIC SERVER $server OPTIONS (user 'postgres');\n";
}

sub pg_shard_servers
{
	my ($node, @pairs) = @_;
	my $sql = '';
	while (my ($server, $db) = splice(@pairs, 0, 2))
	{
		$sql .= pg_shard_server($node, $server, dbname => $db);
	}
	return $sql;
}

sub mysql_server_options
{
	my ($mdb, %opts) = @_;
	return join ', ',
	  "dialect 'mysql'",
	  'host ' . sql_literal($mdb->{host}),
	  'port ' . sql_literal($mdb->{port}),
	  'dbname ' . sql_literal($opts{dbname} // $mdb->{database});
}

sub sqlite_server_options
{
	my ($file) = @_;
	return "dialect 'sqlite', database " . sql_literal($file);
}

# " name 'value'" for each of the options %$options, sorted, after a comma
sub _more_options
{
	my ($options) = @_;
	return join '', map { ", $_ " . sql_literal($options->{$_}) } sort keys %{ $options // {} };
}

sub mysql_shard_server
{
	my ($mdb, $server, %opts) = @_;
	return "CREATE SERVER $server FOREIGN DATA WRAPPER collegedb OPTIONS ("
	  . mysql_server_options($mdb, %opts)
	  . _more_options($opts{options}) . ");\n"
	  . "CREATE USER MAPPING FOR PUBLIC SERVER $server OPTIONS ("
	  . mysql_user_mapping_options($mdb) . ");\n";
}

sub sqlite_shard_server
{
	my ($server, $file, %opts) = @_;
	return "CREATE SERVER $server FOREIGN DATA WRAPPER collegedb OPTIONS ("
	  . sqlite_server_options($file)
	  . _more_options($opts{options}) . ");\n";
}

sub add_pg_shards
{
	my ($front, $node, @pairs) = @_;
	my @servers;
	for (my $i = 0; $i < @pairs; $i += 2)
	{
		$node->safe_psql('postgres', "CREATE DATABASE $pairs[$i + 1]");
		push @servers, $pairs[$i];
	}
	$front->safe_psql('postgres',
		pg_shard_servers($node, @pairs)
		  . join('', map { "SELECT collegedb.add_shard('$_');\n" } @servers));
	return;
}

sub mysql_user_mapping_options
{
	my ($mdb) = @_;
	return 'user '
	  . sql_literal($mdb->{user})
	  . ', password '
	  . sql_literal($mdb->{password});
}

=pod

=head2 Errors, background sessions, more polling

=over

=item sqlstate_of($stderr)

The SQLSTATE of the first error in psql's stderr written with C<VERBOSITY verbose>
(C<ERROR:  55000: message>), or undef when there is none.

=cut

sub sqlstate_of
{
	my ($stderr) = @_;
	return undef unless defined $stderr;
	return $stderr =~ /\b(?:ERROR|FATAL):\s+([0-9A-Z]{5}):/ ? $1 : undef;
}

=pod

=item psql_outcome($node, $sql, %opts)

Runs C<$sql> in a new psql session (database C<dbname>, default postgres) with
C<VERBOSITY verbose> and C<ON_ERROR_STOP>, and returns a hash ref: C<rc> (psql's exit
status), C<stdout>, C<stderr>, C<sqlstate> (see sqlstate_of; undef on success) and
C<seconds> (wall time).  It never dies on an SQL error: that is what it is for.
Option C<timeout> (seconds) as for C<< $node->psql >>.

=cut

sub psql_outcome
{
	my ($node, $sql, %opts) = @_;
	my ($stdout, $stderr) = ('', '');
	my $t0 = Time::HiRes::time();
	my $rc = $node->psql(
		$opts{dbname} // 'postgres',
		"\\set VERBOSITY verbose\n$sql",
		stdout        => \$stdout,
		stderr        => \$stderr,
		on_error_stop => 1,
		(defined $opts{timeout} ? (timeout => $opts{timeout}) : ()));
	return {
		rc       => $rc,
		stdout   => $stdout,
		stderr   => $stderr,
		sqlstate => sqlstate_of($stderr),
		seconds  => Time::HiRes::time() - $t0,
	};
}

=pod

=item bg_session($node, %opts)

A PostgreSQL::Test::BackgroundPsql session on database C<dbname> (default postgres)
that goes on after an error (no ON_ERROR_STOP) and reports errors with
C<VERBOSITY verbose>, for tests that need one backend across several statements (a
cached shard connection, a transaction block).  Option C<timeout>: seconds one
statement may take before the harness gives up (default 60).  Call C<< ->quit >> at
the end.

=item bg_query($session, $sql)

Runs C<$sql> in the session and waits for it; returns a hash ref like psql_outcome's
(C<stdout>, C<stderr>, C<sqlstate>, C<seconds>).  The session's stderr is consumed, so
each result shows only its own errors.

=item bg_send($session, $sql)

Sends C<$sql> (without a trailing semicolon) to the session and returns once psql has
taken it, without waiting for its end: poll for the effect (pg_stat_activity), then
collect the outcome with bg_wait.

=item bg_wait($session)

Waits for what bg_send sent and returns its outcome as bg_query does; C<seconds>
counts from the bg_send.

=cut

sub bg_session
{
	my ($node, %opts) = @_;
	my $session = $node->background_psql(
		$opts{dbname} // 'postgres',
		on_error_stop => 0,
		timeout       => $opts{timeout} // 60);
	$session->set_query_timer_restart;
	bg_query($session, '\set VERBOSITY verbose');
	return $session;
}

sub _bg_collect
{
	my ($session, $stdout, $t0) = @_;
	my $stderr = $session->{stderr};
	$session->{stderr} = '';
	return {
		stdout   => $stdout,
		stderr   => $stderr,
		sqlstate => sqlstate_of($stderr),
		seconds  => Time::HiRes::time() - $t0,
	};
}

sub bg_query
{
	my ($session, $sql) = @_;
	my $t0 = Time::HiRes::time();
	$session->{stderr} = '';
	my $stdout = $session->query($sql);
	return _bg_collect($session, $stdout, $t0);
}

my $bg_send_count = 0;

sub bg_send
{
	my ($session, $sql) = @_;
	my $marker = 'bg_send ' . ++$bg_send_count;
	$session->{stderr}  = '';
	$session->{sent_at} = Time::HiRes::time();
	$session->query_until(qr/\Q$marker\E\n/, "\\echo '$marker'\n$sql;\n");
	return;
}

sub bg_wait
{
	my ($session) = @_;
	my $t0 = delete $session->{sent_at} // Time::HiRes::time();
	# an empty query: its banner comes after the result of what bg_send sent
	my $stdout = $session->query('');
	return _bg_collect($session, $stdout, $t0);
}

=pod

=item psql_start($node, $sql, %opts)

Starts C<psql -X -A -t> on C<$sql> (database C<dbname>, default postgres, with
C<VERBOSITY verbose> and C<ON_ERROR_STOP>) in the background and returns at once a
handle for psql_finish.  Unlike bg_send, the session may die under it (a crash of the
server, a restart): psql_finish then reports the failure instead of timing out.

=item psql_finish($handle [, $timeout])

Waits (at most C<$timeout> seconds, default timeout_default) for a psql_start session
to end and returns a hash ref like psql_outcome's: C<rc> (psql's exit status, undef
when it had to be killed), C<stdout>, C<stderr>, C<sqlstate>, C<seconds> (since the
start).

=item wait_for_log_match($node, $regexp, $offset [, $timeout])

Waits until the node's log, from byte C<$offset> on, matches C<$regexp> (at most
C<$timeout> seconds, default timeout_default).  In list context returns the match's
capture groups (or C<(1)> without groups) and, as the last element, the log offset
just after the match, or an empty list on timeout; in scalar context that offset, or
undef on timeout.

=cut

sub psql_start
{
	my ($node, $sql, %opts) = @_;
	my $h = { stdout => '', stderr => '', t0 => Time::HiRes::time() };
	# the statement goes on the command line: stdin would only be fed while pumped
	$h->{run} = IPC::Run::start(
		[
			'psql', '-X', '-A', '-t', '-q', '-v', 'ON_ERROR_STOP=1',
			'-v', 'VERBOSITY=verbose', '-c', $sql,
			'-d', $node->connstr($opts{dbname} // 'postgres')
		],
		'<', '/dev/null', '>', \$h->{stdout}, '2>', \$h->{stderr});
	return $h;
}

sub psql_finish
{
	my ($h, $timeout) = @_;
	my $deadline =
	  Time::HiRes::time() + ($timeout // $PostgreSQL::Test::Utils::timeout_default);
	my $rc;
	while (1)
	{
		# pump_nb dies when the process ends between the two calls
		eval { $h->{run}->pump_nb; 1 } if $h->{run}->pumpable;
		if (!$h->{run}->pumpable)
		{
			$h->{run}->finish;
			$rc = $h->{run}->result(0);
			last;
		}
		if (Time::HiRes::time() > $deadline)
		{
			$h->{run}->kill_kill;
			last;
		}
		Time::HiRes::usleep(20_000);
	}
	chomp(my $stdout = $h->{stdout});
	return {
		rc       => $rc,
		stdout   => $stdout,
		stderr   => $h->{stderr},
		sqlstate => sqlstate_of($h->{stderr}),
		seconds  => Time::HiRes::time() - $h->{t0},
	};
}

sub wait_for_log_match
{
	my ($node, $re, $offset, $timeout) = @_;
	my $deadline =
	  Time::HiRes::time() + ($timeout // $PostgreSQL::Test::Utils::timeout_default);
	while (1)
	{
		my $log = PostgreSQL::Test::Utils::slurp_file($node->logfile, $offset);
		if (my @m = ($log =~ $re))
		{
			my $end = $offset + $+[0];
			@m = (1) unless defined $1;
			return wantarray ? (@m, $end) : $end;
		}
		return wantarray ? () : undef if Time::HiRes::time() > $deadline;
		Time::HiRes::usleep(100_000);
	}
}

=pod

=item poll_mysql_until($mdb, $sql, $expected [, $timeout [, %opts]])

Runs C<$sql> with mysql_query (C<%opts> passed on) every 0.1 s until its output
equals C<$expected> or C<$timeout> seconds (default timeout_default) pass.  True on
success; on timeout false, with the last output as a diagnostic.

=cut

sub poll_mysql_until
{
	my ($mdb, $sql, $expected, $timeout, %opts) = @_;
	$timeout //= $PostgreSQL::Test::Utils::timeout_default;
	my $deadline = Time::HiRes::time() + $timeout;
	my $last;
	while (1)
	{
		$last = eval { mysql_query($mdb, $sql, %opts) } // "error: $@";
		return 1 if $last eq $expected;
		last if Time::HiRes::time() > $deadline;
		Time::HiRes::usleep(100_000);
	}
	diag "poll_mysql_until timed out after $timeout s: expected '$expected', last "
	  . "output '$last' of: $sql";
	return 0;
}

=pod

=item sqlite_hold_lock($file)

Starts the C<sqlite3> CLI on C<$file>, runs C<BEGIN IMMEDIATE> (a write lock: other
connections may read but not write) and returns once the lock is held, as an object
whose C<release> method rolls back and ends the CLI (done at exit as well).

=back

=cut

sub sqlite_hold_lock
{
	my ($file) = @_;
	my $lock = bless { in => '', out => '', err => '' },
	  'CollegeDB::TestHarness::SqliteLock';
	$lock->{timer} = IPC::Run::timer($PostgreSQL::Test::Utils::timeout_default);
	$lock->{run} = IPC::Run::start([ 'sqlite3', '-batch', '-bail', $file ],
		'<', \$lock->{in}, '>', \$lock->{out}, '2>', \$lock->{err},
		$lock->{timer});
	$lock->{in} .= "BEGIN IMMEDIATE;\nSELECT 'locked';\n";
	$lock->{run}->pump
	  until $lock->{out} =~ /^locked$/m
	  || $lock->{err} ne ''
	  || $lock->{timer}->is_expired;
	die "sqlite_hold_lock: could not lock $file: $lock->{err}\n"
	  unless $lock->{out} =~ /^locked$/m;
	return $lock;
}

END
{
	# Drop the MariaDB databases the test made, keeping $? (the test's exit status).
	local $?;
	unless (defined $ENV{PG_TEST_NOCLEAN})
	{
		eval { $_->stop } for @mariadb_handles;
	}
}

package CollegeDB::TestHarness::MariaDB;

use strict;
use warnings;

sub host     { return $_[0]->{host} }
sub port     { return $_[0]->{port} }
sub socket   { return $_[0]->{socket} }
sub user     { return $_[0]->{user} }
sub password { return $_[0]->{password} }
sub database { return $_[0]->{database} }

# stop: the server is shared by the whole run (scripts/test stops it); drop only the
# databases this object created.
sub stop
{
	my ($self) = @_;
	while (my $db = shift @{ $self->{created} })
	{
		CollegeDB::TestHarness::mysql_query($self, "DROP DATABASE IF EXISTS `$db`");
	}
	return;
}

package CollegeDB::TestHarness::SqliteLock;

use strict;
use warnings;

# release: roll back the sqlite3 CLI's transaction and wait for the CLI to end.
sub release
{
	my ($self) = @_;
	return unless $self->{run};
	my $run = delete $self->{run};
	$self->{in} .= "ROLLBACK;\n.quit\n";
	$run->finish;
	return;
}

sub DESTROY
{
	my ($self) = @_;
	local ($@, $?);
	eval { $self->release };
	return;
}

1;
