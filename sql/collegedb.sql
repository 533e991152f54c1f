/*
 * collegedb.sql: every object of the current version of collegedb, in one
 * file organized by object.  `make` copies it to the install script
 * sql/collegedb--<EXTVERSION>.sql (EXTVERSION is set in the Makefile), which
 * CREATE EXTENSION runs.
 *
 * A database that has an older version reaches this one through the
 * hand-written upgrade scripts: sql/collegedb--0.1--0.2.sql (released, never
 * changes again) and sql/collegedb--0.2--0.3.sql (the version being written).
 *
 * To add or change an object, do it twice:
 *   1. here, in its place below (its table, its area of functions, its view),
 *      written as a fresh install creates it;
 *   2. in sql/collegedb--0.2--0.3.sql, as the statements that turn the
 *      previous version into this one (CREATE, ALTER TABLE ... ADD COLUMN,
 *      CREATE OR REPLACE, and a REVOKE from PUBLIC for a new table, view or
 *      function that PUBLIC must not use).
 * The regression test sql/upgrade.sql (make installcheck REGRESS=upgrade
 * ISOLATION= TAP_TESTS=) installs 0.1, updates it to the newest version,
 * and compares the catalog with that of a fresh install from this file:
 * functions with their bodies, properties, defaults and privileges, tables
 * with their columns in order, constraints, indexes, triggers, views,
 * configuration dumps, the wrapper and its server.  It fails, naming the
 * object, when the two disagree.
 *
 * Columns are listed in the order an upgraded table has them: ALTER TABLE
 * ... ADD COLUMN appends, so a new column goes at the end of its table here
 * too.  A new function that a grant set should hold goes into privilege_set
 * (at the end), in both files.
 */

\echo Use "CREATE EXTENSION collegedb" to load this file. \quit

/*
 * The schema collegedb is created by CREATE EXTENSION itself (schema =
 * collegedb in collegedb.control; the extension is not relocatable).  What
 * PUBLIC may do in it is set at the end of this file.
 */


/* ========================================================================
 * The foreign-data wrapper and the router server
 * ======================================================================== */

/*
 * Shards are foreign servers of the wrapper collegedb, with option
 * 'dialect' (postgres, sqlite or mysql); the validator rejects options the
 * dialect does not know.  The server "collegedb", which has no options, is
 * the router: a foreign table on it is sharded by its key_column.
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


/* ========================================================================
 * Catalog tables
 *
 * The front's state: shards, settings, mappings, epochs, registered
 * tables, jobs and the move journal, slot maps, topology groups and their
 * outbox, two-phase commit decisions.  They are written only through the
 * extension's functions and workers, and read by every backend through
 * caches that the triggers below invalidate.  Every table but
 * commit_decision is marked for pg_dump (pg_extension_config_dump), so that
 * a dump restored into a new database, whose CREATE EXTENSION runs first,
 * brings the whole configuration back.
 * ======================================================================== */

/*
 * invalidate_cache: every backend caches collegedb's catalog tables; a
 * change to one makes every backend drop its copy at its next statement.
 * With the argument 'computed' it does so only under computed placement,
 * where the router caches what is absent (an exception, an active move).
 */
CREATE FUNCTION collegedb.invalidate_cache()
RETURNS trigger
AS 'MODULE_PATHNAME', 'collegedb_invalidate_cache'
LANGUAGE C;

/*
 * The registered shards and their state.  Only active, writable shards take
 * new keys; draining and retired ones stay readable; region and priority
 * serve the location strategy.
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

CREATE TRIGGER shard_changed
  AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON collegedb.shard
  FOR EACH STATEMENT EXECUTE FUNCTION collegedb.invalidate_cache();

/*
 * The settings: one row (id is always true), written by configure() and
 * reset_setting(), shown by the view collegedb.settings.  Computed
 * placement places a key by the key alone, so it allows only the hash
 * strategy, for reads and writes.  eligible_owner is the role that set the
 * eligibility predicate: the predicate runs as that role, never as whoever's
 * statement needs a shard.
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
    eligible_owner        regrole,
    CHECK (placement = 'kv' OR (coalesce(read_strategy, strategy) = 'hash'
                                AND coalesce(write_strategy, strategy) = 'hash'))
);
INSERT INTO collegedb.config DEFAULT VALUES;
SELECT pg_catalog.pg_extension_config_dump('collegedb.config', '');

CREATE TRIGGER config_changed
  AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON collegedb.config
  FOR EACH STATEMENT EXECUTE FUNCTION collegedb.invalidate_cache();

/*
 * config_restore lets a restore's copy of the settings row replace the
 * default row that CREATE EXTENSION inserted (above, before the trigger
 * exists): the table holds one row, and only a restore inserts one
 * (configure() updates it).
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

CREATE TRIGGER config_restore
  BEFORE INSERT ON collegedb.config
  FOR EACH ROW EXECUTE FUNCTION collegedb.config_restore();

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

CREATE TRIGGER config_keeps_placements
  AFTER UPDATE ON collegedb.config
  FOR EACH ROW EXECUTE FUNCTION collegedb.keep_placements();

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

CREATE TRIGGER shard_number_changed
  AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON collegedb.shard_number
  FOR EACH STATEMENT EXECUTE FUNCTION collegedb.invalidate_cache();

/*
 * The mapping store: one row per key, primary or lookup, 48 bytes of heap
 * tuple and one 16-byte index entry.  'key' is the key's id: the first 128
 * bits of the SHA-256 of its UTF-8 bytes (collegedb.mapping_id()), whether
 * or not hash_mappings is on.  With hash_mappings the stored form of a key
 * (collegedb.mapping_key()) is that id in lowercase hex; without, it is the
 * key itself, kept in 'name'.  'shard' is the shard's number.  A lookup
 * key's row names its record's id in 'record' (NULL on a record's primary
 * row); only a record that has lookup keys lists them, in their stored
 * form, on its primary row ('keys'), so that get_lookup_keys() can return
 * them.  Under computed placement the rows are the exceptions: keys found
 * away from the shard their epochs name.  The record index holds lookup
 * keys only, and there is no index on the shard: only administrative calls
 * (keys_for_shard, drop_shard, shard_stats) ask by shard, and they scan.
 *
 * Two keys whose ids agree share a row, so they would always be placed,
 * and moved, together.  Among n keys that happens with probability below
 * n^2 / 2^129 (3.7e-24 for fifty million keys), far below the rate of
 * undetected storage errors; with hash_mappings off, a second key whose id
 * is taken is refused instead (the router compares the names).
 */
CREATE TABLE collegedb.mapping (
    key         uuid PRIMARY KEY,
    shard       smallint NOT NULL,
    record      uuid CONSTRAINT mapping_record_check CHECK (record <> key),
    keys        text[] CONSTRAINT mapping_keys_check CHECK (keys IS NULL OR record IS NULL),
    name        text COLLATE "C"
);
CREATE INDEX mapping_record_idx ON collegedb.mapping (record) WHERE record IS NOT NULL;
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
 * Computed placement's epochs: each the sorted list of the shards eligible
 * when it was published, numbered from 1.  Epochs never change; the
 * constraints and the trigger refuse a corrupt or hand-edited row rather
 * than let the router use it.  is_sorted_set is true for a list of
 * distinct, non-empty names in ascending order.
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

/*
 * Registered tables: tables whose rows live with their key (colocated on
 * one shard) and move with it.
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

/*
 * Jobs: a single key's move, a rebalance or a slot's move, run by a
 * background worker.  The worker holding a job is lease_pid, with
 * lease_backend_start so that a reused pid is not taken for the holder.
 * With hash_mappings the key is stored hashed (as in collegedb.mapping) and
 * the key itself sits in raw_key only while the job is active.
 */
CREATE TABLE collegedb.job (
    id                  bigserial PRIMARY KEY,
    kind                text NOT NULL CHECK (kind IN ('move', 'rebalance', 'move_slot')),
    table_name          text,
    key                 text,
    target              text,
    force               boolean NOT NULL DEFAULT false,
    concurrency         integer CHECK (concurrency > 0),
    state               text NOT NULL DEFAULT 'queued'
                        CHECK (state IN ('queued', 'running', 'done', 'failed', 'cancelled')),
    owner               oid NOT NULL,
    cancel_requested    boolean NOT NULL DEFAULT false,
    result              jsonb,
    last_error          text,
    lease_pid           integer,
    created_at          timestamptz NOT NULL DEFAULT now(),
    started_at          timestamptz,
    finished_at         timestamptz,
    lease_backend_start timestamptz,
    raw_key             text,
    slot                integer CHECK (slot >= 0),
    -- how often the job's worker died (killed or crashed) while running it
    deaths              integer NOT NULL DEFAULT 0
);
SELECT pg_catalog.pg_extension_config_dump('collegedb.job', '');
SELECT pg_catalog.pg_extension_config_dump('collegedb.job_id_seq', '');

/*
 * The keys a rebalance or a slot's move planned, one row each, with where
 * it goes and how far it got.  Each key records when it was planned and
 * when it settled (moved or failed), in the transactions that already write
 * its row, so that collegedb.jobs derives keys done, the rate and the time
 * left without further writes.
 */
CREATE TABLE collegedb.job_key (
    job_id     bigint NOT NULL REFERENCES collegedb.job ON DELETE CASCADE,
    key        text NOT NULL,
    source     text NOT NULL,
    target     text NOT NULL,
    state      text NOT NULL DEFAULT 'pending'
               CHECK (state IN ('pending', 'moving', 'moved', 'failed')),
    error      text,
    raw_key    text,
    planned_at timestamptz NOT NULL DEFAULT now(),
    settled_at timestamptz,
    PRIMARY KEY (job_id, key)
);
-- a mover claims the next pending key in key order: without this index the
-- claim walks every key already moved (a 100,000-key job slows to a crawl)
CREATE INDEX job_key_pending_idx ON collegedb.job_key (job_id, key) WHERE state = 'pending';
SELECT pg_catalog.pg_extension_config_dump('collegedb.job_key', '');

/*
 * The move journal: one row per move of a key, its step committed before
 * the next step starts, so that after a crash the coordinator resumes or
 * undoes the move from here.  Ownership of a move: the process that holds it
 * (lease_pid, lease_backend_start) and a fencing generation, bumped each
 * time a process takes the move.  Every step locks the move's row with its
 * generation and applies its effects only then, so an attempt that lost the
 * move changes nothing.  lease_until is renewed at every step and only
 * shown: a live holder keeps the move however long a step takes.  A failed
 * attempt is retried after next_attempt_at, at most
 * collegedb.move_max_attempts times; a move that gives up before
 * source_done is 'abandoned' until the target's partial copy is removed,
 * then 'failed'.  Keys are stored as in collegedb.job.
 */
CREATE TABLE collegedb.move (
    id                  bigserial PRIMARY KEY,
    job_id              bigint REFERENCES collegedb.job ON DELETE SET NULL,
    key                 text NOT NULL,
    source              text NOT NULL,
    target              text NOT NULL,
    step                text NOT NULL DEFAULT 'journaled'
                        CHECK (step IN ('journaled', 'copied', 'source_done', 'mapped', 'done', 'failed')),
    rows                jsonb,
    error               text,
    lease_pid           integer,
    lease_until         timestamptz,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    generation          bigint NOT NULL DEFAULT 0,
    lease_backend_start timestamptz,
    attempts            integer NOT NULL DEFAULT 0,
    next_attempt_at     timestamptz,
    abandoned           boolean NOT NULL DEFAULT false,
    raw_key             text
);
-- one mover per key: a second active move of a key is refused
CREATE UNIQUE INDEX move_active_key ON collegedb.move (key) WHERE step NOT IN ('done', 'failed');
SELECT pg_catalog.pg_extension_config_dump('collegedb.move', '');
SELECT pg_catalog.pg_extension_config_dump('collegedb.move_id_seq', '');

-- under computed placement the router caches whether any move is before
-- its source step (router.c): changes to the journal reach every backend
CREATE TRIGGER move_changed
  AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON collegedb.move
  FOR EACH STATEMENT EXECUTE FUNCTION collegedb.invalidate_cache('computed');

/*
 * The installed slot maps (README "Slot maps"): one row per version, the
 * newest in force.  ranges is the normalised cover of 0 .. slots - 1
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

CREATE TRIGGER slot_map_guard
  BEFORE INSERT OR UPDATE OR DELETE ON collegedb.slot_map
  FOR EACH ROW EXECUTE FUNCTION collegedb.slot_map_guard();
CREATE TRIGGER slot_map_truncate_guard
  BEFORE TRUNCATE ON collegedb.slot_map
  FOR EACH STATEMENT EXECUTE FUNCTION collegedb.slot_map_guard();
CREATE TRIGGER slot_map_changed
  AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON collegedb.slot_map
  FOR EACH STATEMENT EXECUTE FUNCTION collegedb.invalidate_cache();

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


/* ========================================================================
 * Views over the catalog
 *
 * What users read: each in a fixed order.  The views over functions
 * (prepared_transactions, shard_health) follow their functions below.
 * ======================================================================== */

-- the shards with their dialect, in name order (C collation)
CREATE VIEW collegedb.shards AS
SELECT s.name,
       (SELECT split_part(o, '=', 2) FROM unnest(fs.srvoptions) AS o
         WHERE o LIKE 'dialect=%') AS dialect,
       s.physical_id, s.writable, s.drain, s.tags, s.region, s.priority,
       s.added_at
  FROM collegedb.shard s
  LEFT JOIN pg_catalog.pg_foreign_server fs ON fs.srvname = s.name
 ORDER BY s.name COLLATE "C";

-- the settings, one row each, and whether each has its default value
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

CREATE VIEW collegedb.epochs AS
SELECT epoch, shards, published_at FROM collegedb.epoch ORDER BY epoch;

CREATE VIEW collegedb.tables AS
SELECT table_name, key_column, registered_at FROM collegedb.registered_table ORDER BY table_name;

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

/*
 * The jobs with their counts (examined keys include those a rebalance
 * found agreeing, which it does not plan) and, for a rebalance or a slot's
 * move, their progress: keys done of keys planned, the rate since the first
 * key was planned, and the time left while it runs.
 */
CREATE VIEW collegedb.jobs AS
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

-- the move journal (the columns an upgraded view has, in that order)
CREATE VIEW collegedb.moves AS
SELECT id, job_id, key, source, target, step, rows, error, lease_pid, lease_until,
       created_at, updated_at, generation, attempts, next_attempt_at
  FROM collegedb.move ORDER BY id;

CREATE VIEW collegedb.shard_map AS
SELECT version, digest, slots, ranges, installed_at FROM collegedb.slot_map ORDER BY version;

CREATE VIEW collegedb.slot_moves AS
SELECT slot, source, target, job_id, started_at FROM collegedb.slot_move ORDER BY slot;

-- the outbox as an operator reads it: a snapshot without payload is a removal
CREATE VIEW collegedb.topology_outbox AS
SELECT d.kind, nullif(d.channel, '') AS channel, d.group_name, d.member, d.version,
       d.payload IS NULL AS removal, d.attempts, d.next_attempt_at, d.last_error, d.staged_at
  FROM collegedb.topology_delivery d
 ORDER BY d.group_name, d.kind, d.channel, d.member;


/* ========================================================================
 * Functions
 *
 * Most are C (src/sqlfuncs/): they run their catalog statements with the
 * extension owner's rights (catalog/catalog.c) and otherwise as the caller,
 * so that shard connections always use the caller's user mapping.  The SQL
 * and PL/pgSQL functions that read or write the catalog tables for the
 * roles granted them are SECURITY DEFINER with search_path = pg_catalog,
 * pg_temp: they take only values, run no code a caller chose, and connect
 * to no shard.  The others set the same search_path and run as the caller
 * (the C functions call several of them with the owner's rights).
 * ======================================================================== */

/* ------------------------------------------------------------------------
 * Routing by key
 *
 * Placeholders are $1 ... $n in every dialect.  Each function has a form
 * without parameters and one with VARIADIC "any".  "all" is a reserved
 * word: call it schema-qualified.
 * ------------------------------------------------------------------------ */

-- rows affected
CREATE FUNCTION collegedb.run(key text, sql text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'collegedb_run'
LANGUAGE C;

CREATE FUNCTION collegedb.run(key text, sql text, VARIADIC params "any")
RETURNS bigint
AS 'MODULE_PATHNAME', 'collegedb_run'
LANGUAGE C;

-- rows with the caller's column list: AS t(col type, ...)
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

-- the first row, NULL when there is none
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

/*
 * route says where a key goes and why: source is mapping, exception,
 * computed, allocated or tombstone; epoch under computed placement, slot
 * under the slots strategy.
 */
CREATE FUNCTION collegedb.route(key text)
RETURNS TABLE (shard text, source text, hops integer, epoch integer, has_key boolean,
               slot integer)
AS 'MODULE_PATHNAME', 'collegedb_route'
LANGUAGE C STRICT;

-- the stored form of a key (see collegedb.mapping)
CREATE FUNCTION collegedb.mapping_key(key text)
RETURNS text
AS 'MODULE_PATHNAME', 'collegedb_mapping_key'
LANGUAGE C STABLE STRICT;

-- the id of a key in the mapping store (see collegedb.mapping)
CREATE FUNCTION collegedb.mapping_id(key text)
RETURNS uuid
AS 'MODULE_PATHNAME', 'collegedb_mapping_id'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

/*
 * cache_stats reports this backend's mapping cache, and the mapping cache
 * shared by the backends: this backend's hits and misses there and how many
 * entries it holds (NULL without it).
 */
CREATE FUNCTION collegedb.cache_stats()
RETURNS TABLE (mapping_hits bigint, mapping_misses bigint, catalog_reads bigint,
               shared_hits bigint, shared_misses bigint, shared_entries bigint)
AS 'MODULE_PATHNAME', 'collegedb_cache_stats'
LANGUAGE C;

/* ------------------------------------------------------------------------
 * Statements on named shards, and on every shard
 * ------------------------------------------------------------------------ */

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

-- a statement on every shard (e.g. DDL), each shard's outcome a row
CREATE FUNCTION collegedb.run_on_all(sql text)
RETURNS TABLE (shard text, ok boolean, rows bigint, error text)
AS 'MODULE_PATHNAME', 'collegedb_run_on_all'
LANGUAGE C;

-- a read on every shard at once, failures as data
CREATE FUNCTION collegedb.fanout(sql text)
RETURNS TABLE (shard text, value jsonb, error text)
AS 'MODULE_PATHNAME', 'collegedb_fanout'
LANGUAGE C;

CREATE FUNCTION collegedb.fanout(sql text, VARIADIC params "any")
RETURNS TABLE (shard text, value jsonb, error text)
AS 'MODULE_PATHNAME', 'collegedb_fanout'
LANGUAGE C;

/* ------------------------------------------------------------------------
 * Shards and settings
 * ------------------------------------------------------------------------ */

/*
 * add_shard registers a server of the wrapper as a data shard and prepares
 * it: the tombstone table, and on PostgreSQL shards the guard function.
 * drop_shard refuses while keys still map to the shard, unless forced.
 */
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

-- changes what is given, keeps the rest
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

-- computed placement: a new epoch when the eligible set changed
CREATE FUNCTION collegedb.publish_eligibility()
RETURNS TABLE (eligible text[], published boolean, epoch integer)
AS 'MODULE_PATHNAME', 'collegedb_publish_eligibility'
LANGUAGE C;

/*
 * configure changes the settings given and keeps the others.  It is C and
 * SECURITY INVOKER so that it sees its caller, whom it records as the owner
 * of an eligibility predicate; it runs the checks and the update,
 * apply_settings(), with the catalog owner's rights, and publishes the first
 * epoch when placement becomes computed (apply_settings returns true then).
 */
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
AS 'MODULE_PATHNAME', 'collegedb_configure'
LANGUAGE C;

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

-- one setting back to its default (hash_mappings through configure's checks)
CREATE FUNCTION collegedb.reset_setting(name text)
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
 * Mappings and lookup keys
 *
 * A record may have several lookup keys, each resolving to its shard;
 * changing or deleting the record's mapping changes all of them.
 * ------------------------------------------------------------------------ */

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

-- the stored form of a mapping row's key (see collegedb.mapping)
CREATE FUNCTION collegedb.stored_key(id uuid, name text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT coalesce(name, pg_catalog.replace(id::pg_catalog.text, '-', ''))
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

CREATE FUNCTION collegedb.set_mapping(key text, shard text, lookup_keys text[] DEFAULT '{}')
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

CREATE FUNCTION collegedb.add_lookup_keys(key text, lookup_keys text[])
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
CREATE FUNCTION collegedb.get_lookup_keys(key text)
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

CREATE FUNCTION collegedb.update_mapping(key text, shard text)
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

CREATE FUNCTION collegedb.delete_mapping(key text)
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

CREATE FUNCTION collegedb.keys_for_shard(shard text)
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

/*
 * The record's mapped shard first; with no mapping or no match there, every
 * shard, in parallel.
 */
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

/* ------------------------------------------------------------------------
 * Registered tables and moves
 * ------------------------------------------------------------------------ */

/*
 * register_table checks, on every shard that answers, that the table and
 * its key column exist, and refuses to change a registered table's key
 * column (unregister it first).  In C: the checks connect to shards as the
 * caller, the catalog write runs with the owner's rights.
 */
CREATE FUNCTION collegedb.register_table(table_name text, key_column text)
RETURNS void
AS 'MODULE_PATHNAME', 'collegedb_register_table'
LANGUAGE C;

CREATE FUNCTION collegedb.unregister_table(table_name text)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    DELETE FROM collegedb.registered_table r WHERE r.table_name = unregister_table.table_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'table "%" is not registered', table_name USING ERRCODE = 'undefined_table';
    END IF;
END
$$;

-- moves one key's rows of every registered table, now
CREATE FUNCTION collegedb.reassign_shard(key text, target text, force boolean DEFAULT false)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'collegedb_reassign_shard'
LANGUAGE C;

-- moves the keys whose shard differs from the one the strategy picks now
CREATE FUNCTION collegedb.rebalance(table_name text, dry_run boolean DEFAULT false,
                                    concurrency integer DEFAULT NULL)
RETURNS TABLE (examined bigint, agreed bigint, moved bigint, failed jsonb)
AS 'MODULE_PATHNAME', 'collegedb_rebalance'
LANGUAGE C;

/* ------------------------------------------------------------------------
 * Jobs
 * ------------------------------------------------------------------------ */

-- a rebalance run by a background worker: returns the job's id
CREATE FUNCTION collegedb.schedule_rebalance(table_name text, concurrency integer DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'collegedb_schedule_rebalance'
LANGUAGE C;

-- the job's row of collegedb.jobs once it ended, or when the timeout passed
CREATE FUNCTION collegedb.wait_for_job(id bigint, timeout interval DEFAULT '1 hour')
RETURNS collegedb.jobs
AS 'MODULE_PATHNAME', 'collegedb_wait_for_job'
LANGUAGE C;

-- asks a queued or running job to stop; false when it had ended already
CREATE FUNCTION collegedb.cancel_job(id bigint)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
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

/*
 * wake_launcher asks the launcher to start this database's coordinator
 * when the current transaction ends (this script calls it last, so CREATE
 * EXTENSION starts one at once, as ALTER EXTENSION UPDATE does).
 */
CREATE FUNCTION collegedb.wake_launcher()
RETURNS void
AS 'MODULE_PATHNAME', 'collegedb_wake_launcher'
LANGUAGE C;

/* ------------------------------------------------------------------------
 * Slot maps
 * ------------------------------------------------------------------------ */

-- installs version 1: the ranges given, or slot k on the (k mod n)-th active shard by name
CREATE FUNCTION collegedb.initialize_shard_map(slots integer DEFAULT 1024, ranges jsonb DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'collegedb_initialize_shard_map'
LANGUAGE C;

-- whether every row of the table sits on the shard its slot names
CREATE FUNCTION collegedb.verify_shard_map(table_name text, slots integer DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'collegedb_verify_shard_map'
LANGUAGE C;

-- moves a slot's keys to the target and installs the next map version
CREATE FUNCTION collegedb.move_slot(slot integer, target text)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'collegedb_move_slot'
LANGUAGE C;

CREATE FUNCTION collegedb.schedule_move_slot(slot integer, target text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'collegedb_schedule_move_slot'
LANGUAGE C;

/* ------------------------------------------------------------------------
 * Topology groups
 * ------------------------------------------------------------------------ */

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

-- the published snapshot with the group's current state values
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
 * (collegedb.rendezvous_owner, src/README.md "Placement") among its active
 * members.  A group that does not exist is TOPOLOGY_UNAVAILABLE; one whose
 * members all drain is NO_ELIGIBLE_SHARD.
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

/* ------------------------------------------------------------------------
 * Two-phase commit
 * ------------------------------------------------------------------------ */

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

CREATE FUNCTION collegedb.prepared_transactions_list()
RETURNS TABLE (shard text, gid text, decision text, error text)
AS 'MODULE_PATHNAME', 'collegedb_prepared_transactions_list'
LANGUAGE C VOLATILE;

/*
 * prepared_transactions lists the in-doubt transactions per shard: the
 * prepared transactions this front left there, and what recovery would
 * do with each (commit, roll back, in progress: its front transaction is
 * still running, undecided: a last participant could not be asked), plus
 * a row per shard that could not be listed.
 */
CREATE VIEW collegedb.prepared_transactions AS
SELECT shard, gid, decision, error FROM collegedb.prepared_transactions_list();

/* ------------------------------------------------------------------------
 * Connections, statistics and health
 * ------------------------------------------------------------------------ */

-- this backend's cached shard connections
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

CREATE FUNCTION collegedb.shard_stats()
RETURNS TABLE (shard text, key_count bigint, size_bytes bigint, writable boolean,
               drain text, eligible boolean)
AS 'MODULE_PATHNAME', 'collegedb_shard_stats'
LANGUAGE C;

-- measured in the shard's dialect
CREATE FUNCTION collegedb.database_size(shard text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'collegedb_database_size'
LANGUAGE C STRICT;

CREATE FUNCTION collegedb.shard_activity()
RETURNS TABLE (shard text, statements bigint, errors bigint)
AS 'MODULE_PATHNAME', 'collegedb_shard_activity'
LANGUAGE C;

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

CREATE VIEW collegedb.shard_health AS
SELECT shard, dialect, reachable, last_contact, last_error, last_error_at, connections,
       statements, errors, scope, size_bytes, key_count, drain, writable
  FROM collegedb.shard_health_list();

/* ------------------------------------------------------------------------
 * Placement hash functions (exact; src/README.md "Placement")
 *
 * Pure functions of their arguments: PUBLIC may run them.
 * ------------------------------------------------------------------------ */

-- fmix32(fnv1a32(shard || ':' || key)); the owner is the shard with the highest score
CREATE FUNCTION collegedb.rendezvous_score(shard text, key text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'collegedb_rendezvous_score'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- ties go to the lower shard name (byte order)
CREATE FUNCTION collegedb.rendezvous_owner(key text, shards text[])
RETURNS text
AS 'MODULE_PATHNAME', 'collegedb_rendezvous_owner'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- jump consistent hash over the key's ordered encoding
CREATE FUNCTION collegedb.jump_bucket(key text, buckets integer)
RETURNS integer
AS 'MODULE_PATHNAME', 'collegedb_jump_bucket'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- fnv1a32 of the key's ordered encoding, mod slot_count
CREATE FUNCTION collegedb.slot_of(key text, slot_count integer)
RETURNS integer
AS 'MODULE_PATHNAME', 'collegedb_slot_of'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;


/* ========================================================================
 * Privileges
 *
 * A role-neutral grant model (README "Security").  The extension creates no
 * role: PUBLIC may use nothing but the pure functions, and a superuser
 * grants one of two sets to the roles that need it, with
 * collegedb.grant_routing(role) (applications) and collegedb.grant_admin(role)
 * (administrators), or with the GRANTs those functions issue.  The catalog
 * tables stay the extension owner's: nobody else holds a privilege on them,
 * so they are written only through collegedb's functions.
 *
 * sql/security.sql lists who may run what, so a new function shows up
 * there.
 * ======================================================================== */

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

/*
 * Nothing for PUBLIC: these cover every object created above (keep them
 * after the last CREATE), then PUBLIC gets back the pure functions (the
 * CHECK on collegedb.epoch uses one).
 */
REVOKE ALL ON SCHEMA collegedb FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA collegedb FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA collegedb FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA collegedb FROM PUBLIC;

GRANT EXECUTE ON FUNCTION
    collegedb.rendezvous_score(text, text),
    collegedb.rendezvous_owner(text, text[]),
    collegedb.jump_bucket(text, integer),
    collegedb.slot_of(text, integer),
    collegedb.is_sorted_set(text[])
  TO PUBLIC;


/* ========================================================================
 * Start this database's coordinator when CREATE EXTENSION commits
 * ======================================================================== */

SELECT collegedb.wake_launcher();
