-- array_agg(bigint) handed to an array function (cpht_fop, cpht_fop_new,
-- cpht_find, cpht_put) is planned as cpht_array_agg, which gathers the keys
-- in parallel workers (forced parallel plans): which forms are rewritten and
-- which are not; the answers equal those of serial plans and stay aligned
-- with the array the user reads; NULL elements and empty input as with
-- array_agg; cpht_array_agg called by name; and, over a transactional
-- shared table (preloaded mode), the leader's write inside the parallel
-- plan, undone by a rollback; cpht_fop_new(h, array_agg(x)) over a shared
-- table planned as cpht_fop_new_agg(h, x) (by handle and by name), its
-- answer, FILTER, NULL keys and empty input, and a private table's call
-- left as it was.
BEGIN;
SELECT plan(35);

\ir include/shared_sessions.psql
\ir include/forced_parallel.psql

-- 60000 rows over about 300 pages, 25000 distinct ids (each on several
-- pages); aa_nulls: the same with a NULL id in every 100th row
CREATE TABLE aa_src AS
	SELECT (g * 7919 % 25000 + 1)::bigint AS id, g AS pos FROM generate_series(1, 60000) g;
CREATE TABLE aa_nulls AS
	SELECT CASE WHEN g % 100 = 0 THEN NULL ELSE (g * 7919 % 25000 + 1)::bigint END AS id
	FROM generate_series(1, 60000) g;
ANALYZE aa_src;
ANALYZE aa_nulls;
CREATE TEMP TABLE aa_oracle AS SELECT DISTINCT id FROM aa_src;

-- The plan of a query here, as text.
CREATE FUNCTION pg_temp.plan_of(sql text, detail boolean DEFAULT false) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	line text;
	r text := '';
BEGIN
	FOR line IN EXECUTE format('EXPLAIN (COSTS OFF, VERBOSE %s) %s', CASE WHEN detail THEN 'on' ELSE 'off' END, sql) LOOP
		r := r || line || E'\n';
	END LOOP;
	RETURN r;
END $$;

SELECT pg_temp.forced(2);
SELECT cpht_create(100000) AS h_par, cpht_create(100000) AS h_ser,
	   cpht_create(100000) AS h_zip, cpht_create(100000) AS h_sub,
	   cpht_create(100000) AS h_ord, cpht_create(100000) AS h_col \gset

-- which forms are rewritten
SELECT ok(pg_temp.plan_of(format('SELECT cpht_fop(%s, array_agg(id)) FROM aa_src', :h_par))
		  ~ 'Gather.*Partial Aggregate.*Parallel Seq Scan on aa_src',
		  'cpht_fop(h, array_agg(id)) gathers the keys in parallel workers');
SELECT ok(pg_temp.plan_of(format('SELECT cpht_fop(%s, array_agg(id)) FROM aa_src', :h_par), true)
		  ~ 'PARTIAL cpht_array_agg\(aa_src\.id\)',
		  'with cpht_array_agg in place of array_agg');
SELECT ok(pg_temp.plan_of(format('SELECT cpht_fop_new(%s, (SELECT array_agg(id) FROM aa_src))', :h_par))
		  ~ 'Gather.*Partial Aggregate',
		  'so does a scalar subquery of array_agg handed to cpht_fop_new');
SELECT ok(pg_temp.plan_of(format('SELECT cpht_find(%s, array_agg(id)), cpht_put(%s, array_agg(id)) FROM aa_src', :h_par, :h_par))
		  ~ 'Gather.*Partial Aggregate',
		  'and array_agg handed to cpht_find and cpht_put');
SELECT ok(pg_temp.plan_of(format('SELECT array_agg(id), count(*), cpht_fop(%s, array_agg(id)) FROM aa_src', :h_par), true)
		  ~ 'PARTIAL cpht_array_agg\(aa_src\.id\), PARTIAL count',
		  'the same array_agg read by the query itself is computed once with it, in parallel');
SELECT ok(pg_temp.plan_of(format('SELECT cpht_fop(%s, array_agg(id ORDER BY id)) FROM aa_src', :h_par), true)
		  !~ 'cpht_array_agg|Partial Aggregate',
		  'array_agg with ORDER BY is not rewritten');
SELECT ok(pg_temp.plan_of(format('SELECT cpht_fop(%s, array_agg(DISTINCT id)) FROM aa_src', :h_par), true)
		  !~ 'cpht_array_agg|Partial Aggregate',
		  'nor array_agg(DISTINCT ...)');
SELECT ok(pg_temp.plan_of(format('SELECT unnest(a), unnest(cpht_fop(%s, a)) FROM (SELECT array_agg(id) a FROM aa_src) s', :h_par), true)
		  !~ 'cpht_array_agg',
		  'nor an array_agg the function reads through a subquery''s column');
SELECT ok(pg_temp.plan_of(format('SELECT cardinality(cpht_fop_new(%s, array_agg(id))) FROM aa_src', :h_par), true)
		  !~ 'cpht_fop_new_agg',
		  'cpht_fop_new(h, array_agg(id)) of a session''s own table is not fused into cpht_fop_new_agg');

-- the answers of a parallel plan are those of a serial one
SELECT is((SELECT count(*) FROM unnest(f) b WHERE b), 25000::bigint, 'parallel: one true per distinct id')
FROM (SELECT cpht_fop(:h_par, array_agg(id)) f FROM aa_src) s;
SELECT pg_temp.forced(0);
SELECT is((SELECT count(*) FROM unnest(f) b WHERE b), 25000::bigint, 'serial: the same count')
FROM (SELECT cpht_fop(:h_ser, array_agg(id)) f FROM aa_src) s;
SELECT pg_temp.forced(2);
SELECT is(cpht_count(:h_par), cpht_count(:h_ser), 'both tables hold the same number of keys');
SELECT is((SELECT count(*) FROM unnest(f) b WHERE b), 60000::bigint,
		  'every id of the parallel put is in the serial table')
FROM (SELECT cpht_find(:h_ser, array_agg(id)) f FROM aa_src) s;
SELECT set_eq(format('SELECT unnest(cpht_fop_new(%s, array_agg(id))) FROM aa_src', cpht_create(100000)),
			  'SELECT id FROM aa_oracle',
			  'cpht_fop_new gives each new id once, in parallel');

-- the answer stays aligned with the array the query reads: with the even
-- ids already in the table, true falls on odd ids alone, once each
SELECT cpht_put(:h_zip, ARRAY(SELECT g::bigint FROM generate_series(2, 25000, 2) g));
SELECT is(format('%s %s %s', count(*) FILTER (WHERE b AND k % 2 = 0),
				 count(*) FILTER (WHERE b), count(DISTINCT k) FILTER (WHERE b)),
		  '0 12500 12500', 'array_agg(id) zipped with cpht_fop(h, array_agg(id)): aligned')
FROM (SELECT array_agg(id) a, cpht_fop(:h_zip, array_agg(id)) f FROM aa_src) s, unnest(a, f) AS u(k, b);
SELECT is((SELECT count(*) FROM unnest(a, f) AS u(k, b) WHERE b), 25000::bigint,
		  'and one true per distinct id')
FROM (SELECT array_agg(id) a, cpht_fop(:h_col, array_agg(id)) f FROM aa_src) s;
SELECT ok(pg_temp.plan_of('SELECT (SELECT count(*) FROM unnest(cpht_fop(' || :h_sub ||
		  ', array_agg(s.id))) f WHERE f) FROM aa_src s') ~ 'Gather.*Partial Aggregate',
		  'array_agg of the outer query handed to cpht_fop in a subquery is gathered in parallel');
SELECT is(n, 25000::bigint, 'and counts each new id once')
FROM (SELECT (SELECT count(*) FROM unnest(cpht_fop(:h_sub, array_agg(s.id))) f WHERE f) n
	  FROM aa_src s) z;
SELECT is(f, (SELECT array_agg(id ORDER BY id DESC) FROM aa_oracle),
		  'array_agg with ORDER BY keeps its order')
FROM (SELECT cpht_fop_new(:h_ord, array_agg(id ORDER BY id DESC)) f FROM aa_src) s;

-- NULLs and empty input as with array_agg
SELECT throws_ok(format('SELECT cpht_fop(%s, array_agg(id)) FROM aa_nulls', cpht_create(100000)),
				 '22004', 'keys must not be null',
				 'a NULL id among the rewritten array''s keys: the error of array_agg''s');
SELECT ok(pg_temp.plan_of('SELECT cpht_array_agg(id) FROM aa_nulls') ~ 'Gather.*Partial Aggregate',
		  'cpht_array_agg called by name runs in parallel workers');
SELECT is((SELECT array_agg(x ORDER BY x NULLS FIRST) FROM unnest(c) x),
		  (SELECT array_agg(x ORDER BY x NULLS FIRST) FROM unnest(p) x),
		  'its elements, NULLs included, are array_agg''s')
FROM (SELECT cpht_array_agg(id) c FROM aa_nulls) s, (SELECT array_agg(id) p FROM aa_nulls) t;
SELECT is(cpht_array_agg(x), '{1,NULL,3}'::bigint[], 'in one process, in input order, lower bound 1')
FROM (VALUES (1::bigint), (NULL), (3)) v(x);
SELECT ok((SELECT cpht_array_agg(id) FROM aa_src WHERE pos < 0) IS NULL AND
		  (SELECT cpht_fop(:h_par, array_agg(id)) FROM aa_src WHERE pos < 0) IS NULL,
		  'empty input: NULL, and the function of NULL is NULL');

-- An array's keys in order: their count and the md5 of their text.
CREATE FUNCTION pg_temp.sorted(a bigint[]) RETURNS text LANGUAGE sql AS $$
	SELECT count(*) || ' ' || md5(coalesce(array_agg(k ORDER BY k)::text, '')) FROM unnest(a) k
$$;

-- a transactional shared table: the leader writes in parallel mode (its
-- transaction id assigned before), and a rollback undoes the keys
CREATE FUNCTION pg_temp.shared_tests() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	why text := pg_temp.why_skip();
	h int;
	r text;
BEGIN
	IF why IS NOT NULL THEN
		RETURN NEXT skip(why, 11);
		RETURN;
	END IF;
	PERFORM pg_temp.connect('a');
	PERFORM dblink_exec('a', 'SET statement_timeout = ''60s''');
	PERFORM dblink_exec('a', 'DROP TABLE IF EXISTS aa_shared_src');
	PERFORM dblink_exec('a', $q$CREATE TABLE aa_shared_src AS
		SELECT (g * 7919 % 25000 + 1)::bigint AS id FROM generate_series(1, 60000) g$q$);
	PERFORM dblink_exec('a', 'ANALYZE aa_shared_src');
	h := (SELECT v FROM dblink('a', 'SELECT cpht_create(100000, name => ''aa_shared'')') AS t(v int));
	PERFORM dblink_exec('a', 'SET parallel_setup_cost = 0');
	PERFORM dblink_exec('a', 'SET parallel_tuple_cost = 0');
	PERFORM dblink_exec('a', 'SET min_parallel_table_scan_size = 0');
	PERFORM dblink_exec('a', 'SET max_parallel_workers_per_gather = 2');
	PERFORM dblink_exec('a', 'BEGIN');
	r := (SELECT v FROM dblink('a', format(
		'SELECT cardinality(cpht_fop_new(%s, array_agg(id))) || '' '' || cpht_count(%s) FROM aa_shared_src',
		h, h)) AS t(v text));
	PERFORM dblink_exec('a', 'ROLLBACK');
	RETURN NEXT is(r, '25000 25000', 'a transactional shared table takes the keys gathered in parallel');
	RETURN NEXT is((SELECT v FROM dblink('a', format('SELECT cpht_count(%s)', h)) AS t(v bigint)),
				   0::bigint, 'and gives them back at rollback');

	-- fused: the keys go to the table from the workers, only new ones come back
	r := (SELECT string_agg(v, E'\n') FROM dblink('a', format(
		'EXPLAIN (COSTS OFF, VERBOSE) SELECT cardinality(cpht_fop_new(%s, array_agg(id))) FROM aa_shared_src',
		h)) AS t(v text));
	RETURN NEXT ok(r ~ 'Gather.*PARTIAL cpht_fop_new_agg\([0-9]+, (aa_shared_src\.)?id\).*Parallel Seq Scan',
				   'over a shared table cpht_fop_new(h, array_agg(id)) is planned as cpht_fop_new_agg in parallel workers');
	r := (SELECT string_agg(v, E'\n') FROM dblink('a',
		'EXPLAIN (COSTS OFF, VERBOSE) SELECT cardinality(cpht_fop_new(''aa_shared'', array_agg(id))) FROM aa_shared_src')
		AS t(v text));
	RETURN NEXT ok(r ~ 'Gather.*PARTIAL cpht_fop_new_agg\(''aa_shared''::cpht_table',
				   'and so is the form that names the table');
	r := (SELECT v FROM dblink('a',
		'SELECT count(*) || '' '' || count(DISTINCT k) || '' '' || count(*) FILTER (WHERE k BETWEEN 1 AND 25000)
		 FROM unnest((SELECT cpht_fop_new(''aa_shared'', array_agg(id)) FROM aa_shared_src)) k')
		AS t(v text));
	RETURN NEXT is(r, '25000 25000 25000', 'its answer: every distinct id, each once');
	PERFORM pg_temp.remote('a', format('SELECT cpht_delete(%s, array_agg(id)) FROM aa_shared_src', h));
	r := (SELECT v FROM dblink('a', format(
		'SELECT cardinality(cpht_fop_new(%s, array_agg(id) FILTER (WHERE id <= 100)))::text || '' '' ||
		        ((SELECT cpht_fop_new(%s, array_agg(id)) FROM aa_shared_src WHERE id < 0) IS NULL)::text
		 FROM aa_shared_src', h, h)) AS t(v text));
	RETURN NEXT is(r, '100 true', 'FILTER is kept, and over no rows the answer is NULL');
	RETURN NEXT throws_ok(format(
		'SELECT * FROM dblink(''a'', ''SELECT cpht_fop_new(%s, array_agg(x)) FROM (VALUES (100001::bigint), (NULL)) v(x)'') AS t(v text)', h),
		'22004', NULL, 'a NULL key is an error, as a NULL element of the array is');
	RETURN NEXT is((SELECT v FROM dblink('a', format('SELECT cpht_count(%s)', h)) AS t(v bigint)),
				   100::bigint, 'the statement that failed stored nothing more (transactional table)');

	-- The fused answer key for key against the unfused call (an array_agg
	-- with ORDER BY is not rewritten), each in a transaction rolled back:
	-- every even id seen before, each id on several pages so in several
	-- workers, the leader a participant or not.  Then a second call in the
	-- same transaction: every key seen, an empty array (not NULL).
	PERFORM pg_temp.remote('a', format(
		'SELECT cpht_put(%s, array_agg(DISTINCT id ORDER BY id)) FROM aa_shared_src WHERE id %% 2 = 0', h));
	PERFORM dblink_exec('a', 'BEGIN');
	r := (SELECT pg_temp.sorted(v) FROM dblink('a', format(
		'SELECT cpht_fop_new(%s, array_agg(id)) FROM aa_shared_src', h)) AS t(v bigint[]));
	RETURN NEXT is(r || ' ' || (SELECT v FROM dblink('a', format(
		'SELECT coalesce(cardinality(cpht_fop_new(%s, array_agg(id))), -1) FROM aa_shared_src', h)) AS t(v text)),
		(SELECT pg_temp.sorted(array_agg(DISTINCT id)) FROM aa_src WHERE id % 2 = 1 AND id > 100) || ' 0',
		'the fused answer: the ids that were new, each once, and then an empty array');
	PERFORM dblink_exec('a', 'ROLLBACK');
	PERFORM dblink_exec('a', 'BEGIN');
	RETURN NEXT is((SELECT pg_temp.sorted(v) FROM dblink('a', format(
		'SELECT cpht_fop_new(%s, (SELECT array_agg(id ORDER BY id) FROM aa_shared_src))', h)) AS t(v bigint[])),
		r, 'the unfused call gives the same keys');
	PERFORM dblink_exec('a', 'ROLLBACK');
	PERFORM dblink_exec('a', 'SET parallel_leader_participation = off');
	PERFORM dblink_exec('a', 'BEGIN');
	RETURN NEXT is((SELECT pg_temp.sorted(v) FROM dblink('a', format(
		'SELECT cpht_fop_new(%s, array_agg(id)) FROM aa_shared_src', h)) AS t(v bigint[])),
		r, 'and so does the fused one with the workers alone');
	PERFORM dblink_exec('a', 'ROLLBACK');
	PERFORM dblink_exec('a', 'RESET parallel_leader_participation');
	PERFORM pg_temp.remote('a', format('SELECT cpht_drop(%s)', h));
	PERFORM dblink_exec('a', 'DROP TABLE aa_shared_src');
	PERFORM dblink_disconnect('a');
END $$;
SELECT * FROM pg_temp.shared_tests();

SELECT * FROM finish();
ROLLBACK;
