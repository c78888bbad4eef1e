-- cpht_insert_new: against PostgreSQL's own answer over the same data and
-- against cpht_fop_rows, with forced parallel workers and without, small
-- batches (duplicates within a batch and across batches); rollback and
-- savepoints; what the target's INSERT applies (typmods, domains,
-- defaults, triggers, CHECK constraints); privileges and row-level
-- security; the sources read through cpht_fop_rows; shared tables
-- (transactional or not) when cpht is preloaded.
BEGIN;
SELECT plan(93);

\ir include/shared_sessions.psql

SET LOCAL cpht.batch_size = 1024;

-- 60000 rows over about 300 pages, 25000 distinct ids from 1, each id on
-- several pages (duplicates across batches), and 3000 more rows, two per
-- id, next to each other (duplicates within a batch)
CREATE TABLE in_staging AS
	SELECT CASE WHEN g <= 60000 THEN (g * 7919 % 25000 + 1)::bigint
				ELSE (40000 + (g - 60001) / 2)::bigint END AS id,
		   g AS payload, 'r' || g AS label
	FROM generate_series(1, 63000) g;
-- the ids seen before: those below 10000
CREATE TABLE in_events (id bigint PRIMARY KEY, payload int, label text);
INSERT INTO in_events SELECT DISTINCT id, 0, 'seen' FROM in_staging WHERE id < 10000;
CREATE TEMP TABLE in_new_ids AS SELECT DISTINCT id FROM in_staging WHERE id >= 10000;

\ir include/forced_parallel.psql

-- Tables of every private kind holding the seen ids: cpht_insert_new into
-- a copy of in_events against the oracle and against cpht_fop_rows into
-- another copy, with `workers` forced workers.
CREATE FUNCTION pg_temp.answers(workers int) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	how text := CASE WHEN workers > 0 THEN 'parallel' ELSE 'serial' END;
	seeds bigint[] := ARRAY(SELECT id FROM in_events);
	want bigint := (SELECT count(*) FROM in_new_ids);
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
		CREATE TEMP TABLE in_a (LIKE in_events INCLUDING ALL);
		CREATE TEMP TABLE in_b (LIKE in_events INCLUDING ALL);
		INSERT INTO in_a SELECT * FROM in_events;
		INSERT INTO in_b SELECT * FROM in_events;
		before := pg_temp.scans('in_staging');
		n := cpht_insert_new(h, 'in_staging', 'in_a');
		IF workers > 0 THEN
			RETURN NEXT ok(pg_temp.scans('in_staging') > before,
				format('%s %s: parallel workers scanned the source (%s)', how, cfg.kind, pg_temp.scans('in_staging') - before));
		ELSE
			RETURN NEXT is(pg_temp.scans('in_staging'), before, format('%s %s: no parallel worker scanned it', how, cfg.kind));
		END IF;
		RETURN NEXT is(n, want,
			format('%s %s (transactional %s, key_bits %s): one row per new id inserted', how, cfg.kind, cfg.txn, cfg.bits));
		INSERT INTO in_b SELECT * FROM cpht_fop_rows(ha, NULL::in_staging, 'SELECT * FROM in_staging');
		RETURN NEXT results_eq('SELECT id FROM in_a WHERE label <> ''seen'' ORDER BY id',
			'SELECT id FROM in_b WHERE label <> ''seen'' ORDER BY id',
			format('%s %s: the ids cpht_fop_rows inserts, each once', how, cfg.kind));
		RETURN NEXT is((SELECT count(*) FROM in_a a WHERE a.label <> 'seen'
						AND NOT EXISTS (SELECT 1 FROM in_staging s WHERE (s.id, s.payload, s.label) = (a.id, a.payload, a.label))),
			0::bigint, format('%s %s: every row inserted is a row of the source', how, cfg.kind));
		RETURN NEXT is(cpht_insert_new(h, 'in_staging', 'in_a'), 0::bigint,
			format('%s %s: a second call inserts nothing', how, cfg.kind));
		DROP TABLE in_a, in_b;
		PERFORM cpht_drop(h);
		PERFORM cpht_drop(ha);
	END LOOP;
END $$;

SELECT pg_temp.answers(2);
SELECT pg_temp.answers(0);
SELECT pg_temp.forced(2);

-- savepoints: the caller's rollback undoes the rows and the keys
CREATE TABLE in_target (LIKE in_events INCLUDING ALL);
SELECT cpht_create(100000) AS hr \gset
SAVEPOINT s;
SELECT is(cpht_insert_new(:hr, 'in_staging', 'in_target'), 25000::bigint + 1500, 'in a savepoint, every distinct id''s row is inserted');
ROLLBACK TO SAVEPOINT s;
SELECT is((SELECT count(*) FROM in_target), 0::bigint, 'ROLLBACK TO SAVEPOINT removes the rows');
SELECT is(cpht_count(:hr), 0::bigint, 'and the keys');
SELECT is(cpht_insert_new(:hr, 'in_staging', 'in_target'), 26500::bigint, 'which are new again');
SELECT is((SELECT count(*) FROM in_target), 26500::bigint, 'and inserted again');

-- NULL keys are an error, as in cpht_fop_rows
CREATE TABLE in_nulls AS SELECT CASE WHEN g = 4321 THEN NULL ELSE g::bigint END AS id, g AS payload, 'n' AS label
	FROM generate_series(1, 20000) g;
SELECT cpht_create(100000) AS hn \gset
SELECT throws_ok(format('SELECT cpht_insert_new(%s, %L, %L)', :hn, 'in_nulls', 'in_target'), '22004', NULL,
	'a NULL key is 22004');
CREATE VIEW in_nulls_view AS SELECT * FROM in_nulls;
SELECT throws_ok(format('SELECT cpht_insert_new(%s, %L, %L)', :hn, 'in_nulls_view', 'in_target'), '22004', NULL,
	'also through cpht_fop_rows');

-- errors of the arguments
SELECT throws_ok(format('SELECT cpht_insert_new(%s, %L, %L, %L)', :hn, 'in_staging', 'in_target', 'nope'), '42703', NULL,
	'an unknown key column is 42703');
SELECT throws_ok(format('SELECT cpht_insert_new(%s, %L, %L, %L)', :hn, 'in_staging', 'in_target', 'payload'), '42804', NULL,
	'an integer key column is 42804: keys are bigint, as in cpht_fop_rows');
SELECT throws_ok(format('SELECT cpht_insert_new(%s, %L, %L)', 999999, 'in_staging', 'in_target'), '42704', NULL,
	'an unknown handle is 42704');
SELECT is(cpht_insert_new(:hn, 'in_staging', NULL), NULL, 'a NULL argument gives NULL');
CREATE TABLE in_narrow (id bigint);
SELECT throws_ok(format('SELECT cpht_insert_new(%s, %L, %L)', :hn, 'in_staging', 'in_narrow'), '42601', NULL,
	'a target with fewer columns than the source is the INSERT''s error');
SELECT is(cpht_count(:hn), 0::bigint, 'and no key was put');

-- what the INSERT into the target applies: assignment casts and typmods,
-- domains, defaults, triggers, CHECK constraints
CREATE DOMAIN in_small AS int CHECK (VALUE < 62900);
CREATE TABLE in_typed (id bigint PRIMARY KEY, payload in_small, label varchar(6),
	at numeric(4,1) DEFAULT 1.25, seen_by text DEFAULT 'none');
CREATE TABLE in_log (n bigint);
CREATE FUNCTION pg_temp.stamp() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	NEW.seen_by := 'trigger';
	RETURN NEW;
END $$;
CREATE FUNCTION pg_temp.count_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO in_log SELECT count(*) FROM new_rows;
	RETURN NULL;
END $$;
CREATE TRIGGER in_stamp BEFORE INSERT ON in_typed FOR EACH ROW EXECUTE FUNCTION pg_temp.stamp();
CREATE TRIGGER in_count AFTER INSERT ON in_typed REFERENCING NEW TABLE AS new_rows
	FOR EACH STATEMENT EXECUTE FUNCTION pg_temp.count_rows();
CREATE TABLE in_short AS SELECT * FROM in_staging WHERE payload <= 20000;
SELECT cpht_create(100000) AS ht \gset
SELECT is(cpht_insert_new(:ht, 'in_short', 'in_typed'), (SELECT count(DISTINCT id) FROM in_short), 'into a typed target');
SELECT is((SELECT count(*) FROM in_typed WHERE seen_by = 'trigger' AND at = 1.3), (SELECT count(*) FROM in_typed),
	'its BEFORE trigger ran on every row, and the default went through numeric(4,1)');
SELECT is((SELECT sum(n) FROM in_log), (SELECT count(*) FROM in_typed)::numeric, 'its statement trigger saw every row');
SELECT ok((SELECT max(payload) FROM in_typed) <= 20000 AND (SELECT max(length(label)) FROM in_typed) <= 6,
	'the rows are the source''s');
CREATE TABLE in_long AS SELECT id + 100000 AS id, payload, label || 'xxxxx' AS label FROM in_staging WHERE payload < 100;
SELECT throws_ok(format('SELECT cpht_insert_new(%s, %L, %L)', :ht, 'in_long', 'in_typed'), '22001', NULL,
	'a label too long for varchar(6) is 22001');
CREATE TABLE in_big AS SELECT id + 200000 AS id, payload, label FROM in_staging WHERE payload > 62800;
SELECT throws_ok(format('SELECT cpht_insert_new(%s, %L, %L)', :ht, 'in_big', 'in_typed'), '23514', NULL,
	'a payload the domain refuses is 23514');
ALTER TABLE in_typed ADD CONSTRAINT in_odd CHECK (id < 300000 OR id % 1000 <> 999);
CREATE TABLE in_check AS SELECT id + 300000 AS id, payload, label FROM in_short;
SELECT cpht_count(:ht) AS count_before \gset
SELECT throws_ok(format('SELECT cpht_insert_new(%s, %L, %L)', :ht, 'in_check', 'in_typed'), '23514', NULL,
	'a CHECK of the target that fails is 23514');
SELECT is((SELECT count(*) FROM in_typed WHERE id > 300000), 0::bigint, 'and no row was inserted');
SELECT is(cpht_count(:ht), :count_before::bigint, 'nor a key kept');

-- sources read through cpht_fop_rows: views, inheritance, partitions
CREATE VIEW in_view AS SELECT * FROM in_staging WHERE id % 2 = 0;
CREATE TABLE in_parent (id bigint, payload int, label text);
CREATE TABLE in_child () INHERITS (in_parent);
INSERT INTO in_parent SELECT g, g, 'p' FROM generate_series(1, 3000) g;
INSERT INTO in_child SELECT g, g, 'c' FROM generate_series(2001, 9000) g;
CREATE TABLE in_part (id bigint, payload int, label text) PARTITION BY HASH (id);
CREATE TABLE in_part_0 PARTITION OF in_part FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE in_part_1 PARTITION OF in_part FOR VALUES WITH (MODULUS 2, REMAINDER 1);
INSERT INTO in_part SELECT * FROM in_staging;
SELECT cpht_create(100000) AS hv \gset
TRUNCATE in_target;
SELECT is(cpht_insert_new(:hv, 'in_view', 'in_target'), (SELECT count(DISTINCT id) FROM in_view), 'a view');
SELECT results_eq('SELECT id FROM in_target ORDER BY id', 'SELECT DISTINCT id FROM in_view ORDER BY id',
	'its new ids, each once');
SELECT is(cpht_insert_new(:hv, 'in_parent', 'in_target'), 9000::bigint - 4500, 'a parent table''s rows include its children''s');
SELECT count(*) AS part_new FROM (SELECT id FROM in_staging EXCEPT SELECT id FROM in_target) x \gset
SELECT is(cpht_insert_new(:hv, 'in_part', 'in_target'), :part_new::bigint, 'a partitioned table');
SELECT is((SELECT count(*) FROM in_target), (SELECT count(*) FROM (SELECT id FROM in_staging UNION SELECT id FROM in_parent) u),
	'after which the target holds each id once');

-- The order the rows go in: by key into a target with a B-tree index led
-- by the column the key goes into (found by position, past a dropped
-- column), so the index fills leaf by leaf; into a target without one, in
-- the source's order.  The source holds its keys in descending order.
CREATE TABLE in_ordered_src (id bigint, payload int);
INSERT INTO in_ordered_src SELECT 100000 - g, g FROM generate_series(1, 5000) g;
CREATE TABLE in_ordered_keyed (gone int, k bigint, p int);
ALTER TABLE in_ordered_keyed DROP COLUMN gone;
CREATE INDEX ON in_ordered_keyed (k);
CREATE TABLE in_ordered_plain (k bigint, p int);
CREATE INDEX ON in_ordered_plain (p);
SELECT cpht_create(100000) AS ho1, cpht_create(100000) AS ho2 \gset
SELECT is(cpht_insert_new(:ho1, 'in_ordered_src', 'in_ordered_keyed'), 5000::bigint, 'into a table indexed by the key');
SELECT ok((SELECT bool_and(k < next) FROM (SELECT k, lead(k) OVER (ORDER BY ctid) AS next FROM in_ordered_keyed) x),
	'its rows went in in key order');
SELECT is(cpht_insert_new(:ho2, 'in_ordered_src', 'in_ordered_plain'), 5000::bigint, 'into a table with no index on the key');
SELECT ok((SELECT bool_and(k > next) FROM (SELECT k, lead(k) OVER (ORDER BY ctid) AS next FROM in_ordered_plain) x),
	'its rows went in in the source''s order');

-- Key order is bigint order, negative keys first; many new rows go in as
-- several INSERTs (as many rows each as the larger of work_mem and
-- maintenance_work_mem holds, 65536 at least), each a range of keys, so the
-- whole load is in key order.  The rows' other
-- columns come through whole whatever their length (some stored out of
-- line).
CREATE TABLE in_signed_src (id bigint, payload int);
INSERT INTO in_signed_src SELECT 2500 - g, g FROM generate_series(1, 5000) g;
CREATE TABLE in_signed_keyed (k bigint PRIMARY KEY, p int);
SELECT cpht_create(100000) AS ho3 \gset
SELECT is(cpht_insert_new(:ho3, 'in_signed_src', 'in_signed_keyed'), 5000::bigint, 'negative and positive keys');
SELECT ok((SELECT bool_and(k < next) FROM (SELECT k, lead(k) OVER (ORDER BY ctid) AS next FROM in_signed_keyed) x),
	'went in in bigint order');
CREATE TABLE in_wide_src (id bigint, payload text);
INSERT INTO in_wide_src
SELECT hashint8(g)::bigint * 1000 + g % 1000,
	CASE WHEN g % 5000 = 0 THEN repeat(md5(g::text), 200) ELSE repeat('x', g % 90) END
FROM generate_series(1, 200000) g;
INSERT INTO in_wide_src SELECT id, 'a repeat' FROM in_wide_src WHERE id % 7 = 0;
-- (n numbers the rows as they go in: the rows' sizes differ, so a later
-- row may take the space an earlier page had left)
CREATE TABLE in_wide_keyed (k bigint, p text, n bigserial);
CREATE INDEX ON in_wide_keyed (k);
CREATE TABLE in_wide_statements (target text);
CREATE FUNCTION pg_temp.count_statement() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO in_wide_statements VALUES (TG_TABLE_NAME);
	RETURN NULL;
END $$;
CREATE TRIGGER in_wide_count AFTER INSERT ON in_wide_keyed
	FOR EACH STATEMENT EXECUTE FUNCTION pg_temp.count_statement();
SELECT cpht_create(400000) AS ho4 \gset
SET work_mem = '64kB';
SET maintenance_work_mem = '1MB';
SELECT is(cpht_insert_new(:ho4, 'in_wide_src', 'in_wide_keyed'), (SELECT count(DISTINCT id) FROM in_wide_src),
	'more new rows than one INSERT takes');
SELECT cmp_ok((SELECT count(*) FROM in_wide_statements WHERE target = 'in_wide_keyed'), '>=', 3::bigint,
	'in several INSERTs');
-- maintenance_work_mem alone makes room for them all
CREATE TABLE in_wide_keyed2 (LIKE in_wide_keyed INCLUDING DEFAULTS INCLUDING INDEXES);
CREATE TRIGGER in_wide_count AFTER INSERT ON in_wide_keyed2
	FOR EACH STATEMENT EXECUTE FUNCTION pg_temp.count_statement();
SELECT cpht_create(400000) AS ho5 \gset
SET maintenance_work_mem = '256MB';
SELECT is(cpht_insert_new(:ho5, 'in_wide_src', 'in_wide_keyed2'), (SELECT count(DISTINCT id) FROM in_wide_src),
	'the same rows at a larger maintenance_work_mem');
SELECT is((SELECT count(*) FROM in_wide_statements WHERE target = 'in_wide_keyed2'), 1::bigint,
	'in one INSERT');
RESET maintenance_work_mem;
RESET work_mem;
SELECT ok((SELECT bool_and(k < next) FROM (SELECT k, lead(k) OVER (ORDER BY n) AS next FROM in_wide_keyed) x),
	'went in in key order across the INSERTs');
SELECT is((SELECT count(*) FROM in_wide_keyed t
	WHERE NOT EXISTS (SELECT 1 FROM in_wide_src s WHERE s.id = t.k AND s.payload = t.p)), 0::bigint,
	'each a row of the source, whole');

-- Every INSERT reads the rows the scan saw, whatever the statements before
-- it changed in the source: a statement trigger on the target that empties
-- the source after each INSERT, and a delete earlier in the calling
-- statement (which the call's snapshot does not see), take no row away.
CREATE TABLE in_gone_src (id bigint);
INSERT INTO in_gone_src SELECT g FROM generate_series(1, 70000) g;
CREATE TABLE in_gone_keyed (k bigint PRIMARY KEY);
CREATE FUNCTION pg_temp.empty_source() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	DELETE FROM in_gone_src;
	RETURN NULL;
END $$;
CREATE TRIGGER in_gone_empty AFTER INSERT ON in_gone_keyed
	FOR EACH STATEMENT EXECUTE FUNCTION pg_temp.empty_source();
SELECT cpht_create(100000) AS ho6 \gset
SET work_mem = '64kB';
SET maintenance_work_mem = '1MB';
SELECT is(cpht_insert_new(:ho6, 'in_gone_src', 'in_gone_keyed'), 70000::bigint,
	'a source emptied after each INSERT: every row');
RESET maintenance_work_mem;
RESET work_mem;
SELECT is((SELECT count(*) FROM in_gone_keyed), 70000::bigint, 'all in the target');
DROP TRIGGER in_gone_empty ON in_gone_keyed;
TRUNCATE in_gone_keyed;
INSERT INTO in_gone_src SELECT g FROM generate_series(1, 100) g;
SELECT cpht_create(1000) AS ho7 \gset
WITH gone AS (DELETE FROM in_gone_src WHERE id > 50 RETURNING id)
SELECT is(cpht_insert_new(:ho7, 'in_gone_src', 'in_gone_keyed'), 100::bigint,
	'rows the calling statement deleted, as its snapshot sees them')
FROM (SELECT count(*) FROM gone) g;

-- Under cpht.max_memory an INSERT holds no more rows than the cap leaves
-- room for, though that is fewer than 65536: 66000 new rows of about 1kB
-- (66MB in one INSERT of 65536) under a cap of 56MB.  In a session of its
-- own (dblink c), so that no table of this file counts against the cap:
-- the GPU tables above hold buffers that would fill it already.
CREATE FUNCTION pg_temp.capped_test() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	h int;
BEGIN
	IF pg_temp.why_no_dblink() IS NOT NULL THEN
		RETURN NEXT skip(pg_temp.why_no_dblink(), 1);
		RETURN;
	END IF;
	PERFORM pg_temp.connect('c');
	PERFORM dblink_exec('c', $q$CREATE TABLE in_capped_src AS
		SELECT hashint8(g)::bigint * 100000 + g AS id, repeat('c', 1000) AS pad FROM generate_series(1, 66000) g$q$);
	PERFORM dblink_exec('c', 'CREATE TABLE in_capped_keyed (k bigint PRIMARY KEY, pad text)');
	h := (SELECT v FROM dblink('c', 'SELECT cpht_create(100000)') AS t(v int));
	PERFORM dblink_exec('c', $q$SET cpht.max_memory = '56MB'$q$);
	RETURN NEXT is((SELECT v FROM dblink('c', format('SELECT cpht_insert_new(%s, %L, %L)', h, 'in_capped_src',
														 'in_capped_keyed')) AS t(v bigint)),
				   66000::bigint, 'rows too many for one INSERT under cpht.max_memory');
	PERFORM dblink_exec('c', 'RESET cpht.max_memory');
	PERFORM pg_temp.remote('c', format('SELECT cpht_drop(%s)', h));
	PERFORM dblink_exec('c', 'DROP TABLE in_capped_src, in_capped_keyed');
	PERFORM dblink_disconnect('c');
END $$;

SELECT pg_temp.capped_test();

-- Only the call's own INSERT gets the node: a statement planned while the
-- call runs (here by a trigger on the target) that reads the source by
-- ctid keeps PostgreSQL's TID scan, also when its plan is kept for later.
CREATE TABLE in_lookup_dst (id bigint);
CREATE FUNCTION pg_temp.prepare_lookup() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE 'PREPARE in_lookup(tid[]) AS SELECT count(*) FROM ONLY in_gone_src WHERE ctid = ANY ($1)';
	EXECUTE 'EXECUTE in_lookup(''{}'')';
	RETURN NULL;
END $$;
CREATE TRIGGER in_lookup_prepare AFTER INSERT ON in_lookup_dst
	FOR EACH STATEMENT EXECUTE FUNCTION pg_temp.prepare_lookup();
CREATE FUNCTION pg_temp.plan_of(query text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	line text;
	plan text := '';
BEGIN
	FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || query LOOP
		plan := plan || line || E'\n';
	END LOOP;
	RETURN plan;
END $$;
SET plan_cache_mode = force_generic_plan;
SELECT cpht_create(1000) AS ho8 \gset
SELECT is(cpht_insert_new(:ho8, 'in_gone_src', 'in_lookup_dst'), 50::bigint, 'a target whose trigger plans a lookup');
SELECT unalike(pg_temp.plan_of('EXECUTE in_lookup(''{"(0,1)"}'')'), '%cpht rows by tid%',
	'the lookup''s kept plan is not the node');
DEALLOCATE in_lookup;
RESET plan_cache_mode;

-- privileges and row-level security
CREATE ROLE in_loader;
CREATE ROLE in_reader;
GRANT SELECT ON in_staging TO in_loader, in_reader;
GRANT SELECT, INSERT ON in_target TO in_loader;
GRANT SELECT ON in_target TO in_reader;
TRUNCATE in_target;

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

-- a table that is not transactional: a refused call must put nothing
SELECT cpht_create(100000, transactional => false) AS hp \gset
SELECT is(pg_temp.result_as_role('in_reader', format('SELECT cpht_insert_new(%s, %L, %L)', :hp, 'in_staging', 'in_target')),
	'42501', 'without INSERT on the target: 42501');
SELECT is(cpht_count(:hp), 0::bigint, 'before any key was put (a table that is not transactional)');
REVOKE SELECT ON in_staging FROM in_loader;
GRANT SELECT (id) ON in_staging TO in_loader;
SELECT is(pg_temp.result_as_role('in_loader', format('SELECT cpht_insert_new(%s, %L, %L)', :hp, 'in_staging', 'in_target')),
	'42501', 'with SELECT on the key column only: 42501 (the rows are read whole)');
SELECT is(pg_temp.result_as_role('in_loader', format('SELECT cpht_insert_new(%s, %L, %L)', :hp, 'in_view', 'in_target')),
	'42501', 'the same through cpht_fop_rows');
SELECT is(cpht_count(:hp), 0::bigint, 'and no key was put');
GRANT SELECT ON in_staging TO in_loader;
CREATE POLICY in_even ON in_staging FOR SELECT USING (id % 2 = 0);
ALTER TABLE in_staging ENABLE ROW LEVEL SECURITY;
SELECT is(pg_temp.result_as_role('in_loader', format('SELECT cpht_insert_new(%s, %L, %L)', :hp, 'in_staging', 'in_target')),
	(SELECT count(DISTINCT id)::text FROM in_staging WHERE id % 2 = 0),
	'under a row-level security policy of the source only the visible rows are inserted');
SELECT is((SELECT count(*) FROM in_target WHERE id % 2 = 1), 0::bigint, 'no row the policy hides');
SELECT is(cpht_find(:hp, ARRAY(SELECT DISTINCT id FROM in_staging WHERE id % 2 = 1)),
	array_fill(false, ARRAY[(SELECT count(DISTINCT id)::int FROM in_staging WHERE id % 2 = 1)]),
	'and no key the policy hides is in the table');
SELECT is(cpht_insert_new(:hp, 'in_staging', 'in_target'), (SELECT count(DISTINCT id) FROM in_staging WHERE id % 2 = 1),
	'the owner, whom the policy does not restrict, inserts the rest');
ALTER TABLE in_staging DISABLE ROW LEVEL SECURITY;

-- A cancel part way through a call (statement_timeout in dblink session
-- c, at half the time a whole call took there, most of it the INSERT):
-- 57014, and neither a row nor a key of the call stays.
CREATE FUNCTION pg_temp.cancel_tests() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	h int;
	whole float8;
	ms int;
	canceled int;
	t0 timestamptz;
BEGIN
	IF pg_temp.why_no_dblink() IS NOT NULL THEN
		RETURN NEXT skip(pg_temp.why_no_dblink(), 3);
		RETURN;
	END IF;
	PERFORM pg_temp.connect('c');
	PERFORM dblink_exec('c', $q$CREATE TABLE in_cancel_src AS
		SELECT (g * 2654435761 % 4000000)::bigint AS id, g AS payload FROM generate_series(1, 1000000) g$q$);
	PERFORM dblink_exec('c', 'CREATE TABLE in_cancel_dst (id bigint PRIMARY KEY, payload int)');
	PERFORM dblink_exec('c', 'INSERT INTO in_cancel_dst VALUES (1, 0), (2, 0), (3, 0)');
	PERFORM dblink_exec('c', 'SET max_parallel_workers_per_gather = 2');
	PERFORM dblink_exec('c', 'SET min_parallel_table_scan_size = 0');
	PERFORM dblink_exec('c', 'SET parallel_setup_cost = 0');
	h := (SELECT v FROM dblink('c', 'SELECT cpht_create(2000000)') AS t(v int));
	PERFORM dblink_exec('c', 'BEGIN');
	PERFORM pg_temp.remote('c', format('SELECT cpht_put(%s, ARRAY[1, 2, 3]::bigint[])', h));
	t0 := clock_timestamp();
	PERFORM pg_temp.remote('c', format('SELECT cpht_insert_new(%s, %L, %L)', h, 'in_cancel_src', 'in_cancel_dst'));
	whole := extract(epoch FROM clock_timestamp() - t0) * 1000;
	PERFORM dblink_exec('c', 'ROLLBACK');
	FOREACH ms IN ARRAY ARRAY[greatest(whole / 2, 1), greatest(whole / 4, 1), greatest(whole / 8, 1)]::int[] LOOP
		PERFORM pg_temp.remote('c', format('SELECT cpht_put(%s, ARRAY[1, 2, 3]::bigint[])', h));
		IF pg_temp.canceled_by_timeout('c', format('SELECT cpht_insert_new(%s, %L, %L)', h, 'in_cancel_src', 'in_cancel_dst'), ms) THEN
			canceled := ms;
		END IF;
		EXIT WHEN canceled IS NOT NULL;
		-- it finished first: back to the three rows and keys
		PERFORM dblink_exec('c', 'DELETE FROM in_cancel_dst WHERE id > 3');
		PERFORM pg_temp.remote('c', format('SELECT cpht_drop(%s)', h));
		h := (SELECT v FROM dblink('c', 'SELECT cpht_create(2000000)') AS t(v int));
	END LOOP;
	RETURN NEXT ok(canceled IS NOT NULL,
		format('a cpht_insert_new canceled by statement_timeout (%s ms of %s): 57014', canceled, round(whole)));
	RETURN NEXT is((SELECT v FROM dblink('c', 'SELECT count(*) FROM in_cancel_dst') AS t(v bigint)), 3::bigint,
		'the target holds none of its rows');
	RETURN NEXT is((SELECT v FROM dblink('c', format('SELECT cpht_count(%s)', h)) AS t(v bigint)), 3::bigint,
		'the transactional table none of its keys');
	PERFORM pg_temp.remote('c', format('SELECT cpht_drop(%s)', h));
	PERFORM dblink_exec('c', 'DROP TABLE in_cancel_src, in_cancel_dst');
	PERFORM dblink_disconnect('c');
END $$;

SELECT pg_temp.cancel_tests();

-- shared tables, in dblink session a: transactional or not, with forced
-- parallel workers
CREATE FUNCTION pg_temp.shared_tests() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	why text := pg_temp.why_skip();
	h1 int;
	h2 int;
	r text;
BEGIN
	IF why IS NOT NULL THEN
		RETURN NEXT skip(why, 6);
		RETURN;
	END IF;
	PERFORM pg_temp.connect('a');
	PERFORM dblink_exec('a', 'SET statement_timeout = ''60s''');
	PERFORM dblink_exec('a', $q$CREATE TABLE in_shared_src AS
		SELECT (g * 7919 % 25000)::bigint AS id, g AS payload FROM generate_series(1, 60000) g$q$);
	PERFORM dblink_exec('a', 'CREATE TABLE in_shared_dst (id bigint PRIMARY KEY, payload int)');
	PERFORM dblink_exec('a', 'SET max_parallel_workers_per_gather = 2');
	PERFORM dblink_exec('a', 'SET min_parallel_table_scan_size = 0');
	PERFORM dblink_exec('a', 'SET cpht.batch_size = 1024');
	h1 := (SELECT v FROM dblink('a', $q$SELECT cpht_create(100000, name => 'in_shared_txn')$q$) AS t(v int));
	h2 := (SELECT v FROM dblink('a', $q$SELECT cpht_create(100000, name => 'in_shared_plain', transactional => false)$q$) AS t(v int));

	PERFORM dblink_exec('a', 'BEGIN');
	r := (SELECT v FROM dblink('a', format('SELECT cpht_insert_new(%s, %L, %L)::text', h1, 'in_shared_src', 'in_shared_dst')) AS t(v text));
	RETURN NEXT is(r, '25000', 'a transactional shared table, parallel: one row per distinct id');
	RETURN NEXT is(cpht_count(cpht_open('in_shared_txn')), 0::bigint, 'other sessions do not see the keys before commit');
	PERFORM dblink_exec('a', 'ROLLBACK');
	RETURN NEXT is(cpht_count(cpht_open('in_shared_txn')), 0::bigint, 'the caller''s rollback undoes them');
	r := (SELECT v FROM dblink('a', format('SELECT cpht_insert_new(%s, %L, %L)::text', h1, 'in_shared_src', 'in_shared_dst')) AS t(v text));
	RETURN NEXT is(r || '/' || cpht_count(cpht_open('in_shared_txn')), '25000/25000', 'a committed call keeps rows and keys');
	PERFORM dblink_exec('a', 'TRUNCATE in_shared_dst');
	r := (SELECT v FROM dblink('a', format('SELECT cpht_insert_new(%s, %L, %L)::text', h2, 'in_shared_src', 'in_shared_dst')) AS t(v text));
	RETURN NEXT is(r, '25000', 'a shared table that is not transactional');
	r := (SELECT v FROM dblink('a', 'SELECT count(*)::text FROM in_shared_dst') AS t(v text));
	RETURN NEXT is(r, '25000', 'its rows are in the target');

	PERFORM dblink_exec('a', 'DROP TABLE in_shared_src, in_shared_dst');
	PERFORM pg_temp.remote('a', format('SELECT cpht_drop(%s)', h1));
	PERFORM pg_temp.remote('a', format('SELECT cpht_drop(%s)', h2));
	PERFORM dblink_disconnect('a');
END $$;

SELECT pg_temp.shared_tests();

SELECT * FROM finish();
ROLLBACK;
