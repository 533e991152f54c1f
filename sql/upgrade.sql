-- Upgrading from the released 0.1: ALTER EXTENSION collegedb UPDATE must end
-- with the same objects as a fresh install of the current version (functions
-- with their signatures and properties, tables and their columns,
-- constraints, indexes, triggers, views, grants, configuration dumps), and
-- what 0.1 stored must still route afterwards.
\i sql/common/env.sql
\set up_db :sqlite_dir '/upgrade_a.db'

-- Everything that makes up the extension, one line per object or property.
CREATE FUNCTION public.collegedb_objects()
RETURNS TABLE (kind text, object text)
LANGUAGE sql
AS $$
  WITH ext AS (SELECT oid FROM pg_extension WHERE extname = 'collegedb'),
  nsp AS (SELECT oid FROM pg_namespace WHERE nspname = 'collegedb')
  SELECT 'member', pg_describe_object(d.classid, d.objid, d.objsubid)
    FROM pg_depend d, ext
   WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid AND d.deptype = 'e'
  UNION ALL
  SELECT 'function', format('%s -> %s %s strict=%s secdef=%s vol=%s config=%s acl=%s src=%s',
                            p.oid::regprocedure, p.prorettype::regtype,
                            CASE WHEN p.proretset THEN 'setof' ELSE '' END,
                            p.proisstrict, p.prosecdef, p.provolatile, p.proconfig,
                            p.proacl, md5(p.prosrc || coalesce(p.probin, '')))
    FROM pg_proc p, nsp WHERE p.pronamespace = nsp.oid
  UNION ALL
  SELECT 'argdefaults', format('%s: %s', p.oid::regprocedure, pg_get_function_arguments(p.oid))
    FROM pg_proc p, nsp WHERE p.pronamespace = nsp.oid
  UNION ALL
  SELECT 'relation', format('%s kind=%s acl=%s', c.oid::regclass, c.relkind, c.relacl)
    FROM pg_class c, nsp WHERE c.relnamespace = nsp.oid
  UNION ALL
  SELECT 'column', format('%s.%s %s notnull=%s default=%s acl=%s', a.attrelid::regclass, a.attname,
                          format_type(a.atttypid, a.atttypmod), a.attnotnull,
                          pg_get_expr(ad.adbin, ad.adrelid), a.attacl)
    FROM pg_attribute a
    JOIN pg_class c ON c.oid = a.attrelid
    JOIN nsp ON c.relnamespace = nsp.oid
    LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
   WHERE a.attnum > 0 AND NOT a.attisdropped
  UNION ALL
  SELECT 'constraint', format('%s %s: %s', co.conrelid::regclass, co.conname, pg_get_constraintdef(co.oid))
    FROM pg_constraint co, nsp WHERE co.connamespace = nsp.oid
  UNION ALL
  SELECT 'index', pg_get_indexdef(i.indexrelid)
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN nsp ON c.relnamespace = nsp.oid
  UNION ALL
  SELECT 'trigger', pg_get_triggerdef(t.oid)
    FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN nsp ON c.relnamespace = nsp.oid
   WHERE NOT t.tgisinternal
  UNION ALL
  SELECT 'view', format('%s: %s', c.oid::regclass, pg_get_viewdef(c.oid))
    FROM pg_class c, nsp WHERE c.relnamespace = nsp.oid AND c.relkind = 'v'
  UNION ALL
  SELECT 'config dump', format('%s where %s', cfg::regclass, cond)
    FROM pg_extension e, ext,
         unnest(e.extconfig, e.extcondition) AS u(cfg, cond)
   WHERE e.oid = ext.oid
  UNION ALL
  SELECT 'schema', format('%s acl=%s', n.nspname, n.nspacl)
    FROM pg_namespace n, nsp WHERE n.oid = nsp.oid
  UNION ALL
  SELECT 'wrapper', format('%s handler=%s validator=%s acl=%s', w.fdwname, w.fdwhandler::regproc,
                           w.fdwvalidator::regproc, w.fdwacl)
    FROM pg_foreign_data_wrapper w WHERE w.fdwname = 'collegedb'
$$;

-- 0.1, with a shard, a mapping, a registered table and a setting
CREATE EXTENSION collegedb VERSION '0.1';
SELECT extversion FROM pg_extension WHERE extname = 'collegedb';
CREATE SERVER up_a FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'up_db');
SELECT collegedb.add_shard('up_a');
SELECT count(*) FROM collegedb.run_on_all('DROP TABLE IF EXISTS up_users');
SELECT count(*) FROM collegedb.run_on_all('CREATE TABLE up_users (id TEXT PRIMARY KEY, name TEXT)');
SELECT collegedb.register_table('up_users', 'id');
SELECT collegedb.configure(mapping_cache_ttl => '5 seconds');
SELECT collegedb.run('u1', 'INSERT INTO up_users VALUES ($1, $2)', 'u1', 'Ann');
-- lookup keys, a finished and an unfinished move, as 0.1 kept them (in clear)
SELECT collegedb.add_lookup_keys('u1', ARRAY['email:u1@example.com']);
INSERT INTO collegedb.move (key, source, target, step) VALUES ('u0', 'up_a', 'up_a', 'done');
INSERT INTO collegedb.move (key, source, target, step) VALUES ('u9', 'up_a', 'up_a', 'failed');
-- (held by this session, so that no coordinator takes it over)
INSERT INTO collegedb.move (key, source, target, step, lease_pid)
VALUES ('u8', 'up_a', 'up_a', 'journaled', pg_backend_pid());

ALTER EXTENSION collegedb UPDATE;
SELECT extversion = (SELECT default_version FROM pg_available_extensions WHERE name = 'collegedb')
       AS at_default_version
  FROM pg_extension WHERE extname = 'collegedb';

-- what 0.1 stored still routes
SELECT collegedb.first('u1', 'SELECT name FROM up_users WHERE id = $1', 'u1');
SELECT name, value FROM collegedb.settings WHERE name = 'mapping_cache_ttl';
SELECT table_name, key_column FROM collegedb.tables;
SELECT collegedb.shard_for_key('u1');
-- with hash_mappings, 0.2 keeps lookup and journal keys hashed (an
-- unfinished move keeps its key beside, until it ends)
SELECT collegedb.get_lookup_keys('email:u1@example.com')
       = ARRAY[collegedb.mapping_key('u1'), collegedb.mapping_key('email:u1@example.com')] AS lookup_keys_hashed;
SELECT step, key = collegedb.mapping_key(coalesce(raw_key, CASE step WHEN 'done' THEN 'u0' ELSE 'u9' END)) AS hashed,
       raw_key, generation, attempts
  FROM collegedb.move ORDER BY id;
DELETE FROM collegedb.move;
DELETE FROM collegedb.mapping WHERE record = collegedb.mapping_key('u1') AND key <> record;

-- topology groups reach a shard registered under 0.1 (test/t/110_topology.pl
-- shows a shard without the shard-side tables getting them)
SELECT collegedb.topology_update('up_group', '[{"id": "up_a", "state": "active"}]');
SELECT collegedb.topology_wait('up_group', '60 s') AS delivered;
SELECT * FROM collegedb.all_on_shard('up_a',
  'SELECT group_name, version FROM collegedb_topology');
SELECT collegedb.topology_delete('up_group');

CREATE TEMP TABLE upgraded AS SELECT * FROM public.collegedb_objects();
SELECT count(*) FROM collegedb.run_on_all('DROP TABLE up_users');
DROP EXTENSION collegedb CASCADE;

-- a fresh install of the default version
CREATE EXTENSION collegedb;
CREATE TEMP TABLE fresh AS SELECT * FROM public.collegedb_objects();

-- the same objects either way: both lists are empty
SELECT 'only after upgrade' AS side, * FROM (SELECT * FROM upgraded EXCEPT ALL SELECT * FROM fresh) d
UNION ALL
SELECT 'only in a fresh install', * FROM (SELECT * FROM fresh EXCEPT ALL SELECT * FROM upgraded) d
ORDER BY 1, 2, 3;
SELECT count(*) > 100 AS compared_many_objects FROM fresh;

DROP EXTENSION collegedb;
DROP FUNCTION public.collegedb_objects();
