-- collegedb.fanout over eight shards where fan0 takes 20 ms and the others 5 ms:
-- in parallel that is about 20 ms, one after another 55 ms.
SELECT count(*) FROM collegedb.fanout(
  'SELECT pg_sleep(CASE WHEN current_database() = ''fan0'' THEN 0.020 ELSE 0.005 END)');
