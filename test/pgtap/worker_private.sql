-- Private tables in the cpht worker (cpht preloaded):
--   - cpht.placement = worker puts a CPU table there, cpht_info and
--     cpht_tables say so, and cpht_worker_info counts it;
--   - the worker frees a backend's private tables when the backend ends,
--     normally or by pg_terminate_backend, and at cpht_drop_all;
--   - cpht.device = gpu/auto is answered by the worker's GPU probe: no
--     backend of a preloaded server probes the GPU itself (that path raises
--     XX000), so without a GPU in the worker it fails with 55000;
--   - cpht.max_memory counts the undo log a worker table grows and, on the
--     GPU, a worker table's transfer buffers;
--   - on the GPU: a sticky device fault restarts the worker and the call
--     gets 58000.
-- A worker that exits losing its private tables is checked by
-- test/run-tests.sh (it signals the worker, which SQL cannot).
BEGIN;
SELECT plan(16);

\ir include/shared_sessions.psql

-- dblink session `conn` whose private tables live in the worker.
CREATE FUNCTION pg_temp.connect_worker(conn text, device text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	PERFORM dblink_connect(conn, format('dbname=%s port=%s host=%s options=''-c cpht.device=%s -c cpht.placement=worker''',
		current_database(), current_setting('port'),
		split_part(current_setting('unix_socket_directories'), ',', 1), device));
	RETURN conn;
END $$;

CREATE FUNCTION pg_temp.one(conn text, sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	v text;
BEGIN
	SELECT t.v INTO v FROM dblink(conn, sql) AS t(v text);
	RETURN v;
END $$;

-- Private tables the worker holds, once it equals `want` (false after 15 s).
CREATE FUNCTION pg_temp.await_private(want int) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	t0 timestamptz := clock_timestamp();
BEGIN
	LOOP
		IF (cpht_worker_info()->>'private_tables')::int = want THEN
			RETURN true;
		END IF;
		IF clock_timestamp() > t0 + interval '15 seconds' THEN
			RETURN false;
		END IF;
		PERFORM pg_sleep(0.01);
	END LOOP;
END $$;

-- A running worker of a later start than `starts` (false after 15 s).
CREATE FUNCTION pg_temp.await_worker(starts bigint) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	t0 timestamptz := clock_timestamp();
BEGIN
	LOOP
		IF (cpht_worker_info()->>'worker_starts')::bigint > starts AND
		   cpht_worker_info()->>'worker_pid' IS NOT NULL THEN
			RETURN true;
		END IF;
		IF clock_timestamp() > t0 + interval '15 seconds' THEN
			RETURN false;
		END IF;
		PERFORM pg_sleep(0.01);
	END LOOP;
END $$;

CREATE FUNCTION pg_temp.private_tests() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	why text := pg_temp.why_skip();
	gpu boolean;
	base int;
	h text;
	p int;
	starts bigint;
	bytes bigint;
BEGIN
	IF why IS NOT NULL THEN
		RETURN NEXT skip(why, 16);
		RETURN;
	END IF;
	gpu := coalesce((cpht_worker_info()->'gpu'->>'usable')::boolean, false);
	base := (cpht_worker_info()->>'private_tables')::int;

	-- placement = worker: a CPU table in the worker
	PERFORM pg_temp.connect_worker('p', 'cpu');
	h := pg_temp.one('p', $q$SELECT cpht_create(10000, transactional => false)$q$);
	RETURN NEXT is(pg_temp.one('p', format($q$SELECT cpht_info(%s)->>'placement'$q$, h)), 'worker',
		'with cpht.placement = worker a private CPU table lives in the worker (cpht_info)');
	RETURN NEXT is(pg_temp.one('p', $q$SELECT string_agg(placement, ',') FROM cpht_tables() WHERE NOT shared$q$), 'worker',
		'cpht_tables says so');
	RETURN NEXT is((cpht_worker_info()->>'private_tables')::int, base + 1, 'cpht_worker_info counts it');
	RETURN NEXT is(pg_temp.one('p', format($q$SELECT cpht_fop(%1$s, '{1,2,3}')::text || cpht_put(%1$s, '{3,4}') || cpht_find(%1$s, '{4,5}')::text || cpht_delete(%1$s, '{1}')::text || cpht_count(%1$s)$q$, h)),
		'{t,t,t}1{t,f}{t}3', 'fop, put, find, delete and count work on it');
	-- a rolled-back subtransaction is undone by the worker's undo log
	h := pg_temp.one('p', $q$SELECT cpht_create(10000)$q$);
	PERFORM dblink_exec('p', format($q$BEGIN; SELECT cpht_put(%1$s, '{1}'); SAVEPOINT s; SELECT cpht_put(%1$s, '{2,3}'); ROLLBACK TO s; SELECT cpht_put(%1$s, '{4}'); COMMIT$q$, h));
	RETURN NEXT is(pg_temp.one('p', format($q$SELECT cpht_find(%s, '{1,2,3,4}')::text$q$, h)), '{t,f,f,t}',
		'ROLLBACK TO SAVEPOINT undoes a worker table''s keys of the subtransaction only');
	PERFORM pg_temp.remote('p', $q$SELECT cpht_drop_all()$q$);
	RETURN NEXT ok(pg_temp.await_private(base), 'cpht_drop_all frees them in the worker');

	-- a session that ends, normally or terminated, leaves none behind
	PERFORM pg_temp.remote('p', $q$SELECT cpht_create(1000) + cpht_create(1000, 'cuckoo')$q$);
	RETURN NEXT ok(pg_temp.await_private(base + 2), 'two more private tables in the worker');
	PERFORM dblink_disconnect('p');
	RETURN NEXT ok(pg_temp.await_private(base), 'a session that disconnects leaves no private table in the worker');
	PERFORM pg_temp.connect_worker('p', 'cpu');
	p := pg_temp.one('p', $q$SELECT pg_backend_pid()$q$)::int;
	PERFORM pg_temp.remote('p', $q$SELECT cpht_create(1000) + cpht_create(1000)$q$);
	PERFORM pg_terminate_backend(p);
	RETURN NEXT ok(pg_temp.await_private(base), 'nor does a session ended by pg_terminate_backend');
	PERFORM dblink_disconnect('p');

	-- the GPU is the worker's: cpht.device = gpu asks it
	PERFORM pg_temp.connect('g');
	IF gpu THEN
		RETURN NEXT is(pg_temp.one('g', $q$SET cpht.device = gpu; SELECT cpht_info(cpht_create(1000))->>'placement'$q$), 'worker',
			'cpht.device = gpu puts a private table in the worker, whatever cpht.placement says');
		RETURN NEXT is(pg_temp.one('g', $q$SET cpht.device = auto; SELECT cpht_info(cpht_create(1000))->>'device'$q$), 'gpu',
			'cpht.device = auto uses the worker''s GPU');
	ELSE
		BEGIN
			PERFORM * FROM dblink('g', 'SET cpht.device = gpu; SELECT cpht_create(1000)') AS t(h int);
			RETURN NEXT fail('without a GPU in the worker, cpht.device = gpu fails with 55000 and the worker''s reason');
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS why = PG_EXCEPTION_DETAIL;
			RETURN NEXT ok(SQLSTATE = '55000' AND SQLERRM LIKE '%no usable GPU for cpht%' AND why LIKE 'The cpht worker has no usable GPU: %',
				'without a GPU in the worker, cpht.device = gpu fails with 55000 and the worker''s reason (not a probe in the backend): '
				|| SQLSTATE || ' ' || SQLERRM || ' / ' || coalesce(why, ''));
		END;
		RETURN NEXT is(pg_temp.one('g', $q$SET cpht.device = auto; SELECT cpht_info(cpht_create(1000))->>'placement'$q$), 'backend',
			'cpht.device = auto without a GPU in the worker keeps a CPU table in the backend');
	END IF;
	-- whatever cpht.device said, the session's backend never loaded CUDA's
	-- driver library: only the worker did, if anyone
	p := pg_temp.one('g', $q$SELECT pg_backend_pid()$q$)::int;
	RETURN NEXT ok(position('libcuda' IN pg_read_file('/proc/' || p || '/maps')) = 0,
		'the backend of a session that asked for the GPU has no libcuda mapped');
	PERFORM dblink_disconnect('g');

	-- cpht.max_memory counts what the worker's kernels take for the table
	PERFORM pg_temp.connect_worker('m', 'cpu');
	h := pg_temp.one('m', $q$SELECT cpht_create(200000)$q$);
	bytes := pg_temp.one('m', format($q$SELECT cpht_info(%s)->>'bytes'$q$, h))::bigint;
	PERFORM dblink_exec('m', format('SET cpht.max_memory = %s', bytes / 1024 + 256));
	RETURN NEXT throws_ok(format($q$SELECT * FROM dblink('m', 'BEGIN; SELECT cpht_put(%s, (SELECT array_agg(g) FROM generate_series(1, 150000) g)); COMMIT') AS t(v text)$q$, h),
		'53400', NULL, 'a worker table''s undo log counts against cpht.max_memory (53400)');
	PERFORM dblink_exec('m', 'ROLLBACK');
	RETURN NEXT is(pg_temp.one('m', format($q$SELECT cpht_count(%s)$q$, h)), '0', 'and the refused call left nothing');

	-- a sticky device fault: the worker restarts, the call gets 58000
	IF gpu THEN
		-- a GPU table's transfer buffers (over 2 MB) count against the cap,
		-- as they do for a GPU table in a backend
		PERFORM dblink_exec('m', 'SET cpht.device = gpu');
		RETURN NEXT throws_ok($q$SELECT * FROM dblink('m', 'SELECT cpht_create(1000)') AS t(v text)$q$,
			'53400', NULL, 'a worker GPU table''s transfer buffers count against cpht.max_memory (53400)');
		PERFORM dblink_exec('m', 'RESET cpht.max_memory');
		h := pg_temp.one('m', $q$SELECT cpht_create(1000)$q$);
		starts := (cpht_worker_info()->>'worker_starts')::bigint;
		PERFORM dblink_exec('m', 'SET cpht.inject_device_fault = on');
		RETURN NEXT throws_ok(format($q$SELECT * FROM dblink('m', 'SELECT cpht_fop(%s, ''{1,2}'')') AS t(v text)$q$, h),
			'58000', NULL, 'a sticky device fault answers the call with 58000, and the worker restarts');
		PERFORM dblink_exec('m', 'RESET cpht.inject_device_fault');
		PERFORM pg_temp.await_worker(starts);
	ELSE
		RETURN NEXT skip('no usable GPU in the cpht worker: no GPU transfer buffers, no sticky device fault to inject', 2);
	END IF;
	PERFORM dblink_disconnect('m');
END $$;

SELECT * FROM pg_temp.private_tests();

SELECT * FROM finish();
ROLLBACK;
