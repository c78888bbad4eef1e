-- The SQL interface as the catalog sees it: names, arguments, results,
-- kinds, volatility, parallel safety, strictness; and who may call it.
BEGIN;
SELECT plan(16);

-- Every function and aggregate of the extension: a new one must be added here.
SELECT is(
	ARRAY(SELECT format('%s(%s) -> %s, kind %s, volatility %s, parallel %s, strict %s',
						p.proname, pg_get_function_arguments(p.oid),
						pg_get_function_result(p.oid), p.prokind, p.provolatile,
						p.proparallel, p.proisstrict)
		  FROM pg_proc p
		  JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
		  JOIN pg_extension e ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid
		  WHERE e.extname = 'cpht'
		  ORDER BY p.proname COLLATE "C", pg_get_function_arguments(p.oid) COLLATE "C"),
	ARRAY[
		'cpht_alter_owner(name text, new_owner regrole) -> void, kind f, volatility v, parallel u, strict t',
		-- array_agg of bigint with a combine function: the planner puts it in
		-- place of array_agg where an array function takes the array (src/plan/array_agg.c)
		'cpht_array_agg(key bigint) -> bigint[], kind a, volatility i, parallel s, strict f',
		'cpht_array_agg_combine(internal, internal) -> internal, kind f, volatility i, parallel s, strict f',
		'cpht_array_agg_deserialize(bytea, internal) -> internal, kind f, volatility i, parallel s, strict t',
		'cpht_array_agg_final(internal) -> bigint[], kind f, volatility i, parallel s, strict f',
		'cpht_array_agg_serialize(internal) -> bytea, kind f, volatility i, parallel s, strict t',
		'cpht_array_agg_step(internal, bigint) -> internal, kind f, volatility i, parallel s, strict f',
		'cpht_catalog_sync() -> bigint, kind f, volatility v, parallel u, strict t',
		'cpht_checkpoint() -> integer, kind f, volatility v, parallel u, strict t',
		'cpht_count(handle cpht_table) -> bigint, kind f, volatility v, parallel r, strict t',
		'cpht_count(handle integer) -> bigint, kind f, volatility v, parallel r, strict t',
		-- not strict: name, key_bits and shards default to NULL (a NULL among the others gives NULL)
		'cpht_create(capacity bigint, kind text DEFAULT ''iceberg''::text, key_bits integer DEFAULT NULL::integer, transactional boolean DEFAULT true, name text DEFAULT NULL::text, shards integer DEFAULT NULL::integer, durable boolean DEFAULT false, if_not_exists boolean DEFAULT false) -> integer, kind f, volatility v, parallel u, strict f',
		'cpht_delete(handle cpht_table, keys bigint[]) -> boolean[], kind f, volatility v, parallel u, strict t',
		'cpht_delete(handle integer, keys bigint[]) -> boolean[], kind f, volatility v, parallel u, strict t',
		'cpht_drop(handle cpht_table) -> void, kind f, volatility v, parallel u, strict t',
		'cpht_drop(handle integer) -> void, kind f, volatility v, parallel u, strict t',
		'cpht_drop_all() -> integer, kind f, volatility v, parallel u, strict t',
		'cpht_export(handle cpht_table, OUT seq bigint, OUT chunk bytea) -> SETOF record, kind f, volatility v, parallel r, strict t',
		'cpht_export(handle integer, OUT seq bigint, OUT chunk bytea) -> SETOF record, kind f, volatility v, parallel r, strict t',
		'cpht_export_file(handle cpht_table, path text) -> bigint, kind f, volatility v, parallel u, strict t',
		'cpht_export_file(handle integer, path text) -> bigint, kind f, volatility v, parallel u, strict t',
		'cpht_find(handle cpht_table, keys bigint[]) -> boolean[], kind f, volatility v, parallel r, strict t',
		'cpht_find(handle integer, keys bigint[]) -> boolean[], kind f, volatility v, parallel r, strict t',
		-- restricted, as those that write arrays: they run in the leader, so
		-- the keys they take can be gathered by parallel workers
		'cpht_fop(handle cpht_table, keys bigint[]) -> boolean[], kind f, volatility v, parallel r, strict t',
		'cpht_fop(handle integer, keys bigint[]) -> boolean[], kind f, volatility v, parallel r, strict t',
		-- the planner reads the aggregate's own volatility (CREATE
		-- AGGREGATE records i; the extension script sets v); parallel safe,
		-- but planned in parallel only over shared tables (src/plan/hooks.c)
		'cpht_fop_agg(handle cpht_table, key bigint) -> bigint, kind a, volatility v, parallel s, strict f',
		'cpht_fop_agg(handle integer, key bigint) -> bigint, kind a, volatility v, parallel s, strict f',
		'cpht_fop_agg_combine(internal, internal) -> internal, kind f, volatility v, parallel s, strict f',
		'cpht_fop_agg_deserialize(bytea, internal) -> internal, kind f, volatility v, parallel s, strict t',
		'cpht_fop_agg_final(internal) -> bigint, kind f, volatility v, parallel s, strict f',
		'cpht_fop_agg_serialize(internal) -> bytea, kind f, volatility v, parallel s, strict t',
		'cpht_fop_agg_step(internal, handle cpht_table, key bigint) -> internal, kind f, volatility v, parallel s, strict f',
		'cpht_fop_agg_step(internal, handle integer, key bigint) -> internal, kind f, volatility v, parallel s, strict f',
		'cpht_fop_new(handle cpht_table, keys bigint[]) -> bigint[], kind f, volatility v, parallel r, strict t',
		'cpht_fop_new(handle integer, keys bigint[]) -> bigint[], kind f, volatility v, parallel r, strict t',
		'cpht_fop_new_agg(handle cpht_table, key bigint) -> bigint[], kind a, volatility v, parallel s, strict f',
		'cpht_fop_new_agg(handle integer, key bigint) -> bigint[], kind a, volatility v, parallel s, strict f',
		'cpht_fop_new_agg_combine(internal, internal) -> internal, kind f, volatility v, parallel s, strict f',
		'cpht_fop_new_agg_deserialize(bytea, internal) -> internal, kind f, volatility v, parallel s, strict t',
		'cpht_fop_new_agg_final(internal) -> bigint[], kind f, volatility v, parallel s, strict f',
		'cpht_fop_new_agg_serialize(internal) -> bytea, kind f, volatility v, parallel s, strict t',
		'cpht_fop_new_agg_step(internal, handle cpht_table, key bigint) -> internal, kind f, volatility v, parallel s, strict f',
		'cpht_fop_new_agg_step(internal, handle integer, key bigint) -> internal, kind f, volatility v, parallel s, strict f',
		-- restricted: a scan of it runs in the leader; over a shared table
		-- the planner puts a parallel node in its place (src/plan/new_keys_planner.c)
		'cpht_fop_new_relation(handle cpht_table, rel regclass, key_column name DEFAULT ''id''::name) -> SETOF bigint, kind f, volatility v, parallel r, strict t',
		'cpht_fop_new_relation(handle integer, rel regclass, key_column name DEFAULT ''id''::name) -> SETOF bigint, kind f, volatility v, parallel r, strict t',
		'cpht_fop_relation(handle cpht_table, rel regclass, key_column name DEFAULT ''id''::name) -> bigint, kind f, volatility v, parallel u, strict t',
		'cpht_fop_relation(handle integer, rel regclass, key_column name DEFAULT ''id''::name) -> bigint, kind f, volatility v, parallel u, strict t',
		'cpht_fop_rows(handle cpht_table, rowtype anyelement, query text, key_column text DEFAULT ''id''::text) -> SETOF anyelement, kind f, volatility v, parallel u, strict f',
		'cpht_fop_rows(handle integer, rowtype anyelement, query text, key_column text DEFAULT ''id''::text) -> SETOF anyelement, kind f, volatility v, parallel u, strict f',
		'cpht_import_agg(handle cpht_table, chunk bytea) -> bigint, kind a, volatility v, parallel u, strict f',
		'cpht_import_agg(handle integer, chunk bytea) -> bigint, kind a, volatility v, parallel u, strict f',
		'cpht_import_agg_final(internal) -> bigint, kind f, volatility v, parallel u, strict f',
		'cpht_import_agg_step(internal, handle cpht_table, chunk bytea) -> internal, kind f, volatility v, parallel u, strict f',
		'cpht_import_agg_step(internal, handle integer, chunk bytea) -> internal, kind f, volatility v, parallel u, strict f',
		'cpht_import_file(handle cpht_table, path text) -> bigint, kind f, volatility v, parallel u, strict t',
		'cpht_import_file(handle integer, path text) -> bigint, kind f, volatility v, parallel u, strict t',
		'cpht_info(handle cpht_table) -> jsonb, kind f, volatility v, parallel r, strict t',
		'cpht_info(handle integer) -> jsonb, kind f, volatility v, parallel r, strict t',
		'cpht_insert_new(handle cpht_table, source regclass, target regclass, key_column name DEFAULT ''id''::name) -> bigint, kind f, volatility v, parallel u, strict t',
		'cpht_insert_new(handle integer, source regclass, target regclass, key_column name DEFAULT ''id''::name) -> bigint, kind f, volatility v, parallel u, strict t',
		'cpht_open(name text) -> integer, kind f, volatility v, parallel u, strict t',
		'cpht_put(handle cpht_table, keys bigint[]) -> bigint, kind f, volatility v, parallel r, strict t',
		'cpht_put(handle integer, keys bigint[]) -> bigint, kind f, volatility v, parallel r, strict t',
		'cpht_rebuild(handle cpht_table) -> bigint, kind f, volatility v, parallel u, strict t',
		'cpht_rebuild(handle integer) -> bigint, kind f, volatility v, parallel u, strict t',
		'cpht_shared_tables_created() -> trigger, kind f, volatility v, parallel u, strict f',
		-- monitoring (docs/monitoring.md): cpht_stat_reset is not strict,
		-- its name defaults to NULL (every table of the database)
		'cpht_stat_progress(OUT pid integer, OUT datid oid, OUT relid oid, OUT operation text, OUT phase text, OUT handle integer, OUT table_name text, OUT keys_done bigint, OUT keys_known bigint, OUT new_keys bigint, OUT rows_done bigint, OUT rows_known bigint) -> SETOF record, kind f, volatility v, parallel r, strict t',
		'cpht_stat_reset(name text DEFAULT NULL::text) -> void, kind f, volatility v, parallel r, strict f',
		'cpht_stat_tables(OUT handle integer, OUT name text, OUT owner regrole, OUT durable boolean, OUT transactional boolean, OUT keys bigint, OUT bytes bigint, OUT calls bigint, OUT keys_sent bigint, OUT new_keys bigint, OUT call_time_ms double precision, OUT waits bigint, OUT growths bigint, OUT snapshot_lsn pg_lsn, OUT snapshot_time timestamp with time zone, OUT wal_keep_lsn pg_lsn, OUT wal_held_bytes bigint, OUT stats_reset timestamp with time zone) -> SETOF record, kind f, volatility v, parallel r, strict t',
		'cpht_table(text) -> cpht_table, kind f, volatility v, parallel r, strict t',
		'cpht_table_in(cstring) -> cpht_table, kind f, volatility s, parallel r, strict t',
		'cpht_table_out(cpht_table) -> cstring, kind f, volatility s, parallel s, strict t',
		'cpht_tables(OUT handle integer, OUT kind text, OUT device text, OUT key_bits integer, OUT count bigint, OUT bytes bigint, OUT name text, OUT owner regrole, OUT shared boolean, OUT placement text) -> SETOF record, kind f, volatility v, parallel r, strict t',
		'cpht_worker_info() -> jsonb, kind f, volatility v, parallel s, strict t'
	],
	'functions, arguments, results, kinds, volatility, parallel safety and strictness');

SELECT is(
	ARRAY(SELECT format('%s, %s, %s, %s, %s, %s, %s', aggtransfn::regprocedure, aggfinalfn, aggtranstype::regtype,
						aggkind, aggcombinefn, aggserialfn, aggdeserialfn)
		  FROM pg_aggregate
		  WHERE aggfnoid IN ('cpht_fop_agg(int, bigint)'::regprocedure, 'cpht_fop_agg(cpht_table, bigint)'::regprocedure)
		  ORDER BY 1),
	ARRAY['cpht_fop_agg_step(internal,cpht_table,bigint), cpht_fop_agg_final, internal, n, cpht_fop_agg_combine, cpht_fop_agg_serialize, cpht_fop_agg_deserialize',
		  'cpht_fop_agg_step(internal,integer,bigint), cpht_fop_agg_final, internal, n, cpht_fop_agg_combine, cpht_fop_agg_serialize, cpht_fop_agg_deserialize'],
	'cpht_fop_agg (of a handle and of a name): a plain aggregate with an internal state, combined from parallel workers');
SELECT is(
	(SELECT format('%s, %s, %s, %s, %s, %s, %s', aggtransfn, aggfinalfn, aggtranstype::regtype, aggkind,
				   aggcombinefn, aggserialfn, aggdeserialfn)
	 FROM pg_aggregate WHERE aggfnoid = 'cpht_array_agg(bigint)'::regprocedure),
	'cpht_array_agg_step, cpht_array_agg_final, internal, n, cpht_array_agg_combine, cpht_array_agg_serialize, cpht_array_agg_deserialize',
	'cpht_array_agg: a plain aggregate with an internal state, combined from parallel workers');

SELECT is(cpht_create(capacity => 100, key_bits => 16, kind => 'cuckoo', transactional => false) > 0, true,
	'cpht_create takes named arguments');
SELECT is(cpht_info(cpht_create(100, transactional => false))->'transactional', 'false'::jsonb,
	'transactional => false makes a table without an undo log');
SELECT is(cpht_info(cpht_create(100))->'transactional', 'true'::jsonb,
	'tables are transactional by default');

-- By default every role may call the functions; REVOKE restricts them.
CREATE ROLE cpht_tap_role NOLOGIN;
CREATE TEMP TABLE tap_rows (id bigint);
SET LOCAL ROLE cpht_tap_role;
SELECT lives_ok('SELECT cpht_drop(cpht_create(10))', 'any role may use cpht by default');
RESET ROLE;
REVOKE EXECUTE ON FUNCTION cpht_create(bigint, text, int, boolean, text, int, boolean, boolean) FROM PUBLIC;
SET LOCAL ROLE cpht_tap_role;
SELECT throws_ok('SELECT cpht_create(10)', '42501', 'permission denied for function cpht_create',
	'REVOKE EXECUTE ... FROM PUBLIC restricts cpht_create');
RESET ROLE;
GRANT EXECUTE ON FUNCTION cpht_create(bigint, text, int, boolean, text, int, boolean, boolean) TO cpht_tap_role;
SET LOCAL ROLE cpht_tap_role;
SELECT lives_ok('SELECT cpht_drop(cpht_create(10))', 'GRANT EXECUTE ... TO a role allows it again');
RESET ROLE;

-- The whole extension in a schema of its own, closed to PUBLIC and opened
-- to one role (what docs/security.md recommends).
CREATE SCHEMA cpht_tap_schema;
ALTER EXTENSION cpht SET SCHEMA cpht_tap_schema;
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA cpht_tap_schema FROM PUBLIC;
SELECT cpht_tap_schema.cpht_create(1000) AS granted_h \gset
GRANT USAGE ON SCHEMA cpht_tap_schema TO cpht_tap_role;
SET LOCAL ROLE cpht_tap_role;
SELECT throws_ok('SELECT cpht_tap_schema.cpht_count(1)', '42501',
	'permission denied for function cpht_count', 'REVOKE ... ON ALL FUNCTIONS restricts cpht_count');
SELECT throws_ok('SELECT cpht_tap_schema.cpht_fop_agg(1, g) FROM generate_series(1, 10) g', '42501',
	'permission denied for aggregate cpht_fop_agg', '... and the aggregate cpht_fop_agg');
SELECT throws_ok($$SELECT * FROM cpht_tap_schema.cpht_fop_rows(1, NULL::tap_rows, 'SELECT 1::bigint AS id')$$,
	'42501', 'permission denied for function cpht_fop_rows', '... and cpht_fop_rows');
RESET ROLE;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA cpht_tap_schema TO cpht_tap_role;
SET LOCAL ROLE cpht_tap_role;
SELECT lives_ok($$SELECT cpht_tap_schema.cpht_create(10)$$,
	'GRANT EXECUTE ON ALL FUNCTIONS ... TO a role allows cpht_create');
SELECT is(
	(SELECT cpht_tap_schema.cpht_fop_agg(c.h, g)
	 FROM (SELECT cpht_tap_schema.cpht_create(100) AS h) c, generate_series(1, 10) g),
	10::bigint, '... and cpht_fop_agg');
SELECT is(
	(SELECT count(*) FROM cpht_tap_schema.cpht_fop_rows(cpht_tap_schema.cpht_create(100), NULL::tap_rows,
		'SELECT g::bigint AS id FROM generate_series(1, 10) g')),
	10::bigint, '... and cpht_fop_rows');
-- the tables are the session's, whoever the current role: the role reaches
-- the table the superuser created
SELECT is(cpht_tap_schema.cpht_count(:granted_h), 0::bigint,
	'a table belongs to the session, not to the role');
RESET ROLE;

SELECT cpht_tap_schema.cpht_drop_all() >= 0 AS clean \gset
SELECT * FROM finish();
ROLLBACK;
