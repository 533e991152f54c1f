-- direct: the point read sent straight to a shard-cluster database that holds
-- every user (no routing at all).  Runs against database "direct".
\set n random(1, 100000)
SELECT id, name, visits FROM users WHERE id = :n;
