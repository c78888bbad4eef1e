-- Calls larger than one transfer window, streamed through the cpht worker
-- piece by piece (cpht preloaded; CPU tables, so CI runs them):
--   - keys on both sides of window boundaries, repeated across them:
--     every answer in its place, one call's semantics (a key repeated in
--     the call is new once), PUT's count summed over the pieces;
--   - a call that fails part way (a table that cannot grow runs full in a
--     later piece) is undone whole, on a shared table and on a private
--     table in the worker that keeps no undo log;
--   - a call canceled while it streams is undone whole;
--   - on a transactional shared table, a write that meets another
--     transaction's key in a later piece undoes the pieces that ran, waits
--     for that transaction and then runs whole;
--   - no transfer window stays held.
BEGIN;
SELECT plan(20);

\ir include/shared_sessions.psql

CREATE FUNCTION pg_temp.stream_tests() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	why text := pg_temp.why_skip();
	w bigint;
	h int;
	n bigint;
	p int;
	canceled int := 0;
	changed int := 0;
	state text;
	call text;
	flags boolean[];
BEGIN
	IF why IS NOT NULL THEN
		RETURN NEXT skip(why, 20);
		RETURN;
	END IF;
	w := (cpht_worker_info()->>'window_keys')::bigint;
	PERFORM set_config('cpht.device', 'cpu', true);
	-- shared tables are created and dropped outside this transaction, in
	-- session a
	PERFORM pg_temp.connect('a');

	-- Window boundaries: 2w + 1 keys in three pieces; the key at position
	-- w + 1 repeats the last of the first piece, the last key repeats the
	-- first; 7, w + 7 and 2w are in the table before the call.
	CREATE TEMP TABLE bound AS
		SELECT array_agg(CASE WHEN i = w + 1 THEN w WHEN i = 2 * w + 1 THEN 1 ELSE i END ORDER BY i) AS keys
		FROM generate_series(1, 2 * w + 1) i;
	PERFORM pg_temp.remote('a', format($q$SELECT cpht_create(%s, transactional => false, name => 'ws_bound')$q$, 4 * w));
	h := cpht_open('ws_bound');
	PERFORM cpht_put(h, ARRAY[7, w + 7, 2 * w]);
	SELECT count(*) INTO n
		FROM unnest((SELECT cpht_fop(h, keys) FROM bound), (SELECT keys FROM bound)) WITH ORDINALITY AS u(b, k, i)
		WHERE b <> (k NOT IN (7, w + 7, 2 * w) AND i NOT IN (w + 1, 2 * w + 1));
	RETURN NEXT is(n, 0::bigint, 'a call across window boundaries answers every key in its place, a repeated key new once');
	RETURN NEXT is(cpht_count(h), 2 * w - 1, 'and stores each distinct key once');
	RETURN NEXT is(cpht_find(h, ARRAY[1, w, w + 1, w + 2, 2 * w]), '{t,t,f,t,t}', 'the keys on both sides of the boundaries are in');
	SELECT count(*) INTO n FROM unnest((SELECT cpht_find(h, keys) FROM bound)) b WHERE NOT b;
	RETURN NEXT is(n, 0::bigint, 'a find across window boundaries finds every key');
	SELECT count(*) INTO n FROM unnest((SELECT cpht_delete(h, keys) FROM bound)) b WHERE b;
	RETURN NEXT is(n, 2 * w - 1, 'a delete across window boundaries reports each key present once');
	RETURN NEXT is((SELECT cpht_put(h, keys) FROM bound), 2 * w - 1, 'a put across window boundaries counts the keys of every piece');
	-- w + 1 keys: a last piece of one key
	SELECT count(*) INTO n FROM unnest(cpht_fop(h, (SELECT array_agg(g) FROM generate_series(2 * w + 1, 3 * w + 1) g))) b WHERE b;
	RETURN NEXT is(n, w + 1, 'a call one key longer than a window answers its last piece');
	PERFORM pg_temp.remote('a', $q$SELECT cpht_drop(cpht_open('ws_bound'))$q$);

	-- A table that cannot grow, with room for the first piece but not for
	-- all three: the call fails in a later piece and leaves nothing.
	PERFORM set_config('cpht.grow', 'off', true);
	PERFORM dblink_exec('a', 'SET cpht.grow = off');
	PERFORM pg_temp.remote('a', format($q$SELECT cpht_create(%s, transactional => false, name => 'ws_full')$q$, w * 3 / 2));
	PERFORM dblink_exec('a', 'RESET cpht.grow');
	h := cpht_open('ws_full');
	PERFORM cpht_put(h, '{-1,-2,-3}');
	RETURN NEXT is(cpht_count(h), 3::bigint, 'a shared table that cannot grow');
	RETURN NEXT throws_ok(format('SELECT cpht_fop(%s, (SELECT array_agg(g) FROM generate_series(1, %s) g))', h, 3 * w),
		'53000', NULL, 'a streamed call that runs the table full in a later piece fails with 53000');
	RETURN NEXT is(cpht_count(h), 3::bigint, 'and leaves no key of the pieces that ran before');
	RETURN NEXT is(cpht_find(h, ARRAY[-1, 1, w]), '{t,f,f}', 'not even those of its first piece');
	PERFORM pg_temp.remote('a', $q$SELECT cpht_drop(cpht_open('ws_full'))$q$);
	-- the same on a private table in the worker that keeps no undo log
	PERFORM set_config('cpht.placement', 'worker', true);
	h := cpht_create(w * 3 / 2, transactional => false);
	PERFORM cpht_put(h, '{-1,-2,-3}');
	RETURN NEXT throws_ok(format('SELECT cpht_fop(%s, (SELECT array_agg(g) FROM generate_series(1, %s) g))', h, 3 * w),
		'53000', NULL, 'on a private worker table without undo log a streamed call that runs it full fails with 53000');
	RETURN NEXT ok(cpht_count(h) = 3 AND cpht_find(h, ARRAY[-1, 1, w]) = '{t,f,f}',
		'and leaves no key of the pieces that ran before');
	RETURN NEXT is(cpht_fop(h, '{-1,5}'), '{f,t}', 'the table works after it');
	PERFORM cpht_drop(h);
	PERFORM set_config('cpht.placement', 'backend', true);
	PERFORM set_config('cpht.grow', 'on', true);

	-- A cancel while a call streams: undone whole.
	PERFORM pg_temp.connect('c');
	-- one thread per piece, so that the call lasts long enough to be caught
	PERFORM dblink_exec('a', 'SET cpht.cpu_threads = 1');
	PERFORM pg_temp.remote('a', format($q$SELECT cpht_create(%s, transactional => false, name => 'ws_cancel')$q$, 8 * w));
	PERFORM dblink_exec('a', 'RESET cpht.cpu_threads');
	h := cpht_open('ws_cancel');
	PERFORM cpht_put(h, '{-1,-2,-3}');
	SELECT v INTO p FROM dblink('c', 'SELECT pg_backend_pid()') AS t(v int);
	call := format($q$SELECT cpht_fop(cpht_open('ws_cancel'), (SELECT array_agg(g) FROM generate_series(1, %s) g))$q$, 6 * w);
	FOR attempt IN 1..10 LOOP
		PERFORM dblink_send_query('c', call);
		PERFORM pg_temp.await_wait(p, 'Extension');
		-- let some pieces run first
		PERFORM pg_sleep(0.05 * attempt);
		PERFORM pg_cancel_backend(p);
		state := 'done';
		BEGIN
			PERFORM * FROM dblink_get_result('c') AS t(r boolean[]);
		EXCEPTION WHEN query_canceled THEN
			state := 'canceled';
		END;
		PERFORM * FROM dblink_get_result('c') AS t(r boolean[]);
		n := cpht_count(h);
		-- A cancel that comes after the last piece (while the statement
		-- sends its result) fails the statement with the whole call done:
		-- a table that is not transactional keeps its keys then.
		IF state = 'canceled' AND n = 3 THEN
			canceled := canceled + 1;
		ELSIF state = 'canceled' AND n <> 3 + 6 * w THEN
			changed := changed + 1;
			RAISE NOTICE 'a canceled call left % keys of %', n - 3, 6 * w;
		END IF;
		IF n <> 3 THEN
			PERFORM cpht_delete(h, array_agg(g)) FROM generate_series(1, 6 * w) g;
		END IF;
		EXIT WHEN canceled >= 2;
	END LOOP;
	RETURN NEXT ok(canceled > 0, format('pg_cancel_backend cancels a streaming call (%s times)', canceled));
	RETURN NEXT is(changed, 0, 'a canceled streaming call leaves the table as it was before the call, or whole');
	PERFORM pg_temp.remote('a', $q$SELECT cpht_drop(cpht_open('ws_cancel'))$q$);

	-- A transactional table: session a holds key 2w + 5 (in the third
	-- piece of b's call) in an open transaction.
	PERFORM pg_temp.remote('a', format($q$SELECT cpht_create(%s, name => 'ws_txn')$q$, 8 * w));
	h := cpht_open('ws_txn');
	PERFORM pg_temp.connect('b');
	SELECT v INTO p FROM dblink('b', 'SELECT pg_backend_pid()') AS t(v int);
	PERFORM dblink_exec('a', 'BEGIN');
	PERFORM pg_temp.remote('a', format($q$SELECT cpht_fop(cpht_open('ws_txn'), '{%s}')$q$, 2 * w + 5));
	PERFORM dblink_send_query('b', format(
		$q$SELECT cardinality(cpht_fop_new(cpht_open('ws_txn'), (SELECT array_agg(g) FROM generate_series(1, %s) g)))$q$, 3 * w));
	RETURN NEXT ok(pg_temp.await_wait(p, 'Lock'), 'a streamed write meeting another transaction''s key in a later piece waits for it');
	RETURN NEXT is(cpht_count(h), 0::bigint, 'the pieces it ran before are undone while it waits');
	PERFORM dblink_exec('a', 'COMMIT');
	SELECT v INTO n FROM dblink_get_result('b') AS t(v bigint);
	PERFORM * FROM dblink_get_result('b') AS t(v bigint);
	RETURN NEXT is(n, 3 * w - 1, 'then it runs whole: every key new but the one the other transaction committed');
	PERFORM pg_temp.remote('a', $q$SELECT cpht_drop(cpht_open('ws_txn'))$q$);

	PERFORM dblink_disconnect('a');
	PERFORM dblink_disconnect('b');
	PERFORM dblink_disconnect('c');
	RETURN NEXT is((cpht_worker_info()->>'windows_free')::int, (cpht_worker_info()->>'windows')::int,
		'no transfer window stays held');
END $$;

SELECT pg_temp.stream_tests();
SELECT * FROM finish();
ROLLBACK;
