-- Sharded tables: cpht_create(..., shards => N) splits the keys by a hash of
-- the key over N tables (one per GPU in turn, or all on the CPU) and answers
-- as one table.  The same random batches go through sharded tables and
-- tables of one shard, for both kinds, with 2 and 3 shards, on the device
-- cpht.device selects: every answer, count and rollback must agree.  A
-- shared sharded table (preloaded server) is checked the same way.
BEGIN;
SELECT plan(4 * 8 + 11 + 6);

SELECT cpht_drop_all() >= 0 AS clean \gset

-- The keys a boolean[] answer marks, sorted (duplicates kept).
CREATE FUNCTION pg_temp.marked(keys bigint[], flags boolean[]) RETURNS bigint[]
LANGUAGE sql AS $$
	SELECT coalesce(array_agg(k ORDER BY k), '{}') FROM unnest(keys, flags) AS x(k, f) WHERE f
$$;

-- Runs the same random batches (find-or-put, find, delete; some large
-- enough that the shards run on threads of their own) through table s and
-- table u; returns how many answers differ.  A key repeated in a batch may
-- be reported new at another occurrence, so find-or-put and delete compare
-- the keys marked, not the positions.
CREATE FUNCTION pg_temp.differences(s int, u int, rounds int, seed float8) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
	bad int := 0;
	keys bigint[];
	n int;
	op float8;
BEGIN
	PERFORM setseed(seed);
	FOR r IN 1 .. rounds LOOP
		n := CASE WHEN random() < 0.15 THEN 100000 ELSE 1 + (random() * 3000)::int END;
		keys := ARRAY(SELECT (random() * (20000 + 2000 * r))::bigint FROM generate_series(1, n));
		op := random();
		IF op < 0.55 THEN
			IF pg_temp.marked(keys, cpht_fop(s, keys)) IS DISTINCT FROM pg_temp.marked(keys, cpht_fop(u, keys)) THEN
				bad := bad + 1;
			END IF;
		ELSIF op < 0.8 THEN
			IF cpht_find(s, keys) IS DISTINCT FROM cpht_find(u, keys) THEN
				bad := bad + 1;
			END IF;
		ELSE
			keys := keys[1 : n / 3 + 1];
			IF pg_temp.marked(keys, cpht_delete(s, keys)) IS DISTINCT FROM pg_temp.marked(keys, cpht_delete(u, keys)) THEN
				bad := bad + 1;
			END IF;
		END IF;
		IF cpht_count(s) <> cpht_count(u) THEN
			bad := bad + 1;
		END IF;
	END LOOP;
	RETURN bad;
END $$;

-- Every key of 0 .. top found alike by both tables.
CREATE FUNCTION pg_temp.same_keys(s int, u int, top bigint) RETURNS boolean LANGUAGE sql AS $$
	SELECT cpht_find(s, a) = cpht_find(u, a) AND cpht_count(s) = cpht_count(u)
	FROM (SELECT array_agg(g) AS a FROM generate_series(0, top) g) x
$$;

CREATE FUNCTION pg_temp.sharded_tests(kind text, shards int) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	s int := cpht_create(1000, kind, shards => shards);
	u int := cpht_create(1000, kind, shards => 1);
	what text := format('%s, %s shards', kind, shards);
	i jsonb;
	before bigint;
BEGIN
	i := cpht_info(s);
	RETURN NEXT is(jsonb_array_length(i->'shards'), shards, what || ': cpht_info lists the shards');
	RETURN NEXT is(pg_temp.differences(s, u, 40, 0.25 + shards / 10.0), 0,
		what || ': find-or-put, find and delete answer as one table, counts equal');
	RETURN NEXT ok(pg_temp.same_keys(s, u, 120000), what || ': the same keys afterwards');
	i := cpht_info(s);
	RETURN NEXT ok((SELECT sum((x->>'count')::bigint) = (i->>'count')::bigint
						AND bool_and((x->>'count')::bigint > 0 AND (x->>'fill')::float8 BETWEEN 0.01 AND 1
									 AND x->>'device' = i->>'device')
					FROM jsonb_array_elements(i->'shards') x)
				   AND (i->>'grows')::bigint > 0,
		what || ': every shard holds keys on the table''s device, their counts sum to the count, they grew');

	-- a savepoint rolled back undoes the shards' changes
	before := cpht_count(s);
	BEGIN
		PERFORM cpht_fop(s, ARRAY(SELECT g FROM generate_series(200000, 260000) g));
		PERFORM cpht_delete(s, ARRAY(SELECT g FROM generate_series(0, 30000) g));
		PERFORM cpht_fop(u, ARRAY(SELECT g FROM generate_series(200000, 260000) g));
		PERFORM cpht_delete(u, ARRAY(SELECT g FROM generate_series(0, 30000) g));
		RAISE EXCEPTION 'undo' USING ERRCODE = 'P0001';
	EXCEPTION WHEN raise_exception THEN
		NULL;
	END;
	RETURN NEXT ok(cpht_count(s) = before AND pg_temp.same_keys(s, u, 270000),
		what || ': a rolled back subtransaction undoes its puts and deletes on every shard');

	PERFORM cpht_delete(s, ARRAY(SELECT g FROM generate_series(0, 5000) g));
	PERFORM cpht_delete(u, ARRAY(SELECT g FROM generate_series(0, 5000) g));
	RETURN NEXT ok(pg_temp.same_keys(s, u, 270000), what || ': deletes agree');
	RETURN NEXT ok(pg_temp.marked(ARRAY[1::bigint, 1, 7, 7], cpht_fop(s, ARRAY[1::bigint, 1, 7, 7])) = '{1,7}',
		what || ': a key repeated in a batch is new once');
	RETURN NEXT ok(cpht_find(s, ARRAY[1::bigint, 7, 8]) = '{t,t,f}' AND cpht_count(s) = cpht_count(u) + 2,
		what || ': and is found afterwards');
	PERFORM cpht_drop(s);
	PERFORM cpht_drop(u);
END $$;

SELECT pg_temp.sharded_tests('iceberg', 2);
SELECT pg_temp.sharded_tests('iceberg', 3);
SELECT pg_temp.sharded_tests('cuckoo', 2);
SELECT pg_temp.sharded_tests('cuckoo', 3);

SELECT throws_ok('SELECT cpht_create(1000, shards => 0)', '22023',
	'shards must be between 1 and 16, not 0', 'shards below 1 is refused');
SELECT throws_ok('SELECT cpht_create(1000, shards => 17)', '22023',
	'shards must be between 1 and 16, not 17', 'shards above 16 is refused');
-- cpht.shards: the shards of a table created without shards => N
SET LOCAL cpht.shards = 1;
SELECT is(jsonb_array_length(cpht_info(cpht_create(1000))->'shards'), 1,
	'a table created without shards with cpht.shards = 1 has one');
SET LOCAL cpht.shards = 3;
SELECT is(jsonb_array_length(cpht_info(cpht_create(1000))->'shards'), 3,
	'with cpht.shards = 3, a table created without shards has three');
SELECT is(jsonb_array_length(cpht_info(cpht_create(1000, shards => NULL))->'shards'), 3,
	'and one created with shards => NULL too');
SELECT is(jsonb_array_length(cpht_info(cpht_create(1000, shards => 2))->'shards'), 2,
	'shards => 2 takes precedence over cpht.shards');
SELECT throws_ok('SET cpht.shards = 17', '22023', NULL, 'cpht.shards above 16 is refused');
RESET cpht.shards;
SELECT throws_ok('SELECT cpht_create(1000, name => ''shards_durable'', durable => true, shards => 2)', '0A000',
	'a durable cpht table cannot be sharded', 'a durable table with shards => 2 is refused');

-- A fixed-size sharded table: a call that overfills a shard fails whole.
SET LOCAL cpht.grow = off;
SELECT cpht_create(2000, transactional => false, shards => 2) AS fixed \gset
SELECT cpht_put(:fixed, ARRAY(SELECT g FROM generate_series(1, 1500) g)) AS filled \gset
SELECT throws_ok(format('SELECT cpht_put(%s, ARRAY(SELECT g FROM generate_series(1, 60000) g))', :fixed),
	'53000', 'cpht table ' || :fixed || ' is full', 'a call past a fixed-size sharded table fails full');
SELECT ok(cpht_count(:fixed) = 1500
		  AND NOT (SELECT bool_or(f) FROM unnest(cpht_find(:fixed, ARRAY(SELECT g FROM generate_series(1501, 60000) g))) f),
	'and none of its keys stays in any shard');
RESET cpht.grow;

-- rebuild goes shard by shard and keeps the keys
SELECT cpht_delete(:fixed, ARRAY(SELECT g FROM generate_series(1, 700) g)) IS NOT NULL AS deleted \gset
SELECT ok(cpht_rebuild(:fixed) > 0 AND cpht_count(:fixed) = 800
		  AND (SELECT bool_and(f) FROM unnest(cpht_find(:fixed, ARRAY(SELECT g FROM generate_series(701, 1500) g))) f),
	'cpht_rebuild of a sharded table removes tombstones and keeps the keys');

-- A shared sharded table, held by the cpht worker.
\ir include/shared_sessions.psql

CREATE FUNCTION pg_temp.shared_tests() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	why text := pg_temp.why_skip();
	s int;
	u int;
	before bigint;
BEGIN
	IF why IS NOT NULL THEN
		RETURN NEXT skip(why, 6);
		RETURN;
	END IF;
	PERFORM pg_temp.connect('shards_a');
	PERFORM pg_temp.remote('shards_a',
		$q$SELECT cpht_create(1000, name => 'shards_shared', shards => 2)$q$);
	s := cpht_open('shards_shared');
	u := cpht_create(1000, shards => 1);
	RETURN NEXT is(jsonb_array_length(cpht_info(s)->'shards'), 2, 'a shared table of two shards');
	RETURN NEXT is(pg_temp.differences(s, u, 25, 0.5), 0,
		'the shared sharded table answers as one table');
	RETURN NEXT ok(pg_temp.same_keys(s, u, 80000), 'the same keys afterwards');
	before := cpht_count(s);
	BEGIN
		PERFORM cpht_fop(s, ARRAY(SELECT g FROM generate_series(200000, 230000) g));
		PERFORM cpht_delete(s, ARRAY(SELECT g FROM generate_series(0, 10000) g));
		RAISE EXCEPTION 'undo' USING ERRCODE = 'P0001';
	EXCEPTION WHEN raise_exception THEN
		NULL;
	END;
	RETURN NEXT ok(cpht_count(s) = before AND pg_temp.same_keys(s, u, 240000),
		'a rolled back subtransaction undoes its changes on every shard of a shared table');
	RETURN NEXT ok((SELECT count(*) = 1 FROM cpht_tables() WHERE name = 'shards_shared'),
		'cpht_tables lists it');
	-- a durable table is never sharded: cpht.shards leaves it at one shard
	PERFORM pg_temp.remote('shards_a', $q$SELECT set_config('cpht.shards', '3', false)$q$);
	PERFORM pg_temp.remote('shards_a',
		$q$SELECT cpht_create(1000, name => 'shards_durable', durable => true)$q$);
	RETURN NEXT is(jsonb_array_length(cpht_info(cpht_open('shards_durable'))->'shards'), 1,
		'a durable table created with cpht.shards = 3 has one shard');
	PERFORM pg_temp.remote('shards_a', format('SELECT cpht_drop(cpht_open(%L))', 'shards_durable'));
	PERFORM cpht_drop(u);
	PERFORM pg_temp.remote('shards_a', format('SELECT cpht_drop(cpht_open(%L))', 'shards_shared'));
	PERFORM dblink_disconnect('shards_a');
END $$;

SELECT pg_temp.shared_tests();

SELECT * FROM finish();
ROLLBACK;
