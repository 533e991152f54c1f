-- PgBouncer: the direct point read sent through PgBouncer (session pooling,
-- loopback TCP) to database "direct": one extra hop that does no routing.
\set n random(1, 100000)
SELECT id, name, visits FROM users WHERE id = :n;
