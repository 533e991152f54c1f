# 136_in_lists: a foreign table read by a list of keys sends one statement per shard.
#
# 100 keys over two PostgreSQL shards (two databases of one server, which logs every
# statement): "key IN (...)" and "key = ANY($1)" reach each shard once, with that
# shard's 50 keys as parameters, and return the rows one read per key returns.  A
# key that moved away from its mapped shard costs its own read where the tombstone
# points, after the grouped one.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use CollegeDB::TestHarness;

my $front = front_node('front', extension => 1);
my $shard = pg_shard_node('shard', conf => { log_statement => 'all' });
$shard->safe_psql('postgres', 'CREATE DATABASE app');
$shard->safe_psql('postgres', 'CREATE DATABASE app2');

$front->safe_psql(
	'postgres', qq{
	@{[ pg_shard_servers($shard, s => 'app', s2 => 'app2') ]}
	SELECT collegedb.add_shard('s');
	SELECT collegedb.add_shard('s2');
	SELECT collegedb.run_on_all('CREATE TABLE items (id int PRIMARY KEY, v text)');
	SELECT count(collegedb.set_mapping(i::text, CASE WHEN i % 2 = 1 THEN 's' ELSE 's2' END))
	  FROM generate_series(1, 100) AS i;
	CREATE FOREIGN TABLE items (id int, v text) SERVER collegedb OPTIONS (key_column 'id');
	INSERT INTO items SELECT i, 'v' || i FROM generate_series(1, 100) AS i;
});

# The statements on items that collegedb's connections sent since log offset $from.
sub sent_since
{
	my ($from) = @_;
	my $log = slurp_file($shard->logfile, $from);
	my @sent;
	for my $line (split /\n/, $log)
	{
		next unless $line =~ /collegedb/;
		next unless $line =~ /LOG:\s+(?:execute [^:]+|statement): (.*)$/;
		my $statement = $1;
		push @sent, $statement if $statement =~ /FROM "items"/;
	}
	return \@sent;
}

my $bg = bg_session($front);
sub sent_by
{
	my ($sql) = @_;
	my $from = -s $shard->logfile;
	my $r = bg_query($bg, $sql);
	is($r->{stderr}, '', "no error: $sql");
	return (sent_since($from), $r->{stdout});
}

my $list = join(', ', 1 .. 100);
my $expected = $front->safe_psql('postgres',
	q{SELECT string_agg(i || '|' || (SELECT v FROM items WHERE id = i), ',' ORDER BY i)
	  FROM generate_series(1, 100) AS i});

my ($sent, $rows) = sent_by(
	"SELECT string_agg(id || '|' || v, ',' ORDER BY id) FROM items WHERE id IN ($list)");
is($rows, $expected, 'IN (100 keys): the rows of one read per key');
is(scalar(@$sent), 2, 'IN (100 keys) over two shards: two remote statements')
  or diag(join("\n", @$sent));
is_deeply([ map { scalar(() = /\$\d+/g) } @$sent ], [ 50, 50 ], '... each with its shard\'s 50 keys');
like($sent->[0] // '', qr/"id" IN \(\$1, \$2, /, '... as "id" IN ($1, ...)');

($sent, $rows) = sent_by(
	"PREPARE by_keys(int[]) AS SELECT string_agg(id || '|' || v, ',' ORDER BY id) FROM items WHERE id = ANY(\$1);
	 SET plan_cache_mode = force_generic_plan;
	 EXECUTE by_keys('{$list}');");
is($rows, $expected, '= ANY($1) of 100 keys: the same rows');
is(scalar(@$sent), 2, '= ANY($1) of 100 keys over two shards: two remote statements');

($sent, $rows) = sent_by(
	"SELECT string_agg(id::text, ',' ORDER BY id) FROM items WHERE id IN (1, 1, 2, NULL, 3, 1000)");
is($rows, '1,2,3', 'duplicates, a NULL and an unmapped key: each row once');
is(scalar(@$sent), 2, '... still one statement per shard');

# key 7 moves to s2; its mapping is made stale again (back to s)
$front->safe_psql('postgres', q{SELECT collegedb.reassign_shard('7', 's2')});
$front->safe_psql('postgres',
	q{UPDATE collegedb.mapping SET shard = 's' WHERE key = collegedb.mapping_key('7')});
($sent, $rows) = sent_by(
	"SELECT string_agg(id || '|' || v, ',' ORDER BY id) FROM items WHERE id IN ($list)");
is($rows, $expected, 'a moved key behind a stale mapping: still the same rows');
is(scalar(grep { /"id" = \$1/ } @$sent), 1, '... its own read where the tombstone points');
is(scalar(grep { /"id" IN \(/ } @$sent), 2, '... after one grouped statement per shard');

$bg->quit;
done_testing();
