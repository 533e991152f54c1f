-- Privileges (README "Security"), acted out by four roles: the superuser
-- who installs collegedb, an administrator granted collegedb.grant_admin,
-- two applications granted collegedb.grant_routing, and a role with no
-- grant.  Shards: an SQLite file, a database of this server reached over
-- TCP (trust authentication: the server asks no password) and the test
-- MariaDB server.  test/t/060_security.pl covers shards that ask for
-- passwords.
CREATE EXTENSION collegedb;
\set VERBOSITY terse
-- progress NOTICEs depend on timing
SET collegedb.progress_notices = off;
\i sql/common/env.sql
SELECT current_user AS me \gset

-- try() runs a statement as the current role and returns ok or the
-- SQLSTATE, message and detail
CREATE FUNCTION try(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  detail text;
BEGIN
  EXECUTE sql;
  RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
  RETURN SQLSTATE || ': ' || SQLERRM || CASE WHEN detail <> '' THEN ' (' || detail || ')' ELSE '' END;
END $$;
-- tries() runs statements in order
CREATE FUNCTION tries(VARIADIC sqls text[]) RETURNS TABLE (statement text, outcome text)
LANGUAGE sql AS $$
  SELECT s, try(s) FROM unnest(sqls) WITH ORDINALITY AS t(s, i) ORDER BY i
$$;

CREATE ROLE regress_cd_admin LOGIN;  -- job workers log in as the role that asked
CREATE ROLE regress_cd_app;
CREATE ROLE regress_cd_app2;
CREATE ROLE regress_cd_nobody;
CREATE ROLE regress_cd_both;

-- 1. Out of the box PUBLIC may run only the pure hash functions, holds no
-- privilege on a table, view or sequence, and cannot even look into the
-- schema; the SQL functions that touch the catalog for their callers run
-- as the owner with a fixed search_path
SELECT has_schema_privilege('public', 'collegedb', 'USAGE') AS public_usage;
SELECT p.oid::regprocedure::text AS public_may_run
  FROM pg_proc p
 WHERE p.pronamespace = 'collegedb'::regnamespace
   AND has_function_privilege('public', p.oid, 'EXECUTE')
 ORDER BY p.oid::regprocedure::text COLLATE "C";
SELECT count(*) AS public_table_privileges
  FROM pg_class c, unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE',
                                'REFERENCES', 'TRIGGER']) AS priv
 WHERE c.relnamespace = 'collegedb'::regnamespace
   AND has_table_privilege('public', c.oid, priv);
SELECT p.oid::regprocedure::text AS security_definer, p.proconfig
  FROM pg_proc p
 WHERE p.pronamespace = 'collegedb'::regnamespace AND p.prosecdef
 ORDER BY p.oid::regprocedure::text COLLATE "C";

-- 2. The two grant sets, each one call; what each role may run now
SELECT collegedb.grant_admin('regress_cd_admin');
SELECT collegedb.grant_routing('regress_cd_app');
SELECT collegedb.grant_routing('regress_cd_app2');
SELECT collegedb.grant_routing('regress_cd_both'), collegedb.grant_admin('regress_cd_both');
SELECT p.proname,
       bool_or(has_function_privilege('public', p.oid, 'EXECUTE')) AS public,
       bool_or(has_function_privilege('regress_cd_app', p.oid, 'EXECUTE')) AS app,
       bool_or(has_function_privilege('regress_cd_admin', p.oid, 'EXECUTE')) AS admin,
       bool_or(p.prosecdef) AS definer
  FROM pg_proc p
 WHERE p.pronamespace = 'collegedb'::regnamespace
 GROUP BY p.proname
 ORDER BY p.proname COLLATE "C";
SELECT c.relname,
       has_table_privilege('regress_cd_app', c.oid, 'SELECT') AS app_reads,
       has_table_privilege('regress_cd_admin', c.oid, 'SELECT') AS admin_reads,
       has_table_privilege('regress_cd_admin', c.oid, 'INSERT, UPDATE, DELETE, TRUNCATE') AS admin_writes
  FROM pg_class c
 WHERE c.relnamespace = 'collegedb'::regnamespace AND c.relkind IN ('r', 'v', 'p', 'S')
 ORDER BY c.relname COLLATE "C";
-- the long form in the README grants the same
CREATE ROLE regress_cd_longform;
GRANT USAGE ON SCHEMA collegedb TO regress_cd_longform;
GRANT EXECUTE ON FUNCTION
  collegedb.run(text, text), collegedb.run(text, text, "any"),
  collegedb.all(text, text), collegedb.all(text, text, "any"),
  collegedb.all_json(text, text), collegedb.all_json(text, text, "any"),
  collegedb.first(text, text), collegedb.first(text, text, "any"),
  collegedb.fanout(text), collegedb.fanout(text, "any"),
  collegedb.first_by_lookup_key(text, text), collegedb.first_by_lookup_key(text, text, "any"),
  collegedb.all_by_lookup_key(text, text), collegedb.all_by_lookup_key(text, text, "any"),
  collegedb.add_lookup_keys(text, text[]), collegedb.get_lookup_keys(text),
  collegedb.shard_for_key(text, boolean), collegedb.route(text), collegedb.mapping_key(text),
  collegedb.mapping_id(text),
  collegedb.connections(), collegedb.cache_stats(),
  collegedb.topology_snapshot(text), collegedb.topology_members(text, text),
  collegedb.topology_shard_for_key(text, text),
  collegedb.fanout_group(text, text), collegedb.fanout_group(text, text, "any")
  TO regress_cd_longform;
GRANT SELECT ON collegedb.shards, collegedb.settings, collegedb.epochs, collegedb.tables,
  collegedb.shard_map TO regress_cd_longform;
SELECT count(*) AS differences
  FROM (SELECT p.oid FROM pg_proc p
         WHERE p.pronamespace = 'collegedb'::regnamespace
           AND has_function_privilege('regress_cd_app', p.oid, 'EXECUTE')
               <> has_function_privilege('regress_cd_longform', p.oid, 'EXECUTE')
        UNION ALL
        SELECT c.oid FROM pg_class c
         WHERE c.relnamespace = 'collegedb'::regnamespace
           AND has_table_privilege('regress_cd_app', c.oid, 'SELECT')
               <> has_table_privilege('regress_cd_longform', c.oid, 'SELECT')) AS d;
-- revoking one set keeps what the other set also holds
SELECT collegedb.revoke_routing('regress_cd_both');
SELECT has_function_privilege('regress_cd_both', 'collegedb.run(text, text)', 'EXECUTE') AS run,
       has_function_privilege('regress_cd_both', 'collegedb.connections()', 'EXECUTE') AS connections,
       has_table_privilege('regress_cd_both', 'collegedb.shards', 'SELECT') AS shards_view,
       has_schema_privilege('regress_cd_both', 'collegedb', 'USAGE') AS usage;
SELECT collegedb.revoke_admin('regress_cd_both');
SELECT count(*) AS functions_left
  FROM pg_proc p
 WHERE p.pronamespace = 'collegedb'::regnamespace
   AND has_function_privilege('regress_cd_both', p.oid, 'EXECUTE')
   AND NOT has_function_privilege('public', p.oid, 'EXECUTE');
SELECT has_schema_privilege('regress_cd_both', 'collegedb', 'USAGE') AS usage;
SELECT try($$SELECT collegedb.grant_admin(NULL)$$);
SELECT try($$SELECT collegedb.grant_routing('regress_no_such_role')$$);

-- 3. Shards, set up by the superuser.  Each role has its own user mapping
-- for the PostgreSQL shard, with its own user there; the administrator's
-- mapping may skip the password rule (a superuser's decision).
\set lite_db :sqlite_dir '/security_lite.db'
CREATE SERVER lite FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'lite_db');
SELECT collegedb.add_shard('lite');
SELECT collegedb.run_on_shard('lite', 'DROP TABLE IF EXISTS notes');
SELECT collegedb.run_on_shard('lite', 'CREATE TABLE notes (id TEXT PRIMARY KEY, body TEXT)');
CREATE ROLE regress_cd_shard_admin LOGIN PASSWORD 'admin-secret-3';
CREATE ROLE regress_cd_shard_app LOGIN PASSWORD 'app-secret-1';
CREATE ROLE regress_cd_shard_app2 LOGIN PASSWORD 'app-secret-2';
CREATE DATABASE collegedb_sec_pg OWNER regress_cd_shard_admin;
CREATE SERVER pg_s FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'postgres', host :'pg_host', port :'pg_port', dbname 'collegedb_sec_pg');
CREATE USER MAPPING FOR :"me" SERVER pg_s OPTIONS (user :'me');
CREATE USER MAPPING FOR regress_cd_admin SERVER pg_s
  OPTIONS (user 'regress_cd_shard_admin', password 'admin-secret-3', password_required 'false');
CREATE USER MAPPING FOR regress_cd_app SERVER pg_s
  OPTIONS (user 'regress_cd_shard_app', password 'app-secret-1');
CREATE USER MAPPING FOR regress_cd_app2 SERVER pg_s OPTIONS (user 'regress_cd_shard_app2');
CREATE SERVER my_s FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'mysql', host :'my_host', port :'my_port', dbname 'collegedb_test');
CREATE USER MAPPING FOR PUBLIC SERVER my_s OPTIONS (user :'my_user', password :'my_password');
SELECT sum(statements) AS statements_before FROM collegedb.shard_activity() \gset

-- 4. A role without grants reaches nothing: not the schema, and with
-- USAGE on it, not a function, view or table but the hash functions
SET ROLE regress_cd_nobody;
SELECT * FROM tries(
  $$SELECT collegedb.run('k', 'INSERT INTO notes VALUES ($1, $2)', 'k', 'x')$$,
  $$SELECT collegedb.first('k', 'SELECT 1')$$,
  $$SELECT * FROM collegedb.shards$$,
  $$SELECT collegedb.add_shard('pg_s')$$);
RESET ROLE;
GRANT USAGE ON SCHEMA collegedb TO regress_cd_nobody;
SET ROLE regress_cd_nobody;
SELECT * FROM tries(
  $$SELECT collegedb.run('k', 'INSERT INTO notes VALUES ($1, $2)', 'k', 'x')$$,
  $$SELECT collegedb.run('k', 'SELECT 1')$$,
  $$SELECT * FROM collegedb.all('k', 'SELECT 1') AS t(n int)$$,
  $$SELECT * FROM collegedb.all_json('k', 'SELECT 1')$$,
  $$SELECT collegedb.first('k', 'SELECT 1')$$,
  $$SELECT * FROM collegedb.fanout('SELECT 1')$$,
  $$SELECT collegedb.first_by_lookup_key('k', 'SELECT 1')$$,
  $$SELECT * FROM collegedb.all_by_lookup_key('k', 'SELECT 1')$$,
  $$SELECT collegedb.run_on_shard('lite', 'DELETE FROM notes')$$,
  $$SELECT * FROM collegedb.connections()$$,
  $$SELECT collegedb.add_shard('pg_s')$$,
  $$SELECT collegedb.configure(strategy => 'random')$$,
  $$SELECT collegedb.set_mapping('k', 'lite')$$,
  $$SELECT collegedb.grant_routing('regress_cd_nobody')$$,
  $$SELECT * FROM collegedb.shards$$,
  $$SELECT * FROM collegedb.settings$$,
  $$SELECT * FROM collegedb.mapping$$,
  $$INSERT INTO collegedb.mapping (key, shard) VALUES ('00000000-0000-0000-0000-000000000001', 1)$$,
  $$SELECT collegedb.rendezvous_owner('k', ARRAY['a', 'b'])$$);
RESET ROLE;
REVOKE USAGE ON SCHEMA collegedb FROM regress_cd_nobody;
-- nothing reached a shard, nothing was written
SELECT sum(statements) - :statements_before AS statements_sent FROM collegedb.shard_activity();
SELECT count(*) AS mappings FROM collegedb.mapping;

-- 5. The administrator (not a superuser) registers shards, changes their
-- state and the settings, pins keys, registers tables, and runs
-- statements on named shards, connecting as its own shard user
SET ROLE regress_cd_admin;
SELECT collegedb.add_shard('pg_s');
SELECT collegedb.add_shard('my_s', region => 'weur');
SELECT collegedb.set_shard_state('lite', priority => 2, tags => '{"tier": "gold"}');
SELECT collegedb.configure(mapping_cache_ttl => '0', allocate_on_read => false);
SELECT collegedb.reset_setting('allocate_on_read');
SELECT collegedb.run_on_shard('pg_s', 'CREATE TABLE notes (id text PRIMARY KEY, body text, by_user text DEFAULT current_user)');
SELECT collegedb.run_on_shard('pg_s', 'GRANT SELECT, INSERT ON notes TO regress_cd_shard_app, regress_cd_shard_app2');
-- routed statements look for tombstones: shard users that route read them
SELECT collegedb.run_on_shard('pg_s', 'GRANT SELECT ON collegedb_tombstones TO regress_cd_shard_app, regress_cd_shard_app2');
SELECT collegedb.run_on_shard('my_s', 'DROP TABLE IF EXISTS notes');
SELECT collegedb.run_on_shard('my_s', 'CREATE TABLE notes (id VARCHAR(64) PRIMARY KEY, body TEXT)');
-- (registering checks that the table exists on every shard)
SELECT collegedb.register_table('notes', 'id');
SELECT * FROM collegedb.all_on_shard('pg_s', 'SELECT current_user AS shard_user');
SELECT collegedb.set_mapping('pg-key', 'pg_s');
SELECT collegedb.set_mapping('my-key', 'my_s');
SELECT collegedb.set_mapping('lite-key', 'lite', ARRAY['email:lite@example.com']);
SELECT collegedb.set_mapping('moved-key', 'lite');
SELECT collegedb.update_mapping('moved-key', 'my_s');
SELECT collegedb.delete_mapping('moved-key');
SELECT array_agg(k) = ARRAY[collegedb.mapping_key('lite-key'), collegedb.mapping_key('email:lite@example.com')]
         OR array_agg(k) = ARRAY[collegedb.mapping_key('email:lite@example.com'), collegedb.mapping_key('lite-key')]
         AS lite_keys
  FROM collegedb.keys_for_shard('lite') AS k;
SELECT * FROM collegedb.publish_eligibility();
SELECT shard, key_count, size_bytes > 0 AS measured, writable, drain, eligible
  FROM collegedb.shard_stats() ORDER BY shard;
SELECT shard, user_name, dialect, valid FROM collegedb.connections() ORDER BY shard, user_name;
SELECT collegedb.disconnect('pg_s'), collegedb.disconnect_all();
SELECT name, dialect, writable, drain, tags, region, priority FROM collegedb.shards;
-- moves run in background workers as the administrator, journaled in
-- tables it cannot write itself
SELECT collegedb.set_mapping('move-me', 'lite');
SELECT collegedb.run_on_shard('lite', 'INSERT INTO notes (id, body) VALUES ($1, $2)', 'move-me', 'moving');
SELECT r->>'moved' AS moved, r->>'from' AS source, r->>'to' AS target
  FROM collegedb.reassign_shard('move-me', 'my_s') AS r;
SELECT kind, state FROM collegedb.jobs;
SELECT key, source, target, step FROM collegedb.moves;
SELECT * FROM collegedb.all_on_shard('my_s', 'SELECT id, body FROM notes');
SELECT examined >= 1 AS examined FROM collegedb.rebalance('notes', dry_run => true);
SELECT collegedb.schedule_rebalance('notes') AS job_id \gset
SELECT collegedb.cancel_job(:job_id);
SELECT kind, state, cancel_requested FROM collegedb.jobs WHERE id = :job_id;
SELECT name, value FROM collegedb.settings WHERE NOT is_default ORDER BY name;
SELECT table_name, key_column FROM collegedb.tables;
-- ... but writes no catalog table directly, grants nothing, routes
-- nothing (it was not granted routing), and may not lift the password rule
SELECT * FROM tries(
  $$INSERT INTO collegedb.shard (name) VALUES ('evil')$$,
  $$UPDATE collegedb.config SET strategy = 'random'$$,
  $$DELETE FROM collegedb.mapping$$,
  $$TRUNCATE collegedb.epoch$$,
  $$INSERT INTO collegedb.registered_table (table_name, key_column) VALUES ('t', 'k')$$,
  $$SELECT * FROM collegedb.mapping$$,
  $$SELECT collegedb.grant_routing('regress_cd_admin')$$,
  $$SELECT collegedb.first('pg-key', 'SELECT 1')$$,
  $$SELECT collegedb.attach_lookup_keys(NULL, 'x', NULL, '{}')$$);
RESET ROLE;
SELECT id, kind, owner::regrole FROM collegedb.job ORDER BY id;
GRANT USAGE ON FOREIGN SERVER pg_s TO regress_cd_admin;
GRANT USAGE ON FOREIGN DATA WRAPPER collegedb TO regress_cd_admin;
SET ROLE regress_cd_admin;
SELECT * FROM tries(
  $$ALTER USER MAPPING FOR CURRENT_USER SERVER pg_s OPTIONS (SET password_required 'false')$$,
  $$ALTER USER MAPPING FOR CURRENT_USER SERVER pg_s OPTIONS (SET password_required 'true')$$,
  $$CREATE SERVER admin_lite FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database '/tmp/admin.db')$$,
  $$CREATE SERVER admin_pg FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'postgres', dbname 'x')$$,
  $$DROP SERVER admin_pg$$);
RESET ROLE;
ALTER USER MAPPING FOR regress_cd_admin SERVER pg_s OPTIONS (SET password_required 'false');
REVOKE USAGE ON FOREIGN SERVER pg_s FROM regress_cd_admin;
REVOKE USAGE ON FOREIGN DATA WRAPPER collegedb FROM regress_cd_admin;

-- the administrator's eligibility predicate runs as the administrator,
-- the role that configured it, never as the extension's owner nor as
-- whoever's statement needs it, also when configure() publishes an epoch
CREATE SCHEMA regress_cd_admin_objs AUTHORIZATION regress_cd_admin;
SET ROLE regress_cd_admin;
CREATE TABLE regress_cd_admin_objs.calls (who text, operation text);
GRANT INSERT ON regress_cd_admin_objs.calls TO PUBLIC;
GRANT USAGE ON SCHEMA regress_cd_admin_objs TO PUBLIC;
CREATE FUNCTION regress_cd_admin_objs.only_lite(shard text, context jsonb) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO regress_cd_admin_objs.calls VALUES (current_user, context->>'operation');
  RETURN shard = 'lite';
END $$;
SELECT collegedb.configure(eligible => 'regress_cd_admin_objs.only_lite(text, jsonb)',
                           placement => 'computed');
SELECT epoch, shards FROM collegedb.epochs;
SELECT collegedb.configure(placement => 'kv');
SELECT who, operation, count(*) > 0 AS called FROM regress_cd_admin_objs.calls
 GROUP BY who, operation ORDER BY who, operation;
TRUNCATE regress_cd_admin_objs.calls;
RESET ROLE;

-- 6. An application (granted routing) reads and writes by key; new keys
-- get their mapping though it holds no privilege on the mapping table
SET ROLE regress_cd_app;
SELECT collegedb.run('new-' || i, 'INSERT INTO notes (id, body) VALUES ($1, $2)', 'new-' || i, 'note ' || i)
  FROM generate_series(1, 3) AS i;
SELECT shard, source, hops FROM collegedb.route('new-1');
SELECT collegedb.shard_for_key('new-2'), collegedb.shard_for_key('brand-new', for_write => true);
SELECT collegedb.first('new-1', 'SELECT id, body FROM notes WHERE id = $1', 'new-1');
SELECT * FROM collegedb.all('new-2', 'SELECT id, body FROM notes WHERE id = $1', 'new-2') AS t(id text, body text);
SELECT * FROM collegedb.all_json('new-3', 'SELECT id FROM notes WHERE id = $1', 'new-3');
SELECT collegedb.add_lookup_keys('new-1', ARRAY['email:new1@example.com']);
SELECT collegedb.get_lookup_keys('email:new1@example.com');
SELECT collegedb.first_by_lookup_key('email:new1@example.com', 'SELECT body FROM notes WHERE id = $1', 'new-1');
SELECT * FROM collegedb.all_by_lookup_key('email:lite@example.com', 'SELECT count(*) AS n FROM notes');
SELECT collegedb.run('my-key', 'INSERT INTO notes (id, body) VALUES ($1, $2)', 'my-key', 'on mysql');
SELECT collegedb.first('my-key', 'SELECT body FROM notes WHERE id = $1', 'my-key');
SELECT count(*) AS cache_stats FROM collegedb.cache_stats();
SELECT name, dialect FROM collegedb.shards;
SELECT count(*) AS settings FROM collegedb.settings;
SELECT table_name FROM collegedb.tables;
-- the predicate ran as the administrator who configured it, not as the
-- application whose write needed it; the application needs no EXECUTE on
-- it, and revoking it from PUBLIC changes nothing
RESET ROLE;
SELECT who, operation, count(*) > 0 AS called FROM regress_cd_admin_objs.calls
 GROUP BY who, operation ORDER BY who, operation;
SET ROLE regress_cd_admin;
REVOKE EXECUTE ON FUNCTION regress_cd_admin_objs.only_lite(text, jsonb) FROM PUBLIC;
SET ROLE regress_cd_app;
SELECT try($$SELECT collegedb.run('new-4', 'INSERT INTO notes (id) VALUES ($1)', 'new-4')$$);
-- a role may configure only a predicate it may execute itself
RESET ROLE;
CREATE FUNCTION regress_cd_su_pred(shard text, context jsonb) RETURNS boolean
LANGUAGE sql AS $$ SELECT true $$;
REVOKE EXECUTE ON FUNCTION regress_cd_su_pred(text, jsonb) FROM PUBLIC;
SET ROLE regress_cd_admin;
SELECT try($$SELECT collegedb.configure(eligible => 'public.regress_cd_su_pred(text, jsonb)')$$);
SELECT value FROM collegedb.settings WHERE name = 'eligible';
-- a predicate that tries to escalate whenever a superuser triggers it:
-- it runs as the administrator, in a security-restricted operation, with
-- search_path pg_catalog, pg_temp, and none of its settings survive it
TRUNCATE regress_cd_admin_objs.calls;
CREATE FUNCTION regress_cd_admin_objs.escalate(shard text, context jsonb) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  attempt text;
BEGIN
  INSERT INTO regress_cd_admin_objs.calls
    VALUES (current_user || ' ' || current_setting('search_path'), 'called');
  FOREACH attempt IN ARRAY ARRAY[
      'ALTER ROLE regress_cd_admin SUPERUSER',
      'SET ROLE NONE',
      'SET SESSION AUTHORIZATION DEFAULT',
      'CREATE TEMP TABLE grab (x int)',
      'SELECT set_config(''work_mem'', ''1MB'', false)'] LOOP
    BEGIN
      EXECUTE attempt;
      INSERT INTO regress_cd_admin_objs.calls VALUES (attempt, 'done');
    EXCEPTION WHEN OTHERS THEN
      INSERT INTO regress_cd_admin_objs.calls VALUES (attempt, SQLSTATE || ': ' || SQLERRM);
    END;
  END LOOP;
  RETURN true;
END $$;
SELECT collegedb.configure(eligible => 'regress_cd_admin_objs.escalate(text, jsonb)');
RESET ROLE;
SHOW work_mem;
SELECT shard, eligible FROM collegedb.shard_stats() ORDER BY shard;
SELECT collegedb.run('esc-1', 'INSERT INTO notes (id) VALUES ($1)', 'esc-1');
SELECT rolsuper AS admin_is_superuser FROM pg_roles WHERE rolname = 'regress_cd_admin';
SELECT current_user = :'me' AS still_myself, current_setting('work_mem') AS work_mem;
SELECT DISTINCT who, operation FROM regress_cd_admin_objs.calls ORDER BY who, operation;
SET ROLE regress_cd_admin;
SELECT collegedb.reset_setting('eligible');
RESET ROLE;
DROP FUNCTION regress_cd_su_pred(text, jsonb);
-- ... and it may not administer, nor touch the catalog tables
SET ROLE regress_cd_app;
SELECT * FROM tries(
  $$SELECT collegedb.add_shard('lite')$$,
  $$SELECT collegedb.drop_shard('lite')$$,
  $$SELECT collegedb.set_shard_state('lite', writable => false)$$,
  $$SELECT collegedb.configure(strategy => 'random')$$,
  $$SELECT collegedb.reset_setting('strategy')$$,
  $$SELECT collegedb.register_table('t', 'k')$$,
  $$SELECT collegedb.unregister_table('notes')$$,
  $$SELECT collegedb.set_mapping('new-1', 'pg_s')$$,
  $$SELECT collegedb.update_mapping('new-1', 'pg_s')$$,
  $$SELECT collegedb.delete_mapping('new-1')$$,
  $$SELECT collegedb.keys_for_shard('lite')$$,
  $$SELECT * FROM collegedb.publish_eligibility()$$,
  $$SELECT collegedb.run_on_shard('lite', 'DELETE FROM notes')$$,
  $$SELECT * FROM collegedb.all_on_shard('lite', 'SELECT 1')$$,
  $$SELECT * FROM collegedb.run_on_all('DELETE FROM notes')$$,
  $$SELECT * FROM collegedb.shard_stats()$$,
  $$SELECT collegedb.database_size('lite')$$,
  $$SELECT * FROM collegedb.shard_activity()$$,
  $$SELECT collegedb.reassign_shard('new-1', 'pg_s')$$,
  $$SELECT * FROM collegedb.rebalance('notes')$$,
  $$SELECT collegedb.schedule_rebalance('notes')$$,
  $$SELECT collegedb.cancel_job(1)$$,
  $$SELECT * FROM collegedb.jobs$$,
  $$SELECT collegedb.disconnect('lite')$$,
  $$SELECT collegedb.disconnect_all()$$,
  $$SELECT collegedb.grant_admin('regress_cd_app')$$,
  $$SELECT collegedb.record_of('new-1', true)$$,
  $$SELECT * FROM collegedb.mapping$$,
  $$UPDATE collegedb.mapping SET shard = 2$$,
  $$INSERT INTO collegedb.epoch (epoch, shards) VALUES (99, '{lite}')$$,
  $$DELETE FROM collegedb.shard$$,
  $$UPDATE collegedb.config SET hash_mappings = false$$);
RESET ROLE;
SELECT count(*) AS mappings, count(DISTINCT shard) AS shards FROM collegedb.mapping;

-- 7. Shard connections use the caller's user mapping.  This server asks
-- no password, so the password rule refuses both applications: app2's
-- mapping has none, app's password was not asked for
SET ROLE regress_cd_app;
SELECT try($$SELECT collegedb.first('pg-key', 'SELECT current_user AS u')$$);
SET ROLE regress_cd_app2;
SELECT try($$SELECT collegedb.first('pg-key', 'SELECT current_user AS u')$$);
-- fan-out reports the refusal as the PostgreSQL shard's row
SELECT shard, value, error FROM collegedb.fanout('SELECT count(*) AS n FROM notes') ORDER BY shard;
RESET ROLE;
-- a superuser lets them in: each reaches the shard as its own user
ALTER USER MAPPING FOR regress_cd_app SERVER pg_s OPTIONS (ADD password_required 'false');
ALTER USER MAPPING FOR regress_cd_app2 SERVER pg_s OPTIONS (ADD password_required 'false');
SET ROLE regress_cd_app;
SELECT collegedb.first('pg-key', 'SELECT current_user AS u');
SELECT collegedb.run('pg-key', 'INSERT INTO notes (id, body) VALUES ($1, $2)', 'pg-key', 'from app');
SET ROLE regress_cd_app2;
SELECT collegedb.first('pg-key', 'SELECT current_user AS u');
SELECT try($$SELECT collegedb.run('pg-key', 'DELETE FROM notes')$$);
SELECT * FROM collegedb.all('pg-key', 'SELECT id, by_user FROM notes ORDER BY id') AS t(id text, by_user text);
SELECT shard, user_name, dialect, valid, in_transaction FROM collegedb.connections()
 ORDER BY shard, user_name;
RESET ROLE;
SELECT (collegedb.first('pg-key', 'SELECT current_user AS u')->>'u') = :'me' AS superuser_is_itself;

-- 8. No view, set-returning function or error shows a password or a
-- connection string, to anyone
SET ROLE regress_cd_app;
SELECT count(*) AS leaks FROM (
  SELECT s::text AS t FROM collegedb.shards s
  UNION ALL SELECT s::text FROM collegedb.settings s
  UNION ALL SELECT e::text FROM collegedb.epochs e
  UNION ALL SELECT t::text FROM collegedb.tables t
  UNION ALL SELECT c::text FROM collegedb.connections() c
  UNION ALL SELECT r::text FROM collegedb.route('pg-key') r
  UNION ALL SELECT c::text FROM collegedb.cache_stats() c
  UNION ALL SELECT f::text FROM collegedb.fanout('SELECT 1 AS one') f
  UNION ALL SELECT collegedb.shard_for_key('pg-key')
) AS x WHERE t ~ '(secret|host=|dbname=|user=)';
SET ROLE regress_cd_admin;
SELECT count(*) AS leaks FROM (
  SELECT s::text AS t FROM collegedb.shards s
  UNION ALL SELECT s::text FROM collegedb.shard_stats() s
  UNION ALL SELECT p::text FROM collegedb.publish_eligibility() p
  UNION ALL SELECT a::text FROM collegedb.shard_activity() a
  UNION ALL SELECT k FROM collegedb.keys_for_shard('pg_s') k
  UNION ALL SELECT c::text FROM collegedb.connections() c
  UNION ALL SELECT r::text FROM collegedb.run_on_all('SELECT 1') r
) AS x WHERE t ~ '(secret|host=|dbname=|user=)';
RESET ROLE;
-- wrong credentials: the shard's error names the user, never the password
CREATE SERVER pg_bad FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'postgres', host :'pg_host', port :'pg_port', dbname 'collegedb_sec_pg');
CREATE USER MAPPING FOR :"me" SERVER pg_bad OPTIONS (user 'regress_no_such_user', password 'bad-secret-9');
CREATE SERVER my_bad FOREIGN DATA WRAPPER collegedb
  OPTIONS (dialect 'mysql', host :'my_host', port :'my_port', dbname 'collegedb_test');
CREATE USER MAPPING FOR PUBLIC SERVER my_bad OPTIONS (user :'my_user', password 'bad-secret-8');
SELECT try($$SELECT collegedb.add_shard('pg_bad')$$) ~ '^08' AS refused,
       try($$SELECT collegedb.add_shard('pg_bad')$$) ~ 'secret' AS leaks;
SELECT try($$SELECT collegedb.add_shard('my_bad')$$) ~ '^08' AS refused,
       try($$SELECT collegedb.add_shard('my_bad')$$) ~ 'secret' AS leaks;

-- 9. Foreign tables follow table privileges
CREATE FOREIGN TABLE sec_notes (id text, body text) SERVER collegedb
  OPTIONS (key_column 'id', table_name 'notes');
SET ROLE regress_cd_nobody;
SELECT try($$SELECT * FROM sec_notes WHERE id = 'new-1'$$);
SET ROLE regress_cd_app;
SELECT try($$SELECT * FROM sec_notes WHERE id = 'new-1'$$);
RESET ROLE;
GRANT SELECT ON sec_notes TO regress_cd_app;
SET ROLE regress_cd_app;
SELECT try($$SELECT * FROM sec_notes WHERE id = 'new-1'$$) !~ '^42501' AS granted;
RESET ROLE;

-- 10. Revoked, the application is back to nothing
SELECT collegedb.revoke_routing('regress_cd_app2');
SET ROLE regress_cd_app2;
SELECT try($$SELECT collegedb.first('pg-key', 'SELECT 1')$$);
RESET ROLE;

SELECT collegedb.run_on_shard('my_s', 'DROP TABLE notes');
DROP EXTENSION collegedb CASCADE;
DROP SCHEMA regress_cd_admin_objs CASCADE;
DROP DATABASE collegedb_sec_pg;
DROP FUNCTION tries(text[]);
DROP FUNCTION try(text);
DROP OWNED BY regress_cd_admin, regress_cd_app, regress_cd_app2, regress_cd_nobody, regress_cd_both,
              regress_cd_longform;
DROP ROLE regress_cd_admin, regress_cd_app, regress_cd_app2, regress_cd_nobody, regress_cd_both,
          regress_cd_longform,
          regress_cd_shard_admin, regress_cd_shard_app, regress_cd_shard_app2;
