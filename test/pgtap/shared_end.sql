-- Calls on a shared table that end early, and calls that run at once:
--   - pg_cancel_backend of a session waiting for the worker: the worker
--     undoes the running call and the table is as it was before it;
--   - pg_terminate_backend of such a session: the same, and the worker
--     goes on serving the others;
--   - sessions find-or-putting overlapping keys into one table at the same
--     time: every distinct key is reported new exactly once.
BEGIN;
SELECT plan(11);

\ir include/shared_sessions.psql

CREATE FUNCTION pg_temp.end_tests() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	why text := pg_temp.why_skip();
	worker int;
	h int;
	p int;
	n bigint;
	canceled int := 0;
	changed int := 0;
	t0 timestamptz;
	state text;
	call text;
BEGIN
	IF why IS NOT NULL THEN
		RETURN NEXT skip(why, 11);
		RETURN;
	END IF;
	worker := (cpht_worker_info()->>'worker_pid')::int;
	PERFORM pg_temp.connect('a');
	-- one thread per call, so that a call lasts long enough to be caught
	PERFORM dblink_exec('a', 'SET cpht.cpu_threads = 1');
	PERFORM pg_temp.remote('a', $q$SELECT cpht_put(cpht_create(3000000, 'cuckoo', transactional => false, name => 'end_t'), '{-1,-2,-3}')$q$);
	-- a call of as many keys as one transfer window holds
	CREATE TEMP TABLE end_keys AS
		SELECT array_agg(g) AS keys FROM generate_series(1, (cpht_worker_info()->>'window_keys')::bigint) g;
	call := format($q$SELECT cpht_fop(cpht_open('end_t'), (SELECT array_agg(g) FROM generate_series(1, %s) g))$q$,
				   (SELECT cardinality(keys) FROM end_keys));
	h := cpht_open('end_t');

	-- pg_cancel_backend while the session waits for the worker, until one
	-- cancel lands before the call is over
	PERFORM pg_temp.connect('c');
	SELECT v INTO p FROM dblink('c', 'SELECT pg_backend_pid()') AS t(v int);
	FOR attempt IN 1..20 LOOP
		PERFORM dblink_send_query('c', call);
		PERFORM pg_temp.await_wait(p, 'Extension');
		PERFORM pg_cancel_backend(p);
		state := 'done';
		BEGIN
			PERFORM * FROM dblink_get_result('c') AS t(r boolean[]);
		EXCEPTION WHEN query_canceled THEN
			state := 'canceled';
		END;
		PERFORM * FROM dblink_get_result('c') AS t(r boolean[]);
		n := cpht_count(h);
		IF state = 'canceled' THEN
			canceled := canceled + 1;
			IF n <> 3 THEN
				changed := changed + 1;
			END IF;
		END IF;
		PERFORM cpht_delete(h, keys) FROM end_keys;
		EXIT WHEN canceled >= 3;
	END LOOP;
	RETURN NEXT ok(canceled > 0, format('pg_cancel_backend cancels a session waiting for the worker (%s times)', canceled));
	RETURN NEXT is(changed, 0, 'a canceled call leaves the shared table as it was before the call');
	RETURN NEXT is(cpht_find(h, '{-1,-2,-3,1}'), '{t,t,t,f}', 'the table still holds its keys and no key of the call');
	RETURN NEXT is((cpht_worker_info()->>'windows_free')::int, (cpht_worker_info()->>'windows')::int,
		'a canceled call gives its transfer window back');

	-- pg_terminate_backend while the session waits for the worker
	PERFORM dblink_send_query('c', call);
	PERFORM pg_temp.await_wait(p, 'Extension');
	PERFORM pg_terminate_backend(p);
	BEGIN
		PERFORM * FROM dblink_get_result('c') AS t(r boolean[]);
	EXCEPTION WHEN OTHERS THEN
		NULL;
	END;
	PERFORM dblink_disconnect('c');
	t0 := clock_timestamp();
	LOOP
		PERFORM pg_stat_clear_snapshot();
		EXIT WHEN NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = p)
			OR clock_timestamp() > t0 + interval '30 seconds';
		PERFORM pg_sleep(0.01);
	END LOOP;
	RETURN NEXT ok(NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = p), 'the terminated session ends');
	RETURN NEXT is((cpht_worker_info()->>'worker_pid')::int, worker, 'the worker survives it');
	n := cpht_count(h);
	RETURN NEXT ok(n = 3 OR n = 3 + (SELECT cardinality(keys) FROM end_keys),
		format('the table holds all keys of the terminated call or none (count %s)', n));
	RETURN NEXT is(cpht_fop(h, '{-1,-4}'), '{f,t}', 'and serves the other sessions');
	RETURN NEXT is((cpht_worker_info()->>'windows_free')::int, (cpht_worker_info()->>'windows')::int,
		'a terminated session gives its transfer window back');

	-- sessions putting overlapping keys at once, in many calls each
	PERFORM pg_temp.remote('a', $q$SELECT cpht_create(1000000, transactional => false, name => 'end_concurrent')$q$);
	CREATE TEMP TABLE reported (k bigint, session int);
	FOR s IN 1..4 LOOP
		PERFORM pg_temp.connect('w' || s);
		PERFORM dblink_send_query('w' || s, format(
			$q$SELECT unnest(cpht_fop_new(cpht_open('end_concurrent'), array_agg(g ORDER BY g)))
			   FROM generate_series(%s, %s) g GROUP BY g %% 20$q$, s * 50000, s * 50000 + 200000));
	END LOOP;
	FOR s IN 1..4 LOOP
		INSERT INTO reported SELECT k, s FROM dblink_get_result('w' || s) AS t(k bigint);
		PERFORM dblink_disconnect('w' || s);
	END LOOP;
	RETURN NEXT is((SELECT count(*) FROM reported), (SELECT count(DISTINCT k) FROM reported),
		'concurrent sessions report each key new once');
	RETURN NEXT ok((SELECT count(DISTINCT k) FROM reported) = 350001
				   AND (SELECT min(k) FROM reported) = 50000 AND (SELECT max(k) FROM reported) = 400000
				   AND (SELECT cpht_count(cpht_open('end_concurrent'))) = 350001,
		'the keys reported new are the distinct keys of all sessions');

	PERFORM pg_temp.remote('a', $q$SELECT cpht_drop(cpht_open('end_t'))$q$);
	PERFORM pg_temp.remote('a', $q$SELECT cpht_drop(cpht_open('end_concurrent'))$q$);
	PERFORM dblink_disconnect('a');
END $$;

SELECT pg_temp.end_tests();
SELECT * FROM finish();
ROLLBACK;
