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
 * Issue 18: slot maps (Harper's schema-defined sharding) and slot moves.
 * ------------------------------------------------------------------------ */

/*
 * The installed slot maps (README "Slot maps"): one row per version,
 * the newest in force.  ranges is the normalised cover of 0 .. slots - 1
 * (sorted by start, adjacent ranges of one shard merged, ends exclusive)
 * and digest the SHA-256 of its text (placement/slots.c).  Rows never
 * change and are never deleted; versions follow each other and keep the
 * slot count.  Written only by initialize_shard_map and move_slot.
 */
CREATE TABLE collegedb.slot_map (
    version      integer PRIMARY KEY CHECK (version >= 1),
    digest       text NOT NULL CHECK (digest ~ '^[0-9a-f]{64}$'),
    slots        integer NOT NULL CHECK (slots BETWEEN 1 AND 65536),
    ranges       jsonb NOT NULL
                 CHECK (jsonb_typeof(ranges) = 'array' AND jsonb_array_length(ranges) >= 1),
    installed_at timestamptz NOT NULL DEFAULT now()
);
SELECT pg_catalog.pg_extension_config_dump('collegedb.slot_map', '');

CREATE FUNCTION collegedb.slot_map_guard()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        RAISE EXCEPTION 'installed slot maps cannot be changed or deleted' USING ERRCODE = 'CD012',
            HINT = 'Move a slot with collegedb.move_slot(), which installs the next version.';
    END IF;
    IF NEW.version <> coalesce((SELECT max(version) FROM collegedb.slot_map), 0) + 1 THEN
        RAISE EXCEPTION 'slot map version % does not follow the newest version', NEW.version
            USING ERRCODE = 'CD012';
    END IF;
    IF EXISTS (SELECT 1 FROM collegedb.slot_map WHERE slots <> NEW.slots) THEN
        RAISE EXCEPTION 'the slot count of an installed map cannot change' USING ERRCODE = 'CD012';
    END IF;
    RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION collegedb.slot_map_guard() FROM PUBLIC;

CREATE TRIGGER slot_map_guard
  BEFORE INSERT OR UPDATE OR DELETE ON collegedb.slot_map
  FOR EACH ROW EXECUTE FUNCTION collegedb.slot_map_guard();
CREATE TRIGGER slot_map_truncate_guard
  BEFORE TRUNCATE ON collegedb.slot_map
  FOR EACH STATEMENT EXECUTE FUNCTION collegedb.slot_map_guard();
CREATE TRIGGER slot_map_changed
  AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON collegedb.slot_map
  FOR EACH STATEMENT EXECUTE FUNCTION collegedb.invalidate_cache();

CREATE VIEW collegedb.shard_map AS
SELECT version, digest, slots, ranges, installed_at FROM collegedb.slot_map ORDER BY version;

/*
 * The slots being moved (worker/slot_moves.c): while a row is here, the
 * slot's keys route to its target and its source (router/slotroute.c).
 * The row goes when the next map version, with the slot on the target, is
 * installed.
 */
CREATE TABLE collegedb.slot_move (
    slot       integer PRIMARY KEY CHECK (slot >= 0),
    source     text NOT NULL,
    target     text NOT NULL,
    job_id     bigint REFERENCES collegedb.job ON DELETE SET NULL,
    started_at timestamptz NOT NULL DEFAULT now(),
    CHECK (source <> target)
);
SELECT pg_catalog.pg_extension_config_dump('collegedb.slot_move', '');

CREATE TRIGGER slot_move_changed
  AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON collegedb.slot_move
  FOR EACH STATEMENT EXECUTE FUNCTION collegedb.invalidate_cache();

CREATE VIEW collegedb.slot_moves AS
SELECT slot, source, target, job_id, started_at FROM collegedb.slot_move ORDER BY slot;

REVOKE ALL ON collegedb.slot_map, collegedb.slot_move, collegedb.shard_map, collegedb.slot_moves
  FROM PUBLIC;

-- a slot's move is a job
ALTER TABLE collegedb.job DROP CONSTRAINT job_kind_check;
ALTER TABLE collegedb.job ADD CONSTRAINT job_kind_check
  CHECK (kind IN ('move', 'rebalance', 'move_slot'));
ALTER TABLE collegedb.job ADD COLUMN slot integer CHECK (slot >= 0);

CREATE FUNCTION collegedb.initialize_shard_map(slots integer DEFAULT 1024, ranges jsonb DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'collegedb_initialize_shard_map'
LANGUAGE C;

CREATE FUNCTION collegedb.verify_shard_map(table_name text, slots integer DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'collegedb_verify_shard_map'
LANGUAGE C;

CREATE FUNCTION collegedb.move_slot(slot integer, target text)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'collegedb_move_slot'
LANGUAGE C;

CREATE FUNCTION collegedb.schedule_move_slot(slot integer, target text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'collegedb_schedule_move_slot'
LANGUAGE C;

REVOKE ALL ON FUNCTION
    collegedb.initialize_shard_map(integer, jsonb),
    collegedb.verify_shard_map(text, integer),
    collegedb.move_slot(integer, text),
    collegedb.schedule_move_slot(integer, text)
  FROM PUBLIC;

/*
 * Functions with new output columns are dropped and created again; the
 * roles that could execute them keep that right.  route() reports the
 * key's slot under the slots strategy; cache_stats() also reports the
 * mapping cache shared by the backends: this backend's hits and misses
 * there and how many entries it holds (NULL without it).
 */
DO $$
DECLARE
    fn record;
    acl aclitem[];
    grantee oid;
BEGIN
    FOR fn IN SELECT * FROM (VALUES
        ('collegedb.route(text)',
         $f$CREATE FUNCTION collegedb.route(key text)
            RETURNS TABLE (shard text, source text, hops integer, epoch integer, has_key boolean,
                           slot integer)
            AS 'MODULE_PATHNAME', 'collegedb_route'
            LANGUAGE C STRICT$f$),
        ('collegedb.cache_stats()',
         $f$CREATE FUNCTION collegedb.cache_stats()
            RETURNS TABLE (mapping_hits bigint, mapping_misses bigint, catalog_reads bigint,
                           shared_hits bigint, shared_misses bigint, shared_entries bigint)
            AS 'MODULE_PATHNAME', 'collegedb_cache_stats'
            LANGUAGE C$f$)) AS v(signature, definition)
    LOOP
        acl := (SELECT p.proacl FROM pg_catalog.pg_proc p
                 WHERE p.oid = fn.signature::pg_catalog.regprocedure);
        EXECUTE 'DROP FUNCTION ' || fn.signature;
        EXECUTE fn.definition;
        EXECUTE 'REVOKE ALL ON FUNCTION ' || fn.signature || ' FROM PUBLIC';
        FOR grantee IN
            SELECT DISTINCT a.grantee FROM pg_catalog.aclexplode(acl) AS a
             WHERE a.privilege_type = 'EXECUTE' AND a.grantee <> 0
               AND a.grantee <> (SELECT p.proowner FROM pg_catalog.pg_proc p
                                  WHERE p.oid = fn.signature::pg_catalog.regprocedure)
        LOOP
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s', fn.signature,
                                      grantee::pg_catalog.regrole);
        END LOOP;
    END LOOP;
END
$$;


/* ------------------------------------------------------------------------
 * Issue 19: topology groups.
 * ------------------------------------------------------------------------ */

/*
 * A topology group (README "Topology groups") is a set of shards whose
 * membership changes over time.  This front owns it: it publishes a
 * versioned snapshot of the membership on every member of the read set
 * (shard-side table collegedb_topology) and pushes the values of state
 * channels to the members of each channel's role (collegedb_topology_state);
 * the coordinator worker delivers both from the outbox, topology_delivery.
 * A group exists while it has members.  Its topology_group row stays after
 * topology_delete: the membership version and the state version keep
 * counting, so that a re-created group is newer than anything a member or
 * a reader holds.
 */
CREATE TABLE collegedb.topology_group (
    name          text PRIMARY KEY,
    version       bigint NOT NULL DEFAULT 0 CHECK (version >= 0),
    state_version bigint NOT NULL DEFAULT 0 CHECK (state_version >= 0),
    updated_at    timestamptz NOT NULL DEFAULT now()
);
SELECT pg_catalog.pg_extension_config_dump('collegedb.topology_group', '');

CREATE TABLE collegedb.topology_member (
    group_name text NOT NULL REFERENCES collegedb.topology_group (name),
    shard      text NOT NULL REFERENCES collegedb.shard (name),
    state      text NOT NULL CHECK (state IN ('active', 'draining')),
    PRIMARY KEY (group_name, shard)
);
SELECT pg_catalog.pg_extension_config_dump('collegedb.topology_member', '');

-- a channel reaches the write role (active members) or the read role (and draining ones)
CREATE TABLE collegedb.topology_channel (
    channel text PRIMARY KEY,
    members text NOT NULL DEFAULT 'write' CHECK (members IN ('write', 'read'))
);
SELECT pg_catalog.pg_extension_config_dump('collegedb.topology_channel', '');

CREATE TABLE collegedb.topology_state (
    group_name text NOT NULL REFERENCES collegedb.topology_group (name),
    channel    text NOT NULL REFERENCES collegedb.topology_channel (channel),
    value      jsonb NOT NULL,
    version    bigint NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (group_name, channel)
);
SELECT pg_catalog.pg_extension_config_dump('collegedb.topology_state', '');

/*
 * The outbox: what is still to be written on a member, one row per (group,
 * kind, channel, member), so that only the newest pending value of each is
 * kept (a newer one takes the row's place and keeps its retry schedule:
 * what is retried is the member).  kind 'snapshot' has channel '' and
 * publishes the group's snapshot, or with payload NULL removes it; kind
 * 'state' delivers a channel's value.  owner is the role whose user
 * mappings reach the member.  Failures wait min(1 s * 2^(n-1), 300 s),
 * jittered in [d/2, d), before attempt n + 1.
 */
CREATE TABLE collegedb.topology_delivery (
    group_name      text NOT NULL,
    kind            text NOT NULL CHECK (kind IN ('snapshot', 'state')),
    channel         text NOT NULL DEFAULT '',
    member          text NOT NULL,
    version         bigint NOT NULL,
    payload         jsonb,
    owner           regrole NOT NULL,
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error      text,
    staged_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (group_name, kind, channel, member),
    CHECK ((kind = 'snapshot') = (channel = '')),
    CHECK (kind = 'snapshot' OR payload IS NOT NULL)
);
CREATE INDEX topology_delivery_due ON collegedb.topology_delivery (next_attempt_at);
SELECT pg_catalog.pg_extension_config_dump('collegedb.topology_delivery', '');

CREATE VIEW collegedb.topology_outbox AS
SELECT d.kind, nullif(d.channel, '') AS channel, d.group_name, d.member, d.version,
       d.payload IS NULL AS removal, d.attempts, d.next_attempt_at, d.last_error, d.staged_at
  FROM collegedb.topology_delivery d
 ORDER BY d.group_name, d.kind, d.channel, d.member;

/*
 * topology_coordinator identifies this front, the owner of its groups:
 * versions compare only within one coordinator.
 */
CREATE FUNCTION collegedb.topology_coordinator()
RETURNS jsonb
AS 'MODULE_PATHNAME', 'collegedb_topology_coordinator'
LANGUAGE C STABLE;

/*
 * topology_check_name refuses group and channel names the shards' tables
 * cannot key: empty, longer than 255 characters, or ending in a space
 * (MySQL's collations pad with spaces, so 'g' and 'g ' would share a row).
 */
CREATE FUNCTION collegedb.topology_check_name(name text, what text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF name IS NULL THEN
        RAISE EXCEPTION '% name must not be null', what USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF name = '' THEN
        RAISE EXCEPTION '% name must not be empty', what USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF length(name) > 255 THEN
        RAISE EXCEPTION '% name "%..." is too long', what, left(name, 32)
            USING ERRCODE = 'name_too_long',
                  DETAIL = 'Group and channel names have at most 255 characters.';
    END IF;
    IF right(name, 1) = ' ' THEN
        RAISE EXCEPTION '% name "%" must not end with a space', what, name
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'MySQL shards compare names without their trailing spaces.';
    END IF;
END
$$;

/*
 * topology_published is the snapshot a group's members hold: its name,
 * membership version, coordinator and members (in name order); NULL when
 * the group does not exist.  State values travel on their own channels.
 */
CREATE FUNCTION collegedb.topology_published(group_name text)
RETURNS jsonb
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT jsonb_build_object(
               'group', g.name,
               'version', g.version,
               'coordinator', collegedb.topology_coordinator(),
               'members', (SELECT jsonb_agg(jsonb_build_object('id', m.shard, 'state', m.state)
                                            ORDER BY m.shard COLLATE "C")
                             FROM collegedb.topology_member m WHERE m.group_name = g.name))
      FROM collegedb.topology_group g
     WHERE g.name = $1
       AND EXISTS (SELECT 1 FROM collegedb.topology_member m WHERE m.group_name = g.name)
$$;

/*
 * topology_stage puts deliveries in the outbox (rows of kind, group,
 * channel, member, version, payload): a row of the same (group, kind,
 * channel, member) is replaced unless it holds a newer version.  A
 * snapshot without payload is its removal; a state's missing payload is
 * the JSON null that jsonb_to_recordset turned into NULL.
 */
CREATE FUNCTION collegedb.topology_stage(rows jsonb, caller regrole)
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO collegedb.topology_delivery AS d
           (group_name, kind, channel, member, version, payload, owner)
    SELECT r.group_name, r.kind, coalesce(r.channel, ''), r.member, r.version,
           CASE r.kind WHEN 'state' THEN coalesce(r.payload, 'null') ELSE r.payload END, caller
      FROM jsonb_to_recordset(rows)
           AS r(group_name text, kind text, channel text, member text, version bigint, payload jsonb)
    ON CONFLICT (group_name, kind, channel, member) DO UPDATE
       SET version = excluded.version, payload = excluded.payload, owner = excluded.owner,
           staged_at = now()
     WHERE excluded.version >= d.version
$$;

/*
 * topology_apply is topology_update's work, run with the catalog owner's
 * rights in the caller's transaction (see collegedb_topology_update): it
 * checks the draft, then changes the membership, the state values and the
 * outbox together.  The group's row is locked first, so writers of one
 * group take turns.
 */
CREATE FUNCTION collegedb.topology_apply(group_name text, members jsonb, states jsonb,
                                         caller regrole)
RETURNS jsonb
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    g collegedb.topology_group;
    elem jsonb;
    k text;
    v jsonb;
    before jsonb;
    membership_changed boolean := false;
    states_changed boolean := false;
BEGIN
    PERFORM collegedb.topology_check_name(topology_apply.group_name, 'group');
    IF members IS NOT NULL THEN
        IF jsonb_typeof(members) <> 'array' THEN
            RAISE EXCEPTION 'members must be a JSON array'
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Give [{"id": "<shard>", "state": "active"}, ...]; a member''s state is active or draining.';
        END IF;
        IF jsonb_array_length(members) = 0 THEN
            RAISE EXCEPTION 'a topology group needs at least one member'
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Remove a group with collegedb.topology_delete().';
        END IF;
        FOR elem IN SELECT e FROM jsonb_array_elements(members) AS e LOOP
            IF jsonb_typeof(elem) <> 'object' THEN
                RAISE EXCEPTION 'a member must be a JSON object, not %', elem
                    USING ERRCODE = 'invalid_parameter_value',
                          HINT = 'A member is {"id": "<shard>", "state": "active" or "draining"}.';
            END IF;
            SELECT f INTO k FROM jsonb_object_keys(elem) AS f WHERE f NOT IN ('id', 'state') ORDER BY f LIMIT 1;
            IF k IS NOT NULL THEN
                RAISE EXCEPTION 'unknown member field "%"', k
                    USING ERRCODE = 'invalid_parameter_value',
                          HINT = 'A member has an "id" and a "state".';
            END IF;
            IF jsonb_typeof(elem->'id') IS DISTINCT FROM 'string' THEN
                RAISE EXCEPTION 'a member needs an "id" naming a shard: %', elem
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF jsonb_typeof(elem->'state') IS DISTINCT FROM 'string'
               OR elem->>'state' NOT IN ('active', 'draining') THEN
                RAISE EXCEPTION 'invalid state % of member "%"', coalesce(elem->'state', 'null'), elem->>'id'
                    USING ERRCODE = 'invalid_parameter_value',
                          HINT = 'A member is active (it takes writes and reads) or draining (reads only).';
            END IF;
            IF NOT EXISTS (SELECT 1 FROM collegedb.shard s WHERE s.name = elem->>'id') THEN
                RAISE EXCEPTION 'shard "%" is not registered', elem->>'id'
                    USING ERRCODE = 'CD001',
                          HINT = 'Register it with collegedb.add_shard() first.';
            END IF;
        END LOOP;
        SELECT e->>'id' INTO k FROM jsonb_array_elements(members) AS e
         GROUP BY 1 HAVING count(*) > 1 ORDER BY 1 LIMIT 1;
        IF k IS NOT NULL THEN
            RAISE EXCEPTION 'shard "%" is listed twice among the members', k
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    IF states IS NOT NULL THEN
        IF jsonb_typeof(states) <> 'object' THEN
            RAISE EXCEPTION 'states must be a JSON object'
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Give {"<channel>": <value>, ...}.';
        END IF;
        SELECT s INTO k FROM jsonb_object_keys(states) AS s
         WHERE NOT EXISTS (SELECT 1 FROM collegedb.topology_channel c WHERE c.channel = s)
         ORDER BY s LIMIT 1;
        IF k IS NOT NULL THEN
            RAISE EXCEPTION 'topology channel "%" is not defined', k
                USING ERRCODE = 'undefined_object',
                      HINT = 'Define it with collegedb.topology_define_channel().';
        END IF;
    END IF;

    INSERT INTO collegedb.topology_group (name) VALUES (topology_apply.group_name)
    ON CONFLICT (name) DO NOTHING;
    SELECT * INTO g FROM collegedb.topology_group t WHERE t.name = topology_apply.group_name FOR UPDATE;
    SELECT jsonb_object_agg(m.shard, m.state) INTO before
      FROM collegedb.topology_member m WHERE m.group_name = g.name;
    IF before IS NULL AND members IS NULL THEN
        RAISE EXCEPTION 'topology group "%" does not exist', g.name
            USING ERRCODE = 'undefined_object',
                  HINT = 'Create it with its members.';
    END IF;
    before := coalesce(before, '{}');

    IF members IS NOT NULL THEN
        membership_changed := before IS DISTINCT FROM
            (SELECT jsonb_object_agg(e->>'id', e->>'state') FROM jsonb_array_elements(members) AS e);
    END IF;
    IF membership_changed THEN
        g.version := g.version + 1;
        UPDATE collegedb.topology_group t SET version = g.version, updated_at = now()
         WHERE t.name = g.name;
        DELETE FROM collegedb.topology_member m WHERE m.group_name = g.name;
        INSERT INTO collegedb.topology_member (group_name, shard, state)
        SELECT g.name, e->>'id', e->>'state' FROM jsonb_array_elements(members) AS e;

        -- the new snapshot for the read set, its removal for the members that left it;
        -- a member entering a channel's role gets the channel's value now
        PERFORM collegedb.topology_stage(coalesce(jsonb_agg(r), '[]'), caller)
           FROM (SELECT g.name AS group_name, 'snapshot' AS kind, NULL AS channel,
                        m.shard AS member, g.version AS version,
                        collegedb.topology_published(g.name) AS payload
                   FROM collegedb.topology_member m WHERE m.group_name = g.name
                 UNION ALL
                 SELECT g.name, 'snapshot', NULL, b.shard, g.version, NULL
                   FROM jsonb_object_keys(before) AS b(shard)
                  WHERE NOT EXISTS (SELECT 1 FROM collegedb.topology_member m
                                     WHERE m.group_name = g.name AND m.shard = b.shard)
                 UNION ALL
                 SELECT g.name, 'state', s.channel, m.shard, s.version, s.value
                   FROM collegedb.topology_state s
                   JOIN collegedb.topology_channel c ON c.channel = s.channel
                   JOIN collegedb.topology_member m ON m.group_name = s.group_name
                  WHERE s.group_name = g.name
                    AND (c.members = 'read' OR m.state = 'active')
                    AND NOT (before ? m.shard AND (c.members = 'read' OR before->>m.shard = 'active'))
                ) AS r;
        -- a member that left a channel's role has its pending delivery dropped
        DELETE FROM collegedb.topology_delivery d
         USING collegedb.topology_channel c
         WHERE d.group_name = g.name AND d.kind = 'state' AND c.channel = d.channel
           AND NOT EXISTS (SELECT 1 FROM collegedb.topology_member m
                            WHERE m.group_name = g.name AND m.shard = d.member
                              AND (c.members = 'read' OR m.state = 'active'));
    END IF;

    -- a value that changes goes to every member of its channel's role; an equal one, nowhere
    FOR k, v IN SELECT s.key, s.value FROM jsonb_each(coalesce(states, '{}')) AS s ORDER BY s.key LOOP
        CONTINUE WHEN v IS NOT DISTINCT FROM
            (SELECT s.value FROM collegedb.topology_state s WHERE s.group_name = g.name AND s.channel = k);
        IF NOT states_changed THEN
            g.state_version := g.state_version + 1;
            states_changed := true;
            UPDATE collegedb.topology_group t SET state_version = g.state_version, updated_at = now()
             WHERE t.name = g.name;
        END IF;
        INSERT INTO collegedb.topology_state AS s (group_name, channel, value, version)
        VALUES (g.name, k, v, g.state_version)
        ON CONFLICT ON CONSTRAINT topology_state_pkey DO UPDATE
           SET value = excluded.value, version = excluded.version, updated_at = now();
        PERFORM collegedb.topology_stage(coalesce(jsonb_agg(r), '[]'), caller)
           FROM (SELECT g.name AS group_name, 'state' AS kind, k AS channel, m.shard AS member,
                        g.state_version AS version, v AS payload
                   FROM collegedb.topology_member m
                   JOIN collegedb.topology_channel c ON c.channel = k
                  WHERE m.group_name = g.name AND (c.members = 'read' OR m.state = 'active')) AS r;
    END LOOP;

    RETURN jsonb_build_object('group', g.name, 'version', g.version,
                              'changed', membership_changed OR states_changed);
END
$$;

/*
 * topology_remove is topology_delete's work (see topology_apply): the
 * group's version advances once more, every pending delivery of the group
 * is cancelled, and the members (and whoever is still owed a removal) are
 * staged the removal of the published snapshot at that version.
 */
CREATE FUNCTION collegedb.topology_remove(group_name text, caller regrole)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    g collegedb.topology_group;
    targets text[];
BEGIN
    PERFORM collegedb.topology_check_name(topology_remove.group_name, 'group');
    SELECT * INTO g FROM collegedb.topology_group t WHERE t.name = topology_remove.group_name FOR UPDATE;
    IF NOT FOUND OR NOT EXISTS (SELECT 1 FROM collegedb.topology_member m WHERE m.group_name = g.name) THEN
        RETURN false;
    END IF;
    g.version := g.version + 1;
    UPDATE collegedb.topology_group t SET version = g.version, updated_at = now() WHERE t.name = g.name;
    targets := ARRAY(SELECT m.shard FROM collegedb.topology_member m WHERE m.group_name = g.name
                     UNION
                     SELECT d.member FROM collegedb.topology_delivery d
                      WHERE d.group_name = g.name AND d.kind = 'snapshot');
    DELETE FROM collegedb.topology_delivery d WHERE d.group_name = g.name;
    PERFORM collegedb.topology_stage(coalesce(jsonb_agg(jsonb_build_object(
               'group_name', g.name, 'kind', 'snapshot', 'member', t, 'version', g.version)), '[]'),
               caller)
       FROM unnest(targets) AS t;
    DELETE FROM collegedb.topology_state s WHERE s.group_name = g.name;
    DELETE FROM collegedb.topology_member m WHERE m.group_name = g.name;
    RETURN true;
END
$$;

/*
 * topology_set_channel is topology_define_channel's work (see
 * topology_apply).  A channel whose role changes reaches its new members
 * with each group's current value, and the pending deliveries of members
 * out of its role are dropped; the groups concerned are locked in name
 * order first, as their writers lock them.
 */
CREATE FUNCTION collegedb.topology_set_channel(channel text, members text, caller regrole)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    old text;
BEGIN
    PERFORM collegedb.topology_check_name(topology_set_channel.channel, 'channel');
    IF members IS NULL OR members NOT IN ('write', 'read') THEN
        RAISE EXCEPTION 'unknown role "%" of channel "%"', members, topology_set_channel.channel
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'A channel reaches the write role (active members) or the read role (active and draining members).';
    END IF;
    SELECT c.members INTO old FROM collegedb.topology_channel c
     WHERE c.channel = topology_set_channel.channel FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        INSERT INTO collegedb.topology_channel (channel, members)
        VALUES (topology_set_channel.channel, topology_set_channel.members);
        RETURN;
    END IF;
    IF old = members THEN
        RETURN;
    END IF;
    UPDATE collegedb.topology_channel c SET members = topology_set_channel.members
     WHERE c.channel = topology_set_channel.channel;
    PERFORM 1 FROM collegedb.topology_group t
     WHERE t.name IN (SELECT s.group_name FROM collegedb.topology_state s
                       WHERE s.channel = topology_set_channel.channel)
     ORDER BY t.name FOR UPDATE;
    IF members = 'read' THEN
        PERFORM collegedb.topology_stage(coalesce(jsonb_agg(r), '[]'), caller)
           FROM (SELECT s.group_name, 'state' AS kind, s.channel, m.shard AS member, s.version,
                        s.value AS payload
                   FROM collegedb.topology_state s
                   JOIN collegedb.topology_member m ON m.group_name = s.group_name
                  WHERE s.channel = topology_set_channel.channel AND m.state = 'draining') AS r;
    ELSE
        DELETE FROM collegedb.topology_delivery d
         USING collegedb.topology_member m
         WHERE d.kind = 'state' AND d.channel = topology_set_channel.channel
           AND m.group_name = d.group_name AND m.shard = d.member AND m.state = 'draining';
    END IF;
END
$$;

REVOKE ALL ON FUNCTION
    collegedb.topology_coordinator(),
    collegedb.topology_check_name(text, text),
    collegedb.topology_published(text),
    collegedb.topology_stage(jsonb, regrole),
    collegedb.topology_apply(text, jsonb, jsonb, regrole),
    collegedb.topology_remove(text, regrole),
    collegedb.topology_set_channel(text, text, regrole)
  FROM PUBLIC;

/*
 * The writers are C, so that they know their caller (the role whose user
 * mappings deliver what they stage) and wake the coordinator when their
 * transaction commits; they run the functions above with the catalog
 * owner's rights.
 */
CREATE FUNCTION collegedb.topology_update(group_name text, members jsonb DEFAULT NULL,
                                          states jsonb DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'collegedb_topology_update'
LANGUAGE C;

CREATE FUNCTION collegedb.topology_delete(group_name text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'collegedb_topology_delete'
LANGUAGE C;

CREATE FUNCTION collegedb.topology_define_channel(channel text, members text DEFAULT 'write')
RETURNS void
AS 'MODULE_PATHNAME', 'collegedb_topology_define_channel'
LANGUAGE C;

-- true once every delivery of the group's current version and values is done
CREATE FUNCTION collegedb.topology_wait(group_name text, timeout interval DEFAULT '1 minute')
RETURNS boolean
AS 'MODULE_PATHNAME', 'collegedb_topology_wait'
LANGUAGE C;

CREATE FUNCTION collegedb.topology_snapshot(group_name text)
RETURNS jsonb
LANGUAGE sql STABLE STRICT
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT p || jsonb_build_object('states', coalesce(
               (SELECT jsonb_object_agg(s.channel, s.value ORDER BY s.channel)
                  FROM collegedb.topology_state s WHERE s.group_name = $1), '{}'))
      FROM collegedb.topology_published($1) AS p
     WHERE p IS NOT NULL
$$;

-- 'write': the active members; 'read': active and draining ones (name order)
CREATE FUNCTION collegedb.topology_members(group_name text, role text DEFAULT 'read')
RETURNS SETOF text
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF role IS NULL OR role NOT IN ('write', 'read') THEN
        RAISE EXCEPTION 'unknown role "%"', role
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'The write role is the active members; the read role, active and draining ones.';
    END IF;
    RETURN QUERY
        SELECT m.shard FROM collegedb.topology_member m
         WHERE m.group_name = topology_members.group_name
           AND (topology_members.role = 'read' OR m.state = 'active')
         ORDER BY m.shard COLLATE "C";
END
$$;

/*
 * topology_shard_for_key routes a key within a group: the rendezvous owner
 * (collegedb.rendezvous_owner, src/README.md "Placement") among its active members.  A
 * group that does not exist is TOPOLOGY_UNAVAILABLE; one whose members all
 * drain is NO_ELIGIBLE_SHARD.
 */
CREATE FUNCTION collegedb.topology_shard_for_key(group_name text, key text)
RETURNS text
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    write_set text[];
BEGIN
    IF group_name IS NULL OR key IS NULL THEN
        RAISE EXCEPTION '% must not be null', CASE WHEN key IS NULL THEN 'key' ELSE 'group name' END
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM collegedb.topology_member m
                    WHERE m.group_name = topology_shard_for_key.group_name) THEN
        RAISE EXCEPTION 'topology group "%" does not exist', topology_shard_for_key.group_name
            USING ERRCODE = 'CD013';
    END IF;
    write_set := ARRAY(SELECT m.shard FROM collegedb.topology_member m
                        WHERE m.group_name = topology_shard_for_key.group_name AND m.state = 'active'
                        ORDER BY m.shard COLLATE "C");
    IF cardinality(write_set) = 0 THEN
        RAISE EXCEPTION 'topology group "%" has no active member', topology_shard_for_key.group_name
            USING ERRCODE = 'CD003',
                  DETAIL = 'Draining members take reads only.',
                  HINT = 'Make a member active with collegedb.topology_update().';
    END IF;
    RETURN collegedb.rendezvous_owner(key, write_set);
END
$$;

-- collegedb.fanout over a group's read set
CREATE FUNCTION collegedb.fanout_group(group_name text, sql text)
RETURNS TABLE (shard text, value jsonb, error text)
AS 'MODULE_PATHNAME', 'collegedb_fanout_group'
LANGUAGE C;

CREATE FUNCTION collegedb.fanout_group(group_name text, sql text, VARIADIC params "any")
RETURNS TABLE (shard text, value jsonb, error text)
AS 'MODULE_PATHNAME', 'collegedb_fanout_group'
LANGUAGE C;

REVOKE ALL ON FUNCTION
    collegedb.topology_update(text, jsonb, jsonb),
    collegedb.topology_delete(text),
    collegedb.topology_define_channel(text, text),
    collegedb.topology_wait(text, interval),
    collegedb.topology_snapshot(text),
    collegedb.topology_members(text, text),
    collegedb.topology_shard_for_key(text, text),
    collegedb.fanout_group(text, text),
    collegedb.fanout_group(text, text, "any")
  FROM PUBLIC;


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


/* ------------------------------------------------------------------------
 * Issue 20: dump and progress.
 * ------------------------------------------------------------------------ */

/*
 * pg_dump of a front dumps the rows of every catalog table and the state
 * of every sequence, so that pg_restore into a new database (whose CREATE
 * EXTENSION runs first) rebuilds the whole configuration and job ids and
 * move ids continue.  job_key and the sequences were not marked by 0.1.
 * Jobs, moves and their keys are restored as they were dumped: the
 * restored coordinator finds their holders gone and resumes them, each
 * step being idempotent against the shards' state.  commit_decision stays
 * unmarked: its rows name the cluster and database that wrote them.
 */
SELECT pg_catalog.pg_extension_config_dump('collegedb.job_key', '');
SELECT pg_catalog.pg_extension_config_dump('collegedb.job_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('collegedb.move_id_seq', '');

/*
 * config_restore lets a restore's copy of the settings row replace the
 * default row that CREATE EXTENSION inserted: collegedb.config holds one
 * row, and only a restore inserts one (configure() updates it).
 */
CREATE FUNCTION collegedb.config_restore()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    DELETE FROM collegedb.config;
    RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION collegedb.config_restore() FROM PUBLIC;

CREATE TRIGGER config_restore
  BEFORE INSERT ON collegedb.config
  FOR EACH ROW EXECUTE FUNCTION collegedb.config_restore();

/*
 * Progress of a rebalance or a slot move: each planned key records when it
 * was planned and when it settled (moved or failed), in the transactions
 * that already write its row, so collegedb.jobs derives keys done, the
 * rate and the time left without further writes.
 */
ALTER TABLE collegedb.job_key
    ADD COLUMN planned_at timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN settled_at timestamptz;

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
       END AS time_left
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


/* ------------------------------------------------------------------------
 * Issue 20: explain and health.
 * ------------------------------------------------------------------------ */

/*
 * shard_health_list gives one row per registered shard (README
 * "Monitoring"): whether its last contact succeeded (NULL: never tried),
 * when it last answered, its last error and when, this backend's open
 * connections to it, the statements and errors counted (by every backend
 * when collegedb is preloaded, scope 'server'; else by this one, scope
 * 'backend'), its size (NULL when it cannot be measured now), its stored
 * key count (NULL under computed placement) and its state.
 */
CREATE FUNCTION collegedb.shard_health_list()
RETURNS TABLE (shard text, dialect text, reachable boolean, last_contact timestamptz,
               last_error text, last_error_at timestamptz, connections integer,
               statements bigint, errors bigint, scope text, size_bytes bigint,
               key_count bigint, drain text, writable boolean)
AS 'MODULE_PATHNAME', 'collegedb_shard_health_list'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION collegedb.shard_health_list() FROM PUBLIC;

CREATE VIEW collegedb.shard_health AS
SELECT shard, dialect, reachable, last_contact, last_error, last_error_at, connections,
       statements, errors, scope, size_bytes, key_count, drain, writable
  FROM collegedb.shard_health_list();
REVOKE ALL ON collegedb.shard_health FROM PUBLIC;


/* ------------------------------------------------------------------------
 * Grant sets (keep last): 0.1's list with the functions and views added
 * since.
 * ------------------------------------------------------------------------ */

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
        ('admin', 'view', 'shard_health')
      ) AS s(kind, object_type, name)
     WHERE s.kind = privilege_set.kind
$$;
