# 140_readme: the README is a tested document.
#
# Every ```sql fenced block of README.md runs, in the order of the document, as a new
# user would run it: each block in one psql session with ON_ERROR_STOP, on a front with
# collegedb preloaded, in the database of the blocks before it, so a block may use what
# they made (the tutorial's shards and tables).  A block whose first statement is
# CREATE EXTENSION (a section that starts from scratch) starts a new database.  A
# statement that fails fails the test, naming the block's line and section.
#
# A block is left out only when the line before it says
#   <!-- readme-test: skip (the reason) -->
# (for example a block that needs a real remote host).  The README's placeholders are
# replaced by this test's servers:
#   '/tmp/...'                                    a file in this test's SQLite dir
#   host '10.0.0.5', port '5432'                  a PostgreSQL shard cluster (it has a
#                                                 role app and a database app)
#   host '10.0.0.6', port '3306', dbname 'app'    the run's MariaDB, a database of its own
#   SERVER "db-my" OPTIONS (user 'app', password 'secret')
#                                                 the MariaDB test user's credentials
# A block that still names 10.0.0.x after that fails: a new placeholder needs a
# substitution here.  The roles the security section grants to (app, ops) exist.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use CollegeDB::TestHarness;

my $readme = source_file('README.md');
open(my $fh, '<', $readme) or die "cannot read $readme: $!";
my @lines = <$fh>;
close $fh;

# the blocks: [line, section, text]
my @blocks;
my ($section, $skip, $in, $start, $text) = ('(top)', 0, 0, 0, '');
my $previous = '';
for my $i (0 .. $#lines)
{
	my $line = $lines[$i];
	if ($in)
	{
		if ($line =~ /^```\s*$/)
		{
			push @blocks, [ $start, $section, $text ] unless $skip;
			$in = 0;
		}
		else
		{
			$text .= $line;
		}
		next;
	}
	$section = $1 if $line =~ /^##\s+(.*?)\s*$/;
	if ($line =~ /^```sql\s*$/)
	{
		($in, $start, $text) = (1, $i + 1, '');
		$skip = $previous =~ /<!--\s*readme-test:\s*skip/;
	}
	$previous = $line if $line =~ /\S/;
}
die "README.md: a ```sql block is not closed" if $in;
cmp_ok(scalar(@blocks), '>=', 5, 'the README has SQL blocks to run');

my $dir   = sqlite_dir();
my $mdb   = start_mariadb();
my $mydb  = mysql_database($mdb);
my $shard = pg_shard_node('readme_pg');
$shard->safe_psql('postgres', q{
	CREATE ROLE app LOGIN PASSWORD 'secret';
	CREATE DATABASE app OWNER app;
});
my $front = front_node('readme');
$front->safe_psql('postgres', q{
	CREATE ROLE app;
	CREATE ROLE ops;
});
my $databases = 0;

my %substitute = (
	q{'/tmp/} => "'$dir/",
	q{host '10.0.0.5', port '5432'} => 'host '
	  . sql_literal($shard->host)
	  . ', port '
	  . sql_literal($shard->port),
	q{host '10.0.0.6', port '3306', dbname 'app'} => 'host '
	  . sql_literal($mdb->{host})
	  . ', port '
	  . sql_literal($mdb->{port})
	  . ', dbname '
	  . sql_literal($mydb),
	q{SERVER "db-my" OPTIONS (user 'app', password 'secret')} => 'SERVER "db-my" OPTIONS ('
	  . mysql_user_mapping_options($mdb) . ')',);

for my $block (@blocks)
{
	my ($line, $where, $sql) = @$block;
	# one pass, longest placeholder first: a value is never substituted again
	my $any = join '|',
	  map { quotemeta } sort { length($b) <=> length($a) } keys %substitute;
	$sql =~ s/($any)/$substitute{$1}/g;
	# the first statement, past comments
	(my $first = $sql) =~ s/^(?:\s*--[^\n]*\n|\s+)*//;
	if ($databases == 0 || $first =~ /^CREATE\s+EXTENSION\b/i)
	{
		$databases++;
		$front->safe_psql('postgres', "CREATE DATABASE readme$databases");
		note "README.md line $line ($where): a new database, readme$databases";
	}
	if ($sql =~ /10\.0\.0\.\d/)
	{
		fail("README.md line $line ($where): a placeholder host this test does not replace");
		next;
	}
	my ($stdout, $stderr);
	my $ret = $front->psql(
		"readme$databases", $sql,
		on_error_stop => 1,
		stdout        => \$stdout,
		stderr        => \$stderr,
		timeout       => $PostgreSQL::Test::Utils::timeout_default);
	is($ret, 0, "README.md line $line ($where): the block runs")
	  or diag "stderr:\n$stderr\nstdout (tail):\n" . substr($stdout // '', -2000);
}

done_testing();
