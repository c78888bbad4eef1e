-- The GPU runs out of memory in the middle of a batch.  A transactional
-- table logs what a call inserts in device memory, and that log grows
-- chunk by chunk (16M keys at a time), so a 50M-key find-or-put on an
-- almost full device fails after its first chunk was already inserted.
-- The call must raise 53200, leave the table exactly as it was (keys,
-- count, slots, log), and the session must go on; with the memory back,
-- the same call succeeds.  Where no GPU is usable every test is skipped,
-- with the reason.
BEGIN;
SELECT plan(11);
-- This file fills one GPU's memory: every table here has one shard, whatever
-- the server's cpht.shards says (a sharded table's other shards would be on GPUs
-- with room to spare).
SET cpht.shards = 1;

-- Why a GPU table cannot be created here, or '' if it can.
CREATE FUNCTION pg_temp.gpu_unusable() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	detail text;
BEGIN
	SET LOCAL cpht.device = gpu;
	PERFORM cpht_drop(cpht_create(1000));
	RETURN '';
EXCEPTION WHEN object_not_in_prerequisite_state THEN
	GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
	RETURN coalesce(detail, 'no detail given');
END $$;
SELECT pg_temp.gpu_unusable() AS no_gpu \gset

-- Run a statement; its SQLSTATE, message and detail, or 'ok'.
CREATE FUNCTION pg_temp.outcome(stmt text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	detail text;
BEGIN
	EXECUTE stmt;
	RETURN 'ok';
EXCEPTION WHEN others THEN
	GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
	RETURN SQLSTATE || ': ' || SQLERRM || ' / ' || coalesce(detail, '');
END $$;

-- Fill the device with tables until between `leave` and `leave` + 256 MB
-- are free: the call's first chunk grows the log to 256 MB, the second
-- needs 512 MB more.  Each table is sized for half the excess (sizes round
-- up, and each also pins about 72 MB of transfer buffers), so none should
-- overshoot; they vanish when the savepoint is rolled back.
CREATE FUNCTION pg_temp.fill_device(probe int, leave bigint) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
	excess bigint;
	per_key float8;
	made int := 0;
	h int;
BEGIN
	SET LOCAL cpht.device = gpu;
	h := cpht_create(1000000, 'iceberg', 64);
	per_key := (cpht_info(h)->>'bytes')::float8 / 1000000;
	LOOP
		excess := (cpht_info(probe)->>'device_free_bytes')::bigint - leave;
		EXIT WHEN excess < 256 * 1024 * 1024 OR made > 64;
		PERFORM cpht_create(greatest((excess / 2 / per_key)::bigint, 1000), 'iceberg', 64, false);
		made := made + 1;
	END LOOP;
	RETURN made;
END $$;

SELECT :'no_gpu' = '' AS gpu \gset

\if :gpu
SET cpht.device = gpu;
-- 4M keys first (they stay in the open transaction's log, and the table's
-- scratch memory grows to its full chunk size), then 50M new ones.
SELECT cpht_create(60000000) AS t \gset
SELECT cardinality(cpht_fop(:t, array(SELECT hashint8extended(g, 1) FROM generate_series(1, 4000000) g))) AS warm \gset
CREATE TEMP TABLE big AS
	SELECT array(SELECT hashint8extended(g, 2) FROM generate_series(1, 50000000) g) AS keys;
SELECT cpht_info(:t) AS before \gset

SAVEPOINT filled;
SELECT pg_temp.fill_device(:t, 480 * 1024 * 1024) AS fillers \gset
SELECT (cpht_info(:t)->>'device_free_bytes')::bigint >> 20 AS free_mb \gset
SELECT pg_temp.outcome(format('SELECT cpht_fop(%s, keys) FROM big', :t)) AS oom \gset
SELECT cpht_info(:t) AS after \gset
SELECT cpht_count(:t) AS count_after,
	   (SELECT count(*) FROM unnest(cpht_find(:t, keys)) AS f WHERE f) AS found_after
	FROM big \gset
SELECT pg_temp.outcome(format('SELECT cpht_fop(%s, ARRAY[1, 2, 3]::bigint[])', :t)) AS small_fop \gset
ROLLBACK TO SAVEPOINT filled;

-- The retry grows the log in the middle of the call again, this time with
-- room: rolled back, it must leave exactly the 4M keys.
SAVEPOINT retried;
SELECT pg_temp.outcome(format('SELECT cpht_fop(%s, keys) FROM big', :t)) AS retry \gset
SELECT cpht_count(:t) AS count_retry \gset
ROLLBACK TO SAVEPOINT retried;
SELECT cpht_count(:t) AS count_undone,
	   (SELECT count(*) FROM unnest(cpht_find(:t, keys)) AS f WHERE f) AS found_undone
	FROM big \gset

SELECT diag(format('%s filler tables left %s MB of device memory free', :fillers, :free_mb));
SELECT is(left(:'oom', 5), '53200', 'a 50M-key find-or-put on a full device raises 53200 (out of memory)');
SELECT diag(:'oom');
-- (in a backend the log grows at 16777216 keys; in the cpht worker the call
-- runs in pieces of a transfer window, and fails at the piece that needs it)
SELECT ok(:'oom' LIKE '%undo log%after % of 50000000 keys, which were taken out again%',
	'the detail says what found no memory, and that the first chunk was already in and was taken out');
SELECT is(:count_after::bigint, 4000000::bigint, 'the count is what it was before the call');
SELECT is(:found_after::bigint, 0::bigint, 'none of the 50M keys is in the table');
SELECT is((:'after'::jsonb)->'levels', (:'before'::jsonb)->'levels',
	'every level holds the same live slots and no tombstones');
SELECT is((:'after'::jsonb)->>'undo_log_entries', (:'before'::jsonb)->>'undo_log_entries',
	'the undo log holds the same entries');
SELECT is(:'small_fop'::text, 'ok', 'the session goes on: the next call on the table works');
SELECT is(:'retry'::text, 'ok', 'with the memory back the same call succeeds');
SELECT is(:count_retry::bigint, 54000000::bigint, 'and then the table holds every key');
SELECT is(:count_undone::bigint, 4000000::bigint, 'rolling that call back restores the count');
SELECT is(:found_undone::bigint, 0::bigint, 'and takes out every one of its 50M keys (the log kept the first chunk across its growth)');
\else
SELECT skip(:'no_gpu', 11);
\endif

SELECT * FROM finish();
ROLLBACK;
