-- collegedb.fanout: the point read on all eight shards at once (one of them has the row).
\set n random(1, 100000)
SELECT count(*) FROM collegedb.fanout('SELECT id, name, visits FROM users WHERE id = $1', :n::text);
