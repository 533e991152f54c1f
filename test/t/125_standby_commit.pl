# 125_standby_commit: on a hot standby of the front, a transaction that wrote on two
# shards is refused at commit with 25006 before anything is prepared (two-phase
# commit would have to record its decision in the front, which is read-only there),
# and nothing of it is left on the shards; a write on one shard commits in one phase,
# and collegedb.commit_protocol = 'sequential' commits the two one after another.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use CollegeDB::TestHarness;

my $front = front_node('front', init => { allows_streaming => 1 }, extension => 1);
my $shard = pg_shard_node('shard');
$shard->safe_psql('postgres', $_) for ('CREATE DATABASE a', 'CREATE DATABASE b');
for my $db (qw(a b))
{
	$shard->safe_psql($db, 'CREATE TABLE items (id text PRIMARY KEY, v int NOT NULL)');
}

$front->safe_psql(
	'postgres', qq{
	CREATE SERVER a FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ pg_server_options($shard, dbname => 'a') ]});
	CREATE SERVER b FOREIGN DATA WRAPPER collegedb OPTIONS (@{[ pg_server_options($shard, dbname => 'b') ]});
	CREATE USER MAPPING FOR PUBLIC SERVER a OPTIONS (user 'postgres');
	CREATE USER MAPPING FOR PUBLIC SERVER b OPTIONS (user 'postgres');
	SELECT collegedb.add_shard('a'), collegedb.add_shard('b');
	SELECT collegedb.set_mapping('ka', 'a'), collegedb.set_mapping('kb', 'b');
	SELECT collegedb.run('ka', 'INSERT INTO items VALUES (\$1, 0)', 'ka');
	SELECT collegedb.run('kb', 'INSERT INTO items VALUES (\$1, 0)', 'kb');
});

my $standby = standby_of($front, 'standby');
is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'), 't', 'the standby is in recovery');

sub values_on_shards
{
	return join ',', map { $shard->safe_psql($_, 'SELECT v FROM items') } qw(a b);
}

sub prepared_on_shard
{
	return $shard->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts');
}

my $both = q{
	SELECT collegedb.run('ka', 'UPDATE items SET v = v + 1 WHERE id = $1', 'ka');
	SELECT collegedb.run('kb', 'UPDATE items SET v = v + 1 WHERE id = $1', 'kb');
	COMMIT;};

my $r = psql_outcome($standby, "BEGIN; $both");
is($r->{sqlstate}, '25006', 'a commit on the standby that wrote on two shards is 25006')
  or diag $r->{stderr};
like($r->{stderr}, qr/cannot commit a transaction that wrote on several shards on a hot standby/,
	'the error says why');
is(values_on_shards(), '0,0', 'nothing of the refused transaction is on either shard');
is(prepared_on_shard(), '0', 'nothing was prepared on the shards');

$r = psql_outcome($standby,
	q{SELECT collegedb.run('ka', 'UPDATE items SET v = v + 1 WHERE id = $1', 'ka')});
is($r->{stdout}, '1', 'a write on one shard commits from the standby, in one phase')
  or diag $r->{stderr};
is(values_on_shards(), '1,0', 'its row changed on its shard');

$r = psql_outcome($standby, "SET collegedb.commit_protocol = 'sequential'; BEGIN; $both");
is($r->{rc}, 0, "under 'sequential' the two-shard transaction commits from the standby")
  or diag $r->{stderr};
is(values_on_shards(), '2,1', 'both rows changed');
is(prepared_on_shard(), '0', 'and nothing is left prepared');

done_testing();
