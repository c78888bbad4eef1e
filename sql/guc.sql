-- Settings.  The GPU side of cpht.device is tested in test/pgtap/gpu.sql,
-- because what it does depends on the machine.

-- the settings appear once the library is loaded, by any cpht call
SELECT count(*) FROM cpht_tables();
-- (the settings of the cpht worker exist only where cpht is preloaded:
-- test/pgtap/shared_*.sql)
SELECT name, vartype, boot_val, enumvals, context
FROM pg_settings WHERE name LIKE 'cpht.%' AND context <> 'postmaster' ORDER BY name;

-- cpu never probes the GPU
SET cpht.device = cpu;
SHOW cpht.device;
SELECT cpht_create(100) AS h \gset
SELECT cpht_info(:h)->>'device' AS device;
SELECT device FROM cpht_tables() WHERE handle = :h;

-- a table stays where it was created, whatever the setting says later
SET cpht.device = auto;
SELECT cpht_info(:h)->>'device' AS device;
SELECT cpht_fop(:h, '{1,2,3}');

-- auto creates a table in any case, on the GPU or the CPU
SELECT cpht_create(100) AS h2 \gset
SELECT cpht_info(:h2)->>'device' IN ('cpu', 'gpu') AS placed;
SELECT cpht_fop(:h2, '{1,2,3}');

-- the thread count of CPU tables; results do not depend on it
SET cpht.device = cpu;
SET cpht.cpu_threads = 1;
SELECT cpht_create(100000, 'iceberg') AS t1, cpht_create(100000, 'cuckoo') AS t2 \gset
SET cpht.cpu_threads = 0;
SELECT cpht_create(100000, 'iceberg') AS t3, cpht_create(100000, 'cuckoo') AS t4 \gset
SELECT h, cpht_put(h, array_agg(g * 31)), cpht_count(h)
FROM (VALUES (:t1), (:t2), (:t3), (:t4)) AS v(h), generate_series(1, 60000) g
GROUP BY h ORDER BY h;
SELECT h, (SELECT count(*) FILTER (WHERE f) FROM unnest(cpht_find(h, array_agg(g))) f)
FROM (VALUES (:t1), (:t2), (:t3), (:t4)) AS v(h), generate_series(1, 100000) g
GROUP BY h ORDER BY h;

RESET cpht.device;
RESET cpht.cpu_threads;
SELECT cpht_drop_all();

-- cpht.batch_size: keys per batch of the streaming functions, at least 1024
SHOW cpht.batch_size;
SET cpht.batch_size = 1023;
SET cpht.batch_size = 1024;
SHOW cpht.batch_size;
RESET cpht.batch_size;

-- cpht.max_memory: what one session's tables may hold (superusers only;
-- this test runs as one).  The error names sizes, so only its SQLSTATE
-- is shown here; test/pgtap/errors.sql checks the message.  CPU tables:
-- a GPU table also counts its transfer buffers (over 2 MB however small
-- the table), which the unit tests check.  The tables have 64-bit slots
-- (key_bits => 64): without key_bits they start at 16 bits.  The sizes
-- are those of tables of one shard (each shard of a sharded table has a
-- smallest size of its own), whatever cpht.shards the suite runs with.
SET cpht.device = cpu;
SET cpht.shards = 1;
SHOW cpht.max_memory;
SET cpht.max_memory = '15kB';
SHOW cpht.max_memory;
SELECT cpht_create(1000, key_bits => 64) AS m1 \gset
\set VERBOSITY sqlstate
SELECT cpht_create(1000000, key_bits => 64);
SELECT cpht_create(1000, 'cuckoo', 64);
\set VERBOSITY default
-- a smaller table still fits
SELECT cpht_create(100, key_bits => 64) > :m1 AS created;
SELECT count(*) FROM cpht_tables();
-- a dropped table's memory counts no more (once the drop commits)
SELECT cpht_drop(:m1);
SELECT cpht_create(1000, key_bits => 64) > :m1 AS created;
-- 0 is unlimited
SET cpht.max_memory = 0;
SELECT cpht_create(1000, 'cuckoo', 64) > 0 AS created;
RESET cpht.max_memory;
RESET cpht.device;
RESET cpht.shards;
SELECT cpht_drop_all();
