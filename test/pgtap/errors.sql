-- The SQLSTATE and message of every error cpht raises (README.md lists
-- them).  The GPU errors (55000 no usable GPU) are in gpu.sql; 58000 (a
-- CUDA call failed) cannot be provoked from SQL.
BEGIN;
SELECT plan(46);

SELECT cpht_drop_all() >= 0 AS clean \gset
SELECT cpht_create(1000, 'iceberg') AS hi, cpht_create(1000, 'cuckoo') AS hc,
	cpht_create(1000, 'iceberg', 12) AS h12 \gset
SELECT cpht_create(10) AS gone \gset
SELECT cpht_drop(:gone) IS NOT NULL AS dropped \gset

-- 22023 invalid_parameter_value: arguments of cpht_create
SELECT throws_ok('SELECT cpht_create(0)', '22023', 'capacity must be positive',
	'capacity 0');
SELECT throws_ok('SELECT cpht_create(-1, ''cuckoo'')', '22023', 'capacity must be positive',
	'negative capacity');
SELECT throws_ok('SELECT cpht_create(10, ''hopscotch'')', '22023',
	'unknown cpht table kind "hopscotch"', 'unknown kind');
SELECT throws_ok('SELECT cpht_create(10, ''iceberg'', 7)', '22023',
	'key_bits must be between 8 and 64, not 7', 'key_bits below 8');
SELECT throws_ok('SELECT cpht_create(10, ''cuckoo'', 65)', '22023',
	'key_bits must be between 8 and 64, not 65', 'key_bits above 64');
SELECT throws_ok('SET cpht.device = tpu', '22023', NULL, 'unknown cpht.device value');

-- 54000 program_limit_exceeded: more keys than any layout addresses
SELECT throws_ok('SELECT cpht_create(9223372036854775807)', '54000',
	'capacity 9223372036854775807 is too large for a cpht table', 'capacity beyond the layout, iceberg');
SELECT throws_ok('SELECT cpht_create(4611686018427387904, ''cuckoo'')', '54000',
	'capacity 4611686018427387904 is too large for a cpht table', 'capacity beyond the layout, cuckoo');

-- 53200 out_of_memory: a layout no memory holds (16 PiB of slots)
SELECT throws_ok('SELECT cpht_create(2251799813685248)', '53200',
	'out of memory for a new cpht table', 'capacity beyond memory, iceberg');
SELECT throws_ok('SELECT cpht_create(2251799813685248, ''cuckoo'')', '53200',
	'out of memory for a new cpht table', 'capacity beyond memory, cuckoo');

-- 42704 undefined_object: unknown and dropped handles, every function
SELECT throws_ok(format('SELECT %s', f), '42704',
	format('cpht table %s does not exist', h), format('%s on %s handle', split_part(f, '(', 1), what))
FROM (VALUES ('unknown', 0), ('unknown', 2147483647), ('dropped', :gone)) AS w(what, h),
	LATERAL (VALUES
		(format('cpht_fop(%s, ''{1}'')', h)),
		(format('cpht_fop_new(%s, ''{1}'')', h)),
		(format('cpht_find(%s, ''{1}'')', h)),
		(format('cpht_put(%s, ''{1}'')', h)),
		(format('cpht_delete(%s, ''{1}'')', h)),
		(format('cpht_count(%s)', h)),
		(format('cpht_info(%s)', h)),
		(format('cpht_drop(%s)', h))) AS fn(f)
WHERE what = 'dropped' OR f LIKE 'cpht_fop(%' OR f LIKE 'cpht_drop(%';

-- 22004 null_value_not_allowed: a NULL key, every batch function
SELECT throws_ok(format('SELECT %s(%s, ARRAY[1, NULL]::bigint[])', f, :hi), '22004',
	'keys must not be null', f || ' with a NULL key')
FROM unnest(ARRAY['cpht_fop', 'cpht_fop_new', 'cpht_find', 'cpht_put', 'cpht_delete']) AS f;

-- 2202E array_subscript_error: more than one dimension, every batch function
SELECT throws_ok(format('SELECT %s(%s, ''{{1,2},{3,4}}''::bigint[])', f, :hc), '2202E',
	'keys must be a one-dimensional array', f || ' with a 2-D array')
FROM unnest(ARRAY['cpht_fop', 'cpht_fop_new', 'cpht_find', 'cpht_put', 'cpht_delete']) AS f;

-- 22003 numeric_value_out_of_range: keys outside key_bits, every batch function
SELECT throws_ok(format('SELECT %s(%s, ''{1,4096}''::bigint[])', f, :h12), '22003',
	'key 4096 is out of range for a table with key_bits 12', f || ' with a key of 13 bits')
FROM unnest(ARRAY['cpht_fop', 'cpht_fop_new', 'cpht_find', 'cpht_put', 'cpht_delete']) AS f;
SELECT throws_ok(format('SELECT cpht_fop(%s, ''{-1}'')', :h12), '22003',
	'key -1 is out of range for a table with key_bits 12', 'negative key with key_bits 12');

-- 53000 insufficient_resources: a full table; nothing of the call stays
SELECT cpht_create(10, 'iceberg') AS fi, cpht_create(10, 'cuckoo') AS fc \gset
SELECT cpht_put(:fi, '{1,2,3}') + cpht_put(:fc, '{1,2,3}') AS six \gset
SELECT throws_ok(format('SELECT %s(%s, (SELECT array_agg(g) FROM generate_series(1, 20000) g))', f, h),
	'53000', format('cpht table %s is full', h), format('%s on a full %s table', f, k))
FROM (VALUES ('iceberg', :fi), ('cuckoo', :fc)) AS t(k, h),
	unnest(ARRAY['cpht_fop', 'cpht_fop_new', 'cpht_put']) AS f;
SELECT is(cpht_count(:fi), 3::bigint, 'full iceberg table kept its keys only');
SELECT is(cpht_count(:fc), 3::bigint, 'full cuckoo table kept its keys only');

SELECT cpht_drop_all() >= 0 AS clean \gset
SELECT * FROM finish();
ROLLBACK;
