-- Tables belong to the session: another session cannot see them, a
-- session that ends frees its tables (the exit callback runs without
-- harm), and a canceled call leaves no key behind.
BEGIN;
SELECT plan(10);

SELECT cpht_drop_all() >= 0 AS clean \gset

-- Other sessions, through dblink where it is available.
CREATE FUNCTION pg_temp.other_sessions() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	conn text;
	mine int;
	theirs int;
	n bigint;
	other_pid int;
	t0 timestamptz;
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'dblink') THEN
		RETURN NEXT skip('dblink is not installed', 4);
		RETURN;
	END IF;
	BEGIN
		CREATE EXTENSION IF NOT EXISTS dblink;
	EXCEPTION WHEN OTHERS THEN
		RETURN NEXT skip('dblink cannot be loaded: ' || SQLERRM, 4);
		RETURN;
	END;
	conn := format('dbname=%s port=%s host=%s options=''-c cpht.device=%s''',
				   current_database(), current_setting('port'),
				   split_part(current_setting('unix_socket_directories'), ',', 1),
				   current_setting('cpht.device'));
	BEGIN
		PERFORM dblink_connect('cpht_other', conn);
	EXCEPTION WHEN OTHERS THEN
		RETURN NEXT skip('cannot connect to this server through dblink: ' || SQLERRM, 4);
		RETURN;
	END;

	mine := cpht_create(1000);
	PERFORM cpht_put(mine, '{1,2,3}');
	SELECT h INTO theirs FROM dblink('cpht_other', 'SELECT cpht_create(100000)') AS r(h int);
	SELECT c INTO n FROM dblink('cpht_other',
		'SELECT cpht_put(' || theirs || ', array_agg(g)) FROM generate_series(1, 50000) g') AS r(c bigint);
	RETURN NEXT is(n, 50000::bigint, 'another session fills its own table');
	SELECT c INTO n FROM dblink('cpht_other', 'SELECT count(*) FROM cpht_tables()') AS r(c bigint);
	RETURN NEXT is(n, 1::bigint, 'another session sees only its own tables');
	RETURN NEXT is(cpht_count(mine), 3::bigint, 'tables of the same handle number do not mix');

	-- the other backend exits with live tables; this session must survive
	SELECT p INTO other_pid FROM dblink('cpht_other', 'SELECT pg_backend_pid()') AS r(p int);
	PERFORM dblink_disconnect('cpht_other');
	t0 := clock_timestamp();
	PERFORM pg_stat_clear_snapshot();
	WHILE EXISTS (SELECT 1 FROM pg_stat_activity WHERE pg_stat_activity.pid = other_pid)
		  AND clock_timestamp() < t0 + interval '30 seconds' LOOP
		PERFORM pg_sleep(0.05);
		-- pg_stat_activity is read once per transaction unless cleared
		PERFORM pg_stat_clear_snapshot();
	END LOOP;
	RETURN NEXT ok(NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pg_stat_activity.pid = other_pid)
				   AND cpht_count(mine) = 3,
		'a session that exits with tables frees them and leaves the server running');
	PERFORM cpht_drop(mine);
END $$;

SELECT pg_temp.other_sessions();

-- A canceled call (here by statement_timeout) is all or nothing: the table
-- holds either every key of the call or none.  The calls repeat until the
-- timeout strikes, wherever it lands.  On a transactional table the
-- EXCEPTION block's rollback would undo a canceled call's leftovers as
-- well, so the same runs on a table with transactional => false, where
-- only the call itself can undo them.
CREATE TEMP TABLE big AS SELECT array_agg(g) AS keys FROM generate_series(1, 5000000) g;
CREATE FUNCTION pg_temp.cancel_test(h int, what text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	state text := 'never canceled';
	n bigint;
	f boolean[];
BEGIN
	BEGIN
		FOR i IN 1..200 LOOP
			PERFORM cpht_fop(h, keys) FROM big;
			PERFORM cpht_delete(h, keys) FROM big;
		END LOOP;
	EXCEPTION WHEN query_canceled THEN
		state := 'canceled';
	END;
	n := cpht_count(h);
	f := cpht_find(h, '{-1,-2,-3,1,2500000,5000000}');
	RETURN NEXT is(state, 'canceled', what || ': statement_timeout cancels a long cpht call');
	RETURN NEXT ok((n = 3 AND f = '{t,t,t,f,f,f}') OR (n = 5000003 AND f = '{t,t,t,t,t,t}'),
		format('%s: a canceled call leaves all of its keys or none (count %s)', what, n));
	RETURN NEXT is(cpht_fop(h, '{-1,-7}'), '{f,t}', what || ': the table works after the cancel');
END $$;

SELECT cpht_create(6000000) AS ch \gset
SELECT cpht_put(:ch, '{-1,-2,-3}') AS three \gset
SET statement_timeout = '300ms';
SELECT pg_temp.cancel_test(:ch, 'transactional');
RESET statement_timeout;
SELECT cpht_create(6000000, transactional => false) AS nch \gset
SELECT cpht_put(:nch, '{-1,-2,-3}') AS three \gset
SET statement_timeout = '300ms';
SELECT pg_temp.cancel_test(:nch, 'transactional => false');
RESET statement_timeout;

SELECT cpht_drop_all() >= 0 AS clean \gset
SELECT * FROM finish();
ROLLBACK;
