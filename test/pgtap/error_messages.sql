-- Errors that must say what is wrong, with the SQLSTATE the README's
-- error table gives: an empty query of cpht_fop_rows; names no shared
-- table can have (at cpht_open as at cpht_create); huge names echoed in a
-- message; relative server file paths; a scalar row type; a private table
-- named in a parallel worker.
BEGIN;
SELECT plan(17);

\ir include/shared_sessions.psql

SELECT cpht_create(1000) AS h \gset
SELECT cpht_put(:h, '{1,2,3}');

-- ---- cpht_fop_rows: an empty query ----------------------------------------
SELECT throws_ok(format('SELECT * FROM cpht_fop_rows(%s, NULL::bigint, %L, ''id'')', :h, q),
	'22023', 'the query of cpht_fop_rows is empty', format('a query of %s is empty (22023)', what))
FROM (VALUES ('', 'nothing'), ('-- only a comment', 'a comment'), (';', 'a semicolon'),
			 ('  /* c */ ; ', 'a comment and a semicolon')) AS v(q, what);

-- ---- a scalar row type -----------------------------------------------------
SELECT throws_ok(format('SELECT * FROM cpht_fop_rows(%s, NULL::bigint[], ''SELECT 7::bigint AS id'', ''id'')', :h),
	'42804', 'query column 1 is of type bigint, which cannot be returned as the row type bigint[]',
	'a query column that does not fit a scalar row type names the type, not a column ""');

-- ---- names: 42602 at open as at create, echoed short -----------------------
CREATE FUNCTION pg_temp.message(sql text, OUT state text, OUT msg text, OUT detail text, OUT hint text)
LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE sql;
	state := 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
		detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
END $$;

CREATE FUNCTION pg_temp.name_tests() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	m record;
BEGIN
	IF NOT (cpht_worker_info()->>'preloaded')::boolean THEN
		RETURN NEXT skip('cpht is not in shared_preload_libraries: no shared tables', 8);
		RETURN;
	END IF;
	RETURN NEXT throws_ok($q$SELECT cpht_open('')$q$, '42602', 'invalid shared cpht table name ""',
		'cpht_open of an empty name is 42602, as cpht_create''s');
	RETURN NEXT throws_ok(format('SELECT cpht_open(%L)', repeat('x', 64)), '42602', NULL,
		'cpht_open of a 64-byte name is 42602');
	RETURN NEXT throws_ok(format('SELECT cpht_alter_owner(%L, current_user::regrole)', repeat('x', 100000)), '42602',
		'invalid shared cpht table name "' || repeat('x', 64) || '..."',
		'cpht_alter_owner checks its name as cpht_open does, echoing 64 bytes of it');
	RETURN NEXT throws_ok(format('SELECT cpht_create(10, name => %L)', repeat('x', 64)), '42602', NULL,
		'cpht_create of a 64-byte name is 42602');
	RETURN NEXT throws_ok(format('SELECT cpht_create(10, name => %L)', ''), '42602', NULL,
		'cpht_create of an empty name is 42602');
	m := pg_temp.message(format('SELECT cpht_open(%L)', repeat('y', 100000)));
	RETURN NEXT is(m.state, '42602', 'cpht_open of a 100,000-byte name is 42602');
	RETURN NEXT ok(length(m.msg) + coalesce(length(m.detail), 0) + coalesce(length(m.hint), 0) < 300
				   AND m.msg LIKE '%' || repeat('y', 64) || '...%',
		'its error echoes the first 64 bytes of the name, once');
	m := pg_temp.message(format('SELECT cpht_create(10, name => %L)', repeat('é', 50000)));
	RETURN NEXT ok(m.state = '42602' AND length(m.msg) < 150 AND m.msg LIKE '%' || repeat('é', 32) || '...%',
		'a long multibyte name is cut at a whole character');
END $$;
SELECT pg_temp.name_tests();

-- ---- server files: absolute paths only, as for COPY to a file ---------------
SELECT throws_ok(format('SELECT cpht_export_file(%s, ''cpht_relative.keys'')', :h), '42602',
	'relative path not allowed for cpht_export_file', 'cpht_export_file refuses a relative path (42602)');
SELECT ok(NOT EXISTS (SELECT 1 FROM pg_ls_dir('.') AS f WHERE f LIKE 'cpht_relative.keys%'),
	'and writes nothing into the data directory');
SELECT throws_ok(format('SELECT cpht_import_file(%s, ''postmaster.pid'')', :h), '42602',
	'relative path not allowed for cpht_import_file', 'cpht_import_file refuses a relative path (42602)');

-- ---- a private table in a parallel worker: 0A000 ----------------------------
-- A function marked PARALLEL SAFE (wrongly) takes a private table's handle
-- into a parallel worker, which cannot reach it.
CREATE FUNCTION pg_temp.count_in(handle int) RETURNS bigint LANGUAGE sql PARALLEL SAFE
AS 'SELECT cpht_count(handle)';
SET LOCAL force_parallel_mode = on;
SET LOCAL parallel_setup_cost = 0;
SET LOCAL parallel_tuple_cost = 0;
SET LOCAL max_parallel_workers_per_gather = 2;
SELECT throws_ok(format('SELECT pg_temp.count_in(%s)', :h), '0A000',
	format('cpht table %s cannot be used in a parallel worker', :h),
	'a private table named in a parallel worker is 0A000');
RESET force_parallel_mode;

SELECT * FROM finish();
ROLLBACK;
