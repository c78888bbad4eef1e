-- Tables of narrow keys: key_bits 8, 37 and 64 on both kinds.  Narrower
-- keys make smaller slots; every key must satisfy 0 <= key < 2^key_bits.

CREATE TEMP TABLE t AS
	SELECT kind, bits, cpht_create(300, kind, bits) AS h
	FROM unnest(ARRAY['iceberg', 'cuckoo']) WITH ORDINALITY AS k(kind, n),
		unnest(ARRAY[8, 37, 64]) WITH ORDINALITY AS b(bits, m)
	ORDER BY n, m;
SELECT h, kind, bits, cpht_info(h)->>'key_bits' AS info_bits FROM t ORDER BY h;

-- the extremes of each domain
SELECT h, kind, bits,
	cpht_fop(h, ARRAY[0, (2::numeric ^ (bits - 1))::bigint, (2::numeric ^ bits - 1)::bigint])
FROM t WHERE bits < 64 ORDER BY h;
SELECT h, kind, bits, cpht_fop(h, '{0,4611686018427387904,9223372036854775807}')
FROM t WHERE bits = 64 ORDER BY h;

-- every 8-bit key fits in an 8-bit table of capacity 300
SELECT h, kind, cpht_put(h, array_agg(g)), cpht_count(h)
FROM t, generate_series(0, 255) g
WHERE bits = 8 GROUP BY h, kind ORDER BY h;
SELECT h, kind, cpht_count(h), cpht_fop(h, '{0,1,254,255}') FROM t WHERE bits = 8 ORDER BY h;

-- 37-bit keys spread over the whole domain
SELECT h, kind,
	cpht_put(h, array_agg(g::bigint * 457712211 % 137438953472))
FROM t, generate_series(1, 250) g
WHERE bits = 37 GROUP BY h, kind ORDER BY h;
SELECT h, kind, cpht_count(h),
	(SELECT count(*) FROM unnest(cpht_find(h, array_agg(g::bigint * 457712211 % 137438953472))) f WHERE f)
FROM t, generate_series(1, 260) g
WHERE bits = 37 GROUP BY h, kind ORDER BY h;

-- keys outside the domain: an error naming the first bad key, no change
SELECT cpht_fop(h, '{1,256,-1}') FROM t WHERE kind = 'iceberg' AND bits = 8;
SELECT cpht_find(h, '{1,-1,256}') FROM t WHERE kind = 'cuckoo' AND bits = 8;
SELECT cpht_put(h, '{137438953471,137438953472}') FROM t WHERE kind = 'iceberg' AND bits = 37;
SELECT cpht_delete(h, '[0:1]={5,-9223372036854775808}') FROM t WHERE kind = 'cuckoo' AND bits = 37;
SELECT cpht_fop_new(h, '{1,2,9223372036854775807}') FROM t WHERE kind = 'cuckoo' AND bits = 37;
SELECT h, kind, bits, cpht_count(h) FROM t ORDER BY h;

SELECT cpht_drop_all();
