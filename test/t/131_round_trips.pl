# 131_round_trips: what a PostgreSQL shard receives, read from its statement log.
#
# A routed write that is the whole front statement, outside a transaction block, with
# the key mapped already, travels as guard + statement in one pipeline (one implicit
# transaction on the shard): no BEGIN, no COMMIT; both go by prepared name, the key as
# the guard's parameter.  In a transaction block, next to anything else in the front
# statement, or when the front itself writes (a new key's mapping), the write joins a
# remote transaction as before.  A tombstone still refuses the write and nothing is
# written; a shard restarted under the cached connection gets the write once.  A
# fan-out read in autocommit sends the query alone to each shard, in a transaction
# block with BEGIN and SAVEPOINT.
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
	SELECT collegedb.run_on_all('CREATE TABLE items (id text PRIMARY KEY, v text)');
	SELECT collegedb.set_mapping('k1', 's');
	SELECT collegedb.set_mapping('k2', 's');
	SELECT collegedb.run_on_shard('s', 'INSERT INTO items VALUES (''k1'', ''zero''), (''k2'', ''zero'')');
});

# The statements collegedb's connections sent to the shard since log offset $from,
# in order, without the logging's prefixes.
sub sent_since
{
	my ($from) = @_;
	my $log = slurp_file($shard->logfile, $from);
	my @sent;
	for my $line (split /\n/, $log)
	{
		next unless $line =~ /collegedb/;
		next unless $line =~ /LOG:\s+(?:execute [^:]+|statement): (.*)$/;
		# a new connection's session settings
		push @sent, $1 unless $1 =~ /^SET datestyle/;
	}
	return \@sent;
}

# Runs $sql in the front session and returns what the shard received meanwhile.
my $bg = bg_session($front);
sub sent_by
{
	my ($sql, $expect_ok) = @_;
	my $from = -s $shard->logfile;
	my $r = bg_query($bg, $sql);
	is($r->{stderr}, '', "no error: $sql") if $expect_ok // 1;
	# the log is written by the shard's backend before it answers
	return (sent_since($from), $r);
}

my $update = q{SELECT collegedb.run('k1', 'UPDATE items SET v = $2 WHERE id = $1', 'k1', 'one')};
my $guard = 'SELECT collegedb_guard($1)';
my $update_sql = 'UPDATE items SET v = $2 WHERE id = $1';

# --- a write alone: one pipeline, no remote transaction -----------------------------

my ($sent) = sent_by($update);
is_deeply($sent, [ $guard, $update_sql ],
	'a write that is the whole statement sends the guard and the statement only');
is($shard->safe_psql('app', q{SELECT v FROM items WHERE id = 'k1'}), 'one', 'the write is on the shard');
($sent) = sent_by($update =~ s/'one'/'two'/r);
is_deeply($sent, [ $guard, $update_sql ], 'so does the next one (both by prepared name)');
my $named = slurp_file($shard->logfile);
like($named, qr/execute collegedb_p\d+: SELECT collegedb_guard\(\$1\)/, 'the guard went by name');
like($named, qr/execute collegedb_p\d+: UPDATE items SET v/, 'the statement went by name');
like($named, qr/parameters: \$1 = 'k1'/, 'the key went as the guard\'s parameter');

# --- everything else joins a remote transaction, as before --------------------------

($sent) = sent_by("BEGIN; $update; COMMIT;");
is_deeply($sent, [ 'BEGIN', $guard, $update_sql, 'COMMIT' ], 'in a transaction block: BEGIN .. COMMIT');

($sent) = sent_by($update =~ s/\)$/), 1/r);
is_deeply($sent, [ 'BEGIN', $guard, $update_sql, 'COMMIT' ],
	'next to another output column: BEGIN .. COMMIT');

($sent) = sent_by(
	q{SELECT collegedb.run(k, 'UPDATE items SET v = $2 WHERE id = $1', k, 'x') FROM (VALUES ('k1'), ('k1')) AS t(k)});
is_deeply([ $sent->[0], $sent->[-1], scalar(grep { $_ eq $update_sql } @$sent) ], [ 'BEGIN', 'COMMIT', 2 ],
	'over two rows: both writes in one remote transaction, BEGIN .. COMMIT');

($sent) = sent_by(q{SELECT collegedb.run('k3', 'INSERT INTO items VALUES ($1, $2)', 'k3', 'new')});
is($sent->[0], 'BEGIN', 'a new key (the front writes its mapping): the write opens a remote transaction');
is($sent->[-1], 'COMMIT', '... and commits it with the front');

# the front statement fails after the call: nothing stays on the shard
my ($unused, $r) = sent_by(
	q{SELECT collegedb.run('k2', 'UPDATE items SET v = $2 WHERE id = $1', 'k2', 'lost'), 1 / d
	  FROM (VALUES (0)) AS t(d)}, 0);
is(sqlstate_of($r->{stderr}) // $r->{stderr}, '22012', 'a statement failing after the call fails');
is($shard->safe_psql('app', q{SELECT v FROM items WHERE id = 'k2'}), 'zero',
	'... and its write was rolled back on the shard');

# --- the guard still refuses a moved key ----------------------------------------------

$shard->safe_psql('app',
	q{INSERT INTO collegedb_tombstones (table_name, shard_key, moved_to) VALUES ('items', 'k2', 's2')});
($sent) = sent_by(q{SELECT collegedb.run('k2', 'UPDATE items SET v = $2 WHERE id = $1', 'k2', 'moved')});
is($sent->[0], $guard, 'a tombstoned key: the guard goes first, alone');
is(scalar(grep { $_ eq $update_sql } @$sent), 1, '... it refuses the write on s, which goes to s2 once');
is($shard->safe_psql('app', q{SELECT v FROM items WHERE id = 'k2'}), 'zero', 'nothing written where the key moved away');
$shard->safe_psql('app', q{UPDATE collegedb_tombstones SET moved_to = 's' WHERE shard_key = 'k2'});
($unused, $r) = sent_by(q{SELECT collegedb.run('k2', 'UPDATE items SET v = $2 WHERE id = $1', 'k2', 'loop')}, 0);
like(sqlstate_of($r->{stderr}) // $r->{stderr}, qr/^CD/, 'a trail that never ends: a collegedb error');
is($shard->safe_psql('app', q{SELECT v FROM items WHERE id = 'k2'}), 'zero', '... and nothing written');

# --- a restarted shard gets the write once --------------------------------------------

$shard->restart;
($sent) = sent_by($update =~ s/'one'/'three'/r);
is_deeply($sent, [ $guard, $update_sql ], 'after a restart the write goes once, on a new connection');
is($shard->safe_psql('app', q{SELECT v FROM items WHERE id = 'k1'}), 'three', 'the write is on the shard');

# --- fan-out reads ------------------------------------------------------------------------

my $fan = q{SELECT count(*) FROM collegedb.fanout('SELECT count(*) AS n FROM items') WHERE error IS NULL};
($sent) = sent_by($fan);
is_deeply($sent, [ 'SELECT count(*) AS n FROM items', 'SELECT count(*) AS n FROM items' ],
	'a fan-out read in autocommit: the query alone on each shard');
($sent) = sent_by("BEGIN; $fan; COMMIT;");
is(scalar(grep { $_ eq 'BEGIN' } @$sent), 2, 'in a transaction block each shard begins a transaction');
is(scalar(grep { /^SAVEPOINT/ } @$sent), 2, '... and a savepoint');

$bg->quit;
done_testing();
