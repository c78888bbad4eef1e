-- A rollback never loses a committed key: the property, at SQL level.
--
-- For both kinds and several key widths, a table is filled until it
-- refuses keys (53000), then keys are deleted (ten of them, 30 % or all)
-- and the deletion is rolled back: by ROLLBACK, by ROLLBACK TO SAVEPOINT,
-- through nested savepoints, by a PL/pgSQL EXCEPTION block, and after the
-- deleting transaction also filled the freed room with new keys.  Each
-- time every committed key must be found and the count must be exact;
-- cpht_rebuild must then succeed on the full table and keep every key.
--
-- Runs at top level (no BEGIN): the rounds commit and roll back.  The psql
-- variable rollback_repeat (pg_prove --set rollback_repeat=N) repeats the
-- whole set of rounds; CI runs it once.
\set QUIET 1
\if :{?rollback_repeat}
\else
\set rollback_repeat 1
\endif

SELECT plan(5);

-- The tables keep the size they were created with, so that they refuse keys.
SET cpht.grow = off;

CREATE TEMP TABLE rb_committed (k bigint PRIMARY KEY);
CREATE TEMP TABLE rb_state (h int, key_bits int);
CREATE TEMP TABLE rb_result (round int, kind text, key_bits int, deleting text, style text,
							 held bigint, deleted bigint, missing bigint, count_after bigint,
							 rebuilt boolean, error text);

-- A batch of n random keys of a table with key_bits bits.
CREATE FUNCTION pg_temp.rb_keys(n int, key_bits int) RETURNS bigint[] LANGUAGE sql AS $$
	SELECT array_agg(CASE WHEN key_bits = 64
						  THEN ('x' || md5(random()::text))::bit(64)::bigint
						  ELSE floor(random() * 2 ^ key_bits)::bigint END)
	FROM generate_series(1, n)
$$;

-- Puts random keys into h until the table refuses them (batches of 500,
-- then 50, then 5, so that it ends close to its limit).  Returns what the
-- calls that succeeded put, one array.
CREATE FUNCTION pg_temp.rb_fill(h int, key_bits int) RETURNS bigint[] LANGUAGE plpgsql AS $$
DECLARE
	batch bigint[];
	stored bigint[] := '{}';
	size int := 500;
BEGIN
	WHILE size >= 5 LOOP
		batch := pg_temp.rb_keys(size, key_bits);
		BEGIN
			PERFORM cpht_put(h, batch);
			stored := stored || batch;
		EXCEPTION WHEN SQLSTATE '53000' THEN
			size := size / 10;
		END;
	END LOOP;
	RETURN stored;
END $$;

-- A new table of this kind and width, filled until it refuses keys and
-- committed (the statement runs in its own transaction).
CREATE FUNCTION pg_temp.rb_setup(kind text, key_bits int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	h int;
BEGIN
	PERFORM cpht_drop(s.h) FROM rb_state s
	WHERE EXISTS (SELECT 1 FROM cpht_tables() t WHERE t.handle = s.h);
	DELETE FROM rb_state;
	TRUNCATE rb_committed;
	h := cpht_create(3000, kind, key_bits);
	INSERT INTO rb_state VALUES (h, key_bits);
	INSERT INTO rb_committed SELECT DISTINCT unnest(pg_temp.rb_fill(h, key_bits));
END $$;

-- Deletes committed keys: '10' of them, or a fraction ('0.3', '1').
CREATE FUNCTION pg_temp.rb_delete(deleting text) RETURNS bigint LANGUAGE sql AS $$
	SELECT count(*) FILTER (WHERE d)
	FROM rb_state s,
		 unnest(cpht_delete(s.h, ARRAY(
			SELECT k FROM rb_committed
			WHERE deleting = '10' OR random() < deleting::float8
			ORDER BY random()
			LIMIT CASE WHEN deleting = '10' THEN 10 END))) d
$$;

-- Deletes, then fills the room the deletions freed with new keys.
CREATE FUNCTION pg_temp.rb_delete_refill(deleting text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	n bigint := pg_temp.rb_delete(deleting);
BEGIN
	PERFORM pg_temp.rb_fill(h, key_bits) FROM rb_state;
	RETURN n;
END $$;

-- Deletes inside a block whose exception handler then undoes it.
CREATE FUNCTION pg_temp.rb_delete_in_block(deleting text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	n bigint;
BEGIN
	BEGIN
		n := pg_temp.rb_delete(deleting);
		PERFORM pg_temp.rb_fill(h, key_bits) FROM rb_state;
		RAISE EXCEPTION 'undo the deletion';
	EXCEPTION WHEN raise_exception THEN
		RETURN n;
	END;
END $$;

-- Records whether the table still holds exactly the committed keys, then
-- rebuilds it (full as it is) and checks again.
CREATE FUNCTION pg_temp.rb_check(round int, kind text, deleting text, style text, deleted bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	h int := (SELECT s.h FROM rb_state s);
	bits int := (SELECT s.key_bits FROM rb_state s);
	held bigint := (SELECT count(*) FROM rb_committed);
	missing bigint;
	n bigint;
	rebuilt boolean := false;
BEGIN
	SELECT count(*) FILTER (WHERE NOT f) INTO missing
	FROM unnest(cpht_find(h, ARRAY(SELECT k FROM rb_committed))) f;
	n := cpht_count(h);
	IF missing = 0 AND n = held THEN
		BEGIN
			PERFORM cpht_rebuild(h);
			SELECT count(*) FILTER (WHERE NOT f) = 0 AND cpht_count(h) = held INTO rebuilt
			FROM unnest(cpht_find(h, ARRAY(SELECT k FROM rb_committed))) f;
		EXCEPTION WHEN OTHERS THEN
			RAISE NOTICE 'cpht_rebuild failed: %', SQLERRM;
		END;
	END IF;
	INSERT INTO rb_result VALUES (round, kind, bits, deleting, style, held, deleted, missing, n, rebuilt, NULL);
EXCEPTION WHEN OTHERS THEN
	INSERT INTO rb_result VALUES (round, kind, bits, deleting, style, held, deleted, NULL, NULL, false, SQLERRM);
END $$;

-- How many keys the round deleted: a sequence, since the rollback being
-- tested undoes whatever a table would have recorded.
CREATE TEMP SEQUENCE rb_deleted;

-- The rounds, as statements run one by one at top level (\gexec).  A
-- statement that fails (a lost table) must not end the script: rb_check
-- records the damage and the tests below report it.
\set ON_ERROR_STOP 0
SELECT stmt
FROM generate_series(1, :rollback_repeat) rep,
	 unnest(ARRAY['iceberg', 'cuckoo']) kind,
	 unnest(ARRAY[16, 32, 37, 64]) key_bits,
	 unnest(ARRAY['10', '0.3', '1']) deleting,
	 unnest(ARRAY['rollback', 'savepoint', 'nested', 'exception', 'refill']) style,
	 LATERAL unnest(ARRAY[
		format('SELECT pg_temp.rb_setup(%L, %s)', kind, key_bits),
		$$SELECT setval('rb_deleted', 1)$$,
		'BEGIN'] ||
		CASE style
			WHEN 'rollback' THEN ARRAY[
				format($$SELECT setval('rb_deleted', greatest(pg_temp.rb_delete(%L) + 1, (SELECT last_value FROM rb_deleted)))$$, deleting),
				'ROLLBACK']
			WHEN 'savepoint' THEN ARRAY[
				'SAVEPOINT a',
				format($$SELECT setval('rb_deleted', greatest(pg_temp.rb_delete(%L) + 1, (SELECT last_value FROM rb_deleted)))$$, deleting),
				'ROLLBACK TO SAVEPOINT a',
				'COMMIT']
			WHEN 'nested' THEN ARRAY[
				'SAVEPOINT a',
				format($$SELECT setval('rb_deleted', greatest(pg_temp.rb_delete(%L) + 1, (SELECT last_value FROM rb_deleted)))$$, deleting),
				'SAVEPOINT b',
				format($$SELECT setval('rb_deleted', greatest(pg_temp.rb_delete_refill(%L) + 1, (SELECT last_value FROM rb_deleted)))$$, deleting),
				'SAVEPOINT c',
				format($$SELECT setval('rb_deleted', greatest(pg_temp.rb_delete(%L) + 1, (SELECT last_value FROM rb_deleted)))$$, deleting),
				'ROLLBACK TO SAVEPOINT b',
				format($$SELECT setval('rb_deleted', greatest(pg_temp.rb_delete(%L) + 1, (SELECT last_value FROM rb_deleted)))$$, deleting),
				'ROLLBACK TO SAVEPOINT a',
				'COMMIT']
			WHEN 'exception' THEN ARRAY[
				format($$SELECT setval('rb_deleted', greatest(pg_temp.rb_delete_in_block(%L) + 1, (SELECT last_value FROM rb_deleted)))$$, deleting),
				'COMMIT']
			ELSE ARRAY[
				format($$SELECT setval('rb_deleted', greatest(pg_temp.rb_delete_refill(%L) + 1, (SELECT last_value FROM rb_deleted)))$$, deleting),
				'ROLLBACK']
		END ||
		ARRAY[format('SELECT pg_temp.rb_check(%s, %L, %L, %L, (SELECT last_value - 1 FROM rb_deleted))',
					 rep, kind, deleting, style)]) WITH ORDINALITY AS s(stmt, ord)
ORDER BY rep, kind, key_bits, deleting, style, ord
\gexec
\set ON_ERROR_STOP 1

SELECT is((SELECT count(*) FROM rb_result), 120::bigint * :rollback_repeat,
	'every round ran (2 kinds, 4 key widths, 3 deletion sizes, 5 ways to roll back)');
SELECT is((SELECT count(*) FROM rb_result WHERE error IS NOT NULL), 0::bigint,
	'no rollback lost a table');
SELECT diag(format('%s, %s bits, deleting %s, %s: %s', kind, key_bits, deleting, style, error))
FROM rb_result WHERE error IS NOT NULL ORDER BY round, kind, key_bits LIMIT 5;
SELECT is((SELECT count(*) FROM rb_result WHERE missing <> 0 OR count_after <> held), 0::bigint,
	'after every rollback each committed key is found and the count is exact');
SELECT is((SELECT count(*) FROM rb_result WHERE NOT rebuilt), 0::bigint,
	'cpht_rebuild succeeds on every full table and keeps its keys');
SELECT ok((SELECT bool_and(deleted > 0) AND min(held) > 2000 FROM rb_result WHERE error IS NULL),
	'the rounds deleted keys from tables filled to their limit');

SELECT cpht_drop(h) FROM rb_state;
SELECT * FROM finish();
