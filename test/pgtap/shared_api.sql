-- Shared tables by name (cpht in shared_preload_libraries): created in one
-- session, opened by name in others, the same keys for all; what may not
-- be done with them fails with its own SQLSTATE.  This file runs inside a
-- transaction block, where a table created would be seen by no other
-- session, so creating and dropping go through dblink sessions
-- (autocommit); shared_ddl_txn.sql tests them inside blocks.
BEGIN;
SELECT plan(33);

\ir include/shared_sessions.psql

CREATE FUNCTION pg_temp.api_tests() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	why text := pg_temp.why_skip();
	worker int;
	theirs int;
	mine int;
	again int;
	n bigint;
	r record;
	flags boolean[];
BEGIN
	IF why IS NOT NULL THEN
		RETURN NEXT skip(why, 33);
		RETURN;
	END IF;
	worker := (cpht_worker_info()->>'worker_pid')::int;
	RETURN NEXT ok(worker IS NOT NULL, 'the cpht worker runs');
	PERFORM pg_temp.connect('a');
	PERFORM pg_temp.connect('b');

	SELECT h INTO theirs FROM dblink('a',
		$q$SELECT cpht_create(4000000, transactional => false, name => 'api_seen')$q$) AS t(h int);
	RETURN NEXT ok(theirs > 0, 'another session creates a shared table by name');
	SELECT c INTO n FROM dblink('a', format('SELECT cpht_put(%s, ''{1,2,3}'')', theirs)) AS t(c bigint);
	RETURN NEXT is(n, 3::bigint, 'and puts keys into it');

	mine := cpht_open('api_seen');
	again := cpht_open('api_seen');
	RETURN NEXT is(again, mine, 'cpht_open gives the same handle each time in a session');
	RETURN NEXT is(cpht_find(mine, '{1,2,3,4}'), '{t,t,t,f}', 'this session sees the keys the other put');
	RETURN NEXT is(cpht_fop(mine, '{3,4,4,5}'), '{f,t,f,t}', 'and find-or-puts into the same table');
	SELECT f INTO flags FROM dblink('a', format('SELECT cpht_find(%s, ''{4,5,6}'')', theirs)) AS t(f boolean[]);
	RETURN NEXT is(flags, '{t,t,f}', 'the other session sees this one''s keys');
	RETURN NEXT is(cpht_fop_new(mine, '{5,6,7}'), '{6,7}', 'cpht_fop_new on a shared table');
	RETURN NEXT is(cpht_delete(mine, '{7,8}'), '{t,f}', 'cpht_delete on a shared table');
	RETURN NEXT is(cpht_put(mine, '{7,8}'), 2::bigint, 'cpht_put on a shared table');
	RETURN NEXT is(cpht_count(mine), 8::bigint, 'cpht_count on a shared table');
	RETURN NEXT is(cpht_rebuild(mine), 1::bigint, 'cpht_rebuild on a shared table removes its tombstone');

	SELECT * INTO r FROM cpht_tables() WHERE name = 'api_seen';
	RETURN NEXT ok(r.handle = mine AND r.shared AND r.placement = 'worker' AND r.device = 'cpu'
				   AND r.owner = current_user::regrole AND r.count = 8,
		'cpht_tables lists the shared table: handle, owner, device, count');
	SELECT hh INTO n FROM dblink('b', format($q$SELECT count(*) FROM cpht_tables() WHERE name = 'api_seen' AND handle = %s$q$, mine)) AS t(hh bigint);
	RETURN NEXT is(n, 1::bigint, 'a session that has not opened it sees it with its handle, the same number');
	RETURN NEXT ok((cpht_info(mine)->>'shared')::boolean AND cpht_info(mine)->>'name' = 'api_seen'
				   AND cpht_info(mine)->>'placement' = 'worker' AND (cpht_info(mine)->>'count')::bigint = 8,
		'cpht_info of a shared table');

	-- large calls go through the worker in pieces and stay one call
	SELECT (cpht_worker_info()->>'window_keys')::bigint INTO n;
	PERFORM cpht_put(mine, array_agg(g)) FROM generate_series(101, 2 * n + 1000, 2) g;
	SELECT count(*) INTO n FROM unnest(cpht_fop(mine, (SELECT array_agg(g) FROM generate_series(100, 2 * n + 1000) g)))
		WITH ORDINALITY AS u(b, i) WHERE b <> (i % 2 = 1);
	RETURN NEXT is(n, 0::bigint, 'a call larger than a transfer window answers every key in its place');
	RETURN NEXT is((SELECT count(*) FROM unnest(cpht_fop(mine, (SELECT array_agg(g) FROM generate_series(100, 2 * (cpht_worker_info()->>'window_keys')::bigint + 1000) g))) b WHERE b),
		0::bigint, 'and stored every key');

	-- streaming
	RETURN NEXT is((SELECT cpht_fop_agg(mine, g) FROM generate_series(-10, 10) g), 13::bigint,
		'cpht_fop_agg on a shared table');
	CREATE TEMP TABLE api_rows (id bigint, note text);
	INSERT INTO api_rows SELECT g, 'row ' || g FROM generate_series(-15, -5) g;
	RETURN NEXT is((SELECT array_agg(id ORDER BY id) FROM cpht_fop_rows(mine, NULL::api_rows, 'SELECT * FROM api_rows')),
		'{-15,-14,-13,-12,-11}'::bigint[], 'cpht_fop_rows on a shared table returns the new rows');

	-- what is refused (on the CPU, so that the GPU refusal below cannot
	-- come first when the suite runs with cpht.device = gpu)
	PERFORM set_config('cpht.device', 'cpu', true);
	RETURN NEXT throws_ok($q$SELECT cpht_create(1000, transactional => false, name => 'api_seen')$q$,
		'42710', NULL, 'creating a shared table under a name that exists fails with 42710');
	RETURN NEXT throws_ok($q$SELECT cpht_create(1000, name => 'api_seen', if_not_exists => true)$q$,
		'42710', NULL, 'and with if_not_exists, when the table is transactional where it is not');
	RETURN NEXT is((SELECT v FROM dblink('b', $q$SELECT cpht_info(cpht_create(1000, name => 'api_tx'))->>'transactional'$q$) AS t(v text)),
		'true', 'a shared table is transactional unless created with transactional => false');
	PERFORM pg_temp.remote('b', $q$SELECT cpht_drop(cpht_open('api_tx'))$q$);
	-- cpht.device = gpu: the GPU of the cpht worker, or 55000 without one
	PERFORM dblink_exec('b', 'SET cpht.device = gpu');
	IF coalesce((cpht_worker_info()->'gpu'->>'usable')::boolean, false) THEN
		RETURN NEXT is((SELECT d FROM dblink('b', $r$SELECT cpht_info(cpht_create(1000, transactional => false, name => 'api_gpu'))->>'device'$r$) AS t(d text)),
			'gpu', 'a shared table with cpht.device = gpu lives on the cpht worker''s GPU');
		PERFORM * FROM dblink('b', $r$SELECT cpht_drop(cpht_open('api_gpu'))$r$) AS t(v text);
	ELSE
		RETURN NEXT throws_ok($q$SELECT * FROM dblink('b', 'SELECT cpht_create(1000, transactional => false, name => ''api_gpu'')') AS t(h int)$q$,
			'55000', 'no usable GPU for cpht',
			'a shared table with cpht.device = gpu fails with 55000 where the cpht worker has no GPU');
	END IF;
	PERFORM dblink_exec('b', 'RESET cpht.device');
	-- a name taken is the worker's ERROR, answered to the request alone
	RETURN NEXT throws_ok($q$SELECT * FROM dblink('b', 'SELECT cpht_create(1000, transactional => false, name => ''api_seen'')') AS t(h int)$q$,
		'42710', 'shared cpht table "api_seen" already exists', 'a taken name fails with 42710');
	RETURN NEXT is((cpht_worker_info()->>'worker_pid')::int, worker, 'the worker survives an ERROR in a request');
	RETURN NEXT is(cpht_count(mine), (SELECT cpht_count(mine)), 'and keeps serving');
	RETURN NEXT throws_ok($q$SELECT cpht_open('api_nothing')$q$, '42704', NULL,
		'opening a name that does not exist fails with 42704');

	-- names are per database
	PERFORM dblink_exec('b', 'DROP DATABASE IF EXISTS cpht_tap_other');
	PERFORM dblink_exec('b', 'CREATE DATABASE cpht_tap_other');
	PERFORM dblink_connect('o', format('dbname=cpht_tap_other port=%s host=%s',
		current_setting('port'), split_part(current_setting('unix_socket_directories'), ',', 1)));
	PERFORM dblink_exec('o', 'CREATE EXTENSION cpht');
	SELECT c INTO n FROM dblink('o', $q$SELECT cpht_count(cpht_create(10, transactional => false, name => 'api_seen'))$q$) AS t(c bigint);
	RETURN NEXT is(n, 0::bigint, 'another database has its own table of the same name');
	RETURN NEXT is((SELECT count(*) FROM cpht_tables() WHERE name = 'api_seen'), 1::bigint,
		'and this database lists only its own');
	PERFORM pg_temp.remote('o', $q$SELECT cpht_drop(cpht_open('api_seen'))$q$);
	PERFORM dblink_disconnect('o');
	PERFORM dblink_exec('b', 'DROP DATABASE cpht_tap_other');

	-- a drop is for everyone
	PERFORM pg_temp.remote('a', format('SELECT cpht_drop(%s)', theirs));
	RETURN NEXT throws_ok(format('SELECT cpht_fop(%s, ''{1}'')', mine), '42704', NULL,
		'a shared table dropped by another session fails with 42704 here');
	RETURN NEXT throws_ok($q$SELECT cpht_open('api_seen')$q$, '42704', NULL,
		'and cannot be opened');
	RETURN NEXT is((SELECT count(*) FROM cpht_tables() WHERE name = 'api_seen'), 0::bigint,
		'cpht_tables no longer lists it');
	RETURN NEXT is((cpht_worker_info()->>'windows_free')::int, (cpht_worker_info()->>'windows')::int,
		'no transfer window stays held');
	PERFORM dblink_disconnect('a');
	PERFORM dblink_disconnect('b');
END $$;

SELECT pg_temp.api_tests();
SELECT * FROM finish();
ROLLBACK;
