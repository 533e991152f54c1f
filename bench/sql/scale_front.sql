-- A front database of the scale part: collegedb with the shards sc<n>_0 ..
-- sc<n>_<n - 1> (databases of the shard cluster), users registered, no
-- mapping yet (scale_map.sql loads them).  psql variables: host, port (the
-- shard cluster), user, nshards.
\set ON_ERROR_STOP on
\ir extension.sql
SELECT format('CREATE SERVER sc%s_%s FOREIGN DATA WRAPPER collegedb OPTIONS (dialect %L, host %L, port %L, dbname %L)',
              :nshards, s, 'postgres', :'host', :'port', 'sc' || :nshards || '_' || s),
       format('CREATE USER MAPPING FOR PUBLIC SERVER sc%s_%s OPTIONS (user %L)', :nshards, s, :'user'),
       format('SELECT collegedb.add_shard(%L)', 'sc' || :nshards || '_' || s)
  FROM generate_series(0, :nshards - 1) AS s \gexec
SELECT collegedb.register_table('users', 'id');
