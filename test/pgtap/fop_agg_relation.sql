-- SELECT cpht_fop_agg(h, col) FROM table, and nothing else, is planned as
-- cpht_fop_relation(h, table, col) (cpht.fop_agg_relation_scan): the plan
-- is the "cpht call" node, the answers and the table's keys are those of
-- the aggregate (NULL keys skipped, no rows, serial and parallel), every
-- other shape keeps its aggregate (WHERE, FILTER, a cast column, a view,
-- FROM ONLY, an inheritance parent, a NULL handle, row-level security, a role that may not run
-- cpht_fop_relation), privileges are checked as before, a
-- prepared statement follows its table when the name is given to another,
-- savepoints undo it; a shared table named inline by cpht_open or by its
-- name when cpht is preloaded.
BEGIN;
SELECT plan(59);

\ir include/shared_sessions.psql
\ir include/forced_parallel.psql

SET LOCAL cpht.batch_size = 1024;

-- 60000 rows, 25000 distinct ids from 1, 500 rows without an id
CREATE TABLE ar_src AS
	SELECT CASE WHEN g % 120 = 0 THEN NULL ELSE (g * 7919 % 25000 + 1)::bigint END AS id,
		   (g % 3000)::int AS small_id, g AS v
	FROM generate_series(1, 60000) g;
ANALYZE ar_src;
CREATE TABLE ar_empty (id bigint);

-- The plan of a query (COSTS OFF; VERBOSE as asked).
CREATE FUNCTION pg_temp.plan(sql text, opts text DEFAULT 'COSTS OFF') RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	line text;
	out text := '';
BEGIN
	FOR line IN EXECUTE format('EXPLAIN (%s) %s', opts, sql) LOOP
		out := out || line || E'\n';
	END LOOP;
	RETURN out;
END $$;

-- The one value a query returns, as text.
CREATE FUNCTION pg_temp.value(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	v text;
BEGIN
	EXECUTE sql INTO v;
	RETURN v;
END $$;

-- SQLSTATE of a statement, or 'ok'.
CREATE FUNCTION pg_temp.state(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE sql;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE;
END $$;

-- Two private tables seeded with the ids below 10000: one fed through the
-- rewrite, the other through the aggregate (the setting off).
SELECT cpht_create(100000, transactional => true) AS h, cpht_create(100000, transactional => true) AS ha \gset
SELECT cpht_fop(:h, ARRAY(SELECT g::bigint FROM generate_series(1, 9999) g)) IS NOT NULL AS seeded \gset
SELECT cpht_fop(:ha, ARRAY(SELECT g::bigint FROM generate_series(1, 9999) g)) IS NOT NULL AS seeded \gset
SELECT set_config('cpht_test.h', :'h', true), set_config('cpht_test.ha', :'ha', true);

SELECT ok(pg_temp.plan(format('SELECT cpht_fop_agg(%s, id) FROM ar_src', :h)) ~ 'Custom Scan \(cpht call\)'
	AND pg_temp.plan(format('SELECT cpht_fop_agg(%s, id) FROM ar_src', :h)) !~ 'Aggregate',
	'cpht_fop_agg over a whole table is planned as one call, with no aggregate');
SELECT ok(pg_temp.plan(format('SELECT cpht_fop_agg(%s, id) FROM ar_src', :h)) ~ format('Table: %s\s+Relation: ar_src\s+Key Column: id', :h),
	'EXPLAIN shows the table''s handle, the relation and the key column');
SELECT ok(pg_temp.plan(format('SELECT cpht_fop_agg(%s, id) FROM ar_src', :h), 'VERBOSE, COSTS OFF')
		~ format('cpht_fop_relation\(%s, ''ar_src''::regclass, ''id''::name\)', :h),
	'... of cpht_fop_relation on the same table and column (EXPLAIN VERBOSE)');
SET LOCAL cpht.fop_agg_relation_scan = off;
SELECT ok(pg_temp.plan(format('SELECT cpht_fop_agg(%s, id) FROM ar_src', :ha)) ~ 'Aggregate',
	'with cpht.fop_agg_relation_scan off it is an aggregate');
SELECT is(pg_temp.value(format('SELECT cpht_fop_agg(%s, id) FROM ar_src', :ha)), '15001',
	'the aggregate counts the 15001 new keys');
RESET cpht.fop_agg_relation_scan;
SELECT is(pg_temp.value(format('SELECT cpht_fop_agg(%s, id) FROM ar_src', :h)), '15001',
	'so does the rewritten query, NULL keys skipped');
SELECT is(cpht_count(:h), cpht_count(:ha), 'both tables hold as many keys');
SELECT is(cpht_find(:h, ARRAY(SELECT g::bigint FROM generate_series(0, 26000) g)),
		  cpht_find(:ha, ARRAY(SELECT g::bigint FROM generate_series(0, 26000) g)),
	'... the same keys');
SELECT is(pg_temp.value(format('SELECT cpht_fop_agg(%s, id) FROM ar_src', :h)), '0',
	'a second time nothing is new');
SELECT is(pg_temp.value(format('SELECT cpht_fop_agg(%s, id) FROM ar_empty', :h)), '0',
	'over no rows it is 0, as the aggregate');

-- in parallel workers (the relation's own scan), with the same answer
SELECT cpht_create(100000) AS hp \gset
SELECT pg_temp.forced(2);
SELECT set_config('cpht_test.scans', pg_temp.scans('ar_src')::text, true);
SELECT is(pg_temp.value(format('SELECT cpht_fop_agg(%s, id) FROM ar_src', :hp)), '25000',
	'with parallel workers it counts every key once');
SELECT ok(pg_temp.scans('ar_src') > current_setting('cpht_test.scans')::bigint,
	'... parallel workers scanned the table');
SELECT pg_temp.forced(0);

-- every other shape keeps its aggregate, and its answer
SELECT ok(pg_temp.plan(format('SELECT cpht_fop_agg(%s, id) FROM ar_src WHERE v > 0', :h)) ~ 'Aggregate',
	'with WHERE it stays an aggregate');
SELECT ok(pg_temp.plan(format('SELECT cpht_fop_agg(%s, id) FILTER (WHERE v > 0) FROM ar_src', :h)) ~ 'Aggregate',
	'with FILTER too');
SELECT ok(pg_temp.plan(format('SELECT cpht_fop_agg(%s, small_id) FROM ar_src', :h)) ~ 'Aggregate',
	'over an integer column (a cast) too');
SELECT ok(pg_temp.plan(format('SELECT cpht_fop_agg(%s, id), count(*) FROM ar_src', :h)) ~ 'Aggregate',
	'beside another output column too');
SELECT ok(pg_temp.plan(format('SELECT cpht_fop_agg(%s, id) FROM ar_src GROUP BY v %% 2', :h)) ~ 'Aggregate',
	'with GROUP BY too');
CREATE VIEW ar_view AS SELECT id FROM ar_src;
SELECT ok(pg_temp.plan(format('SELECT cpht_fop_agg(%s, id) FROM ar_view', :h)) ~ 'Aggregate',
	'over a view too');
SELECT ok(pg_temp.plan(format('SELECT cpht_fop_agg(%s, id + 0) FROM ar_src', :h)) ~ 'Aggregate',
	'over an expression of the column too');
-- (a table of its own: a parent keeps relhassubclass after its children go)
CREATE TABLE ar_inh AS SELECT id FROM ar_src LIMIT 1000;
SELECT ok(pg_temp.plan(format('SELECT cpht_fop_agg(%s, id) FROM ONLY ar_inh', :h)) ~ 'Aggregate',
	'FROM ONLY keeps the aggregate');
CREATE TABLE ar_child () INHERITS (ar_inh);
INSERT INTO ar_child VALUES (900001);
SELECT is(pg_temp.value(format('SELECT cpht_fop_agg(%s, id) FROM ar_inh', :h)), '1',
	'without ONLY the children are read, as the aggregate reads them');
DROP TABLE ar_child;
SELECT throws_ok($$SELECT cpht_fop_agg(NULL::int, id) FROM ar_src$$, '22004', 'handle must not be null',
	'a NULL handle stays the aggregate''s error');
SELECT is(pg_temp.value(format('SELECT cpht_fop_agg(%s, id) FROM ar_src WHERE v > 0', :hp)), '0',
	'the aggregate that stays answers as before');

-- privileges: SELECT on the column is enough, as for the aggregate; none
-- is 42501 both ways
CREATE ROLE cpht_ar_col NOLOGIN;
CREATE ROLE cpht_ar_none NOLOGIN;
GRANT SELECT (id) ON ar_src TO cpht_ar_col;
GRANT USAGE ON SCHEMA public TO cpht_ar_col, cpht_ar_none;
SELECT cpht_create(100000) AS hr \gset
SET LOCAL ROLE cpht_ar_col;
SELECT is(pg_temp.value(format('SELECT cpht_fop_agg(%s, id) FROM ar_src', :hr)), '25000',
	'a role with SELECT on the key column alone gets the rewritten query''s answer');
RESET ROLE;
SET LOCAL ROLE cpht_ar_none;
SELECT is(pg_temp.state(format('SELECT cpht_fop_agg(%s, id) FROM ar_src', :hr)), '42501',
	'a role without SELECT is refused (42501)');
SET LOCAL cpht.fop_agg_relation_scan = off;
SELECT is(pg_temp.state(format('SELECT cpht_fop_agg(%s, id) FROM ar_src', :hr)), '42501',
	'... as the aggregate refuses it');
RESET cpht.fop_agg_relation_scan;
RESET ROLE;
-- a role that may not run cpht_fop_relation keeps the aggregate
REVOKE EXECUTE ON FUNCTION cpht_fop_relation(int, regclass, name) FROM PUBLIC;
SET LOCAL ROLE cpht_ar_col;
SELECT ok(pg_temp.plan(format('SELECT cpht_fop_agg(%s, id) FROM ar_src', :hr)) ~ 'Aggregate',
	'a role that may not run cpht_fop_relation keeps the aggregate');
SELECT is(pg_temp.value(format('SELECT cpht_fop_agg(%s, id) FROM ar_src', :hr)), '0',
	'... and its answer');
RESET ROLE;
-- a plan cached for a role that may run cpht_fop_relation (PL/pgSQL's
-- plan of its query) is planned again for a role that may not
CREATE ROLE cpht_ar_run NOLOGIN;
GRANT SELECT (id) ON ar_src TO cpht_ar_run;
GRANT USAGE ON SCHEMA public TO cpht_ar_run;
GRANT EXECUTE ON FUNCTION cpht_fop_relation(int, regclass, name) TO cpht_ar_run;
CREATE FUNCTION pg_temp.cached_fop() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	r bigint;
BEGIN
	SELECT cpht_fop_agg(current_setting('cpht_test.hc')::int, id) INTO r FROM ar_src;
	RETURN r;
END $$;
SELECT cpht_create(100000) AS hc1, cpht_create(100000) AS hc2 \gset
SET LOCAL ROLE cpht_ar_run;
SELECT set_config('cpht_test.hc', :'hc1', true);
SELECT is(pg_temp.cached_fop(), 25000::bigint,
	'a cached plan of the rewritten query, made for a role that may run cpht_fop_relation');
RESET ROLE;
SET LOCAL ROLE cpht_ar_col;
SELECT set_config('cpht_test.hc', :'hc2', true);
SELECT is(pg_temp.cached_fop(), 25000::bigint,
	'... is planned again, as the aggregate, for a role that may not');
RESET ROLE;
GRANT EXECUTE ON FUNCTION cpht_fop_relation(int, regclass, name) TO PUBLIC;
-- a role that may not run the aggregate is refused, as by the aggregate
REVOKE EXECUTE ON FUNCTION cpht_fop_agg(int, bigint) FROM PUBLIC;
SET LOCAL ROLE cpht_ar_col;
SELECT is(pg_temp.state(format('SELECT cpht_fop_agg(%s, id) FROM ar_src', :hr)), '42501',
	'a role that may not run cpht_fop_agg is refused (42501) with the rewrite on');
RESET ROLE;
GRANT EXECUTE ON FUNCTION cpht_fop_agg(int, bigint) TO PUBLIC;
-- an aggregate that borrows cpht_fop_agg's step with another final
-- function (here its serialization, a bytea), in cpht's schema, is not
-- cpht_fop_agg
CREATE AGGREGATE ar_state(int, bigint) (sfunc = cpht_fop_agg_step, stype = internal,
	finalfunc = cpht_fop_agg_serialize);
SELECT ok(pg_temp.plan(format('SELECT ar_state(%s, id) FROM ar_src', :hr)) ~ 'Aggregate',
	'an aggregate of another final function over cpht_fop_agg''s step keeps its plan');

-- row-level security that applies: the aggregate, over the rows the
-- policy lets the role see
CREATE TABLE ar_rls AS SELECT g::bigint AS id FROM generate_series(1, 1000) g;
ALTER TABLE ar_rls ENABLE ROW LEVEL SECURITY;
CREATE POLICY ar_even ON ar_rls FOR SELECT USING (id % 2 = 0);
GRANT SELECT ON ar_rls TO cpht_ar_col;
SELECT cpht_create(10000) AS hs \gset
SET LOCAL ROLE cpht_ar_col;
SELECT ok(pg_temp.plan(format('SELECT cpht_fop_agg(%s, id) FROM ar_rls', :hs)) ~ 'Aggregate',
	'a table whose row-level security applies keeps the aggregate');
SELECT is(pg_temp.value(format('SELECT cpht_fop_agg(%s, id) FROM ar_rls', :hs)), '500',
	'... which reads the rows the policy shows');
RESET ROLE;

-- the rewritten query reads the statement's snapshot, as the aggregate
-- does: a cursor sees no row written after its DECLARE, and a statement no
-- row its handle's function writes
CREATE TABLE ar_snap (id bigint);
INSERT INTO ar_snap SELECT g FROM generate_series(1, 100) g;
SELECT cpht_create(10000) AS hp1, cpht_create(10000) AS hp2, cpht_create(10000) AS hp3 \gset
SELECT ok(pg_temp.plan(format('SELECT cpht_fop_agg(%s, id) FROM ar_snap', :hp1)) ~ 'cpht call',
	'a plain table is rewritten');
DECLARE ar_c1 CURSOR FOR SELECT cpht_fop_agg(:hp1, id) FROM ar_snap;
SET LOCAL cpht.fop_agg_relation_scan = off;
DECLARE ar_c2 CURSOR FOR SELECT cpht_fop_agg(:hp2, id) FROM ar_snap;
RESET cpht.fop_agg_relation_scan;
INSERT INTO ar_snap SELECT g FROM generate_series(101, 150) g;
SELECT results_eq('FETCH ar_c1', $$VALUES (100::bigint)$$,
	'a cursor of the rewritten query reads the rows of its snapshot');
SELECT results_eq('FETCH ar_c2', $$VALUES (100::bigint)$$, '... as the aggregate''s cursor does');
CLOSE ar_c1;
CLOSE ar_c2;
CREATE FUNCTION pg_temp.h_inserting(h int) RETURNS int LANGUAGE plpgsql VOLATILE AS $$
BEGIN
	INSERT INTO ar_snap VALUES (424242);
	RETURN h;
END $$;
SELECT is(pg_temp.value(format('SELECT cpht_fop_agg(pg_temp.h_inserting(%s), id) FROM ar_snap', :hp3)), '150',
	'a row written by the function that gives the handle is not read by the statement');
SELECT is(cpht_count(:hp3), 150::bigint, '... nor put in the table');

-- An inheritance parent keeps the aggregate: cpht_fop_relation reads it
-- by a query under a snapshot of its own, taken after that query waited
-- for its children's locks, where the statement's snapshot was taken
-- before.  Another session holds a child's lock while it writes the
-- child, and commits while the statement waits: the aggregate, planned
-- with the children locked, reads those rows, as does cpht_fop_relation
-- called directly.
CREATE FUNCTION pg_temp.child_lock_tests() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	why text := pg_temp.why_no_dblink();
	h1 int := cpht_create(10000);
	h2 int := cpht_create(10000);
	q text;
BEGIN
	IF why IS NOT NULL THEN
		RETURN NEXT skip(why, 4);
		RETURN;
	END IF;
	-- a parent and child for each statement: this transaction keeps the
	-- locks the statement took
	PERFORM pg_temp.connect('w');
	FOR i IN 1..2 LOOP
		PERFORM dblink_exec('w', format('DROP TABLE IF EXISTS ar_wparent%s CASCADE', i));
		PERFORM dblink_exec('w', format('CREATE TABLE ar_wparent%s (id bigint)', i));
		PERFORM dblink_exec('w', format('CREATE TABLE ar_wchild%s () INHERITS (ar_wparent%s)', i, i));
		PERFORM dblink_exec('w', format('INSERT INTO ar_wparent%s SELECT g FROM generate_series(1, 100) g', i));
	END LOOP;
	q := format('SELECT cpht_fop_agg(%s, id) FROM ar_wparent1', h1);
	PERFORM pg_temp.write_child_locked('w', 'ar_wchild1', 101, 130);
	RETURN NEXT is(pg_temp.value(q), '130',
		'cpht_fop_agg over an inheritance parent reads the rows a child''s writer committed while the statement waited for its lock');
	PERFORM pg_temp.end_remote('w');
	RETURN NEXT ok(pg_temp.plan(q) ~ 'Aggregate' AND pg_temp.plan(q) !~ 'cpht call',
		'... as an aggregate');
	PERFORM pg_temp.write_child_locked('w', 'ar_wchild2', 101, 160);
	RETURN NEXT is(pg_temp.value(format('SELECT cpht_fop_relation(%s, ''ar_wparent2'', ''id'')', h2)), '160',
		'cpht_fop_relation of the parent reads them too');
	PERFORM pg_temp.end_remote('w');
	PERFORM dblink_disconnect('w');
	RETURN NEXT is(cpht_count(h1) + cpht_count(h2), 290::bigint, 'both tables hold those keys');
END $$;
-- Session conn locks the child, writes ids lo..hi into it and commits two
-- seconds later; returns once it holds the lock.
CREATE FUNCTION pg_temp.write_child_locked(conn text, child text, lo int, hi int) RETURNS void LANGUAGE plpgsql AS $fn$
BEGIN
	PERFORM dblink_send_query(conn, format($d$DO $x$ BEGIN
		LOCK TABLE %I IN ACCESS EXCLUSIVE MODE;
		INSERT INTO %I SELECT g FROM generate_series(%s, %s) g;
		PERFORM pg_sleep(2);
	END $x$ $d$, child, child, lo, hi));
	FOR i IN 1..3000 LOOP
		IF EXISTS (SELECT 1 FROM pg_locks
				   WHERE relation = child::regclass AND mode = 'AccessExclusiveLock' AND granted) THEN
			RETURN;
		END IF;
		PERFORM pg_sleep(0.01);
	END LOOP;
	RAISE EXCEPTION 'session % did not lock % in 30 s', conn, child;
END $fn$;
-- Waits for session conn's query sent by dblink_send_query.
CREATE FUNCTION pg_temp.end_remote(conn text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	PERFORM * FROM dblink_get_result(conn) AS t(v text);
	PERFORM * FROM dblink_get_result(conn) AS t(v text);
END $$;
SELECT * FROM pg_temp.child_lock_tests();

-- a prepared statement follows the name of its table, as any query does
CREATE TABLE ar_prep AS SELECT g::bigint AS id FROM generate_series(1, 100) g;
SELECT cpht_create(10000) AS hq \gset
SELECT set_config('cpht_test.hq', :'hq', true);
DO $$
BEGIN
	EXECUTE format('PREPARE ar_q AS SELECT cpht_fop_agg(%s, id) FROM ar_prep', current_setting('cpht_test.hq'));
END $$;
EXECUTE ar_q;
ALTER TABLE ar_prep RENAME TO ar_prep_old;
CREATE TABLE ar_prep AS SELECT g::bigint AS id FROM generate_series(1001, 1300) g;
SELECT is(pg_temp.value('EXECUTE ar_q'), '300',
	'a prepared statement reads the table that has its name now');
DEALLOCATE ar_q;
-- a child given to the table later makes a prepared statement's plan
-- again, and the parent keeps its aggregate
CREATE TABLE ar_grow AS SELECT g::bigint AS id FROM generate_series(1, 100) g;
SELECT cpht_create(10000) AS hg \gset
PREPARE ar_g AS SELECT cpht_fop_agg(:hg, id) FROM ar_grow;
SELECT is(pg_temp.value('EXECUTE ar_g'), '100', 'a prepared statement over a plain table');
SELECT ok(pg_temp.plan('EXECUTE ar_g') !~ 'Aggregate', '... is planned as one call');
CREATE TABLE ar_grow_child () INHERITS (ar_grow);
INSERT INTO ar_grow_child SELECT g FROM generate_series(101, 130) g;
SELECT ok(pg_temp.plan('EXECUTE ar_g') ~ 'Aggregate',
	'once the table has a child, the prepared statement is planned again, as the aggregate');
SELECT is(pg_temp.value('EXECUTE ar_g'), '30', '... which reads the child''s rows');
DEALLOCATE ar_g;
-- a handle as a parameter: evaluated once, in the generic plan too
PREPARE ar_p(int) AS SELECT cpht_fop_agg($1, id) FROM ar_prep;
SELECT set_config('plan_cache_mode', 'force_generic_plan', true);
SELECT is(pg_temp.value(format('EXECUTE ar_p(%s)', :hq)), '0', 'a handle bound to a parameter (a generic plan)');
SELECT ok(pg_temp.plan(format('EXECUTE ar_p(%s)', :hq), 'VERBOSE, COSTS OFF') ~ 'cpht_fop_relation\(\$1, ',
	'... is planned as one call of cpht_fop_relation');
RESET plan_cache_mode;
DEALLOCATE ar_p;

-- savepoints: the rewritten query's keys go with a rolled-back
-- subtransaction, as the aggregate's
SELECT cpht_create(100000, transactional => true) AS ht \gset
SAVEPOINT ar_s;
SELECT is(pg_temp.value(format('SELECT cpht_fop_agg(%s, id) FROM ar_src', :ht)), '25000', 'in a savepoint');
ROLLBACK TO SAVEPOINT ar_s;
SELECT is(cpht_count(:ht), 0::bigint, 'rolling back to the savepoint takes its keys out');

-- a shared table, named by cpht_open in the statement and by its name
CREATE FUNCTION pg_temp.shared_tests() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	why text := CASE WHEN (cpht_worker_info()->>'preloaded')::boolean THEN NULL
					 ELSE 'cpht is not in shared_preload_libraries: no shared tables' END;
	q text;
BEGIN
	IF why IS NOT NULL THEN
		RETURN NEXT skip(why, 7);
		RETURN;
	END IF;
	PERFORM cpht_create(100000, name => 'ar_shared');
	q := $q$SELECT cpht_fop_agg(cpht_open('ar_shared'), id) FROM ar_src$q$;
	RETURN NEXT ok(pg_temp.plan(q) ~ 'cpht call',
		'cpht_open written inline is evaluated once and the query planned as one call');
	RETURN NEXT is(pg_temp.value(q), '25000', '... with the answer');
	q := $q$SELECT cpht_fop_agg('ar_shared', id) FROM ar_src$q$;
	RETURN NEXT ok(pg_temp.plan(q, 'VERBOSE, COSTS OFF') ~ '''ar_shared''::cpht_table',
		'by name, EXPLAIN VERBOSE shows the name');
	RETURN NEXT ok(pg_temp.plan(q) ~ 'Table: ar_shared' AND pg_temp.plan(q) ~ 'Relation: ar_src'
		AND pg_temp.plan(q) ~ 'Key Column: id',
		'EXPLAIN shows the table by its name, the relation and the key column');
	RETURN NEXT is(pg_temp.value(q), '0', '... and nothing is new the second time');
	RETURN NEXT is(cpht_count('ar_shared'), 25000::bigint, 'the shared table holds every key');
	PERFORM pg_temp.forced(2);
	RETURN NEXT is(pg_temp.value(
		$q$SELECT cpht_fop_agg('ar_shared', id) FROM (SELECT id FROM ar_src UNION ALL SELECT 100001) s$q$), '1',
		'a subquery in FROM keeps the aggregate, in parallel over a shared table');
	PERFORM pg_temp.forced(0);
END $$;
SELECT * FROM pg_temp.shared_tests();

SELECT * FROM finish();
ROLLBACK;

-- the tables the other session committed (this transaction held their
-- locks to its end)
SET client_min_messages = warning;
DROP TABLE IF EXISTS ar_wparent1, ar_wparent2 CASCADE;
