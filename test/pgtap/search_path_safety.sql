-- The statements cpht builds and runs name every operator, function and
-- type by its schema: with a schema `evil` first in the caller's
-- search_path, holding operators and functions that shadow those of
-- pg_catalog and of cpht, none of them runs, and every answer is right.
-- Covered: cpht_insert_new (the fast path, into a target with and without
-- an index on the key, and the cpht_fop_rows statement of a view source),
-- cpht_fop_rows, cpht_fop_relation and cpht_fop_new_relation (a plain
-- table and a view), cpht_export/cpht_import_agg,
-- cpht_export_file/cpht_import_file; cpht_insert_new into a shared table
-- when cpht is preloaded.
--
-- Each shadowing function logs the call it ran in (sp.call) into sp_log
-- and returns the answer pg_catalog's would.  The calls run with the
-- search_path set, their answers kept in psql variables; the checks run
-- with it reset (pgTAP's own functions compare with `=`).
BEGIN;
SELECT plan(23);

\ir include/shared_sessions.psql

SELECT extnamespace::regnamespace AS cpht_schema FROM pg_extension WHERE extname = 'cpht' \gset

-- 1000 rows, ids 1..300 (each id on several pages); ids 1..100 are seen
CREATE TABLE sp_src AS
	SELECT (g * 7 % 300 + 1)::bigint AS id, g AS payload FROM generate_series(1, 1000) g;
CREATE VIEW sp_view AS SELECT id, payload FROM sp_src;
CREATE TABLE sp_pk (id bigint PRIMARY KEY, payload int);
CREATE TABLE sp_heap (id bigint, payload int);
CREATE TABLE sp_from_view (id bigint PRIMARY KEY, payload int);
CREATE TABLE sp_log (call text, what text);

-- ---- the schema that shadows ------------------------------------------------
CREATE SCHEMA evil;
DO $do$
DECLARE
	t text;
	o text;
	i int := 0;
BEGIN
	FOREACH t IN ARRAY ARRAY['tid', 'bigint', 'integer', 'smallint', 'text', 'name', 'oid', 'regclass']
	LOOP
		FOREACH o IN ARRAY ARRAY['=', '<>', '<', '<=', '>', '>=']
		LOOP
			i := i + 1;
			EXECUTE format($f$CREATE FUNCTION evil.op_%s(a %s, b %s) RETURNS boolean
				LANGUAGE plpgsql SET search_path = pg_catalog AS $b$
				BEGIN
					INSERT INTO public.sp_log VALUES (current_setting('sp.call', true), %L);
					RETURN a OPERATOR(pg_catalog.%s) b;
				END $b$ $f$, i, t, t, format('%s(%s, %s)', o, t, t), o);
			EXECUTE format('CREATE OPERATOR evil.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = evil.op_%s)',
				o, t, t, i);
		END LOOP;
	END LOOP;
END $do$;
-- cpht's own function, which cpht_insert_new's statement for a view calls
CREATE FUNCTION evil.cpht_fop_rows(handle int, rowtype anyelement, query text, key_column text DEFAULT 'id')
RETURNS SETOF anyelement LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
	INSERT INTO public.sp_log VALUES (current_setting('sp.call', true), 'cpht_fop_rows');
END $$;
CREATE FUNCTION evil.unnest(anyarray) RETURNS SETOF anyelement
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
	INSERT INTO public.sp_log VALUES (current_setting('sp.call', true), 'unnest');
	RETURN QUERY SELECT * FROM pg_catalog.unnest($1);
END $$;
CREATE FUNCTION evil.int8(integer) RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
	INSERT INTO public.sp_log VALUES (current_setting('sp.call', true), 'int8(integer)');
	RETURN $1;
END $$;

-- the tables, each holding ids 1..100
CREATE FUNCTION pg_temp.seeded() RETURNS int LANGUAGE plpgsql AS $$
DECLARE
	h int := cpht_create(1000);
BEGIN
	PERFORM cpht_put(h, ARRAY(SELECT generate_series(1, 100)::bigint));
	RETURN h;
END $$;
SELECT pg_temp.seeded() AS h_pk, pg_temp.seeded() AS h_heap, pg_temp.seeded() AS h_view,
	   pg_temp.seeded() AS h_rows, pg_temp.seeded() AS h_rel, pg_temp.seeded() AS h_rel_view,
	   pg_temp.seeded() AS h_new, pg_temp.seeded() AS h_new_view,
	   cpht_create(1000) AS h_imp, cpht_create(1000) AS h_imp_file \gset
SELECT format('/tmp/cpht_tap_search_path_%s.keys', pg_backend_pid()) AS file \gset

-- ---- the calls, with evil first in the search_path --------------------------
SET LOCAL search_path = evil, public, pg_catalog;
SET LOCAL sp.call = 'cpht_insert_new';
SELECT cpht_insert_new(:h_pk, 'sp_src', 'sp_pk') AS r_pk \gset
SET LOCAL sp.call = 'cpht_insert_new, heap order';
SELECT cpht_insert_new(:h_heap, 'sp_src', 'sp_heap') AS r_heap \gset
SET LOCAL sp.call = 'cpht_insert_new, view';
SELECT cpht_insert_new(:h_view, 'sp_view', 'sp_from_view') AS r_view \gset
SET LOCAL sp.call = 'cpht_fop_rows';
SELECT count(*) AS r_rows FROM :cpht_schema.cpht_fop_rows(:h_rows, NULL::sp_src, 'SELECT * FROM public.sp_src', 'id') \gset
SET LOCAL sp.call = 'cpht_fop_relation';
SELECT cpht_fop_relation(:h_rel, 'sp_src') AS r_rel \gset
SET LOCAL sp.call = 'cpht_fop_relation, view';
SELECT cpht_fop_relation(:h_rel_view, 'sp_view') AS r_rel_view \gset
SET LOCAL sp.call = 'cpht_fop_new_relation';
SELECT count(*) AS r_new FROM cpht_fop_new_relation(:h_new, 'sp_src') \gset
SET LOCAL sp.call = 'cpht_fop_new_relation, view';
SELECT count(*) AS r_new_view FROM cpht_fop_new_relation(:h_new_view, 'sp_view') \gset
SET LOCAL sp.call = 'cpht_export, cpht_import_agg';
CREATE TEMP TABLE sp_backup AS SELECT * FROM cpht_export(:h_pk);
SELECT cpht_import_agg(:h_imp, chunk ORDER BY seq) AS r_imp FROM sp_backup \gset
SET LOCAL sp.call = 'cpht_export_file, cpht_import_file';
SELECT cpht_export_file(:h_pk, :'file') AS r_exp_file \gset
SELECT cpht_import_file(:h_imp_file, :'file') AS r_imp_file \gset
RESET sp.call;
SET LOCAL search_path = public, pg_catalog;
SELECT format('COPY (SELECT 1) TO PROGRAM %L', 'rm -f ' || :'file') \gexec

-- ---- the checks ---------------------------------------------------------------
CREATE FUNCTION pg_temp.ran(c text) RETURNS text LANGUAGE sql AS $$
	SELECT coalesce(string_agg(format('%s (%s times)', what, n), ', ' ORDER BY what), 'nothing')
	FROM (SELECT what, count(*) AS n FROM sp_log WHERE call = c GROUP BY what) s
$$;

SELECT is(pg_temp.ran('cpht_insert_new'), 'nothing',
	'cpht_insert_new, into a target indexed by the key: no operator or function of schema evil ran');
SELECT is(:r_pk::bigint || '/' || (SELECT count(DISTINCT id) FROM sp_pk), '200/200',
	'and it inserted one row per new id');
SELECT is(pg_temp.ran('cpht_insert_new, heap order'), 'nothing',
	'cpht_insert_new, into a target without an index: no operator or function of schema evil ran');
SELECT is(:r_heap::bigint || '/' || (SELECT count(DISTINCT id) FROM sp_heap), '200/200',
	'and it inserted one row per new id');
SELECT is(pg_temp.ran('cpht_insert_new, view'), 'nothing',
	'cpht_insert_new from a view (through cpht_fop_rows): no operator or function of schema evil ran');
SELECT is(:r_view::bigint || '/' || (SELECT count(*) FROM sp_from_view), '200/200',
	'and it inserted one row per new id');
SELECT is(pg_temp.ran('cpht_fop_rows'), 'nothing',
	'cpht_fop_rows: no operator or function of schema evil ran');
SELECT is(:r_rows::bigint, 200::bigint, 'and it returned one row per new id');
SELECT is(pg_temp.ran('cpht_fop_relation'), 'nothing',
	'cpht_fop_relation of a table: no operator or function of schema evil ran');
SELECT is(:r_rel::bigint, 200::bigint, 'and it counted the new ids');
SELECT is(pg_temp.ran('cpht_fop_relation, view'), 'nothing',
	'cpht_fop_relation of a view: no operator or function of schema evil ran');
SELECT is(:r_rel_view::bigint, 200::bigint, 'and it counted the new ids');
SELECT is(pg_temp.ran('cpht_fop_new_relation'), 'nothing',
	'cpht_fop_new_relation of a table: no operator or function of schema evil ran');
SELECT is(:r_new::bigint, 200::bigint, 'and it listed the new ids');
SELECT is(pg_temp.ran('cpht_fop_new_relation, view'), 'nothing',
	'cpht_fop_new_relation of a view: no operator or function of schema evil ran');
SELECT is(:r_new_view::bigint, 200::bigint, 'and it listed the new ids');
SELECT is(pg_temp.ran('cpht_export, cpht_import_agg'), 'nothing',
	'cpht_export and cpht_import_agg: no operator or function of schema evil ran');
SELECT is(:r_imp::bigint || '/' || cpht_count(:h_imp), '300/300', 'and every key came across');
SELECT is(pg_temp.ran('cpht_export_file, cpht_import_file'), 'nothing',
	'cpht_export_file and cpht_import_file: no operator or function of schema evil ran');
SELECT is(:r_exp_file::bigint || '/' || :r_imp_file::bigint || '/' || cpht_count(:h_imp_file), '300/300/300',
	'and every key came across');

-- ---- a shared table (cpht preloaded) --------------------------------------------
SELECT pg_temp.why_skip() AS why_shared, pg_temp.why_skip() IS NULL AS shared_ok \gset
\if :shared_ok
SELECT pg_temp.connect('a') AS ignored \gset
SELECT pg_temp.remote('a', $q$SELECT cpht_create(1000, name => 'sp_shared', transactional => false)$q$) AS ignored \gset
SELECT cpht_open('sp_shared') AS h_shared \gset
SELECT cpht_put(:h_shared, ARRAY(SELECT generate_series(1, 100)::bigint)) AS ignored \gset
CREATE TABLE sp_shared_tgt (id bigint PRIMARY KEY, payload int);
SET LOCAL search_path = evil, public, pg_catalog;
SET LOCAL sp.call = 'cpht_insert_new, shared';
SELECT cpht_insert_new(:h_shared, 'sp_src', 'sp_shared_tgt') AS r_shared \gset
RESET sp.call;
SET LOCAL search_path = public, pg_catalog;
SELECT is(pg_temp.ran('cpht_insert_new, shared'), 'nothing',
	'cpht_insert_new into a shared table: no operator or function of schema evil ran');
SELECT is(:r_shared::bigint || '/' || (SELECT count(*) FROM sp_shared_tgt), '200/200',
	'and it inserted one row per new id');
SELECT pg_temp.remote('a', $q$SELECT cpht_drop(cpht_open('sp_shared'))$q$) AS ignored \gset
SELECT dblink_disconnect('a') AS ignored \gset
\else
SELECT skip(:'why_shared', 2);
\endif

SELECT is((SELECT count(*) FROM sp_log), 0::bigint, 'nothing of schema evil ran at all');

SELECT * FROM finish();
ROLLBACK;
