-- Transactions.  A transactional table (the default) follows the
-- transaction: what an aborted transaction or savepoint put or deleted is
-- undone, a table created in an aborted transaction disappears, a drop in an
-- aborted transaction is undone.  A non-transactional table keeps no undo
-- log: its keys stay whatever happens to the transaction, and only a single
-- failing call is undone.  Every case runs on both kinds.

-- The keys of probe that the table holds, in order.
CREATE FUNCTION pg_temp.present(h int, probe bigint[]) RETURNS bigint[]
LANGUAGE sql AS $$
	SELECT coalesce(array_agg(k ORDER BY k), '{}')
	FROM unnest(probe, cpht_find(h, probe)) AS u(k, f) WHERE f
$$;
-- Tombstones of all levels.
CREATE FUNCTION pg_temp.tombstones(h int) RETURNS bigint
LANGUAGE sql AS $$
	SELECT sum((l->>'tombstones')::bigint) FROM jsonb_array_elements(cpht_info(h)->'levels') l
$$;
-- The keys a delete of keys answered true for, in order: a key repeated
-- in the batch is true once, at whichever of its places (on a GPU the
-- copies race for the slot).
CREATE FUNCTION pg_temp.deleted(h int, keys bigint[]) RETURNS bigint[]
LANGUAGE sql AS $$
	SELECT coalesce(array_agg(k ORDER BY k), '{}')
	FROM unnest(keys, cpht_delete(h, keys)) AS u(k, d) WHERE d
$$;
-- Undo log entries (keys changed by the open transaction).
CREATE FUNCTION pg_temp.undo(h int) RETURNS bigint
LANGUAGE sql AS $$ SELECT (cpht_info(h)->>'undo_log_entries')::bigint $$;

CREATE TEMP TABLE t AS
	SELECT kind, cpht_create(1000, kind) AS h
	FROM unnest(ARRAY['iceberg', 'cuckoo']) WITH ORDINALITY AS k(kind, n)
	ORDER BY n;
SELECT kind, cpht_info(h)->'transactional' AS transactional, pg_temp.undo(h) AS undo
FROM t ORDER BY h;

-- ROLLBACK undoes puts
BEGIN;
SELECT kind, cpht_put(h, '{1,2,3}'), cpht_count(h), pg_temp.undo(h) AS undo FROM t ORDER BY h;
ROLLBACK;
SELECT kind, cpht_count(h), pg_temp.present(h, '{1,2,3}') FROM t ORDER BY h;

-- COMMIT keeps them and forgets the undo log
BEGIN;
SELECT kind, cpht_put(h, '{1,2,3}') FROM t ORDER BY h;
COMMIT;
SELECT kind, cpht_count(h), pg_temp.present(h, '{1,2,3}'), pg_temp.undo(h) AS undo
FROM t ORDER BY h;

-- ROLLBACK undoes deletes: the keys come back
BEGIN;
SELECT kind, pg_temp.deleted(h, '{1,3,4,3}'), cpht_count(h), pg_temp.undo(h) AS undo FROM t ORDER BY h;
ROLLBACK;
SELECT kind, cpht_count(h), pg_temp.present(h, '{1,2,3,4}') FROM t ORDER BY h;

-- puts and deletes mixed, the same key put, deleted and put again
BEGIN;
SELECT kind, cpht_put(h, '{4,5}') FROM t ORDER BY h;
SELECT kind, cpht_delete(h, '{1,4}') FROM t ORDER BY h;
SELECT kind, cpht_fop_new(h, '{6,1,4,2}') FROM t ORDER BY h;
SELECT kind, cpht_delete(h, '{5,6,2}') FROM t ORDER BY h;
SELECT kind, cpht_count(h), pg_temp.present(h, '{1,2,3,4,5,6}') FROM t ORDER BY h;
ROLLBACK;
SELECT kind, cpht_count(h), pg_temp.present(h, '{1,2,3,4,5,6}') FROM t ORDER BY h;

-- a transaction that fails on an error is rolled back (COMMIT answers ROLLBACK)
BEGIN;
SELECT kind, cpht_put(h, '{7,8}') FROM t ORDER BY h;
SELECT 1 / 0;
COMMIT;
SELECT kind, cpht_count(h), pg_temp.present(h, '{1,2,3,7,8}') FROM t ORDER BY h;

-- savepoints, three levels deep
BEGIN;
SELECT kind, cpht_put(h, '{10}') FROM t ORDER BY h;
SAVEPOINT s1;
SELECT kind, cpht_put(h, '{11}'), cpht_delete(h, '{1}') FROM t ORDER BY h;
SAVEPOINT s2;
SELECT kind, cpht_put(h, '{12}'), cpht_delete(h, '{2}') FROM t ORDER BY h;
SAVEPOINT s3;
SELECT kind, cpht_put(h, '{13}'), cpht_delete(h, '{3}') FROM t ORDER BY h;
SELECT kind, cpht_count(h), pg_temp.present(h, '{1,2,3,10,11,12,13,14}') FROM t ORDER BY h;
ROLLBACK TO s3;
SELECT kind, cpht_count(h), pg_temp.present(h, '{1,2,3,10,11,12,13,14}') FROM t ORDER BY h;
-- the savepoint stays after ROLLBACK TO and can be rolled back to again
SELECT kind, cpht_put(h, '{14}') FROM t ORDER BY h;
ROLLBACK TO s3;
SELECT kind, cpht_count(h), pg_temp.present(h, '{1,2,3,10,11,12,13,14}') FROM t ORDER BY h;
ROLLBACK TO s2;
SELECT kind, cpht_count(h), pg_temp.present(h, '{1,2,3,10,11,12,13,14}') FROM t ORDER BY h;
-- released: s2's changes belong to s1 now
SELECT kind, cpht_put(h, '{12}') FROM t ORDER BY h;
RELEASE s2;
ROLLBACK TO s1;
SELECT kind, cpht_count(h), pg_temp.present(h, '{1,2,3,10,11,12,13,14}') FROM t ORDER BY h;
SELECT kind, cpht_put(h, '{15}') FROM t ORDER BY h;
RELEASE s1;
COMMIT;
SELECT kind, cpht_count(h), pg_temp.present(h, '{1,2,3,10,11,12,13,14,15}') FROM t ORDER BY h;

-- released savepoints, then the outer transaction rolls back
BEGIN;
SAVEPOINT a;
SELECT kind, cpht_put(h, '{20}') FROM t ORDER BY h;
SAVEPOINT b;
SELECT kind, cpht_put(h, '{21}'), cpht_delete(h, '{10}') FROM t ORDER BY h;
RELEASE b;
RELEASE a;
SELECT kind, cpht_count(h), pg_temp.present(h, '{1,2,3,10,15,20,21}') FROM t ORDER BY h;
ROLLBACK;
SELECT kind, cpht_count(h), pg_temp.present(h, '{1,2,3,10,15,20,21}') FROM t ORDER BY h;

-- a plpgsql EXCEPTION block is a subtransaction: its puts are undone
CREATE FUNCTION pg_temp.put_then_fail(h int, keys bigint[]) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
	BEGIN
		PERFORM cpht_put(h, keys);
		RAISE EXCEPTION 'give up';
	EXCEPTION WHEN raise_exception THEN
		RETURN format('caught, %s keys', cpht_count(h));
	END;
END $$;
SELECT kind, pg_temp.put_then_fail(h, '{30,31,32}'), pg_temp.present(h, '{1,30,31,32}')
FROM t ORDER BY h;
-- a block that ends normally keeps its keys, the one that fails does not
DO $$
DECLARE
	r record;
BEGIN
	FOR r IN SELECT h FROM t LOOP
		BEGIN
			PERFORM cpht_put(r.h, '{33}');
		EXCEPTION WHEN OTHERS THEN
			RAISE NOTICE 'not reached';
		END;
		BEGIN
			PERFORM cpht_put(r.h, '{34}');
			PERFORM cpht_delete(r.h, '{33}');
			PERFORM 1 / 0;
		EXCEPTION WHEN division_by_zero THEN
			NULL;
		END;
	END LOOP;
END $$;
SELECT kind, cpht_count(h), pg_temp.present(h, '{1,33,34}') FROM t ORDER BY h;

-- a table created in an aborted transaction disappears; its handle is not reused
BEGIN;
SELECT cpht_create(100) AS gone1, cpht_create(100, 'cuckoo') AS gone2 \gset
SELECT cpht_put(:gone1, '{1}'), cpht_put(:gone2, '{1}');
SELECT count(*) FROM cpht_tables();
ROLLBACK;
SELECT cpht_count(:gone1);
SELECT cpht_find(:gone2, '{1}');
SELECT handle, kind, count FROM cpht_tables() ORDER BY handle;
-- created in a savepoint that is rolled back, while the transaction commits
BEGIN;
SAVEPOINT a;
SELECT cpht_create(100) AS gone3 \gset
ROLLBACK TO a;
COMMIT;
SELECT cpht_count(:gone3);
-- created in a released savepoint, then the transaction rolls back
BEGIN;
SAVEPOINT a;
SELECT cpht_create(100) AS gone4 \gset
RELEASE a;
ROLLBACK;
SELECT cpht_count(:gone4);
SELECT cpht_create(100) > :gone4 AS handles_not_reused;
SELECT cpht_drop(max(handle)) FROM cpht_tables();

-- a drop rolled back: the table is usable again, with its keys
BEGIN;
SELECT kind, cpht_drop(h) FROM t ORDER BY h;
SELECT cpht_count(h) FROM t WHERE kind = 'iceberg';
ROLLBACK;
SELECT kind, cpht_count(h), pg_temp.present(h, '{1,2,3,10,15,33,34}') FROM t ORDER BY h;
SELECT kind, cpht_put(h, '{40}') FROM t ORDER BY h;
-- in a savepoint that is rolled back, or after keys were put
BEGIN;
SELECT kind, cpht_put(h, '{41}') FROM t ORDER BY h;
SAVEPOINT a;
SELECT kind, cpht_drop(h) FROM t ORDER BY h;
ROLLBACK TO a;
SELECT kind, pg_temp.present(h, '{40,41}') FROM t ORDER BY h;
SELECT kind, cpht_drop(h) FROM t ORDER BY h;
ROLLBACK;
SELECT kind, cpht_count(h), pg_temp.present(h, '{40,41}') FROM t ORDER BY h;
-- cpht_drop_all rolled back
BEGIN;
SELECT cpht_drop_all();
SELECT count(*) FROM cpht_tables();
ROLLBACK;
SELECT handle, kind, count FROM cpht_tables() ORDER BY handle;

-- a drop committed, and a table created and dropped in one transaction
SELECT cpht_create(100) AS dropped \gset
SELECT cpht_put(:dropped, '{1}');
SELECT cpht_drop(:dropped);
SELECT cpht_count(:dropped);
BEGIN;
SELECT cpht_create(100) AS brief \gset
SELECT cpht_put(:brief, '{1}');
SELECT cpht_drop(:brief);
COMMIT;
SELECT cpht_count(:brief);
SELECT handle, kind, count FROM cpht_tables() ORDER BY handle;

-- an error inside a transaction: a full table (of fixed size: cpht.grow
-- off).  The failing call is undone at once; ROLLBACK TO and ROLLBACK undo
-- the rest.
SET cpht.grow = off;
CREATE TEMP TABLE small AS
	SELECT kind, cpht_create(10, kind) AS h
	FROM unnest(ARRAY['iceberg', 'cuckoo']) WITH ORDINALITY AS k(kind, n)
	ORDER BY n;
\set VERBOSITY terse
BEGIN;
SELECT kind, cpht_put(h, '{1,2,3}') FROM small ORDER BY h;
SAVEPOINT a;
SELECT cpht_put(h, array_agg(g)) FROM small, generate_series(100, 20000) g
WHERE kind = 'iceberg' GROUP BY h;
ROLLBACK TO a;
SELECT cpht_put(h, array_agg(g)) FROM small, generate_series(100, 20000) g
WHERE kind = 'cuckoo' GROUP BY h;
ROLLBACK TO a;
SELECT kind, cpht_count(h), pg_temp.present(h, '{1,2,3,4}') FROM small ORDER BY h;
SELECT kind, cpht_put(h, '{4}') FROM small ORDER BY h;
COMMIT;
SELECT kind, cpht_count(h), pg_temp.present(h, '{1,2,3,4,5}') FROM small ORDER BY h;
BEGIN;
SELECT kind, cpht_put(h, '{5}'), cpht_delete(h, '{1}') FROM small ORDER BY h;
SELECT cpht_fop(h, array_agg(g)) FROM small, generate_series(100, 20000) g
WHERE kind = 'cuckoo' GROUP BY h;
ROLLBACK;
SELECT kind, cpht_count(h), pg_temp.present(h, '{1,2,3,4,5}') FROM small ORDER BY h;
\set VERBOSITY default

-- non-transactional tables keep no undo log: their keys stay after ROLLBACK
-- (fixed size, so that a call can fail for want of room)
CREATE TEMP TABLE nt AS
	SELECT kind, cpht_create(1000, kind, 64, false) AS h
	FROM unnest(ARRAY['iceberg', 'cuckoo']) WITH ORDINALITY AS k(kind, n)
	ORDER BY n;
RESET cpht.grow;
SELECT kind, cpht_info(h)->'transactional' AS transactional FROM nt ORDER BY h;
SELECT kind, cpht_put(h, '{1,2,3}') FROM nt ORDER BY h;
BEGIN;
SELECT kind, cpht_put(h, '{4,5}'), cpht_delete(h, '{1}'), pg_temp.undo(h) AS undo FROM nt ORDER BY h;
ROLLBACK;
SELECT kind, cpht_count(h), pg_temp.present(h, '{1,2,3,4,5}') FROM nt ORDER BY h;
BEGIN;
SAVEPOINT a;
SELECT kind, cpht_put(h, '{6}') FROM nt ORDER BY h;
ROLLBACK TO a;
SELECT kind, pg_temp.put_then_fail(h, '{7}') FROM nt ORDER BY h;
ROLLBACK;
SELECT kind, cpht_count(h), pg_temp.present(h, '{1,2,3,4,5,6,7}') FROM nt ORDER BY h;
-- but a failing call is still undone on its own
\set VERBOSITY terse
SELECT cpht_put(h, array_agg(g)) FROM nt, generate_series(100, 20000) g
WHERE kind = 'iceberg' GROUP BY h;
SELECT cpht_put(h, array_agg(g)) FROM nt, generate_series(100, 20000) g
WHERE kind = 'cuckoo' GROUP BY h;
\set VERBOSITY default
SELECT kind, cpht_count(h) FROM nt ORDER BY h;
-- creation and drop still follow the transaction
BEGIN;
SELECT cpht_create(100, 'iceberg', 64, false) AS ntgone \gset
ROLLBACK;
SELECT cpht_count(:ntgone);
BEGIN;
SELECT kind, cpht_drop(h) FROM nt ORDER BY h;
ROLLBACK;
SELECT kind, cpht_count(h) FROM nt ORDER BY h;

-- deletes leave tombstones; cpht_rebuild removes them and says how many
CREATE TEMP TABLE r AS
	SELECT kind, cpht_create(1000, kind) AS h
	FROM unnest(ARRAY['iceberg', 'cuckoo']) WITH ORDINALITY AS k(kind, n)
	ORDER BY n;
SELECT kind, cpht_put(h, array_agg(g)) FROM r, generate_series(1, 500) g GROUP BY kind, h ORDER BY h;
SELECT kind, pg_temp.tombstones(h) FROM r ORDER BY h;
SELECT kind, (SELECT count(*) FILTER (WHERE d) FROM unnest(cpht_delete(h, array_agg(g))) d)
FROM r, generate_series(1, 500, 5) g GROUP BY kind, h ORDER BY h;
SELECT kind, cpht_count(h), pg_temp.tombstones(h) FROM r ORDER BY h;
SELECT kind, cpht_rebuild(h) FROM r ORDER BY h;
SELECT kind, cpht_count(h), pg_temp.tombstones(h),
	(SELECT count(*) FILTER (WHERE f) FROM unnest(cpht_find(h, array_agg(g))) f) AS found
FROM r, generate_series(1, 600) g GROUP BY kind, h ORDER BY h;
SELECT kind, cpht_rebuild(h) FROM r ORDER BY h;
-- a rolled-back insert frees its iceberg slot outright but leaves a cuckoo
-- tombstone; a rolled-back delete leaves its tombstone
BEGIN;
SELECT kind, cpht_put(h, '{1000,1001,1002}') FROM r ORDER BY h;
ROLLBACK;
SELECT kind, cpht_count(h), pg_temp.tombstones(h) FROM r ORDER BY h;
BEGIN;
SELECT kind, cpht_delete(h, '{2,3}') FROM r ORDER BY h;
ROLLBACK;
SELECT kind, cpht_count(h), pg_temp.tombstones(h), pg_temp.present(h, '{2,3}') FROM r ORDER BY h;
-- a rebuild inside a transaction that rolls back: the keys are as before
SELECT kind, cpht_rebuild(h) > 0 AS removed FROM r ORDER BY h;
BEGIN;
SELECT kind, cpht_put(h, '{2000,2001}'), cpht_delete(h, '{2,3}') FROM r ORDER BY h;
SELECT kind, cpht_rebuild(h) FROM r ORDER BY h;
SELECT kind, cpht_put(h, '{2002}'), cpht_delete(h, '{4}') FROM r ORDER BY h;
ROLLBACK;
SELECT kind, cpht_count(h), pg_temp.present(h, '{2,3,4,2000,2001,2002}') FROM r ORDER BY h;
SELECT kind, cpht_rebuild(h) > 0 AS removed FROM r ORDER BY h;
SELECT kind, cpht_count(h), pg_temp.tombstones(h) FROM r ORDER BY h;

SELECT cpht_drop_all();
