-- cpht_fop_relation and cpht_fop_new_relation: the answers of
-- cpht_fop_agg and of PostgreSQL over the same data, with forced parallel
-- workers and without; NULLs, integer and smallint columns, duplicates on
-- different pages; the paths for row-level security, inheritance,
-- partitions and views; privileges, errors, savepoints; shared tables
-- (transactional and durable) when cpht is preloaded.
BEGIN;
SELECT plan(71);

\ir include/shared_sessions.psql

SET LOCAL cpht.batch_size = 1024;

-- 60000 rows over about 300 pages, 25000 distinct ids from 1, each id on
-- several pages; 500 rows without an id (a NULL taken for a key would be
-- a new key: 0)
CREATE TABLE ri_staging AS
	SELECT CASE WHEN g % 120 = 0 THEN NULL ELSE (g * 7919 % 25000 + 1)::bigint END AS id,
		   (g % 3000)::int AS small_id, (g % 700)::smallint AS tiny_id,
		   g::numeric AS num, 'x' || g AS label
	FROM generate_series(1, 60000) g;
CREATE TEMP TABLE ri_oracle AS SELECT DISTINCT id FROM ri_staging WHERE id IS NOT NULL;

\ir include/forced_parallel.psql

-- Tables of every private kind, seeded with the ids below 10000, against
-- cpht_fop_agg and the oracle, with `workers` forced workers.
CREATE FUNCTION pg_temp.answers(workers int) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	how text := CASE WHEN workers > 0 THEN 'parallel' ELSE 'serial' END;
	seeds bigint[] := ARRAY(SELECT id FROM ri_oracle WHERE id < 10000);
	want bigint := (SELECT count(*) FROM ri_oracle WHERE id >= 10000);
	cfg record;
	h int;
	ha int;
	n bigint;
	before bigint;
BEGIN
	PERFORM pg_temp.forced(workers);
	FOR cfg IN SELECT * FROM pg_temp.table_configs()
	LOOP
		h := cpht_create(100000, kind => cfg.kind, transactional => cfg.txn, key_bits => cfg.bits);
		ha := cpht_create(100000, kind => cfg.kind, transactional => cfg.txn, key_bits => cfg.bits);
		PERFORM cpht_put(h, seeds);
		PERFORM cpht_put(ha, seeds);
		before := pg_temp.scans('ri_staging');
		n := cpht_fop_relation(h, 'ri_staging');
		IF workers > 0 THEN
			RETURN NEXT ok(pg_temp.scans('ri_staging') > before,
				format('%s %s: parallel workers scanned the relation (%s)', how, cfg.kind, pg_temp.scans('ri_staging') - before));
		ELSE
			RETURN NEXT is(pg_temp.scans('ri_staging'), before, format('%s %s: no parallel worker scanned it', how, cfg.kind));
		END IF;
		RETURN NEXT is(n, (SELECT cpht_fop_agg(ha, id) FROM ri_staging),
			format('%s %s (transactional %s, key_bits %s): the count of cpht_fop_agg', how, cfg.kind, cfg.txn, cfg.bits));
		RETURN NEXT is(n, want, format('%s %s: the new ids the oracle counts', how, cfg.kind));
		RETURN NEXT is(cpht_count(h), (SELECT count(*) FROM ri_oracle), format('%s %s: every id is in the table', how, cfg.kind));
		PERFORM cpht_drop(h);
		PERFORM cpht_drop(ha);
	END LOOP;

	h := cpht_create(100000);
	PERFORM cpht_put(h, seeds);
	RETURN NEXT results_eq(
		format('SELECT k FROM cpht_fop_new_relation(%s, %L) k ORDER BY k', h, 'ri_staging'),
		'SELECT id FROM ri_oracle WHERE id >= 10000 ORDER BY id',
		format('%s: cpht_fop_new_relation lists each new id once', how));
	RETURN NEXT is((SELECT count(*) FROM cpht_fop_new_relation(h, 'ri_staging')), 0::bigint,
		format('%s: a second run finds no new id', how));
	RETURN NEXT is(cpht_fop_relation(h, 'ri_staging', 'small_id'), 1::bigint,
		format('%s: of an integer column''s ids 0 to 2999 only 0 is new', how));
	PERFORM cpht_drop(h);
	h := cpht_create(100000);
	RETURN NEXT is(cpht_fop_relation(h, 'ri_staging', 'small_id'), 3000::bigint,
		format('%s: an integer column', how));
	RETURN NEXT is(cpht_fop_relation(h, 'ri_staging', 'tiny_id'), 0::bigint,
		format('%s: a smallint column (its ids are known)', how));
	PERFORM cpht_drop(h);
END $$;

SELECT pg_temp.answers(2);
SELECT pg_temp.answers(0);
SELECT pg_temp.forced(2);

-- workers planned but none to be had: the leader takes every page
SELECT set_config('max_parallel_workers', '0', true) IS NOT NULL AS set \gset
SELECT cpht_create(100000) AS hn \gset
SELECT is(cpht_fop_relation(:hn, 'ri_staging'), 25000::bigint, 'with no worker launched the leader scans alone');
RESET max_parallel_workers;

-- a table of any key width widens as the relation's keys need
CREATE TABLE ri_wide AS
	SELECT CASE WHEN g % 2 = 0 THEN -1 ELSE 1 END * (g::bigint * 1000000007 * 100003) AS id
	FROM generate_series(1, 20000) g;
SELECT cpht_create(1000) AS hw \gset
SELECT is(cpht_fop_relation(:hw, 'ri_wide'), 20000::bigint, 'an auto-width table takes 64-bit and negative keys');
SELECT ok((cpht_info(:hw)->>'widens')::int > 0 AND (cpht_info(:hw)->>'slot_key_bits')::int = 64,
	'and widened its slots to them');
SELECT is(cpht_find(:hw, ARRAY(SELECT id FROM ri_wide ORDER BY id)),
	array_fill(true, ARRAY[20000]), 'every key of the relation is found');

-- a domain over integer
CREATE DOMAIN ri_small AS int CHECK (VALUE >= 0);
CREATE TABLE ri_dom AS SELECT (g % 50)::ri_small AS id FROM generate_series(1, 1000) g;
SELECT cpht_create(1000) AS hd \gset
SELECT is(cpht_fop_relation(:hd, 'ri_dom'), 50::bigint, 'a column of a domain over integer');

-- key_bits of the table are checked
SELECT cpht_create(1000, key_bits => 12) AS hk \gset
SELECT throws_ok(format('SELECT cpht_fop_relation(%s, %L)', :hk, 'ri_staging'), '22003', NULL,
	'a key outside the table''s key_bits is 22003');

-- savepoints: the caller's rollback undoes the keys
SELECT cpht_create(100000) AS hr \gset
SAVEPOINT ri;
SELECT is(cpht_fop_relation(:hr, 'ri_staging'), 25000::bigint, 'in a savepoint, the keys are put');
ROLLBACK TO SAVEPOINT ri;
SELECT is(cpht_count(:hr), 0::bigint, 'ROLLBACK TO SAVEPOINT undoes every key the parallel scan put');
SELECT is(cpht_fop_relation(:hr, 'ri_staging'), 25000::bigint, 'and they are new again');

-- inheritance, partitions, views: SELECT id FROM rel
CREATE TABLE ri_parent (id bigint);
CREATE TABLE ri_child () INHERITS (ri_parent);
INSERT INTO ri_parent SELECT g FROM generate_series(1, 3000) g;
INSERT INTO ri_child SELECT g FROM generate_series(2001, 9000) g;
SELECT cpht_create(100000) AS hi \gset
SELECT is(cpht_fop_relation(:hi, 'ri_parent'), 9000::bigint, 'a parent table''s keys include its children''s');
CREATE TABLE ri_part (id bigint, v int) PARTITION BY RANGE (id);
CREATE TABLE ri_part_1 PARTITION OF ri_part FOR VALUES FROM (MINVALUE) TO (5000);
CREATE TABLE ri_part_2 PARTITION OF ri_part FOR VALUES FROM (5000) TO (MAXVALUE);
CREATE TABLE ri_part_null PARTITION OF ri_part DEFAULT;
INSERT INTO ri_part SELECT id, 1 FROM ri_staging;
SELECT cpht_create(100000) AS hp \gset
SELECT is(cpht_fop_relation(:hp, 'ri_part'), 25000::bigint, 'a partitioned table');
SELECT is(cpht_fop_relation(:hp, 'ri_part_2'), 0::bigint, 'one of its partitions (a plain table)');
CREATE VIEW ri_view AS SELECT id, label FROM ri_staging WHERE id % 2 = 0;
SELECT cpht_create(100000) AS hv \gset
SELECT results_eq(format('SELECT k FROM cpht_fop_new_relation(%s, %L) k ORDER BY k', :hv, 'ri_view'),
	'SELECT id FROM ri_oracle WHERE id % 2 = 0 ORDER BY id', 'a view');

-- row-level security and privileges
CREATE ROLE ri_reader;
CREATE ROLE ri_stranger;
CREATE ROLE ri_column_reader;
GRANT SELECT ON ri_staging TO ri_reader;
GRANT SELECT (id) ON ri_staging TO ri_column_reader;
CREATE POLICY ri_even ON ri_staging FOR SELECT USING (id % 2 = 0);
ALTER TABLE ri_staging ENABLE ROW LEVEL SECURITY;
SELECT cpht_create(100000) AS hs \gset

-- The text value of a query run as role, or its SQLSTATE.
CREATE FUNCTION pg_temp.result_as_role(role text, sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	r text;
BEGIN
	BEGIN
		EXECUTE format('SET LOCAL ROLE %I', role);
		EXECUTE sql INTO r;
		RESET ROLE;
	EXCEPTION WHEN OTHERS THEN
		r := SQLSTATE;			-- the subtransaction's abort restored the role
	END;
	RETURN r;
END $$;

SELECT is(pg_temp.result_as_role('ri_reader', format('SELECT cpht_fop_relation(%s, %L)', :hs, 'ri_staging')),
	(SELECT count(*)::text FROM ri_oracle WHERE id % 2 = 0),
	'under a row-level security policy only the visible keys are put');
SELECT is(cpht_find(:hs, ARRAY(SELECT id FROM ri_oracle WHERE id % 2 = 1)),
	array_fill(false, ARRAY[(SELECT count(*)::int FROM ri_oracle WHERE id % 2 = 1)]),
	'no key the policy hides is in the table');
SELECT is(cpht_fop_relation(:hs, 'ri_staging'), (SELECT count(*) FROM ri_oracle WHERE id % 2 = 1),
	'the owner, whom the policy does not restrict, puts the rest');
ALTER TABLE ri_staging DISABLE ROW LEVEL SECURITY;
SELECT is(pg_temp.result_as_role('ri_stranger', format('SELECT cpht_fop_relation(%s, %L)', :hs, 'ri_staging')),
	'42501', 'without SELECT on the table: 42501');
SELECT is(pg_temp.result_as_role('ri_stranger', format('SELECT count(*) FROM cpht_fop_new_relation(%s, %L)', :hs, 'ri_staging')),
	'42501', 'the same for cpht_fop_new_relation');
SELECT is(pg_temp.result_as_role('ri_column_reader', format('SELECT cpht_fop_relation(%s, %L)', :hs, 'ri_staging')),
	'0', 'SELECT on the key column is enough');
SELECT is(pg_temp.result_as_role('ri_column_reader', format('SELECT cpht_fop_relation(%s, %L, %L)', :hs, 'ri_staging', 'small_id')),
	'42501', 'but not for another column: 42501');

-- errors
SELECT throws_ok(format('SELECT cpht_fop_relation(%s, %L, %L)', :hs, 'ri_staging', 'nope'), '42703', NULL,
	'an unknown column is 42703');
SELECT throws_ok(format('SELECT cpht_fop_relation(%s, %L, %L)', :hs, 'ri_staging', 'num'), '42804', NULL,
	'a numeric column is 42804');
SELECT throws_ok(format('SELECT count(*) FROM cpht_fop_new_relation(%s, %L, %L)', :hs, 'ri_staging', 'label'), '42804', NULL,
	'a text column is 42804');
SELECT throws_ok(format('SELECT cpht_fop_relation(%s, %L)', 999999, 'ri_staging'), '42704', NULL,
	'an unknown handle is 42704');
SELECT is(cpht_fop_relation(:hs, NULL), NULL, 'a NULL argument gives NULL');

-- A cancel part way through a call (statement_timeout in dblink session
-- c, at half the time a whole call took there, less if that call ends
-- first): 57014, none of the call's keys stay in a transactional table, no
-- parallel worker of the call lives on, and the session's next call
-- answers right.
CREATE FUNCTION pg_temp.cancel_tests() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	h int;
	whole float8;
	ms int;
	canceled int;
	c_pid int;
	want text;
	r text;
	t0 timestamptz;
BEGIN
	IF pg_temp.why_no_dblink() IS NOT NULL THEN
		RETURN NEXT skip(pg_temp.why_no_dblink(), 4);
		RETURN;
	END IF;
	PERFORM pg_temp.connect('c');
	c_pid := (SELECT v FROM dblink('c', 'SELECT pg_backend_pid()') AS t(v int));
	PERFORM dblink_exec('c', $q$CREATE TABLE ri_cancel_src AS
		SELECT (g * 2654435761 % 4000000)::bigint AS id FROM generate_series(1, 3000000) g$q$);
	want := (SELECT v FROM dblink('c',
		'SELECT count(DISTINCT id)::text FROM ri_cancel_src WHERE id NOT IN (1, 2, 3)') AS t(v text));
	PERFORM dblink_exec('c', 'SET max_parallel_workers_per_gather = 2');
	PERFORM dblink_exec('c', 'SET min_parallel_table_scan_size = 0');
	PERFORM dblink_exec('c', 'SET parallel_setup_cost = 0');
	h := (SELECT v FROM dblink('c', 'SELECT cpht_create(5000000)') AS t(v int));
	t0 := clock_timestamp();
	PERFORM pg_temp.remote('c', format('SELECT cpht_fop_relation(%s, %L)', h, 'ri_cancel_src'));
	whole := extract(epoch FROM clock_timestamp() - t0) * 1000;
	PERFORM pg_temp.remote('c', format('SELECT cpht_drop(%s)', h));
	FOREACH ms IN ARRAY ARRAY[greatest(whole / 2, 1), greatest(whole / 4, 1), greatest(whole / 8, 1)]::int[] LOOP
		h := (SELECT v FROM dblink('c', 'SELECT cpht_create(5000000)') AS t(v int));
		PERFORM pg_temp.remote('c', format('SELECT cpht_put(%s, ARRAY[1, 2, 3]::bigint[])', h));
		IF pg_temp.canceled_by_timeout('c', format('SELECT cpht_fop_relation(%s, %L)', h, 'ri_cancel_src'), ms) THEN
			canceled := ms;
		END IF;
		EXIT WHEN canceled IS NOT NULL;
		PERFORM pg_temp.remote('c', format('SELECT cpht_drop(%s)', h));
	END LOOP;
	RETURN NEXT ok(canceled IS NOT NULL,
		format('a cpht_fop_relation canceled by statement_timeout (%s ms of %s): 57014', canceled, round(whole)));
	RETURN NEXT is((SELECT v FROM dblink('c', format('SELECT cpht_count(%s)', h)) AS t(v bigint)), 3::bigint,
		'the transactional table holds none of its keys');
	PERFORM pg_stat_clear_snapshot();
	RETURN NEXT is((SELECT count(*) FROM pg_stat_activity WHERE leader_pid = c_pid), 0::bigint,
		'no parallel worker of it lives on');
	r := (SELECT v FROM dblink('c', format('SELECT cpht_fop_relation(%s, %L)::text', h, 'ri_cancel_src')) AS t(v text));
	RETURN NEXT is(r, want, 'the session''s next call answers right');
	PERFORM pg_temp.remote('c', format('SELECT cpht_drop(%s)', h));
	PERFORM dblink_exec('c', 'DROP TABLE ri_cancel_src');
	PERFORM dblink_disconnect('c');
END $$;

SELECT pg_temp.cancel_tests();

-- shared tables, in dblink session a (autocommit, so that it can create
-- them): transactional, plain and durable, with forced parallel workers
CREATE FUNCTION pg_temp.shared_tests() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	why text := pg_temp.why_skip();
	h1 int;
	h2 int;
	h3 int;
	h4 int;
	r text;
BEGIN
	IF why IS NOT NULL THEN
		RETURN NEXT skip(why, 8);
		RETURN;
	END IF;
	PERFORM pg_temp.connect('a');
	PERFORM dblink_exec('a', 'SET statement_timeout = ''60s''');
	PERFORM dblink_exec('a', $q$CREATE TABLE ri_shared_src AS
		SELECT (g * 7919 % 25000)::bigint AS id FROM generate_series(1, 60000) g$q$);
	PERFORM dblink_exec('a', 'SET max_parallel_workers_per_gather = 2');
	PERFORM dblink_exec('a', 'SET min_parallel_table_scan_size = 0');
	PERFORM dblink_exec('a', 'SET cpht.batch_size = 1024');
	h1 := (SELECT v FROM dblink('a', $q$SELECT cpht_create(100000, name => 'ri_shared_txn')$q$) AS t(v int));
	h2 := (SELECT v FROM dblink('a', $q$SELECT cpht_create(100000, name => 'ri_shared_plain', transactional => false)$q$) AS t(v int));
	h3 := (SELECT v FROM dblink('a', $q$SELECT cpht_create(100000, name => 'ri_shared_durable', durable => true)$q$) AS t(v int));

	PERFORM dblink_exec('a', 'BEGIN');
	r := (SELECT v FROM dblink('a', format('SELECT cpht_fop_relation(%s, %L)::text', h1, 'ri_shared_src')) AS t(v text));
	RETURN NEXT is(r, '25000', 'a transactional shared table, parallel: every distinct id once');
	RETURN NEXT is(cpht_count(cpht_open('ri_shared_txn')), 0::bigint, 'other sessions do not see the keys before commit');
	PERFORM dblink_exec('a', 'ROLLBACK');
	RETURN NEXT is(cpht_count(cpht_open('ri_shared_txn')), 0::bigint, 'the caller''s rollback undoes them');
	r := (SELECT v FROM dblink('a', format('SELECT cpht_fop_relation(%s, %L)::text', h1, 'ri_shared_src')) AS t(v text));
	RETURN NEXT is(cpht_count(cpht_open('ri_shared_txn')), 25000::bigint, 'a committed call keeps them');
	r := (SELECT v FROM dblink('a', format('SELECT count(*)::text FROM cpht_fop_new_relation(%s, %L)', h2, 'ri_shared_src')) AS t(v text));
	RETURN NEXT is(r, '25000', 'a non-transactional shared table: the new ids listed');
	PERFORM dblink_exec('a', 'BEGIN');
	PERFORM dblink_exec('a', 'SAVEPOINT s');
	r := (SELECT v FROM dblink('a', format('SELECT cpht_fop_relation(%s, %L)::text', h3, 'ri_shared_src')) AS t(v text));
	PERFORM dblink_exec('a', 'COMMIT');
	RETURN NEXT is(r, '25000', 'a durable transactional shared table, in a subtransaction');
	RETURN NEXT is(cpht_count(cpht_open('ri_shared_durable')), 25000::bigint, 'and its commit keeps the keys');

	-- a partitioned table goes through a query, which may run in parallel
	-- too: its leader calls the table in parallel mode
	PERFORM dblink_exec('a', 'CREATE TABLE ri_shared_part (id bigint) PARTITION BY HASH (id)');
	PERFORM dblink_exec('a', 'CREATE TABLE ri_shared_part_0 PARTITION OF ri_shared_part FOR VALUES WITH (MODULUS 2, REMAINDER 0)');
	PERFORM dblink_exec('a', 'CREATE TABLE ri_shared_part_1 PARTITION OF ri_shared_part FOR VALUES WITH (MODULUS 2, REMAINDER 1)');
	-- (more rows than the receiver collects before it feeds the table)
	PERFORM dblink_exec('a', 'INSERT INTO ri_shared_part SELECT (g * 7919 % 25000)::bigint FROM generate_series(1, 150000) g');
	PERFORM dblink_exec('a', 'SET parallel_setup_cost = 0');
	PERFORM dblink_exec('a', 'SET parallel_tuple_cost = 0');
	h4 := (SELECT v FROM dblink('a', $q$SELECT cpht_create(100000, name => 'ri_shared_part')$q$) AS t(v int));
	PERFORM dblink_exec('a', 'BEGIN');
	r := (SELECT v FROM dblink('a', format('SELECT cpht_fop_relation(%s, %L)::text', h4, 'ri_shared_part')) AS t(v text));
	PERFORM dblink_exec('a', 'COMMIT');
	RETURN NEXT is(r, '25000', 'a partitioned table into a transactional shared table, read by a parallel query');

	PERFORM dblink_exec('a', 'DROP TABLE ri_shared_part');
	PERFORM pg_temp.remote('a', format('SELECT cpht_drop(%s)', h4));
	PERFORM dblink_exec('a', 'DROP TABLE ri_shared_src');
	PERFORM pg_temp.remote('a', format('SELECT cpht_drop(%s)', h1));
	PERFORM pg_temp.remote('a', format('SELECT cpht_drop(%s)', h2));
	PERFORM pg_temp.remote('a', format('SELECT cpht_drop(%s)', h3));
	PERFORM dblink_disconnect('a');
END $$;

SELECT pg_temp.shared_tests();

SELECT * FROM finish();
ROLLBACK;
