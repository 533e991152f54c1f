/* collegedb--0.1--0.2.sql: upgrade from 0.1 to 0.2 */

\echo Use "ALTER EXTENSION collegedb UPDATE TO '0.2'" to load this file. \quit

/*
 * The full 0.2 script is collegedb--0.1.sql followed by this file (see the
 * Makefile), so a fresh install and an upgrade from 0.1 run the same
 * statements; sql/upgrade.sql checks that they end with the same objects.
 *
 * Objects created here are not covered by the 0.1 script's REVOKEs from
 * PUBLIC: revoke what PUBLIC must not use next to its CREATE, and list the
 * functions a grant set should hold in privilege_set (at the end of this
 * file).
 */

/* ------------------------------------------------------------------------
 * Issue 13: moves never lose a row.
 * ------------------------------------------------------------------------ */

/*
 * Ownership of a move (README "Moving keys"): the process that holds it
 * (lease_pid, and lease_backend_start so that a reused pid is not taken
 * for the holder) and a fencing generation, bumped each time a process
 * takes the move.  Every step locks the move's row with its generation and
 * applies its effects only then, so an attempt that lost the move changes
 * nothing.  lease_until is renewed at every step and only shown: a live
 * holder keeps the move however long a step takes.  A failed attempt is
 * retried after next_attempt_at, at most collegedb.move_max_attempts
 * times; a move that gives up before source_done is 'abandoned' until the
 * target's partial copy is removed, then 'failed'.  With hash_mappings the
 * key is stored hashed (as in collegedb.mapping) and the key itself sits in
 * raw_key only while the move is active.
 */
ALTER TABLE collegedb.move
    ADD COLUMN generation bigint NOT NULL DEFAULT 0,
    ADD COLUMN lease_backend_start timestamptz,
    ADD COLUMN attempts integer NOT NULL DEFAULT 0,
    ADD COLUMN next_attempt_at timestamptz,
    ADD COLUMN abandoned boolean NOT NULL DEFAULT false,
    ADD COLUMN raw_key text;

ALTER TABLE collegedb.job
    ADD COLUMN lease_backend_start timestamptz,
    ADD COLUMN raw_key text;

ALTER TABLE collegedb.job_key
    ADD COLUMN raw_key text;

-- keys stored by 0.1 take the stored form now (the key itself while active)
UPDATE collegedb.move
   SET raw_key = CASE WHEN step NOT IN ('done', 'failed') THEN key END,
       key = collegedb.mapping_key(key);
UPDATE collegedb.job
   SET raw_key = CASE WHEN state IN ('queued', 'running') THEN key END,
       key = collegedb.mapping_key(key)
 WHERE key IS NOT NULL;
UPDATE collegedb.job_key
   SET raw_key = CASE WHEN state IN ('pending', 'moving') THEN key END,
       key = collegedb.mapping_key(key);

-- under computed placement the router caches whether any move is before
-- its source step (router.c): changes to the journal reach every backend
CREATE TRIGGER move_changed
  AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON collegedb.move
  FOR EACH STATEMENT EXECUTE FUNCTION collegedb.invalidate_cache('computed');

CREATE OR REPLACE VIEW collegedb.moves AS
SELECT id, job_id, key, source, target, step, rows, error, lease_pid, lease_until,
       created_at, updated_at, generation, attempts, next_attempt_at
  FROM collegedb.move ORDER BY id;

/*
 * Lookup keys are kept in their stored form too: with hash_mappings the
 * keys array of a record holds their SHA-256, and get_lookup_keys()
 * returns those.
 */
UPDATE collegedb.mapping m
   SET keys = ARRAY(SELECT collegedb.mapping_key(k) FROM unnest(m.keys) WITH ORDINALITY AS u(k, ord)
                     ORDER BY ord)
 WHERE m.keys IS NOT NULL;

CREATE OR REPLACE FUNCTION collegedb.attach_lookup_keys(rec text, primary_key text, shard text,
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
        SELECT coalesce(m.keys, ARRAY[collegedb.mapping_key(primary_key)]) INTO originals
          FROM collegedb.mapping m WHERE m.key = rec;
        INSERT INTO collegedb.mapping (key, record, shard)
        SELECT DISTINCT collegedb.mapping_key(k), rec, attach_lookup_keys.shard
          FROM unnest(lookup_keys) AS k
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

CREATE OR REPLACE FUNCTION collegedb.get_lookup_keys(key text)
RETURNS text[]
LANGUAGE plpgsql
SECURITY DEFINER
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
    RETURN coalesce(originals, ARRAY[rec]);
END
$$;

/*
 * register_table checks, on every shard that answers, that the table and
 * its key column exist, and refuses to change a registered table's key
 * column (unregister it first).  In C: the checks connect to shards as the
 * caller, the catalog write runs with the owner's rights.
 */
CREATE OR REPLACE FUNCTION collegedb.register_table(table_name text, key_column text)
RETURNS void
AS 'MODULE_PATHNAME', 'collegedb_register_table'
LANGUAGE C;

/*
 * wake_launcher asks the launcher to start this database's coordinator
 * when the current transaction ends (the extension script calls it, so
 * CREATE EXTENSION and ALTER EXTENSION UPDATE start one at once).
 */
CREATE FUNCTION collegedb.wake_launcher()
RETURNS void
AS 'MODULE_PATHNAME', 'collegedb_wake_launcher'
LANGUAGE C;
REVOKE ALL ON FUNCTION collegedb.wake_launcher() FROM PUBLIC;

SELECT collegedb.wake_launcher();

/* ------------------------------------------------------------------------
 * Issue 14: security and failure hardening.
 * ------------------------------------------------------------------------ */

/*
 * The eligibility predicate runs as the role that configured it, never as
 * whoever's statement needs a shard (see RouterShardEligible).
 * configure() records that role; it is C and SECURITY INVOKER so that it
 * sees its caller, and it runs the checks and the update below,
 * apply_settings(), with the catalog owner's rights.  A predicate set
 * under 0.1 runs as the owner of its function.
 */
ALTER TABLE collegedb.config ADD COLUMN eligible_owner regrole;
UPDATE collegedb.config c
   SET eligible_owner = p.proowner::regrole
  FROM pg_catalog.pg_proc p
 WHERE p.oid = c.eligible;

CREATE FUNCTION collegedb.apply_settings(strategy text,
                                         read_strategy text,
                                         write_strategy text,
                                         placement text,
                                         target_region text,
                                         allocate_on_read boolean,
                                         hash_mappings boolean,
                                         max_shard_size bigint,
                                         size_cache_ttl interval,
                                         mapping_cache_ttl interval,
                                         eligible regprocedure,
                                         migration_concurrency integer,
                                         region_prefixed_keys boolean,
                                         eligible_owner regrole)
RETURNS boolean
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

    FOREACH s IN ARRAY ARRAY[apply_settings.strategy, apply_settings.read_strategy, apply_settings.write_strategy] LOOP
        IF s IS NOT NULL AND NOT s = ANY (strategies) THEN
            RAISE EXCEPTION 'unknown strategy "%"', s
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Valid strategies are hash, round-robin, random, location, jump and slots.';
        END IF;
    END LOOP;
    IF apply_settings.placement IS NOT NULL AND apply_settings.placement NOT IN ('kv', 'computed') THEN
        RAISE EXCEPTION 'unknown placement "%"', apply_settings.placement
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Valid placements are kv and computed.';
    END IF;
    IF apply_settings.target_region IS NOT NULL AND NOT apply_settings.target_region = ANY (regions) THEN
        RAISE EXCEPTION 'invalid region "%"', apply_settings.target_region
            USING ERRCODE = 'CD011',
                  HINT = 'Valid regions are: wnam, enam, sam, weur, eeur, apac, apac-ne, apac-se, oc, afr, me.';
    END IF;
    IF apply_settings.max_shard_size <= 0 THEN
        RAISE EXCEPTION 'max_shard_size must be a positive number of bytes'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF apply_settings.size_cache_ttl < '0' OR apply_settings.mapping_cache_ttl < '0' THEN
        RAISE EXCEPTION 'cache TTLs must not be negative'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF apply_settings.migration_concurrency <= 0 THEN
        RAISE EXCEPTION 'migration_concurrency must be positive'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF apply_settings.eligible IS NOT NULL AND NOT EXISTS (
           SELECT 1 FROM pg_proc p
            WHERE p.oid = apply_settings.eligible
              AND p.prorettype = 'boolean'::regtype
              AND p.proargtypes = '25 3802'::oidvector
              AND p.prokind = 'f' AND NOT p.proretset) THEN
        RAISE EXCEPTION 'eligibility predicate % has the wrong signature', apply_settings.eligible
            USING ERRCODE = 'invalid_function_definition',
                  HINT = 'The predicate must be a function (shard text, context jsonb) returning boolean.';
    END IF;
    IF apply_settings.hash_mappings IS DISTINCT FROM cur.hash_mappings
       AND apply_settings.hash_mappings IS NOT NULL
       AND EXISTS (SELECT 1 FROM collegedb.mapping) THEN
        RAISE EXCEPTION 'cannot change hash_mappings while mappings exist'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'Stored keys keep the form they were saved in.',
                  HINT = 'Delete the mappings first, or keep the current setting.';
    END IF;
    IF coalesce(apply_settings.placement, cur.placement) = 'computed'
       AND (coalesce(apply_settings.read_strategy, cur.read_strategy,
                     apply_settings.strategy, cur.strategy) <> 'hash'
            OR coalesce(apply_settings.write_strategy, cur.write_strategy,
                        apply_settings.strategy, cur.strategy) <> 'hash') THEN
        RAISE EXCEPTION 'computed placement needs the hash strategy'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Only hash places a key by the key alone, for reads and writes.';
    END IF;

    UPDATE collegedb.config c SET
        strategy = coalesce(apply_settings.strategy, c.strategy),
        read_strategy = coalesce(apply_settings.read_strategy, c.read_strategy),
        write_strategy = coalesce(apply_settings.write_strategy, c.write_strategy),
        placement = coalesce(apply_settings.placement, c.placement),
        target_region = coalesce(apply_settings.target_region, c.target_region),
        allocate_on_read = coalesce(apply_settings.allocate_on_read, c.allocate_on_read),
        hash_mappings = coalesce(apply_settings.hash_mappings, c.hash_mappings),
        max_shard_size = coalesce(apply_settings.max_shard_size, c.max_shard_size),
        size_cache_ttl = coalesce(apply_settings.size_cache_ttl, c.size_cache_ttl),
        mapping_cache_ttl = coalesce(apply_settings.mapping_cache_ttl, c.mapping_cache_ttl),
        eligible = coalesce(apply_settings.eligible, c.eligible),
        migration_concurrency = coalesce(apply_settings.migration_concurrency, c.migration_concurrency),
        region_prefixed_keys = coalesce(apply_settings.region_prefixed_keys, c.region_prefixed_keys),
        eligible_owner = CASE WHEN apply_settings.eligible IS NULL THEN c.eligible_owner
                              ELSE apply_settings.eligible_owner END;

    -- switching to computed placement: configure() publishes the first epoch
    RETURN coalesce(apply_settings.placement = 'computed' AND cur.placement <> 'computed', false);
END
$$;

REVOKE ALL ON FUNCTION collegedb.apply_settings(text, text, text, text, text, boolean, boolean, bigint, interval, interval, regprocedure, integer, boolean, regrole) FROM PUBLIC;

CREATE OR REPLACE FUNCTION collegedb.configure(strategy text DEFAULT NULL,
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
AS 'MODULE_PATHNAME', 'collegedb_configure'
LANGUAGE C;

CREATE OR REPLACE FUNCTION collegedb.reset_setting(name text)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
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
    WHEN 'eligible' THEN UPDATE collegedb.config SET eligible = NULL, eligible_owner = NULL;
    WHEN 'migration_concurrency' THEN UPDATE collegedb.config SET migration_concurrency = DEFAULT;
    WHEN 'region_prefixed_keys' THEN UPDATE collegedb.config SET region_prefixed_keys = DEFAULT;
    WHEN 'hash_mappings' THEN PERFORM collegedb.configure(hash_mappings => true);
    ELSE
        RAISE EXCEPTION 'unknown setting "%"', reset_setting.name
            USING ERRCODE = 'undefined_object';
    END CASE;
END
$$;


/* ------------------------------------------------------------------------
 * Issue 16: two-phase commit across shards, with crash recovery.
 * ------------------------------------------------------------------------ */

/*
 * commit_decision holds one row per front transaction that committed after
 * preparing its shards (README "Transactions across shards"): inserted by
 * that transaction at its pre-commit, so it exists exactly when the
 * transaction committed; recovery commits the prepared participants of the
 * transactions listed here and rolls back those of transactions that are
 * over without a row, and deletes a row once no shard lists a prepared
 * participant of it.  xact is the front transaction's name,
 * cdb_<system identifier>_<database oid>_<full xid> in hex, the start of
 * its participants' global transaction ids.  Not marked for pg_dump: a row
 * means something only to the cluster and database that wrote it.
 */
CREATE TABLE collegedb.commit_decision (
    xact text PRIMARY KEY,
    decided_at timestamptz NOT NULL
);
REVOKE ALL ON collegedb.commit_decision FROM PUBLIC;

/*
 * recover_prepared_transactions resolves, now, the prepared transactions
 * this front left on the shards, as the coordinator does at start and
 * every collegedb.recovery_interval; one row per prepared transaction
 * (action: committed, rolled back, in progress, undecided, gone, failed)
 * and per shard that could not be listed (gid NULL, action unreachable).
 */
CREATE FUNCTION collegedb.recover_prepared_transactions()
RETURNS TABLE (shard text, gid text, action text, error text)
AS 'MODULE_PATHNAME', 'collegedb_recover_prepared_transactions'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION collegedb.recover_prepared_transactions() FROM PUBLIC;

CREATE FUNCTION collegedb.prepared_transactions_list()
RETURNS TABLE (shard text, gid text, decision text, error text)
AS 'MODULE_PATHNAME', 'collegedb_prepared_transactions_list'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION collegedb.prepared_transactions_list() FROM PUBLIC;

/*
 * prepared_transactions lists the in-doubt transactions per shard: the
 * prepared transactions this front left there, and what recovery would
 * do with each (commit, roll back, in progress: its front transaction is
 * still running, undecided: a last participant could not be asked), plus
 * a row per shard that could not be listed.
 */
CREATE VIEW collegedb.prepared_transactions AS
SELECT shard, gid, decision, error FROM collegedb.prepared_transactions_list();
REVOKE ALL ON collegedb.prepared_transactions FROM PUBLIC;

/*
 * The objects of each grant set, with issue 16's (keep this last: it
 * replaces the 0.1 list, which later issues extend here).
 */
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
        ('admin', 'view', 'moves'),
        -- issue 16: two-phase commit
        ('admin', 'function', 'recover_prepared_transactions'),
        ('admin', 'function', 'prepared_transactions_list'),
        ('admin', 'view', 'prepared_transactions')
      ) AS s(kind, object_type, name)
     WHERE s.kind = privilege_set.kind
$$;
