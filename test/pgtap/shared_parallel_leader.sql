-- A transaction whose writes to transactional shared tables were made by
-- parallel workers alone: the leader session never sent the cpht worker a
-- request of its own (it only opened the table), yet the end of its
-- transaction must reach the worker, so that a commit keeps the keys for
-- everyone and a rollback undoes them.  Every parallel path: cpht_fop_agg
-- with force_parallel_mode and with the leader not participating, the
-- "cpht new keys" node, each committed and rolled back.  Session a creates
-- the tables and the staging relation; each case runs in a fresh session c
-- and is checked from session b.
BEGIN;
SELECT plan(18);

\ir include/shared_sessions.psql

CREATE FUNCTION pg_temp.value(conn text, sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	RETURN (SELECT v FROM dblink(conn, sql) AS t(v text));
END $$;

-- A fresh session c that has only opened shared table `name`, with plans
-- made parallel: force_parallel_mode (leader participating) or a Gather
-- whose leader reads nothing.
CREATE FUNCTION pg_temp.fresh_leader(name text, how text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	IF 'c' = ANY (coalesce(dblink_get_connections(), '{}')) THEN
		PERFORM dblink_disconnect('c');
	END IF;
	PERFORM pg_temp.connect('c');
	PERFORM dblink_exec('c', 'SET statement_timeout = ''60s''');
	PERFORM pg_temp.remote('c', format('SELECT set_config(''cpht_test.h'', cpht_open(%L)::text, false)', name));
	PERFORM dblink_exec('c', 'SET parallel_setup_cost = 0');
	PERFORM dblink_exec('c', 'SET parallel_tuple_cost = 0');
	PERFORM dblink_exec('c', 'SET min_parallel_table_scan_size = 0');
	PERFORM dblink_exec('c', 'SET max_parallel_workers_per_gather = 2');
	PERFORM dblink_exec('c', 'SET cpht.batch_size = 1024');
	IF how = 'forced' THEN
		PERFORM dblink_exec('c', 'SET force_parallel_mode = on');
	ELSE
		PERFORM dblink_exec('c', 'SET parallel_leader_participation = off');
	END IF;
END $$;

-- The statement of a case, over the handle session c holds.
CREATE FUNCTION pg_temp.statement(path text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	h text := pg_temp.value('c', 'SELECT current_setting(''cpht_test.h'')');
BEGIN
	IF path = 'agg' THEN
		RETURN format('SELECT cpht_fop_agg(%s, id)::text FROM pl_staging', h);
	END IF;
	RETURN format('SELECT count(*)::text FROM cpht_fop_new_relation(%s, %L)', h, 'pl_staging');
END $$;

CREATE FUNCTION pg_temp.leader_tests() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	why text := pg_temp.why_skip();
	ids bigint := 3000;
	c record;
	tab text;
	plan_text text;
	r text;
	n int := 0;
BEGIN
	IF why IS NOT NULL THEN
		RETURN NEXT skip(why, 18);
		RETURN;
	END IF;
	PERFORM pg_temp.connect('a');
	PERFORM pg_temp.connect('b');
	PERFORM dblink_exec('a', $q$CREATE TABLE pl_staging AS
		SELECT (g % 3000 + 1)::bigint AS id FROM generate_series(1, 9000) g$q$);
	PERFORM dblink_exec('a', 'ANALYZE pl_staging');

	FOR c IN SELECT * FROM (VALUES ('agg', 'forced'), ('agg', 'no_leader'), ('new_keys', 'no_leader'))
		AS v(path, how)
	LOOP
		n := n + 1;
		tab := format('pl_%s_%s', c.path, c.how);
		PERFORM pg_temp.remote('a', format('SELECT cpht_create(10000, name => %L)', tab));

		-- committed: the keys stay, for every session
		PERFORM pg_temp.fresh_leader(tab, c.how);
		plan_text := (SELECT string_agg(v, E'\n') FROM dblink('c', 'EXPLAIN (COSTS OFF) ' || pg_temp.statement(c.path)) AS t(v text));
		r := pg_temp.value('c', pg_temp.statement(c.path));
		RETURN NEXT ok(plan_text LIKE '%Gather%' AND r IS NOT NULL,
			format('%s (%s): the workers wrote in a parallel plan', c.path, c.how));
		RETURN NEXT is(pg_temp.value('b', format('SELECT cpht_count(cpht_open(%L))', tab)), ids::text,
			format('%s (%s): its commit kept the keys for another session', c.path, c.how));
		RETURN NEXT is(pg_temp.value('b', format('SELECT cpht_put(cpht_open(%L), ARRAY[1, 2, 3000, 3001]::bigint[])', tab)), '1',
			format('%s (%s): another session writes the same keys afterwards', c.path, c.how));

		-- rolled back: the keys are undone
		PERFORM pg_temp.remote('a', format('SELECT cpht_drop(cpht_open(%L))', tab));
		PERFORM pg_temp.remote('a', format('SELECT cpht_create(10000, name => %L)', tab));
		PERFORM pg_temp.fresh_leader(tab, c.how);
		PERFORM dblink_exec('c', 'BEGIN');
		r := pg_temp.value('c', pg_temp.statement(c.path));
		PERFORM dblink_exec('c', 'ROLLBACK');
		RETURN NEXT is(pg_temp.value('b', format('SELECT cpht_count(cpht_open(%L))', tab)), '0',
			format('%s (%s): its rollback undid the workers'' keys', c.path, c.how));
		RETURN NEXT is(pg_temp.value('b', format('SELECT cpht_put(cpht_open(%L), ARRAY[1, 2, 3000]::bigint[])', tab)), '3',
			format('%s (%s): after the rollback another session puts those keys as new', c.path, c.how));
		PERFORM dblink_disconnect('c');
		RETURN NEXT is(pg_temp.value('b', format('SELECT cpht_count(cpht_open(%L))', tab)), '3',
			format('%s (%s): nothing of the rolled back transaction is left', c.path, c.how));
		PERFORM pg_temp.remote('a', format('SELECT cpht_drop(cpht_open(%L))', tab));
	END LOOP;
	PERFORM dblink_exec('a', 'DROP TABLE pl_staging');
	PERFORM dblink_disconnect('a');
	PERFORM dblink_disconnect('b');
END $$;

SELECT * FROM pg_temp.leader_tests();

SELECT * FROM finish();
ROLLBACK;
