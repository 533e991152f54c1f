-- One of the eight fan-out shard databases: the users i with i % 8 = :s.
\set ON_ERROR_STOP on
CREATE TABLE users (id text NOT NULL, name text, visits integer);
INSERT INTO users (id, name, visits)
SELECT i::text, 'User ' || i, 0 FROM generate_series(1, 100000) AS i WHERE i % 8 = :s;
ALTER TABLE users ADD PRIMARY KEY (id);
VACUUM (ANALYZE) users;
