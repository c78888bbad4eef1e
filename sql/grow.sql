-- Tables grow: cpht_create(1000) takes a million keys, each of them new
-- exactly once and then found, and cpht_info tells how the table grew.

CREATE TEMP TABLE g AS
	SELECT kind, cpht_create(1000, kind) AS h
	FROM unnest(ARRAY['iceberg', 'cuckoo']) WITH ORDINALITY AS k(kind, n)
	ORDER BY n;
SELECT kind, (cpht_info(h)->>'grows')::int AS grows, cpht_info(h)->'last_grow_at' AS last_grow_at,
	cpht_info(h)->>'initial_slots' = ((cpht_info(h)->'levels'->0->>'slots')::bigint +
		coalesce((cpht_info(h)->'levels'->1->>'slots')::bigint, 0))::text AS initial
FROM g ORDER BY h;

-- ten batches of 100000 keys, each overlapping the one before by 10000:
-- every batch puts 100000 new keys
SELECT kind, b, cpht_put(h, ARRAY(SELECT generate_series(greatest(b * 100000 - 10000, 0), (b + 1) * 100000 - 1)::bigint)) AS put
FROM g, generate_series(0, 9) b ORDER BY h, b;

-- the same keys through cpht_fop_new: nothing new; the count is exact
SELECT kind, cardinality(cpht_fop_new(h, ARRAY(SELECT generate_series(0, 999999)::bigint))) AS new, cpht_count(h)
FROM g ORDER BY h;

-- every key is found, no other
SELECT kind, count(*) FILTER (WHERE f) AS found, count(*) FILTER (WHERE NOT f) AS not_found
FROM g, LATERAL unnest(cpht_find(h, ARRAY(SELECT generate_series(0, 1099999)::bigint))) AS f
GROUP BY h, kind ORDER BY h;

-- how it grew: a few times, to slots that follow the keys
SELECT kind,
	(i->>'grows')::int BETWEEN 1 AND 30 AS grew,
	(i->>'initial_slots')::bigint < (i->'levels'->0->>'slots')::bigint AS larger,
	(i->>'last_grow_ms')::float8 >= 0 AS timed,
	(i->>'last_grow_at')::timestamptz BETWEEN now() - interval '1 hour' AND clock_timestamp() AS recent,
	abs((i->>'bytes_per_key')::float8 - (i->>'bytes')::float8 / 1000000) < 0.001 AS bytes_per_key,
	1000000.0 / ((i->'levels'->0->>'slots')::bigint + coalesce((i->'levels'->1->>'slots')::bigint, 0))
		BETWEEN 0.4 AND 0.92 AS fill_tracks_keys
FROM g, LATERAL cpht_info(h) AS i ORDER BY h;

-- a transaction that grew the table and rolls back keeps the keys it had
CREATE TEMP TABLE before AS SELECT h, (cpht_info(h)->>'grows')::int AS grows FROM g;
BEGIN;
SELECT kind, cpht_put(h, ARRAY(SELECT generate_series(10000000, 11999999)::bigint)) FROM g ORDER BY h;
SELECT kind, (cpht_info(g.h)->>'grows')::int > b.grows AS grew_again FROM g JOIN before b USING (h) ORDER BY h;
ROLLBACK;
SELECT kind, cpht_count(h),
	(SELECT count(*) FROM unnest(cpht_find(h, ARRAY(SELECT generate_series(10000000, 10099999)::bigint))) f WHERE f) AS rolled_back_found
FROM g ORDER BY h;

SELECT cpht_drop_all();
