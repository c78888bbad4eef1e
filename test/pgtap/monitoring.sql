-- Monitoring: the cpht worker's row of pg_stat_activity (its state, and
-- the request it serves), the statistics of shared tables
-- (cpht_stat_tables: exact counters after known calls, durable fields,
-- visibility), their reset (a superuser, a role granted EXECUTE, refused
-- to others), the progress of a long call seen from another session
-- (cpht_stat_progress, both modes: it is PostgreSQL's activity array),
-- and EXPLAIN ANALYZE of the new-keys node.  Shared tables are created in
-- dblink session a (autocommit); the calls whose progress is watched run
-- there too, held by an advisory lock this session takes.
BEGIN;
SELECT plan(30);

\ir include/shared_sessions.psql
\ir include/forced_parallel.psql

-- Waits until process p waits for an advisory lock; false after 30 s.
CREATE FUNCTION pg_temp.await_advisory(p int) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	t0 timestamptz := clock_timestamp();
BEGIN
	LOOP
		PERFORM pg_stat_clear_snapshot();
		IF EXISTS (SELECT 1 FROM pg_stat_activity
				   WHERE pid = p AND wait_event_type = 'Lock' AND wait_event = 'advisory') THEN
			RETURN true;
		END IF;
		IF clock_timestamp() > t0 + interval '30 seconds' THEN
			RETURN false;
		END IF;
		PERFORM pg_sleep(0.005);
	END LOOP;
END $$;

-- The progress row of process p, as text (NULL when it has none).
CREATE FUNCTION pg_temp.progress(p int) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	r text;
BEGIN
	PERFORM pg_stat_clear_snapshot();
	SELECT format('%s|%s|%s|%s|%s|%s|%s|%s', operation, phase, relid::regclass, keys_done,
				  keys_known, new_keys, rows_done, rows_known)
	  INTO r FROM cpht_stat_progress WHERE pid = p;
	RETURN r;
END $$;

-- The counters of a shared table, as text.
CREATE FUNCTION pg_temp.counters(t text) RETURNS text LANGUAGE sql AS $$
	SELECT format('calls %s, keys %s, new %s, waits %s', calls, keys_sent, new_keys, waits)
	FROM cpht_stat_tables WHERE name = t
$$;

-- 100000 rows, ids 1 to 100000; a target whose inserts wait for advisory
-- lock 4242 while this session holds it; a view whose rows wait for it at
-- id 90000 (read by a query, batch by batch).  Committed by session a.
CREATE FUNCTION pg_temp.setup() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_temp.connect('a');
	PERFORM dblink_exec('a', $s$
		DROP TABLE IF EXISTS mon_src, mon_dst CASCADE;
		DROP FUNCTION IF EXISTS mon_hold(bigint), mon_hold_trigger();
		CREATE TABLE mon_src AS SELECT g::bigint AS id FROM generate_series(1, 100000) g;
		ANALYZE mon_src;
		CREATE TABLE mon_dst (id bigint);
		CREATE FUNCTION mon_hold_trigger() RETURNS trigger LANGUAGE plpgsql AS $f$
		BEGIN
			PERFORM pg_advisory_lock_shared(4242);
			PERFORM pg_advisory_unlock_shared(4242);
			RETURN NEW;
		END $f$;
		CREATE TRIGGER mon_hold BEFORE INSERT ON mon_dst FOR EACH ROW EXECUTE FUNCTION mon_hold_trigger();
		CREATE FUNCTION mon_hold(id bigint) RETURNS boolean LANGUAGE plpgsql AS $f$
		BEGIN
			IF id = 90000 THEN
				PERFORM pg_advisory_lock_shared(4242);
				PERFORM pg_advisory_unlock_shared(4242);
			END IF;
			RETURN true;
		END $f$;
		CREATE VIEW mon_view AS SELECT id FROM mon_src WHERE mon_hold(id)$s$);
END $$;

CREATE FUNCTION pg_temp.teardown() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	PERFORM dblink_exec('a', 'DROP TABLE IF EXISTS mon_src, mon_dst CASCADE');
	PERFORM dblink_exec('a', 'DROP FUNCTION IF EXISTS mon_hold(bigint), mon_hold_trigger()');
END $$;

-- Progress and EXPLAIN ANALYZE of cpht_insert_new, in both modes (a
-- private table in plain mode, in the worker when preloaded): 10 tests.
CREATE FUNCTION pg_temp.progress_tests() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	why text := pg_temp.why_no_dblink();
	pa int;
	r text;
	h int;
	line text;
	plan text := '';
BEGIN
	IF why IS NOT NULL THEN
		RETURN NEXT skip(why, 10);
		RETURN;
	END IF;
	PERFORM pg_temp.setup();
	pa := (SELECT v FROM dblink('a', 'SELECT pg_backend_pid()') AS t(v int));
	PERFORM dblink_exec('a', 'SET cpht.batch_size = 1024');
	PERFORM pg_temp.remote('a', 'SELECT set_config(''mon.h'', cpht_create(200000)::text, false)');

	-- cpht_insert_new, held at its first inserted row
	PERFORM pg_advisory_lock(4242);
	PERFORM dblink_send_query('a', $q$SELECT cpht_insert_new(current_setting('mon.h')::int, 'mon_src', 'mon_dst', 'id')::text$q$);
	RETURN NEXT ok(pg_temp.await_advisory(pa), 'cpht_insert_new waits at its first row');
	RETURN NEXT is(pg_temp.progress(pa), 'cpht_insert_new|inserting new rows|mon_src|100000|100000|100000|0|100000',
		'cpht_stat_progress: inserting, every key sent of the 100000 expected, all new, no row in yet of 100000');
	PERFORM pg_advisory_unlock(4242);
	RETURN NEXT is(pg_temp.result('a'), '100000', 'cpht_insert_new goes on');
	RETURN NEXT is(pg_temp.progress(pa), NULL, 'no progress row once the call ended');

	-- cpht_fop_relation over a view (a query, batch by batch), held at id 90000
	PERFORM pg_advisory_lock(4242);
	PERFORM dblink_send_query('a', $q$SELECT cpht_fop_relation(current_setting('mon.h')::int, 'mon_view', 'id')::text$q$);
	RETURN NEXT ok(pg_temp.await_advisory(pa), 'cpht_fop_relation waits at id 90000');
	r := pg_temp.progress(pa);
	RETURN NEXT ok(r ~ '^cpht_fop_relation\|sending keys\|mon_view\|[0-9]+\|\|0\|0\|$'
				   AND split_part(r, '|', 4)::bigint BETWEEN 1 AND 89999,
		format('cpht_stat_progress: sending keys, batches before id 90000 sent, none new, the total not known (%s)', r));
	PERFORM pg_advisory_unlock(4242);
	RETURN NEXT is(pg_temp.result('a'), '0', 'cpht_fop_relation goes on');
	RETURN NEXT is(pg_temp.progress(pa), NULL, 'no progress row once it ended');
	PERFORM pg_temp.teardown();

	-- EXPLAIN ANALYZE of a query that is one call of cpht_insert_new
	h := cpht_create(100000);
	CREATE TEMP TABLE mon_src2 AS SELECT (g % 3000 + 1)::bigint AS id FROM generate_series(1, 10000) g;
	CREATE TEMP TABLE mon_dst2 (id bigint);
	FOR line IN EXECUTE format('EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT cpht_insert_new(%s, %L, %L, %L)',
							   h, 'mon_src2', 'mon_dst2', 'id') LOOP
		plan := plan || line || E'\n';
	END LOOP;
	RETURN NEXT ok(plan ~ 'Custom Scan \(cpht call\)' AND plan ~ 'Keys Sent: 10000' AND plan ~ 'New Keys: 3000'
				   AND plan ~ 'Time in Table: [0-9.]+ ms'
				   AND plan ~ format('Table: %s\s+Source: mon_src2\s+Target: mon_dst2\s+Key Column: id', h),
		'EXPLAIN ANALYZE of cpht_insert_new: its table, source, target and key column, the keys it sent, the new ones, the time in the table');
	RETURN NEXT is((SELECT count(*) FROM mon_dst2), 3000::bigint, 'and the call ran once');
	PERFORM cpht_drop(h);
END $$;

-- With the worker: 20 tests.
CREATE FUNCTION pg_temp.worker_tests() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	why text := pg_temp.why_skip();
	w int;
	pa int;
	pb int;
	h int;
	seen text;
	t0 timestamptz;
	reset_before timestamptz;
	q text;
	plan text;
BEGIN
	IF why IS NOT NULL THEN
		RETURN NEXT skip(why, 20);
		RETURN;
	END IF;
	IF NOT 'a' = ANY (coalesce(dblink_get_connections(), '{}')) THEN
		PERFORM pg_temp.connect('a');
	END IF;
	pa := (SELECT v FROM dblink('a', 'SELECT pg_backend_pid()') AS t(v int));
	w := (cpht_worker_info()->>'worker_pid')::int;

	-- the worker's row
	RETURN NEXT is((SELECT format('%s|%s|%s', backend_type, application_name, state IN ('idle', 'active'))
					FROM pg_stat_activity WHERE pid = w),
		'cpht worker|cpht worker|t', 'pg_stat_activity: the worker, its name and its state');
	-- while it serves a large call of session a: its request
	PERFORM pg_temp.remote('a', $q$SELECT cpht_create(4000000, transactional => false, name => 'mon_big')$q$);
	FOR attempt IN 1..5 LOOP
		PERFORM dblink_send_query('a', $q$SELECT cpht_fop(cpht_open('mon_big'), ARRAY(SELECT generate_series(1, 2000000)::bigint))::text$q$);
		PERFORM pg_sleep(0.05);
		WHILE seen IS NULL AND dblink_is_busy('a') = 1 LOOP
			PERFORM pg_stat_clear_snapshot();
			SELECT query INTO seen FROM pg_stat_activity WHERE pid = w AND state = 'active'
				AND query LIKE 'cpht: find-or-put of 2000000 keys%';
			PERFORM pg_sleep(0.001);
		END LOOP;
		PERFORM pg_temp.result('a');
		EXIT WHEN seen IS NOT NULL;
	END LOOP;
	RETURN NEXT is(seen, format('cpht: find-or-put of 2000000 keys on shared table "mon_big" for process %s', pa),
		'pg_stat_activity: the worker active, with the request it serves');
	PERFORM pg_temp.remote('a', 'SELECT cpht_drop(cpht_open(''mon_big''))');
	PERFORM pg_stat_clear_snapshot();

	-- counters
	PERFORM pg_temp.remote('a', $q$SELECT cpht_create(1000, transactional => false, name => 'mon_stats')$q$);
	h := cpht_open('mon_stats');
	RETURN NEXT is(pg_temp.counters('mon_stats'), 'calls 0, keys 0, new 0, waits 0', 'a new table: no calls');
	PERFORM cpht_fop(h, '{1,2,3}');
	RETURN NEXT is(pg_temp.counters('mon_stats'), 'calls 1, keys 3, new 3, waits 0', 'a find-or-put of 3 new keys');
	PERFORM cpht_fop(h, '{3,4}');
	PERFORM cpht_put(h, '{4,5,6}');
	PERFORM cpht_find(h, '{1,9}');
	RETURN NEXT is(pg_temp.counters('mon_stats'), 'calls 4, keys 10, new 6, waits 0',
		'then find-or-put of {3,4}, put of {4,5,6}, find of {1,9}: the keys sent and the new ones');
	RETURN NEXT is((SELECT format('%s|%s|%s|%s', keys, durable, call_time_ms >= 0, snapshot_lsn IS NULL)
					FROM cpht_stat_tables WHERE name = 'mon_stats'),
		'6|f|t|t', 'the keys in the table, not durable, the time in calls, no snapshot');

	-- reset
	reset_before := (SELECT stats_reset FROM cpht_stat_tables WHERE name = 'mon_stats');
	PERFORM pg_sleep(0.01);
	PERFORM cpht_stat_reset();
	RETURN NEXT is(pg_temp.counters('mon_stats'), 'calls 0, keys 0, new 0, waits 0', 'a superuser resets the counters');
	RETURN NEXT ok((SELECT stats_reset FROM cpht_stat_tables WHERE name = 'mon_stats') > reset_before,
		'stats_reset moves on');
	PERFORM cpht_fop(h, '{6,7}');
	RETURN NEXT is(pg_temp.counters('mon_stats'), 'calls 1, keys 2, new 1, waits 0', 'counting goes on after a reset');

	PERFORM dblink_exec('a', 'DROP ROLE IF EXISTS cpht_t_mon');
	PERFORM dblink_exec('a', 'CREATE ROLE cpht_t_mon');
	RETURN NEXT is(pg_temp.as_role('cpht_t_mon', 'SELECT cpht_stat_reset()'), '42501',
		'another role may not reset (42501)');
	RETURN NEXT is(pg_temp.counters('mon_stats'), 'calls 1, keys 2, new 1, waits 0', 'and nothing was reset');
	RETURN NEXT is(pg_temp.as_role('cpht_t_mon', $q$SELECT 1 / (SELECT count(*) FROM cpht_stat_tables WHERE name = 'mon_stats')::int$q$),
		'22012', 'another role does not see the table in cpht_stat_tables');
	-- granted and revoked in session a: a grant here would lock the role
	-- until this transaction ends, and DROP ROLE below would wait for it
	PERFORM dblink_exec('a', 'GRANT EXECUTE ON FUNCTION cpht_stat_reset(text) TO cpht_t_mon');
	RETURN NEXT is(pg_temp.as_role('cpht_t_mon', $q$SELECT cpht_stat_reset('mon_stats')$q$), 'ok',
		'a role granted EXECUTE may reset');
	RETURN NEXT is(pg_temp.counters('mon_stats'), 'calls 0, keys 0, new 0, waits 0', 'and it did');
	PERFORM dblink_exec('a', 'REVOKE EXECUTE ON FUNCTION cpht_stat_reset(text) FROM cpht_t_mon');
	RETURN NEXT throws_ok($q$SELECT cpht_stat_reset('mon_none')$q$, '42704', NULL,
		'resetting a table that does not exist is 42704');

	-- a write that met another transaction's keys: a wait, then the call
	PERFORM pg_temp.connect('b');
	pb := (SELECT v FROM dblink('b', 'SELECT pg_backend_pid()') AS t(v int));
	PERFORM pg_temp.remote('a', $q$SELECT cpht_create(1000, name => 'mon_txn')$q$);
	PERFORM dblink_exec('a', 'BEGIN');
	PERFORM pg_temp.remote('a', $q$SELECT cpht_fop(cpht_open('mon_txn'), '{1,2}')$q$);
	PERFORM dblink_send_query('b', $q$SELECT cpht_fop(cpht_open('mon_txn'), '{2,3}')::text$q$);
	RETURN NEXT ok(pg_temp.await_lock_wait(pb), 'a find-or-put of a key another transaction put waits for it');
	PERFORM dblink_exec('a', 'COMMIT');
	PERFORM pg_temp.result('b');
	RETURN NEXT is(pg_temp.counters('mon_txn'), 'calls 2, keys 4, new 3, waits 1',
		'it counts as a wait, then as a call once it ran');
	PERFORM pg_temp.remote('a', 'SELECT cpht_drop(cpht_open(''mon_txn''))');
	PERFORM dblink_disconnect('b');

	-- a durable table: its snapshot and the WAL it keeps
	PERFORM pg_temp.remote('a', $q$SELECT cpht_create(1000, transactional => false, name => 'mon_durable', durable => true)$q$);
	PERFORM pg_temp.remote('a', $q$SELECT cpht_fop(cpht_open('mon_durable'), '{1,2}')$q$);
	PERFORM pg_temp.remote('a', 'SELECT cpht_checkpoint()');
	RETURN NEXT is((SELECT format('%s|%s|%s|%s|%s', durable, snapshot_lsn IS NOT NULL, snapshot_time > now() - interval '1 hour',
							   wal_keep_lsn >= snapshot_lsn, wal_held_bytes >= 0)
					FROM cpht_stat_tables WHERE name = 'mon_durable'),
		't|t|t|t|t', 'a durable table: its last snapshot, when, and the WAL it keeps');

	-- EXPLAIN ANALYZE of the new-keys node, with two workers
	PERFORM pg_temp.forced(2);
	PERFORM cpht_stat_reset('mon_stats');
	q := format('SELECT count(*) FROM cpht_fop_new_relation(%s, %L)', h, 'mon_explain');
	CREATE TEMP TABLE mon_explain_plan (line text);
	EXECUTE format('CREATE TABLE mon_explain AS SELECT (g %% 5000 + 1)::bigint AS id FROM generate_series(1, 20000) g');
	ANALYZE mon_explain;
	FOR seen IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q LOOP
		INSERT INTO mon_explain_plan VALUES (seen);
	END LOOP;
	plan := (SELECT string_agg(line, E'\n') FROM mon_explain_plan);
	-- 1 to 7 are in the table already: 4993 of the 5000 ids are new
	RETURN NEXT ok(plan ~ 'Keys Sent: 20000' AND plan ~ 'New Keys: 4993' AND plan ~ 'Time in Table: [0-9.]+ ms',
		'EXPLAIN ANALYZE of the node: the keys every participant sent, the new ones, the time in the table');
	RETURN NEXT is(pg_temp.counters('mon_stats'), format('calls %s, keys 20000, new 4993, waits 0',
												  (SELECT calls FROM cpht_stat_tables WHERE name = 'mon_stats')),
		'and cpht_stat_tables counted the same keys');

	PERFORM pg_temp.remote('a', 'SELECT cpht_drop(cpht_open(''mon_stats''))');
	PERFORM pg_temp.remote('a', 'SELECT cpht_drop(cpht_open(''mon_durable''))');
	PERFORM dblink_exec('a', 'DROP ROLE cpht_t_mon');
END $$;

SELECT * FROM pg_temp.progress_tests();
SELECT * FROM pg_temp.worker_tests();

SELECT * FROM finish();
ROLLBACK;
