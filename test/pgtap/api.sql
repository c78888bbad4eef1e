-- The SQL interface as the catalog sees it: names, arguments, results,
-- volatility, parallel safety, strictness; and who may call it.
BEGIN;
SELECT plan(5);

SELECT is(
	ARRAY(SELECT format('%s(%s) -> %s, volatility %s, parallel %s, strict %s',
						p.proname, pg_get_function_arguments(p.oid),
						pg_get_function_result(p.oid), p.provolatile,
						p.proparallel, p.proisstrict)
		  FROM pg_proc p
		  JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
		  JOIN pg_extension e ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid
		  WHERE e.extname = 'cpht'
			AND p.proname IN ('cpht_count', 'cpht_create', 'cpht_delete', 'cpht_drop',
							  'cpht_drop_all', 'cpht_find', 'cpht_fop', 'cpht_fop_new',
							  'cpht_info', 'cpht_put', 'cpht_tables')
		  ORDER BY p.proname COLLATE "C"),
	ARRAY[
		'cpht_count(handle integer) -> bigint, volatility v, parallel r, strict t',
		'cpht_create(capacity bigint, kind text DEFAULT ''iceberg''::text, key_bits integer DEFAULT 64) -> integer, volatility v, parallel u, strict t',
		'cpht_delete(handle integer, keys bigint[]) -> boolean[], volatility v, parallel u, strict t',
		'cpht_drop(handle integer) -> void, volatility v, parallel u, strict t',
		'cpht_drop_all() -> integer, volatility v, parallel u, strict t',
		'cpht_find(handle integer, keys bigint[]) -> boolean[], volatility v, parallel r, strict t',
		'cpht_fop(handle integer, keys bigint[]) -> boolean[], volatility v, parallel u, strict t',
		'cpht_fop_new(handle integer, keys bigint[]) -> bigint[], volatility v, parallel u, strict t',
		'cpht_info(handle integer) -> jsonb, volatility v, parallel r, strict t',
		'cpht_put(handle integer, keys bigint[]) -> bigint, volatility v, parallel u, strict t',
		'cpht_tables(OUT handle integer, OUT kind text, OUT device text, OUT key_bits integer, OUT count bigint, OUT bytes bigint) -> SETOF record, volatility v, parallel r, strict t'
	],
	'functions, arguments, results, volatility, parallel safety and strictness');

SELECT is(cpht_create(capacity => 100, key_bits => 16, kind => 'cuckoo') > 0, true,
	'cpht_create takes named arguments');

-- By default every role may call the functions; REVOKE restricts them.
CREATE ROLE cpht_tap_role NOLOGIN;
SET LOCAL ROLE cpht_tap_role;
SELECT lives_ok('SELECT cpht_drop(cpht_create(10))', 'any role may use cpht by default');
RESET ROLE;
REVOKE EXECUTE ON FUNCTION cpht_create(bigint, text, int) FROM PUBLIC;
SET LOCAL ROLE cpht_tap_role;
SELECT throws_ok('SELECT cpht_create(10)', '42501', 'permission denied for function cpht_create',
	'REVOKE EXECUTE ... FROM PUBLIC restricts cpht_create');
RESET ROLE;
GRANT EXECUTE ON FUNCTION cpht_create(bigint, text, int) TO cpht_tap_role;
SET LOCAL ROLE cpht_tap_role;
SELECT lives_ok('SELECT cpht_drop(cpht_create(10))', 'GRANT EXECUTE ... TO a role allows it again');
RESET ROLE;

SELECT cpht_drop_all() >= 0 AS clean \gset
SELECT * FROM finish();
ROLLBACK;
