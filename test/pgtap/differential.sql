-- Differential test: random batches through cpht, checked against
-- PostgreSQL's own DISTINCT / EXCEPT as the oracle, for both kinds, with
-- 64-bit and 37-bit keys, on whatever device cpht.device selects.
--
-- Batches mix key shapes that stress a hash layout differently (sequential
-- ids, strides of 2^k, timestamps in the high bits, snowflake-like ids,
-- random 64-bit patterns, the edges of the bigint domain) with repeats
-- inside the batch and keys of earlier batches.  Every fourth batch is big
-- enough to be split over several CPU threads.
BEGIN;
SELECT plan(4 * 69 + 4);

SELECT cpht_drop_all() >= 0 AS clean \gset
SELECT setseed(0.4242);

-- a random 64-bit pattern
CREATE FUNCTION pg_temp.r64() RETURNS bigint LANGUAGE sql VOLATILE AS
$$ SELECT ((random() * 4294967295)::bigint << 32) # (random() * 4294967295)::bigint $$;

CREATE TEMP TABLE batch (b int, pos int, k bigint);

CREATE FUNCTION pg_temp.make_batches(nbatches int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	n int;
	base bigint;
BEGIN
	FOR cur IN 1..nbatches LOOP
		n := CASE WHEN cur % 4 = 0 THEN 40000 + (random() * 40000)::int
			 ELSE 2000 + (random() * 8000)::int END;
		base := pg_temp.r64();
		-- bitwise operators only: bigint + and * raise on overflow
		INSERT INTO batch (b, pos, k)
		WITH fresh AS (
			SELECT CASE (cur - 1) % 7
				WHEN 0 THEN (base & ~1048575::bigint) | i                  -- sequential ids
				WHEN 1 THEN (base & ~((1::bigint << 62) - 1))
					# (i::bigint << (1 + cur % 40))                           -- stride 2^k
				WHEN 2 THEN ((1700000000000 + cur * 100000 + i / 16) << 22) | (i % 16)  -- ms timestamp high
				WHEN 3 THEN ((1700000000000 + cur * 100000 + i / 256) << 22)
					| (((i / 64) % 4)::bigint << 12) | (i % 64)               -- snowflake: ts | worker | seq
				WHEN 4 THEN pg_temp.r64()                                   -- random
				WHEN 5 THEN -(i::bigint) # (base & 1099511627775)          -- negative, low bits dense
				ELSE (ARRAY[0, -1, 9223372036854775807, -9223372036854775808,
							1, -2, 9223372036854775806, -9223372036854775807])[1 + i % 8]
					# (CASE WHEN i < 8 THEN 0 ELSE pg_temp.r64() END)        -- edges, then random
				END AS k
			FROM generate_series(0, n - 1) AS i
		)
		SELECT cur, row_number() OVER (ORDER BY random()), k
		FROM (
			SELECT k FROM fresh
			UNION ALL (SELECT k FROM fresh ORDER BY random() LIMIT n / 10)
			UNION ALL (SELECT k FROM batch WHERE b < cur ORDER BY random() LIMIT n / 10)
		) AS s;
	END LOOP;
END $$;

SELECT pg_temp.make_batches(12);

CREATE TEMP TABLE seen (k bigint PRIMARY KEY);

-- Three tables go through the same batches: one by cpht_fop, one by
-- cpht_fop_new, one by cpht_put; all three get the same deletes.
CREATE FUNCTION pg_temp.check_pass(kind text, bits int) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	mask bigint := CASE WHEN bits = 64 THEN -1 ELSE (1::bigint << bits) - 1 END;
	hf int := cpht_create(500000, kind, bits);
	hn int := cpht_create(500000, kind, bits);
	hp int := cpht_create(500000, kind, bits);
	label text;
	arr bigint[];
	probe bigint[];
	del bigint[];
	expected bigint[];
	got bigint[];
	got_n bigint[];
	got_p bigint[];
	nseen bigint;
	bad bigint;
	cur int;
BEGIN
	TRUNCATE seen;
	FOR cur IN SELECT DISTINCT b FROM batch ORDER BY b LOOP
		label := format('%s, key_bits %s, batch %s', kind, bits, cur);
		SELECT array_agg(k & mask ORDER BY pos) INTO arr FROM batch WHERE b = cur;
		SELECT coalesce(array_agg(k ORDER BY k), '{}') INTO expected
		FROM (SELECT DISTINCT k FROM unnest(arr) AS k EXCEPT SELECT k FROM seen) AS e;

		SELECT coalesce(array_agg(u.k ORDER BY u.k), '{}') INTO got
		FROM unnest(arr, cpht_fop(hf, arr)) AS u(k, r) WHERE r;
		RETURN NEXT is(got, expected,
			format('%s (%s keys): cpht_fop is true once for each new key', label, cardinality(arr)));

		SELECT coalesce(array_agg(k ORDER BY k), '{}') INTO got
		FROM unnest(cpht_fop_new(hn, arr)) AS k;
		RETURN NEXT is(got, expected, format('%s: cpht_fop_new returns the new keys', label));

		RETURN NEXT is(cpht_put(hp, arr), cardinality(expected)::bigint,
			format('%s: cpht_put counts the new keys', label));

		INSERT INTO seen SELECT unnest(expected);
		SELECT count(*) INTO nseen FROM seen;
		RETURN NEXT is(ARRAY[cpht_count(hf), cpht_count(hn), cpht_count(hp)],
			ARRAY[nseen, nseen, nseen], format('%s: cpht_count is the number of distinct keys', label));

		-- the batch, fresh random keys, and keys of earlier batches
		-- (deleted ones among them)
		SELECT arr || array_agg(k) INTO probe FROM (
			SELECT pg_temp.r64() & mask AS k FROM generate_series(1, 2000)
			UNION ALL (SELECT k & mask FROM batch WHERE b < cur ORDER BY random() LIMIT 2000)
		) AS p;
		SELECT count(*) INTO bad
		FROM unnest(probe, cpht_find(hf, probe), cpht_find(hn, probe), cpht_find(hp, probe))
			AS u(k, f1, f2, f3)
			LEFT JOIN seen s ON s.k = u.k
		WHERE f1 <> (s.k IS NOT NULL) OR f2 <> (s.k IS NOT NULL) OR f3 <> (s.k IS NOT NULL);
		RETURN NEXT is(bad, 0::bigint, format('%s: cpht_find agrees on %s keys', label, cardinality(probe)));

		IF cur % 3 = 0 THEN
			-- a third of the keys, some twice, and absent keys
			SELECT array_agg(k ORDER BY random()) INTO del FROM (
				SELECT k FROM (SELECT k FROM seen ORDER BY random() LIMIT nseen / 3) AS d
				UNION ALL (SELECT k FROM seen ORDER BY random() LIMIT 50)
				UNION ALL SELECT pg_temp.r64() & mask FROM generate_series(1, 500)
			) AS x;
			SELECT coalesce(array_agg(k ORDER BY k), '{}') INTO expected
			FROM (SELECT DISTINCT k FROM unnest(del) AS k WHERE k IN (SELECT k FROM seen)) AS e;
			SELECT coalesce(array_agg(u.k ORDER BY u.k), '{}') INTO got
			FROM unnest(del, cpht_delete(hf, del)) AS u(k, r) WHERE r;
			SELECT coalesce(array_agg(u.k ORDER BY u.k), '{}') INTO got_n
			FROM unnest(del, cpht_delete(hn, del)) AS u(k, r) WHERE r;
			SELECT coalesce(array_agg(u.k ORDER BY u.k), '{}') INTO got_p
			FROM unnest(del, cpht_delete(hp, del)) AS u(k, r) WHERE r;
			RETURN NEXT ok(got = expected AND got_n = expected AND got_p = expected,
				format('%s: cpht_delete is true once for each present key (%s of %s)',
					   label, cardinality(expected), cardinality(del)));
			DELETE FROM seen WHERE k = ANY (del);
			SELECT count(*) INTO nseen FROM seen;
			RETURN NEXT is(ARRAY[cpht_count(hf), cpht_count(hn), cpht_count(hp)],
				ARRAY[nseen, nseen, nseen], format('%s: cpht_count after cpht_delete', label));
		END IF;
	END LOOP;

	SELECT array_agg(k) INTO arr FROM seen;
	RETURN NEXT ok(NOT EXISTS (SELECT 1 FROM unnest(cpht_find(hf, arr), cpht_find(hn, arr),
															cpht_find(hp, arr)) AS u(a, b, c)
							   WHERE NOT (a AND b AND c)),
		format('%s, key_bits %s: every key of the oracle is found at the end', kind, bits));

	PERFORM cpht_drop(hf), cpht_drop(hn), cpht_drop(hp);
END $$;

SELECT pg_temp.check_pass('iceberg', 64);
SELECT pg_temp.check_pass('cuckoo', 64);
SELECT pg_temp.check_pass('iceberg', 37);
SELECT pg_temp.check_pass('cuckoo', 37);

-- Without repeats the positions are exact: cpht_fop is true exactly at the
-- absent keys and cpht_fop_new keeps the input order.
CREATE FUNCTION pg_temp.check_order(kind text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	h int := cpht_create(100000, kind);
	h2 int := cpht_create(100000, kind);
	arr bigint[];
BEGIN
	PERFORM cpht_put(h, array_agg(g * 2)), cpht_put(h2, array_agg(g * 2))
	FROM generate_series(1, 20000) g;
	SELECT array_agg(g ORDER BY random()) INTO arr FROM generate_series(1, 40000) g;
	RETURN NEXT is(cpht_fop(h, arr), ARRAY(SELECT k % 2 = 1 OR k > 40000 FROM unnest(arr) AS k),
		kind || ': cpht_fop is true exactly at the absent keys of a batch without repeats');
	RETURN NEXT is(cpht_fop_new(h2, arr), ARRAY(SELECT k FROM unnest(arr) WITH ORDINALITY AS u(k, i)
												WHERE k % 2 = 1 OR k > 40000 ORDER BY i),
		kind || ': cpht_fop_new keeps the input order');
	PERFORM cpht_drop(h), cpht_drop(h2);
END $$;

SELECT pg_temp.check_order('iceberg');
SELECT pg_temp.check_order('cuckoo');

SELECT * FROM finish();
ROLLBACK;
