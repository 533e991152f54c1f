-- PL/Proxy: get_user(id) is CLUSTER 'bench'; RUN ON hashtext(id).
\set n random(1, 100000)
SELECT * FROM get_user(:n);
