/* collegedb--0.2--0.3.sql: upgrade from 0.2 to 0.3 */

\echo Use "ALTER EXTENSION collegedb UPDATE TO '0.3'" to load this file. \quit

/*
 * The statements that turn a 0.2 catalog into the 0.3 one.  A fresh install
 * of 0.3 runs sql/collegedb.sql instead (copied to collegedb--0.3.sql by the
 * Makefile), so every object created or changed here is also written there,
 * in its place, as a fresh install creates it; sql/upgrade.sql installs 0.1,
 * updates it to the newest version and fails when the catalog differs from
 * a fresh install's.
 *
 * Objects created here are not covered by the earlier scripts' REVOKEs from
 * PUBLIC: revoke what PUBLIC must not use next to its CREATE.  A function
 * that a grant set should hold goes into privilege_set: here with CREATE OR
 * REPLACE FUNCTION collegedb.privilege_set and the whole list, in
 * sql/collegedb.sql in its list.
 */

/* Jobs: deaths of a job's worker, retry_job, and why no coordinator runs */

ALTER TABLE collegedb.job ADD COLUMN deaths integer NOT NULL DEFAULT 0;

/*
 * coordinator_status says why no coordinator can run this database's
 * queued jobs (no free background worker slot, collegedb not preloaded,
 * collegedb.database naming another database), naming the setting to
 * change; NULL when one runs.  collegedb.jobs shows it for queued jobs.
 */
CREATE FUNCTION collegedb.coordinator_status()
RETURNS text
AS 'MODULE_PATHNAME', 'collegedb_coordinator_status'
LANGUAGE C STABLE;

REVOKE ALL ON FUNCTION collegedb.coordinator_status() FROM PUBLIC;

CREATE OR REPLACE VIEW collegedb.jobs AS
SELECT j.id, j.kind, j.table_name, j.state,
       coalesce(k.examined, 0) + coalesce((j.result->>'agreed')::bigint, 0) AS examined,
       coalesce((j.result->>'agreed')::bigint, 0) AS agreed,
       coalesce(k.moved, 0) AS moved,
       coalesce(k.failed, 0) AS failed,
       j.concurrency, j.cancel_requested, j.last_error, j.result,
       j.created_at, j.started_at, j.finished_at,
       p.keys_done, p.keys_planned,
       round(100.0 * p.keys_done / nullif(p.keys_planned, 0), 1) AS percent,
       p.keys_per_second,
       CASE WHEN j.state = 'running' AND p.keys_per_second > 0
            THEN make_interval(secs => round((p.keys_planned - p.keys_done) / p.keys_per_second, 1)::double precision)
       END AS time_left,
       j.deaths,
       CASE WHEN j.state = 'queued' THEN collegedb.coordinator_status() END AS detail
  FROM collegedb.job j
  LEFT JOIN (SELECT job_id, count(*) AS examined,
                    count(*) FILTER (WHERE state = 'moved') AS moved,
                    count(*) FILTER (WHERE state = 'failed') AS failed,
                    min(planned_at) AS first_planned,
                    max(settled_at) AS last_settled
               FROM collegedb.job_key GROUP BY job_id) k ON k.job_id = j.id
  CROSS JOIN LATERAL (
       SELECT CASE WHEN j.kind <> 'move' THEN coalesce(k.moved, 0) + coalesce(k.failed, 0) END AS keys_done,
              CASE WHEN j.kind <> 'move' THEN coalesce(k.examined, 0) END AS keys_planned,
              CASE WHEN j.kind <> 'move' AND coalesce(k.moved, 0) + coalesce(k.failed, 0) > 0
                        AND (CASE WHEN j.state = 'running' THEN clock_timestamp() ELSE k.last_settled END)
                            > k.first_planned
                   THEN round((k.moved + k.failed) /
                              extract(epoch FROM (CASE WHEN j.state = 'running' THEN clock_timestamp()
                                                       ELSE k.last_settled END) - k.first_planned), 1)
              END AS keys_per_second) p
 ORDER BY j.id;

-- runs a failed or cancelled job again (a job stopped after its worker died
-- job_max_deaths times waits for this); false when it had not ended so
CREATE FUNCTION collegedb.retry_job(id bigint)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM collegedb.job j WHERE j.id = retry_job.id) THEN
        RAISE EXCEPTION 'job % does not exist', id USING ERRCODE = 'undefined_object';
    END IF;
    IF EXISTS (SELECT 1 FROM collegedb.job j
                WHERE j.id = retry_job.id AND j.kind = 'move' AND j.raw_key IS NULL
                  AND j.state IN ('failed', 'cancelled')
                  AND (SELECT c.hash_mappings FROM collegedb.config c)) THEN
        RAISE EXCEPTION 'job % cannot run again: with hash_mappings a move keeps only the hashed key once it ended', id
              USING ERRCODE = 'object_not_in_prerequisite_state',
                    HINT = 'Call collegedb.reassign_shard() with the key again.';
    END IF;
    UPDATE collegedb.job j
       SET state = 'queued', deaths = 0, cancel_requested = false, last_error = NULL,
           finished_at = NULL, lease_pid = NULL, lease_backend_start = NULL
     WHERE j.id = retry_job.id AND j.state IN ('failed', 'cancelled');
    RETURN FOUND;
END
$$;

REVOKE ALL ON FUNCTION collegedb.retry_job(bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION collegedb.privilege_set(kind text)
RETURNS TABLE (object_type text, name text)
LANGUAGE sql IMMUTABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT s.object_type, s.name
      FROM (VALUES
        -- routing: statements by key, lookup keys, where a key goes
        ('routing', 'function', 'run'),
        ('routing', 'function', 'all'),
        ('routing', 'function', 'all_json'),
        ('routing', 'function', 'first'),
        ('routing', 'function', 'fanout'),
        ('routing', 'function', 'first_by_lookup_key'),
        ('routing', 'function', 'all_by_lookup_key'),
        ('routing', 'function', 'add_lookup_keys'),
        ('routing', 'function', 'get_lookup_keys'),
        ('routing', 'function', 'shard_for_key'),
        ('routing', 'function', 'route'),
        ('routing', 'function', 'mapping_key'),
        ('routing', 'function', 'connections'),
        ('routing', 'function', 'cache_stats'),
        -- routing within topology groups
        ('routing', 'function', 'topology_snapshot'),
        ('routing', 'function', 'topology_members'),
        ('routing', 'function', 'topology_shard_for_key'),
        ('routing', 'function', 'fanout_group'),
        ('routing', 'view', 'shards'),
        ('routing', 'view', 'settings'),
        ('routing', 'view', 'epochs'),
        ('routing', 'view', 'tables'),
        ('routing', 'view', 'shard_map'),
        -- admin: shards, settings, mappings, tables, moves and jobs,
        -- statements on named shards, statistics, this session's connections
        ('admin', 'function', 'add_shard'),
        ('admin', 'function', 'drop_shard'),
        ('admin', 'function', 'set_shard_state'),
        ('admin', 'function', 'configure'),
        ('admin', 'function', 'reset_setting'),
        ('admin', 'function', 'publish_eligibility'),
        ('admin', 'function', 'register_table'),
        ('admin', 'function', 'unregister_table'),
        ('admin', 'function', 'set_mapping'),
        ('admin', 'function', 'update_mapping'),
        ('admin', 'function', 'delete_mapping'),
        ('admin', 'function', 'keys_for_shard'),
        ('admin', 'function', 'reassign_shard'),
        ('admin', 'function', 'rebalance'),
        ('admin', 'function', 'schedule_rebalance'),
        ('admin', 'function', 'wait_for_job'),
        ('admin', 'function', 'cancel_job'),
        ('admin', 'function', 'run_on_shard'),
        ('admin', 'function', 'all_on_shard'),
        ('admin', 'function', 'run_on_all'),
        ('admin', 'function', 'shard_stats'),
        ('admin', 'function', 'database_size'),
        ('admin', 'function', 'shard_activity'),
        ('admin', 'function', 'disconnect'),
        ('admin', 'function', 'disconnect_all'),
        ('admin', 'function', 'connections'),
        ('admin', 'function', 'mapping_key'),
        -- admin: slot maps and slot moves
        ('admin', 'function', 'initialize_shard_map'),
        ('admin', 'function', 'verify_shard_map'),
        ('admin', 'function', 'move_slot'),
        ('admin', 'function', 'schedule_move_slot'),
        -- admin: topology groups, their channels and deliveries
        ('admin', 'function', 'topology_update'),
        ('admin', 'function', 'topology_delete'),
        ('admin', 'function', 'topology_define_channel'),
        ('admin', 'function', 'topology_wait'),
        ('admin', 'view', 'shards'),
        ('admin', 'view', 'settings'),
        ('admin', 'view', 'epochs'),
        ('admin', 'view', 'tables'),
        ('admin', 'view', 'jobs'),
        ('admin', 'view', 'moves'),
        ('admin', 'view', 'shard_map'),
        ('admin', 'view', 'slot_moves'),
        ('admin', 'view', 'topology_outbox'),
        -- admin: two-phase commit's in-doubt transactions
        ('admin', 'function', 'recover_prepared_transactions'),
        ('admin', 'function', 'prepared_transactions_list'),
        ('admin', 'view', 'prepared_transactions'),
        -- admin: monitoring, each shard's health
        ('admin', 'function', 'shard_health_list'),
        ('admin', 'view', 'shard_health'),
        -- admin: jobs that failed, and why none runs
        ('admin', 'function', 'retry_job'),
        ('admin', 'function', 'coordinator_status')
      ) AS s(kind, object_type, name)
     WHERE s.kind = privilege_set.kind
$$;

/*
 * The mapping store, smaller and cheaper to write: keys compare bytewise
 * (COLLATE "C"), the record index holds only lookup keys, the shard index
 * and the unread created_at are gone.  A bulk load then writes one heap
 * tuple and one index entry per key.  The functions that changed a
 * record's rows by "record = ..." find its primary row by key instead.
 */

ALTER TABLE collegedb.mapping
    ALTER COLUMN key TYPE text COLLATE "C",
    ALTER COLUMN record TYPE text COLLATE "C",
    ALTER COLUMN shard TYPE text COLLATE "C",
    DROP COLUMN created_at;
DROP INDEX collegedb.mapping_shard_idx;
DROP INDEX collegedb.mapping_record_idx;
CREATE INDEX mapping_record_idx ON collegedb.mapping (record) WHERE key <> record;

CREATE OR REPLACE FUNCTION collegedb.set_mapping(key text, shard text, lookup_keys text[] DEFAULT '{}')
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k text;
    rec text;
BEGIN
    PERFORM collegedb.ensure_shard_registered(shard);
    rec := collegedb.record_of(key, false);
    k := collegedb.mapping_key(key);
    IF rec IS NOT NULL AND rec <> k THEN
        RAISE EXCEPTION 'key "%" is a lookup key of another record', key
            USING ERRCODE = 'unique_violation',
                  HINT = 'Set the mapping through the record''s primary key.';
    END IF;
    INSERT INTO collegedb.mapping (key, record, shard) VALUES (k, k, set_mapping.shard)
    ON CONFLICT ON CONSTRAINT mapping_pkey DO NOTHING;
    PERFORM collegedb.attach_lookup_keys(k, key, shard, lookup_keys);
    UPDATE collegedb.mapping m SET shard = set_mapping.shard
     WHERE ((m.key = k AND m.record = k) OR (m.record = k AND m.key <> m.record))
       AND m.shard <> set_mapping.shard;
END
$$;

CREATE OR REPLACE FUNCTION collegedb.update_mapping(key text, shard text)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rec text := collegedb.record_of(key, true);
BEGIN
    PERFORM collegedb.ensure_shard_registered(shard);
    UPDATE collegedb.mapping m SET shard = update_mapping.shard
     WHERE ((m.key = rec AND m.record = rec) OR (m.record = rec AND m.key <> m.record))
       AND m.shard <> update_mapping.shard;
END
$$;

CREATE OR REPLACE FUNCTION collegedb.delete_mapping(key text)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rec text := collegedb.record_of(key, true);
BEGIN
    DELETE FROM collegedb.mapping m
     WHERE (m.key = rec AND m.record = rec) OR (m.record = rec AND m.key <> m.record);
END
$$;

/*
 * keep_placements: a switch away from a rule that places keys without
 * mapping rows (computed placement, the slots strategy, for reads or for
 * writes), by configure() or reset_setting(), first gives every key of the
 * registered tables that has no mapping one to the shard that holds it,
 * so that the keys are still found, and written, where they are.
 */
CREATE FUNCTION collegedb.keep_placements()
RETURNS trigger
AS 'MODULE_PATHNAME', 'collegedb_keep_placements'
LANGUAGE C;

REVOKE ALL ON FUNCTION collegedb.keep_placements() FROM PUBLIC;

CREATE TRIGGER config_keeps_placements
  AFTER UPDATE ON collegedb.config
  FOR EACH ROW EXECUTE FUNCTION collegedb.keep_placements();

/* Jobs: the claim of a job's next pending key finds it by an index */

-- a mover claims the next pending key in key order: without this index the
-- claim walks every key already moved (a 100,000-key job slows to a crawl)
CREATE INDEX job_key_pending_idx ON collegedb.job_key (job_id, key) WHERE state = 'pending';
