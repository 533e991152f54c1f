# CollegeDB::PrivateMariaDB: a MariaDB server of one TAP test's own, that the test
# may kill and restart.
#
# The MariaDB server that scripts/test starts is shared by every test of the run and
# must never be killed.  A test that needs to crash MariaDB starts its own here:
# mariadbd runs as the test's user (the TAP tests run as postgres) from a temp
# datadir initialised by mariadb-install-db (--auth-root-authentication-method=normal,
# --skip-test-db, --user=<whoami>), listening on a free loopback port with its socket
# in the temp dir.  Root has no password and is used over the socket only; the
# adapter's user collegedb (password collegedb) holds ALL on the databases named
# collegedb_%, as on the shared server.
#
#   my $mdb = CollegeDB::PrivateMariaDB->start('crash');
#   $mdb->query('SELECT 1', database => 'collegedb_x');   # as root, over the socket
#   $mdb->kill9; $mdb->restart;                           # a crash and a restart
#   $mdb->port, $mdb->socket, $mdb->user, $mdb->password
#
# The object also works with TestHarness's mysql_server_options and
# mysql_user_mapping_options.  The server is stopped when the object goes away
# (and at exit).
package CollegeDB::PrivateMariaDB;

use strict;
use warnings;

use Carp;
use File::Path qw(make_path);
use IPC::Run;
use POSIX ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Time::HiRes qw(usleep);

my @servers;

END
{
	$_->stop for grep { defined } @servers;
}

sub start
{
	my ($class, $name) = @_;
	my $dir = PostgreSQL::Test::Utils::tempdir("mariadb_$name");
	my $self = bless {
		dir      => $dir,
		socket   => "$dir/mysqld.sock",
		host     => '127.0.0.1',
		port     => PostgreSQL::Test::Cluster::get_free_port(),
		user     => 'collegedb',
		password => 'collegedb',
		database => 'collegedb_test',
		created  => [],
	}, $class;
	my $me = getpwuid($<);
	make_path("$dir/data");
	my ($out, $err) = ('', '');
	IPC::Run::run(
		[
			'mariadb-install-db', '--no-defaults', "--user=$me",
			"--datadir=$dir/data", '--auth-root-authentication-method=normal',
			'--skip-test-db'
		],
		'<', '/dev/null', '>', \$out, '2>', \$err)
	  or croak "mariadb-install-db failed: $out$err";
	$self->_launch;
	$self->query(
		"CREATE USER 'collegedb'\@'localhost' IDENTIFIED BY 'collegedb';
		 CREATE USER 'collegedb'\@'127.0.0.1' IDENTIFIED BY 'collegedb';
		 CREATE DATABASE collegedb_test;
		 GRANT ALL PRIVILEGES ON `collegedb\\_%`.* TO 'collegedb'\@'localhost', 'collegedb'\@'127.0.0.1';",
		database => 'mysql');
	push @servers, $self;
	return $self;
}

# _launch starts mariadbd on the datadir and waits until it answers.
sub _launch
{
	my ($self) = @_;
	my $dir = $self->{dir};
	my $me  = getpwuid($<);
	$self->{run} = IPC::Run::start(
		[
			'mariadbd', '--no-defaults', "--user=$me", "--datadir=$dir/data",
			"--socket=$self->{socket}", "--port=$self->{port}",
			'--bind-address=127.0.0.1', "--pid-file=$dir/mysqld.pid",
			"--log-error=$dir/error.log", '--skip-name-resolve',
			'--character-set-server=utf8mb4', '--collation-server=utf8mb4_general_ci',
			'--default-time-zone=+00:00', '--innodb-buffer-pool-size=32M',
			'--max-connections=100'
		],
		'<', '/dev/null', '>', "$dir/stdout.log", '2>>', "$dir/stdout.log");
	for (1 .. 600)
	{
		return if $self->ping;
		croak "mariadbd exited; see $dir/error.log" unless $self->{run}->pumpable;
		usleep(100_000);
	}
	croak "mariadbd did not start in 60 s; see $dir/error.log";
}

sub ping
{
	my ($self) = @_;
	my ($out, $err) = ('', '');
	return IPC::Run::run(
		[ 'mariadb-admin', '--no-defaults', '-uroot', "--socket=$self->{socket}", 'ping' ],
		'<', '/dev/null', '>', \$out, '2>', \$err);
}

sub pid
{
	my ($self) = @_;
	open(my $fh, '<', "$self->{dir}/mysqld.pid") or return undef;
	my $pid = <$fh>;
	close($fh);
	chomp $pid if defined $pid;
	return $pid;
}

# query runs SQL as root over the socket; returns the output (tab-separated, no
# column names), dies on error.
sub query
{
	my ($self, $sql, %opts) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run(
		[
			'mariadb', '--no-defaults', '-uroot', "--socket=$self->{socket}",
			'--batch', '--skip-column-names',
			'--database=' . ($opts{database} // $self->{database})
		],
		'<', \$sql, '>', \$out, '2>', \$err)
	  or croak "mariadb query failed: $err\nstatement: $sql";
	chomp $out;
	return $out;
}

# kill9 kills mariadbd with SIGKILL, as a crash, and waits for it to be gone.
sub kill9
{
	my ($self) = @_;
	my $pid = $self->pid;
	kill 'KILL', $pid if $pid;
	eval { $self->{run}->finish; 1 };
	delete $self->{run};
	return;
}

# restart starts mariadbd again on the same datadir and port (crash recovery runs).
sub restart
{
	my ($self) = @_;
	$self->_launch;
	return;
}

sub stop
{
	my ($self) = @_;
	return unless $self->{run};
	my ($out, $err) = ('', '');
	IPC::Run::run(
		[ 'mariadb-admin', '--no-defaults', '-uroot', "--socket=$self->{socket}", 'shutdown' ],
		'<', '/dev/null', '>', \$out, '2>', \$err);
	eval { $self->{run}->finish; 1 } or $self->kill9;
	delete $self->{run};
	return;
}

sub host     { return $_[0]{host} }
sub port     { return $_[0]{port} }
sub socket   { return $_[0]{socket} }
sub user     { return $_[0]{user} }
sub password { return $_[0]{password} }
sub database { return $_[0]{database} }

1;
