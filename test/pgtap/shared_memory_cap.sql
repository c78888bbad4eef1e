-- Memory caps of shared tables: a shared table keeps the cpht.max_memory of
-- the session that created it, and the shared tables of its owner, with
-- their open transactions' changes, may not hold more than that together,
-- whoever writes to them; cpht.max_shared_memory bounds all shared tables.
-- A refused request answers 53400 and changes nothing.
--
-- Tables here are CPU tables (the dblink sessions run with cpht.device =
-- cpu, and the test session sets it): a GPU table also counts transfer
-- buffers, and the figures below are sized for slot memory.
BEGIN;
SELECT plan(18);
SET LOCAL cpht.device = cpu;

\ir include/shared_sessions.psql

-- Puts keys [lo, lo + n) into the shared table `name` from dblink session
-- conn.
CREATE FUNCTION pg_temp.put_sql(name text, lo bigint, n bigint) RETURNS text LANGUAGE sql AS $$
	SELECT format('SELECT cpht_put(cpht_open(%L), array(SELECT g FROM generate_series(%s::bigint, %s) g))',
				  name, lo, lo + n - 1)
$$;

-- The key count and bytes of shared table `name` (cpht_tables(): committed keys).
CREATE FUNCTION pg_temp.count_of(name text) RETURNS bigint LANGUAGE sql AS $$
	SELECT count FROM cpht_tables() WHERE cpht_tables.name = $1
$$;

CREATE FUNCTION pg_temp.cap_tests() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	why text := pg_temp.why_skip();
	st text;
	msg text;
	batches int := 0;
	h int;
	mb bigint;
BEGIN
	IF why IS NOT NULL THEN
		RETURN NEXT skip(why, 18);
		RETURN;
	END IF;
	PERFORM pg_temp.connect('p');
	PERFORM pg_temp.connect('a');
	PERFORM pg_temp.connect('b');
	-- roles must exist for other sessions: created and dropped outside
	-- this transaction
	PERFORM dblink_exec('p', 'DROP ROLE IF EXISTS cpht_t_capped, cpht_t_capgroup');
	PERFORM dblink_exec('p', 'CREATE ROLE cpht_t_capgroup');
	PERFORM dblink_exec('p', 'CREATE ROLE cpht_t_capped IN ROLE cpht_t_capgroup');
	-- creating shared tables needs CREATE on the database
	PERFORM dblink_exec('p', format('GRANT CREATE ON DATABASE %I TO cpht_t_capped', current_database()));
	-- session a: the role, capped at 8MB as ALTER ROLE ... SET would cap it
	PERFORM dblink_exec('a', 'SET cpht.max_memory = ''8MB''');
	PERFORM dblink_exec('a', 'SET ROLE cpht_t_capped');

	-- ---- growth against the owner's cap ------------------------------------
	PERFORM pg_temp.remote('a', $q$SELECT cpht_create(1000, transactional => false, name => 'mcap_grow')$q$);
	-- batches of 100,000 keys, each committed, until one is refused: 4M
	-- keys would take 9.2MB of slots
	LOOP
		st := pg_temp.remote_state('a', pg_temp.put_sql('mcap_grow', batches * 100000::bigint + 1, 100000));
		EXIT WHEN st <> 'ok' OR batches >= 40;
		batches := batches + 1;
	END LOOP;
	RETURN NEXT is(st, '53400', 'growing a shared table past its owner''s cap (8MB) is refused with 53400');
	RETURN NEXT cmp_ok(batches, '<', 40, '... before it holds 4M keys');
	RETURN NEXT is(pg_temp.count_of('mcap_grow'), batches * 100000::bigint,
		'... and the refused call left none of its keys: the table has exactly the keys before it');
	RETURN NEXT cmp_ok((SELECT bytes FROM cpht_tables() WHERE name = 'mcap_grow'), '<=', 8 * 1024 * 1024::bigint,
		'... and holds no more than the cap');
	-- the cap is the table's: a superuser writing to it meets it too
	h := cpht_open('mcap_grow');
	BEGIN
		PERFORM cpht_put(h, array(SELECT g FROM generate_series(10000001::bigint, 14000000) g));
		msg := 'no error';
	EXCEPTION WHEN OTHERS THEN
		GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
		msg := SQLSTATE || ' ' || msg;
	END;
	RETURN NEXT is(msg, '53400 shared cpht table "mcap_grow" would exceed its owner''s memory cap',
		'a superuser''s write into the table meets its owner''s cap as well');
	RETURN NEXT is(cpht_find(h, array[1, batches * 100000::bigint, batches * 100000::bigint + 1, 10000001]),
		array[true, true, false, false], '... and the table still answers its committed keys, and only those');
	PERFORM pg_temp.remote('p', $q$SELECT cpht_drop(cpht_open('mcap_grow'))$q$);

	-- ---- pending state of transactions against the owner's cap -------------
	PERFORM pg_temp.remote('a', $q$SELECT cpht_create(1000, name => 'mcap_txn')$q$);
	PERFORM dblink_exec('a', 'BEGIN');
	PERFORM pg_temp.remote('a', pg_temp.put_sql('mcap_txn', 1, 10000));
	PERFORM dblink_exec('a', 'SAVEPOINT s');
	-- 1M pending keys need a 9MB undo list in the worker
	RETURN NEXT is(pg_temp.remote_state('a', pg_temp.put_sql('mcap_txn', 100001, 1000000)), '53400',
		'a transaction''s pending keys past its owner''s cap are refused with 53400');
	PERFORM dblink_exec('a', 'ROLLBACK TO SAVEPOINT s');
	PERFORM pg_temp.remote('a', pg_temp.put_sql('mcap_txn', 10001, 1000));
	PERFORM dblink_exec('a', 'COMMIT');
	RETURN NEXT is(pg_temp.count_of('mcap_txn'), 11000::bigint,
		'... and the transaction rolls back to its savepoint, goes on and commits what it put');

	-- an open transaction's pending keys: a second writer needs the
	-- pending map of them (32 bytes a slot, at most half full: 8MB for
	-- 100,000 keys), which the owner's cap leaves no room for
	PERFORM dblink_exec('b', 'BEGIN');
	PERFORM pg_temp.remote('b', pg_temp.put_sql('mcap_txn', 1000001, 100000));
	PERFORM dblink_exec('a', 'BEGIN');
	RETURN NEXT is(pg_temp.remote_state('a', pg_temp.put_sql('mcap_txn', 3000001, 1)), '53400',
		'another open transaction''s pending keys count against the owner''s cap');
	PERFORM dblink_exec('a', 'ROLLBACK');
	PERFORM dblink_exec('b', 'COMMIT');
	PERFORM dblink_exec('a', 'BEGIN');
	RETURN NEXT is(pg_temp.remote_state('a', pg_temp.put_sql('mcap_txn', 3000001, 1)), 'ok',
		'... and once it committed, the same write fits');
	PERFORM dblink_exec('a', 'COMMIT');
	RETURN NEXT is(pg_temp.count_of('mcap_txn'), 111001::bigint, '... and both transactions'' keys are there');
	PERFORM pg_temp.remote('p', $q$SELECT cpht_drop(cpht_open('mcap_txn'))$q$);
	-- ---- the owner role's own cap ---------------------------------------------
	-- a superuser session (no cap of its own) creates a table after SET ROLE
	-- to a role capped by ALTER ROLE ... SET: the table has the role's cap
	PERFORM dblink_exec('p', 'DROP ROLE IF EXISTS cpht_t_rolecap');
	PERFORM dblink_exec('p', 'CREATE ROLE cpht_t_rolecap');
	PERFORM dblink_exec('p', 'ALTER ROLE cpht_t_rolecap SET cpht.max_memory = ''8MB''');
	PERFORM dblink_exec('p', format('GRANT CREATE ON DATABASE %I TO cpht_t_rolecap', current_database()));
	PERFORM dblink_exec('b', 'SET ROLE cpht_t_rolecap');
	PERFORM pg_temp.remote('b', $q$SELECT cpht_create(1000, transactional => false, name => 'mcap_rolecap')$q$);
	PERFORM dblink_exec('b', 'RESET ROLE');
	RETURN NEXT is(pg_temp.remote_state('b', pg_temp.put_sql('mcap_rolecap', 1, 4000000)), '53400',
		'a table a superuser made after SET ROLE to a role capped by ALTER ROLE ... SET is held to that cap (53400)');
	PERFORM pg_temp.remote('p', $q$SELECT cpht_drop(cpht_open('mcap_rolecap'))$q$);
	PERFORM dblink_exec('p', format('REVOKE CREATE ON DATABASE %I FROM cpht_t_rolecap', current_database()));
	PERFORM dblink_exec('p', 'DROP ROLE cpht_t_rolecap');

	-- ---- giving tables away does not escape the cap -------------------------
	-- each table takes about 6MB of the 8MB cap: the role creates one,
	-- gives it to its group, creates another and gives that too
	PERFORM pg_temp.remote('a', $q$SELECT cpht_create(2500000, transactional => false, name => 'mcap_give1')$q$);
	RETURN NEXT is(pg_temp.remote_state('a', $q$SELECT cpht_alter_owner('mcap_give1', 'cpht_t_capgroup')$q$), 'ok',
		'a capped role gives a table within its cap to a role of its own');
	PERFORM pg_temp.remote('a', $q$SELECT cpht_create(2500000, transactional => false, name => 'mcap_give2')$q$);
	RETURN NEXT is(pg_temp.remote_state('a', $q$SELECT cpht_alter_owner('mcap_give2', 'cpht_t_capgroup')$q$), '53400',
		'... but a second one that would take the new owner past the tables'' cap is refused with 53400');
	RETURN NEXT is((SELECT string_agg(name || ' ' || owner, ', ' ORDER BY name) FROM cpht_tables() WHERE name LIKE 'mcap_give%'),
		'mcap_give1 cpht_t_capgroup, mcap_give2 cpht_t_capped', '... and it stays with its owner');
	PERFORM pg_temp.remote('p', $q$SELECT cpht_drop(cpht_open('mcap_give1'))$q$);
	PERFORM pg_temp.remote('p', $q$SELECT cpht_drop(cpht_open('mcap_give2'))$q$);

	PERFORM dblink_exec('a', 'RESET ROLE');
	PERFORM dblink_exec('a', 'RESET cpht.max_memory');

	-- ---- cpht.max_shared_memory ------------------------------------------
	-- room for about 4MB more than the shared tables (of every test) hold
	-- now; reset whatever happens
	mb := (SELECT coalesce(sum(bytes), 0) FROM cpht_tables()) / (1024 * 1024) + 4;
	PERFORM dblink_exec('p', format('ALTER SYSTEM SET cpht.max_shared_memory = %L', mb || 'MB'));
	PERFORM pg_reload_conf();
	PERFORM pg_sleep(0.5);
	BEGIN
		BEGIN
			PERFORM pg_temp.remote('p', $q$SELECT cpht_create(10000000, transactional => false, name => 'mcap_server_big')$q$);
			msg := 'no error';
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
			msg := SQLSTATE || ' ' || msg;
		END;
		RETURN NEXT is(msg, '53400 shared cpht table "mcap_server_big" would exceed cpht.max_shared_memory',
			'a shared table larger than cpht.max_shared_memory leaves is refused with 53400, for a superuser too');
		PERFORM pg_temp.remote('a', $q$SELECT cpht_create(1000, transactional => false, name => 'mcap_server')$q$);
		RETURN NEXT is(pg_temp.remote_state('a', pg_temp.put_sql('mcap_server', 1, 4000000)), '53400',
			'growing a table of an uncapped owner past cpht.max_shared_memory is refused with 53400');
		RETURN NEXT is(pg_temp.count_of('mcap_server'), 0::bigint, '... and the refused call left no key');
		PERFORM pg_temp.remote('p', $q$SELECT cpht_drop(cpht_open('mcap_server'))$q$);
	EXCEPTION WHEN OTHERS THEN
		PERFORM dblink_exec('p', 'ALTER SYSTEM RESET cpht.max_shared_memory');
		PERFORM pg_reload_conf();
		RAISE;
	END;
	PERFORM dblink_exec('p', 'ALTER SYSTEM RESET cpht.max_shared_memory');
	PERFORM pg_reload_conf();

	PERFORM dblink_disconnect('a');
	PERFORM dblink_disconnect('b');
	PERFORM dblink_exec('p', format('REVOKE CREATE ON DATABASE %I FROM cpht_t_capped', current_database()));
	PERFORM dblink_exec('p', 'DROP ROLE cpht_t_capped, cpht_t_capgroup');
	PERFORM dblink_disconnect('p');
END $$;

SELECT pg_temp.cap_tests();
SELECT * FROM finish();
ROLLBACK;
