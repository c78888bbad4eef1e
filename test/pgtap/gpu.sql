-- Tables on the GPU (cpht.device = gpu), checked against the same
-- operations on CPU tables and against PostgreSQL as the oracle.  Where no
-- GPU is usable, cpht.device = gpu must fail with 55000 and every GPU test
-- is reported as skipped, with the reason; nothing passes silently.
BEGIN;
SELECT plan(1 + 23);

SELECT cpht_drop_all() >= 0 AS clean \gset
SELECT setseed(0.777);

-- Why cpht.device = gpu cannot create a table here, or NULL if it can.
CREATE FUNCTION pg_temp.gpu_unusable() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	detail text;
BEGIN
	PERFORM cpht_drop(cpht_create(1000));
	RETURN NULL;
EXCEPTION WHEN object_not_in_prerequisite_state THEN
	GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
	RETURN coalesce(detail, 'no detail given');
END $$;

CREATE FUNCTION pg_temp.r64() RETURNS bigint LANGUAGE sql VOLATILE AS
$$ SELECT ((random() * 4294967295)::bigint << 32) # (random() * 4294967295)::bigint $$;

-- 11 checks per kind
CREATE FUNCTION pg_temp.gpu_kind(kind text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	g int;
	c int;
	g37 int;
	tiny int;
	arr bigint[];
	probe bigint[];
	del bigint[];
	a bigint[];
	b bigint[];
	expected bigint[];
	info jsonb;
BEGIN
	SET LOCAL cpht.device = gpu;
	g := cpht_create(2000000, kind);
	g37 := cpht_create(500000, kind, 37);
	-- tiny keeps its size (cpht.grow off), so that it fills up
	PERFORM set_config('cpht.grow', 'off', true);
	tiny := cpht_create(10, kind);
	PERFORM set_config('cpht.grow', 'on', true);
	SET LOCAL cpht.device = cpu;
	c := cpht_create(2000000, kind);

	info := cpht_info(g);
	RETURN NEXT is(info->>'device', 'gpu', kind || ': cpht.device = gpu puts the table on the GPU');
	RETURN NEXT diag(kind || ' GPU table on ' || (info->>'device_name') || ', '
					 || (info->>'bytes') || ' bytes');

	-- a million keys: sequential runs, random patterns, repeats
	SELECT array_agg(k ORDER BY random()) INTO arr FROM (
		SELECT (x::bigint << 20) | i AS k FROM generate_series(1, 300000) AS i, (VALUES (17)) AS v(x)
		UNION ALL SELECT pg_temp.r64() FROM generate_series(1, 500000)
		UNION ALL SELECT i::bigint << 24 FROM generate_series(1, 100000) AS i
		UNION ALL SELECT (17::bigint << 20) | i FROM generate_series(1, 100000) AS i
	) AS s;
	SELECT array_agg(DISTINCT k ORDER BY k) INTO expected FROM unnest(arr) AS k;

	SELECT array_agg(u.k ORDER BY u.k) INTO a FROM unnest(arr, cpht_fop(g, arr)) AS u(k, r) WHERE r;
	SELECT array_agg(u.k ORDER BY u.k) INTO b FROM unnest(arr, cpht_fop(c, arr)) AS u(k, r) WHERE r;
	RETURN NEXT ok(a = expected AND b = expected,
		format('%s: cpht_fop on %s keys marks each distinct key once, on GPU and CPU', kind, cardinality(arr)));
	RETURN NEXT is(cpht_count(g), cardinality(expected)::bigint, kind || ': GPU count');

	SELECT arr[1:200000] || array_agg(pg_temp.r64()) INTO probe FROM generate_series(1, 200000);
	RETURN NEXT is(cpht_find(g, probe), cpht_find(c, probe), kind || ': cpht_find agrees between GPU and CPU');
	RETURN NEXT is(cpht_fop_new(g, probe), cpht_fop_new(c, probe),
		kind || ': cpht_fop_new on a batch without repeats agrees between GPU and CPU');
	RETURN NEXT is(cpht_put(g, arr || probe), 0::bigint, kind || ': cpht_put of present keys inserts none');

	SELECT array_agg(k) INTO del FROM (SELECT unnest(expected) AS k LIMIT 300000) AS d;
	RETURN NEXT is(cpht_delete(g, del), cpht_delete(c, del), kind || ': cpht_delete agrees between GPU and CPU');
	RETURN NEXT is(cpht_count(g), cpht_count(c), kind || ': counts agree after cpht_delete');

	-- 37-bit keys
	SELECT array_agg(k & 137438953471) INTO arr FROM unnest(arr) AS k;
	SELECT array_agg(u.k ORDER BY u.k) INTO a FROM unnest(arr, cpht_fop(g37, arr)) AS u(k, r) WHERE r;
	RETURN NEXT is(a, ARRAY(SELECT DISTINCT k FROM unnest(arr) AS k ORDER BY k),
		kind || ': 37-bit keys on the GPU');

	-- a full GPU table: error, and nothing of the call stays
	PERFORM cpht_put(tiny, '{1,2,3}');
	RETURN NEXT throws_ok(format('SELECT cpht_fop(%s, (SELECT array_agg(g) FROM generate_series(1, 20000) g))', tiny),
		'53000', format('cpht table %s is full', tiny), kind || ': a full GPU table raises 53000');
	RETURN NEXT ok(cpht_count(tiny) = 3 AND cpht_find(tiny, '{1,2,3,4}') = '{t,t,t,f}',
		kind || ': a full GPU table keeps exactly its old keys');

	PERFORM cpht_drop(g), cpht_drop(c), cpht_drop(g37), cpht_drop(tiny);
END $$;

CREATE FUNCTION pg_temp.gpu_tests() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	reason text;
	h int;
BEGIN
	SET LOCAL cpht.device = gpu;
	reason := pg_temp.gpu_unusable();
	IF reason IS NOT NULL THEN
		RETURN NEXT throws_ok('SELECT cpht_create(1000)', '55000', 'no usable GPU for cpht',
			'cpht.device = gpu raises 55000 where no GPU is usable');
		RETURN NEXT skip(reason, 23);
		RETURN;
	END IF;

	RETURN NEXT skip('a GPU is usable here, so cpht.device = gpu cannot fail', 1);
	RETURN QUERY SELECT pg_temp.gpu_kind('iceberg');
	RETURN QUERY SELECT pg_temp.gpu_kind('cuckoo');

	-- auto prefers the GPU
	SET LOCAL cpht.device = auto;
	h := cpht_create(1000);
	RETURN NEXT is(cpht_info(h)->>'device', 'gpu', 'cpht.device = auto uses the GPU where one is usable');
	PERFORM cpht_drop(h);
END $$;

SELECT pg_temp.gpu_tests();

SELECT cpht_drop_all() >= 0 AS clean \gset
SELECT * FROM finish();
ROLLBACK;
