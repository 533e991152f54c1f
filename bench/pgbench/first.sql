-- collegedb.first: routed point read, the row as jsonb.  Runs against the front.
\set n random(1, 100000)
SELECT collegedb.first(:n, 'SELECT id, name, visits FROM users WHERE id = $1', :n::text);
