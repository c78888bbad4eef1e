-- Streaming (cpht_fop_agg, cpht_fop_rows) against PostgreSQL as the oracle,
-- for both kinds and batch sizes that do and do not divide the row count;
-- and the problems found while writing them, now fixed.
BEGIN;
SELECT plan(1 + 2 * 4 * 3 + 5);

-- ---- known problem: memory of a dropped table ---------------------------
-- A drop frees the table's memory only at commit, but cpht.max_memory stops
-- counting it at once, so one transaction that drops and creates tables
-- holds more than cpht.max_memory.  First in this file: no other table may
-- be pending a drop here.
SELECT cpht_create(100000) AS mm \gset
SELECT set_config('cpht.max_memory', ((SELECT bytes FROM cpht_tables() WHERE handle = :mm) * 3 / 2 / 1024)::text, true)
	IS NOT NULL AS set \gset
SELECT cpht_drop(:mm) IS NOT NULL AS dropped \gset
SELECT throws_ok('SELECT cpht_create(100000)', '53400', NULL,
	'a table dropped in this transaction still counts against cpht.max_memory');
RESET cpht.max_memory;

SELECT setseed(0.31);

-- 10000 rows, about 6300 distinct ids, repeats near and far apart
CREATE TEMP TABLE src AS
	SELECT (floor(random() * 10000) * 1000003)::bigint AS id, g AS seq
	FROM generate_series(1, 10000) g;
CREATE TEMP TABLE src_rows (id bigint, payload text);
INSERT INTO src_rows SELECT id, 'p' || id FROM src ORDER BY seq;

CREATE FUNCTION pg_temp.stream_checks(kind text, batch int) RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
	h int;
	n bigint;
	bad bigint;
	what text := format('%s, batch_size %s', kind, batch);
BEGIN
	PERFORM set_config('cpht.batch_size', batch::text, true);
	-- the aggregate, with a fifth of the keys known beforehand
	h := cpht_create(20000, kind);
	PERFORM cpht_put(h, ARRAY(SELECT DISTINCT id FROM src WHERE id % 5 = 0));
	SELECT cpht_fop_agg(h, id ORDER BY seq) INTO n FROM src;
	RETURN NEXT is(n, (SELECT count(DISTINCT id) FROM src WHERE id % 5 <> 0),
				   what || ': cpht_fop_agg counts the new keys');
	RETURN NEXT is(cpht_count(h), (SELECT count(DISTINCT id) FROM src),
				   what || ': and puts them all');
	-- the rows
	h := cpht_create(20000, kind);
	PERFORM cpht_put(h, ARRAY(SELECT DISTINCT id FROM src WHERE id % 5 = 0));
	SELECT count(*) INTO bad FROM (
		(SELECT * FROM cpht_fop_rows(h, NULL::src_rows, 'SELECT * FROM src_rows')
		 EXCEPT ALL SELECT DISTINCT id, payload FROM src_rows WHERE id % 5 <> 0)
		UNION ALL
		(SELECT DISTINCT id, payload FROM src_rows WHERE id % 5 <> 0
		 EXCEPT ALL SELECT * FROM cpht_fop_rows(h, NULL::src_rows, 'SELECT * FROM src_rows'))) d;
	-- the second cpht_fop_rows above finds nothing new: every distinct new
	-- row of the first is "missing" from it, so count that out
	RETURN NEXT is(bad, (SELECT count(DISTINCT id) FROM src WHERE id % 5 <> 0),
				   what || ': cpht_fop_rows returns each new key''s row once, then none');
END $$;

SELECT pg_temp.stream_checks(kind, batch)
FROM unnest(ARRAY['iceberg', 'cuckoo']) AS kind,
	 unnest(ARRAY[1024, 1500, 4096, 1048576]) AS batch;

-- ---- known problems ---------------------------------------------------
SET LOCAL cpht.batch_size = 1024;

-- A stream that fails while a batch is in flight leaves that batch's result
-- behind; the next stream on the table counts it as its own.
SELECT cpht_create(100000, 'iceberg', 20) AS stale \gset
SELECT throws_ok(format('SELECT cpht_fop_agg(%s, CASE WHEN g = 1500 THEN -1 ELSE g END) FROM generate_series(1, 2000) g', :stale),
	'22003', NULL, 'a stream that fails in its second batch');
SELECT is((SELECT cpht_fop_agg(:stale, g) FROM generate_series(5000, 5010) g), 11::bigint,
	'the next stream counts only its own new keys');

-- Several aggregates on one table in one query (hash aggregation, or two
-- aggregates in one SELECT) pick up each other's batches.
SELECT cpht_create(100000) AS shared \gset
SELECT cpht_put(:shared, array_agg(g)) IS NOT NULL AS seeded FROM generate_series(0, 5000, 2) g \gset
SET LOCAL enable_sort = off;	-- hash aggregation: the groups' states interleave
SELECT is(
	ARRAY(SELECT n FROM (SELECT g % 2 AS odd, cpht_fop_agg(:shared, g) AS n
						 FROM generate_series(1, 5000) g GROUP BY 1) s ORDER BY odd),
	ARRAY[0, 2500]::bigint[], 'GROUP BY over one table: each group counts its own new keys');
SELECT is(
	(SELECT ARRAY[cpht_fop_agg(:shared, g), cpht_fop_agg(:shared, g + 100000)]
	 FROM generate_series(1, 3000) g),
	ARRAY[0, 3000]::bigint[], 'two aggregates over one table in one SELECT');
RESET enable_sort;

-- A row type with a dropped column has a dropped attribute that the query's
-- columns do not have.
CREATE TEMP TABLE with_dropped (id bigint, junk int, payload text);
INSERT INTO with_dropped VALUES (1, 0, 'a');
ALTER TABLE with_dropped DROP COLUMN junk;
SELECT lives_ok(format('SELECT * FROM cpht_fop_rows(%s, NULL::with_dropped, %L)',
					   cpht_create(100), 'SELECT * FROM with_dropped'),
	'a row type with a dropped column');

SELECT cpht_drop_all() >= 0 AS clean \gset
SELECT * FROM finish();
ROLLBACK;
