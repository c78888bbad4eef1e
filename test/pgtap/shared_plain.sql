-- Without shared_preload_libraries = 'cpht' there is no cpht worker:
-- naming a table and opening one fail with 55000 and say how to get one,
-- and tables without a name work as ever.  On a preloaded server these
-- tests are skipped (shared_api.sql and the other shared_*.sql run there).
BEGIN;
SELECT plan(5);

CREATE FUNCTION pg_temp.plain_tests() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	h int;
BEGIN
	IF (cpht_worker_info()->>'preloaded')::boolean THEN
		RETURN NEXT skip('cpht is preloaded: the errors of a server without the cpht worker do not apply', 5);
		RETURN;
	END IF;
	RETURN NEXT throws_ok($q$SELECT cpht_create(1000, transactional => false, name => 'seen_ids')$q$,
		'55000', 'cpht_create with a name requires cpht in shared_preload_libraries',
		'without preloading, cpht_create with a name fails with 55000');
	RETURN NEXT throws_ok($q$SELECT cpht_open('seen_ids')$q$,
		'55000', 'cpht_open requires cpht in shared_preload_libraries',
		'without preloading, cpht_open fails with 55000');
	h := cpht_create(1000, name => NULL);
	RETURN NEXT is(cpht_fop(h, '{1,2,1}'), '{t,t,f}', 'a table without a name works as ever');
	RETURN NEXT is((SELECT count(*) FROM cpht_tables() WHERE shared), 0::bigint,
		'cpht_tables lists no shared table');
	RETURN NEXT is((SELECT placement FROM cpht_tables() WHERE handle = h), 'backend',
		'a table without a name lives in the backend');
END $$;

SELECT pg_temp.plain_tests();
SELECT * FROM finish();
ROLLBACK;
