-- A table that runs out of room: the failing call raises an error and
-- leaves the table exactly as it was (no key of that call stays), and the
-- table keeps working afterwards.  Tables grow unless cpht.grow is off:
-- these keep the size they were created with.
SET cpht.grow = off;

CREATE TEMP TABLE t AS
	SELECT kind, cpht_create(10, kind) AS h
	FROM unnest(ARRAY['iceberg', 'cuckoo']) WITH ORDINALITY AS k(kind, n)
	ORDER BY n;
SELECT kind, cpht_put(h, '{1,2,3,4,5,-5,9223372036854775807}') FROM t ORDER BY h;

-- far more keys than any table of capacity 10 holds, old keys among them
\set VERBOSITY terse
SELECT cpht_fop(h, array_agg(g)) FROM t, generate_series(-100, 20000) g
WHERE kind = 'iceberg' GROUP BY h;
SELECT cpht_fop(h, array_agg(g)) FROM t, generate_series(-100, 20000) g
WHERE kind = 'cuckoo' GROUP BY h;
SELECT cpht_fop_new(h, array_agg(g)) FROM t, generate_series(-100, 20000) g
WHERE kind = 'iceberg' GROUP BY h;
SELECT cpht_fop_new(h, array_agg(g)) FROM t, generate_series(-100, 20000) g
WHERE kind = 'cuckoo' GROUP BY h;
SELECT cpht_put(h, array_agg(g)) FROM t, generate_series(-100, 20000) g
WHERE kind = 'iceberg' GROUP BY h;
SELECT cpht_put(h, array_agg(g)) FROM t, generate_series(-100, 20000) g
WHERE kind = 'cuckoo' GROUP BY h;
\set VERBOSITY default

-- the same error in full: detail and hint, from a table of one shard
-- whatever cpht.shards says (the detail counts the keys placed before the
-- one that found no room, which follows the layout, and a sharded table's
-- names the shard); nothing of the call stays
SELECT cpht_create(10, 'iceberg', shards => 1) AS one \gset
SELECT cpht_put(:one, '{1,2,3,4,5,-5,9223372036854775807}');
SELECT cpht_put(:one, array_agg(g * 7919)) FROM generate_series(1, 50000) g;
SELECT cpht_count(:one);

-- nothing of the failed calls stayed: the old keys, and only those
SELECT kind, cpht_count(h) FROM t ORDER BY h;
SELECT kind, cpht_find(h, '{1,2,3,4,5,-5,9223372036854775807}') FROM t ORDER BY h;
SELECT kind, count(*) FILTER (WHERE f) AS found
FROM t, LATERAL (SELECT array_agg(g) AS keys FROM generate_series(-100, 20000) g) AS b,
	LATERAL unnest(cpht_find(h, b.keys)) AS f
GROUP BY h, kind ORDER BY h;

-- the table still works
SELECT kind, cpht_fop(h, '{1,6,7,-5,8}') FROM t ORDER BY h;
SELECT kind, cpht_count(h) FROM t ORDER BY h;
SELECT kind, cpht_delete(h, '{6,7}') FROM t ORDER BY h;
SELECT kind, cpht_count(h) FROM t ORDER BY h;

SELECT cpht_drop_all();
RESET cpht.grow;
