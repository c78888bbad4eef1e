-- cpht_fop_new_relation over a shared table as a parallel plan node
-- ("cpht new keys"): which queries get it and which keep the function
-- scan (a private table, a join, a generic plan, row-level security); its
-- answers against PostgreSQL's with forced workers and with the leader
-- alone; every key put when the query reads only some rows (LIMIT, a
-- filter); savepoints; integer keys and NULLs; privileges.  Shared tables
-- are created in dblink session a (autocommit); the queries run here,
-- except where a committed relation or a fresh transaction is needed.
BEGIN;
SELECT plan(37);

\ir include/shared_sessions.psql
\ir include/forced_parallel.psql
\ir include/new_keys.psql

SET LOCAL cpht.batch_size = 1024;

-- 60000 rows over about 300 pages, 25000 distinct ids from 1 (each on
-- several pages), 500 rows without an id; small_id: 3000 integers
CREATE TABLE nk_src AS
	SELECT CASE WHEN g % 120 = 0 THEN NULL ELSE (g * 7919 % 25000 + 1)::bigint END AS id,
		   (g % 3000)::int AS small_id
	FROM generate_series(1, 60000) g;
ANALYZE nk_src;
CREATE TEMP TABLE nk_oracle AS SELECT DISTINCT id FROM nk_src WHERE id IS NOT NULL;

CREATE FUNCTION pg_temp.node_tests() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	why text := pg_temp.why_skip();
	new_ids bigint := (SELECT count(*) FROM nk_oracle);
	h int;
	p int;
	q text;
	n bigint;
	before bigint;
BEGIN
	IF why IS NOT NULL THEN
		RETURN NEXT skip(why, 37);
		RETURN;
	END IF;
	PERFORM pg_temp.connect('a');
	PERFORM pg_temp.forced(2);

	-- a count over a transactional shared table that holds the ids below
	-- 10000 (put by this transaction)
	h := pg_temp.shared('nk_txn');
	PERFORM cpht_put(h, ARRAY(SELECT id FROM nk_oracle WHERE id < 10000));
	q := format('SELECT count(*) FROM cpht_fop_new_relation(%s, %L)', h, 'nk_src');
	RETURN NEXT ok(pg_temp.has_node(pg_temp.plan(q)) AND pg_temp.plan(q) ~ 'Partial Aggregate',
		'a count of the new keys: the node, counted in the workers');
	before := pg_temp.scans('nk_src');
	RETURN NEXT is(pg_temp.value(q), (SELECT count(*) FROM nk_oracle WHERE id >= 10000)::text,
		'the new ids PostgreSQL counts');
	RETURN NEXT ok(pg_temp.scans('nk_src') > before, 'parallel workers scanned the relation');
	RETURN NEXT is(pg_temp.value(q), '0', 'a second count: nothing is new');
	RETURN NEXT is(cpht_count(h), new_ids, 'every id is in the table');

	-- the keys themselves, each once across the participants
	h := pg_temp.shared('nk_keys', ', transactional => false');
	q := format('SELECT array_agg(k ORDER BY k) FROM cpht_fop_new_relation(%s, %L) k', h, 'nk_src');
	RETURN NEXT ok(pg_temp.has_node(pg_temp.plan(q)), 'the new keys themselves: the node under a Gather');
	RETURN NEXT is(pg_temp.value(q), (SELECT array_agg(id ORDER BY id) FROM nk_oracle)::text,
		'each new id once, whichever participant read it');
	RETURN NEXT is(cpht_count(h), new_ids, 'into a non-transactional table: every id');

	-- a filter above the node: only the rows it keeps come back, every key
	-- goes in
	h := pg_temp.shared('nk_filter');
	q := format('SELECT count(*) FROM cpht_fop_new_relation(%s, %L) k WHERE k %% 3 = 0', h, 'nk_src');
	RETURN NEXT ok(pg_temp.has_node(pg_temp.plan(q)), 'a filtered count: the node');
	RETURN NEXT is(pg_temp.value(q), (SELECT count(*) FROM nk_oracle WHERE id % 3 = 0)::text,
		'the new ids the filter keeps');
	RETURN NEXT is(cpht_count(h), new_ids, 'and every id is in the table');

	-- the leader does not run the node: the workers read every page
	PERFORM set_config('parallel_leader_participation', 'off', true);
	h := pg_temp.shared('nk_workers');
	q := format('SELECT count(*) FROM cpht_fop_new_relation(%s, %L)', h, 'nk_src');
	RETURN NEXT ok(pg_temp.has_node(pg_temp.plan(q)), 'without the leader: the node');
	RETURN NEXT is(pg_temp.value(q), new_ids::text, 'the workers alone: every new id');
	PERFORM set_config('parallel_leader_participation', 'on', true);

	-- no worker to be had: the leader alone reads the parallel scan
	PERFORM set_config('max_parallel_workers', '0', true);
	h := pg_temp.shared('nk_leader');
	q := format('SELECT count(*) FROM cpht_fop_new_relation(%s, %L)', h, 'nk_src');
	before := pg_temp.scans('nk_src');
	RETURN NEXT is(pg_temp.value(q), new_ids::text, 'no worker launched: the leader alone, every new id');
	RETURN NEXT is(pg_temp.scans('nk_src'), before, '(and no worker scanned)');
	PERFORM set_config('max_parallel_workers', '8', true);

	-- an integer key column, NULLs skipped
	h := pg_temp.shared('nk_small');
	q := format('SELECT count(*) FROM cpht_fop_new_relation(%s, %L, %L)', h, 'nk_src', 'small_id');
	RETURN NEXT ok(pg_temp.has_node(pg_temp.plan(q)), 'an integer column: the node');
	RETURN NEXT is(pg_temp.value(q), '3000', 'every distinct integer once');

	-- a rolled-back subtransaction takes the workers' keys with it
	h := pg_temp.shared('nk_savepoint');
	q := format('SELECT count(*) FROM cpht_fop_new_relation(%s, %L)', h, 'nk_src');
	BEGIN
		n := pg_temp.value(q)::bigint;
		RAISE EXCEPTION 'roll back';
	EXCEPTION
		WHEN raise_exception THEN
			NULL;
	END;
	RETURN NEXT is(n, new_ids, 'in a subtransaction: every new id');
	RETURN NEXT is(cpht_count(h), 0::bigint, 'its rollback undoes the keys of every participant');
	RETURN NEXT is(pg_temp.value(q), new_ids::text, 'so they are new again');

	-- the function scan where the node does not apply
	p := cpht_create(100000);
	q := format('SELECT count(*) FROM cpht_fop_new_relation(%s, %L)', p, 'nk_src');
	RETURN NEXT ok(NOT pg_temp.has_node(pg_temp.plan(q)) AND pg_temp.plan(q) ~ 'Function Scan',
		'a private table, which workers cannot reach: the function scan');
	RETURN NEXT is(pg_temp.value(q), new_ids::text, '(with the same answer)');
	h := pg_temp.shared('nk_generic');
	EXECUTE 'PREPARE nk_q(int) AS SELECT count(*) FROM cpht_fop_new_relation($1, ''nk_src'')';
	PERFORM set_config('plan_cache_mode', 'force_generic_plan', true);
	RETURN NEXT ok(pg_temp.plan(format('EXECUTE nk_q(%s)', h)) ~ 'Function Scan',
		'a generic plan, whose handle is not known: the function scan');
	RETURN NEXT is(pg_temp.value(format('EXECUTE nk_q(%s)', h)), new_ids::text, '(with the same answer)');
	PERFORM set_config('plan_cache_mode', 'force_custom_plan', true);
	h := pg_temp.shared('nk_custom');
	RETURN NEXT ok(pg_temp.has_node(pg_temp.plan(format('EXECUTE nk_q(%s)', h))),
		'a custom plan for the handle: the node');
	RETURN NEXT is(pg_temp.value(format('EXECUTE nk_q(%s)', h)), new_ids::text, '(with the same answer)');
	PERFORM set_config('plan_cache_mode', 'auto', true);
	EXECUTE 'DEALLOCATE nk_q';

	-- privileges: a role that may use the table but not read the relation
	CREATE ROLE nk_reader;
	CREATE ROLE nk_owner;
	EXECUTE format('GRANT %I TO nk_reader', current_user);
	CREATE TABLE nk_secret AS SELECT id FROM nk_src;
	ALTER TABLE nk_secret OWNER TO nk_owner;
	h := pg_temp.shared('nk_privs');
	SET LOCAL ROLE nk_reader;
	q := format('SELECT count(*) FROM cpht_fop_new_relation(%s, %L)', h, 'nk_secret');
	RETURN NEXT ok(pg_temp.has_node(pg_temp.plan(q)), 'a relation the role may not read: planned as the node');
	RETURN NEXT throws_ok(q, '42501', NULL, 'which checks the privilege: 42501');
	RESET ROLE;
	RETURN NEXT is(cpht_count(h), 0::bigint, 'no key went in');

	-- row-level security that applies to the role: the function's query,
	-- even for a plan made for another role
	CREATE TABLE nk_rls AS SELECT id FROM nk_src;
	ALTER TABLE nk_rls ENABLE ROW LEVEL SECURITY;
	ALTER TABLE nk_rls FORCE ROW LEVEL SECURITY;
	CREATE POLICY nk_low ON nk_rls USING (id <= 5000);
	h := pg_temp.shared('nk_rls');
	q := format('SELECT count(*) FROM cpht_fop_new_relation(%s, %L)', h, 'nk_rls');
	EXECUTE 'PREPARE nk_r AS ' || q;
	RETURN NEXT ok(pg_temp.has_node(pg_temp.plan('EXECUTE nk_r')), 'for a superuser: the node');
	SET LOCAL ROLE nk_reader;
	RETURN NEXT ok(NOT pg_temp.has_node(pg_temp.plan('EXECUTE nk_r')),
		'the same statement for a role under the policy: the function scan');
	RETURN NEXT is(pg_temp.value('EXECUTE nk_r'), (SELECT count(*) FROM nk_oracle WHERE id <= 5000)::text,
		'the new ids the policy lets it see');
	RESET ROLE;
	EXECUTE 'DEALLOCATE nk_r';

	-- committed relations, read in session a
	PERFORM dblink_exec('a', 'CREATE TABLE nk_src_a AS SELECT (g * 7919 % 25000 + 1)::bigint AS id FROM generate_series(1, 60000) g');
	PERFORM dblink_exec('a', 'ANALYZE nk_src_a');
	PERFORM pg_temp.forced_in('a');

	-- a LIMIT: five rows come back, every key goes in
	h := pg_temp.shared('nk_limit');
	q := format('SELECT k FROM cpht_fop_new_relation(%s, %L) k LIMIT 5', pg_temp.handle_in('a', 'nk_limit'), 'nk_src_a');
	RETURN NEXT ok((SELECT string_agg(v, E'\n') FROM dblink('a', 'EXPLAIN (COSTS OFF) ' || q) AS t(v text))
				   ~ 'Limit.*Gather.*Parallel Custom Scan \(cpht new keys\)',
		'a LIMIT over the node');
	RETURN NEXT is((SELECT count(*) FROM dblink('a', q) AS t(k bigint)), 5::bigint, 'five new keys come back');
	RETURN NEXT is(cpht_count(h), 25000::bigint, 'all 25000 keys went in');

	-- a join: the function scan, in the leader of a parallel plan, in a
	-- fresh transaction (whose id the leader assigns before parallel mode)
	h := pg_temp.shared('nk_join');
	q := format('SELECT count(*) FROM cpht_fop_new_relation(%s, %L) k JOIN nk_src_a s ON s.id = k',
				pg_temp.handle_in('a', 'nk_join'), 'nk_src_a');
	RETURN NEXT ok((SELECT string_agg(v, E'\n') FROM dblink('a', 'EXPLAIN (COSTS OFF) ' || q) AS t(v text))
				   ~ 'Gather.*Function Scan|Function Scan.*Gather',
		'a join: the function scan in a parallel plan');
	RETURN NEXT is((SELECT v FROM dblink('a', q) AS t(v bigint)), 60000::bigint,
		'its rows: every row of the relation, whose ids were all new');

	PERFORM dblink_exec('a', 'DROP TABLE nk_src_a');
	PERFORM pg_temp.remote('a', format('SELECT cpht_drop(cpht_open(%L))', t.name))
	FROM unnest(ARRAY['nk_txn', 'nk_keys', 'nk_filter', 'nk_workers', 'nk_leader', 'nk_small',
					  'nk_savepoint', 'nk_generic', 'nk_custom', 'nk_privs', 'nk_rls', 'nk_limit',
					  'nk_join']) AS t(name);
	PERFORM dblink_disconnect('a');
END $$;

SELECT pg_temp.node_tests();

SELECT * FROM finish();
ROLLBACK;
