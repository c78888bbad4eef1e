-- cpht_fop_agg over shared tables in parallel workers (forced parallel
-- plans): only queries whose aggregates name shared tables go parallel;
-- the answers are those of a serial plan; the workers act for the
-- leader's transaction (its rollback, savepoints and commit take their
-- keys, others wait for the leader, and the workers wait for others); a
-- canceled parallel query leaves nothing.  The leader runs in dblink
-- session a (autocommit, so it can create shared tables), another
-- transaction in session b.  Session a plans cpht_fop_agg over a whole
-- table as the aggregate (cpht.fop_agg_relation_scan off).
BEGIN;
SELECT plan(24);

\ir include/shared_sessions.psql

-- One value of a query in a dblink session, as text.
CREATE FUNCTION pg_temp.value(conn text, sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	RETURN (SELECT v FROM dblink(conn, sql) AS t(v text));
END $$;

-- The plan of a query in session a, as text.
CREATE FUNCTION pg_temp.plan_of(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	RETURN (SELECT string_agg(v, E'\n') FROM dblink('a', 'EXPLAIN (COSTS OFF) ' || sql) AS t(v text));
END $$;

CREATE FUNCTION pg_temp.parallel_tests() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	why text := pg_temp.why_skip();
	pa int;
	pb int;
	hp int;
	ha int[];
	agg text := 'SELECT cpht_fop_agg(%s, id)::text FROM par_staging';
	r text;
	launched int;
BEGIN
	IF why IS NOT NULL THEN
		RETURN NEXT skip(why, 24);
		RETURN;
	END IF;
	PERFORM pg_temp.connect('a');
	PERFORM pg_temp.connect('b');
	PERFORM dblink_exec('a', 'SET statement_timeout = ''60s''');
	-- the aggregate in parallel workers is what this file checks, not the
	-- relation's scan that cpht_fop_agg over a whole table becomes
	PERFORM dblink_exec('a', 'SET cpht.fop_agg_relation_scan = off');
	PERFORM dblink_exec('b', 'SET statement_timeout = ''60s''');
	pa := pg_temp.value('a', 'SELECT pg_backend_pid()')::int;
	pb := pg_temp.value('b', 'SELECT pg_backend_pid()')::int;

	-- 60000 rows, 25000 distinct ids; batches small enough that every
	-- worker sends several
	PERFORM dblink_exec('a', $q$CREATE TABLE par_staging AS
		SELECT (g * 7919 % 25000)::bigint AS id, g AS v FROM generate_series(1, 60000) g$q$);
	PERFORM dblink_exec('a', 'ANALYZE par_staging');
	FOR t IN 1..9 LOOP
		ha[t] := pg_temp.value('a', format('SELECT cpht_create(100000, name => %L)', 'par_' || t))::int;
	END LOOP;
	hp := pg_temp.value('a', 'SELECT cpht_create(100000)')::int;
	PERFORM dblink_exec('a', 'SET parallel_setup_cost = 0');
	PERFORM dblink_exec('a', 'SET parallel_tuple_cost = 0');
	PERFORM dblink_exec('a', 'SET min_parallel_table_scan_size = 0');
	PERFORM dblink_exec('a', 'SET max_parallel_workers_per_gather = 2');
	PERFORM dblink_exec('a', 'SET force_parallel_mode = on');
	PERFORM dblink_exec('a', 'SET cpht.batch_size = 1024');

	-- which queries go parallel
	PERFORM pg_temp.value('a', format('SELECT set_config(''cpht_test.h1'', %L, false)', ha[1]));
	r := pg_temp.plan_of('SELECT cpht_fop_agg(current_setting(''cpht_test.h1'')::int, id) FROM par_staging');
	RETURN NEXT ok(r NOT LIKE '%Gather%', 'an aggregate whose handle is not a constant is planned serially');
	r := pg_temp.plan_of(format('SELECT cpht_fop_agg(%s, id) FROM par_staging', ha[1]));
	RETURN NEXT ok(r LIKE '%Gather%' AND r LIKE '%Partial Aggregate%', 'over a shared table''s handle the aggregate runs in parallel workers');
	r := pg_temp.plan_of(format('SELECT cpht_fop_agg(%s, id) FROM par_staging', hp));
	RETURN NEXT ok(r NOT LIKE '%Gather%', 'over a private table it is planned serially');
	PERFORM dblink_exec('a', 'PREPARE par_q(int) AS SELECT cpht_fop_agg($1, id) FROM par_staging');
	r := pg_temp.plan_of(format('EXECUTE par_q(%s)', ha[1]));
	RETURN NEXT ok(r LIKE '%Gather%', 'a bound parameter naming a shared table goes parallel');
	r := pg_temp.plan_of(format('EXECUTE par_q(%s)', hp));
	RETURN NEXT ok(r NOT LIKE '%Gather%', 'a bound parameter naming a private table does not');

	-- the same answers as a serial plan; workers alone do the work
	PERFORM dblink_exec('a', 'SET parallel_leader_participation = off');
	r := pg_temp.value('a', format('EXPLAIN (ANALYZE, FORMAT JSON) SELECT cpht_fop_agg(%s, id) FROM par_staging', ha[1]));
	launched := (SELECT sum(w::text::int) FROM jsonb_path_query(r::jsonb, '$.**."Workers Launched"') w);
	RETURN NEXT ok(launched >= 1, format('the parallel plan launched workers (%s)', launched));
	RETURN NEXT is(cpht_count(cpht_open('par_1')), 25000::bigint, 'the workers put every distinct id, once');
	-- (the relation is read in session b only: a lock this transaction held
	-- on it would keep a from dropping it at the end)
	RETURN NEXT is(pg_temp.value('b', $q$SELECT bool_and(f)::text FROM unnest(cpht_find(cpht_open('par_1'),
		(SELECT array_agg(DISTINCT id) FROM par_staging))) f$q$), 'true', 'every id of the relation is in the table');
	RETURN NEXT is(pg_temp.value('a', format(agg, ha[1])), '0', 'a second parallel run finds no new id');
	-- two aggregates naming the higher handle first: a worker registers
	-- each under the leader's number
	RETURN NEXT is(pg_temp.value('a', format('SELECT (cpht_fop_agg(%s, id) + cpht_fop_agg(%s, id))::text FROM par_staging',
		ha[9], ha[8])), '50000', 'two aggregates over two shared tables in one parallel query');
	PERFORM dblink_exec('a', 'RESET parallel_leader_participation');
	PERFORM pg_temp.value('a', format('SELECT cpht_put(%s, ARRAY(SELECT generate_series(0, 4999)::bigint))', ha[2]));
	PERFORM pg_temp.value('a', format('SELECT cpht_put(%s, ARRAY(SELECT generate_series(0, 4999)::bigint))', ha[3]));
	RETURN NEXT is(pg_temp.value('a', format(agg, ha[2])), '20000', 'parallel: the new ids of a relation against a table holding some');
	PERFORM dblink_exec('a', 'SET max_parallel_workers_per_gather = 0');
	RETURN NEXT is(pg_temp.value('a', format(agg, ha[3])), '20000', 'serial: the same count');
	PERFORM dblink_exec('a', 'SET max_parallel_workers_per_gather = 2');
	RETURN NEXT is(pg_temp.value('a', format($q$SELECT string_agg(g || ':' || n, ',' ORDER BY g) FROM
			(SELECT id %% 3 AS g, cpht_fop_agg(%s, id) AS n FROM par_staging GROUP BY 1) s$q$, ha[4])),
		pg_temp.value('b', $q$SELECT string_agg(g || ':' || n, ',' ORDER BY g) FROM
			(SELECT id % 3 AS g, count(DISTINCT id) AS n FROM par_staging GROUP BY 1) s$q$),
		'per group, partial aggregates in workers count what a serial plan counts');

	-- the workers' keys are the leader's pending keys
	PERFORM dblink_exec('a', 'SET parallel_leader_participation = off');
	PERFORM dblink_exec('a', 'BEGIN');
	RETURN NEXT is(pg_temp.value('a', format(agg, ha[5])), '25000', 'in a transaction, workers put the keys');
	RETURN NEXT is(cpht_count(cpht_open('par_5')), 0::bigint, 'other transactions do not see the workers'' keys before the leader commits');
	PERFORM dblink_send_query('b', format($q$SELECT cpht_fop(cpht_open(%L), '{7}')::text$q$, 'par_5'));
	RETURN NEXT ok(pg_temp.await_lock_wait(pb), 'a write of a key a worker put waits for the leader''s transaction');
	PERFORM dblink_exec('a', 'ROLLBACK');
	RETURN NEXT is(pg_temp.result('b'), '{t}', 'after the leader rolls back, the key is new to the waiter');
	RETURN NEXT is(cpht_count(cpht_open('par_5')), 1::bigint, 'the leader''s rollback undid every key its workers put');
	PERFORM dblink_exec('a', 'BEGIN');
	PERFORM dblink_exec('a', 'SAVEPOINT s');
	PERFORM pg_temp.value('a', format(agg, ha[5]));
	PERFORM dblink_exec('a', 'ROLLBACK TO SAVEPOINT s');
	RETURN NEXT is(pg_temp.value('a', format('SELECT cpht_count(cpht_open(%L))', 'par_5')), '1',
		'ROLLBACK TO SAVEPOINT undoes the keys workers put after it');
	RETURN NEXT is(pg_temp.value('a', format(agg, ha[5])), '24999', 'and the workers put them again');
	PERFORM dblink_exec('a', 'COMMIT');
	RETURN NEXT is(cpht_count(cpht_open('par_5')), 25000::bigint, 'the leader''s commit keeps its workers'' keys');

	-- the workers wait for other transactions
	PERFORM dblink_exec('b', 'BEGIN');
	PERFORM pg_temp.value('b', format($q$SELECT cpht_fop(cpht_open(%L), '{11}')$q$, 'par_6'));
	PERFORM dblink_send_query('a', format(agg, ha[6]));
	RETURN NEXT ok(pg_temp.await_lock_wait(pa, 'workers'), 'a parallel worker meeting another transaction''s key waits for it');
	PERFORM dblink_exec('b', 'COMMIT');
	RETURN NEXT is(pg_temp.result('a'), '24999', 'and goes on once it committed: the key is not new');

	-- a canceled parallel query leaves nothing
	PERFORM dblink_exec('b', 'BEGIN');
	PERFORM pg_temp.value('b', format($q$SELECT cpht_fop(cpht_open(%L), '{12}')$q$, 'par_7'));
	PERFORM dblink_send_query('a', format(agg, ha[7]));
	PERFORM pg_temp.await_lock_wait(pa, 'workers');
	PERFORM pg_cancel_backend(pa);
	r := pg_temp.result('a');
	PERFORM dblink_exec('b', 'ROLLBACK');
	RETURN NEXT ok(r = '57014' AND cpht_count(cpht_open('par_7')) = 0,
		format('a canceled parallel query gives 57014 (%s) and leaves no key', r));

	PERFORM dblink_exec('a', 'DROP TABLE par_staging');
	FOR t IN 1..9 LOOP
		PERFORM pg_temp.value('a', format('SELECT cpht_drop(cpht_open(%L))', 'par_' || t));
	END LOOP;
	PERFORM dblink_disconnect('a');
	PERFORM dblink_disconnect('b');
END $$;

SELECT pg_temp.parallel_tests();

SELECT * FROM finish();
ROLLBACK;
