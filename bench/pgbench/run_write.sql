-- collegedb.run: the same UPDATE routed by key through the front.
\set n random(1, 100000)
SELECT collegedb.run(:n, 'UPDATE users SET visits = visits + 1 WHERE id = $1', :n::text);
