-- Transactional shared tables (the default for shared tables): unique-index
-- semantics across sessions, for both kinds.
--   - a write of a key another open transaction put or deleted waits for
--     that transaction (Lock: transactionid), then answers as if it had
--     ended: not new after a commit, new after a rollback;
--   - find and count never wait: they see such keys as before the change;
--   - ROLLBACK TO SAVEPOINT and EXCEPTION blocks undo their part and
--     release the waiters; a deadlock across two keys fails one session
--     with 40P01; a canceled waiter changes nothing; a terminated owner's
--     keys are undone before its waiters go on; streaming waits too;
--   - rebuild is refused while deletes are pending; PREPARE is refused.
BEGIN;
SELECT plan(2 * 40 + 4);

\ir include/shared_sessions.psql

CREATE FUNCTION pg_temp.pid_of(conn text) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
	RETURN (SELECT v FROM dblink(conn, 'SELECT pg_backend_pid()') AS t(v int));
END $$;

CREATE FUNCTION pg_temp.txn_tests(kind text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	why text := pg_temp.why_skip();
	tname text := 'txn_' || kind;
	h int;
	pa int;
	pb int;
	po int;
	r text;
	ra text;
	rb text;
	fop text := format($q$SELECT cpht_fop(cpht_open(%L), '%%s')$q$, tname);
BEGIN
	IF why IS NOT NULL THEN
		RETURN NEXT skip(why, 40);
		RETURN;
	END IF;
	PERFORM pg_temp.connect('a');
	PERFORM pg_temp.connect('b');
	-- a waiter that is never released fails its test instead of hanging it
	PERFORM dblink_exec('a', 'SET statement_timeout = ''60s''');
	PERFORM dblink_exec('b', 'SET statement_timeout = ''60s''');
	pa := pg_temp.pid_of('a');
	pb := pg_temp.pid_of('b');
	PERFORM pg_temp.remote('a', format($q$SELECT cpht_create(1000, %L, name => %L)$q$, kind, tname));
	h := cpht_open(tname);
	RETURN NEXT is((cpht_info(h)->>'transactional')::boolean, true, kind || ': a shared table is transactional by default');

	-- a waits for nothing; b waits for a's pending key; a commits
	PERFORM dblink_exec('a', 'BEGIN');
	PERFORM pg_temp.remote('a', format(fop, '{1,2}'));
	PERFORM dblink_send_query('b', format(fop, '{2,3}'));
	RETURN NEXT ok(pg_temp.await_lock_wait(pb), kind || ': a find-or-put of a key another transaction put waits for it (Lock: transactionid)');
	RETURN NEXT is(cpht_find(h, '{1,2,3}'), '{f,f,f}', kind || ': find does not wait and sees pending inserts as absent');
	RETURN NEXT is(cpht_count(h), 0::bigint, kind || ': count leaves out pending inserts');
	RETURN NEXT is((SELECT v FROM dblink('a', format($q$SELECT cpht_find(cpht_open(%L), '{1,2,3}')::text$q$, tname)) AS t(v text)),
		'{t,t,f}', kind || ': the owner sees its own changes (and none of the waiting call''s)');
	PERFORM dblink_exec('a', 'COMMIT');
	RETURN NEXT is(pg_temp.result('b'), '{f,t}', kind || ': after the owner commits its key is not new to the waiter');
	RETURN NEXT is(cpht_find(h, '{1,2,3}'), '{t,t,t}', kind || ': and every key is in the table');
	RETURN NEXT is((SELECT t.count FROM cpht_tables() t WHERE t.name = tname), 3::bigint,
		kind || ': cpht_tables counts the keys once their transactions committed');

	-- the owner rolls back: the waiter's key is new
	PERFORM dblink_exec('a', 'BEGIN');
	PERFORM pg_temp.remote('a', format(fop, '{10,11}'));
	PERFORM dblink_send_query('b', format(fop, '{11,12}'));
	RETURN NEXT ok(pg_temp.await_lock_wait(pb), kind || ': b waits for a again');
	PERFORM dblink_exec('a', 'ROLLBACK');
	RETURN NEXT is(pg_temp.result('b'), '{t,t}', kind || ': after the owner rolls back its key is new to the waiter');
	RETURN NEXT is(cpht_find(h, '{10,11,12}'), '{f,t,t}', kind || ': the rolled-back key is gone, the waiter''s keys are in');
	RETURN NEXT is(cpht_count(h), 5::bigint, kind || ': count after both');

	-- a pending delete: others still see the key; a writer waits
	PERFORM dblink_exec('a', 'BEGIN');
	RETURN NEXT is((SELECT v FROM dblink('a', format($q$SELECT cpht_delete(cpht_open(%L), '{1}')::text$q$, tname)) AS t(v text)),
		'{t}', kind || ': a deletes a key');
	RETURN NEXT is(cpht_find(h, '{1}'), '{t}', kind || ': others see a pending delete''s key as present');
	RETURN NEXT is(cpht_count(h), 5::bigint, kind || ': and count it');
	RETURN NEXT is((SELECT v FROM dblink('a', format($q$SELECT cpht_count(cpht_open(%L))$q$, tname)) AS t(v bigint)),
		4::bigint, kind || ': the owner counts its delete');
	RETURN NEXT throws_ok(format('SELECT cpht_rebuild(%s)', h), '55006', NULL,
		kind || ': rebuild is refused while a delete is pending');
	PERFORM dblink_send_query('b', format(fop, '{1}'));
	RETURN NEXT ok(pg_temp.await_lock_wait(pb), kind || ': a find-or-put of a pending delete''s key waits');
	PERFORM dblink_exec('a', 'COMMIT');
	RETURN NEXT is(pg_temp.result('b'), '{t}', kind || ': after the delete commits the key is new');
	RETURN NEXT lives_ok(format('SELECT cpht_rebuild(%s)', h), kind || ': rebuild runs once no delete is pending');

	-- savepoints: ROLLBACK TO releases the waiter and undoes the keys
	PERFORM dblink_exec('a', 'BEGIN');
	PERFORM pg_temp.remote('a', format(fop, '{20}'));
	PERFORM dblink_exec('a', 'SAVEPOINT s');
	PERFORM pg_temp.remote('a', format(fop, '{21,22}'));
	PERFORM dblink_send_query('b', format(fop, '{21}'));
	RETURN NEXT ok(pg_temp.await_lock_wait(pb), kind || ': b waits for a key a put after a savepoint');
	PERFORM dblink_exec('a', 'ROLLBACK TO SAVEPOINT s');
	RETURN NEXT is(pg_temp.result('b'), '{t}', kind || ': ROLLBACK TO SAVEPOINT releases the waiter with the key new');
	RETURN NEXT is((SELECT v FROM dblink('a', format($q$SELECT cpht_find(cpht_open(%L), '{20,21,22}')::text$q$, tname)) AS t(v text)),
		'{t,t,f}', kind || ': the savepoint''s keys are undone, the earlier key stays');
	-- an EXCEPTION block undoes its part of the transaction
	RETURN NEXT is((SELECT v FROM dblink('a', format($q$
		DO $do$ BEGIN
			PERFORM cpht_fop(cpht_open(%L), '{23}');
			BEGIN
				PERFORM cpht_fop(cpht_open(%L), '{24}');
				RAISE EXCEPTION 'undo 24';
			EXCEPTION WHEN raise_exception THEN NULL;
			END;
		END $do$; SELECT cpht_find(cpht_open(%L), '{23,24}')::text$q$, tname, tname, tname)) AS t(v text)),
		'{t,f}', kind || ': an EXCEPTION block undoes the keys put inside it');
	RETURN NEXT is((SELECT v FROM dblink('b', format(fop, '{24}')) AS t(v text)), '{t}',
		kind || ': a key an EXCEPTION block undid does not make others wait');
	PERFORM dblink_exec('a', 'COMMIT');
	RETURN NEXT is(cpht_find(h, '{20,21,22,23,24}'), '{t,t,f,t,t}', kind || ': the committed keys are in');

	-- The worker indexes a transaction's keys only once another
	-- transaction meets them: after a savepoint of the owner was rolled
	-- back, and then kept up to date while the owner writes on.
	PERFORM dblink_exec('a', 'BEGIN');
	PERFORM pg_temp.remote('a', format(fop, '{90}'));
	PERFORM dblink_exec('a', 'SAVEPOINT s');
	PERFORM pg_temp.remote('a', format(fop, '{91}'));
	PERFORM dblink_exec('a', 'ROLLBACK TO SAVEPOINT s');
	PERFORM pg_temp.remote('a', format(fop, '{92}'));
	RETURN NEXT is((SELECT v FROM dblink('b', format(fop, '{91}')) AS t(v text)), '{t}',
		kind || ': a key rolled back before another transaction met the owner does not make it wait');
	PERFORM pg_temp.remote('a', format(fop, '{93}'));
	PERFORM dblink_send_query('b', format(fop, '{93}'));
	RETURN NEXT ok(pg_temp.await_lock_wait(pb), kind || ': a key the owner put after that makes others wait');
	PERFORM dblink_exec('a', 'COMMIT');
	RETURN NEXT is(pg_temp.result('b'), '{f}', kind || ': and is not new once the owner commits');
	RETURN NEXT is(cpht_find(h, '{90,91,92,93}'), '{t,t,t,t}', kind || ': every key of both is in');

	-- streaming waits like any write
	PERFORM dblink_exec('a', 'BEGIN');
	PERFORM pg_temp.remote('a', format('SELECT cpht_fop_agg(cpht_open(%L), g) FROM generate_series(100, 199) g', tname));
	PERFORM dblink_send_query('b', format('SELECT cpht_fop_agg(cpht_open(%L), g)::text FROM generate_series(150, 249) g', tname));
	RETURN NEXT ok(pg_temp.await_lock_wait(pb), kind || ': cpht_fop_agg waits for a key another transaction put');
	PERFORM dblink_exec('a', 'ROLLBACK');
	RETURN NEXT is(pg_temp.result('b'), '100', kind || ': and counts it new after that transaction rolled back');

	-- a deadlock across two keys taken in crossed order
	PERFORM dblink_exec('a', 'SET deadlock_timeout = ''100ms''');
	PERFORM dblink_exec('b', 'SET deadlock_timeout = ''100ms''');
	PERFORM dblink_exec('a', 'BEGIN');
	PERFORM dblink_exec('b', 'BEGIN');
	PERFORM pg_temp.remote('a', format(fop, '{40}'));
	PERFORM pg_temp.remote('b', format(fop, '{41}'));
	PERFORM dblink_send_query('a', format(fop, '{41}'));
	PERFORM pg_temp.await_lock_wait(pa);
	PERFORM dblink_send_query('b', format(fop, '{40}'));
	ra := pg_temp.result('a');
	rb := pg_temp.result('b');
	RETURN NEXT ok((ra = '40P01') <> (rb = '40P01'), format('%s: a deadlock fails one session with 40P01 (a: %s, b: %s)', kind, ra, rb));
	RETURN NEXT ok((ra = '40P01' AND rb = '{t}') OR (rb = '40P01' AND ra = '{t}'),
		kind || ': the other gets the key as new: the failed transaction''s keys were undone');
	PERFORM dblink_exec('a', 'ROLLBACK');
	PERFORM dblink_exec('b', 'ROLLBACK');

	-- a canceled waiter changes nothing
	PERFORM dblink_exec('a', 'BEGIN');
	PERFORM pg_temp.remote('a', format(fop, '{50}'));
	PERFORM dblink_send_query('b', format(fop, '{51,50}'));
	PERFORM pg_temp.await_lock_wait(pb);
	PERFORM pg_cancel_backend(pb);
	RETURN NEXT is(pg_temp.result('b'), '57014', kind || ': pg_cancel_backend of a waiter gives 57014');
	RETURN NEXT is(cpht_find(h, '{50,51}'), '{f,f}', kind || ': and the canceled call changed nothing');
	PERFORM dblink_exec('a', 'ROLLBACK');

	-- the owner is terminated: its keys are undone before the waiter goes on
	PERFORM pg_temp.connect('o');
	po := pg_temp.pid_of('o');
	PERFORM dblink_exec('o', 'BEGIN');
	PERFORM pg_temp.remote('o', format(fop, '{60,61}'));
	PERFORM dblink_send_query('b', format(fop, '{60}'));
	PERFORM pg_temp.await_lock_wait(pb);
	PERFORM pg_terminate_backend(po);
	RETURN NEXT is(pg_temp.result('b'), '{t}', kind || ': a terminated owner''s waiter gets its key as new');
	RETURN NEXT is(cpht_find(h, '{60,61}'), '{t,f}', kind || ': and the terminated transaction''s keys are gone');
	BEGIN
		PERFORM dblink_disconnect('o');
	EXCEPTION WHEN OTHERS THEN
		NULL;
	END;

	-- PREPARE TRANSACTION is refused
	PERFORM dblink_exec('a', 'BEGIN');
	PERFORM pg_temp.remote('a', format(fop, '{70}'));
	BEGIN
		PERFORM dblink_exec('a', 'PREPARE TRANSACTION ''cpht_txn''');
		r := 'prepared';
	EXCEPTION WHEN OTHERS THEN
		r := SQLSTATE;
	END;
	RETURN NEXT is(r, '0A000', kind || ': a transaction that wrote a transactional shared table cannot be prepared');
	PERFORM dblink_exec('a', 'ROLLBACK');
	RETURN NEXT is(cpht_find(h, '{70}'), '{f}', kind || ': and its keys are undone');

	PERFORM pg_temp.remote('a', format('SELECT cpht_drop(cpht_open(%L))', tname));
	PERFORM dblink_disconnect('a');
	PERFORM dblink_disconnect('b');
END $$;

SELECT pg_temp.txn_tests('iceberg');
SELECT pg_temp.txn_tests('cuckoo');

-- Non-transactional shared tables do not wait.
CREATE FUNCTION pg_temp.plain_test() RETURNS SETOF text LANGUAGE plpgsql AS $$
BEGIN
	IF pg_temp.why_skip() IS NOT NULL THEN
		RETURN NEXT skip(pg_temp.why_skip(), 1);
		RETURN;
	END IF;
	PERFORM pg_temp.connect('a');
	PERFORM pg_temp.connect('b');
	PERFORM pg_temp.remote('a', $q$SELECT cpht_create(1000, transactional => false, name => 'txn_plain')$q$);
	PERFORM dblink_exec('a', 'BEGIN');
	PERFORM pg_temp.remote('a', $q$SELECT cpht_fop(cpht_open('txn_plain'), '{1}')$q$);
	RETURN NEXT is((SELECT v FROM dblink('b', $q$SELECT cpht_fop(cpht_open('txn_plain'), '{1,2}')::text$q$) AS t(v text)),
		'{f,t}', 'a non-transactional shared table does not wait: a key is in once the call returns');
	PERFORM dblink_exec('a', 'ROLLBACK');
	PERFORM pg_temp.remote('a', $q$SELECT cpht_drop(cpht_open('txn_plain'))$q$);
	PERFORM dblink_disconnect('a');
	PERFORM dblink_disconnect('b');
END $$;
SELECT pg_temp.plain_test();

-- A call larger than a transfer window (sent in pieces) waits, then runs
-- whole once the owner ended.
CREATE FUNCTION pg_temp.large_test() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	pb int;
	n bigint := (cpht_worker_info()->>'window_keys')::bigint + 10;
BEGIN
	IF pg_temp.why_skip() IS NOT NULL THEN
		RETURN NEXT skip(pg_temp.why_skip(), 3);
		RETURN;
	END IF;
	PERFORM pg_temp.connect('a');
	PERFORM pg_temp.connect('b');
	pb := pg_temp.pid_of('b');
	PERFORM pg_temp.remote('a', format($q$SELECT cpht_create(%s, name => 'txn_large')$q$, 2 * n));
	PERFORM dblink_exec('a', 'BEGIN');
	PERFORM pg_temp.remote('a', format($q$SELECT cpht_fop(cpht_open('txn_large'), '{%s}')$q$, n));
	PERFORM dblink_send_query('b', format($q$SELECT cardinality(cpht_fop_new(cpht_open('txn_large'),
		(SELECT array_agg(g) FROM generate_series(1, %s) g)))::text$q$, n));
	RETURN NEXT ok(pg_temp.await_lock_wait(pb), 'a call larger than a transfer window waits for the owner of its last key');
	PERFORM dblink_exec('a', 'COMMIT');
	RETURN NEXT is(pg_temp.result('b'), (n - 1)::text, 'and then runs whole: every key but the committed one is new');
	RETURN NEXT is(cpht_count(cpht_open('txn_large')), n, 'the table holds every key once');
	PERFORM pg_temp.remote('a', $q$SELECT cpht_drop(cpht_open('txn_large'))$q$);
	PERFORM dblink_disconnect('a');
	PERFORM dblink_disconnect('b');
END $$;
SELECT pg_temp.large_test();

SELECT * FROM finish();
ROLLBACK;
