/* collegedb--0.1.sql: the front database of a sharded SQL fleet */

\echo Use "CREATE EXTENSION collegedb" to load this file. \quit

/*
 * The foreign-data wrapper.  Shards are foreign servers of it with option
 * 'dialect'; the server "collegedb" (no options) is the router.
 */
CREATE FUNCTION collegedb.fdw_handler()
RETURNS fdw_handler
AS 'MODULE_PATHNAME', 'collegedb_fdw_handler'
LANGUAGE C STRICT;

CREATE FUNCTION collegedb.fdw_validator(text[], oid)
RETURNS void
AS 'MODULE_PATHNAME', 'collegedb_fdw_validator'
LANGUAGE C STRICT;

CREATE FOREIGN DATA WRAPPER collegedb
  HANDLER collegedb.fdw_handler
  VALIDATOR collegedb.fdw_validator;

CREATE SERVER collegedb FOREIGN DATA WRAPPER collegedb;

/*
 * Catalog: the registered shards and their state (seed 001 "shard
 * eligibility").  Written only through the functions below.
 */
CREATE TABLE collegedb.shard (
    name        text PRIMARY KEY,
    physical_id text UNIQUE,
    writable    boolean NOT NULL DEFAULT true,
    drain       text NOT NULL DEFAULT 'active'
                CHECK (drain IN ('active', 'draining', 'retired')),
    tags        jsonb NOT NULL DEFAULT '{}'
                CHECK (jsonb_typeof(tags) = 'object'),
    region      text
                CHECK (region IN ('wnam', 'enam', 'sam', 'weur', 'eeur', 'apac',
                                  'apac-ne', 'apac-se', 'oc', 'afr', 'me')),
    priority    double precision NOT NULL DEFAULT 1
                CHECK (priority > 0 AND priority < 'infinity'),
    added_at    timestamptz NOT NULL DEFAULT now()
);
SELECT pg_catalog.pg_extension_config_dump('collegedb.shard', '');

/*
 * Every backend caches collegedb's catalog tables; a change to one makes
 * every backend drop its copy at its next statement.
 */
CREATE FUNCTION collegedb.invalidate_cache()
RETURNS trigger
AS 'MODULE_PATHNAME', 'collegedb_invalidate_cache'
LANGUAGE C;

CREATE TRIGGER shard_changed
  AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON collegedb.shard
  FOR EACH STATEMENT EXECUTE FUNCTION collegedb.invalidate_cache();

/*
 * Settings (DESIGN.md section 3): one row, written by collegedb.configure().
 */
CREATE TABLE collegedb.config (
    id                    boolean PRIMARY KEY DEFAULT true CHECK (id),
    strategy              text NOT NULL DEFAULT 'hash'
                          CHECK (strategy IN ('hash', 'round-robin', 'random', 'location', 'jump', 'slots')),
    read_strategy         text
                          CHECK (read_strategy IN ('hash', 'round-robin', 'random', 'location', 'jump', 'slots')),
    write_strategy        text
                          CHECK (write_strategy IN ('hash', 'round-robin', 'random', 'location', 'jump', 'slots')),
    placement             text NOT NULL DEFAULT 'kv' CHECK (placement IN ('kv', 'computed')),
    target_region         text
                          CHECK (target_region IN ('wnam', 'enam', 'sam', 'weur', 'eeur', 'apac',
                                                   'apac-ne', 'apac-se', 'oc', 'afr', 'me')),
    allocate_on_read      boolean NOT NULL DEFAULT false,
    hash_mappings         boolean NOT NULL DEFAULT true,
    max_shard_size        bigint CHECK (max_shard_size > 0),
    size_cache_ttl        interval NOT NULL DEFAULT '30 seconds'
                          CHECK (size_cache_ttl >= '0'),
    mapping_cache_ttl     interval NOT NULL DEFAULT '30 seconds'
                          CHECK (mapping_cache_ttl >= '0'),
    eligible              regprocedure,
    migration_concurrency integer NOT NULL DEFAULT 25 CHECK (migration_concurrency > 0),
    region_prefixed_keys  boolean NOT NULL DEFAULT false,
    CHECK (placement = 'kv' OR (coalesce(read_strategy, strategy) = 'hash'
                                AND coalesce(write_strategy, strategy) = 'hash'))
);
INSERT INTO collegedb.config DEFAULT VALUES;
SELECT pg_catalog.pg_extension_config_dump('collegedb.config', '');

CREATE TRIGGER config_changed
  AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON collegedb.config
  FOR EACH STATEMENT EXECUTE FUNCTION collegedb.invalidate_cache();

/*
 * The mapping store (DESIGN.md 4.4): one row per key, primary or lookup.
 * 'key' is the stored form (lowercase hex SHA-256 of the key's UTF-8 bytes
 * with hash_mappings, else the key itself); 'record' is the stored form of
 * the record's primary key, shared by its lookup keys.  Only a record that
 * has lookup keys keeps its original keys, on its primary row, so that
 * get_lookup_keys() can return them.
 */
CREATE TABLE collegedb.mapping (
    key         text PRIMARY KEY,
    record      text NOT NULL,
    shard       text NOT NULL,
    keys        text[] CHECK (keys IS NULL OR key = record),
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX mapping_record_idx ON collegedb.mapping (record);
CREATE INDEX mapping_shard_idx ON collegedb.mapping (shard);
SELECT pg_catalog.pg_extension_config_dump('collegedb.mapping', '');

CREATE TRIGGER mapping_changed
  AFTER UPDATE OR DELETE OR TRUNCATE ON collegedb.mapping
  FOR EACH STATEMENT EXECUTE FUNCTION collegedb.invalidate_cache();
-- new rows matter only under computed placement, where the router caches
-- the absence of an exception; under KV placement nobody caches absences
CREATE TRIGGER mapping_added
  AFTER INSERT ON collegedb.mapping
  FOR EACH STATEMENT EXECUTE FUNCTION collegedb.invalidate_cache('computed');

/*
 * Computed placement (DESIGN.md 4.5): the published epochs, each the sorted
 * list of the shards eligible when it was published, numbered from 1.
 * Epochs never change; the constraints and the trigger refuse a corrupt or
 * hand-edited row rather than let the router use it.
 */
CREATE FUNCTION collegedb.is_sorted_set(names text[])
RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT coalesce(bool_and(n IS NOT NULL AND n <> '' AND (prev IS NULL OR prev < n)), false)
      FROM (SELECT n, lag(n) OVER (ORDER BY ord) AS prev
              FROM unnest(names) WITH ORDINALITY AS u(n, ord)) AS s
$$;

CREATE TABLE collegedb.epoch (
    epoch        integer PRIMARY KEY CHECK (epoch >= 1),
    shards       text[] NOT NULL
                 CHECK (cardinality(shards) >= 1 AND collegedb.is_sorted_set(shards COLLATE "C")),
    published_at timestamptz NOT NULL DEFAULT now()
);
SELECT pg_catalog.pg_extension_config_dump('collegedb.epoch', '');

CREATE FUNCTION collegedb.epoch_guard()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        RAISE EXCEPTION 'epochs cannot be changed' USING ERRCODE = 'CD013',
            HINT = 'Publish a new epoch with collegedb.publish_eligibility().';
    END IF;
    IF NEW.epoch <> coalesce((SELECT max(epoch) FROM collegedb.epoch), 0) + 1 THEN
        RAISE EXCEPTION 'epoch % does not follow the newest epoch', NEW.epoch
            USING ERRCODE = 'CD013';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER epoch_guard
  BEFORE INSERT OR UPDATE ON collegedb.epoch
  FOR EACH ROW EXECUTE FUNCTION collegedb.epoch_guard();

CREATE TRIGGER epoch_changed
  AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON collegedb.epoch
  FOR EACH STATEMENT EXECUTE FUNCTION collegedb.invalidate_cache();

CREATE VIEW collegedb.epochs AS
SELECT epoch, shards, published_at FROM collegedb.epoch ORDER BY epoch;

/*
 * Registered tables: tables whose rows live with their key (colocated) and
 * move with it.
 */
CREATE TABLE collegedb.registered_table (
    table_name    text PRIMARY KEY CHECK (table_name <> ''),
    key_column    text NOT NULL CHECK (key_column <> ''),
    registered_at timestamptz NOT NULL DEFAULT now()
);
SELECT pg_catalog.pg_extension_config_dump('collegedb.registered_table', '');

CREATE TRIGGER registered_table_changed
  AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON collegedb.registered_table
  FOR EACH STATEMENT EXECUTE FUNCTION collegedb.invalidate_cache();

/* Shards */

CREATE FUNCTION collegedb.add_shard(name text,
                                    region text DEFAULT NULL,
                                    priority double precision DEFAULT 1,
                                    physical_id text DEFAULT NULL,
                                    tags jsonb DEFAULT '{}')
RETURNS void
AS 'MODULE_PATHNAME', 'collegedb_add_shard'
LANGUAGE C;

CREATE FUNCTION collegedb.drop_shard(name text, force boolean DEFAULT false)
RETURNS void
AS 'MODULE_PATHNAME', 'collegedb_drop_shard'
LANGUAGE C;

CREATE FUNCTION collegedb.set_shard_state(name text,
                                          writable boolean DEFAULT NULL,
                                          drain text DEFAULT NULL,
                                          tags jsonb DEFAULT NULL,
                                          region text DEFAULT NULL,
                                          priority double precision DEFAULT NULL,
                                          physical_id text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'collegedb_set_shard_state'
LANGUAGE C;

CREATE VIEW collegedb.shards AS
SELECT s.name,
       (SELECT split_part(o, '=', 2) FROM unnest(fs.srvoptions) AS o
         WHERE o LIKE 'dialect=%') AS dialect,
       s.physical_id, s.writable, s.drain, s.tags, s.region, s.priority,
       s.added_at
  FROM collegedb.shard s
  LEFT JOIN pg_catalog.pg_foreign_server fs ON fs.srvname = s.name
 ORDER BY s.name COLLATE "C";

/* Running statements on shards */

CREATE FUNCTION collegedb.run_on_shard(shard text, sql text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'collegedb_run_on_shard'
LANGUAGE C;

CREATE FUNCTION collegedb.run_on_shard(shard text, sql text, VARIADIC params "any")
RETURNS bigint
AS 'MODULE_PATHNAME', 'collegedb_run_on_shard'
LANGUAGE C;

CREATE FUNCTION collegedb.all_on_shard(shard text, sql text)
RETURNS SETOF jsonb
AS 'MODULE_PATHNAME', 'collegedb_all_on_shard'
LANGUAGE C;

CREATE FUNCTION collegedb.all_on_shard(shard text, sql text, VARIADIC params "any")
RETURNS SETOF jsonb
AS 'MODULE_PATHNAME', 'collegedb_all_on_shard'
LANGUAGE C;

CREATE FUNCTION collegedb.run_on_all(sql text)
RETURNS TABLE (shard text, ok boolean, rows bigint, error text)
AS 'MODULE_PATHNAME', 'collegedb_run_on_all'
LANGUAGE C;

CREATE FUNCTION collegedb.fanout(sql text)
RETURNS TABLE (shard text, value jsonb, error text)
AS 'MODULE_PATHNAME', 'collegedb_fanout'
LANGUAGE C;

CREATE FUNCTION collegedb.fanout(sql text, VARIADIC params "any")
RETURNS TABLE (shard text, value jsonb, error text)
AS 'MODULE_PATHNAME', 'collegedb_fanout'
LANGUAGE C;

/* Connections and activity */

CREATE FUNCTION collegedb.connections()
RETURNS TABLE (shard text, user_name text, dialect text, valid boolean,
               in_transaction boolean)
AS 'MODULE_PATHNAME', 'collegedb_connections'
LANGUAGE C;

CREATE FUNCTION collegedb.disconnect(shard text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'collegedb_disconnect'
LANGUAGE C STRICT;

CREATE FUNCTION collegedb.disconnect_all()
RETURNS boolean
AS 'MODULE_PATHNAME', 'collegedb_disconnect_all'
LANGUAGE C;

CREATE FUNCTION collegedb.publish_eligibility()
RETURNS TABLE (eligible text[], published boolean, epoch integer)
AS 'MODULE_PATHNAME', 'collegedb_publish_eligibility'
LANGUAGE C;

CREATE FUNCTION collegedb.register_table(table_name text, key_column text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF coalesce(table_name, '') = '' OR coalesce(key_column, '') = '' THEN
        RAISE EXCEPTION 'table name and key column must not be empty'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO collegedb.registered_table (table_name, key_column)
    VALUES (register_table.table_name, register_table.key_column)
    ON CONFLICT ON CONSTRAINT registered_table_pkey
    DO UPDATE SET key_column = EXCLUDED.key_column;
END
$$;

CREATE FUNCTION collegedb.unregister_table(table_name text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    DELETE FROM collegedb.registered_table r WHERE r.table_name = unregister_table.table_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'table "%" is not registered', table_name USING ERRCODE = 'undefined_table';
    END IF;
END
$$;

CREATE VIEW collegedb.tables AS
SELECT table_name, key_column, registered_at FROM collegedb.registered_table ORDER BY table_name;

/*
 * Moves and jobs (DESIGN.md 6): the journal of key moves, and the jobs
 * (a single move, or a rebalance) that background workers run.  Written by
 * the workers only; every journal step is committed before the next.
 */
CREATE TABLE collegedb.job (
    id               bigserial PRIMARY KEY,
    kind             text NOT NULL CHECK (kind IN ('move', 'rebalance')),
    table_name       text,
    key              text,
    target           text,
    force            boolean NOT NULL DEFAULT false,
    concurrency      integer CHECK (concurrency > 0),
    state            text NOT NULL DEFAULT 'queued'
                     CHECK (state IN ('queued', 'running', 'done', 'failed', 'cancelled')),
    owner            oid NOT NULL,
    cancel_requested boolean NOT NULL DEFAULT false,
    result           jsonb,
    last_error       text,
    lease_pid        integer,
    created_at       timestamptz NOT NULL DEFAULT now(),
    started_at       timestamptz,
    finished_at      timestamptz
);
SELECT pg_catalog.pg_extension_config_dump('collegedb.job', '');

CREATE TABLE collegedb.job_key (
    job_id   bigint NOT NULL REFERENCES collegedb.job ON DELETE CASCADE,
    key      text NOT NULL,
    source   text NOT NULL,
    target   text NOT NULL,
    state    text NOT NULL DEFAULT 'pending'
             CHECK (state IN ('pending', 'moving', 'moved', 'failed')),
    error    text,
    PRIMARY KEY (job_id, key)
);

CREATE TABLE collegedb.move (
    id          bigserial PRIMARY KEY,
    job_id      bigint REFERENCES collegedb.job ON DELETE SET NULL,
    key         text NOT NULL,
    source      text NOT NULL,
    target      text NOT NULL,
    step        text NOT NULL DEFAULT 'journaled'
                CHECK (step IN ('journaled', 'copied', 'source_done', 'mapped', 'done', 'failed')),
    rows        jsonb,
    error       text,
    lease_pid   integer,
    lease_until timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
-- one mover per key: a second active move of a key is refused
CREATE UNIQUE INDEX move_active_key ON collegedb.move (key) WHERE step NOT IN ('done', 'failed');
SELECT pg_catalog.pg_extension_config_dump('collegedb.move', '');

CREATE VIEW collegedb.moves AS
SELECT id, job_id, key, source, target, step, rows, error, lease_pid, lease_until,
       created_at, updated_at
  FROM collegedb.move ORDER BY id;

CREATE VIEW collegedb.jobs AS
SELECT j.id, j.kind, j.table_name, j.state,
       coalesce(k.examined, 0) + coalesce((j.result->>'agreed')::bigint, 0) AS examined,
       coalesce((j.result->>'agreed')::bigint, 0) AS agreed,
       coalesce(k.moved, 0) AS moved,
       coalesce(k.failed, 0) AS failed,
       j.concurrency, j.cancel_requested, j.last_error, j.result,
       j.created_at, j.started_at, j.finished_at
  FROM collegedb.job j
  LEFT JOIN (SELECT job_id, count(*) AS examined,
                    count(*) FILTER (WHERE state = 'moved') AS moved,
                    count(*) FILTER (WHERE state = 'failed') AS failed
               FROM collegedb.job_key GROUP BY job_id) k ON k.job_id = j.id
 ORDER BY j.id;

CREATE FUNCTION collegedb.reassign_shard(key text, target text, force boolean DEFAULT false)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'collegedb_reassign_shard'
LANGUAGE C;

CREATE FUNCTION collegedb.rebalance(table_name text, dry_run boolean DEFAULT false,
                                    concurrency integer DEFAULT NULL)
RETURNS TABLE (examined bigint, agreed bigint, moved bigint, failed jsonb)
AS 'MODULE_PATHNAME', 'collegedb_rebalance'
LANGUAGE C;

CREATE FUNCTION collegedb.schedule_rebalance(table_name text, concurrency integer DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'collegedb_schedule_rebalance'
LANGUAGE C;

CREATE FUNCTION collegedb.wait_for_job(id bigint, timeout interval DEFAULT '1 hour')
RETURNS collegedb.jobs
AS 'MODULE_PATHNAME', 'collegedb_wait_for_job'
LANGUAGE C;

CREATE FUNCTION collegedb.cancel_job(id bigint)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    UPDATE collegedb.job j SET cancel_requested = true
     WHERE j.id = cancel_job.id AND j.state IN ('queued', 'running');
    IF FOUND THEN
        RETURN true;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM collegedb.job j WHERE j.id = cancel_job.id) THEN
        RAISE EXCEPTION 'job % does not exist', id USING ERRCODE = 'undefined_object';
    END IF;
    RETURN false;
END
$$;

CREATE FUNCTION collegedb.shard_stats()
RETURNS TABLE (shard text, key_count bigint, size_bytes bigint, writable boolean,
               drain text, eligible boolean)
AS 'MODULE_PATHNAME', 'collegedb_shard_stats'
LANGUAGE C;

CREATE FUNCTION collegedb.database_size(shard text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'collegedb_database_size'
LANGUAGE C STRICT;

CREATE FUNCTION collegedb.shard_activity()
RETURNS TABLE (shard text, statements bigint, errors bigint)
AS 'MODULE_PATHNAME', 'collegedb_shard_activity'
LANGUAGE C;

/* Placement hash functions (DESIGN.md 4.1) */

CREATE FUNCTION collegedb.rendezvous_score(shard text, key text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'collegedb_rendezvous_score'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION collegedb.rendezvous_owner(key text, shards text[])
RETURNS text
AS 'MODULE_PATHNAME', 'collegedb_rendezvous_owner'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION collegedb.jump_bucket(key text, buckets integer)
RETURNS integer
AS 'MODULE_PATHNAME', 'collegedb_jump_bucket'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION collegedb.slot_of(key text, slot_count integer)
RETURNS integer
AS 'MODULE_PATHNAME', 'collegedb_slot_of'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

/* Settings */

CREATE FUNCTION collegedb.configure(strategy text DEFAULT NULL,
                                    read_strategy text DEFAULT NULL,
                                    write_strategy text DEFAULT NULL,
                                    placement text DEFAULT NULL,
                                    target_region text DEFAULT NULL,
                                    allocate_on_read boolean DEFAULT NULL,
                                    hash_mappings boolean DEFAULT NULL,
                                    max_shard_size bigint DEFAULT NULL,
                                    size_cache_ttl interval DEFAULT NULL,
                                    mapping_cache_ttl interval DEFAULT NULL,
                                    eligible regprocedure DEFAULT NULL,
                                    migration_concurrency integer DEFAULT NULL,
                                    region_prefixed_keys boolean DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    strategies constant text[] := ARRAY['hash', 'round-robin', 'random', 'location', 'jump', 'slots'];
    regions constant text[] := ARRAY['wnam', 'enam', 'sam', 'weur', 'eeur', 'apac',
                                     'apac-ne', 'apac-se', 'oc', 'afr', 'me'];
    cur collegedb.config;
    s text;
BEGIN
    SELECT * INTO cur FROM collegedb.config FOR UPDATE;

    FOREACH s IN ARRAY ARRAY[configure.strategy, configure.read_strategy, configure.write_strategy] LOOP
        IF s IS NOT NULL AND NOT s = ANY (strategies) THEN
            RAISE EXCEPTION 'unknown strategy "%"', s
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Valid strategies are hash, round-robin, random, location, jump and slots.';
        END IF;
    END LOOP;
    IF configure.placement IS NOT NULL AND configure.placement NOT IN ('kv', 'computed') THEN
        RAISE EXCEPTION 'unknown placement "%"', configure.placement
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Valid placements are kv and computed.';
    END IF;
    IF configure.target_region IS NOT NULL AND NOT configure.target_region = ANY (regions) THEN
        RAISE EXCEPTION 'invalid region "%"', configure.target_region
            USING ERRCODE = 'CD011',
                  HINT = 'Valid regions are: wnam, enam, sam, weur, eeur, apac, apac-ne, apac-se, oc, afr, me.';
    END IF;
    IF configure.max_shard_size <= 0 THEN
        RAISE EXCEPTION 'max_shard_size must be a positive number of bytes'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF configure.size_cache_ttl < '0' OR configure.mapping_cache_ttl < '0' THEN
        RAISE EXCEPTION 'cache TTLs must not be negative'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF configure.migration_concurrency <= 0 THEN
        RAISE EXCEPTION 'migration_concurrency must be positive'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF configure.eligible IS NOT NULL AND NOT EXISTS (
           SELECT 1 FROM pg_proc p
            WHERE p.oid = configure.eligible
              AND p.prorettype = 'boolean'::regtype
              AND p.proargtypes = '25 3802'::oidvector
              AND p.prokind = 'f' AND NOT p.proretset) THEN
        RAISE EXCEPTION 'eligibility predicate % has the wrong signature', configure.eligible
            USING ERRCODE = 'invalid_function_definition',
                  HINT = 'The predicate must be a function (shard text, context jsonb) returning boolean.';
    END IF;
    IF configure.hash_mappings IS DISTINCT FROM cur.hash_mappings
       AND configure.hash_mappings IS NOT NULL
       AND EXISTS (SELECT 1 FROM collegedb.mapping) THEN
        RAISE EXCEPTION 'cannot change hash_mappings while mappings exist'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'Stored keys keep the form they were saved in.',
                  HINT = 'Delete the mappings first, or keep the current setting.';
    END IF;
    IF coalesce(configure.placement, cur.placement) = 'computed'
       AND (coalesce(configure.read_strategy, cur.read_strategy,
                     configure.strategy, cur.strategy) <> 'hash'
            OR coalesce(configure.write_strategy, cur.write_strategy,
                        configure.strategy, cur.strategy) <> 'hash') THEN
        RAISE EXCEPTION 'computed placement needs the hash strategy'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Only hash places a key by the key alone, for reads and writes.';
    END IF;

    UPDATE collegedb.config c SET
        strategy = coalesce(configure.strategy, c.strategy),
        read_strategy = coalesce(configure.read_strategy, c.read_strategy),
        write_strategy = coalesce(configure.write_strategy, c.write_strategy),
        placement = coalesce(configure.placement, c.placement),
        target_region = coalesce(configure.target_region, c.target_region),
        allocate_on_read = coalesce(configure.allocate_on_read, c.allocate_on_read),
        hash_mappings = coalesce(configure.hash_mappings, c.hash_mappings),
        max_shard_size = coalesce(configure.max_shard_size, c.max_shard_size),
        size_cache_ttl = coalesce(configure.size_cache_ttl, c.size_cache_ttl),
        mapping_cache_ttl = coalesce(configure.mapping_cache_ttl, c.mapping_cache_ttl),
        eligible = coalesce(configure.eligible, c.eligible),
        migration_concurrency = coalesce(configure.migration_concurrency, c.migration_concurrency),
        region_prefixed_keys = coalesce(configure.region_prefixed_keys, c.region_prefixed_keys);

    -- switching to computed placement publishes epoch 1 (or the next one)
    IF configure.placement = 'computed' AND cur.placement <> 'computed' THEN
        PERFORM collegedb.publish_eligibility();
    END IF;
END
$$;

CREATE FUNCTION collegedb.reset_setting(name text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    CASE reset_setting.name
    WHEN 'strategy' THEN UPDATE collegedb.config SET strategy = DEFAULT;
    WHEN 'read_strategy' THEN UPDATE collegedb.config SET read_strategy = NULL;
    WHEN 'write_strategy' THEN UPDATE collegedb.config SET write_strategy = NULL;
    WHEN 'placement' THEN UPDATE collegedb.config SET placement = DEFAULT;
    WHEN 'target_region' THEN UPDATE collegedb.config SET target_region = NULL;
    WHEN 'allocate_on_read' THEN UPDATE collegedb.config SET allocate_on_read = DEFAULT;
    WHEN 'max_shard_size' THEN UPDATE collegedb.config SET max_shard_size = NULL;
    WHEN 'size_cache_ttl' THEN UPDATE collegedb.config SET size_cache_ttl = DEFAULT;
    WHEN 'mapping_cache_ttl' THEN UPDATE collegedb.config SET mapping_cache_ttl = DEFAULT;
    WHEN 'eligible' THEN UPDATE collegedb.config SET eligible = NULL;
    WHEN 'migration_concurrency' THEN UPDATE collegedb.config SET migration_concurrency = DEFAULT;
    WHEN 'region_prefixed_keys' THEN UPDATE collegedb.config SET region_prefixed_keys = DEFAULT;
    WHEN 'hash_mappings' THEN PERFORM collegedb.configure(hash_mappings => true);
    ELSE
        RAISE EXCEPTION 'unknown setting "%"', reset_setting.name
            USING ERRCODE = 'undefined_object';
    END CASE;
END
$$;

CREATE VIEW collegedb.settings AS
SELECT s.name, s.value, s.is_default
  FROM collegedb.config c,
       LATERAL (VALUES
         ('strategy', c.strategy, c.strategy = 'hash'),
         ('read_strategy', c.read_strategy, c.read_strategy IS NULL),
         ('write_strategy', c.write_strategy, c.write_strategy IS NULL),
         ('placement', c.placement, c.placement = 'kv'),
         ('target_region', c.target_region, c.target_region IS NULL),
         ('allocate_on_read', c.allocate_on_read::text, NOT c.allocate_on_read),
         ('hash_mappings', c.hash_mappings::text, c.hash_mappings),
         ('max_shard_size', c.max_shard_size::text, c.max_shard_size IS NULL),
         ('size_cache_ttl', c.size_cache_ttl::text, c.size_cache_ttl = '30 seconds'),
         ('mapping_cache_ttl', c.mapping_cache_ttl::text, c.mapping_cache_ttl = '30 seconds'),
         ('eligible', c.eligible::text, c.eligible IS NULL),
         ('migration_concurrency', c.migration_concurrency::text, c.migration_concurrency = 25),
         ('region_prefixed_keys', c.region_prefixed_keys::text, NOT c.region_prefixed_keys)
       ) AS s(name, value, is_default);

/* Routing by key (DESIGN.md 5) */

CREATE FUNCTION collegedb.run(key text, sql text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'collegedb_run'
LANGUAGE C;

CREATE FUNCTION collegedb.run(key text, sql text, VARIADIC params "any")
RETURNS bigint
AS 'MODULE_PATHNAME', 'collegedb_run'
LANGUAGE C;

CREATE FUNCTION collegedb.all(key text, sql text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'collegedb_all'
LANGUAGE C;

CREATE FUNCTION collegedb.all(key text, sql text, VARIADIC params "any")
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'collegedb_all'
LANGUAGE C;

CREATE FUNCTION collegedb.all_json(key text, sql text)
RETURNS SETOF jsonb
AS 'MODULE_PATHNAME', 'collegedb_all_json'
LANGUAGE C;

CREATE FUNCTION collegedb.all_json(key text, sql text, VARIADIC params "any")
RETURNS SETOF jsonb
AS 'MODULE_PATHNAME', 'collegedb_all_json'
LANGUAGE C;

CREATE FUNCTION collegedb.first(key text, sql text)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'collegedb_first'
LANGUAGE C;

CREATE FUNCTION collegedb.first(key text, sql text, VARIADIC params "any")
RETURNS jsonb
AS 'MODULE_PATHNAME', 'collegedb_first'
LANGUAGE C;

CREATE FUNCTION collegedb.shard_for_key(key text, for_write boolean DEFAULT false)
RETURNS text
AS 'MODULE_PATHNAME', 'collegedb_shard_for_key'
LANGUAGE C STRICT;

CREATE FUNCTION collegedb.route(key text)
RETURNS TABLE (shard text, source text, hops integer, epoch integer, has_key boolean)
AS 'MODULE_PATHNAME', 'collegedb_route'
LANGUAGE C STRICT;

CREATE FUNCTION collegedb.mapping_key(key text)
RETURNS text
AS 'MODULE_PATHNAME', 'collegedb_mapping_key'
LANGUAGE C STABLE STRICT;

CREATE FUNCTION collegedb.cache_stats()
RETURNS TABLE (mapping_hits bigint, mapping_misses bigint, catalog_reads bigint)
AS 'MODULE_PATHNAME', 'collegedb_cache_stats'
LANGUAGE C;

/* Mappings and lookup keys (seed 001 "lookup keys") */

CREATE FUNCTION collegedb.ensure_shard_registered(shard text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF shard IS NULL THEN
        RAISE EXCEPTION 'shard must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM collegedb.shard s WHERE s.name = ensure_shard_registered.shard) THEN
        RAISE EXCEPTION 'shard "%" is not registered', shard
            USING ERRCODE = 'CD001',
                  HINT = 'Register a collegedb server with collegedb.add_shard().';
    END IF;
END
$$;

/* record_of returns the stored form of the record a key belongs to */
CREATE FUNCTION collegedb.record_of(key text, must_exist boolean)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rec text;
BEGIN
    IF key IS NULL THEN
        RAISE EXCEPTION 'key must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT m.record INTO rec FROM collegedb.mapping m WHERE m.key = collegedb.mapping_key(record_of.key);
    IF rec IS NULL AND must_exist THEN
        RAISE EXCEPTION 'key "%" has no mapping', key USING ERRCODE = 'CD005';
    END IF;
    RETURN rec;
END
$$;

/*
 * attach_lookup_keys adds lookup keys to record 'rec' on 'shard', refusing
 * (before changing anything) any that belongs to another record.
 */
CREATE FUNCTION collegedb.attach_lookup_keys(rec text, primary_key text, shard text,
                                             lookup_keys text[])
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    lk text;
    owner text;
    originals text[];
BEGIN
    FOREACH lk IN ARRAY coalesce(lookup_keys, '{}') LOOP
        IF lk IS NULL THEN
            RAISE EXCEPTION 'lookup keys must not be null' USING ERRCODE = 'null_value_not_allowed';
        END IF;
        SELECT m.record INTO owner FROM collegedb.mapping m WHERE m.key = collegedb.mapping_key(lk);
        IF owner IS NOT NULL AND owner <> rec THEN
            RAISE EXCEPTION 'lookup key "%" already belongs to another record', lk
                USING ERRCODE = 'unique_violation',
                      HINT = 'A lookup key can point at one record only.';
        END IF;
    END LOOP;
    IF cardinality(lookup_keys) > 0 THEN
        SELECT coalesce(m.keys, ARRAY[primary_key]) INTO originals
          FROM collegedb.mapping m WHERE m.key = rec;
        INSERT INTO collegedb.mapping (key, record, shard)
        SELECT DISTINCT collegedb.mapping_key(k), rec, attach_lookup_keys.shard
          FROM unnest(lookup_keys) AS k
        ON CONFLICT (key) DO NOTHING;
        UPDATE collegedb.mapping m
           SET keys = (SELECT array_agg(k ORDER BY ord)
                         FROM (SELECT k, min(ord) AS ord
                                 FROM unnest(originals || lookup_keys) WITH ORDINALITY AS u(k, ord)
                                GROUP BY k) AS d)
         WHERE m.key = rec;
    END IF;
END
$$;

CREATE FUNCTION collegedb.set_mapping(key text, shard text, lookup_keys text[] DEFAULT '{}')
RETURNS void
LANGUAGE plpgsql
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
     WHERE m.record = k AND m.shard <> set_mapping.shard;
END
$$;

CREATE FUNCTION collegedb.add_lookup_keys(key text, lookup_keys text[])
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rec text := collegedb.record_of(key, true);
    s text;
BEGIN
    SELECT m.shard INTO s FROM collegedb.mapping m WHERE m.key = rec;
    PERFORM collegedb.attach_lookup_keys(rec, key, s, lookup_keys);
END
$$;

CREATE FUNCTION collegedb.get_lookup_keys(key text)
RETURNS text[]
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rec text := collegedb.record_of(key, false);
    originals text[];
BEGIN
    IF rec IS NULL THEN
        RETURN '{}';
    END IF;
    SELECT m.keys INTO originals FROM collegedb.mapping m WHERE m.key = rec;
    RETURN coalesce(originals, ARRAY[key]);
END
$$;

CREATE FUNCTION collegedb.update_mapping(key text, shard text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rec text := collegedb.record_of(key, true);
BEGIN
    PERFORM collegedb.ensure_shard_registered(shard);
    UPDATE collegedb.mapping m SET shard = update_mapping.shard
     WHERE m.record = rec AND m.shard <> update_mapping.shard;
END
$$;

CREATE FUNCTION collegedb.delete_mapping(key text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rec text := collegedb.record_of(key, true);
BEGIN
    DELETE FROM collegedb.mapping m WHERE m.record = rec;
END
$$;

CREATE FUNCTION collegedb.keys_for_shard(shard text)
RETURNS SETOF text
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT m.key FROM collegedb.mapping m
     WHERE m.shard = keys_for_shard.shard ORDER BY m.key COLLATE "C"
$$;

CREATE FUNCTION collegedb.first_by_lookup_key(lookup_key text, sql text)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'collegedb_first_by_lookup_key'
LANGUAGE C;

CREATE FUNCTION collegedb.first_by_lookup_key(lookup_key text, sql text, VARIADIC params "any")
RETURNS jsonb
AS 'MODULE_PATHNAME', 'collegedb_first_by_lookup_key'
LANGUAGE C;

CREATE FUNCTION collegedb.all_by_lookup_key(lookup_key text, sql text)
RETURNS SETOF jsonb
AS 'MODULE_PATHNAME', 'collegedb_all_by_lookup_key'
LANGUAGE C;

CREATE FUNCTION collegedb.all_by_lookup_key(lookup_key text, sql text, VARIADIC params "any")
RETURNS SETOF jsonb
AS 'MODULE_PATHNAME', 'collegedb_all_by_lookup_key'
LANGUAGE C;

/* Privileges (issue 10) */

/*
 * A role-neutral grant model (README "Security").  The extension creates no
 * role: PUBLIC may use nothing but the pure hash functions, and a superuser
 * grants one of two sets to the roles that need it, with
 * collegedb.grant_routing(role) (applications) and collegedb.grant_admin(role)
 * (administrators), or with the GRANTs those functions issue.
 *
 * The catalog tables stay the extension owner's: nobody else holds a
 * privilege on them, so they are written only through collegedb's
 * functions.  The C functions run their catalog statements with the owner's
 * rights (catalog/catalog.c) and otherwise as the caller, so that shard
 * connections always use the caller's user mapping; the PL/pgSQL and SQL
 * functions that read or write the tables are SECURITY DEFINER with
 * search_path = pg_catalog, pg_temp, and connect to no shard.
 *
 * Keep this section last: its REVOKEs cover every object created above
 * them, so new functions go above it, and into a set below when roles other
 * than the owner use them (sql/security.sql lists who may run what, so a new
 * function shows up there).
 */

REVOKE ALL ON SCHEMA collegedb FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA collegedb FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA collegedb FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA collegedb FROM PUBLIC;

-- pure functions of their arguments (the CHECK on collegedb.epoch uses one)
GRANT EXECUTE ON FUNCTION
    collegedb.rendezvous_score(text, text),
    collegedb.rendezvous_owner(text, text[]),
    collegedb.jump_bucket(text, integer),
    collegedb.slot_of(text, integer),
    collegedb.is_sorted_set(text[])
  TO PUBLIC;

/*
 * privilege_set lists the objects of one grant set, 'routing' or 'admin':
 * functions (every overload of the name) and views.  A name that does not
 * exist (yet) is skipped by the functions that use the list.
 */
CREATE FUNCTION collegedb.privilege_set(kind text)
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
        ('routing', 'view', 'shards'),
        ('routing', 'view', 'settings'),
        ('routing', 'view', 'epochs'),
        ('routing', 'view', 'tables'),
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
        ('admin', 'view', 'shards'),
        ('admin', 'view', 'settings'),
        ('admin', 'view', 'epochs'),
        ('admin', 'view', 'tables'),
        ('admin', 'view', 'jobs'),
        ('admin', 'view', 'moves')
      ) AS s(kind, object_type, name)
     WHERE s.kind = privilege_set.kind
$$;

/*
 * The SQL and PL/pgSQL functions that read or write the catalog tables for
 * the roles granted them run as the extension owner.  They take only
 * values, set search_path, and run no code a caller chose (configure's
 * eligibility predicate runs as the caller: see CatalogCallerId).
 */
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid FROM pg_catalog.pg_proc p
         WHERE p.pronamespace = 'collegedb'::regnamespace
           AND p.proname IN ('configure', 'reset_setting', 'register_table', 'unregister_table',
                             'set_mapping', 'add_lookup_keys', 'get_lookup_keys',
                             'update_mapping', 'delete_mapping', 'keys_for_shard',
                             'cancel_job')
           AND p.prolang IN (SELECT l.oid FROM pg_catalog.pg_language l
                              WHERE l.lanname IN ('sql', 'plpgsql'))
    LOOP
        EXECUTE pg_catalog.format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = pg_catalog, pg_temp', f);
    END LOOP;
END
$$;

/*
 * change_privileges grants ('GRANT') or revokes ('REVOKE') one set to or
 * from a role: USAGE on the schema, EXECUTE on the set's functions, SELECT
 * on its views.  A revoke keeps what the role's other set also holds, and
 * USAGE while the role keeps any collegedb function.  The caller needs the
 * grant option (a superuser, or the extension owner).
 */
CREATE FUNCTION collegedb.change_privileges(action text, kind text, role regrole)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    other text := CASE kind WHEN 'routing' THEN 'admin' ELSE 'routing' END;
    keep text[] := '{}';
    target record;
BEGIN
    IF action IS NULL OR action NOT IN ('GRANT', 'REVOKE') OR kind IS NULL
       OR kind NOT IN ('routing', 'admin') THEN
        RAISE EXCEPTION 'invalid privilege change: % %', action, kind
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF role IS NULL THEN
        RAISE EXCEPTION 'role must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF action = 'GRANT' THEN
        EXECUTE format('GRANT USAGE ON SCHEMA collegedb TO %s', role);
    ELSIF EXISTS (SELECT 1
                    FROM collegedb.privilege_set(other) s
                    JOIN pg_proc p ON p.proname = s.name
                                  AND p.pronamespace = 'collegedb'::regnamespace,
                         aclexplode(p.proacl) a
                   WHERE s.object_type = 'function' AND a.grantee = role
                     AND NOT s.name IN (SELECT name FROM collegedb.privilege_set(kind))) THEN
        keep := ARRAY(SELECT name FROM collegedb.privilege_set(other));
    END IF;
    FOR target IN
        SELECT 'EXECUTE' AS privilege, format('FUNCTION %s', p.oid::regprocedure) AS object
          FROM collegedb.privilege_set(kind) s
          JOIN pg_proc p ON p.proname = s.name AND p.pronamespace = 'collegedb'::regnamespace
         WHERE s.object_type = 'function' AND NOT s.name = ANY (keep)
        UNION ALL
        SELECT 'SELECT', format('TABLE %s', c.oid::regclass)
          FROM collegedb.privilege_set(kind) s
          JOIN pg_class c ON c.relname = s.name AND c.relnamespace = 'collegedb'::regnamespace
         WHERE s.object_type = 'view' AND c.relkind = 'v' AND NOT s.name = ANY (keep)
    LOOP
        EXECUTE format('%s %s ON %s %s %s', action, target.privilege, target.object,
                       CASE action WHEN 'GRANT' THEN 'TO' ELSE 'FROM' END, role);
    END LOOP;
    IF action = 'REVOKE' AND NOT EXISTS (
           SELECT 1 FROM pg_proc p, aclexplode(p.proacl) a
            WHERE p.pronamespace = 'collegedb'::regnamespace AND a.grantee = role) THEN
        EXECUTE format('REVOKE USAGE ON SCHEMA collegedb FROM %s', role);
    END IF;
END
$$;

CREATE FUNCTION collegedb.grant_routing(role regrole)
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$ SELECT collegedb.change_privileges('GRANT', 'routing', role) $$;

CREATE FUNCTION collegedb.revoke_routing(role regrole)
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$ SELECT collegedb.change_privileges('REVOKE', 'routing', role) $$;

CREATE FUNCTION collegedb.grant_admin(role regrole)
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$ SELECT collegedb.change_privileges('GRANT', 'admin', role) $$;

CREATE FUNCTION collegedb.revoke_admin(role regrole)
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$ SELECT collegedb.change_privileges('REVOKE', 'admin', role) $$;

REVOKE ALL ON FUNCTION
    collegedb.privilege_set(text),
    collegedb.change_privileges(text, text, regrole),
    collegedb.grant_routing(regrole),
    collegedb.revoke_routing(regrole),
    collegedb.grant_admin(regrole),
    collegedb.revoke_admin(regrole)
  FROM PUBLIC;
