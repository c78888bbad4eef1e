-- cpht.max_memory across savepoints and transactions: the session's count
-- of its tables' memory (what cpht_create, cpht_drop and their rollbacks
-- add and take away) ends where it began, so that the cap admits exactly
-- what it should afterwards.  The cap is set to room for two tables and
-- less than a third; every section ends by creating two and failing the
-- third.  A table dropped by the open transaction still counts until the
-- transaction commits.  An undo log given back by ROLLBACK TO counts no
-- more.  In preloaded mode, the same for private tables in the cpht
-- worker (cpht.placement = worker), one of which grows past what the cap
-- leaves it.
--
-- CPU tables whatever cpht.device the suite runs with: the cap is sized
-- for slot memory alone.
SET client_min_messages = warning;
SET cpht.device = cpu;
SELECT plan(17);

-- The slot memory of one table of capacity 10000 (its drop committed).
SELECT cpht_create(10000) AS probe \gset
SELECT bytes AS tb FROM cpht_tables() WHERE handle = :probe \gset
SELECT cpht_drop(:probe);

-- Two tables fit, the third does not: true when the cap admits exactly
-- that; the tables made are dropped again (rolled back).
CREATE FUNCTION pg_temp.admits_two() RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	third_failed boolean := false;
BEGIN
	BEGIN
		PERFORM cpht_create(10000);
		PERFORM cpht_create(10000);
		BEGIN
			PERFORM cpht_create(10000);
		EXCEPTION WHEN configuration_limit_exceeded THEN
			third_failed := true;
		END;
		RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = 'undo';
	EXCEPTION
		WHEN configuration_limit_exceeded THEN RETURN false;
		WHEN raise_exception THEN NULL;
	END;
	RETURN third_failed;
END $$;

BEGIN;
-- room for two tables and less than one kB more
SELECT set_config('cpht.max_memory', ((2 * :tb + 1023) / 1024)::text, true) IS NOT NULL AS set \gset
SELECT ok(pg_temp.admits_two(), 'the cap admits two tables and not a third');
SELECT ok(pg_temp.admits_two(), '... again: the tables rolled back count no more');

-- created, dropped, both in savepoints rolled back, nested
SAVEPOINT a;
SELECT cpht_create(10000) AS t1 \gset
SAVEPOINT b;
SELECT cpht_drop(:t1);
SELECT cpht_create(10000) AS t2 \gset
ROLLBACK TO b;
SAVEPOINT c;
SELECT cpht_drop(:t1);
RELEASE c;
ROLLBACK TO a;
SELECT ok(pg_temp.admits_two(), 'after tables created and dropped in nested savepoints rolled back');

-- a table created, its drop rolled back, then dropped for good
SAVEPOINT d;
SELECT cpht_create(10000) AS t3 \gset
RELEASE d;
SAVEPOINT e;
SELECT cpht_drop(:t3);
ROLLBACK TO e;
SELECT is(cpht_count(:t3), 0::bigint, 'a drop rolled back to its savepoint keeps the table');
SELECT throws_ok('SELECT cpht_create(10000), cpht_create(10000)', '53400', NULL,
	'a live table and two more do not fit');
SELECT cpht_drop(:t3);
SELECT throws_ok('SELECT cpht_create(10000), cpht_create(10000)', '53400', NULL,
	'a table dropped by the open transaction still counts');

-- a dropped table's memory with a savepoint created and rolled back after it
SAVEPOINT f;
SELECT lives_ok('SELECT cpht_create(10000)', 'beside it, one more fits');
ROLLBACK TO f;

-- one transaction later, everything above is gone or freed
COMMIT;
BEGIN;
SELECT set_config('cpht.max_memory', ((2 * :tb + 1023) / 1024)::text, true) IS NOT NULL AS set \gset
SELECT ok(pg_temp.admits_two(), 'after the commit, the cap admits exactly two tables again');

-- the undo log of keys put in a savepoint rolled back: it keeps its
-- memory for the transaction's next changes (counted once) and gives it
-- back at commit
SAVEPOINT g;
SELECT cpht_create(10000, transactional => true) AS t4 \gset
RELEASE g;
SELECT set_config('cpht.max_memory', '1MB', true) IS NOT NULL AS set \gset
SAVEPOINT h;
SELECT is(cpht_put(:t4, array_agg(x)), 300::bigint, 'keys put in a savepoint')
FROM generate_series(1, 300) x;
SELECT (cpht_info(:t4)->>'undo_log_bytes')::bigint AS log_bytes \gset
ROLLBACK TO h;
-- room for the table and its undo log, and less than one kB more
SELECT set_config('cpht.max_memory', ((:tb + :log_bytes + 1023) / 1024)::text, true) IS NOT NULL AS set \gset
SELECT is(cpht_put(:t4, array_agg(x)), 300::bigint,
	'after ROLLBACK TO, the same keys again fit beside the table and its one undo log')
FROM generate_series(1, 300) x;
SELECT cpht_drop(:t4);
SELECT set_config('cpht.max_memory', '1MB', true) IS NOT NULL AS set \gset

SELECT cpht_create(10000) AS t5 \gset
SELECT cpht_drop(:t5);
ROLLBACK;
BEGIN;
SELECT set_config('cpht.max_memory', ((2 * :tb + 1023) / 1024)::text, true) IS NOT NULL AS set \gset
SELECT ok(pg_temp.admits_two(), 'and after a transaction that created and dropped a table rolled back');

-- ---- private tables in the cpht worker ---------------------------------------
CREATE FUNCTION pg_temp.worker_tests(tb bigint) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	w int;
	ok_after boolean;
BEGIN
	IF NOT (cpht_worker_info()->>'preloaded')::boolean THEN
		RETURN NEXT skip('cpht is not in shared_preload_libraries: no cpht worker', 5);
		RETURN;
	END IF;
	SET LOCAL cpht.placement = worker;
	RETURN NEXT ok(pg_temp.admits_two(), 'in the worker, the cap admits two tables and not a third');
	BEGIN
		w := cpht_create(10000, transactional => false);
		PERFORM cpht_drop(w);
		RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = 'undo';
	EXCEPTION WHEN raise_exception THEN NULL;
	END;
	RETURN NEXT ok(pg_temp.admits_two(), '... and after a table created and dropped in a block rolled back');
	-- a table that must grow beyond what the cap leaves
	w := cpht_create(1000, transactional => false);
	RETURN NEXT throws_ok(format('SELECT cpht_put(%s, array_agg(x)) FROM generate_series(1, 200000) x', w),
		'53400', NULL, 'a table in the worker that would grow past the cap fails its call');
	PERFORM cpht_put(w, array_agg(x)) FROM generate_series(1, 500) x;
	RETURN NEXT is(cpht_count(w), 500::bigint, '... and still takes keys within it');
	PERFORM cpht_drop(w);
	RETURN NEXT is(cpht_worker_info()->>'preloaded', 'true', 'the worker table is dropped (at commit)');
END $$;
SELECT * FROM pg_temp.worker_tests(:tb);
COMMIT;

BEGIN;
SELECT set_config('cpht.max_memory', ((2 * :tb + 1023) / 1024)::text, true) IS NOT NULL AS set \gset
CREATE FUNCTION pg_temp.worker_after() RETURNS SETOF text LANGUAGE plpgsql AS $$
BEGIN
	IF NOT (cpht_worker_info()->>'preloaded')::boolean THEN
		RETURN NEXT skip('cpht is not in shared_preload_libraries: no cpht worker', 1);
		RETURN;
	END IF;
	SET LOCAL cpht.placement = worker;
	RETURN NEXT ok(pg_temp.admits_two(),
		'after the worker table grew, failed and was dropped, the cap admits exactly two tables in the worker');
END $$;
SELECT * FROM pg_temp.worker_after();

SELECT * FROM finish();
ROLLBACK;
