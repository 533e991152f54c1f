-- Upgrading from the released 0.1: ALTER EXTENSION collegedb UPDATE, which
-- runs the hand-written upgrade scripts, must end with the same objects as a
-- fresh install of the current version from sql/collegedb.sql (functions
-- with their bodies, properties, defaults and privileges, tables and their
-- columns in order, constraints, indexes, triggers, policies, rules, views,
-- types, comments, grants and initial privileges, configuration dumps, the
-- wrapper and its server), and what 0.1 stored must still route afterwards.
-- A difference is listed below as the object only one side has.
\i sql/common/env.sql
\set up_db :sqlite_dir '/upgrade_a.db'

-- Everything that makes up the extension, one line per object or property.
-- Privileges are compared as they take effect: a NULL ACL (never granted or
-- revoked) reads as the default it stands for (acldefault), so an object
-- whose PUBLIC privileges were revoked by a blanket REVOKE in one script and
-- by its own REVOKE in another compares equal, and a missing REVOKE does not.
CREATE FUNCTION public.collegedb_objects()
RETURNS TABLE (kind text, object text)
LANGUAGE sql
AS $$
  WITH ext AS (SELECT e.oid FROM pg_extension e WHERE e.extname = 'collegedb'),
  nsp AS (SELECT n.oid FROM pg_namespace n WHERE n.nspname = 'collegedb'),
  member AS (SELECT d.classid, d.objid
               FROM pg_depend d, ext
              WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid
                AND d.deptype = 'e'),
  rel AS (SELECT c.* FROM pg_class c, nsp WHERE c.relnamespace = nsp.oid),
  fn AS (SELECT p.* FROM pg_proc p, nsp WHERE p.pronamespace = nsp.oid)
  -- the extension itself, and what belongs to it
  SELECT 'extension', format('%s version=%s schema=%s relocatable=%s', e.extname, e.extversion,
                             e.extnamespace::regnamespace, e.extrelocatable)
    FROM pg_extension e, ext WHERE e.oid = ext.oid
  UNION ALL
  SELECT 'member', pg_describe_object(m.classid, m.objid, 0) FROM member m
  UNION ALL
  SELECT 'schema', format('%s owner=%s acl=%s', n.nspname, n.nspowner::regrole,
                          coalesce(n.nspacl, acldefault('n', n.nspowner)))
    FROM pg_namespace n, nsp WHERE n.oid = nsp.oid
  UNION ALL
  -- functions: signature, result, properties, body, arguments with their
  -- names, modes and defaults, privileges
  SELECT 'function', format('%s -> %s kind=%s lang=%s strict=%s secdef=%s leakproof=%s vol=%s '
                            'parallel=%s cost=%s rows=%s support=%s variadic=%s config=%s owner=%s',
                            p.oid::regprocedure, pg_get_function_result(p.oid), p.prokind,
                            l.lanname, p.proisstrict, p.prosecdef, p.proleakproof, p.provolatile,
                            p.proparallel, p.procost, p.prorows, p.prosupport,
                            p.provariadic::regtype, p.proconfig, p.proowner::regrole)
    FROM fn p JOIN pg_language l ON l.oid = p.prolang
  UNION ALL
  SELECT 'function body', format('%s: src=%s bin=%s sqlbody=%s', p.oid::regprocedure,
                                 md5(p.prosrc), p.probin, md5(pg_get_function_sqlbody(p.oid)))
    FROM fn p
  UNION ALL
  SELECT 'function arguments', format('%s: %s', p.oid::regprocedure, pg_get_function_arguments(p.oid))
    FROM fn p
  UNION ALL
  SELECT 'function acl', format('%s: %s', p.oid::regprocedure,
                                coalesce(p.proacl, acldefault('f', p.proowner)))
    FROM fn p
  UNION ALL
  -- relations (tables, sequences, views, indexes), their columns in order
  SELECT 'relation', format('%s kind=%s persistence=%s rowsecurity=%s forcerowsecurity=%s '
                            'replident=%s options=%s owner=%s',
                            c.oid::regclass, c.relkind, c.relpersistence, c.relrowsecurity,
                            c.relforcerowsecurity, c.relreplident, c.reloptions, c.relowner::regrole)
    FROM rel c
  UNION ALL
  SELECT 'relation acl', format('%s: %s', c.oid::regclass,
                                coalesce(c.relacl, acldefault(CASE c.relkind WHEN 'S' THEN 's' ELSE 'r' END::"char",
                                                              c.relowner)))
    FROM rel c WHERE c.relkind <> 'i'
  UNION ALL
  SELECT 'column', format('%s #%s %s %s notnull=%s default=%s identity=%s generated=%s collation=%s '
                          'storage=%s acl=%s',
                          a.attrelid::regclass,
                          row_number() OVER (PARTITION BY a.attrelid ORDER BY a.attnum),
                          a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
                          pg_get_expr(ad.adbin, ad.adrelid), a.attidentity, a.attgenerated,
                          a.attcollation::regcollation, a.attstorage, a.attacl)
    FROM pg_attribute a
    JOIN rel c ON c.oid = a.attrelid
    LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
   WHERE a.attnum > 0 AND NOT a.attisdropped
  UNION ALL
  SELECT 'constraint', format('%s%s %s: %s deferrable=%s deferred=%s validated=%s',
                              co.conrelid::regclass,
                              CASE WHEN co.contypid <> 0 THEN ' domain ' || co.contypid::regtype END,
                              co.conname, pg_get_constraintdef(co.oid), co.condeferrable,
                              co.condeferred, co.convalidated)
    FROM pg_constraint co, nsp WHERE co.connamespace = nsp.oid
  UNION ALL
  SELECT 'index', format('%s primary=%s clustered=%s replident=%s valid=%s', pg_get_indexdef(i.indexrelid),
                         i.indisprimary, i.indisclustered, i.indisreplident, i.indisvalid)
    FROM pg_index i JOIN rel c ON c.oid = i.indexrelid
  UNION ALL
  SELECT 'sequence', format('%s type=%s start=%s increment=%s min=%s max=%s cache=%s cycle=%s owned_by=%s',
                            s.seqrelid::regclass, s.seqtypid::regtype, s.seqstart, s.seqincrement,
                            s.seqmin, s.seqmax, s.seqcache, s.seqcycle,
                            (SELECT format('%s.%s', d.refobjid::regclass, a.attname)
                               FROM pg_depend d
                               JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
                              WHERE d.classid = 'pg_class'::regclass AND d.objid = s.seqrelid
                                AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a', 'i')))
    FROM pg_sequence s JOIN rel c ON c.oid = s.seqrelid
  UNION ALL
  SELECT 'trigger', format('%s enabled=%s', pg_get_triggerdef(t.oid), t.tgenabled)
    FROM pg_trigger t JOIN rel c ON c.oid = t.tgrelid
   WHERE NOT t.tgisinternal
  UNION ALL
  SELECT 'policy', format('%s %s: cmd=%s permissive=%s roles=%s using=%s check=%s', po.polrelid::regclass,
                          po.polname, po.polcmd, po.polpermissive, po.polroles::regrole[],
                          pg_get_expr(po.polqual, po.polrelid), pg_get_expr(po.polwithcheck, po.polrelid))
    FROM pg_policy po JOIN rel c ON c.oid = po.polrelid
  UNION ALL
  SELECT 'view', format('%s: %s', c.oid::regclass, pg_get_viewdef(c.oid))
    FROM rel c WHERE c.relkind IN ('v', 'm')
  UNION ALL
  SELECT 'rule', pg_get_ruledef(r.oid)
    FROM pg_rewrite r JOIN rel c ON c.oid = r.ev_class
   WHERE r.rulename <> '_RETURN'
  UNION ALL
  SELECT 'type', format('%s type=%s relation=%s', t.oid::regtype, t.typtype, t.typrelid::regclass)
    FROM pg_type t, nsp WHERE t.typnamespace = nsp.oid
  UNION ALL
  SELECT 'comment', format('%s: %s', pg_describe_object(ds.classoid, ds.objoid, ds.objsubid), ds.description)
    FROM pg_description ds
   WHERE EXISTS (SELECT 1 FROM member m WHERE m.classid = ds.classoid AND m.objid = ds.objoid)
      OR (ds.classoid = 'pg_class'::regclass AND ds.objoid IN (SELECT c.oid FROM rel c))
  UNION ALL
  -- the tables pg_dump dumps the rows of
  SELECT 'config dump', format('%s where %s', u.cfg::regclass, u.cond)
    FROM pg_extension e, ext,
         unnest(e.extconfig, e.extcondition) AS u(cfg, cond)
   WHERE e.oid = ext.oid
  UNION ALL
  -- the privileges pg_dump takes as the extension's own (it dumps GRANTs
  -- and REVOKEs made afterwards): no row stands for the default ACL
  SELECT 'initial privileges', format('%s: %s', pg_describe_object(m.classid, m.objid, 0),
                                      coalesce(ip.initprivs, acldefault(
                                        CASE m.classid
                                          WHEN 'pg_proc'::regclass THEN 'f'
                                          WHEN 'pg_namespace'::regclass THEN 'n'
                                          WHEN 'pg_foreign_data_wrapper'::regclass THEN 'F'
                                          WHEN 'pg_foreign_server'::regclass THEN 'S'
                                          WHEN 'pg_class'::regclass THEN
                                            CASE (SELECT c.relkind FROM pg_class c WHERE c.oid = m.objid)
                                              WHEN 'S' THEN 's' ELSE 'r' END
                                        END::"char",
                                        coalesce((SELECT p.proowner FROM pg_proc p WHERE m.classid = 'pg_proc'::regclass AND p.oid = m.objid),
                                                 (SELECT n.nspowner FROM pg_namespace n WHERE m.classid = 'pg_namespace'::regclass AND n.oid = m.objid),
                                                 (SELECT w.fdwowner FROM pg_foreign_data_wrapper w WHERE m.classid = 'pg_foreign_data_wrapper'::regclass AND w.oid = m.objid),
                                                 (SELECT s.srvowner FROM pg_foreign_server s WHERE m.classid = 'pg_foreign_server'::regclass AND s.oid = m.objid),
                                                 (SELECT c.relowner FROM pg_class c WHERE m.classid = 'pg_class'::regclass AND c.oid = m.objid)))))
    FROM member m
    LEFT JOIN pg_init_privs ip ON ip.classoid = m.classid AND ip.objoid = m.objid AND ip.objsubid = 0
   WHERE m.classid IN ('pg_proc'::regclass, 'pg_namespace'::regclass, 'pg_class'::regclass,
                       'pg_foreign_data_wrapper'::regclass, 'pg_foreign_server'::regclass)
  UNION ALL
  SELECT 'initial column privileges', format('%s: %s', pg_describe_object(ip.classoid, ip.objoid, ip.objsubid),
                                             ip.initprivs)
    FROM pg_init_privs ip JOIN member m ON m.classid = ip.classoid AND m.objid = ip.objoid
   WHERE ip.objsubid <> 0
  UNION ALL
  -- the foreign-data wrapper, and the servers and user mappings the
  -- extension creates
  SELECT 'wrapper', format('%s handler=%s validator=%s options=%s owner=%s acl=%s', w.fdwname,
                           w.fdwhandler::regproc, w.fdwvalidator::regproc, w.fdwoptions,
                           w.fdwowner::regrole, coalesce(w.fdwacl, acldefault('F', w.fdwowner)))
    FROM pg_foreign_data_wrapper w JOIN member m ON m.classid = 'pg_foreign_data_wrapper'::regclass
                                                AND m.objid = w.oid
  UNION ALL
  SELECT 'server', format('%s wrapper=%s type=%s version=%s options=%s owner=%s acl=%s', s.srvname,
                          w.fdwname, s.srvtype, s.srvversion, s.srvoptions, s.srvowner::regrole,
                          coalesce(s.srvacl, acldefault('S', s.srvowner)))
    FROM pg_foreign_server s
    JOIN pg_foreign_data_wrapper w ON w.oid = s.srvfdw
    JOIN member m ON m.classid = 'pg_foreign_server'::regclass AND m.objid = s.oid
  UNION ALL
  SELECT 'user mapping', format('%s on %s options=%s', um.umuser::regrole, s.srvname, um.umoptions)
    FROM pg_user_mapping um
    JOIN pg_foreign_server s ON s.oid = um.umserver
    JOIN member m ON m.classid = 'pg_user_mapping'::regclass AND m.objid = um.oid
$$;

-- 0.1, with a shard, a mapping, a registered table and a setting.  The
-- library serves the newest catalog only, and refuses an older one until
-- the update: 0.1's rows are written here as 0.1 wrote them (with
-- hash_mappings, keys as the hex SHA-256 of the key, lookup and journal
-- keys in clear), with triggers off (they run the library).
CREATE EXTENSION collegedb VERSION '0.1';
SELECT extversion FROM pg_extension WHERE extname = 'collegedb';
CREATE SERVER up_a FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'up_db');
SELECT collegedb.add_shard('up_a');
SET session_replication_role = replica;
INSERT INTO collegedb.shard (name) VALUES ('up_a');
INSERT INTO collegedb.registered_table (table_name, key_column) VALUES ('up_users', 'id');
UPDATE collegedb.config SET mapping_cache_ttl = '5 seconds';
INSERT INTO collegedb.mapping (key, record, shard, keys)
SELECT encode(sha256(k::bytea), 'hex'), encode(sha256('u1'::bytea), 'hex'), 'up_a',
       CASE k WHEN 'u1' THEN ARRAY['u1', 'email:u1@example.com'] END
  FROM unnest(ARRAY['u1', 'email:u1@example.com']) AS k;
-- a finished and an unfinished move
INSERT INTO collegedb.move (key, source, target, step) VALUES ('u0', 'up_a', 'up_a', 'done');
INSERT INTO collegedb.move (key, source, target, step) VALUES ('u9', 'up_a', 'up_a', 'failed');
-- (held by this session, so that no coordinator takes it over)
INSERT INTO collegedb.move (key, source, target, step, lease_pid)
VALUES ('u8', 'up_a', 'up_a', 'journaled', pg_backend_pid());
RESET session_replication_role;

ALTER EXTENSION collegedb UPDATE;
SELECT extversion = (SELECT default_version FROM pg_available_extensions WHERE name = 'collegedb')
       AS at_default_version
  FROM pg_extension WHERE extname = 'collegedb';

-- what 0.1 stored still routes
SELECT count(*) FROM collegedb.run_on_all('DROP TABLE IF EXISTS up_users');
SELECT count(*) FROM collegedb.run_on_all('CREATE TABLE up_users (id TEXT PRIMARY KEY, name TEXT)');
SELECT collegedb.run_on_shard('up_a', 'INSERT INTO up_users VALUES ($1, $2)', 'u1', 'Ann');
SELECT collegedb.first('u1', 'SELECT name FROM up_users WHERE id = $1', 'u1');
SELECT collegedb.first_by_lookup_key('email:u1@example.com', 'SELECT name FROM up_users WHERE id = $1', 'u1');
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
DELETE FROM collegedb.mapping WHERE record = collegedb.mapping_id('u1');

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
-- ... from its own script, not through the upgrade scripts: no column of it
-- was added to an existing table with a default (which leaves the value
-- for the rows already there behind, as 0.1--0.2 does)
SELECT count(*) AS columns_added_later
  FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
 WHERE c.relnamespace = 'collegedb'::regnamespace AND a.atthasmissing;

-- the same objects either way: both lists are empty
SELECT 'only after upgrade' AS side, * FROM (SELECT * FROM upgraded EXCEPT ALL SELECT * FROM fresh) d
UNION ALL
SELECT 'only in a fresh install', * FROM (SELECT * FROM fresh EXCEPT ALL SELECT * FROM upgraded) d
ORDER BY 1, 2, 3;
SELECT count(*) > 100 AS compared_many_objects FROM fresh;

DROP EXTENSION collegedb;
DROP FUNCTION public.collegedb_objects();
