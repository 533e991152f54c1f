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
