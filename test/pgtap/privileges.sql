-- Privileges of the service itself, as unprivileged roles: cpht_checkpoint
-- is for superusers and pg_checkpoint; the file functions are not PUBLIC;
-- creating a shared or durable table needs CREATE on the database; one
-- database holds at most cpht.max_shared_tables_per_database tables;
-- cpht_tables() shows a role only the shared tables it may use; owners can
-- be changed (cpht_alter_owner, REASSIGN OWNED), their tables dropped with
-- DROP OWNED, and DROP ROLE of an owner is refused.
BEGIN;
SELECT plan(27);

\ir include/shared_sessions.psql

-- ---- both modes: the grants of the functions --------------------------------------
CREATE ROLE cpht_pv_plain NOLOGIN;
CREATE ROLE cpht_pv_checkpointer NOLOGIN IN ROLE pg_checkpoint;

SELECT is(has_function_privilege('cpht_pv_plain', 'cpht_checkpoint()', 'EXECUTE'), false,
	'PUBLIC may not execute cpht_checkpoint()');
SELECT is(has_function_privilege('cpht_pv_plain', 'cpht_export_file(int, text)', 'EXECUTE') OR
		  has_function_privilege('cpht_pv_plain', 'cpht_import_file(int, text)', 'EXECUTE'), false,
	'PUBLIC may not execute cpht_export_file() nor cpht_import_file()');
SELECT is(has_function_privilege('cpht_pv_checkpointer', 'cpht_checkpoint()', 'EXECUTE'), true,
	'members of pg_checkpoint may execute cpht_checkpoint()');
SELECT is(has_function_privilege('cpht_pv_plain', 'cpht_create(bigint, text, int, boolean, text, int, boolean, boolean)', 'EXECUTE')
		  AND has_function_privilege('cpht_pv_plain', 'cpht_open(text)', 'EXECUTE')
		  AND has_function_privilege('cpht_pv_plain', 'cpht_tables()', 'EXECUTE'), true,
	'PUBLIC may still execute cpht_create, cpht_open and cpht_tables');
GRANT EXECUTE ON FUNCTION cpht_checkpoint() TO cpht_pv_plain;
SELECT is(pg_temp.as_role('cpht_pv_plain', 'SELECT cpht_checkpoint()'), '42501',
	'cpht_checkpoint() granted by mistake to a plain role still refuses it (42501)');

-- cpht_worker_info(): what all databases and sessions hold, only for roles
-- that may read every session's statistics
CREATE ROLE cpht_pv_stats NOLOGIN IN ROLE pg_read_all_stats;
SET LOCAL ROLE cpht_pv_plain;
SELECT cpht_worker_info() AS plain_info \gset
SET LOCAL ROLE cpht_pv_stats;
SELECT cpht_worker_info() AS stats_info \gset
RESET ROLE;
SELECT is(jsonb_build_array(:'plain_info'::jsonb->'shared_tables', :'plain_info'::jsonb->'private_tables',
							:'plain_info'::jsonb->'private_bytes')::text,
	'[null, null, null]',
	'cpht_worker_info() shows a plain role no server-wide table counts or bytes');
SELECT is((:'stats_info'::jsonb->>'shared_tables') IS NOT NULL AND (:'stats_info'::jsonb->>'private_bytes') IS NOT NULL,
	(:'stats_info'::jsonb->>'preloaded')::boolean,
	'... and shows them to members of pg_read_all_stats (where the worker runs)');

-- ---- preloaded: shared tables ------------------------------------------------------
CREATE FUNCTION pg_temp.shared_tests() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	why text := pg_temp.why_skip();
	db text := current_database();
	other_db text := current_database() || '_pv_other';
	lim int;
	used int;
	t0 timestamptz;
	res text;
BEGIN
	IF why IS NOT NULL THEN
		RETURN NEXT skip(why, 20);
		RETURN;
	END IF;

	RETURN NEXT is(pg_temp.as_role('cpht_pv_checkpointer', 'SELECT cpht_checkpoint()'), 'ok',
		'a member of pg_checkpoint may run cpht_checkpoint()');

	PERFORM pg_temp.connect('p');
	-- roles other sessions see: created and dropped outside this transaction
	PERFORM dblink_exec('p', 'DROP ROLE IF EXISTS cpht_pv_a, cpht_pv_b, cpht_pv_c');
	PERFORM dblink_exec('p', 'CREATE ROLE cpht_pv_a');
	PERFORM dblink_exec('p', 'CREATE ROLE cpht_pv_b');
	PERFORM dblink_exec('p', 'CREATE ROLE cpht_pv_c');
	-- a may give its tables to b, as ALTER ... OWNER needs
	PERFORM dblink_exec('p', 'GRANT cpht_pv_b TO cpht_pv_a');

	PERFORM dblink_exec('p', 'SET ROLE cpht_pv_a');
	res := pg_temp.remote_state('p',
		$q$SELECT cpht_create(100, name => 'pv_t')$q$);
	RETURN NEXT is(res, '42501', 'a role without CREATE on the database may not create a shared table (42501)');
	res := pg_temp.remote_state('p',
		$q$SELECT cpht_create(100, name => 'pv_d', durable => true)$q$);
	RETURN NEXT is(res, '42501', '... nor a durable one (42501)');
	res := pg_temp.remote_state('p', $q$SELECT cpht_drop(cpht_create(100))$q$);
	RETURN NEXT is(res, 'ok', '... but may create private tables');
	PERFORM dblink_exec('p', 'RESET ROLE');
	PERFORM dblink_exec('p', format('GRANT CREATE ON DATABASE %I TO cpht_pv_a', db));
	PERFORM dblink_exec('p', 'SET ROLE cpht_pv_a');
	res := pg_temp.remote_state('p',
		$q$SELECT cpht_create(100, name => 'pv_t')$q$);
	RETURN NEXT is(res, 'ok', 'after GRANT CREATE ON DATABASE it may');
	PERFORM dblink_exec('p', 'RESET ROLE');

	-- cpht_tables() shows what the role may use
	RETURN NEXT is(pg_temp.as_role('cpht_pv_c',
		$q$SELECT 1 / (SELECT (count(*) = 0)::int FROM cpht_tables() WHERE shared)$q$),
		'ok', 'cpht_tables() shows another role none of the shared tables it may not use');
	RETURN NEXT is(pg_temp.as_role('cpht_pv_a',
		$q$SELECT 1 / (SELECT (count(*) = 1)::int FROM cpht_tables() WHERE name = 'pv_t')$q$),
		'ok', '... and the owner its table');

	-- changing the owner
	RETURN NEXT is(pg_temp.as_role('cpht_pv_c', $q$SELECT cpht_alter_owner('pv_t', 'cpht_pv_c')$q$), '42501',
		'a role without the owner''s privileges may not change its owner (42501)');
	PERFORM dblink_exec('p', 'SET ROLE cpht_pv_a');
	res := pg_temp.remote_state('p', $q$SELECT cpht_alter_owner('pv_t', 'cpht_pv_c')$q$);
	RETURN NEXT is(res, '42501', 'the owner may not give it to a role it is not a member of (42501)');
	res := pg_temp.remote_state('p', $q$SELECT cpht_alter_owner('pv_t', 'cpht_pv_b')$q$);
	RETURN NEXT is(res, 'ok', 'the owner may give it to a role it is a member of');
	PERFORM dblink_exec('p', 'RESET ROLE');
	RETURN NEXT is((SELECT owner FROM cpht_tables() WHERE name = 'pv_t'), 'cpht_pv_b'::regrole,
		'cpht_tables() shows the new owner');
	RETURN NEXT is(pg_temp.as_role('cpht_pv_b', $q$SELECT cpht_find(cpht_open('pv_t'), '{1}')$q$), 'ok',
		'the new owner may use it');

	-- DROP ROLE, REASSIGN OWNED, DROP OWNED
	RETURN NEXT is((pg_temp.remote_state('p', 'DROP ROLE cpht_pv_b')), '2BP01',
		'DROP ROLE of a role that owns a shared table is refused (2BP01)');
	PERFORM dblink_exec('p', 'BEGIN');
	PERFORM dblink_exec('p', 'REASSIGN OWNED BY cpht_pv_b TO cpht_pv_c');
	PERFORM dblink_exec('p', 'ROLLBACK');
	RETURN NEXT is((SELECT owner FROM cpht_tables() WHERE name = 'pv_t'), 'cpht_pv_b'::regrole,
		'REASSIGN OWNED rolled back leaves the owner');
	PERFORM dblink_exec('p', 'BEGIN');
	PERFORM dblink_exec('p', 'REASSIGN OWNED BY cpht_pv_b TO cpht_pv_c');
	-- counted within the transaction: b owns nothing any more
	PERFORM dblink_exec('p', 'DROP ROLE cpht_pv_b');
	PERFORM dblink_exec('p', 'COMMIT');
	RETURN NEXT is((SELECT owner FROM cpht_tables() WHERE name = 'pv_t'), 'cpht_pv_c'::regrole,
		'REASSIGN OWNED gives the shared tables to the new role, and DROP ROLE after it in the transaction is allowed');
	PERFORM dblink_exec('p', 'DROP OWNED BY cpht_pv_c');
	RETURN NEXT is((SELECT count(*) FROM cpht_tables() WHERE name = 'pv_t'), 0::bigint,
		'DROP OWNED drops the shared tables of the role');
	RETURN NEXT is((pg_temp.remote_state('p', 'DROP ROLE cpht_pv_c')), 'ok',
		'DROP ROLE once it owns none');

	-- one database holds at most cpht.max_shared_tables_per_database
	SELECT count(*) INTO used FROM cpht_tables() WHERE shared;
	lim := used + 2;
	PERFORM dblink_exec('p', format('ALTER SYSTEM SET cpht.max_shared_tables_per_database = %s', lim));
	PERFORM pg_reload_conf();
	t0 := clock_timestamp();
	WHILE (cpht_worker_info()->>'max_shared_tables_per_database')::int <> lim
		  AND clock_timestamp() < t0 + interval '30 seconds' LOOP
		PERFORM pg_sleep(0.05);
	END LOOP;
	RETURN NEXT is((cpht_worker_info()->>'max_shared_tables_per_database')::int, lim,
		'the worker takes a new cpht.max_shared_tables_per_database on reload');
	PERFORM pg_temp.remote('p', $q$SELECT cpht_create(100, name => 'pv_l1')$q$);
	PERFORM pg_temp.remote('p', $q$SELECT cpht_create(100, name => 'pv_l2')$q$);
	res := pg_temp.remote_state('p', $q$SELECT cpht_create(100, name => 'pv_l3')$q$);
	RETURN NEXT is(res, '53400', 'a database at cpht.max_shared_tables_per_database may create no more (53400)');
	PERFORM dblink_exec('p', format('DROP DATABASE IF EXISTS %I', other_db));
	PERFORM dblink_exec('p', format('CREATE DATABASE %I', other_db));
	PERFORM dblink_connect('o', format('dbname=%s port=%s host=%s options=''-c cpht.device=cpu''',
		other_db, current_setting('port'), split_part(current_setting('unix_socket_directories'), ',', 1)));
	PERFORM dblink_exec('o', 'CREATE EXTENSION cpht');
	res := pg_temp.remote_state('o', $q$SELECT cpht_create(100, name => 'pv_l3')$q$);
	RETURN NEXT is(res, 'ok', 'another database may still create one');
	PERFORM dblink_disconnect('o');
	PERFORM dblink_exec('p', format('DROP DATABASE %I', other_db));
	PERFORM pg_temp.remote('p', $q$SELECT cpht_drop(cpht_open('pv_l1'))$q$);
	PERFORM pg_temp.remote('p', $q$SELECT cpht_drop(cpht_open('pv_l2'))$q$);
	PERFORM dblink_exec('p', 'ALTER SYSTEM RESET cpht.max_shared_tables_per_database');
	PERFORM pg_reload_conf();

	PERFORM dblink_exec('p', format('REVOKE CREATE ON DATABASE %I FROM cpht_pv_a', db));
	PERFORM dblink_exec('p', 'DROP ROLE cpht_pv_a');
	PERFORM dblink_disconnect('p');
END $$;

SELECT pg_temp.shared_tests();
SELECT * FROM finish();
ROLLBACK;
