-- cpht.max_memory: a cap a superuser sets for a role holds whatever the
-- role asks for when it connects, and it bounds the batch buffers and rows
-- of the streaming functions as well as tables.
--
-- Every table here is a CPU table, whatever cpht.device the suite runs
-- with: a GPU table also counts its transfer buffers (over 2 MB however
-- small the table), which the unit tests (test_faults) check, and the caps
-- below are sized for slot memory alone.
--
-- Runs at top level: the capped role must be committed before another
-- session can log in with it.
SET client_min_messages = warning;
SELECT plan(19);

-- ---- a role's cap against its connection options ---------------------------
-- A new session through dblink, logging in as a non-superuser that passes
-- -c cpht.max_memory=0 (as PGOPTIONS would): with cpht not preloaded the
-- session starts and the role's cap must hold; with cpht preloaded the
-- login is refused, and a plain login gets the role's cap.
DROP ROLE IF EXISTS cpht_capped;
CREATE ROLE cpht_capped LOGIN PASSWORD 'cpht capped';
ALTER ROLE cpht_capped SET cpht.max_memory = '1MB';

CREATE FUNCTION pg_temp.capped_session(dbsetting text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	conn text;
	shown text;
	refused boolean := false;
	why text;
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'dblink') THEN
		RETURN NEXT skip('dblink is not installed', 3);
		RETURN;
	END IF;
	CREATE EXTENSION IF NOT EXISTS dblink;
	conn := format('dbname=%s port=%s host=localhost user=cpht_capped password=%L options=%L',
				   current_database(), current_setting('port'), 'cpht capped',
				   '-c cpht.max_memory=0 -c cpht.device=cpu');
	BEGIN
		PERFORM dblink_connect('cpht_capped', conn);
	EXCEPTION WHEN OTHERS THEN
		GET STACKED DIAGNOSTICS why = PG_EXCEPTION_DETAIL;
		-- With cpht preloaded the setting exists when the session starts,
		-- so PostgreSQL itself refuses the option of a non-superuser.
		IF current_setting('shared_preload_libraries') ~ '\mcpht\M'
			AND why ~ 'permission denied to set parameter "cpht.max_memory"' THEN
			refused := true;
		ELSE
			RETURN NEXT skip('cannot log in as cpht_capped through dblink: ' || SQLERRM || ' ' || why, 3);
			RETURN;
		END IF;
	END;
	IF refused THEN
		RETURN NEXT pass('cpht preloaded: a login asking for -c cpht.max_memory=0 is refused');
		PERFORM dblink_connect('cpht_capped', format('dbname=%s port=%s host=localhost user=cpht_capped password=%L options=%L',
				   current_database(), current_setting('port'), 'cpht capped', '-c cpht.device=cpu'));
	ELSE
		-- loads cpht in that session
		PERFORM * FROM dblink('cpht_capped', 'SELECT count(*) FROM cpht_tables()') AS r(n bigint);
		SELECT s INTO shown FROM dblink('cpht_capped', 'SHOW cpht.max_memory') AS r(s text);
		RETURN NEXT is(shown, dbsetting, format('the role''s cap (%s) holds against -c cpht.max_memory=0', dbsetting));
	END IF;
	RETURN NEXT throws_ok($q$SELECT * FROM dblink('cpht_capped', 'SELECT cpht_create(1000000)') AS r(h int)$q$,
		'53400', NULL, '... and refuses a table beyond it');
	RETURN NEXT is((SELECT h FROM dblink('cpht_capped', 'SELECT cpht_create(1000)') AS r(h int)), 1,
		'... and creates one within it');
	PERFORM dblink_disconnect('cpht_capped');
END $$;

SELECT pg_temp.capped_session('1MB');
-- the role's setting in this database is more specific and wins
SELECT format('ALTER ROLE cpht_capped IN DATABASE %I SET cpht.max_memory = %L', current_database(), '2MB') AS q \gset
:q;
SELECT pg_temp.capped_session('2MB');

DROP ROLE cpht_capped;

-- ---- stream buffers and rows count against the cap -------------------------
BEGIN;
SET LOCAL cpht.device = cpu;
SELECT cpht_create(10000) AS h \gset
SELECT bytes AS table_bytes FROM cpht_tables() WHERE handle = :h \gset
-- the table and 1 MB more
SELECT set_config('cpht.max_memory', (:table_bytes / 1024 + 1024)::text, true) IS NOT NULL AS set \gset

-- cpht_fop_agg with 1M-key batches needs 26 MB of batch buffers
SELECT throws_ok(format('SELECT cpht_fop_agg(%s, g) FROM generate_series(1, 10) g', :h),
	'53400', NULL, 'cpht_fop_agg: batch buffers beyond cpht.max_memory');
SET LOCAL cpht.batch_size = 1024;
SELECT is(cpht_fop_agg(:h, g), 3000::bigint, 'cpht_fop_agg: small batches fit')
FROM generate_series(1, 3000) g;

-- cpht_fop_rows over rows of 10 kB: a batch of 1024 of them (10 MB) would
-- pass the cap; cpht.batch_memory ends each batch after 64 kB of rows
CREATE TEMP TABLE wide (id bigint, payload text);
SET LOCAL cpht.batch_memory = '64kB';
SELECT is(count(*), 3000::bigint, 'cpht_fop_rows: wide rows in batches bounded by cpht.batch_memory')
FROM cpht_fop_rows(:h, NULL::wide,
	'SELECT g::bigint + 3000 AS id, repeat(''x'', 10000) AS payload FROM generate_series(1, 3000) g');
SET LOCAL cpht.batch_memory = '128MB';
SELECT throws_ok(format('SELECT count(*) FROM cpht_fop_rows(%s, NULL::wide, %L)', :h,
	'SELECT g::bigint + 6000 AS id, repeat(''x'', 10000) AS payload FROM generate_series(1, 3000) g'),
	'53400', NULL, 'cpht_fop_rows: rows beyond cpht.max_memory');
SELECT is(cpht_count(:h), 6000::bigint, '... and the failed statement left no key behind');

ROLLBACK;

-- ---- the undo log counts against the cap ----------------------------------
BEGIN;
SET LOCAL cpht.device = cpu;
SELECT cpht_create(300000) AS t, cpht_create(300000, transactional => false) AS nt \gset
-- the tables and 512 kB more: 200000 logged keys take 2 MB of undo log
SELECT set_config('cpht.max_memory', ((SELECT sum(bytes) FROM cpht_tables()) / 1024 + 512)::text, true)
	IS NOT NULL AS set \gset
SELECT throws_ok(format('SELECT cpht_put(%s, array_agg(g)) FROM generate_series(1, 200000) g', :t),
	'53400', format('cpht table %s would exceed cpht.max_memory', :t),
	'an undo log that would pass cpht.max_memory');
SELECT is(cpht_count(:t), 0::bigint, '... fails the call untouched');
SELECT is(cpht_put(:nt, array_agg(g)), 200000::bigint, 'a table with transactional => false keeps no undo log')
FROM generate_series(1, 200000) g;
SELECT is(cpht_put(:t, array_agg(g)), 20000::bigint, 'an undo log within the cap')
FROM generate_series(1, 20000) g;

ROLLBACK;

-- ---- growth counts against the cap ------------------------------------------
-- A growth holds the old and the new slots while the keys move.
BEGIN;
SET LOCAL cpht.device = cpu;
SELECT cpht_create(1000, transactional => false) AS g \gset
SELECT is(cpht_put(:g, array_agg(x)), 500::bigint, 'a growing table within its capacity')
FROM generate_series(1, 500) x;
SELECT (cpht_info(:g)->>'bytes')::bigint AS g_bytes \gset
-- five times the table: room to grow for thousands of keys, not 100000
SELECT set_config('cpht.max_memory', ((SELECT sum(bytes) FROM cpht_tables()) * 5 / 1024)::text, true)
	IS NOT NULL AS set \gset
SELECT throws_ok(format('SELECT cpht_put(%s, array_agg(x)) FROM generate_series(1, 100000) x', :g),
	'53400', format('cpht table %s would exceed cpht.max_memory', :g),
	'a growth that would pass cpht.max_memory');
SELECT ok(cpht_count(:g) = 500 AND (cpht_info(:g)->>'grows')::int = 0
		  AND (cpht_info(:g)->>'bytes')::bigint = :g_bytes,
	'... fails the call with the table unchanged');
SELECT is(cpht_put(:g, array_agg(x)), 1500::bigint, 'a growth within the cap')
FROM generate_series(1, 2000) x;

SELECT * FROM finish();
ROLLBACK;
