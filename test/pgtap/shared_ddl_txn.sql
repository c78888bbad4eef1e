-- Creating and dropping shared tables inside transaction blocks (cpht in
-- shared_preload_libraries), as migration tools run DDL, and
-- cpht_create(..., if_not_exists => true): a creation is undone by a
-- rollback (of the transaction or to a savepoint) and seen by other
-- sessions once it commits; a drop takes effect at commit and a rollback
-- keeps the table and its keys; a session creating or dropping a name
-- that another open transaction created or dropped waits for it, as an
-- insert into a unique index does, so two sessions racing to create a
-- table with if_not_exists both get the one table.  Durable tables too:
-- a rolled-back creation leaves no snapshot file.  This file runs inside a
-- transaction block itself; other sessions are dblink sessions.
BEGIN;
SELECT plan(35);

\ir include/shared_sessions.psql

-- The SQLSTATE of sql in dblink session conn, or NULL when it succeeds.
CREATE FUNCTION pg_temp.state_of(conn text, sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	PERFORM * FROM dblink(conn, sql) AS t(v text);
	RETURN NULL;
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE;
END $$;

-- The SQLSTATE of sql here, or NULL when it succeeds.
CREATE FUNCTION pg_temp.state_here(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE sql;
	RETURN NULL;
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE;
END $$;

-- Waits until backend p waits for a lock on a shared table's name (an
-- advisory lock tag of cpht's); false after 30 s.
CREATE FUNCTION pg_temp.await_name_wait(p int) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	t0 timestamptz := clock_timestamp();
BEGIN
	LOOP
		IF EXISTS (SELECT 1 FROM pg_locks WHERE pid = p AND locktype = 'advisory' AND NOT granted) THEN
			RETURN true;
		END IF;
		IF clock_timestamp() > t0 + interval '30 seconds' THEN
			RETURN false;
		END IF;
		PERFORM pg_sleep(0.005);
	END LOOP;
END $$;

CREATE FUNCTION pg_temp.live_tables() RETURNS int LANGUAGE sql AS $$
	SELECT (cpht_worker_info()->>'shared_tables')::int
$$;

-- Snapshot files of durable tables of this database.
CREATE FUNCTION pg_temp.snap_files() RETURNS bigint LANGUAGE sql AS $$
	SELECT count(*) FROM pg_ls_dir('pg_cpht') f
	WHERE f LIKE (SELECT oid FROM pg_database WHERE datname = current_database())::text || '\_%.snap'
$$;

CREATE FUNCTION pg_temp.ddl_tests() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	why text := pg_temp.why_skip();
	h int;
	h2 int;
	before int;
	files bigint;
	pid_b int;
	r record;
BEGIN
	IF why IS NOT NULL THEN
		RETURN NEXT skip(why, 35);
		RETURN;
	END IF;
	PERFORM pg_temp.connect('a');
	PERFORM pg_temp.connect('b');
	SELECT p INTO pid_b FROM dblink('b', 'SELECT pg_backend_pid()') AS t(p int);
	before := pg_temp.live_tables();

	-- created in this transaction block: used here, unseen elsewhere
	h := cpht_create(1000, transactional => false, name => 'ddl_mine');
	RETURN NEXT is(cpht_put(h, '{1,2,3}'), 3::bigint, 'a shared table created inside a transaction block can be used in it');
	RETURN NEXT is(cpht_open('ddl_mine'), h, 'and opened by name in it');
	RETURN NEXT is(pg_temp.state_of('b', $q$SELECT cpht_open('ddl_mine')$q$), '42704',
		'another session does not see it before the creating transaction commits');
	RETURN NEXT is((SELECT count(*) FROM dblink('b', $q$SELECT name FROM cpht_tables() WHERE name = 'ddl_mine'$q$) AS t(n text)),
		0::bigint, 'nor does cpht_tables() there list it');
	RETURN NEXT is(pg_temp.state_of('b', format('SELECT cpht_count(%s)', h)), '42704',
		'nor does its handle reach it there');
	RETURN NEXT is(cpht_create(5, 'cuckoo', 20, false, 'ddl_mine', if_not_exists => true), h,
		'if_not_exists in the same transaction returns its handle (a kind and width that differ are a notice)');

	-- a savepoint rolled back takes its creation along, and frees the entry
	BEGIN
		h2 := cpht_create(1000, name => 'ddl_sub');
		PERFORM cpht_put(h2, '{7}');
		RAISE EXCEPTION 'undo';
	EXCEPTION WHEN raise_exception THEN
		NULL;
	END;
	RETURN NEXT is(pg_temp.state_here($q$SELECT cpht_open('ddl_sub')$q$), '42704',
		'a table created in a subtransaction rolled back does not exist');
	RETURN NEXT is(pg_temp.live_tables(), before + 1, 'and no longer holds a worker entry');
	RETURN NEXT is(pg_temp.state_here(format('SELECT cpht_count(%s)', h2)), '42704',
		'its handle names no table');
	-- one released stays
	BEGIN
		h2 := cpht_create(1000, name => 'ddl_sub2');
	END;
	RETURN NEXT is(cpht_open('ddl_sub2'), h2, 'a table created in a subtransaction that committed stays');

	-- dropped in this block: gone here, there for others until commit;
	-- rolled back to a savepoint: back, with its keys
	PERFORM pg_temp.remote('a', $q$SELECT cpht_put(cpht_create(1000, name => 'ddl_keep'), '{10,11,12}')$q$);
	BEGIN
		PERFORM cpht_drop(cpht_open('ddl_keep'));
		RETURN NEXT is(pg_temp.state_here($q$SELECT cpht_open('ddl_keep')$q$), '42704',
			'a table dropped in this transaction is gone for it');
		RETURN NEXT is((SELECT n FROM dblink('b', $q$SELECT cpht_count(cpht_open('ddl_keep'))$q$) AS t(n bigint)),
			3::bigint, 'while other sessions still use it and its keys');
		RAISE EXCEPTION 'undo';
	EXCEPTION WHEN raise_exception THEN
		NULL;
	END;
	RETURN NEXT is(cpht_find(cpht_open('ddl_keep'), '{10,11,12,13}'), '{t,t,t,f}',
		'a drop rolled back to a savepoint keeps the table and its keys');

	-- the same through other sessions' transactions
	PERFORM dblink_exec('a', 'BEGIN');
	PERFORM pg_temp.remote('a', $q$SELECT cpht_drop(cpht_open('ddl_keep'))$q$);
	PERFORM dblink_exec('a', 'ROLLBACK');
	RETURN NEXT is((SELECT n FROM dblink('b', $q$SELECT cpht_count(cpht_open('ddl_keep'))$q$) AS t(n bigint)),
		3::bigint, 'DROP inside BEGIN then ROLLBACK keeps the table and its keys');
	PERFORM dblink_exec('a', 'BEGIN');
	PERFORM pg_temp.remote('a', $q$SELECT cpht_drop(cpht_open('ddl_keep'))$q$);
	PERFORM dblink_exec('a', 'COMMIT');
	RETURN NEXT is(pg_temp.state_of('b', $q$SELECT cpht_open('ddl_keep')$q$), '42704',
		'DROP inside BEGIN then COMMIT drops it');

	PERFORM dblink_exec('a', 'BEGIN');
	PERFORM pg_temp.remote('a', $q$SELECT cpht_create(1000, name => 'ddl_gone')$q$);
	PERFORM dblink_exec('a', 'ROLLBACK');
	RETURN NEXT is(pg_temp.state_of('b', $q$SELECT cpht_open('ddl_gone')$q$), '42704',
		'CREATE inside BEGIN then ROLLBACK leaves no table');
	RETURN NEXT is(pg_temp.live_tables(), before + 2, 'nor a worker entry');

	-- racing creators: the second waits for the first, then gets its table
	PERFORM dblink_exec('a', 'BEGIN');
	SELECT t.h INTO h FROM dblink('a', $q$SELECT cpht_create(1000, name => 'ddl_race')$q$) AS t(h int);
	PERFORM dblink_send_query('b', $q$SELECT cpht_create(1000, name => 'ddl_race', if_not_exists => true)$q$);
	RETURN NEXT ok(pg_temp.await_name_wait(pid_b), 'a second session creating the same name waits for the first');
	PERFORM dblink_exec('a', 'COMMIT');
	SELECT t.h INTO h2 FROM dblink_get_result('b') AS t(h int);
	PERFORM * FROM dblink_get_result('b') AS t(h int);
	RETURN NEXT is(h2, h, 'and, with if_not_exists, gets the table the first committed');
	RETURN NEXT is((SELECT count(*) FROM dblink('b', $q$SELECT name FROM cpht_tables() WHERE name = 'ddl_race'$q$) AS t(n text)),
		1::bigint, 'one table results');

	PERFORM dblink_exec('a', 'BEGIN');
	PERFORM pg_temp.remote('a', $q$SELECT cpht_create(1000, name => 'ddl_race2')$q$);
	PERFORM dblink_send_query('b', $q$SELECT cpht_put(cpht_create(1000, name => 'ddl_race2'), '{5}')$q$);
	RETURN NEXT ok(pg_temp.await_name_wait(pid_b), 'a creator waits for an open transaction that created the name');
	PERFORM dblink_exec('a', 'ROLLBACK');
	SELECT t.h INTO h2 FROM dblink_get_result('b') AS t(h int);
	PERFORM * FROM dblink_get_result('b') AS t(h int);
	RETURN NEXT is(h2, 1, 'and creates it when that transaction rolls back');

	PERFORM dblink_exec('a', 'BEGIN');
	PERFORM pg_temp.remote('a', $q$SELECT cpht_drop(cpht_open('ddl_race2'))$q$);
	PERFORM dblink_send_query('b', $q$SELECT cpht_create(1000, name => 'ddl_race2', if_not_exists => true)$q$);
	RETURN NEXT ok(pg_temp.await_name_wait(pid_b), 'a creator waits for an open transaction that dropped the name');
	PERFORM dblink_exec('a', 'COMMIT');
	SELECT t.h INTO h2 FROM dblink_get_result('b') AS t(h int);
	PERFORM * FROM dblink_get_result('b') AS t(h int);
	RETURN NEXT is((SELECT n FROM dblink('b', $q$SELECT cpht_count(cpht_open('ddl_race2'))$q$) AS t(n bigint)),
		0::bigint, 'and creates it anew, empty, when that transaction commits');

	-- if_not_exists and the definition (in session b: the name stays
	-- locked by whoever created it until its transaction ends)
	RETURN NEXT is((SELECT t.h FROM dblink('b', $q$SELECT cpht_create(1000, name => 'ddl_race', if_not_exists => true)$q$) AS t(h int)),
		h, 'if_not_exists returns the existing table''s handle');
	RETURN NEXT is(pg_temp.state_of('b', $q$SELECT cpht_create(1000, name => 'ddl_race', durable => true, if_not_exists => true)$q$),
		'42710', 'if_not_exists fails with 42710 when the existing table is not durable and durable is asked');
	RETURN NEXT is(pg_temp.state_of('b', $q$SELECT cpht_create(1000, name => 'ddl_race', transactional => false, if_not_exists => true)$q$),
		'42710', 'and when it is transactional where it is asked not to be');
	RETURN NEXT is(pg_temp.state_of('b', $q$SELECT cpht_create(1000, name => 'ddl_race')$q$),
		'42710', 'without if_not_exists an existing name fails with 42710');

	-- durable tables: a rolled-back creation leaves no file, a committed one
	-- gets its file, a rolled-back drop keeps it
	files := pg_temp.snap_files();
	PERFORM dblink_exec('a', 'BEGIN');
	PERFORM pg_temp.remote('a', $q$SELECT cpht_put(cpht_create(1000, name => 'ddl_dur', durable => true), '{1,2}')$q$);
	RETURN NEXT is(pg_temp.snap_files(), files, 'a durable table created inside a transaction block has no snapshot file before commit');
	PERFORM dblink_exec('a', 'ROLLBACK');
	RETURN NEXT is(pg_temp.state_of('b', $q$SELECT cpht_open('ddl_dur')$q$), '42704',
		'a durable table whose creation rolled back does not exist');
	RETURN NEXT is(pg_temp.snap_files(), files, 'and left no snapshot file');
	PERFORM dblink_exec('a', 'BEGIN');
	PERFORM pg_temp.remote('a', $q$SELECT cpht_put(cpht_create(1000, name => 'ddl_dur', durable => true), '{1,2}')$q$);
	PERFORM dblink_exec('a', 'COMMIT');
	RETURN NEXT is(pg_temp.snap_files(), files + 1, 'a durable table created in a transaction that commits gets its file');
	PERFORM dblink_exec('a', 'BEGIN');
	PERFORM pg_temp.remote('a', $q$SELECT cpht_drop(cpht_open('ddl_dur'))$q$);
	PERFORM dblink_exec('a', 'ROLLBACK');
	RETURN NEXT is((SELECT n FROM dblink('b', $q$SELECT cpht_count(cpht_open('ddl_dur'))$q$) AS t(n bigint)),
		2::bigint, 'a durable table whose drop rolled back keeps its keys');
	RETURN NEXT is(pg_temp.snap_files(), files + 1, 'and its file');
	PERFORM dblink_exec('a', 'BEGIN');
	PERFORM pg_temp.remote('a', $q$SELECT cpht_drop(cpht_open('ddl_dur'))$q$);
	PERFORM dblink_exec('a', 'COMMIT');
	RETURN NEXT is(pg_temp.snap_files(), files, 'a durable drop committed removes its file');

	-- cleanup of what other sessions committed
	PERFORM pg_temp.remote('a', $q$SELECT cpht_drop(cpht_open('ddl_race'))$q$);
	PERFORM pg_temp.remote('a', $q$SELECT cpht_drop(cpht_open('ddl_race2'))$q$);
	PERFORM dblink_disconnect('a');
	PERFORM dblink_disconnect('b');
END $$;

SELECT * FROM pg_temp.ddl_tests();

SELECT * FROM finish();
ROLLBACK;
