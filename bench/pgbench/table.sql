-- collegedb's sharded foreign table: the plain point read, routed by key
-- (users_cdb is SERVER collegedb OPTIONS (key_column 'id', table_name 'users')).
\set n random(1, 100000)
SELECT id, name, visits FROM users_cdb WHERE id = :n;
