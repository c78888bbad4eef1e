-- Handles across sessions, as a client behind a transaction pooler uses
-- them: a shared table's handle is the same number in every session and
-- reaches the same table there, even in a session that never opened it;
-- a private table's handle, an unknown number or a dropped table's
-- number fails in another session (42704) instead of reaching some other
-- table; a role without the owner's privileges gets 42501.
BEGIN;
SELECT plan(16);

\ir include/shared_sessions.psql

-- The SQLSTATE, message and detail sql fails with in dblink session
-- conn, or 'ok'.
CREATE FUNCTION pg_temp.remote_message(conn text, sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	msg text;
	detail text;
BEGIN
	PERFORM * FROM dblink(conn, sql) AS t(v text);
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL;
	RETURN SQLSTATE || ' ' || msg || ' / ' || detail;
END $$;

CREATE FUNCTION pg_temp.handle_tests() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	why text := pg_temp.why_skip();
	ha int;
	hb int;
	pa int;
	pb int;
BEGIN
	IF why IS NOT NULL THEN
		RETURN NEXT skip(why, 16);
		RETURN;
	END IF;
	PERFORM pg_temp.connect('ha');
	PERFORM pg_temp.connect('hb');
	PERFORM dblink_exec('ha', 'DROP ROLE IF EXISTS cpht_h_other');
	PERFORM dblink_exec('ha', 'CREATE ROLE cpht_h_other');

	-- session a: a private table, then a shared one; session b: a private
	-- table and another shared one (its first private handle is a's too)
	SELECT v INTO pa FROM dblink('ha', 'SELECT cpht_create(100)') AS t(v int);
	SELECT v INTO ha FROM dblink('ha', $q$SELECT cpht_create(1000, transactional => false, name => 'handles_a')$q$) AS t(v int);
	SELECT v INTO pb FROM dblink('hb', 'SELECT cpht_create(100)') AS t(v int);
	SELECT v INTO hb FROM dblink('hb', $q$SELECT cpht_create(1000, transactional => false, name => 'handles_b')$q$) AS t(v int);

	RETURN NEXT ok(ha <> hb, 'two shared tables have different handles, though each is its session''s first');
	RETURN NEXT is((SELECT v FROM dblink('hb', $q$SELECT cpht_open('handles_a')$q$) AS t(v int)), ha,
		'cpht_open gives the same handle in another session');
	RETURN NEXT ok(pa < ha AND pa < hb AND pb < ha AND pb < hb,
		'private handles are below every shared handle');

	-- session b never opened handles_a: the number alone reaches it
	PERFORM dblink_exec('hb', 'DISCARD ALL');
	PERFORM dblink_disconnect('hb');
	PERFORM pg_temp.connect('hb');
	RETURN NEXT is((SELECT v FROM dblink('hb', $q$SELECT handle FROM cpht_tables() WHERE name = 'handles_a'$q$) AS t(v int)), ha,
		'cpht_tables() shows a session that never opened a shared table its handle');
	RETURN NEXT is((SELECT v FROM dblink('hb', format('SELECT cpht_put(%s, ''{1,2,3}'')', ha)) AS t(v bigint)), 3::bigint,
		'a session that never opened a shared table writes to it by its handle');
	RETURN NEXT is((SELECT v FROM dblink('ha', format('SELECT cpht_find(%s, ''{1,2,3,4}'')', ha)) AS t(v boolean[])),
		'{t,t,t,f}', 'the session that created it finds those keys: the same table');
	RETURN NEXT is(cpht_count(hb), 0::bigint, 'the other shared table got none of them');
	RETURN NEXT is(cpht_find(ha, '{3}'), '{t}', 'this session reaches it by the number too');

	-- a private handle means nothing in another session
	RETURN NEXT is(pg_temp.remote_state('hb', format('SELECT cpht_put(%s, ''{9}'')', pa)), '42704',
		'another session''s private handle fails (42704)');
	RETURN NEXT is(pg_temp.remote_state('hb', format('SELECT cpht_put(%s, ''{9}'')', hb + 1000000)), '42704',
		'a number in the shared range that names no table fails (42704)');
	RETURN NEXT throws_ok('SELECT cpht_count(2147483647)', '42704', 'cpht table 2147483647 does not exist',
		'the largest handle names no table (42704)');

	-- a dropped table's number, in a session that never opened it
	PERFORM pg_temp.remote('hb', format('SELECT cpht_drop(%s)', hb));
	RETURN NEXT throws_ok(format('SELECT cpht_put(%s, ''{1}'')', hb), '42704',
		format('cpht table %s does not exist', hb),
		'a dropped shared table''s handle fails in a session that never opened it (42704)');

	-- privileges as for cpht_open
	RETURN NEXT is(pg_temp.as_role('cpht_h_other', format('SELECT cpht_count(%s)', ha)), '42501',
		'a role without the owner''s privileges may not use the handle (42501)');
	PERFORM pg_temp.connect('hc');
	PERFORM dblink_exec('hc', 'SET ROLE cpht_h_other');
	RETURN NEXT is(pg_temp.remote_message('hc', format('SELECT cpht_count(%s)', ha)),
		format('42501 permission denied for cpht table %s / It is a shared table of another role.', ha),
		'... and a session that never opened it learns neither the table''s name nor its owner from the number');
	PERFORM dblink_disconnect('hc');
	PERFORM dblink_exec('hb', 'SET ROLE cpht_h_other');
	RETURN NEXT is(pg_temp.remote_state('hb', format('SELECT cpht_drop(%s)', ha)), '42501',
		'nor drop the table by it (42501)');
	PERFORM dblink_exec('hb', 'RESET ROLE');

	-- cpht_drop by the number drops it for everyone
	PERFORM pg_temp.remote('hb', format('SELECT cpht_drop(%s)', ha));
	RETURN NEXT is(pg_temp.remote_state('ha', format('SELECT cpht_count(%s)', ha)), '42704',
		'dropped by its number in another session, it is gone for its creator (42704)');

	PERFORM dblink_disconnect('hb');
	PERFORM dblink_disconnect('ha');
	PERFORM pg_temp.connect('ha');
	PERFORM dblink_exec('ha', 'DROP ROLE cpht_h_other');
	PERFORM dblink_disconnect('ha');
END $$;

SELECT pg_temp.handle_tests();
SELECT * FROM finish();
ROLLBACK;
