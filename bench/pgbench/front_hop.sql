-- profiling only: a trivial statement on the front (no routing, no shard):
-- what one more process in the path costs.
\set n random(1, 100000)
SELECT :n::text;
