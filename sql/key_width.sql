-- Tables created without key_bits: the slots follow the keys.  A new table
-- has 16-bit slots; each key pattern widens it to exactly the width of its
-- widest key (of its zigzag fold once negative keys came), in the
-- narrowest slots that hold that, and every answer is exact.

CREATE FUNCTION pg_temp.key_of(pattern text, i bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
	SELECT CASE pattern
		WHEN 'sequential' THEN 1000 + i
		WHEN 'strided' THEN i * 4096
		-- 41-bit milliseconds, worker 37, 12-bit sequence
		WHEN 'snowflake' THEN ((411165025343 + i / 4096) << 22) | (37 << 12) | (i % 4096)
		WHEN 'random' THEN hashint8extended(i, 42)
		WHEN 'negative' THEN -1 - i
	END
$$;

-- The narrowest slot width (16, 32, 64) for keys of `bits` bits in a level
-- of `buckets` buckets with `choice_bits` bits of hash choice, the last
-- choice being `last_choice`: the one whose largest slot fits.  A slot
-- holds remainder * 2^choice_bits + choice + 2 (0 and 1 mark empty and
-- deleted slots), and the largest remainder is (2^bits - 1) / buckets.
CREATE FUNCTION pg_temp.narrowest(bits int, buckets bigint, choice_bits int, last_choice int) RETURNS int
LANGUAGE sql IMMUTABLE AS $$
	SELECT CASE WHEN code < 2::numeric ^ 16 THEN 16 WHEN code < 2::numeric ^ 32 THEN 32 ELSE 64 END
	FROM (SELECT floor((2::numeric ^ bits - 1) / buckets) * 2::numeric ^ choice_bits + last_choice + 2 AS code) c
$$;

CREATE TEMP TABLE w AS
	SELECT kind, pattern, cpht_create(1000, kind) AS h
	FROM unnest(ARRAY['iceberg', 'cuckoo']) WITH ORDINALITY AS k(kind, n),
		unnest(ARRAY['sequential', 'strided', 'snowflake', 'random', 'negative']) WITH ORDINALITY AS p(pattern, m)
	ORDER BY n, m;

-- a new table: no key_bits in cpht_tables, the narrowest keys and slots
SELECT w.kind, pattern, t.key_bits AS declared, i->>'key_width' AS key_width, i->>'key_bits' AS key_bits,
	i->'levels'->0->>'slot_bits' AS slot_bits, i->>'signed_keys' AS signed_keys, i->>'widens' AS widens
FROM w JOIN cpht_tables() t ON t.handle = w.h, LATERAL cpht_info(w.h) AS i
ORDER BY h;

-- five batches of 40000 keys, each overlapping the one before by 10000
SELECT kind, pattern, b,
	cpht_put(h, ARRAY(SELECT pg_temp.key_of(pattern, g) FROM generate_series(greatest(b * 30000 - 10000, 0), b * 30000 + 29999) g)) AS put
FROM w, generate_series(0, 4) b ORDER BY h, b;

-- the same keys again: nothing new, the count exact, every key found, no other
SELECT kind, pattern,
	cardinality(cpht_fop_new(h, ARRAY(SELECT pg_temp.key_of(pattern, g) FROM generate_series(0, 149999) g))) AS new,
	cpht_count(h),
	(SELECT count(*) FROM unnest(cpht_find(h, ARRAY(SELECT pg_temp.key_of(pattern, g) FROM generate_series(0, 159999) g))) f WHERE f) AS found
FROM w ORDER BY h;

-- keys wider than the table are absent (and do not widen it)
SELECT kind, pattern, cpht_find(h, '{4611686018427387904,-4611686018427387904,-2}') AS wide,
	cpht_delete(h, '{4611686018427387904}') AS deleted
FROM w WHERE pattern IN ('sequential', 'strided') ORDER BY h;

-- the width of the widest key, the narrowest slots for it, and the bytes
-- those slots take
SELECT kind, pattern, (i->>'key_bits')::int AS key_bits, i->>'signed_keys' AS signed_keys,
	(i->>'widens')::int >= 1 AS widened,
	(i->>'slot_key_bits')::int >= (i->>'key_bits')::int AS slots_hold_keys,
	bool_and((l->>'slot_bits')::int = pg_temp.narrowest((i->>'key_bits')::int,
		(l->>'slots')::bigint / (l->>'bucket_slots')::int,
		CASE WHEN kind = 'cuckoo' THEN 2 WHEN o = 2 THEN 1 ELSE 0 END,
		CASE WHEN kind = 'cuckoo' THEN 2 WHEN o = 2 THEN 1 ELSE 0 END)) AS narrowest,
	sum((l->>'slots')::bigint * (l->>'slot_bits')::int / 8) = (i->>'bytes')::bigint AS bytes,
	(i->>'last_widen_ms')::float8 >= 0 AS timed
FROM w, LATERAL cpht_info(h) AS i, LATERAL jsonb_array_elements(i->'levels') WITH ORDINALITY AS lv(l, o)
GROUP BY h, kind, pattern, i ORDER BY h;

SELECT cpht_drop_all();

-- Widening inside savepoints that roll back: the keys are those before
-- each savepoint (deleted keys back, wider keys gone); the width stays.
CREATE TEMP TABLE s AS
	SELECT kind, cpht_create(1000, kind) AS h
	FROM unnest(ARRAY['iceberg', 'cuckoo']) WITH ORDINALITY AS k(kind, n) ORDER BY n;
BEGIN;
SELECT kind, cpht_put(h, ARRAY(SELECT generate_series(0, 19999)::bigint)) FROM s ORDER BY h;
SAVEPOINT a;
SELECT kind, cardinality(array_remove(cpht_delete(h, ARRAY(SELECT generate_series(0, 1999)::bigint)), false)) AS deleted
FROM s ORDER BY h;
SAVEPOINT b;
SELECT kind, cpht_put(h, ARRAY(SELECT (1::bigint << 40) + g FROM generate_series(0, 9999) g)) AS wide,
	cpht_info(h)->>'key_bits' AS key_bits FROM s ORDER BY h;
SELECT kind, cpht_put(h, ARRAY(SELECT -1 - g::bigint * 1000003 FROM generate_series(0, 9999) g)) AS negative,
	cpht_info(h)->>'key_bits' AS key_bits, cpht_info(h)->>'signed_keys' AS signed_keys FROM s ORDER BY h;
ROLLBACK TO SAVEPOINT b;
SELECT kind, cpht_count(h), cpht_info(h)->>'key_bits' AS key_bits,
	(SELECT count(*) FROM unnest(cpht_find(h, ARRAY(SELECT generate_series(0, 19999)::bigint))) f WHERE f) AS narrow,
	(SELECT count(*) FROM unnest(cpht_find(h, ARRAY(SELECT (1::bigint << 40) + g FROM generate_series(0, 9999) g))) f WHERE f) AS wide,
	(SELECT count(*) FROM unnest(cpht_find(h, ARRAY(SELECT -1 - g::bigint * 1000003 FROM generate_series(0, 9999) g))) f WHERE f) AS negative
FROM s ORDER BY h;
ROLLBACK TO SAVEPOINT a;
SELECT kind, cpht_count(h),
	(SELECT count(*) FROM unnest(cpht_find(h, ARRAY(SELECT generate_series(0, 19999)::bigint))) f WHERE f) AS narrow
FROM s ORDER BY h;
COMMIT;
SELECT kind, cpht_count(h) FROM s ORDER BY h;

-- a widening that rolls back whole, then the same keys again
BEGIN;
SELECT kind, cpht_put(h, '{-5,9223372036854775807}') FROM s ORDER BY h;
ROLLBACK;
SELECT kind, cpht_count(h), cpht_find(h, '{-5,9223372036854775807,19999}'),
	cpht_fop(h, '{-5,9223372036854775807}') FROM s ORDER BY h;

SELECT cpht_drop_all();

-- Bytes per key: 37-bit ids in a table without key_bits take a fraction of
-- the 8 bytes and more of a table declared with key_bits 64.
CREATE TEMP TABLE b AS
	SELECT kind, bits, cpht_create(1000, kind, bits) AS h
	FROM unnest(ARRAY['iceberg', 'cuckoo']) WITH ORDINALITY AS k(kind, n),
		unnest(ARRAY[NULL, 64]) WITH ORDINALITY AS d(bits, m)
	ORDER BY n, m;
SELECT kind, bits, cpht_put(h, ARRAY(SELECT g::bigint * 457712211 % 137438953472 FROM generate_series(1, 400000) g))
FROM b ORDER BY h;
SELECT a.kind, (ia->>'key_bits')::int AS key_bits, ia->'levels'->0->>'slot_bits' AS slot_bits,
	(ia->>'bytes_per_key')::float8 < 0.6 * (i64->>'bytes_per_key')::float8 AS compact,
	(i64->>'bytes_per_key')::float8 > 8 AS declared_64_over_8
FROM b a JOIN b d ON d.kind = a.kind AND d.bits = 64,
	LATERAL cpht_info(a.h) AS ia, LATERAL cpht_info(d.h) AS i64
WHERE a.bits IS NULL ORDER BY a.h;

SELECT cpht_drop_all();
