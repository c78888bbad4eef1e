-- The parallel plan node of cpht_fop_new_relation ("cpht new keys") run
-- in the ways a plan may be run besides a plain query: row by row from a
-- SQL function (the executor called for one row at a time, without
-- workers), PL/pgSQL loops that stop early, a scrollable cursor, EXPLAIN
-- ANALYZE, a sort with a LIMIT; relations of no rows, of whole batches,
-- with a dropped column; a durable table; errors in a parallel worker;
-- another transaction's uncommitted keys; a relation that stops
-- qualifying between planning and execution; a cancel.  Shared tables are
-- created in dblink session a (autocommit); sessions b and c hold
-- transactions and run the statements that wait or are canceled.
BEGIN;
SELECT plan(52);

\ir include/shared_sessions.psql
\ir include/forced_parallel.psql
\ir include/new_keys.psql

SET LOCAL cpht.batch_size = 1024;

-- 60000 rows, 25000 distinct ids from 1, 500 rows without an id
CREATE TABLE nkr_src AS
	SELECT CASE WHEN g % 120 = 0 THEN NULL ELSE (g * 7919 % 25000 + 1)::bigint END AS id
	FROM generate_series(1, 60000) g;
ANALYZE nkr_src;

CREATE FUNCTION pg_temp.run_tests() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	why text := pg_temp.why_skip();
	new_ids bigint := (SELECT count(DISTINCT id) FROM nkr_src);
	h int;
	q text;
	n bigint;
	row_key bigint;
	r text;
	c refcursor;
	a_pid int;
	c_pid int;
	want bigint;
	whole float8;
	ms int;
	canceled int;
	t0 timestamptz;
BEGIN
	IF why IS NOT NULL THEN
		RETURN NEXT skip(why, 52);
		RETURN;
	END IF;
	PERFORM pg_temp.connect('a');
	PERFORM pg_temp.forced(2);

	-- A set-returning SQL function called in a select list runs its query
	-- one row per call (the executor asked for one row, so without
	-- workers, and shut down after each): every new key still comes back,
	-- once.
	h := pg_temp.shared('nkr_lazy');
	q := format('SELECT k FROM cpht_fop_new_relation(%s, %L) k', h, 'nkr_src');
	RETURN NEXT ok(pg_temp.has_node(pg_temp.plan(q)), 'the new keys themselves: the node');
	EXECUTE format('CREATE FUNCTION pg_temp.lazy_keys() RETURNS SETOF bigint LANGUAGE sql AS %L', q);
	RETURN NEXT is((SELECT count(*) || '/' || count(DISTINCT k) || '/' || sum(k)
					FROM (SELECT pg_temp.lazy_keys() AS k) s),
		(SELECT count(DISTINCT id) || '/' || count(DISTINCT id) || '/' || sum(DISTINCT id) FROM nkr_src),
		'from a SQL function, one row per call: each new id once');
	RETURN NEXT is(cpht_count(h), new_ids, 'every id is in the table');
	DROP FUNCTION pg_temp.lazy_keys();
	-- and where the caller stops after three rows, every key goes in
	h := pg_temp.shared('nkr_lazy_limit');
	EXECUTE format('CREATE FUNCTION pg_temp.lazy_keys() RETURNS SETOF bigint LANGUAGE sql AS %L',
				   format('SELECT k FROM cpht_fop_new_relation(%s, %L) k', h, 'nkr_src'));
	RETURN NEXT is((SELECT count(*) FROM (SELECT pg_temp.lazy_keys() LIMIT 3) s), 3::bigint,
		'a SQL function read for three rows: three new ids');
	RETURN NEXT is(cpht_count(h), new_ids, 'and every id is in the table');
	DROP FUNCTION pg_temp.lazy_keys();

	-- PL/pgSQL: RETURN QUERY runs the plan with its workers; a FOR loop
	-- through a cursor that stops early leaves no key out
	h := pg_temp.shared('nkr_return_query');
	EXECUTE format('CREATE FUNCTION pg_temp.returned_keys() RETURNS SETOF bigint LANGUAGE plpgsql AS %L',
				   format('BEGIN RETURN QUERY SELECT k FROM cpht_fop_new_relation(%s, %L) k; END', h, 'nkr_src'));
	RETURN NEXT is((SELECT count(DISTINCT k) || '/' || count(*) FROM pg_temp.returned_keys() k),
		new_ids || '/' || new_ids, 'RETURN QUERY: each new id once');
	DROP FUNCTION pg_temp.returned_keys();
	h := pg_temp.shared('nkr_for_loop');
	n := 0;
	FOR row_key IN EXECUTE format('SELECT k FROM cpht_fop_new_relation(%s, %L) k', h, 'nkr_src') LOOP
		n := n + 1;
		EXIT WHEN n = 10;
	END LOOP;
	RETURN NEXT is(cpht_count(h), new_ids, 'a FOR loop left after ten rows: every id is in the table');

	-- a scrollable cursor reads its rows again backwards, the same rows
	h := pg_temp.shared('nkr_scroll');
	OPEN c SCROLL FOR EXECUTE format('SELECT k FROM cpht_fop_new_relation(%s, %L) k', h, 'nkr_src');
	MOVE FORWARD ALL FROM c;
	GET DIAGNOSTICS n = ROW_COUNT;
	RETURN NEXT is(n, new_ids, 'a scrollable cursor: every new id forwards');
	MOVE BACKWARD ALL FROM c;
	GET DIAGNOSTICS n = ROW_COUNT;
	RETURN NEXT is(n, new_ids, '(and the same rows backwards)');
	CLOSE c;

	-- EXPLAIN ANALYZE runs the node in the workers
	h := pg_temp.shared('nkr_explain');
	q := format('SELECT count(*) FROM cpht_fop_new_relation(%s, %L)', h, 'nkr_src');
	r := pg_temp.plan(q, 'ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF');
	RETURN NEXT ok(pg_temp.has_node(r) AND r ~ 'Workers Launched: 2', 'EXPLAIN ANALYZE: the node with its workers');
	RETURN NEXT is(cpht_count(h), new_ids, 'every id is in the table');
	RETURN NEXT is(pg_temp.value(q), '0', 'so nothing is new after it');

	-- relations of no rows, of one batch, of whole batches
	CREATE TABLE nkr_empty (id bigint);
	CREATE TABLE nkr_one (id bigint);
	INSERT INTO nkr_one SELECT g FROM generate_series(1, 1024) g;
	CREATE TABLE nkr_two (id bigint);
	INSERT INTO nkr_two SELECT g FROM generate_series(1, 2048) g;
	h := pg_temp.shared('nkr_sizes');
	q := format('SELECT count(*) FROM cpht_fop_new_relation(%s, %L)', h, 'nkr_empty');
	RETURN NEXT ok(pg_temp.has_node(pg_temp.plan(q)), 'an empty relation: the node');
	RETURN NEXT is(pg_temp.value(q), '0', 'no new id');
	RETURN NEXT is(pg_temp.value(format('SELECT count(*) FROM cpht_fop_new_relation(%s, %L)', h, 'nkr_one')),
		'1024', 'a relation of one batch: every id');
	RETURN NEXT is(pg_temp.value(format('SELECT count(*) FROM cpht_fop_new_relation(%s, %L)', h, 'nkr_two')),
		'1024', 'two batches, half of them put before: the other half');

	-- a durable table
	h := pg_temp.shared('nkr_durable', ', durable => true');
	q := format('SELECT count(*) FROM cpht_fop_new_relation(%s, %L)', h, 'nkr_src');
	RETURN NEXT ok(pg_temp.has_node(pg_temp.plan(q)), 'a durable table: the node');
	RETURN NEXT is(pg_temp.value(q), new_ids::text, 'every new id');
	RETURN NEXT is(cpht_count(h), new_ids, 'every id is in the table');

	-- sorted, the first hundred (whichever plan: every key still goes in)
	h := pg_temp.shared('nkr_sorted');
	q := format('SELECT array_agg(k) FROM (SELECT k FROM cpht_fop_new_relation(%s, %L) k ORDER BY k LIMIT 100) s',
				h, 'nkr_src');
	RETURN NEXT is(pg_temp.value(q), (SELECT array_agg(g)::text FROM generate_series(1, 100) g),
		'the first new keys in order: ids 1 to 100');
	RETURN NEXT is(cpht_count(h), new_ids, 'every id is in the table');

	-- a key column after a dropped column; a NULL relation
	CREATE TABLE nkr_dropped (junk int, id bigint);
	INSERT INTO nkr_dropped SELECT g, g FROM generate_series(1, 3000) g;
	ALTER TABLE nkr_dropped DROP COLUMN junk;
	h := pg_temp.shared('nkr_dropped');
	q := format('SELECT count(*) FROM cpht_fop_new_relation(%s, %L)', h, 'nkr_dropped');
	RETURN NEXT ok(pg_temp.has_node(pg_temp.plan(q)), 'after a dropped column: the node');
	RETURN NEXT is(pg_temp.value(q), '3000', 'every id');
	q := format('SELECT count(*) FROM cpht_fop_new_relation(%s, NULL)', h);
	RETURN NEXT is(pg_temp.value(q) || ' ' || pg_temp.has_node(pg_temp.plan(q)), '0 false',
		'a NULL relation: no row, by the function scan');

	-- cpht.max_memory too small for a parallel worker's stream: 53400
	PERFORM set_config('parallel_leader_participation', 'off', true);
	h := pg_temp.shared('nkr_memory');
	q := format('SELECT count(*) FROM cpht_fop_new_relation(%s, %L)', h, 'nkr_src');
	PERFORM set_config('cpht.max_memory', '20kB', true);
	RETURN NEXT throws_ok(q, '53400', NULL, 'a worker''s stream over cpht.max_memory: 53400');
	PERFORM set_config('cpht.max_memory', '0', true);
	RETURN NEXT is(cpht_count(h), 0::bigint, 'no key went in');
	PERFORM set_config('parallel_leader_participation', 'on', true);

	-- A key outside the table's key_bits, met by a parallel worker: its
	-- error reaches the caller, nothing of the call stays, no worker lives
	-- on.
	PERFORM set_config('parallel_leader_participation', 'off', true);
	h := pg_temp.shared('nkr_bits', ', key_bits => 14');
	q := format('SELECT count(*) FROM cpht_fop_new_relation(%s, %L)', h, 'nkr_src');
	RETURN NEXT ok(pg_temp.has_node(pg_temp.plan(q)), 'a table of 14-bit keys: the node');
	RETURN NEXT throws_ok(q, '22003', NULL, 'a worker meets id 16384: 22003');
	RETURN NEXT is(cpht_count(h), 0::bigint, 'the transactional table holds none of the keys');
	PERFORM pg_stat_clear_snapshot();
	RETURN NEXT is((SELECT count(*) FROM pg_stat_activity WHERE leader_pid = pg_backend_pid()), 0::bigint,
		'no parallel worker lives on');
	RETURN NEXT is(pg_temp.value(format('SELECT count(*) FROM cpht_fop_new_relation(%s, %L) WHERE true',
										h, 'nkr_one')), '1024', 'the next call answers right');
	PERFORM set_config('parallel_leader_participation', 'on', true);

	-- committed relations and the statements of other sessions
	PERFORM dblink_exec('a', 'CREATE TABLE nkr_src_a AS SELECT (g * 7919 % 25000 + 1)::bigint AS id FROM generate_series(1, 60000) g');
	PERFORM dblink_exec('a', 'ANALYZE nkr_src_a');
	PERFORM pg_temp.forced_in('a');
	a_pid := (SELECT v FROM dblink('a', 'SELECT pg_backend_pid()') AS t(v int));
	PERFORM pg_temp.connect('b');

	-- Another transaction's uncommitted keys: the node's participants wait
	-- for it, then see its keys as committed or rolled back; each id is
	-- new exactly once across the two.
	h := pg_temp.shared('nkr_wait_commit');
	PERFORM dblink_exec('b', 'BEGIN');
	RETURN NEXT is((SELECT v FROM dblink('b', format('SELECT cpht_put(%s, ARRAY(SELECT g FROM generate_series(1, 25000, 50) g))',
		pg_temp.handle_in('b', 'nkr_wait_commit'))) AS t(v bigint)), 500::bigint,
		'another transaction puts 500 of the ids, uncommitted');
	q := format('SELECT count(*) FROM cpht_fop_new_relation(%s, %L)', pg_temp.handle_in('a', 'nkr_wait_commit'), 'nkr_src_a');
	RETURN NEXT ok((SELECT string_agg(v, E'\n') FROM dblink('a', 'EXPLAIN (COSTS OFF) ' || q) AS t(v text))
				   ~ 'Parallel Custom Scan \(cpht new keys\)', 'the node, in session a');
	PERFORM dblink_send_query('a', q);
	RETURN NEXT ok(pg_temp.await_lock_wait(a_pid, 'group'), 'waits for that transaction');
	PERFORM dblink_exec('b', 'COMMIT');
	RETURN NEXT is(pg_temp.result('a'), '24500', 'which commits: its ids are not new');
	RETURN NEXT is(cpht_count(h), 25000::bigint, 'every id is in the table once');

	h := pg_temp.shared('nkr_wait_rollback');
	PERFORM dblink_exec('b', 'BEGIN');
	PERFORM pg_temp.remote('b', format('SELECT cpht_put(%s, ARRAY(SELECT g FROM generate_series(1, 25000, 50) g))',
		pg_temp.handle_in('b', 'nkr_wait_rollback')));
	PERFORM dblink_send_query('a', format('SELECT count(*) FROM cpht_fop_new_relation(%s, %L)',
		pg_temp.handle_in('a', 'nkr_wait_rollback'), 'nkr_src_a'));
	RETURN NEXT ok(pg_temp.await_lock_wait(a_pid, 'group'), 'another transaction''s keys: waits for it');
	PERFORM dblink_exec('b', 'ROLLBACK');
	RETURN NEXT is(pg_temp.result('a'), '25000', 'which rolls back: every id is new');

	-- A relation that gains an inheritance child while a cached plan with
	-- the node waits for its lock: the leader reads it through the
	-- query route, children included, the workers return nothing.
	h := pg_temp.shared('nkr_fallback');
	PERFORM dblink_exec('a', format('PREPARE nkr_cached AS SELECT count(*) FROM cpht_fop_new_relation(%s, %L)',
		pg_temp.handle_in('a', 'nkr_fallback'), 'nkr_src_a'));
	RETURN NEXT ok((SELECT string_agg(v, E'\n') FROM dblink('a', 'EXPLAIN (COSTS OFF) EXECUTE nkr_cached') AS t(v text))
				   ~ 'Parallel Custom Scan \(cpht new keys\)', 'a cached plan with the node');
	PERFORM dblink_exec('b', 'BEGIN');
	PERFORM dblink_exec('b', 'LOCK TABLE nkr_src_a IN ACCESS EXCLUSIVE MODE');
	PERFORM dblink_exec('b', 'CREATE TABLE nkr_child () INHERITS (nkr_src_a)');
	PERFORM dblink_exec('b', 'INSERT INTO nkr_child SELECT g FROM generate_series(25001, 25100) g');
	PERFORM dblink_send_query('a', 'EXECUTE nkr_cached');
	RETURN NEXT ok(pg_temp.await_wait(a_pid, 'Lock'), 'its run waits for the relation');
	PERFORM dblink_exec('b', 'COMMIT');
	RETURN NEXT is(pg_temp.result('a'), '25100', 'then reads the child too: every new id once');
	RETURN NEXT is(cpht_count(h), 25100::bigint, 'every id is in the table');
	PERFORM dblink_exec('a', 'DEALLOCATE nkr_cached');
	PERFORM dblink_exec('a', 'DROP TABLE nkr_child');

	-- The same where the leader reads no rows itself: it cannot return
	-- the query route's keys, so the run fails before it puts any.
	PERFORM dblink_exec('a', 'SET parallel_leader_participation = off');
	PERFORM dblink_exec('a', 'CREATE TABLE nkr_src_w AS SELECT * FROM nkr_src_a');
	PERFORM dblink_exec('a', 'ANALYZE nkr_src_w');
	h := pg_temp.shared('nkr_fallback_workers');
	PERFORM dblink_exec('a', format('PREPARE nkr_cached AS SELECT count(*) FROM cpht_fop_new_relation(%s, %L)',
		pg_temp.handle_in('a', 'nkr_fallback_workers'), 'nkr_src_w'));
	RETURN NEXT ok((SELECT string_agg(v, E'\n') FROM dblink('a', 'EXPLAIN (COSTS OFF) EXECUTE nkr_cached') AS t(v text))
				   ~ 'Parallel Custom Scan \(cpht new keys\)', 'a cached plan with the node, without the leader');
	PERFORM dblink_exec('b', 'BEGIN');
	PERFORM dblink_exec('b', 'LOCK TABLE nkr_src_w IN ACCESS EXCLUSIVE MODE');
	PERFORM dblink_exec('b', 'CREATE TABLE nkr_child () INHERITS (nkr_src_w)');
	PERFORM dblink_send_query('a', 'EXECUTE nkr_cached');
	PERFORM pg_temp.await_wait(a_pid, 'Lock');
	PERFORM dblink_exec('b', 'COMMIT');
	RETURN NEXT is(pg_temp.result('a'), '0A000', 'without the leader: 0A000');
	RETURN NEXT is(cpht_count(h), 0::bigint, 'no key went in');
	RETURN NEXT is((SELECT v FROM dblink('a', 'EXECUTE nkr_cached') AS t(v bigint)), 25000::bigint,
		'the next run, planned again, answers right');
	RETURN NEXT is(cpht_count(h), 25000::bigint, '(and puts every id)');
	PERFORM dblink_exec('a', 'DEALLOCATE nkr_cached');
	PERFORM dblink_exec('a', 'DROP TABLE nkr_child, nkr_src_w');
	PERFORM dblink_exec('a', 'SET parallel_leader_participation = on');

	-- A cancel part way through a run of the node (statement_timeout in
	-- session c, at half the time a whole run took there, less if that run
	-- ends first): 57014, the transactional table keeps none of its keys,
	-- no parallel worker lives on, the next run answers right.
	PERFORM pg_temp.connect('c');
	PERFORM pg_temp.forced_in('c');
	c_pid := (SELECT v FROM dblink('c', 'SELECT pg_backend_pid()') AS t(v int));
	PERFORM dblink_exec('c', $q$CREATE TABLE nkr_big AS
		SELECT (g * 2654435761 % 2000000)::bigint AS id FROM generate_series(1, 1000000) g$q$);
	PERFORM dblink_exec('c', 'ANALYZE nkr_big');
	want := (SELECT v FROM dblink('c', 'SELECT count(DISTINCT id) FROM nkr_big WHERE id NOT IN (1, 2, 3)') AS t(v bigint));
	h := pg_temp.shared('nkr_cancel_whole', capacity => 2000000);
	q := format('SELECT count(*) FROM cpht_fop_new_relation(%s, %L)', pg_temp.handle_in('c', 'nkr_cancel_whole'), 'nkr_big');
	RETURN NEXT ok((SELECT string_agg(v, E'\n') FROM dblink('c', 'EXPLAIN (COSTS OFF) ' || q) AS t(v text))
				   ~ 'Parallel Custom Scan \(cpht new keys\)', 'a count over a million rows: the node, in session c');
	t0 := clock_timestamp();
	PERFORM pg_temp.remote('c', q);
	whole := extract(epoch FROM clock_timestamp() - t0) * 1000;
	FOREACH ms IN ARRAY ARRAY[greatest(whole / 2, 1), greatest(whole / 4, 1), greatest(whole / 8, 1)]::int[] LOOP
		h := pg_temp.shared('nkr_cancel_' || ms, capacity => 2000000);
		PERFORM pg_temp.remote('a', format('SELECT cpht_put(cpht_open(%L), ARRAY[1, 2, 3]::bigint[])',
										   'nkr_cancel_' || ms));
		q := format('SELECT count(*) FROM cpht_fop_new_relation(%s, %L)', pg_temp.handle_in('c', 'nkr_cancel_' || ms), 'nkr_big');
		IF pg_temp.canceled_by_timeout('c', q, ms) THEN
			canceled := ms;
		END IF;
		EXIT WHEN canceled IS NOT NULL OR ms = greatest(whole / 8, 1)::int;
		PERFORM pg_temp.remote('a', format('SELECT cpht_drop(cpht_open(%L))', 'nkr_cancel_' || ms));
	END LOOP;
	RETURN NEXT ok(canceled IS NOT NULL,
		format('a run canceled by statement_timeout (%s ms of %s): 57014', canceled, round(whole)));
	RETURN NEXT is(cpht_count(h), 3::bigint, 'the transactional table holds none of its keys');
	PERFORM pg_stat_clear_snapshot();
	RETURN NEXT is((SELECT count(*) FROM pg_stat_activity WHERE leader_pid = c_pid), 0::bigint,
		'no parallel worker of it lives on');
	RETURN NEXT is((SELECT v FROM dblink('c', q) AS t(v bigint)), want, 'the session''s next run answers right');
	PERFORM pg_temp.remote('a', format('SELECT cpht_drop(cpht_open(%L))', t.name))
	FROM unnest(ARRAY['nkr_cancel_whole', 'nkr_cancel_' || ms]) AS t(name);
	PERFORM dblink_exec('c', 'DROP TABLE nkr_big');
	PERFORM dblink_disconnect('c');

	PERFORM dblink_exec('a', 'DROP TABLE nkr_src_a');
	PERFORM pg_temp.remote('a', format('SELECT cpht_drop(cpht_open(%L))', t.name))
	FROM unnest(ARRAY['nkr_lazy', 'nkr_lazy_limit', 'nkr_return_query', 'nkr_for_loop', 'nkr_scroll',
					  'nkr_explain', 'nkr_sizes', 'nkr_durable', 'nkr_sorted', 'nkr_dropped', 'nkr_memory', 'nkr_bits', 'nkr_wait_commit',
					  'nkr_wait_rollback', 'nkr_fallback', 'nkr_fallback_workers']) AS t(name);
	PERFORM dblink_disconnect('b');
	PERFORM dblink_disconnect('a');
END $$;

SELECT pg_temp.run_tests();

SELECT * FROM finish();
ROLLBACK;
