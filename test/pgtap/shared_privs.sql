-- Privileges on shared tables: the creating role owns the table; it, the
-- roles that inherit its privileges and superusers may open, use and drop
-- it; every other role gets 42501, at open and at every call.
BEGIN;
SELECT plan(10);

\ir include/shared_sessions.psql

CREATE FUNCTION pg_temp.privilege_tests() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	why text := pg_temp.why_skip();
	h int;
	their int;
BEGIN
	IF why IS NOT NULL THEN
		RETURN NEXT skip(why, 10);
		RETURN;
	END IF;
	PERFORM pg_temp.connect('p');
	-- roles must exist for other sessions: created and dropped outside
	-- this transaction
	PERFORM dblink_exec('p', 'DROP ROLE IF EXISTS cpht_t_owner, cpht_t_member, cpht_t_noinherit, cpht_t_other');
	PERFORM dblink_exec('p', 'CREATE ROLE cpht_t_owner');
	PERFORM dblink_exec('p', 'CREATE ROLE cpht_t_member IN ROLE cpht_t_owner');
	PERFORM dblink_exec('p', 'CREATE ROLE cpht_t_noinherit NOINHERIT IN ROLE cpht_t_owner');
	PERFORM dblink_exec('p', 'CREATE ROLE cpht_t_other');
	-- creating a shared table needs CREATE on the database
	PERFORM dblink_exec('p', format('GRANT CREATE ON DATABASE %I TO cpht_t_owner', current_database()));
	PERFORM dblink_exec('p', 'SET ROLE cpht_t_owner');
	PERFORM pg_temp.remote('p', $q$SELECT cpht_create(1000, transactional => false, name => 'priv_t')$q$);
	PERFORM dblink_exec('p', 'RESET ROLE');

	RETURN NEXT is((SELECT owner FROM cpht_tables() WHERE name = 'priv_t'), 'cpht_t_owner'::regrole,
		'the creating role owns a shared table');
	RETURN NEXT is(pg_temp.as_role('cpht_t_owner', $q$SELECT cpht_fop(cpht_open('priv_t'), '{1}')$q$), 'ok',
		'its owner may use it');
	RETURN NEXT is(pg_temp.as_role('cpht_t_member', $q$SELECT cpht_fop(cpht_open('priv_t'), '{2}')$q$), 'ok',
		'a member of the owner role may use it');
	RETURN NEXT is(pg_temp.as_role('cpht_t_other', $q$SELECT cpht_open('priv_t')$q$), '42501',
		'another role may not open it (42501)');
	RETURN NEXT is(pg_temp.as_role('cpht_t_noinherit', $q$SELECT cpht_open('priv_t')$q$), '42501',
		'a member that does not inherit the owner''s privileges may not open it (42501)');
	h := cpht_open('priv_t');
	RETURN NEXT is(cpht_find(h, '{1,2,3}'), '{t,t,f}', 'a superuser may use it');
	RETURN NEXT is(pg_temp.as_role('cpht_t_other', format('SELECT cpht_find(%s, ''{1}'')', h)), '42501',
		'another role may not use a handle the session opened (42501)');
	SELECT hh INTO their FROM dblink('p', $q$SELECT cpht_open('priv_t')$q$) AS t(hh int);
	PERFORM dblink_exec('p', 'SET ROLE cpht_t_other');
	RETURN NEXT throws_ok(format($q$SELECT * FROM dblink('p', 'SELECT cpht_drop(%s)') AS t(v text)$q$, their),
		'42501', NULL, 'another role may not drop it (42501)');
	PERFORM dblink_exec('p', 'RESET ROLE');
	PERFORM dblink_exec('p', 'SET ROLE cpht_t_member');
	PERFORM pg_temp.remote('p', format('SELECT cpht_drop(%s)', their));
	PERFORM dblink_exec('p', 'RESET ROLE');
	RETURN NEXT is((SELECT count(*) FROM cpht_tables() WHERE name = 'priv_t'), 0::bigint,
		'a member of the owner role may drop it');
	RETURN NEXT throws_ok(format('SELECT cpht_find(%s, ''{1}'')', h), '42704', NULL,
		'once dropped it is gone for every session');

	PERFORM dblink_exec('p', format('REVOKE CREATE ON DATABASE %I FROM cpht_t_owner', current_database()));
	PERFORM dblink_exec('p', 'DROP ROLE cpht_t_owner, cpht_t_member, cpht_t_noinherit, cpht_t_other');
	PERFORM dblink_disconnect('p');
END $$;

SELECT pg_temp.privilege_tests();
SELECT * FROM finish();
ROLLBACK;
