-- Export and import with shared tables (cpht preloaded): an export of a
-- shared table loads into a private one and back; an import into a
-- transactional shared table goes with the importing (sub)transaction; an
-- export waits for other transactions' changes and then sees them
-- committed.  Shared tables are created and dropped through dblink
-- sessions (autocommit).
BEGIN;
SELECT plan(8);

\ir include/shared_sessions.psql

CREATE FUNCTION pg_temp.export_tests() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	why text := pg_temp.why_skip();
	src int;
	dst int;
	priv int;
	n bigint;
	busy int;
BEGIN
	IF why IS NOT NULL THEN
		RETURN NEXT skip(why, 8);
		RETURN;
	END IF;
	PERFORM pg_temp.connect('a');
	PERFORM pg_temp.connect('b');
	PERFORM dblink_exec('b', 'SET statement_timeout = ''60s''');
	PERFORM pg_temp.remote('a', $q$SELECT cpht_create(1000, name => 'exp_src')$q$);
	PERFORM pg_temp.remote('a', $q$SELECT cpht_create(1000, 'cuckoo', name => 'exp_dst')$q$);
	PERFORM pg_temp.remote('a', $q$SELECT cpht_put(cpht_open('exp_src'), ARRAY(SELECT generate_series(1, 5000)::bigint))$q$);

	src := cpht_open('exp_src');
	dst := cpht_open('exp_dst');
	priv := cpht_create(10, 'cuckoo');
	SELECT cpht_import_agg(priv, chunk ORDER BY seq) INTO n FROM cpht_export(src);
	RETURN NEXT is(n, 5000::bigint, 'an export of a shared table loads into a private table');
	RETURN NEXT is(cpht_count(priv), 5000::bigint, 'which then holds its keys');

	-- an import into a transactional shared table, undone with its subtransaction
	BEGIN
		SELECT cpht_import_agg(dst, chunk ORDER BY seq) INTO n FROM cpht_export(priv);
		RETURN NEXT is(n, 5000::bigint, 'an import into a transactional shared table, in the cpht worker');
		RETURN NEXT is((SELECT v FROM dblink('a', $q$SELECT cpht_count(cpht_open('exp_dst'))$q$) AS t(v bigint)),
			0::bigint, 'other sessions do not see the keys of the open import');
		RAISE EXCEPTION 'roll back' USING ERRCODE = 'P0001';
	EXCEPTION WHEN raise_exception THEN
		NULL;
	END;
	RETURN NEXT is(cpht_count(dst), 0::bigint, 'the import went with the subtransaction that rolled back');

	-- another transaction's open change: the export waits for it
	PERFORM dblink_exec('a', 'BEGIN');
	PERFORM pg_temp.remote('a', $q$SELECT cpht_put(cpht_open('exp_src'), '{777777}')$q$);
	PERFORM dblink_send_query('b', $q$SELECT ((sum(length(chunk)) - 80) / 8)::text FROM cpht_export(cpht_open('exp_src'))$q$);
	PERFORM pg_sleep(0.3);
	busy := dblink_is_busy('b');
	RETURN NEXT is(busy, 1, 'an export of a table another transaction changed waits for that transaction');
	PERFORM dblink_exec('a', 'COMMIT');
	SELECT v::bigint INTO n FROM dblink_get_result('b') AS t(v text);
	PERFORM * FROM dblink_get_result('b', false) AS t(v text);
	RETURN NEXT is(n, 5001::bigint, 'and then exports the keys it committed');

	PERFORM dblink_exec('a', 'BEGIN');
	PERFORM pg_temp.remote('a', $q$SELECT cpht_put(cpht_open('exp_src'), '{888888}')$q$);
	PERFORM dblink_send_query('b', $q$SELECT ((sum(length(chunk)) - 80) / 8)::text FROM cpht_export(cpht_open('exp_src'))$q$);
	PERFORM pg_sleep(0.3);
	PERFORM dblink_exec('a', 'ROLLBACK');
	SELECT v::bigint INTO n FROM dblink_get_result('b') AS t(v text);
	PERFORM * FROM dblink_get_result('b', false) AS t(v text);
	RETURN NEXT is(n, 5001::bigint, 'or, when it rolled back, without its keys');

	PERFORM pg_temp.remote('a', $q$SELECT cpht_drop(cpht_open('exp_src'))$q$);
	PERFORM pg_temp.remote('a', $q$SELECT cpht_drop(cpht_open('exp_dst'))$q$);
	PERFORM dblink_disconnect('a');
	PERFORM dblink_disconnect('b');
END $$;

SELECT pg_temp.export_tests();
SELECT * FROM finish();
ROLLBACK;
