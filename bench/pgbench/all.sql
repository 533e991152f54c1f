-- collegedb.all: routed point read, typed rows through a column definition list.
\set n random(1, 100000)
SELECT * FROM collegedb.all(:n, 'SELECT id, name, visits FROM users WHERE id = $1', :n::text)
  AS u(id text, name text, visits integer);
