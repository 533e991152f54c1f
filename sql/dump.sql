-- pg_dump keeps collegedb's catalog: every table and sequence of the
-- extension is marked as configuration (its rows are dumped), except
-- commit_decision, whose rows mean something only where they were written;
-- the settings row a restore copies in replaces the default one.
-- test/t/130_dump_restore.pl dumps and restores a whole front.
CREATE EXTENSION collegedb;
\set VERBOSITY terse

-- the extension's tables and sequences, and whether pg_dump dumps their rows
SELECT c.relname, c.relkind, u.cond IS NOT NULL AS dumped, coalesce(u.cond, '') AS filter
  FROM pg_class c
  JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e'
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'collegedb'
  LEFT JOIN LATERAL (SELECT x.cond FROM unnest(e.extconfig, e.extcondition) AS x(cfg, cond)
                      WHERE x.cfg = c.oid) AS u ON true
 WHERE c.relkind IN ('r', 'S')
 ORDER BY c.relname COLLATE "C";

-- a restore's COPY of the settings row replaces the default row
COPY collegedb.config (strategy, migration_concurrency, mapping_cache_ttl) FROM stdin;
round-robin	7	00:01:00
\.
SELECT count(*) AS rows FROM collegedb.config;
SELECT name, value FROM collegedb.settings WHERE NOT is_default ORDER BY name;
-- a bad row changes nothing
COPY collegedb.config (strategy) FROM stdin;
nonsense
\.
SELECT name, value FROM collegedb.settings WHERE NOT is_default ORDER BY name;

DROP EXTENSION collegedb;
