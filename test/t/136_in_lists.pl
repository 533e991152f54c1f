# 136_in_lists: a foreign table read by a list of keys sends one statement per shard.
#
# 100 keys over two PostgreSQL shards (two databases of one server, which logs every
# statement): "key IN (...)", "key = ANY($1)" and, under a generic plan, "key IN ($1,
# $2, $3)" reach each shard once, with that shard's keys as one array parameter, and
# return the rows one read per key returns.  Lists of any length share one prepared
# statement on a shard.  The shards' statements are sent together: one shard's answers
# while the other is blocked.  "key IN (SELECT ...)" and a join with a smaller local
# table are read the same way, also while a move has a key's row on both shards.  A key
# that moved away from its mapped shard costs its own read where the tombstone points,
# after the grouped one.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use CollegeDB::TestHarness;

my $front = front_node('front', extension => 1);
my $shard = pg_shard_node('shard', conf => { log_statement => 'all' });
add_pg_shards($front, $shard, s => 'app', s2 => 'app2');

$front->safe_psql(
	'postgres', qq{
	SELECT collegedb.run_on_all('CREATE TABLE items (id int PRIMARY KEY, v text)');
	SELECT count(collegedb.set_mapping(i::text, CASE WHEN i % 2 = 1 THEN 's' ELSE 's2' END))
	  FROM generate_series(1, 100) AS i;
	CREATE FOREIGN TABLE items (id int, v text) SERVER collegedb OPTIONS (key_column 'id');
	INSERT INTO items SELECT i, 'v' || i FROM generate_series(1, 100) AS i;
});

# The statements on items that collegedb's connections sent since log offset $from;
# in list context also their parameters (the DETAIL line that follows each, or '') and
# the prepared statement's names (or '' for an unnamed one).
sub sent_since
{
	my ($from) = @_;
	my $log = slurp_file($shard->logfile, $from);
	my (@sent, @params, @names);
	my $last_was_items = 0;
	for my $line (split /\n/, $log)
	{
		if ($line =~ /DETAIL:\s+parameters: (.*)$/)
		{
			$params[-1] = $1 if $last_was_items;
			$last_was_items = 0;
			next;
		}
		$last_was_items = 0;
		next unless $line =~ /collegedb/;
		next unless $line =~ /LOG:\s+(?:execute ([^:]+)|statement): (.*)$/;
		my ($name, $statement) = ($1 // '', $2);
		next unless $statement =~ /FROM "items"/;
		push @sent,   $statement;
		push @params, '';
		push @names,  $name;
		$last_was_items = 1;
	}
	return wantarray ? (\@sent, \@params, \@names) : \@sent;
}

# How many keys an array parameter, logged as "$1 = '{1,3,...}'", holds.
sub keys_in
{
	my ($param) = @_;
	return 0 unless $param =~ /'\{([^}]*)\}'/;
	return scalar(() = $1 =~ /\d+/g);
}

my $bg = bg_session($front);
sub sent_by
{
	my ($sql) = @_;
	my $from = -s $shard->logfile;
	my $r = bg_query($bg, $sql);
	is($r->{stderr}, '', "no error: $sql");
	return (scalar(sent_since($from)), $r->{stdout});
}

my $list = join(', ', 1 .. 100);
my $expected = $front->safe_psql('postgres',
	q{SELECT string_agg(i || '|' || (SELECT v FROM items WHERE id = i), ',' ORDER BY i)
	  FROM generate_series(1, 100) AS i});

my $from = -s $shard->logfile;
my $r = bg_query($bg,
	"SELECT string_agg(id || '|' || v, ',' ORDER BY id) FROM items WHERE id IN ($list)");
is($r->{stderr}, '', 'IN (100 keys): no error');
my ($sent, $params) = sent_since($from);
my $rows = $r->{stdout};
is($rows, $expected, 'IN (100 keys): the rows of one read per key');
is(scalar(@$sent), 2, 'IN (100 keys) over two shards: two remote statements')
  or diag(join("\n", @$sent));
like($sent->[0] // '', qr/"id" = ANY\(\$1\)$/, '... as "id" = ANY($1)');
is_deeply([ map { keys_in($_) } @$params ], [ 50, 50 ], '... each with its shard\'s 50 keys in one array');

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

# IN ($1, $2, $3) of separate parameters under a generic plan
my $per_key = sub {
	my @k = grep { defined } @_;
	return $front->safe_psql('postgres',
		'SELECT string_agg(i || \'|\' || (SELECT v FROM items WHERE id = i), \',\' ORDER BY i) '
		  . 'FROM unnest(ARRAY[' . join(', ', @k) . ']) AS i');
};
bg_query($bg, "PREPARE by3(int, int, int) AS SELECT string_agg(id || '|' || v, ',' ORDER BY id) "
	  . "FROM items WHERE id IN (\$1, \$2, \$3)");
($sent, $rows) = sent_by('EXECUTE by3(11, 12, 13)');
is($rows, $per_key->(11, 12, 13), 'generic IN ($1, $2, $3): the rows of one read per key');
is(scalar(@$sent), 2, '... over two shards: two remote statements') or diag(join("\n", @$sent));
($sent, $rows) = sent_by('EXECUTE by3(21, NULL, 23)');
is($rows, $per_key->(21, 23), 'generic IN with a NULL parameter: the others\' rows');
is(scalar(@$sent), 1, '... from the one shard they are on');
($sent, $rows) = sent_by('EXECUTE by3(NULL, NULL, NULL)');
is($rows, '', 'generic IN of NULLs only: no row');
is(scalar(@$sent), 0, '... and nothing sent');

# 2,500 keys as one parameter array: still one statement per shard
my $many = join(',', 1 .. 2500);
($sent, $rows) = sent_by("EXECUTE by_keys('{$many}')");
is($rows, $expected, '= ANY($1) of 2,500 keys: the rows of the keys that exist');
is(scalar(@$sent), 2, '... in two remote statements');

# lists of 3, 7 and 50 keys share one prepared statement per shard
my @names;
for my $n (3, 7, 50)
{
	my $from = -s $shard->logfile;
	my $r = bg_query($bg,
		"SELECT string_agg(id::text, ',' ORDER BY id) FROM items WHERE id IN (" . join(', ', 1 .. $n) . ")");
	is($r->{stdout}, join(',', 1 .. $n), "IN ($n keys): its rows");
	my (undef, undef, $names) = sent_since($from);
	is(scalar(@$names), 2, "IN ($n keys): two remote statements");
	push @names, join(' ', sort @$names);
}
is_deeply([ @names[ 1, 2 ] ], [ $names[0], $names[0] ],
	'the three lengths went by the same prepared names on the shards')
  or diag(join("\n", @names));
unlike($names[0], qr/^ | $|  /, '... each one named');
$r = bg_query($bg,
	q{SELECT j->>'n' FROM collegedb.all_on_shard('s', $q$SELECT count(*) AS n FROM pg_prepared_statements
	  WHERE statement LIKE '%"id" = ANY($1)%' AND statement NOT LIKE '%"v"%'$q$) AS j});
is($r->{stdout}, '1', '... and the shard holds one prepared form of that read');

# the shards' statements are sent together: with items on s locked, s2 gets its
# statement (and answers) while s's still waits
my $locker = bg_session($shard, dbname => 'app');
bg_query($locker, 'BEGIN');
bg_query($locker, 'LOCK TABLE items IN ACCESS EXCLUSIVE MODE');
$from = -s $shard->logfile;
bg_send($bg, "SELECT string_agg(id::text, ',' ORDER BY id) FROM items WHERE id IN (31, 32, 33, 34)");
ok(defined wait_for_log_match($shard, qr/parameters: \$1 = '\{32,34\}'/, $from),
	'with the first shard blocked, the second shard got its statement');
ok(poll_until($shard, q{SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'items'::regclass},
		'1', undef, 'app'),
	'... while the first shard\'s statement waited');
bg_query($locker, 'COMMIT');
$r = bg_wait($bg);
is($r->{stdout}, '31,32,33,34', '... and once it ran, every row came');
is($r->{stderr}, '', '... without an error');
$locker->quit;

# key IN (SELECT ...) and a join with a smaller local table (fdw/semijoin.c) are read
# by the local keys, one statement per shard, also while a key's move stands between
# the target's commit and the source's delete (its rows on both shards): each row once
$front->safe_psql('postgres', q{
	CREATE TABLE local_keys AS SELECT i AS k FROM generate_series(1, 100) AS i;
	CREATE TABLE few_keys AS SELECT i AS k FROM generate_series(1, 40) AS i;
	ANALYZE local_keys; ANALYZE few_keys; ANALYZE items;
});
my $semi = "SELECT string_agg(id || '|' || v, ',' ORDER BY id) FROM items WHERE id IN (SELECT k FROM local_keys)";
my $join = "SELECT string_agg(id || '|' || v, ',' ORDER BY id) FROM few_keys JOIN items ON items.id = few_keys.k";
($sent, $rows) = sent_by($semi);
is($rows, $expected, 'key IN (SELECT ...) of 100 keys: the rows of one read per key');
is(scalar(@$sent), 2, '... in one statement per shard') or diag(join("\n", @$sent));
($sent, $rows) = sent_by($join);
is($rows, $per_key->(1 .. 40), 'a join with a local table of 40 keys: the rows of one read per key');
is(scalar(@$sent), 2, '... in one statement per shard') or diag(join("\n", @$sent));

$front->safe_psql('postgres', "ALTER SYSTEM SET collegedb.test_pause_in_step = 'source'; SELECT pg_reload_conf()");
ok(poll_until($front, 'SHOW collegedb.test_pause_in_step', 'source', 30), 'movers pause inside the source step');
my $off = -s $front->logfile;
my $mover = psql_start($front, q{SELECT collegedb.reassign_shard('20', 's')});
my ($mover_pid, $move_id) =
  wait_for_log_match($front, qr/\[(\d+)\] LOG:  collegedb: move (\d+) paused inside step source\b/, $off, 60);
ok($move_id, "move $move_id of key 20 to s paused after the target's commit");
is($shard->safe_psql('app', 'SELECT count(*) FROM items WHERE id = 20') . '/'
	  . $shard->safe_psql('app2', 'SELECT count(*) FROM items WHERE id = 20'),
	'1/1', '... its row on both shards');
($sent, $rows) = sent_by($semi);
is($rows, $expected, 'key IN (SELECT ...) during the move: every row once');
is(scalar(@$sent), 2, '... in one statement per shard');
($sent, $rows) = sent_by($join);
is($rows, $per_key->(1 .. 40), 'the join during the move: every row once');
$front->safe_psql('postgres', 'ALTER SYSTEM RESET collegedb.test_pause_in_step; SELECT pg_reload_conf()');
ok(poll_until($front, 'SHOW collegedb.test_pause_in_step', '', 30), 'movers pause no more');
$front->safe_psql('postgres', "SELECT pg_terminate_backend($mover_pid)");
psql_finish($mover, 60);
ok(poll_until($front, "SELECT step FROM collegedb.moves WHERE id = $move_id", 'done', 90),
	'the coordinator finished the move');
($sent, $rows) = sent_by($semi);
is($rows, $expected, 'key IN (SELECT ...) after the move: every row once');
is(scalar(@$sent), 2, '... in one statement per shard');

# key 7 moves to s2; its mapping is made stale again (back to s)
$front->safe_psql('postgres', q{SELECT collegedb.reassign_shard('7', 's2')});
$front->safe_psql('postgres',
	q{UPDATE collegedb.mapping SET shard = (SELECT n.number FROM collegedb.shard_number n WHERE n.name = 's') WHERE key = collegedb.mapping_id('7')});
($sent, $rows) = sent_by(
	"SELECT string_agg(id || '|' || v, ',' ORDER BY id) FROM items WHERE id IN ($list)");
is($rows, $expected, 'a moved key behind a stale mapping: still the same rows');
is(scalar(grep { /"id" = \$1/ } @$sent), 1, '... its own read where the tombstone points');
is(scalar(grep { /"id" = ANY\(/ } @$sent), 2, '... after one grouped statement per shard');
($sent, $rows) = sent_by('EXECUTE by3(7, 8, 9)');
is($rows, $per_key->(7, 8, 9), 'generic IN with the moved key among its parameters: the same rows');
is(scalar(grep { /"id" = \$1/ } @$sent), 1, '... its own read where the tombstone points');
is(scalar(grep { /"id" = ANY\(/ } @$sent), 2, '... after one grouped statement per shard');

$bg->quit;
done_testing();
