-- collegedb.first over 1,000 hot keys: the mapping cache is warm after the
-- first second, as with a long-lived (pooled) connection.
\set n random(1, 1000)
SELECT collegedb.first(:n, 'SELECT id, name, visits FROM users WHERE id = $1', :n::text);
