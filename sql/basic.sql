-- Every batch function on both kinds of table: find-or-put, find, put,
-- delete, count, and the edge values of the bigint domain.
--
-- A key repeated inside one batch is reported new at one of its occurrences,
-- not necessarily the first, so batches with repeats are checked per key
-- (how many occurrences, how many reported new) rather than per position.

CREATE TEMP TABLE t AS
	SELECT kind, cpht_create(1000, kind) AS h
	FROM unnest(ARRAY['iceberg', 'cuckoo']) WITH ORDINALITY AS k(kind, n)
	ORDER BY n;
SELECT kind, h, cpht_count(h) FROM t ORDER BY h;

-- distinct keys, edge values included: every one is new, in input order
SELECT kind, cpht_fop(h, '{0,-1,9223372036854775807,-9223372036854775808,1,42}')
FROM t ORDER BY h;
SELECT kind, cpht_count(h) FROM t ORDER BY h;

-- the same keys again: none is new
SELECT kind, cpht_fop(h, '{42,1,-9223372036854775808,9223372036854775807,-1,0}')
FROM t ORDER BY h;
SELECT kind, cpht_count(h) FROM t ORDER BY h;

-- a mix of present and absent keys
SELECT kind, cpht_fop(h, '{0,100,-1,-100,101}') FROM t ORDER BY h;
SELECT kind, cpht_count(h) FROM t ORDER BY h;

-- repeats inside one batch: each absent key is new exactly once
SELECT t.kind, u.key, count(*) AS occurrences, count(*) FILTER (WHERE u.new) AS new
FROM t,
	LATERAL (SELECT '{7,8,7,7,0,8,9223372036854775806,9223372036854775806}'::bigint[] AS keys) AS b,
	LATERAL unnest(b.keys, cpht_fop(t.h, b.keys)) AS u(key, new)
GROUP BY t.h, t.kind, u.key
ORDER BY t.h, u.key;
SELECT kind, cpht_count(h) FROM t ORDER BY h;

-- find: membership only, nothing changes
SELECT kind, cpht_find(h, '{0,7,8,9,-1,-2,9223372036854775807,-9223372036854775807}')
FROM t ORDER BY h;
SELECT kind, cpht_count(h) FROM t ORDER BY h;

-- fop_new: only the new keys, in input order
SELECT kind, cpht_fop_new(h, '{200,0,201,-9223372036854775808,202,-202}') FROM t ORDER BY h;
SELECT kind, cpht_fop_new(h, '{200,0,201}') FROM t ORDER BY h;
-- with repeats the set is exact, the order follows whichever occurrence won
SELECT kind, ARRAY(SELECT unnest(cpht_fop_new(h, '{300,301,300,201,301,302}')) ORDER BY 1)
FROM t ORDER BY h;
SELECT kind, cpht_count(h) FROM t ORDER BY h;

-- put: how many keys were absent (repeats count once)
SELECT kind, cpht_put(h, '{400,401,400,0,-1,402,402,402}') FROM t ORDER BY h;
SELECT kind, cpht_put(h, '{400,401,402}') FROM t ORDER BY h;
SELECT kind, cpht_count(h) FROM t ORDER BY h;

-- delete: true where the key was present and is gone now
SELECT kind, cpht_delete(h, '{400,999,-9223372036854775808,0,123456}') FROM t ORDER BY h;
SELECT kind, cpht_count(h) FROM t ORDER BY h;
SELECT kind, cpht_find(h, '{400,-9223372036854775808,0,401}') FROM t ORDER BY h;
SELECT kind, cpht_delete(h, '{400,-9223372036854775808,0}') FROM t ORDER BY h;
-- deleted keys can come back
SELECT kind, cpht_fop(h, '{400,-9223372036854775808,0,401}') FROM t ORDER BY h;
SELECT kind, cpht_count(h) FROM t ORDER BY h;
-- a key repeated in one delete is deleted once
SELECT kind, (SELECT count(*) FILTER (WHERE d) FROM unnest(cpht_delete(h, '{401,401,401}')) AS d)
FROM t ORDER BY h;
SELECT kind, cpht_count(h) FROM t ORDER BY h;

-- empty arrays: empty results, nothing changes
SELECT kind, cpht_fop(h, '{}'), cpht_fop_new(h, '{}'), cpht_find(h, '{}'),
	cpht_put(h, '{}'), cpht_delete(h, '{}'), cpht_count(h)
FROM t ORDER BY h;

-- NULL arguments give NULL (the functions are strict)
SELECT kind, cpht_fop(h, NULL) IS NULL, cpht_fop_new(h, NULL) IS NULL,
	cpht_find(h, NULL) IS NULL, cpht_put(h, NULL) IS NULL,
	cpht_delete(h, NULL) IS NULL, cpht_count(NULL) IS NULL,
	cpht_info(NULL) IS NULL
FROM t ORDER BY h;
SELECT cpht_fop(NULL, '{1}') IS NULL AS fop, cpht_create(NULL) IS NULL AS create;

-- arrays with any lower bound; results always start at 1
SELECT kind, cpht_fop(h, '[0:2]={500,501,500}'::bigint[]) IS NOT NULL AS ok,
	cpht_find(h, '[-5:-3]={500,501,502}'::bigint[])
FROM t ORDER BY h;
SELECT array_lower(cpht_find(h, '[7:8]={1,2}'::bigint[]), 1) FROM t ORDER BY h;

-- keys straight from a query, the way ingests use it
SELECT kind, cpht_put(h, array_agg(g)) FROM t, generate_series(1, 600) g
GROUP BY h, kind ORDER BY h;
SELECT kind, cpht_count(h),
	(SELECT count(*) FROM unnest(cpht_find(h, array_agg(g))) f WHERE f)
FROM t, generate_series(-10, 610) g
GROUP BY h, kind ORDER BY h;

SELECT cpht_drop_all();
