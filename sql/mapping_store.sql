-- The mapping store at 100,000 keys: at most 100 bytes a key (table,
-- indexes, TOAST), and what reads and writes it: loads, pins, lookup keys,
-- moves, shard numbers, keys kept in clear; on SQLite shards.
CREATE EXTENSION collegedb;
\set VERBOSITY terse
SET collegedb.progress_notices = off;
\i sql/common/env.sql
SET collegedb.commit_protocol = 'sequential';
\i sql/common/try.sql

\set a_db :sqlite_dir '/mapping_store_a.db'
\set b_db :sqlite_dir '/mapping_store_b.db'
\set c_db :sqlite_dir '/mapping_store_c.db'
CREATE SERVER ms_a FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'a_db');
CREATE SERVER ms_b FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'b_db');
CREATE SERVER ms_c FOREIGN DATA WRAPPER collegedb OPTIONS (dialect 'sqlite', database :'c_db');
SELECT collegedb.add_shard('ms_a'), collegedb.add_shard('ms_b');
-- every shard name gets a number, in the order of registration
SELECT number, name FROM collegedb.shard_number ORDER BY number;
SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE IF EXISTS items') ORDER BY shard;
SELECT shard, ok FROM collegedb.run_on_all('CREATE TABLE items (id TEXT PRIMARY KEY, v INTEGER)') ORDER BY shard;
SELECT collegedb.register_table('items', 'id');
CREATE FOREIGN TABLE items (id text, v int) SERVER collegedb OPTIONS (key_column 'id');

-- 100,000 keys in one statement
INSERT INTO items SELECT 'item-' || i, i FROM generate_series(1, 100000) AS i;
VACUUM ANALYZE collegedb.mapping;
SELECT count(*) AS keys, count(DISTINCT shard) AS shards,
       count(*) FILTER (WHERE record IS NOT NULL OR keys IS NOT NULL OR name IS NOT NULL) AS wide_rows
  FROM collegedb.mapping;
SELECT pg_total_relation_size('collegedb.mapping') / count(*) <= 100 AS at_most_100_bytes_a_key,
       pg_relation_size('collegedb.mapping_record_idx') <= 8192 AS record_index_empty
  FROM collegedb.mapping;
-- each key's id is the first 128 bits of its SHA-256, its stored form their hex
SELECT count(*) FILTER (WHERE m.key = left(encode(sha256(('item-' || i)::bytea), 'hex'), 32)::uuid) AS ids,
       count(*) FILTER (WHERE collegedb.mapping_key('item-' || i) = replace(m.key::text, '-', '')) AS stored_forms
  FROM generate_series(1, 100000) AS i
  JOIN collegedb.mapping m ON m.key = collegedb.mapping_id('item-' || i);
-- every row is on the shard its mapping names, and reads find it
SELECT s.shard, count(*) = count(m.key) AS where_mapped
  FROM (VALUES ('ms_a'), ('ms_b')) AS s(shard)
       CROSS JOIN LATERAL collegedb.all_on_shard(s.shard, 'SELECT id FROM items') AS r
       LEFT JOIN collegedb.mappings m ON m.key = collegedb.mapping_key(r->>'id') AND m.shard = s.shard
 GROUP BY s.shard ORDER BY s.shard;
SELECT count(*) AS read_back
  FROM generate_series(1, 100000, 997) AS i
 WHERE collegedb.first('item-' || i, 'SELECT v FROM items WHERE id = $1', 'item-' || i)->>'v' = i::text;
SELECT sum(key_count) AS keys_in_stats FROM collegedb.shard_stats();
SELECT count(*) = (SELECT count(*) FROM collegedb.mapping m JOIN collegedb.shard_number n
                    ON n.number = m.shard WHERE n.name = 'ms_a') AS keys_for_shard_agrees
  FROM collegedb.keys_for_shard('ms_a');

-- a pin: set_mapping places a key, and a write goes there
SELECT collegedb.set_mapping('pinned', 'ms_b');
SELECT collegedb.shard_for_key('pinned');
SELECT collegedb.run('pinned', 'INSERT INTO items VALUES ($1, 1)', 'pinned');
SELECT shard FROM collegedb.mappings WHERE key = collegedb.mapping_key('pinned');
-- a pin to a shard that is not registered, or no shard, is refused
SELECT try($$SELECT collegedb.set_mapping('k', 'ms_c')$$);
SELECT try($$SELECT collegedb.set_mapping('k', NULL)$$);
SELECT try($$SELECT collegedb.update_mapping('pinned', 'nowhere')$$);

-- lookup keys: rows of their own naming the record; only the record's row
-- lists them
SELECT collegedb.set_mapping('rec-1', 'ms_a', ARRAY['mail:1', 'phone:1']);
SELECT collegedb.run('rec-1', 'INSERT INTO items VALUES ($1, 7)', 'rec-1');
SELECT key = collegedb.mapping_id('rec-1') AS is_record, record IS NULL AS primary_row,
       keys = ARRAY[collegedb.mapping_key('rec-1'), collegedb.mapping_key('mail:1'),
                    collegedb.mapping_key('phone:1')] AS lists_keys
  FROM collegedb.mapping WHERE coalesce(record, key) = collegedb.mapping_id('rec-1') ORDER BY 1 DESC, 2;
SELECT collegedb.first_by_lookup_key('phone:1', 'SELECT v FROM items WHERE id = $1', 'rec-1');
SELECT collegedb.get_lookup_keys('mail:1') = collegedb.get_lookup_keys('rec-1') AS same_keys;
SELECT collegedb.add_lookup_keys('mail:1', ARRAY['fax:1']);
SELECT cardinality(collegedb.get_lookup_keys('rec-1')) AS keys;
-- a lookup key of another record is refused; a lookup key is not a record
SELECT try($$SELECT collegedb.set_mapping('rec-2', 'ms_b', ARRAY['mail:1'])$$);
SELECT try($$SELECT collegedb.set_mapping('mail:1', 'ms_b')$$);
-- the record and its lookup keys move together
SELECT collegedb.update_mapping('phone:1', 'ms_b');
SELECT shard, count(*) FROM collegedb.mappings WHERE record = collegedb.mapping_key('rec-1') GROUP BY 1;
SELECT collegedb.update_mapping('rec-1', 'ms_a');

-- a move: the journal keeps the stored form, the mapping the target's number
SELECT collegedb.reassign_shard('item-5', CASE collegedb.shard_for_key('item-5') WHEN 'ms_a' THEN 'ms_b' ELSE 'ms_a' END)->>'to' AS moved_to \gset
SELECT collegedb.shard_for_key('item-5') = :'moved_to' AS routed_to_target,
       (SELECT shard FROM collegedb.mappings WHERE key = collegedb.mapping_key('item-5')) = :'moved_to' AS mapped_to_target,
       collegedb.first('item-5', 'SELECT v FROM items WHERE id = $1', 'item-5') AS row;
SELECT key = collegedb.mapping_key('item-5') AS stored_form, step FROM collegedb.moves;
-- a lookup key does not move alone; its record moves with all of them
SELECT try($$SELECT collegedb.reassign_shard('mail:1', 'ms_b')$$);
SELECT collegedb.reassign_shard('rec-1', 'ms_b')->>'to';
SELECT shard, count(*) FROM collegedb.mappings WHERE record = collegedb.mapping_key('rec-1') GROUP BY 1;
SELECT collegedb.first_by_lookup_key('fax:1', 'SELECT v FROM items WHERE id = $1', 'rec-1');

-- a shard name keeps its number: dropped with keys and registered again, it
-- has them back
SELECT collegedb.add_shard('ms_c');
SELECT number, name FROM collegedb.shard_number ORDER BY number;
SELECT collegedb.set_mapping('on-c', 'ms_c');
SELECT try($$SELECT collegedb.drop_shard('ms_c')$$);
SELECT collegedb.drop_shard('ms_c', force => true);
SELECT try($$SELECT collegedb.shard_for_key('on-c')$$);
SELECT collegedb.add_shard('ms_c');
SELECT number, name FROM collegedb.shard_number ORDER BY number;
SELECT collegedb.shard_for_key('on-c');
SELECT collegedb.delete_mapping('on-c');
SELECT collegedb.drop_shard('ms_c');

-- a mapping row naming no known shard number is an error, not a guess
SET session_replication_role = replica;
UPDATE collegedb.mapping SET shard = 99 WHERE key = collegedb.mapping_id('item-7');
RESET session_replication_role;
SELECT try($$SELECT collegedb.shard_for_key('item-7')$$);
UPDATE collegedb.mapping SET shard = (SELECT number FROM collegedb.shard_number WHERE name = collegedb.rendezvous_owner('item-7', ARRAY['ms_a', 'ms_b']))
 WHERE key = collegedb.mapping_id('item-7');
SELECT collegedb.first('item-7', 'SELECT v FROM items WHERE id = $1', 'item-7');

-- computed placement: the rows are the exceptions, keys found away from
-- the shard their epochs name
SELECT shard, ok FROM collegedb.run_on_all('DELETE FROM items') ORDER BY shard;
DELETE FROM collegedb.move;
DELETE FROM collegedb.mapping;
SELECT collegedb.configure(placement => 'computed');
INSERT INTO items SELECT 'comp-' || i, i FROM generate_series(1, 1000) AS i;
SELECT count(*) AS exceptions FROM collegedb.mapping;
SELECT collegedb.shard_for_key('comp-1') AS computed_shard \gset
SELECT collegedb.reassign_shard('comp-1', CASE :'computed_shard' WHEN 'ms_a' THEN 'ms_b' ELSE 'ms_a' END)->>'to' AS exception_shard \gset
SELECT count(*) AS exceptions, bool_and(key = collegedb.mapping_id('comp-1')) AS of_the_moved_key,
       bool_and(shard = (SELECT number FROM collegedb.shard_number WHERE name = :'exception_shard')) AS on_its_shard
  FROM collegedb.mapping;
SELECT collegedb.shard_for_key('comp-1') = :'exception_shard' AS follows_exception,
       collegedb.first('comp-1', 'SELECT v FROM items WHERE id = $1', 'comp-1');
SELECT count(*) AS read_back FROM generate_series(1, 1000) AS i
 WHERE collegedb.first('comp-' || i, 'SELECT v FROM items WHERE id = $1', 'comp-' || i)->>'v' = i::text;

-- without hash_mappings the key is kept beside its id, and is its stored form
SELECT shard, ok FROM collegedb.run_on_all('DELETE FROM items') ORDER BY shard;
DELETE FROM collegedb.move;
DELETE FROM collegedb.mapping;
SELECT collegedb.configure(placement => 'kv');
SELECT collegedb.configure(hash_mappings => false);
INSERT INTO items SELECT 'clear-' || i, i FROM generate_series(1, 1000) AS i;
SELECT count(*) AS keys, count(*) FILTER (WHERE name = 'clear-' || substr(name, 7)
                                          AND key = collegedb.mapping_id(name)) AS named
  FROM collegedb.mapping;
SELECT collegedb.mapping_key('clear-1');
SELECT k FROM collegedb.keys_for_shard(collegedb.shard_for_key('clear-1')) AS k WHERE k = 'clear-1';
SELECT collegedb.set_mapping('clear-rec', 'ms_a', ARRAY['clear-mail']);
SELECT collegedb.get_lookup_keys('clear-mail');
SELECT key, record, shard, keys FROM collegedb.mappings WHERE key LIKE 'clear-rec%' OR key = 'clear-mail' ORDER BY key;
SELECT shard, ok FROM collegedb.run_on_all('DROP TABLE items') ORDER BY shard;
DROP EXTENSION collegedb CASCADE;
DROP FUNCTION try(text);
