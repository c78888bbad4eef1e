-- A session waiting for the cpht worker stays cancelable whatever the
-- worker does: with the worker stopped (SIGSTOP, as a worker busy with a
-- long request of another session or not yet serving after a restart),
-- a call under statement_timeout ends with 57014 at its timeout, and
-- pg_terminate_backend ends a waiting session at once; neither call
-- reaches the table, which answers as before once the worker goes on.
-- Calls run in dblink sessions a and b; this session stops and continues
-- the worker (the server's user may signal it).
BEGIN;
SELECT plan(8);

\ir include/shared_sessions.psql

CREATE FUNCTION pg_temp.signal_worker(sig text, pid int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	-- the program reads its input first: a kill that exited before COPY
	-- wrote would make COPY fail with a broken pipe
	EXECUTE format('COPY (SELECT 1) TO PROGRAM %L', format('cat > /dev/null; kill -%s %s', sig, pid));
END $$;

-- Seconds until dblink session conn is no longer busy, at most `limit_s`
-- (then NULL).
CREATE FUNCTION pg_temp.await_idle(conn text, limit_s float8) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE
	t0 timestamptz := clock_timestamp();
BEGIN
	WHILE dblink_is_busy(conn) = 1 LOOP
		IF clock_timestamp() > t0 + make_interval(secs => limit_s) THEN
			RETURN NULL;
		END IF;
		PERFORM pg_sleep(0.005);
	END LOOP;
	RETURN extract(epoch FROM clock_timestamp() - t0);
END $$;

-- Seconds until process p has left pg_stat_activity, at most `limit_s`
-- (then NULL).
CREATE FUNCTION pg_temp.await_exit(p int, limit_s float8) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE
	t0 timestamptz := clock_timestamp();
BEGIN
	LOOP
		PERFORM pg_stat_clear_snapshot();
		EXIT WHEN NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = p);
		IF clock_timestamp() > t0 + make_interval(secs => limit_s) THEN
			RETURN NULL;
		END IF;
		PERFORM pg_sleep(0.005);
	END LOOP;
	RETURN extract(epoch FROM clock_timestamp() - t0);
END $$;

CREATE FUNCTION pg_temp.wait_tests() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	why text := pg_temp.why_skip();
	w int;
	pb int;
	ha int;
	hb int;
	waited float8;
	r text;
BEGIN
	IF why IS NOT NULL THEN
		RETURN NEXT skip(why, 8);
		RETURN;
	END IF;
	PERFORM pg_temp.connect('a');
	PERFORM pg_temp.connect('b');
	PERFORM pg_temp.remote('a', 'SELECT cpht_create(1000, transactional => false, name => ''waits'')');
	PERFORM pg_temp.remote('a', 'SELECT cpht_put(cpht_open(''waits''), ''{1,2,3}'')');
	ha := (SELECT v FROM dblink('a', 'SELECT cpht_open(''waits'')') AS t(v int));
	hb := (SELECT v FROM dblink('b', 'SELECT cpht_open(''waits'')') AS t(v int));
	pb := (SELECT v FROM dblink('b', 'SELECT pg_backend_pid()') AS t(v int));
	w := (cpht_worker_info()->>'worker_pid')::int;

	BEGIN
		PERFORM pg_temp.signal_worker('STOP', w);
		-- a call under a 300 ms statement_timeout
		PERFORM dblink_exec('a', 'SET statement_timeout = 300');
		PERFORM dblink_send_query('a', format('SELECT cpht_put(%s, ''{4}'')::text', ha));
		waited := pg_temp.await_idle('a', 5);
		RETURN NEXT ok(waited IS NOT NULL AND waited < 0.3 + 0.4,
			format('with the worker stopped, a call ends at its statement_timeout (300 ms; it took %s s)',
				   coalesce(round(waited::numeric, 3)::text, 'more than 5')));
		RETURN NEXT diag(format('a call under a 300 ms statement_timeout, the worker stopped: ended after %s s',
								coalesce(round(waited::numeric, 3)::text, 'more than 5')));
		PERFORM pg_temp.signal_worker('CONT', w);
		PERFORM pg_temp.await_idle('a', 30);
		RETURN NEXT is(pg_temp.result('a'), '57014', 'it ends with 57014');

		-- a session waiting for the stopped worker, terminated
		PERFORM pg_temp.signal_worker('STOP', w);
		PERFORM dblink_send_query('b', format('SELECT cpht_put(%s, ''{5}'')::text', hb));
		RETURN NEXT ok(pg_temp.await_wait(pb, 'Extension'), 'a second session waits for the worker');
		PERFORM pg_terminate_backend(pb);
		waited := pg_temp.await_exit(pb, 5);
		RETURN NEXT diag(format('pg_terminate_backend of a session waiting for the stopped worker: it left after %s s',
								coalesce(round(waited::numeric, 3)::text, 'more than 5')));
		RETURN NEXT ok(waited IS NOT NULL AND waited < 0.4,
			format('pg_terminate_backend ends the waiting session at once (it took %s s)',
				   coalesce(round(waited::numeric, 3)::text, 'more than 5')));
		PERFORM pg_temp.signal_worker('CONT', w);
	EXCEPTION WHEN OTHERS THEN
		PERFORM pg_temp.signal_worker('CONT', w);
		RAISE;
	END;
	PERFORM dblink_disconnect('b');

	-- the worker goes on; neither call reached the table
	PERFORM dblink_exec('a', 'SET statement_timeout = ''30s''');
	RETURN NEXT is((SELECT v FROM dblink('a', format('SELECT cpht_count(%s)', ha)) AS t(v bigint)), 3::bigint,
		'the table holds what it held before the two calls');
	RETURN NEXT is((SELECT v FROM dblink('a', format('SELECT cpht_find(%s, ''{3,4,5}'')::text', ha)) AS t(v text)),
		'{t,f,f}', 'the canceled and the terminated call''s keys are not in it');
	RETURN NEXT is((SELECT v FROM dblink('a', format('SELECT cpht_put(%s, ''{4,5}'')', ha)) AS t(v bigint)), 2::bigint,
		'the session whose call was canceled calls again');
	RETURN NEXT is((cpht_worker_info()->>'worker_pid')::int, w, 'the same worker serves');
	PERFORM pg_temp.remote('a', format('SELECT cpht_drop(%s)', ha));
	PERFORM dblink_disconnect('a');
END $$;

SELECT * FROM pg_temp.wait_tests();

SELECT * FROM finish();
ROLLBACK;
