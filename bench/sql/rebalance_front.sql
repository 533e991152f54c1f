-- The rebalance front database: collegedb with shards rb0 and rb1 (rb2 is
-- added later), users registered, and :n users written through the router
-- (each key placed by rendezvous hashing).  psql variables: host, port, user, n.
\set ON_ERROR_STOP on
\ir extension.sql
SELECT format('CREATE SERVER rb%s FOREIGN DATA WRAPPER collegedb OPTIONS (dialect %L, host %L, port %L, dbname %L)',
              s, 'postgres', :'host', :'port', 'rb' || s),
       format('CREATE USER MAPPING FOR PUBLIC SERVER rb%s OPTIONS (user %L)', s, :'user')
  FROM generate_series(0, 2) AS s \gexec
SELECT collegedb.add_shard('rb0'), collegedb.add_shard('rb1');
SELECT collegedb.register_table('users', 'id');
SELECT sum(collegedb.run(i::text, 'INSERT INTO users (id, name, visits) VALUES ($1, $2, 0)',
                         i::text, 'User ' || i)) AS written
  FROM generate_series(1, :n) AS i;
