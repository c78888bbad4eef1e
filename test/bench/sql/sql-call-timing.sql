-- sql-call-timing.sql — where the time of one 50M-key cpht_fop goes, on a
-- GPU table (and, at the end, a CPU table for comparison).  cpht.trace
-- reports each call's split: reading the array argument, the table call
-- (staging keys, waiting for the device, copying results, undo log) and
-- building the result.  Five repetitions on fresh tables; summarize with
--   psql -X -f test/bench/sql/sql-call-timing.sql > timing.log 2>&1
--   python3 test/bench/sql/summarize-call-timing.py timing.log
-- "table column": the array is read from a temp table (PostgreSQL detoasts
-- 400 MB inside the call); "in memory": array_cat(a, '{}') detoasts it
-- before the call, as an array built by the query (array_agg) would be.
SET cpht.trace = on;
SET cpht.device = gpu;
\timing on
CREATE TEMP TABLE a50 AS SELECT array(SELECT hashint8extended(g, 3) FROM generate_series(1, 50000000) g) AS a;
-- warm one table so that the process has its CUDA context and pinned buffers
SELECT cpht_create(100000000) AS w \gset
SELECT cardinality(cpht_fop(:w, array_cat(a, '{}'))) FROM a50;
\echo == rep 0
\ir sql-call-timing-rep.sql
\echo == rep 1
\ir sql-call-timing-rep.sql
\echo == rep 2
\ir sql-call-timing-rep.sql
\echo == rep 3
\ir sql-call-timing-rep.sql
\echo == rep 4
\ir sql-call-timing-rep.sql
\echo == in memory, transactional, new keys, then abort
SELECT cpht_create(100000000) AS ht \gset
BEGIN;
SELECT cardinality(cpht_fop(:ht, array_cat(a, '{}'))) FROM a50;
ROLLBACK;
SELECT cpht_count(:ht) AS after_rollback_want_0;
SELECT cpht_info(:ht)->>'device_name';
SET cpht.device = cpu;
SELECT cpht_create(100000000) AS hc \gset
\echo == CPU table, table column, transactional, new keys
SELECT cardinality(cpht_fop(:hc, a)) FROM a50;
\echo == CPU table, in memory, all present
SELECT cardinality(cpht_fop(:hc, array_cat(a, '{}'))) FROM a50;
