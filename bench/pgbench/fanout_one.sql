-- the same point read on one shard (collegedb.all_on_shard), for reference.
\set n random(1, 100000)
SELECT count(*) FROM collegedb.all_on_shard('fan0', 'SELECT id, name, visits FROM users WHERE id = $1', :n::text);
