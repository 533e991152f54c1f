-- The scale part: collegedb.first over the keys '1' .. :nkeys (pgbench -D
-- nkeys=N), all of them mapped, against a front database with 2 or 32 shards.
\set n random(1, :nkeys)
SELECT collegedb.first(:n, 'SELECT id, name, visits FROM users WHERE id = $1', :n::text);
