-- Transactions under pressure: rolling back deletes must bring the keys
-- back even when the table is full or full of tombstones (a rollback has
-- no way to report an error: a table it cannot undo is dropped with a
-- WARNING).  sql/transactions.sql has the ordinary cases; these are the
-- problems found while writing them, now fixed.
BEGIN;
SELECT plan(6);

SELECT cpht_drop_all() >= 0 AS clean \gset

-- The table's count, or the error that cpht_count raised.
CREATE FUNCTION pg_temp.count_or_error(h int) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	RETURN cpht_count(h)::text;
EXCEPTION WHEN OTHERS THEN
	RETURN SQLERRM;
END $$;

-- These tables keep the size they were created with, so that they fill up.
SET cpht.grow = off;

-- Fill a table one key at a time until it is full; returns the count.
CREATE FUNCTION pg_temp.fill(h int) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN 1 .. 1000000 LOOP
		BEGIN
			PERFORM cpht_put(h, ARRAY[i::bigint]);
		EXCEPTION WHEN insufficient_resources THEN
			EXIT;
		END;
	END LOOP;
	RETURN cpht_count(h);
END $$;

-- Delete keys 1..n and roll the delete back, cycles times (fewer if the
-- table disappears).
CREATE FUNCTION pg_temp.delete_and_undo(h int, n int, cycles int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN 1 .. cycles LOOP
		BEGIN
			PERFORM cpht_delete(h, ARRAY(SELECT generate_series(1, n)::bigint));
			RAISE EXCEPTION 'undo';
		EXCEPTION WHEN raise_exception THEN
			NULL;
		END;
	END LOOP;
EXCEPTION WHEN undefined_object THEN
	RETURN;
END $$;

SET LOCAL client_min_messages = error;	-- the WARNING of a dropped table

-- a full table: delete keys, then roll the delete back
SELECT cpht_create(1000, 'iceberg') AS fi, cpht_create(1000, 'cuckoo') AS fc \gset
SELECT pg_temp.fill(:fi) AS fi_count, pg_temp.fill(:fc) AS fc_count \gset
SELECT pg_temp.delete_and_undo(:fc, 200, 1);
SELECT is(pg_temp.count_or_error(:fc), :'fc_count',
	'cuckoo: a delete rolled back in a full table brings the keys back');
SELECT pg_temp.delete_and_undo(:fi, 1, 1);
SELECT is(pg_temp.count_or_error(:fi), :'fi_count',
	'iceberg: a delete rolled back in a full table brings the key back');

-- a table a tenth full: deletes rolled back again and again
SELECT cpht_create(1000, 'iceberg') AS ci, cpht_create(1000, 'cuckoo') AS cc \gset
SELECT cpht_put(h, ARRAY(SELECT generate_series(1, 100)::bigint)) FROM (VALUES (:ci), (:cc)) AS v(h);
SELECT pg_temp.delete_and_undo(:cc, 100, 40);
SELECT is(pg_temp.count_or_error(:cc), '100',
	'cuckoo: 40 deletes of every key rolled back, the keys are all there');
SELECT pg_temp.delete_and_undo(:ci, 100, 40);
SELECT is(pg_temp.count_or_error(:ci), '100',
	'iceberg: 40 deletes of every key rolled back, the keys are all there');

-- rolled-back deletes give the keys their slots back: on an iceberg table
-- no tombstone is left, so rounds with or without cpht_rebuild stay clean
SELECT cpht_create(1000, 'iceberg') AS ri \gset
SELECT cpht_put(:ri, ARRAY(SELECT generate_series(1, 100)::bigint));
SELECT pg_temp.delete_and_undo(:ri, 100, 5) FROM generate_series(1, 8) WHERE cpht_rebuild(:ri) >= 0;
SELECT is(pg_temp.count_or_error(:ri), '100',
	'iceberg: rounds of rolled-back deletes with cpht_rebuild in between');
SELECT is(cpht_rebuild(:ri), 0::bigint, 'rolled-back deletes left no tombstones');

SELECT cpht_drop_all() >= 0 AS clean \gset
SELECT * FROM finish();
ROLLBACK;
