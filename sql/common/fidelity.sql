-- SQL fidelity: a few hundred statement forms run against a sharded
-- foreign table of one dialect and against a local table holding the same
-- rows; only the forms whose answers differ are shown (the result, or the
-- SQLSTATE of the error, on each side), so that the expected output is
-- short and stable.  Included by postgres.sql, sqlite.sql and mysql.sql
-- after common/dialect.sql (shards s1 and s2 of their dialect, try(), and
-- ts_t, the dialect's name for a timestamp column).

SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE IF EXISTS fid') ORDER BY shard;
SELECT format('CREATE TABLE fid (id VARCHAR(32) PRIMARY KEY, grp INTEGER, big BIGINT, '
              'price DECIMAL(10,2), f DOUBLE PRECISION, name VARCHAR(64), flag BOOLEAN, '
              'd DATE, ts %s)', :'ts_t') AS ddl \gset
SELECT shard, ok FROM collegedb.run_on_all(:'ddl') ORDER BY shard;
CREATE FOREIGN TABLE fid (id text, grp int, big bigint, price numeric(10,2), f float8,
                          name text, flag bool, d date, ts timestamp)
  SERVER collegedb OPTIONS (key_column 'id');
CREATE TABLE fid_local (id text PRIMARY KEY, grp int, big bigint, price numeric(10,2), f float8,
                        name text, flag bool, d date, ts timestamp);

-- rows that tell the dialects apart: case and trailing spaces, non-ASCII,
-- values near the integer limits, decimals that floats cannot hold, NULLs
CREATE TEMP TABLE fid_rows AS
SELECT 'k' || i AS id,
       CASE WHEN i % 11 = 0 THEN NULL ELSE i % 7 END AS grp,
       CASE i WHEN 1 THEN 9223372036854775807 WHEN 2 THEN -9223372036854775807
              WHEN 3 THEN 4294967296 WHEN 4 THEN NULL ELSE i * 1000 END AS big,
       CASE WHEN i % 13 = 0 THEN NULL ELSE round(i * 0.1, 2) END::numeric(10,2) AS price,
       CASE WHEN i % 17 = 0 THEN NULL ELSE i * 0.1 END::float8 AS f,
       CASE i % 10 WHEN 0 THEN 'item-' || i WHEN 1 THEN 'ITEM-' || i WHEN 2 THEN 'abc'
                   WHEN 3 THEN 'abc ' WHEN 4 THEN 'ABC' WHEN 5 THEN 'ünïcödé'
                   WHEN 6 THEN NULL WHEN 7 THEN 'item-9' WHEN 8 THEN 'Item-9'
                   ELSE 'zeta_' || i END AS name,
       CASE WHEN i % 5 = 0 THEN NULL ELSE i % 2 = 0 END AS flag,
       CASE WHEN i % 9 = 0 THEN NULL ELSE '2024-02-20'::date + i END AS d,
       CASE WHEN i % 8 = 0 THEN NULL
            ELSE '2024-01-01 00:00:00'::timestamp + i * interval '7 hours 30 minutes 0.25 seconds' END AS ts
  FROM generate_series(1, 40) AS i;
INSERT INTO fid_rows VALUES
  ('max', 2147483647, 1, 99999999.99, 1e300, 'max', true, '9999-12-31', '2099-12-31 23:59:59.999999'),
  ('min', -2147483647, -1, -99999999.99, -1e300, 'min', false, '0001-01-01', '1970-01-01 00:00:00');
INSERT INTO fid SELECT * FROM fid_rows;
INSERT INTO fid_local SELECT * FROM fid_rows;
SELECT (SELECT count(*) FROM fid) AS sharded, (SELECT count(*) FROM fid_local) AS local;

-- conditions, each run under three statement shapes
CREATE TEMP TABLE fid_conds (c text);
INSERT INTO fid_conds VALUES
  ('grp = 3'), ('grp <> 3'), ('grp < 3'), ('grp >= 5'), ('grp * 2 = 6'), ('grp + 1 > 5'),
  ('grp - 10 < -5'), ('grp * 1073741824 > 0'), ('grp * 1073741824 < 0'), ('grp + 2147483647 > 0'),
  ('grp - 2147483647 < 0'), ('grp * grp * grp * grp * grp * grp * grp * grp * grp * grp * grp * grp > 0'),
  ('big > 3000000000'), ('big * 2 > 0'), ('big + 1 > 0'), ('big - 1 < 0'), ('big = 4294967296'),
  ('big + grp > 10000'), ('price * 3 = 0.30'), ('price = 0.10'), ('price > 1.5'), ('price + 0.01 = 0.11'),
  ('price * price > 1'), ('price - 1 < 0'), ('price * 3 = 0.9'), ('price * 0.1 = 0.03'),
  ('price * 100000000 > 1'), ('f = 0.1'), ('f > 0.5'), ('f * 3 = 0.3'), ('f * 1e300 > 1'), ('f < 1e300'),
  ('name = ''ITEM-9'''), ('name = ''item-9'''), ('name <> ''item-9'''), ('name = ''abc'''),
  ('name = ''abc '''), ('name <> ''abc'''), ('name = ''ünïcödé'''), ('name < ''item-5'''),
  ('name >= ''ITEM'''), ('name > ''abc'''), ('name <= ''abc '''), ('name LIKE ''item%'''),
  ('name LIKE ''ITEM%'''), ('name LIKE ''_tem-9'''), ('name NOT LIKE ''item%'''), ('name LIKE ''abc'''),
  ('name LIKE ''ünï%'''), ('name LIKE ''__ïcödé'''), ('name LIKE ''zeta\_%'''), ('name LIKE ''zeta_1%'''),
  ('name ILIKE ''item-9'''), ('upper(name) = ''ITEM-9'''), ('length(name) > 5'), ('name IS NULL'),
  ('name IS NOT NULL'), ('name || ''x'' = ''abcx'''), ('flag'), ('NOT flag'), ('flag = true'),
  ('flag <> false'), ('flag IS TRUE'), ('flag IS NOT FALSE'), ('flag IS NULL'),
  ('d = ''2024-02-29'''), ('d > ''2024-03-01'''), ('d + 1 = ''2024-03-01'''), ('d < ''0002-01-01'''),
  ('ts > ''2024-01-05 12:00'''), ('ts = ''2024-01-01 15:00:00.5'''), ('ts < ''1999-01-01'''),
  ('ts >= ''2024-01-02'''), ('grp IN (1, 2, 3)'), ('grp NOT IN (1, 2)'), ('grp IN (1, NULL)'),
  ('grp NOT IN (1, NULL)'), ('name IN (''item-9'', ''abc'')'), ('name NOT IN (''abc'', ''ABC'')'),
  ('price IN (0.10, 1.50)'), ('id = ''k5'''), ('id IN (''k1'', ''k2'', ''K3'')'), ('id > ''k5'''),
  ('id = ''K5'''), ('grp = 1 OR name = ''abc'''), ('NOT (grp = 1 AND price > 1)'),
  ('grp::numeric / 3 > 1'), ('grp / 2 = 1'), ('grp % 3 = 0'), ('abs(grp - 5) < 2'),
  ('coalesce(grp, 0) = 0'), ('grp BETWEEN 2 AND 5'), ('price::int = 2'), ('price::numeric(10,0) = 2'),
  ('grp = 1.5'), ('grp < 2.5'), ('grp = 2.0'), ('f::numeric = 0.1'), ('big::float8 > 1e18'),
  ('grp = big'), ('grp::bigint * 4294967296 > 0'), ('-grp < -3'), ('price IS NULL AND f IS NOT NULL'),
  ('name = id'), ('name < id'), ('CASE WHEN grp > 3 THEN true ELSE false END');

CREATE TEMP TABLE fid_forms (n serial, ordered bool, sql text);
INSERT INTO fid_forms (ordered, sql)
SELECT false, s || c
  FROM fid_conds,
       (VALUES ('SELECT id FROM %T WHERE '),
               ('SELECT count(*), sum(grp), sum(price) FROM %T WHERE '),
               ('SELECT id, grp * 2, price * 3, upper(name), d + 1 FROM %T WHERE ')) AS shapes(s);
INSERT INTO fid_forms (ordered, sql) VALUES
  (false, 'SELECT * FROM %T'),
  (false, 'SELECT count(*), count(grp), count(DISTINCT grp), sum(grp), sum(big::numeric), avg(grp), avg(price) FROM %T'),
  (false, 'SELECT min(price), max(price), sum(price), min(f), max(f), min(d), max(d), min(ts), max(ts) FROM %T'),
  (false, 'SELECT bool_and(flag), bool_or(flag), every(flag) FROM %T'),
  (false, 'SELECT min(name), max(name), count(DISTINCT name) FROM %T'),
  (false, 'SELECT grp, count(*), sum(price), min(name), max(d) FROM %T GROUP BY grp'),
  (false, 'SELECT grp, count(*) FROM %T GROUP BY grp HAVING count(*) > 5'),
  (false, 'SELECT flag, avg(price), sum(f) FROM %T GROUP BY flag'),
  (false, 'SELECT grp % 3, count(*) FROM %T GROUP BY 1'),
  (false, 'SELECT DISTINCT grp FROM %T'),
  (false, 'SELECT DISTINCT name FROM %T'),
  (false, 'SELECT DISTINCT lower(name) FROM %T'),
  (false, 'SELECT DISTINCT grp, flag FROM %T'),
  (false, 'SELECT DISTINCT grp % 3 FROM %T WHERE price > 1'),
  (false, 'SELECT DISTINCT d, big FROM %T'),
  (false, 'SELECT grp FROM %T GROUP BY grp'),
  (false, 'SELECT grp, flag FROM %T WHERE grp > 2 GROUP BY grp, flag'),
  (true, 'SELECT DISTINCT grp FROM %T ORDER BY grp NULLS FIRST LIMIT 3'),
  (true, 'SELECT id, price FROM %T ORDER BY price DESC NULLS LAST, id LIMIT 5'),
  (true, 'SELECT id, grp FROM %T ORDER BY grp, id LIMIT 7'),
  (true, 'SELECT id, grp FROM %T ORDER BY grp NULLS FIRST, id LIMIT 7'),
  (true, 'SELECT id, name FROM %T ORDER BY name, id LIMIT 10'),
  (true, 'SELECT id, name FROM %T ORDER BY name DESC, id LIMIT 10'),
  (true, 'SELECT id FROM %T ORDER BY id LIMIT 3 OFFSET 2'),
  (true, 'SELECT id, f FROM %T WHERE f IS NOT NULL ORDER BY f, id LIMIT 4'),
  (true, 'SELECT id, d FROM %T ORDER BY d DESC NULLS LAST, id LIMIT 4'),
  (true, 'SELECT id, ts FROM %T ORDER BY ts, id LIMIT 4'),
  (true, 'SELECT grp, count(*) FROM %T GROUP BY grp ORDER BY count(*) DESC, grp LIMIT 3'),
  (true, 'SELECT id, big FROM %T ORDER BY big DESC NULLS FIRST, price, grp LIMIT 6'),
  (true, 'SELECT id, price * 2 FROM %T WHERE grp > 2 ORDER BY price, big LIMIT 5'),
  (true, 'SELECT id FROM %T WHERE flag ORDER BY ts DESC, grp LIMIT 3'),
  (true, 'SELECT id, f FROM %T ORDER BY f DESC NULLS LAST, grp LIMIT 2 OFFSET 1'),
  (false, 'SELECT a.id, b.id FROM %T a JOIN %T b ON a.id = b.id WHERE a.grp = 1'),
  (false, 'SELECT a.id FROM %T a LEFT JOIN %T b ON a.id = b.id AND b.grp = 2 WHERE b.id IS NULL AND a.grp = 3'),
  (false, 'SELECT a.id FROM %T a WHERE EXISTS (SELECT 1 FROM %T b WHERE b.id = a.id AND b.grp = 4)'),
  (false, 'SELECT a.id FROM %T a WHERE NOT EXISTS (SELECT 1 FROM %T b WHERE b.id = a.id AND b.flag)'),
  (false, 'SELECT a.grp, count(*) FROM %T a JOIN %T b ON a.grp = b.grp GROUP BY a.grp'),
  (false, 'SELECT l.id, t.name FROM (VALUES (''k1''), (''k7''), (''nope'')) AS l(id) JOIN %T t USING (id)'),
  (false, 'SELECT l.id, t.grp FROM (VALUES (''k2'', 1), (''k3'', 9), (''k4'', 0)) AS l(id, g) JOIN %T t ON t.id = l.id AND t.grp > l.g'),
  (false, 'SELECT l.id, t.grp FROM (VALUES (''k5''), (''K5''), (NULL)) AS l(id) LEFT JOIN %T t ON t.id = l.id'),
  (false, 'SELECT l.id, t.grp FROM (VALUES (''K6''), (''k8'')) AS l(id) JOIN %T t ON t.id = lower(l.id)'),
  (false, 'SELECT id FROM %T WHERE id = ANY (ARRAY[''k1'', ''k2'', ''k40''])'),
  (false, 'SELECT count(*) FROM %T WHERE grp IN (SELECT grp FROM %T WHERE flag)'),
  (false, 'SELECT id, row_number() OVER (PARTITION BY grp ORDER BY id) FROM %T'),
  (false, 'SELECT sum(price) FILTER (WHERE flag), count(*) FILTER (WHERE name LIKE ''item%'') FROM %T'),
  (false, 'SELECT string_agg(id, '','' ORDER BY id) FROM %T WHERE grp = 2'),
  (false, 'SELECT array_agg(grp ORDER BY grp NULLS FIRST) FROM %T WHERE name = ''abc'''),
  (false, 'SELECT count(*) FROM %T WHERE price * 3 = 0.30 AND grp IS NOT NULL'),
  (false, 'SELECT max(grp * 1073741824) FROM %T'),
  (false, 'SELECT sum(big) FROM %T'),
  (false, 'SELECT sum(grp::bigint * 1000000000000) FROM %T'),
  (false, 'SELECT round(avg(f)::numeric, 9), round(sum(f)::numeric, 9) FROM %T WHERE f < 1e300 AND f > -1e300'),
  (false, 'SELECT id FROM %T WHERE name = ''item-9'' AND id = ''k7'''),
  (false, 'SELECT id FROM %T WHERE name = ''ITEM-9'' AND id IN (''k7'', ''k9'', ''k19'')'),
  (false, 'SELECT count(*) FROM (SELECT * FROM %T LIMIT 10) s'),
  (false, 'SELECT id FROM %T WHERE id = ''k1'' LIMIT 1'),
  (false, 'SELECT count(*) FROM %T t1, %T t2 WHERE t1.id = t2.id AND t1.price > t2.price - 1');

-- fid_answer: the form's rows as text (sorted unless the form orders them),
-- or the SQLSTATE of its error
CREATE FUNCTION fid_answer(sql text, tab text, ordered bool) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  out text;
BEGIN
  EXECUTE format('SELECT array_agg(r::text %s)::text FROM (%s) r',
                 CASE WHEN ordered THEN '' ELSE 'ORDER BY r::text' END,
                 replace(sql, '%T', tab)) INTO out;
  RETURN coalesce(out, '{}');
EXCEPTION WHEN OTHERS THEN
  RETURN 'ERROR ' || SQLSTATE;
END $$;

SELECT count(*) AS forms FROM fid_forms;
SELECT n, replace(sql, '%T', 'fid') AS form, sharded, local
  FROM (SELECT n, sql, fid_answer(sql, 'fid', ordered) AS sharded,
               fid_answer(sql, 'fid_local', ordered) AS local
          FROM fid_forms) AS a
 WHERE sharded IS DISTINCT FROM local
 ORDER BY n;

-- what stays on the front: the scan's Filter, beside the shard's text
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM fid WHERE grp * 1073741824 > 0;
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM fid WHERE price * 3 = 0.30 AND name = 'ITEM-9';
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM fid WHERE name LIKE 'item%' AND upper(name) = 'X';

-- modifications: what goes to the shards whole, and what runs row by row
-- (new values or conditions a dialect does not compute as PostgreSQL does,
-- joins on the key, RETURNING), each run on both tables: its answer (the
-- rows it returns or counts, or its error) and then every row compared
CREATE TEMP TABLE fid_src (id text, grp int, price numeric(10,2), name text);
INSERT INTO fid_src VALUES ('k1', 100, 1.11, 'from-src'), ('k2', 101, NULL, NULL),
  ('k7', 102, 2.5, 'Seven'), ('k8', 101, 0.07, 'eight'), ('nope', 1, 1, 'n'), ('k7', 103, 1, 'twice');
CREATE TEMP TABLE fid_mods (n serial, sql text);
INSERT INTO fid_mods (sql) VALUES
  ('UPDATE %T SET price = price / 3 WHERE id = ''k1'''),
  ('UPDATE %T SET grp = grp * 1073741824 WHERE id = ''k3'''),
  ('UPDATE %T SET grp = grp + 1, price = price * 2 WHERE id = ''k3'''),
  ('UPDATE %T SET name = upper(name) WHERE id = ''k7'' RETURNING id, name'),
  ('UPDATE %T SET price = price * 3 + 0.01 WHERE id = ''k2'' RETURNING id, price'),
  ('UPDATE %T SET price = price / 7 WHERE id IN (''k4'', ''k5'', ''k6'') RETURNING id, price'),
  ('UPDATE %T SET name = name || ''!'' WHERE id = ''k9'' AND upper(name) = ''ITEM-9'' RETURNING name'),
  ('UPDATE %T SET big = big + 1 WHERE id = ''k1'''),
  ('UPDATE %T SET f = f * 2, d = d + 30, flag = NOT flag WHERE id = ''k6'' RETURNING f, d, flag'),
  ('UPDATE %T SET grp = 5 WHERE id = ''k10'' RETURNING *'),
  ('UPDATE %T t SET grp = s.grp, name = s.name FROM fid_src s WHERE t.id = s.id AND s.grp < 103 RETURNING t.id, t.grp, s.name'),
  ('UPDATE %T t SET price = t.price + s.price FROM fid_src s WHERE t.id = s.id AND s.price IS NOT NULL AND s.grp < 103'),
  ('UPDATE %T t SET name = s.name FROM fid_src s WHERE t.id = s.id AND s.id = ''k7'' AND s.grp = 103'),
  ('DELETE FROM %T t USING fid_src s WHERE t.id = s.id AND s.grp = 101 RETURNING t.id, t.grp'),
  ('DELETE FROM %T WHERE id = ''k12'' AND length(name) > 2 RETURNING *'),
  ('DELETE FROM %T WHERE id = ''k13'' RETURNING id, price * 2'),
  ('UPDATE %T SET price = price * 1.5 WHERE upper(name) LIKE ''ZETA%'' RETURNING id, price'),
  ('DELETE FROM %T WHERE price * 3 = 0.30');

-- fid_mod_answer: what the modification returns (or how many rows it
-- changed), or the SQLSTATE of its error
CREATE FUNCTION fid_mod_answer(sql text, tab text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  out text;
  n bigint;
BEGIN
  IF sql LIKE '%RETURNING%' THEN
    EXECUTE format('WITH r AS (%s) SELECT array_agg(r::text ORDER BY r::text)::text FROM r',
                   replace(sql, '%T', tab)) INTO out;
    RETURN coalesce(out, '{}');
  END IF;
  EXECUTE replace(sql, '%T', tab);
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n || ' rows';
EXCEPTION WHEN OTHERS THEN
  RETURN 'ERROR ' || SQLSTATE;
END $$;

SET collegedb.allow_multi_shard_modify = on;
CREATE TEMP TABLE fid_mod_results (n int, sql text, sharded text, local text, same_rows bool);
DO $$
DECLARE
  m record;
BEGIN
  FOR m IN SELECT * FROM fid_mods ORDER BY n LOOP
    INSERT INTO fid_mod_results
    SELECT m.n, m.sql, fid_mod_answer(m.sql, 'fid'), fid_mod_answer(m.sql, 'fid_local'),
           fid_answer('SELECT * FROM %T', 'fid', false) = fid_answer('SELECT * FROM %T', 'fid_local', false);
  END LOOP;
END $$;
RESET collegedb.allow_multi_shard_modify;
SELECT count(*) AS modifications, count(*) FILTER (WHERE sharded = local AND same_rows) AS same,
       count(*) FILTER (WHERE sharded LIKE 'ERROR%') AS errors FROM fid_mod_results;
SELECT n, replace(sql, '%T', 'fid') AS form, sharded, local, same_rows
  FROM fid_mod_results WHERE sharded IS DISTINCT FROM local OR NOT same_rows ORDER BY n;
-- the key column cannot change (the row would belong to another shard)
SELECT try($$UPDATE fid SET id = 'other' WHERE id = 'k14'$$);
-- without key equality or a join on the key: every shard, only when asked
SELECT try($$UPDATE fid SET name = upper(name) WHERE grp = 2$$);
-- the row-by-row path: the rows fetched and locked with their identity,
-- then one statement per row by its key
EXPLAIN (VERBOSE, COSTS OFF) UPDATE fid SET name = upper(name) WHERE id = 'k7';
EXPLAIN (VERBOSE, COSTS OFF) UPDATE fid t SET grp = s.grp FROM fid_src s WHERE t.id = s.id;
EXPLAIN (VERBOSE, COSTS OFF) DELETE FROM fid t USING fid_src s WHERE t.id = s.id RETURNING t.id;
DROP TABLE fid_mod_results;
DROP FUNCTION fid_mod_answer(text, text);

-- under a generic plan the fetch routes by the parameter's value
SET plan_cache_mode = force_generic_plan;
PREPARE fid_up(text, int) AS UPDATE fid SET name = upper(name), grp = grp + $2 WHERE id = $1 RETURNING id, name, grp;
PREPARE fid_up_local(text, int) AS UPDATE fid_local SET name = upper(name), grp = grp + $2 WHERE id = $1 RETURNING id, name, grp;
EXECUTE fid_up('k15', 1);
EXECUTE fid_up_local('k15', 1);
EXECUTE fid_up('k16', 2);
EXECUTE fid_up_local('k16', 2);
DEALLOCATE fid_up;
DEALLOCATE fid_up_local;
RESET plan_cache_mode;
SELECT fid_answer('SELECT * FROM %T', 'fid', false) = fid_answer('SELECT * FROM %T', 'fid_local', false) AS same_rows;
-- several rows per key: each row is changed by its own identity (the
-- shard's row identity, or MySQL's primary key), never the key's other rows
SELECT shard, ok FROM collegedb.run_on_all(
  'CREATE TABLE fid_multi (k VARCHAR(8), n INTEGER, v DECIMAL(10,2), PRIMARY KEY (k, n))') ORDER BY shard;
CREATE FOREIGN TABLE fid_multi (k text, n int, v numeric(10,2)) SERVER collegedb OPTIONS (key_column 'k');
CREATE TABLE fid_multi_local (k text, n int, v numeric(10,2), PRIMARY KEY (k, n));
INSERT INTO fid_multi SELECT k, n, n * 1.1 FROM unnest(ARRAY['a', 'b', 'c']) k, generate_series(1, 4) n;
INSERT INTO fid_multi_local SELECT * FROM fid_multi;
UPDATE fid_multi SET v = v / 3 WHERE k = 'a' AND v * 3 > 5 RETURNING k, n, v;
UPDATE fid_multi_local SET v = v / 3 WHERE k = 'a' AND v * 3 > 5 RETURNING k, n, v;
DELETE FROM fid_multi m USING (VALUES ('b'), ('z')) s(k) WHERE m.k = s.k AND m.n > 2 RETURNING m.k, m.n;
DELETE FROM fid_multi_local m USING (VALUES ('b'), ('z')) s(k) WHERE m.k = s.k AND m.n > 2;
DELETE FROM fid_multi m WHERE k = 'c' AND upper(k) = 'C' AND n % 2 = 0 RETURNING *;
DELETE FROM fid_multi_local m WHERE k = 'c' AND n % 2 = 0;
SELECT (SELECT array_agg(m::text ORDER BY k, n) FROM fid_multi m) =
       (SELECT array_agg(m::text ORDER BY k, n) FROM fid_multi_local m) AS same_rows;
DROP FOREIGN TABLE fid_multi;
DROP TABLE fid_multi_local;
SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE fid_multi') ORDER BY shard;
-- a table without a primary key: MySQL cannot tell its rows apart
SELECT shard, ok FROM collegedb.run_on_all('CREATE TABLE fid_nopk (k VARCHAR(8), v DECIMAL(10,2))') ORDER BY shard;
CREATE FOREIGN TABLE fid_nopk (k text, v numeric(10,2)) SERVER collegedb OPTIONS (key_column 'k');
INSERT INTO fid_nopk VALUES ('a', 1.5), ('a', 2.5);
SELECT try($$UPDATE fid_nopk SET v = v / 3 WHERE k = 'a' AND upper(k) = 'A'$$);
SELECT k, v FROM fid_nopk ORDER BY v;
DROP FOREIGN TABLE fid_nopk;
SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE fid_nopk') ORDER BY shard;

-- aggregates run on the shards: each returns its partial groups, combined
-- here; HAVING stays here; what a dialect would not compute exactly (float
-- sums, text groups outside PostgreSQL) is aggregated here from the rows
EXPLAIN (VERBOSE, COSTS OFF)
SELECT grp, count(*), count(price), sum(price), avg(grp), min(d), max(big), bool_and(flag), bool_or(flag)
  FROM fid WHERE grp > 1 GROUP BY grp HAVING count(*) > 1;
EXPLAIN (VERBOSE, COSTS OFF) SELECT count(*), sum(grp) FROM fid;
EXPLAIN (VERBOSE, COSTS OFF) SELECT name, count(*) FROM fid GROUP BY name;
EXPLAIN (VERBOSE, COSTS OFF) SELECT sum(f) FROM fid;
EXPLAIN (VERBOSE, COSTS OFF) SELECT DISTINCT grp, flag FROM fid;
-- a few outer rows joined on the key: one keyed read each, no scan of every shard
-- (planned for a table of unknown size: the shards' own estimates, which
-- find fid tiny, would make one scan of every shard as cheap)
ALTER FOREIGN TABLE fid OPTIONS (ADD use_remote_estimate 'false');
EXPLAIN (COSTS OFF) SELECT l.id, t.name FROM (VALUES ('k1'), ('k7')) AS l(id) JOIN fid t USING (id);
ALTER FOREIGN TABLE fid OPTIONS (DROP use_remote_estimate);
EXPLAIN (VERBOSE, COSTS OFF) SELECT count(*) FROM fid WHERE upper(name) = 'ABC';
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT count(*) FROM fid;
SELECT grp, count(*), sum(price), avg(grp), min(d), max(big), bool_and(flag), bool_or(flag)
  FROM fid GROUP BY grp HAVING count(*) > 1 ORDER BY grp NULLS FIRST;
SELECT count(*), sum(grp), avg(price), min(price), max(ts) FROM fid WHERE grp > 100;
SELECT grp, count(*) FROM fid WHERE grp > 100 GROUP BY grp;

-- ORDER BY ... LIMIT: each shard sorts and limits, the front sorts the
-- shards' rows again (not for text keys: each shard has its collation)
EXPLAIN (VERBOSE, COSTS OFF) SELECT id, price FROM fid ORDER BY price DESC NULLS LAST, grp LIMIT 5;
EXPLAIN (VERBOSE, COSTS OFF) SELECT id, grp * 2 FROM fid WHERE flag ORDER BY grp NULLS FIRST, big LIMIT 3 OFFSET 2;
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM fid ORDER BY name LIMIT 3;
SELECT id, price FROM fid ORDER BY price DESC NULLS LAST, grp, id LIMIT 5;
SELECT id, grp * 2 FROM fid WHERE flag ORDER BY grp NULLS FIRST, big LIMIT 3 OFFSET 2;
SELECT id, d FROM fid ORDER BY d, id LIMIT 4;

-- a move in flight: the key's rows count once, from the shard it lives on.
-- The journal says a move of 'mv' is under way (held by this session, so
-- that no worker takes it), and the shards hold what the move would have
-- written by then.
INSERT INTO fid (id, grp, price) VALUES ('mv', 3, 1.25);
INSERT INTO fid_local (id, grp, price) VALUES ('mv', 3, 1.25);
SELECT m.shard AS mv_source, (SELECT name FROM collegedb.shards WHERE name <> m.shard ORDER BY name LIMIT 1) AS mv_target
  FROM collegedb.mappings m WHERE m.key = collegedb.mapping_key('mv') \gset
INSERT INTO collegedb.move (key, raw_key, source, target, step, lease_pid, lease_backend_start, next_attempt_at)
SELECT collegedb.mapping_key('mv'), 'mv', :'mv_source', :'mv_target', 'copied', pg_backend_pid(),
       (SELECT backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()), now() + interval '1 day';
-- the target has committed its copy, the source not yet its delete
SELECT collegedb.run_on_shard(:'mv_target', 'INSERT INTO fid (id, grp, price) VALUES ($1, $2, $3)', 'mv', 3, 1.25);
SELECT (SELECT fid_answer('SELECT grp, count(*), sum(grp), max(big) FROM %T GROUP BY grp', 'fid', false)) =
       (SELECT fid_answer('SELECT grp, count(*), sum(grp), max(big) FROM %T GROUP BY grp', 'fid_local', false)) AS once_before_source,
       (SELECT count(*) FROM fid WHERE grp = 3) AS grp_3;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT count(*) FROM fid;
-- the source step has committed: the rows live on the target only
SELECT collegedb.run_on_shard(:'mv_source', 'DELETE FROM fid WHERE id = $1', 'mv');
UPDATE collegedb.move SET step = 'source_done' WHERE raw_key = 'mv';
SELECT (SELECT fid_answer('SELECT grp, count(*), sum(grp), max(big) FROM %T GROUP BY grp', 'fid', false)) =
       (SELECT fid_answer('SELECT grp, count(*), sum(grp), max(big) FROM %T GROUP BY grp', 'fid_local', false)) AS once_after_source;
UPDATE collegedb.move SET step = 'done', raw_key = NULL WHERE raw_key = 'mv';
SELECT collegedb.run_on_shard(:'mv_target', 'DELETE FROM fid WHERE id = $1', 'mv');
DELETE FROM fid_local WHERE id = 'mv';
DELETE FROM collegedb.move WHERE key = collegedb.mapping_key('mv');
SELECT collegedb.delete_mapping('mv');

-- dropped and added columns work as postgres_fdw's: a dropped column is
-- no longer read, an added one is read once the shards' tables have it
ALTER FOREIGN TABLE fid DROP COLUMN ts;
ALTER TABLE fid_local DROP COLUMN ts;
SELECT id, grp, name FROM fid WHERE id IN ('k1', 'k2') ORDER BY id;
SELECT count(*), sum(grp) FROM fid;
SELECT * FROM fid WHERE id = 'k5';
INSERT INTO fid (id, grp, name) VALUES ('after-drop', 7, 'new');
INSERT INTO fid_local (id, grp, name) VALUES ('after-drop', 7, 'new');
UPDATE fid SET name = 'renamed' WHERE id = 'after-drop';
UPDATE fid_local SET name = 'renamed' WHERE id = 'after-drop';
SELECT * FROM fid WHERE id = 'after-drop';
SELECT shard, ok FROM collegedb.run_on_all('ALTER TABLE fid ADD COLUMN extra INTEGER') ORDER BY shard;
ALTER FOREIGN TABLE fid ADD COLUMN extra int;
ALTER TABLE fid_local ADD COLUMN extra int;
UPDATE fid SET extra = 5 WHERE id = 'k1';
UPDATE fid_local SET extra = 5 WHERE id = 'k1';
INSERT INTO fid (id, extra) VALUES ('after-add', 9);
INSERT INTO fid_local (id, extra) VALUES ('after-add', 9);
SELECT id, grp, extra FROM fid WHERE extra IS NOT NULL ORDER BY id;
-- and every form still answers as the local table does
SELECT n, replace(sql, '%T', 'fid') AS form, sharded, local
  FROM (SELECT n, sql, fid_answer(sql, 'fid', ordered) AS sharded,
               fid_answer(sql, 'fid_local', ordered) AS local
          FROM fid_forms WHERE sql NOT LIKE '%ts%') AS a
 WHERE sharded IS DISTINCT FROM local
 ORDER BY n;

DROP FUNCTION fid_answer(text, text, bool);
DROP FOREIGN TABLE fid;
DROP TABLE fid_local;
DELETE FROM collegedb.mapping;
SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE fid') ORDER BY shard;
