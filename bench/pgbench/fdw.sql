-- postgres_fdw: users_fdw is partitioned BY LIST ((hashtext(id) & 1)) over two
-- foreign tables; the second condition lets the executor prune to the one
-- partition that holds the key (the client computes the partition as
-- PL/Proxy does, inside the query).
\set n random(1, 100000)
SELECT id, name, visits FROM users_fdw
 WHERE id = :n AND (hashtext(id) & 1) = (hashtext(:n) & 1);
