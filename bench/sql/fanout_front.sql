-- The fan-out front database: collegedb with the eight shards fan0 .. fan7.
-- psql variables: host, port (the shard cluster), user.
\set ON_ERROR_STOP on
\ir extension.sql
SELECT format('CREATE SERVER fan%s FOREIGN DATA WRAPPER collegedb OPTIONS (dialect %L, host %L, port %L, dbname %L)',
              s, 'postgres', :'host', :'port', 'fan' || s),
       format('CREATE USER MAPPING FOR PUBLIC SERVER fan%s OPTIONS (user %L)', s, :'user'),
       format('SELECT collegedb.add_shard(%L)', 'fan' || s)
  FROM generate_series(0, 7) AS s \gexec
