-- The no-routing forwarder: a PL/pgSQL function on the front sends EXECUTE p(key)
-- through its dblink connection to the database with every key (no routing).
\set n random(1, 100000)
SELECT * FROM forward_get(:n::text);
