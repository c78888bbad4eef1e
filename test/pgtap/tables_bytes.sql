-- What cpht_tables() and cpht_worker_info() say about the memory of tables
-- that grew.
BEGIN;
SELECT plan(5);

\ir include/shared_sessions.psql

-- a private table (in the cpht worker with cpht.placement = worker)
SELECT cpht_create(100) AS h \gset
SELECT bytes AS created FROM cpht_tables() WHERE handle = :h \gset
SELECT coalesce((cpht_worker_info()->>'private_bytes')::bigint, 0) AS private_before \gset
SELECT cpht_put(:h, ARRAY(SELECT generate_series(1, 20000)::bigint)) AS ignored \gset
SELECT ok((cpht_info(:h)->>'grows')::int > 0, 'the table grew');
SELECT is((SELECT bytes FROM cpht_tables() WHERE handle = :h), (cpht_info(:h)->>'bytes')::bigint,
	'cpht_tables() reports the bytes of the grown table, as cpht_info() does');
SELECT ok((SELECT bytes FROM cpht_tables() WHERE handle = :h) > :created,
	'more than it was created with');
SELECT is(coalesce((cpht_worker_info()->>'private_bytes')::bigint, 0) - :private_before,
	CASE WHEN cpht_info(:h)->>'placement' = 'worker'
		 THEN (cpht_info(:h)->>'bytes')::bigint - :created ELSE 0 END,
	'cpht_worker_info()''s private_bytes grows with a table in the worker (by nothing for one in the backend)');

CREATE FUNCTION pg_temp.worker_tests() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	why text := pg_temp.why_skip();
	s int;
BEGIN
	IF why IS NOT NULL THEN
		RETURN NEXT skip(why, 1);
		RETURN;
	END IF;
	PERFORM pg_temp.connect('a');
	PERFORM pg_temp.remote('a', $q$SELECT cpht_create(100, transactional => false, name => 'bytes_grow')$q$);
	s := cpht_open('bytes_grow');
	PERFORM cpht_put(s, ARRAY(SELECT generate_series(1, 20000)::bigint));
	RETURN NEXT is((SELECT bytes FROM cpht_tables() WHERE name = 'bytes_grow'), (cpht_info(s)->>'bytes')::bigint,
		'cpht_tables() reports the bytes of a shared table that grew');

	PERFORM pg_temp.remote('a', $q$SELECT cpht_drop(cpht_open('bytes_grow'))$q$);
	PERFORM dblink_disconnect('a');
END $$;

SELECT pg_temp.worker_tests();
SELECT * FROM finish();
ROLLBACK;
