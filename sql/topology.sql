-- Topology groups on four SQLite shards: the version rules (a bump on a
-- membership change only, unchanged drafts, delete and re-create go on
-- counting), roles and channels, the snapshot's shape, what the outbox
-- stages in the writer's transaction, what the coordinator delivers to the
-- shards, routing within a group, and bad input (each refused with its
-- SQLSTATE, changing nothing).
CREATE EXTENSION collegedb;
\set VERBOSITY terse
\getenv sqlite_dir COLLEGEDB_TEST_SQLITE_DIR

\i sql/common/try.sql

\set a_db :sqlite_dir '/topology_a.db'
\set b_db :sqlite_dir '/topology_b.db'
\set c_db :sqlite_dir '/topology_c.db'
\set d_db :sqlite_dir '/topology_d.db'
CREATE SERVER t_a FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'a_db');
CREATE SERVER t_b FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'b_db');
CREATE SERVER t_c FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'c_db');
CREATE SERVER t_d FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'d_db');
SELECT collegedb.add_shard(s) FROM unnest(ARRAY['t_a', 't_b', 't_c', 't_d']) AS s;

-- add_shard created the shard-side tables
SELECT * FROM collegedb.all_on_shard('t_a',
  'SELECT name FROM sqlite_master WHERE type = ''table'' ORDER BY name');

-- what the outbox holds for a group, without timing or errors
CREATE FUNCTION outbox(g text) RETURNS TABLE (kind text, channel text, member text, version bigint,
                                              removal boolean, attempts integer)
LANGUAGE sql AS $$
  SELECT kind, channel, member, version, removal, attempts FROM collegedb.topology_outbox
   WHERE group_name = g ORDER BY kind, channel NULLS FIRST, member
$$;
-- what a shard holds: its published snapshots (without the coordinator) and state values
CREATE FUNCTION published(shard text) RETURNS TABLE (group_name text, version bigint, snapshot jsonb)
LANGUAGE sql AS $$
  SELECT value->>'group_name', (value->>'version')::bigint,
         (value->>'snapshot')::jsonb - 'coordinator'
    FROM collegedb.all_on_shard(shard, 'SELECT group_name, version, snapshot FROM collegedb_topology') AS r(value)
   ORDER BY 1
$$;
CREATE FUNCTION states(shard text) RETURNS TABLE (group_name text, channel text, version bigint, value jsonb)
LANGUAGE sql AS $$
  SELECT value->>'group_name', value->>'channel', (value->>'version')::bigint, (value->>'value')::jsonb
    FROM collegedb.all_on_shard(shard, 'SELECT group_name, channel, version, value FROM collegedb_topology_state') AS r(value)
   ORDER BY 1, 2
$$;

-- 1. Channels: 'limits' reaches the write role (active members), 'schedule' the read role
SELECT collegedb.topology_define_channel('limits');
SELECT collegedb.topology_define_channel('schedule', 'read');
SELECT collegedb.topology_define_channel('schedule', 'read');      -- unchanged
SELECT channel, members FROM collegedb.topology_channel ORDER BY channel;

-- 2. Versions (in one transaction, so that the coordinator delivers its end
-- state only): a group is created at version 1 with its values
BEGIN;
SELECT collegedb.topology_update('tenant-1',
         '[{"id": "t_a", "state": "active"}, {"id": "t_b", "state": "active"}]',
         '{"limits": {"rps": 10}, "schedule": "daily"}');
-- the same membership in another order, the same values, or nothing: no change
SELECT collegedb.topology_update('tenant-1',
         '[{"id": "t_b", "state": "active"}, {"id": "t_a", "state": "active"}]');
SELECT collegedb.topology_update('tenant-1', states => '{"limits": {"rps": 10}}');
SELECT collegedb.topology_update('tenant-1');
-- a new value is a change, but not of the membership: the version stays
SELECT collegedb.topology_update('tenant-1', states => '{"limits": {"rps": 20}}');
-- a member's state is a membership change
SELECT collegedb.topology_update('tenant-1',
         '[{"id": "t_a", "state": "draining"}, {"id": "t_b", "state": "active"}]');
COMMIT;
SELECT name, version, state_version FROM collegedb.topology_group ORDER BY name;

-- 3. The snapshot: group, version, coordinator (this front), members in name order, values
SELECT s - 'coordinator' AS snapshot,
       s->'coordinator' ?& ARRAY['system_identifier', 'database'] AS coordinator_keys,
       s->'coordinator'->>'database' = current_database() AS this_database,
       s->'coordinator'->>'system_identifier' = (SELECT system_identifier::text FROM pg_control_system())
         AS this_cluster
  FROM collegedb.topology_snapshot('tenant-1') AS s;
SELECT collegedb.topology_snapshot('no-such-group') IS NULL AS missing_is_null;

-- 4. Roles: write = active members, read = active and draining
SELECT * FROM collegedb.topology_members('tenant-1');
SELECT * FROM collegedb.topology_members('tenant-1', 'write');
SELECT * FROM collegedb.topology_members('tenant-1', 'read');
SELECT count(*) AS members_of_nothing FROM collegedb.topology_members('no-such-group');

-- 5. The coordinator delivers: each read-set member holds the snapshot, each
-- channel's value is on the members of its role (t_a drains: no 'limits' 20)
SELECT collegedb.topology_wait('tenant-1', '60 s') AS delivered;
SELECT count(*) AS left_in_outbox FROM collegedb.topology_outbox WHERE group_name = 'tenant-1';
SELECT * FROM published('t_a');
SELECT * FROM published('t_b');
SELECT * FROM states('t_a');
SELECT * FROM states('t_b');
SELECT * FROM published('t_c');

-- 6. The outbox is written in the writer's transaction: what one change stages
BEGIN;
SELECT collegedb.topology_update('tenant-2',
         '[{"id": "t_b", "state": "active"}, {"id": "t_c", "state": "draining"}]',
         '{"limits": 5, "schedule": ["mon", "thu"]}');
-- snapshots for the read set; 'limits' for the active member, 'schedule' for both
SELECT * FROM outbox('tenant-2');
-- a newcomer gets the current values with the change that adds it; a member
-- leaving the write role has its pending 'limits' dropped; the member that
-- left gets the snapshot's removal
SELECT collegedb.topology_update('tenant-2',
         '[{"id": "t_b", "state": "draining"}, {"id": "t_d", "state": "active"}]');
SELECT * FROM outbox('tenant-2');
-- only the newest pending value per member: 'limits' 6 replaces 5
SELECT collegedb.topology_update('tenant-2', states => '{"limits": 6}');
SELECT * FROM outbox('tenant-2');
-- setting a channel to the value it has stages nothing
SELECT collegedb.topology_update('tenant-2', states => '{"limits": 6, "schedule": ["mon", "thu"]}');
SELECT count(*) AS staged FROM collegedb.topology_outbox WHERE group_name = 'tenant-2';
-- a wait for what this transaction staged would never end: refused
SELECT try($$SELECT collegedb.topology_wait('tenant-2', '1 s')$$);
ROLLBACK;
SELECT count(*) AS after_rollback FROM collegedb.topology_outbox WHERE group_name = 'tenant-2';
SELECT collegedb.topology_snapshot('tenant-2') IS NULL AS no_group;

-- a channel whose role widens reaches the draining members with the current value
BEGIN;
SELECT collegedb.topology_define_channel('limits', 'read');
SELECT * FROM outbox('tenant-1');
SELECT collegedb.topology_define_channel('limits', 'write');
SELECT * FROM outbox('tenant-1');
ROLLBACK;

-- 7. Delete and re-create: the version goes on counting
SELECT collegedb.topology_delete('tenant-1') AS deleted;
SELECT collegedb.topology_delete('tenant-1') AS deleted_again;
SELECT collegedb.topology_snapshot('tenant-1') IS NULL AS gone;
SELECT count(*) AS members_left FROM collegedb.topology_members('tenant-1');
SELECT name, version, state_version FROM collegedb.topology_group ORDER BY name;
SELECT collegedb.topology_wait('tenant-1', '60 s') AS removed;
-- the members keep the version the snapshot was removed at, without a snapshot
SELECT * FROM published('t_a');
SELECT * FROM published('t_b');
SELECT collegedb.topology_update('tenant-1', '[{"id": "t_c", "state": "active"}]',
                                 '{"limits": {"rps": 1}}');
SELECT collegedb.topology_snapshot('tenant-1') - 'coordinator' AS recreated;
SELECT collegedb.topology_wait('tenant-1', '60 s') AS delivered;
SELECT * FROM published('t_c');
SELECT * FROM states('t_c');

-- 8. Routing within a group: the rendezvous owner among the active members
SELECT collegedb.topology_update('tenant-3',
         '[{"id": "t_a", "state": "active"}, {"id": "t_b", "state": "draining"},
           {"id": "t_c", "state": "active"}, {"id": "t_d", "state": "active"}]');
SELECT count(*) AS keys,
       count(*) FILTER (WHERE collegedb.topology_shard_for_key('tenant-3', k)
                              = collegedb.rendezvous_owner(k, ARRAY['t_a', 't_c', 't_d'])) AS rendezvous,
       count(DISTINCT collegedb.topology_shard_for_key('tenant-3', k)) AS shards_used
  FROM (SELECT 'key-' || i AS k FROM generate_series(1, 300) AS i) AS keys;
SELECT count(*) AS on_draining
  FROM generate_series(1, 300) AS i
 WHERE collegedb.topology_shard_for_key('tenant-3', 'key-' || i) = 't_b';
-- a read over the read set, draining member included
SELECT collegedb.topology_wait('tenant-3', '60 s') AS delivered;
SELECT shard, value, error FROM collegedb.fanout_group('tenant-3',
  'SELECT count(*) AS n FROM collegedb_topology WHERE group_name = $1', 'tenant-3') ORDER BY shard;
SELECT try($$SELECT * FROM collegedb.fanout_group('tenant-3', 'DELETE FROM collegedb_topology')$$);
SELECT try($$SELECT * FROM collegedb.fanout_group('no-such-group', 'SELECT 1')$$);
SELECT try($$SELECT collegedb.topology_shard_for_key('no-such-group', 'k')$$);
SELECT collegedb.topology_update('tenant-4', '[{"id": "t_a", "state": "draining"}]');
SELECT try($$SELECT collegedb.topology_shard_for_key('tenant-4', 'k')$$);
SELECT collegedb.topology_wait('tenant-4', '60 s') AS delivered;

-- 9. Bad input: each refused, nothing changes
CREATE TABLE before AS
  SELECT (SELECT jsonb_agg(to_jsonb(g) - 'updated_at' ORDER BY g.name) FROM collegedb.topology_group g) AS groups,
         (SELECT jsonb_agg(to_jsonb(m) ORDER BY m.group_name, m.shard) FROM collegedb.topology_member m) AS members,
         (SELECT jsonb_agg(to_jsonb(s) - 'updated_at' ORDER BY s.group_name, s.channel) FROM collegedb.topology_state s) AS states,
         (SELECT jsonb_agg(to_jsonb(c) ORDER BY c.channel) FROM collegedb.topology_channel c) AS channels,
         (SELECT count(*) FROM collegedb.topology_delivery) AS deliveries;
SELECT statement, try(statement) FROM unnest(ARRAY[
  -- unknown shard, empty list, not a list
  $$SELECT collegedb.topology_update('tenant-3', '[{"id": "t_z", "state": "active"}]')$$,
  $$SELECT collegedb.topology_update('tenant-3', '[]')$$,
  $$SELECT collegedb.topology_update('tenant-3', '{"id": "t_a", "state": "active"}')$$,
  -- bad members: not an object, no id, bad state, unknown field, twice
  $$SELECT collegedb.topology_update('tenant-3', '["t_a"]')$$,
  $$SELECT collegedb.topology_update('tenant-3', '[{"state": "active"}]')$$,
  $$SELECT collegedb.topology_update('tenant-3', '[{"id": 7, "state": "active"}]')$$,
  $$SELECT collegedb.topology_update('tenant-3', '[{"id": "t_a", "state": "retired"}]')$$,
  $$SELECT collegedb.topology_update('tenant-3', '[{"id": "t_a"}]')$$,
  $$SELECT collegedb.topology_update('tenant-3', '[{"id": "t_a", "state": "active", "weight": 2}]')$$,
  $$SELECT collegedb.topology_update('tenant-3', '[{"id": "t_a", "state": "active"}, {"id": "t_a", "state": "draining"}]')$$,
  -- bad states: not an object, an undefined channel
  $$SELECT collegedb.topology_update('tenant-3', states => '["limits"]')$$,
  $$SELECT collegedb.topology_update('tenant-3', states => '{"limits": 1, "quota": 2}')$$,
  -- values for a group that does not exist
  $$SELECT collegedb.topology_update('tenant-9', states => '{"limits": 1}')$$,
  $$SELECT collegedb.topology_update('tenant-9')$$,
  -- group and channel names
  $$SELECT collegedb.topology_update(NULL, '[{"id": "t_a", "state": "active"}]')$$,
  $$SELECT collegedb.topology_update('', '[{"id": "t_a", "state": "active"}]')$$,
  $$SELECT collegedb.topology_update(repeat('g', 256), '[{"id": "t_a", "state": "active"}]')$$,
  $$SELECT collegedb.topology_update('tenant-3 ', '[{"id": "t_a", "state": "active"}]')$$,
  $$SELECT collegedb.topology_delete(NULL)$$,
  $$SELECT collegedb.topology_define_channel('')$$,
  $$SELECT collegedb.topology_define_channel('flags', 'all')$$,
  $$SELECT collegedb.topology_define_channel('flags', NULL)$$,
  -- unknown roles
  $$SELECT collegedb.topology_members('tenant-3', 'admin')$$,
  $$SELECT collegedb.topology_members('tenant-3', NULL)$$,
  $$SELECT collegedb.topology_shard_for_key('tenant-3', NULL)$$,
  $$SELECT collegedb.topology_wait(NULL)$$,
  -- a member cannot be unregistered
  $$SELECT collegedb.drop_shard('t_a')$$
]) WITH ORDINALITY AS t(statement, i) ORDER BY i;
SELECT (SELECT jsonb_agg(to_jsonb(g) - 'updated_at' ORDER BY g.name) FROM collegedb.topology_group g) = groups AS groups_same,
       (SELECT jsonb_agg(to_jsonb(m) ORDER BY m.group_name, m.shard) FROM collegedb.topology_member m) = members AS members_same,
       (SELECT jsonb_agg(to_jsonb(s) - 'updated_at' ORDER BY s.group_name, s.channel) FROM collegedb.topology_state s) = states AS states_same,
       (SELECT jsonb_agg(to_jsonb(c) ORDER BY c.channel) FROM collegedb.topology_channel c) = channels AS channels_same,
       (SELECT count(*) FROM collegedb.topology_delivery) = deliveries AS outbox_same,
       (SELECT count(*) FROM collegedb.shards WHERE name = 't_a') AS t_a_registered
  FROM before;
DROP TABLE before;

-- 10. A shard in no group may go; its pending removals go with it
SELECT collegedb.topology_delete('tenant-4') AS deleted;
SELECT collegedb.topology_delete('tenant-3') AS deleted;
SELECT collegedb.topology_delete('tenant-1') AS deleted;
SELECT collegedb.drop_shard('t_d');
SELECT count(*) AS to_t_d FROM collegedb.topology_outbox WHERE member = 't_d';
SELECT collegedb.topology_wait(g, '60 s') AS delivered FROM unnest(ARRAY['tenant-1', 'tenant-3', 'tenant-4']) AS g;

-- 11. Who may do what: an administrator writes (and its role delivers what it
-- staged), an application routes and reads
CREATE ROLE regress_topo_admin;
CREATE ROLE regress_topo_app;
SELECT collegedb.grant_admin('regress_topo_admin'), collegedb.grant_routing('regress_topo_app');
SET ROLE regress_topo_admin;
SELECT collegedb.topology_update('tenant-5', '[{"id": "t_c", "state": "active"}]', '{"limits": 7}');
SELECT count(*) AS admin_reads_outbox FROM collegedb.topology_outbox WHERE group_name = 'tenant-5';
SELECT try($$SELECT collegedb.topology_snapshot('tenant-5')$$);
RESET ROLE;
-- (the coordinator may have delivered and forgotten the row already: no other owner)
SELECT bool_and(owner::regrole::text = 'regress_topo_admin') IS NOT FALSE AS staged_as_admin
  FROM collegedb.topology_delivery WHERE group_name = 'tenant-5';
SET ROLE regress_topo_app;
SELECT collegedb.topology_snapshot('tenant-5') - 'coordinator' AS app_reads;
SELECT collegedb.topology_shard_for_key('tenant-5', 'k') AS app_routes;
SELECT * FROM collegedb.topology_members('tenant-5');
SELECT try($$SELECT collegedb.topology_update('tenant-5', states => '{"limits": 8}')$$);
SELECT try($$SELECT collegedb.topology_delete('tenant-5')$$);
SELECT try($$SELECT count(*) FROM collegedb.topology_outbox$$);
RESET ROLE;
SELECT collegedb.topology_wait('tenant-5', '60 s') AS delivered_as_admin;
SELECT * FROM states('t_c') WHERE group_name = 'tenant-5';
SELECT collegedb.topology_delete('tenant-5');
SELECT collegedb.revoke_admin('regress_topo_admin'), collegedb.revoke_routing('regress_topo_app');
DROP ROLE regress_topo_admin;
DROP ROLE regress_topo_app;

DROP FUNCTION outbox(text);
DROP FUNCTION published(text);
DROP FUNCTION states(text);
DROP FUNCTION try(text);
DROP EXTENSION collegedb CASCADE;
