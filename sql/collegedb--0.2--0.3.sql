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
        ('routing', 'function', 'mapping_id'),
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
        ('admin', 'function', 'mapping_id'),
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
        ('admin', 'view', 'mappings'),
        ('admin', 'function', 'stored_key'),
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
 * The mapping store in its compact form: a key's id (uuid) instead of its
 * 64-digit stored form, the shard's number instead of its name, the record
 * only on lookup keys' rows.  The rows are copied into a new table in key
 * order, in chunks, with a NOTICE of progress for a large store, and the
 * indexes are built afterwards.  With hash_mappings, the stored form of a
 * key becomes its id in hex: the first 32 digits of the old one, in the
 * tables of jobs and moves too.
 */
/*
 * Shard numbers: every shard name ever registered keeps a small number for
 * good, so that a mapping row names its shard in two bytes.  A shard
 * dropped with keys still mapped to it and registered again under the same
 * name gets its number back, and with it those keys, as when rows named
 * the shard.  add_shard numbers a new name.
 */
CREATE TABLE collegedb.shard_number (
    number      smallint PRIMARY KEY CHECK (number > 0),
    name        text COLLATE "C" NOT NULL UNIQUE
);
SELECT pg_catalog.pg_extension_config_dump('collegedb.shard_number', '');
REVOKE ALL ON TABLE collegedb.shard_number FROM PUBLIC;

CREATE TRIGGER shard_number_changed
  AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON collegedb.shard_number
  FOR EACH STATEMENT EXECUTE FUNCTION collegedb.invalidate_cache();

INSERT INTO collegedb.shard_number (number, name)
SELECT row_number() OVER (ORDER BY n.name), n.name
  FROM (SELECT s.name FROM collegedb.shard s
        UNION SELECT m.shard FROM collegedb.mapping m) AS n;

-- the id of a key in the mapping store (see collegedb.mapping)
CREATE FUNCTION collegedb.mapping_id(key text)
RETURNS uuid
AS 'MODULE_PATHNAME', 'collegedb_mapping_id'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;


CREATE FUNCTION collegedb.stored_key(id uuid, name text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT coalesce(name, pg_catalog.replace(id::pg_catalog.text, '-', ''))
$$;

REVOKE ALL ON FUNCTION collegedb.mapping_id(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION collegedb.stored_key(uuid, text) FROM PUBLIC;

CREATE TABLE collegedb.mapping_compact (
    key         uuid NOT NULL,
    shard       smallint NOT NULL,
    record      uuid CONSTRAINT mapping_record_check CHECK (record <> key),
    keys        text[] CONSTRAINT mapping_keys_check CHECK (keys IS NULL OR record IS NULL),
    name        text COLLATE "C"
);

DO $$
DECLARE
    hashed boolean := (SELECT c.hash_mappings FROM collegedb.config c);
    total bigint := (SELECT count(*) FROM collegedb.mapping);
    done bigint := 0;
    chunk bigint;
    copied bigint;
    last text;
BEGIN
    LOOP
        WITH c AS MATERIALIZED (
            SELECT m.key, m.record, m.shard, m.keys FROM collegedb.mapping m
             WHERE last IS NULL OR m.key > last
             ORDER BY m.key LIMIT 100000),
        ins AS (
            INSERT INTO collegedb.mapping_compact (key, shard, record, keys, name)
            SELECT CASE WHEN hashed THEN left(c.key, 32)::uuid ELSE collegedb.mapping_id(c.key) END,
                   sn.number,
                   CASE WHEN c.record = c.key THEN NULL
                        WHEN hashed THEN left(c.record, 32)::uuid
                        ELSE collegedb.mapping_id(c.record) END,
                   CASE WHEN c.keys IS NULL OR c.record <> c.key THEN NULL
                        WHEN hashed THEN ARRAY(SELECT left(k, 32) FROM unnest(c.keys) WITH ORDINALITY AS u(k, o)
                                                ORDER BY o)
                        ELSE c.keys END,
                   CASE WHEN hashed THEN NULL ELSE c.key END
              FROM c JOIN collegedb.shard_number sn ON sn.name = c.shard
            RETURNING 1)
        SELECT (SELECT count(*) FROM c), (SELECT count(*) FROM ins), (SELECT max(c.key) FROM c)
          INTO chunk, copied, last;
        EXIT WHEN chunk = 0;
        done := done + copied;
        IF total >= 1000000 THEN
            RAISE NOTICE 'collegedb: converted % of % mappings', done, total;
        END IF;
    END LOOP;
    IF done <> total THEN
        RAISE EXCEPTION 'collegedb: converted % of % mappings', done, total
            USING ERRCODE = 'data_corrupted';
    END IF;
    IF hashed THEN
        UPDATE collegedb.job SET key = left(key, 32) WHERE key ~ '^[0-9a-f]{64}$';
        UPDATE collegedb.job_key SET key = left(key, 32) WHERE key ~ '^[0-9a-f]{64}$';
        UPDATE collegedb.move SET key = left(key, 32) WHERE key ~ '^[0-9a-f]{64}$';
    END IF;
END
$$;

-- out of the extension first, which takes it off the tables pg_dump dumps
ALTER EXTENSION collegedb DROP TABLE collegedb.mapping;
DROP TABLE collegedb.mapping;
ALTER TABLE collegedb.mapping_compact RENAME TO mapping;
ALTER TABLE collegedb.mapping ADD PRIMARY KEY (key);
CREATE INDEX mapping_record_idx ON collegedb.mapping (record) WHERE record IS NOT NULL;
SELECT pg_catalog.pg_extension_config_dump('collegedb.mapping', '');
REVOKE ALL ON TABLE collegedb.mapping FROM PUBLIC;

CREATE TRIGGER mapping_changed
  AFTER UPDATE OR DELETE OR TRUNCATE ON collegedb.mapping
  FOR EACH STATEMENT EXECUTE FUNCTION collegedb.invalidate_cache();
CREATE TRIGGER mapping_added
  AFTER INSERT ON collegedb.mapping
  FOR EACH STATEMENT EXECUTE FUNCTION collegedb.invalidate_cache('computed');

/*
 * The mapping store as an operator reads it: each key in its stored form,
 * the stored form of its record (the key itself for a primary key), the
 * shard's name and a record's lookup keys, the columns collegedb.mapping
 * had before 0.3.  A lookup of one key is faster on collegedb.mapping, by
 * collegedb.mapping_id(key).
 */
CREATE VIEW collegedb.mappings AS
SELECT collegedb.stored_key(m.key, m.name) AS key,
       coalesce(collegedb.stored_key(r.key, r.name), collegedb.stored_key(m.key, m.name)) AS record,
       sn.name AS shard, m.keys
  FROM collegedb.mapping m
  JOIN collegedb.shard_number sn ON sn.number = m.shard
  LEFT JOIN collegedb.mapping r ON r.key = m.record;
REVOKE ALL ON TABLE collegedb.mappings FROM PUBLIC;


/* helpers whose arguments change (the public functions are replaced in place, keeping their grants) */
DROP FUNCTION collegedb.attach_lookup_keys(text, text, text, text[]);
DROP FUNCTION collegedb.record_of(text, boolean);
DROP FUNCTION collegedb.ensure_shard_registered(text);

/*
 * shard_number_of returns the number of registered shard 'shard' (see
 * collegedb.shard_number); an unregistered one is SHARD_NOT_FOUND.
 */
CREATE FUNCTION collegedb.shard_number_of(shard text)
RETURNS smallint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n smallint;
BEGIN
    IF shard IS NULL THEN
        RAISE EXCEPTION 'shard must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT sn.number INTO n
      FROM collegedb.shard s JOIN collegedb.shard_number sn ON sn.name = s.name
     WHERE s.name = shard_number_of.shard;
    IF n IS NULL THEN
        RAISE EXCEPTION 'shard "%" is not registered', shard
            USING ERRCODE = 'CD001',
                  HINT = 'Register a collegedb server with collegedb.add_shard().';
    END IF;
    RETURN n;
END
$$;

-- the name a mapping row keeps for a key: the key itself without hash_mappings
CREATE FUNCTION collegedb.mapping_name(key text)
RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN c.hash_mappings THEN NULL ELSE mapping_name.key END
      FROM collegedb.config c
$$;

-- the id of the record a key belongs to (NULL, or an error, if none)
CREATE FUNCTION collegedb.record_of(key text, must_exist boolean)
RETURNS uuid
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rec uuid;
BEGIN
    IF key IS NULL THEN
        RAISE EXCEPTION 'key must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT coalesce(m.record, m.key) INTO rec
      FROM collegedb.mapping m WHERE m.key = collegedb.mapping_id(record_of.key);
    IF rec IS NULL AND must_exist THEN
        RAISE EXCEPTION 'key "%" has no mapping', key USING ERRCODE = 'CD005';
    END IF;
    RETURN rec;
END
$$;

/*
 * attach_lookup_keys adds lookup keys to record 'rec' on shard number
 * 'shard', refusing (before changing anything) any that belongs to another
 * record, and lists them, stored, on the record's primary row.
 */
CREATE FUNCTION collegedb.attach_lookup_keys(rec uuid, primary_key text, shard smallint,
                                             lookup_keys text[])
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    lk text;
    owner uuid;
    originals text[];
BEGIN
    FOREACH lk IN ARRAY coalesce(lookup_keys, '{}') LOOP
        IF lk IS NULL THEN
            RAISE EXCEPTION 'lookup keys must not be null' USING ERRCODE = 'null_value_not_allowed';
        END IF;
        SELECT coalesce(m.record, m.key) INTO owner
          FROM collegedb.mapping m WHERE m.key = collegedb.mapping_id(lk);
        IF owner IS NOT NULL AND owner <> rec THEN
            RAISE EXCEPTION 'lookup key "%" already belongs to another record', lk
                USING ERRCODE = 'unique_violation',
                      HINT = 'A lookup key can point at one record only.';
        END IF;
    END LOOP;
    IF cardinality(lookup_keys) > 0 THEN
        SELECT coalesce(m.keys, ARRAY[collegedb.mapping_key(primary_key)]) INTO originals
          FROM collegedb.mapping m WHERE m.key = rec;
        INSERT INTO collegedb.mapping (key, shard, record, name)
        SELECT DISTINCT ON (collegedb.mapping_id(k)) collegedb.mapping_id(k),
               attach_lookup_keys.shard, rec, collegedb.mapping_name(k)
          FROM unnest(lookup_keys) AS k
         WHERE collegedb.mapping_id(k) <> rec
        ON CONFLICT (key) DO NOTHING;
        UPDATE collegedb.mapping m
           SET keys = (SELECT array_agg(k ORDER BY ord)
                         FROM (SELECT k, min(ord) AS ord
                                 FROM unnest(originals || ARRAY(SELECT collegedb.mapping_key(l)
                                                                  FROM unnest(lookup_keys) AS l))
                                      WITH ORDINALITY AS u(k, ord)
                                GROUP BY k) AS d)
         WHERE m.key = rec;
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION collegedb.set_mapping(key text, shard text, lookup_keys text[] DEFAULT '{}')
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n smallint := collegedb.shard_number_of(shard);
    k uuid;
    rec uuid;
BEGIN
    rec := collegedb.record_of(key, false);
    k := collegedb.mapping_id(key);
    IF rec IS NOT NULL AND rec <> k THEN
        RAISE EXCEPTION 'key "%" is a lookup key of another record', key
            USING ERRCODE = 'unique_violation',
                  HINT = 'Set the mapping through the record''s primary key.';
    END IF;
    INSERT INTO collegedb.mapping (key, shard, name)
    VALUES (k, n, collegedb.mapping_name(key))
    ON CONFLICT ON CONSTRAINT mapping_pkey DO NOTHING;
    PERFORM collegedb.attach_lookup_keys(k, key, n, lookup_keys);
    UPDATE collegedb.mapping m SET shard = n
     WHERE (m.key = k OR m.record = k) AND m.shard <> n;
END
$$;

CREATE OR REPLACE FUNCTION collegedb.add_lookup_keys(key text, lookup_keys text[])
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rec uuid := collegedb.record_of(key, true);
    s smallint;
BEGIN
    SELECT m.shard INTO s FROM collegedb.mapping m WHERE m.key = rec;
    PERFORM collegedb.attach_lookup_keys(rec, key, s, lookup_keys);
END
$$;

-- the record's keys in their stored form (with hash_mappings, their ids in hex)
CREATE OR REPLACE FUNCTION collegedb.get_lookup_keys(key text)
RETURNS text[]
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rec uuid := collegedb.record_of(key, false);
    originals text[];
BEGIN
    IF rec IS NULL THEN
        RETURN '{}';
    END IF;
    SELECT coalesce(m.keys, ARRAY[collegedb.stored_key(m.key, m.name)]) INTO originals
      FROM collegedb.mapping m WHERE m.key = rec;
    RETURN originals;
END
$$;

CREATE OR REPLACE FUNCTION collegedb.update_mapping(key text, shard text)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rec uuid := collegedb.record_of(key, true);
    n smallint := collegedb.shard_number_of(shard);
BEGIN
    UPDATE collegedb.mapping m SET shard = n
     WHERE (m.key = rec OR m.record = rec) AND m.shard <> n;
END
$$;

CREATE OR REPLACE FUNCTION collegedb.delete_mapping(key text)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rec uuid := collegedb.record_of(key, true);
BEGIN
    DELETE FROM collegedb.mapping m WHERE m.key = rec OR m.record = rec;
END
$$;

CREATE OR REPLACE FUNCTION collegedb.keys_for_shard(shard text)
RETURNS SETOF text
LANGUAGE sql STABLE STRICT
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT s.k FROM (
        SELECT collegedb.stored_key(m.key, m.name) AS k
          FROM collegedb.mapping m
          JOIN collegedb.shard_number sn ON sn.number = m.shard
         WHERE sn.name = keys_for_shard.shard) AS s
     ORDER BY s.k COLLATE "C"
$$;

REVOKE ALL ON FUNCTION collegedb.shard_number_of(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION collegedb.mapping_name(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION collegedb.record_of(text, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION collegedb.attach_lookup_keys(uuid, text, smallint, text[]) FROM PUBLIC;

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
