-- Shared tables named wherever a handle goes (the cpht_table type): a
-- string picks the name overloads and an integer the handle ones; a name
-- of no shared table is 42704 (55000 without the cpht worker); the name
-- forms get the parallel plans of the handle forms (the aggregate, the
-- new-keys node) with the same answers as serial plans, EXPLAIN shows the
-- name, and a role without rights on the table is refused by name as by
-- handle.  Shared tables are created in dblink session a (autocommit).
BEGIN;
SELECT plan(31);

\ir include/shared_sessions.psql
\ir include/forced_parallel.psql
\ir include/new_keys.psql

-- SQLSTATE of a statement, or 'ok'.
CREATE FUNCTION pg_temp.state(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE sql;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE;
END $$;

-- Without the worker too: handles keep their overloads, strings name.
SELECT cpht_create(1000) AS priv \gset
SELECT is(cpht_put(:priv, '{1,2,3}'), 3::bigint, 'an integer handle still picks the handle overload');
SELECT is(cpht_count(:'priv'), 3::bigint,
	'a handle written as a string (an untyped parameter) still reaches its table');
SELECT is(pg_temp.state($$SELECT cpht_count('nm_no_such_table')$$),
	CASE WHEN (cpht_worker_info()->>'preloaded')::boolean THEN '42704' ELSE '55000' END,
	'a string is a name: no shared table of that name is 42704 (55000 without the cpht worker), not 22P02');
SELECT is(pg_temp.state($$SELECT cpht_count('99999999999')$$), '22003', 'a handle out of range is 22003');
CREATE ROLE cpht_n_plain NOLOGIN;
SELECT is(has_function_privilege('cpht_n_plain', 'cpht_export_file(cpht_table, text)', 'EXECUTE') OR
		  has_function_privilege('cpht_n_plain', 'cpht_import_file(cpht_table, text)', 'EXECUTE'), false,
	'the name forms of the file functions are not PUBLIC either');

SET LOCAL cpht.batch_size = 1024;
-- 60000 rows, 25000 distinct ids
CREATE TABLE nm_src AS
	SELECT (g * 7919 % 25000 + 1)::bigint AS id, g AS v FROM generate_series(1, 60000) g;
ANALYZE nm_src;
CREATE TABLE nm_target (LIKE nm_src);

CREATE FUNCTION pg_temp.name_tests() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	why text := pg_temp.why_skip();
	q text;
	r text;
	n bigint;
BEGIN
	IF why IS NOT NULL THEN
		RETURN NEXT skip(why, 23);
		RETURN;
	END IF;
	PERFORM pg_temp.connect('a');
	FOREACH r IN ARRAY ARRAY['nm_serial', 'nm_par', 'nm_hpar', 'nm_prep', 'nm_rel', 'nm_new', 'nm_ins', '123']
	LOOP
		PERFORM pg_temp.remote('a', format('SELECT cpht_create(100000, name => %L)', r));
	END LOOP;

	RETURN NEXT throws_ok($q$SELECT cpht_count('nm_none')$q$, '42704',
		'shared cpht table "nm_none" does not exist', 'a name of no shared table is 42704');
	RETURN NEXT is(cpht_fop('nm_serial', '{5,6}'), '{t,t}', 'cpht_fop takes a name');
	RETURN NEXT is(cpht_count('nm_serial'), 2::bigint, 'cpht_count takes a name');
	RETURN NEXT is(cpht_delete('nm_serial', '{5,6}'), '{t,t}', 'cpht_delete takes a name');
	RETURN NEXT is('nm_serial'::cpht_table::int, cpht_open('nm_serial'), 'a name holds the handle cpht_open gives');
	RETURN NEXT is('nm_serial'::cpht_table::text, 'nm_serial', 'it prints as its name');
	RETURN NEXT is('"123"'::cpht_table::int, cpht_open('123'), 'a name of digits is written in double quotes');
	RETURN NEXT is('"123"'::cpht_table::text, '"123"', '... and printed in them');
	RETURN NEXT is(cpht_count('nm_serial'::text), 0::bigint, 'text converts to a name');

	-- the aggregate: parallel by name as by handle, with the serial answers
	-- (planned as the aggregate it is: fop_agg_relation.sql checks the
	-- rewrite to the relation's scan)
	PERFORM set_config('cpht.fop_agg_relation_scan', 'off', true);
	PERFORM pg_temp.forced(2);
	q := pg_temp.plan($q$SELECT cpht_fop_agg('nm_par', id) FROM nm_src$q$);
	RETURN NEXT ok(q ~ 'Gather' AND q ~ 'Partial Aggregate', 'cpht_fop_agg by name is planned in parallel');
	q := pg_temp.plan(format('SELECT cpht_fop_agg(%s, id) FROM nm_src', cpht_open('nm_hpar')));
	RETURN NEXT ok(q ~ 'Gather' AND q ~ 'Partial Aggregate', '... as by handle');
	q := pg_temp.plan($q$SELECT cpht_fop_agg('nm_par', id) FROM nm_src$q$, 'VERBOSE, COSTS OFF');
	RETURN NEXT ok(q ~ '''nm_par''::cpht_table', 'EXPLAIN VERBOSE shows the name');
	n := pg_temp.scans('nm_src');
	RETURN NEXT is(pg_temp.value($q$SELECT cpht_fop_agg('nm_par', id) FROM nm_src$q$), '25000',
		'in parallel it counts every new key once');
	RETURN NEXT ok(pg_temp.scans('nm_src') > n, '... with parallel workers scanning');
	RETURN NEXT is(pg_temp.value(format('SELECT cpht_fop_agg(%s, id) FROM nm_src', cpht_open('nm_hpar'))), '25000',
		'... as the handle form does');
	PERFORM pg_temp.forced(0);
	RETURN NEXT ok(pg_temp.plan($q$SELECT cpht_fop_agg('nm_serial', id) FROM nm_src$q$) !~ 'Gather'
		AND pg_temp.value($q$SELECT cpht_fop_agg('nm_serial', id) FROM nm_src$q$) = '25000',
		'... as a serial plan does');
	RETURN NEXT is(cpht_find('nm_par', ARRAY(SELECT id FROM nm_src ORDER BY v)),
		cpht_find('nm_serial', ARRAY(SELECT id FROM nm_src ORDER BY v)),
		'the parallel and serial tables hold the same keys');
	PERFORM pg_temp.forced(2);
	-- an untyped parameter is a name too, and a custom plan goes parallel
	EXECUTE 'PREPARE nm_q AS SELECT cpht_fop_agg($1, id) FROM nm_src';
	q := pg_temp.plan($q$EXECUTE nm_q('nm_prep')$q$);
	RETURN NEXT ok(q ~ 'Gather', 'a name bound to a parameter is planned in parallel');
	EXECUTE 'DEALLOCATE nm_q';

	-- the relation functions and the new-keys node
	RETURN NEXT is(cpht_fop_relation('nm_rel', 'nm_src'), 25000::bigint, 'cpht_fop_relation takes a name');
	q := pg_temp.plan($q$SELECT count(*) FROM cpht_fop_new_relation('nm_new', 'nm_src')$q$);
	RETURN NEXT ok(pg_temp.has_node(q) AND q ~ 'Table: nm_new',
		'cpht_fop_new_relation by name gets the parallel node, whose EXPLAIN shows the name');
	RETURN NEXT is(pg_temp.value($q$SELECT count(*) FROM cpht_fop_new_relation('nm_new', 'nm_src')$q$), '25000',
		'... and returns every new key once');
	RETURN NEXT is(cpht_insert_new('nm_ins', 'nm_src', 'nm_target'), 25000::bigint, 'cpht_insert_new takes a name');

	FOREACH r IN ARRAY ARRAY['nm_serial', 'nm_par', 'nm_hpar', 'nm_prep', 'nm_rel', 'nm_new', 'nm_ins', '123']
	LOOP
		PERFORM pg_temp.remote('a', format('SELECT cpht_drop(cpht_open(%L))', r));
	END LOOP;
	RETURN NEXT is(pg_temp.state($q$SELECT cpht_count('nm_serial')$q$), '42704', 'a dropped table''s name is 42704');
	PERFORM dblink_disconnect('a');
END $$;

-- Another role: refused by name as by handle, in the aggregate too.
CREATE FUNCTION pg_temp.privilege_tests() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	why text := pg_temp.why_skip();
BEGIN
	IF why IS NOT NULL THEN
		RETURN NEXT skip(why, 3);
		RETURN;
	END IF;
	PERFORM pg_temp.connect('p');
	PERFORM dblink_exec('p', 'DROP ROLE IF EXISTS cpht_n_owner, cpht_n_other');
	PERFORM dblink_exec('p', 'CREATE ROLE cpht_n_owner');
	PERFORM dblink_exec('p', 'CREATE ROLE cpht_n_other');
	PERFORM dblink_exec('p', format('GRANT CREATE ON DATABASE %I TO cpht_n_owner', current_database()));
	PERFORM dblink_exec('p', 'SET ROLE cpht_n_owner');
	PERFORM pg_temp.remote('p', $q$SELECT cpht_create(1000, name => 'nm_priv')$q$);
	PERFORM dblink_exec('p', 'RESET ROLE');

	RETURN NEXT is(pg_temp.as_role('cpht_n_owner', $q$SELECT cpht_fop_agg('nm_priv', g) FROM generate_series(1, 10) g$q$), 'ok',
		'its owner uses it by name');
	RETURN NEXT is(pg_temp.as_role('cpht_n_other', $q$SELECT cpht_count('nm_priv')$q$), '42501',
		'another role may not name it (42501)');
	RETURN NEXT is(pg_temp.as_role('cpht_n_other', $q$SELECT cpht_fop_agg('nm_priv', g) FROM generate_series(1, 10) g$q$), '42501',
		'... nor in the aggregate');

	PERFORM pg_temp.remote('p', $q$SELECT cpht_drop(cpht_open('nm_priv'))$q$);
	PERFORM dblink_exec('p', format('REVOKE CREATE ON DATABASE %I FROM cpht_n_owner', current_database()));
	PERFORM dblink_exec('p', 'DROP ROLE cpht_n_owner, cpht_n_other');
	PERFORM dblink_disconnect('p');
END $$;

SELECT pg_temp.name_tests();
SELECT pg_temp.privilege_tests();
SELECT cpht_drop_all() >= 0 AS clean \gset
SELECT * FROM finish();
ROLLBACK;
