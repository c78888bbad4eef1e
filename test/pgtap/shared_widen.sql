-- Shared tables created without key_bits (cpht in shared_preload_libraries):
-- the cpht worker widens them as sessions bring wider keys, every session
-- sees every key, and a transaction that widened a transactional shared
-- table and rolls back (whole or to a savepoint) leaves the keys it had.
-- Creating and dropping shared tables goes through dblink sessions
-- (autocommit), as this file runs inside a transaction block.
BEGIN;
SELECT plan(17);

\ir include/shared_sessions.psql

CREATE FUNCTION pg_temp.widen_tests() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	why text := pg_temp.why_skip();
	mine int;
	theirs int;
	n bigint;
	i jsonb;
BEGIN
	IF why IS NOT NULL THEN
		RETURN NEXT skip(why, 17);
		RETURN;
	END IF;
	PERFORM pg_temp.connect('a');
	PERFORM pg_temp.connect('b');

	SELECT h INTO theirs FROM dblink('a',
		$q$SELECT cpht_create(1000, transactional => false, name => 'kw_plain')$q$) AS t(h int);
	mine := cpht_open('kw_plain');
	RETURN NEXT ok((SELECT key_bits IS NULL FROM cpht_tables() WHERE name = 'kw_plain')
				   AND cpht_info(mine)->>'key_width' = 'auto' AND (cpht_info(mine)->>'key_bits')::int = 8,
		'a shared table without key_bits starts at 8-bit keys, key_bits null in cpht_tables');

	-- sequential keys from the other session, strided ones from this one
	SELECT c INTO n FROM dblink('a', format(
		'SELECT cpht_put(%s, ARRAY(SELECT generate_series(1, 100000)::bigint))', theirs)) AS t(c bigint);
	RETURN NEXT is(n, 100000::bigint, 'the other session puts sequential keys');
	RETURN NEXT is(cpht_put(mine, ARRAY(SELECT g * 4096 FROM generate_series(1, 100000) g)), 99976::bigint,
		'this session puts strided keys (those that are new)');
	RETURN NEXT is((cpht_info(mine)->>'key_bits')::int, 29, 'the table widened to the widest key, 29 bits');
	-- snowflake-style ids and negative keys: wider, then signed
	SELECT c INTO n FROM dblink('a', format(
		'SELECT cpht_put(%s, ARRAY(SELECT ((411165025343 + g / 4096) << 22) | (37 << 12) | (g %% 4096) FROM generate_series(0, 49999) g))',
		theirs)) AS t(c bigint);
	RETURN NEXT is(n, 50000::bigint, 'the other session puts snowflake-style ids');
	RETURN NEXT is(cpht_put(mine, ARRAY(SELECT -g FROM generate_series(1, 50000) g)), 50000::bigint,
		'this session puts negative keys');
	i := cpht_info(mine);
	RETURN NEXT ok((i->>'signed_keys')::boolean AND (i->>'key_bits')::int = 62 AND (i->>'widens')::int >= 2,
		'the table folds negative keys now: 62-bit keys (the ids fold to 62 bits)');
	SELECT c INTO n FROM dblink('a', format($f$SELECT
		(SELECT count(*) FROM unnest(cpht_find(%1$s, ARRAY(SELECT generate_series(1, 100000)::bigint))) f WHERE f)
		+ (SELECT count(*) FROM unnest(cpht_find(%1$s, ARRAY(SELECT g * 4096 FROM generate_series(1, 100000) g))) f WHERE f)
		+ (SELECT count(*) FROM unnest(cpht_find(%1$s, ARRAY(SELECT ((411165025343 + g / 4096) << 22) | (37 << 12) | (g %% 4096) FROM generate_series(0, 49999) g))) f WHERE f)
		+ (SELECT count(*) FROM unnest(cpht_find(%1$s, ARRAY(SELECT -g FROM generate_series(1, 50000) g))) f WHERE f)$f$,
		theirs)) AS t(c bigint);
	RETURN NEXT is(n, 300000::bigint, 'the other session finds every key of both sessions');
	RETURN NEXT is(cpht_count(mine), 299976::bigint, 'the count is exact');
	PERFORM pg_temp.remote('a', format('SELECT cpht_drop(%s)', theirs));

	-- transactional: a widening rolled back, whole and to a savepoint
	SELECT h INTO theirs FROM dblink('b', $q$SELECT cpht_create(1000, name => 'kw_tx')$q$) AS t(h int);
	mine := cpht_open('kw_tx');
	PERFORM pg_temp.remote('b', format('SELECT cpht_put(%s, ARRAY(SELECT generate_series(0, 9999)::bigint))', theirs));
	PERFORM dblink_exec('b', 'BEGIN');
	PERFORM pg_temp.remote('b', format('SELECT cpht_delete(%s, ARRAY(SELECT generate_series(0, 999)::bigint))', theirs));
	PERFORM pg_temp.remote('b', format('SELECT cpht_put(%s, ARRAY(SELECT (1::bigint << 50) + g FROM generate_series(0, 9999) g))', theirs));
	PERFORM dblink_exec('b', 'SAVEPOINT s');
	PERFORM pg_temp.remote('b', format('SELECT cpht_put(%s, ARRAY(SELECT -1 - g FROM generate_series(0, 9999) g))', theirs));
	SELECT c INTO n FROM dblink('b', format('SELECT (cpht_info(%s)->>''signed_keys'')::boolean::int', theirs)) AS t(c bigint);
	RETURN NEXT is(n, 1::bigint, 'a transaction widens the transactional shared table to signed keys');
	PERFORM dblink_exec('b', 'ROLLBACK TO SAVEPOINT s');
	SELECT c INTO n FROM dblink('b', format(
		'SELECT (SELECT count(*) FROM unnest(cpht_find(%s, ARRAY(SELECT -1 - g FROM generate_series(0, 9999) g))) f WHERE f)',
		theirs)) AS t(c bigint);
	RETURN NEXT is(n, 0::bigint, 'after ROLLBACK TO SAVEPOINT the negative keys are gone');
	PERFORM dblink_exec('b', 'ROLLBACK');
	RETURN NEXT is((SELECT count(*) FROM unnest(cpht_find(mine, ARRAY(SELECT generate_series(0, 9999)::bigint))) f WHERE f),
		10000::bigint, 'after the rollback every key deleted in it is back');
	RETURN NEXT is((SELECT count(*) FROM unnest(cpht_find(mine, ARRAY(SELECT (1::bigint << 50) + g FROM generate_series(0, 9999) g))) f WHERE f),
		0::bigint, 'and the wide keys it put are gone');
	RETURN NEXT is(cpht_count(mine), 10000::bigint, 'the count is that before the transaction');
	PERFORM pg_temp.remote('b', format('SELECT cpht_drop(%s)', theirs));

	-- One call streamed through the worker in pieces of a window each
	-- (cpht.transfer_chunk keys), its keys wider piece by piece: each piece
	-- widens the table by its own keys' width, which the session takes as
	-- it copies them in.
	SELECT h INTO theirs FROM dblink('a',
		$q$SELECT cpht_create(1000, transactional => false, name => 'kw_stream')$q$) AS t(h int);
	mine := cpht_open('kw_stream');
	SELECT c INTO n FROM dblink('a', format($f$SELECT count(*) FROM unnest(cpht_fop(%s,
		ARRAY(SELECT CASE WHEN g %% 700001 = 0 THEN g << (g / 700001 * 9)::int ELSE g END
			  FROM generate_series(1::bigint, 2800004) g))) f WHERE f$f$, theirs)) AS t(c bigint);
	RETURN NEXT is(n, 2800004::bigint, 'a call of several pieces, wider keys in later pieces: every key new');
	RETURN NEXT is((cpht_info(mine)->>'key_bits')::int, 58,
		'the table widened to the widest key of the last piece, 58 bits');
	RETURN NEXT is((SELECT array_agg(f ORDER BY g) FROM unnest(cpht_find(mine,
		ARRAY[700001::bigint << 9, 1400002::bigint << 18, 2100003::bigint << 27, 2800004::bigint << 36,
			  (700001::bigint << 9) + 1, (2800004::bigint << 36) + 1])) WITH ORDINALITY u(f, g)),
		ARRAY[true, true, true, true, false, false], 'the wide keys are found, their neighbours are not');
	PERFORM pg_temp.remote('a', format('SELECT cpht_drop(%s)', theirs));
	PERFORM dblink_disconnect('a');
	PERFORM dblink_disconnect('b');
END $$;

SELECT pg_temp.widen_tests();
SELECT * FROM finish();
ROLLBACK;
