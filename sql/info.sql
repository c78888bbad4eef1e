-- Introspection: cpht_info(), cpht_tables(), cpht_drop(), cpht_drop_all().
-- Only what is the same on every device and machine is shown.

SELECT cpht_drop_all();
SELECT * FROM cpht_tables();

-- (a table without key_bits follows its keys' width: sql/key_width.sql)
SELECT cpht_create(1000, key_bits => 64) AS a, cpht_create(5000, 'cuckoo', 64) AS b,
	cpht_create(200, 'iceberg', 20) AS c \gset
SELECT cpht_put(:a, array_agg(g)) FROM generate_series(1, 900) g;
SELECT cpht_put(:b, array_agg(g::bigint * 1000003)) FROM generate_series(1, 4000) g;
SELECT cpht_delete(:a, array_agg(g)) FROM generate_series(1, 100) g \gset d_

SELECT handle, kind, key_bits, count, bytes > 0 AS has_bytes,
	device IN ('cpu', 'gpu') AS device_ok
FROM cpht_tables() ORDER BY handle;

-- the keys of cpht_info and of each level
SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(cpht_info(:a)) k;
SELECT array_agg(k ORDER BY k)
FROM jsonb_object_keys(cpht_info(:a)->'levels'->0) k;

-- levels: iceberg has two, cuckoo one; every live slot holds one key
SELECT h, i->>'kind' AS kind, (i->>'key_bits')::int AS key_bits,
	(i->>'count')::bigint AS count, (i->>'capacity')::bigint AS capacity,
	jsonb_array_length(i->'levels') AS levels,
	(SELECT sum((l->>'live')::bigint) FROM jsonb_array_elements(i->'levels') l)
		+ (i->>'stashed')::bigint = (i->>'count')::bigint AS live_is_count,
	(SELECT sum((l->>'slots')::bigint) FROM jsonb_array_elements(i->'levels') l)
		>= (i->>'capacity')::bigint AS room_for_capacity,
	(SELECT bool_and((l->>'fill')::float8 BETWEEN 0 AND 1
					 AND (l->>'bucket_slots')::int IN (4, 8, 16, 32)
					 AND (l->>'slot_bits')::int IN (16, 32, 64))
	 FROM jsonb_array_elements(i->'levels') l) AS levels_ok,
	(i->>'bytes')::bigint = (SELECT bytes FROM cpht_tables() WHERE handle = h) AS bytes_match,
	(i->>'device') = (SELECT device FROM cpht_tables() WHERE handle = h) AS device_match,
	(i->>'staging_bytes')::bigint >= 0 AS staging_ok,
	jsonb_typeof(i->'device_name') AS device_name
FROM (VALUES (:a), (:b), (:c)) AS v(h), LATERAL cpht_info(h) AS i
ORDER BY h;

-- deletes leave tombstones, counted apart from live slots
SELECT (SELECT sum((l->>'tombstones')::bigint) FROM jsonb_array_elements(cpht_info(:a)->'levels') l)
	AS tombstones;

-- 20-bit keys need narrower slots than 64-bit keys
SELECT (SELECT max((l->>'slot_bits')::int) FROM jsonb_array_elements(cpht_info(:c)->'levels') l)
	< (SELECT max((l->>'slot_bits')::int) FROM jsonb_array_elements(cpht_info(:a)->'levels') l)
	AS narrower;

-- dropping
SELECT cpht_drop(:b);
SELECT handle, kind, count FROM cpht_tables() ORDER BY handle;
SELECT cpht_create(10) AS e \gset
-- handles are never reused
SELECT :e AS new_handle;
SELECT handle, kind, count FROM cpht_tables() ORDER BY handle;
SELECT cpht_drop_all();
SELECT cpht_drop_all();
SELECT count(*) FROM cpht_tables();
