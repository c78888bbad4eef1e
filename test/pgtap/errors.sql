-- The SQLSTATE and message of every error cpht raises (docs/errors.md lists
-- them).  The GPU errors (55000 no usable GPU) are in gpu.sql; 58000 (a
-- CUDA call failed) cannot be provoked from SQL.  Runs as a superuser.
BEGIN;
SELECT plan(86);

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
		(format('cpht_rebuild(%s)', h)),
		(format('cpht_drop(%s)', h))) AS fn(f)
WHERE what = 'dropped' OR f LIKE 'cpht_fop(%' OR f LIKE 'cpht_drop(%' OR f LIKE 'cpht_rebuild(%';

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

-- 53000 insufficient_resources: a full table of fixed size (cpht.grow off);
-- nothing of the call stays
SET cpht.grow = off;
SELECT cpht_create(10, 'iceberg') AS fi, cpht_create(10, 'cuckoo') AS fc \gset
RESET cpht.grow;
SELECT cpht_put(:fi, '{1,2,3}') + cpht_put(:fc, '{1,2,3}') AS six \gset
SELECT throws_ok(format('SELECT %s(%s, (SELECT array_agg(g) FROM generate_series(1, 20000) g))', f, h),
	'53000', format('cpht table %s is full', h), format('%s on a full %s table', f, k))
FROM (VALUES ('iceberg', :fi), ('cuckoo', :fc)) AS t(k, h),
	unnest(ARRAY['cpht_fop', 'cpht_fop_new', 'cpht_put']) AS f;
SELECT is(cpht_count(:fi), 3::bigint, 'full iceberg table kept its keys only');
SELECT is(cpht_count(:fc), 3::bigint, 'full cuckoo table kept its keys only');

-- 53400 configuration_limit_exceeded: cpht.max_memory
SELECT cpht_create(100000) AS mm \gset
SELECT bytes AS mm_bytes, (SELECT sum(bytes) FROM cpht_tables()) AS mm_total
FROM cpht_tables() WHERE handle = :mm \gset
SELECT set_config('cpht.max_memory', ((:mm_total + :mm_bytes) / 1024 - 1)::text, true) IS NOT NULL AS set \gset
SELECT throws_ok('SELECT cpht_create(100000)', '53400',
	format('cpht table of %s bytes would exceed cpht.max_memory', :mm_bytes),
	'a table beyond cpht.max_memory');
SELECT throws_ok('SELECT cpht_create(1000000, ''cuckoo'')', '53400', NULL,
	'a cuckoo table beyond cpht.max_memory');
SELECT cpht_drop(:mm) IS NOT NULL AS dropped \gset
RESET cpht.max_memory;

-- 42501 insufficient_privilege: cpht.max_memory is for superusers only
CREATE ROLE cpht_tap_errors NOLOGIN;
SET LOCAL ROLE cpht_tap_errors;
SELECT throws_ok('SET cpht.max_memory = 0', '42501',
	'permission denied to set parameter "cpht.max_memory"', 'a non-superuser cannot SET cpht.max_memory');
SELECT throws_ok('SELECT set_config(''cpht.max_memory'', ''0'', false)', '42501',
	'permission denied to set parameter "cpht.max_memory"', '... nor set_config() it');
RESET ROLE;

-- 22023 invalid_parameter_value: cpht.batch_size below its minimum
SELECT throws_ok('SET cpht.batch_size = 1023', '22023',
	'1023 is outside the valid range for parameter "cpht.batch_size" (1024 .. 67108864)',
	'cpht.batch_size below 1024');

-- the streaming functions
CREATE TEMP TABLE st (id bigint, payload text);
INSERT INTO st VALUES (1, 'a'), (2, 'b');
SELECT throws_ok(format('SELECT * FROM cpht_fop_rows(%s, NULL::st, %L)', :hi,
						'SELECT id AS key, payload FROM st'),
	'42703', 'the query of cpht_fop_rows has no column "id"', 'cpht_fop_rows: no key column');
SELECT throws_ok(format('SELECT * FROM cpht_fop_rows(%s, NULL::st, %L, %L)', :hi,
						'SELECT * FROM st', 'key'),
	'42703', 'the query of cpht_fop_rows has no column "key"', 'cpht_fop_rows: no column key_column names');
SELECT throws_ok(format('SELECT * FROM cpht_fop_rows(%s, NULL::st, %L)', :hi,
						'SELECT id::numeric AS id, payload FROM st'),
	'42804', 'key column "id" must be of type bigint', 'cpht_fop_rows: key column not bigint');
CREATE TEMP TABLE st_int (id bigint, n int);
SELECT throws_ok(format('SELECT * FROM cpht_fop_rows(%s, NULL::st_int, %L)', :hi,
						'SELECT id, payload FROM st'),
	'42804', 'query column 2 is of type text, which cannot be stored in column "n" of type integer',
	'cpht_fop_rows: a column with no assignment cast to the row type''s');
SELECT throws_ok(format('SELECT * FROM cpht_fop_rows(%s, NULL::st, %L)', :hi,
						'SELECT id FROM st'),
	'42804', 'query columns do not match the row type', 'cpht_fop_rows: fewer columns');
SELECT throws_ok(format('SELECT * FROM cpht_fop_rows(%s, NULL::st, %L)', :hi,
						'SELECT * FROM st UNION ALL SELECT NULL, ''c'''),
	'22004', 'key column "id" is null in row 3 of a batch', 'cpht_fop_rows: a NULL key');
SELECT throws_ok(format('SELECT * FROM cpht_fop_rows(%s, NULL::st, %L)', :h12,
						'SELECT id * 4096 AS id, payload FROM st'),
	'22003', 'key 4096 is out of range for a table with key_bits 12', 'cpht_fop_rows: a key outside key_bits');
SELECT throws_ok(format('SELECT * FROM cpht_fop_rows(%s, NULL::st, %L)', :hi,
						'DELETE FROM st'),
	'22023', 'the query of cpht_fop_rows must be a SELECT', 'cpht_fop_rows: not a query');
SELECT throws_ok(format('SELECT * FROM cpht_fop_rows(%s, NULL::st, %L)', :hi, q),
	'22023', 'the query of cpht_fop_rows must be a SELECT', 'cpht_fop_rows: ' || what)
FROM (VALUES
	('a DELETE in WITH', 'WITH d AS (DELETE FROM st RETURNING *) SELECT * FROM d'),
	('INSERT ... RETURNING', 'INSERT INTO st VALUES (3, ''c'') RETURNING *'),
	('EXPLAIN', 'EXPLAIN SELECT * FROM st'),
	('SELECT ... FOR UPDATE', 'SELECT * FROM st FOR UPDATE'),
	('FOR SHARE in a subquery', 'SELECT * FROM (SELECT * FROM st FOR SHARE) s'),
	('two statements', 'SELECT * FROM st; SELECT * FROM st')) AS w(what, q);
SELECT is((SELECT count(*) FROM st), 2::bigint, 'the refused queries changed nothing');
SELECT throws_ok(format('SELECT * FROM cpht_fop_rows(%s, NULL::st, %L)', :hi,
						'SELEKT 1'),
	'42601', NULL, 'cpht_fop_rows: a syntax error in the query');
SELECT throws_ok(format('SELECT * FROM cpht_fop_rows(%s, NULL::st, %L)', h,
						'SELECT * FROM st'),
	'42704', format('cpht table %s does not exist', h), format('cpht_fop_rows on %s handle', what))
FROM (VALUES ('unknown', 0), ('dropped', :gone)) AS w(what, h);
SELECT throws_ok(format('SELECT cpht_fop_agg(%s, id) FROM st', h),
	'42704', format('cpht table %s does not exist', h), format('cpht_fop_agg on %s handle', what))
FROM (VALUES ('unknown', 0), ('dropped', :gone)) AS w(what, h);
SELECT throws_ok(format('SELECT cpht_fop_agg(%s, id * 4096) FROM st', :h12),
	'22003', 'key 4096 is out of range for a table with key_bits 12', 'cpht_fop_agg: a key outside key_bits');
SELECT throws_ok('SELECT cpht_fop_agg(NULL, id) FROM st',
	'22004', 'handle must not be null', 'cpht_fop_agg: a NULL handle');
SELECT throws_ok(format('SELECT cpht_fop_agg(CASE WHEN id = 1 THEN %s END, id ORDER BY id) FROM st', :hi),
	'22004', 'handle must not be null', 'cpht_fop_agg: a NULL handle in a later row');
SELECT throws_ok(format('SELECT cpht_fop_agg(CASE WHEN id = 1 THEN %s ELSE %s END, id ORDER BY id) FROM st', :hi, :h12),
	'22023', 'cpht_fop_agg must get the same handle in every row of a group', 'cpht_fop_agg: another handle in a later row');
SELECT is(cpht_count(:hi) + cpht_count(:h12), 0::bigint, 'the failing streams left no key');

-- Keys in a PL/pgSQL array variable (an expanded array, read in place
-- while it keeps the flat array it was made from, flattened once elements
-- were assigned): the same answers and the same errors as a flat array.
CREATE FUNCTION pg_temp.expanded_keys(h int, h12 int) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	a bigint[] := '{101,102,103}';
	b bigint[];
BEGIN
	RETURN NEXT is(cpht_fop(h, a), '{t,t,t}', 'a PL/pgSQL array variable as it was assigned');
	a[4] := 104;
	a[5] := 101;
	RETURN NEXT is(cpht_fop(h, a), '{f,f,f,t,f}', 'a PL/pgSQL array variable after element assignments');
	RETURN NEXT is(cpht_fop_new(h, a || 105::bigint), '{105}', 'an array expression built from one');
	b[3] := 200;
	b[4] := 101;
	RETURN NEXT is(cpht_find(h, b[3:4]), '{f,t}', 'a slice of an array variable');
	a[2] := NULL;
	RETURN NEXT throws_ok(format('SELECT cpht_fop(%s, %L::bigint[])', h, a), '22004', 'keys must not be null',
		'a NULL element of an array variable');
	BEGIN
		PERFORM cpht_put(h, a);
		RETURN NEXT fail('a NULL element assigned to an array variable is refused in place');
	EXCEPTION WHEN null_value_not_allowed THEN
		RETURN NEXT pass('a NULL element assigned to an array variable is refused in place');
	END;
	a[2] := 4096;
	BEGIN
		PERFORM cpht_put(h12, a);
		RETURN NEXT fail('a key outside key_bits in an array variable is refused in place');
	EXCEPTION WHEN numeric_value_out_of_range THEN
		RETURN NEXT pass('a key outside key_bits in an array variable is refused in place');
	END;
END $$;
SELECT pg_temp.expanded_keys(:hi, :h12);

SELECT cpht_drop_all() >= 0 AS clean \gset
SELECT * FROM finish();
ROLLBACK;
