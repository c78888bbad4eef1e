-- cpht_fop_new_agg where it meets the rest of the executor: a hash
-- aggregation of many groups that spills (work_mem tiny), a cursor fetched
-- partially and closed with groups still open, a key out of range raised
-- mid-stream inside a savepoint rolled back, FILTER, DISTINCT, a subquery
-- joined; and over a shared table in parallel workers (preloaded mode): the
-- same error raised in a worker mid-scan, partial states of a few keys (a
-- bytea with a short header, read where it lies), the leader participating
-- or not.  Every answer holds each new key once.
BEGIN;
SELECT plan(14);

\ir include/shared_sessions.psql

SET LOCAL cpht.device = cpu;
SET LOCAL cpht.batch_size = 1024;
-- 60000 rows, 25000 distinct ids
CREATE TABLE nas_src AS
	SELECT (g * 7919 % 25000 + 1)::bigint AS id, g AS pos FROM generate_series(1, 60000) g;
ANALYZE nas_src;
SELECT cpht_create(100000, key_bits => 16) AS h \gset

-- The keys of a set of arrays: their count, distinct count, and whether
-- they are the ids of nas_src.
CREATE FUNCTION pg_temp.keys_of(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	r text;
BEGIN
	EXECUTE format('SELECT count(*) || '' '' || count(DISTINCT k) || '' '' ||
		(count(DISTINCT k) FILTER (WHERE k IN (SELECT id FROM nas_src)) = count(DISTINCT k))
		FROM (SELECT unnest(a) k FROM (%s) s(a)) u', sql) INTO r;
	RETURN r;
END $$;

-- The lines of EXPLAIN of a statement.
CREATE FUNCTION pg_temp.plan_lines(sql text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	line text;
BEGIN
	FOR line IN EXECUTE sql LOOP
		RETURN NEXT line;
	END LOOP;
END $$;

-- ---- many groups, hashed, spilling -------------------------------------------
SET LOCAL work_mem = '64kB';
SET LOCAL enable_sort = off;
SAVEPOINT groups;
SELECT ok((SELECT string_agg(line, E'\n') FROM pg_temp.plan_lines(format(
	'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT pos %% 2000, cpht_fop_new_agg(%s, id) FROM nas_src GROUP BY 1', :h)) line)
	~ 'HashAggregate.*Batches: ([2-9]|[1-9][0-9]+) ', 'a hash aggregation of 2000 groups spills to disk');
ROLLBACK TO groups;
SELECT is(pg_temp.keys_of(format('SELECT cpht_fop_new_agg(%s, id) FROM nas_src GROUP BY pos %% 2000', :h)),
	'25000 25000 true', 'its groups'' answers hold every id once');
SELECT is(cpht_count(:h), 25000::bigint, 'and the table holds them');
ROLLBACK TO groups;

-- ---- a cursor fetched partially, then closed -----------------------------------
DECLARE nas_c CURSOR FOR SELECT pos % 50 AS g, cardinality(cpht_fop_new_agg(:h, id)) AS n
	FROM nas_src GROUP BY 1;
MOVE 3 FROM nas_c;
CLOSE nas_c;
SELECT cpht_count(:h) AS after_close \gset
SELECT is(cardinality(cpht_fop_new_agg(:h, id))::bigint, (25000 - :after_close)::bigint,
	'after a cursor closed with groups left, the table answers the rest as new')
FROM nas_src;
SELECT is(cpht_count(:h), 25000::bigint, '... and holds every id');
ROLLBACK TO groups;
RESET work_mem;
RESET enable_sort;

-- ---- an error mid-stream, in a savepoint rolled back ---------------------------
SAVEPOINT bad_key;
SELECT throws_ok(format(
	'SELECT cpht_fop_new_agg(%s, CASE WHEN pos = 45000 THEN 70000 ELSE id END) FROM nas_src', :h),
	'22003', NULL, 'a key out of range of key_bits after batches went to the table');
ROLLBACK TO bad_key;
SELECT is(cpht_count(:h), 0::bigint, 'the savepoint rolled back takes the batches before the error');
SELECT is(pg_temp.keys_of(format(
	'SELECT cpht_fop_new_agg(%s, id) FILTER (WHERE id %% 3 = 0) FROM nas_src
	 UNION ALL SELECT cpht_fop_new_agg(%s, id) FILTER (WHERE id %% 3 <> 0) FROM nas_src', :h, :h)),
	'25000 25000 true', 'then FILTER: two aggregates over one table together give every id once');
ROLLBACK TO bad_key;
SELECT is(cpht_fop_new_agg(DISTINCT :h, id ORDER BY :h, id), array_agg(DISTINCT id ORDER BY id),
	'DISTINCT with ORDER BY: the new keys in order') FROM nas_src;
ROLLBACK TO bad_key;
SELECT is(count(*), 9::bigint, 'a subquery of cpht_fop_new_agg joined')
FROM nas_src f JOIN (SELECT cpht_fop_new_agg(:h, id) k FROM nas_src) s ON f.id = ANY (s.k) WHERE f.pos < 10;
ROLLBACK TO bad_key;

-- ---- a shared table in parallel workers ----------------------------------------
CREATE FUNCTION pg_temp.shared_tests() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	why text := pg_temp.why_skip();
	hs int;
	r text;
BEGIN
	IF why IS NOT NULL THEN
		RETURN NEXT skip(why, 4);
		RETURN;
	END IF;
	PERFORM pg_temp.connect('a');
	PERFORM dblink_exec('a', 'SET statement_timeout = ''60s''');
	PERFORM dblink_exec('a', 'DROP TABLE IF EXISTS nas_shared_src');
	PERFORM dblink_exec('a', $q$CREATE TABLE nas_shared_src AS
		SELECT (g * 7919 % 25000 + 1)::bigint AS id, g AS pos FROM generate_series(1, 60000) g$q$);
	PERFORM dblink_exec('a', 'ANALYZE nas_shared_src');
	hs := (SELECT v FROM dblink('a', 'SELECT cpht_create(100000, key_bits => 16, name => ''nas_shared'')') AS t(v int));
	PERFORM dblink_exec('a', 'SET parallel_setup_cost = 0');
	PERFORM dblink_exec('a', 'SET parallel_tuple_cost = 0');
	PERFORM dblink_exec('a', 'SET min_parallel_table_scan_size = 0');
	PERFORM dblink_exec('a', 'SET max_parallel_workers_per_gather = 2');
	PERFORM dblink_exec('a', 'SET cpht.batch_size = 1024');
	PERFORM dblink_exec('a', 'SET parallel_leader_participation = off');

	-- the error in a worker, after its first batches went to the table
	PERFORM dblink_exec('a', 'BEGIN');
	PERFORM dblink_exec('a', 'SAVEPOINT s');
	BEGIN
		r := (SELECT v FROM dblink('a', format(
			'SELECT cardinality(cpht_fop_new_agg(%s, CASE WHEN pos = 45000 THEN 70000 ELSE id END)) FROM nas_shared_src',
			hs)) AS t(v text));
	EXCEPTION WHEN OTHERS THEN
		r := SQLERRM;
	END;
	RETURN NEXT ok(r LIKE '%key 70000 is out of range%', 'a key out of range raised in a parallel worker mid-scan');
	PERFORM dblink_exec('a', 'ROLLBACK TO s');
	r := (SELECT v FROM dblink('a', format('SELECT cpht_count(%s)', hs)) AS t(v text)) || ' ' ||
		 (SELECT v FROM dblink('a', format(
			'SELECT cardinality(cpht_fop_new_agg(%s, id)) FROM nas_shared_src', hs)) AS t(v text));
	PERFORM dblink_exec('a', 'ROLLBACK');
	RETURN NEXT is(r, '0 25000', 'the savepoint rolled back takes its batches; then every id is new once');

	-- a few new keys per worker: partial states of a few bytes
	PERFORM pg_temp.remote('a', format('SELECT cpht_put(%s, array_agg(id)) FROM nas_shared_src WHERE id > 7', hs));
	PERFORM dblink_exec('a', 'BEGIN');
	r := (SELECT v FROM dblink('a', format(
		'SELECT (SELECT array_agg(k ORDER BY k) FROM unnest(cpht_fop_new_agg(%s, id)) k)::text FROM nas_shared_src', hs)) AS t(v text));
	PERFORM dblink_exec('a', 'ROLLBACK');
	RETURN NEXT is(r, '{1,2,3,4,5,6,7}', 'partial states of a few keys, the workers alone');
	PERFORM dblink_exec('a', 'SET parallel_leader_participation = on');
	PERFORM dblink_exec('a', 'BEGIN');
	r := (SELECT v FROM dblink('a', format(
		'SELECT (SELECT array_agg(k ORDER BY k) FROM unnest(cpht_fop_new_agg(%s, id)) k)::text FROM nas_shared_src', hs)) AS t(v text));
	PERFORM dblink_exec('a', 'ROLLBACK');
	RETURN NEXT is(r, '{1,2,3,4,5,6,7}', 'and with the leader participating');

	PERFORM pg_temp.remote('a', format('SELECT cpht_drop(%s)', hs));
	PERFORM dblink_exec('a', 'DROP TABLE nas_shared_src');
	PERFORM dblink_disconnect('a');
END $$;
SELECT * FROM pg_temp.shared_tests();

SELECT * FROM finish();
ROLLBACK;
