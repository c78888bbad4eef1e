-- Streaming: the aggregate cpht_fop_agg(handle, key) and the set-returning
-- cpht_fop_rows(handle, NULL::rowtype, query, key_column).  Small batches
-- (cpht.batch_size 1024, its minimum) make a few thousand rows several
-- batches, so batches overlap and keys repeat across batches.

SET cpht.batch_size = 1024;
SHOW cpht.batch_size;

-- 6000 rows, 4001 distinct ids spread over every batch; a row's payload
-- depends on its id only, so whichever row of an id comes back is the same.
CREATE TEMP TABLE staging AS
	SELECT ((g * 7919) % 4001)::bigint AS id, 'payload ' || ((g * 7919) % 4001) AS payload
	FROM generate_series(1, 6000) g;
SELECT count(*), count(DISTINCT id) FROM staging;

-- cpht_fop_agg returns how many keys were new, like count(DISTINCT)
SELECT cpht_create(10000) AS h \gset
SELECT cpht_fop_agg(:h, id) AS new, (SELECT count(DISTINCT id) FROM staging) AS distinct_ids
FROM staging;
SELECT cpht_count(:h);
-- the second time nothing is new
SELECT cpht_fop_agg(:h, id) FROM staging;
-- keys partly known: only the unknown ones count
SELECT cpht_fop_agg(:h, id + 3000) AS new,
	(SELECT count(DISTINCT id + 3000) FROM staging WHERE id + 3000 > 4000) AS expected
FROM staging;
SELECT cpht_count(:h);

-- NULL keys are skipped, as count(key) skips them
SELECT cpht_create(10000) AS hn \gset
SELECT cpht_fop_agg(:hn, CASE WHEN g % 3 = 0 THEN NULL ELSE g END) AS new,
	count(CASE WHEN g % 3 = 0 THEN NULL ELSE g END) AS non_null
FROM generate_series(1, 3000) g;
SELECT cpht_fop_agg(:hn, NULL::bigint) FROM generate_series(1, 10);
SELECT cpht_count(:hn);

-- no rows at all: 0, and the table is unchanged
SELECT cpht_fop_agg(:hn, id) FROM staging WHERE false;
SELECT cpht_count(:hn);

-- one group per handle: each table gets its own keys
CREATE TEMP TABLE tabs AS
	SELECT kind, cpht_create(20000, kind) AS h, n
	FROM unnest(ARRAY['iceberg', 'cuckoo', 'iceberg']) WITH ORDINALITY AS k(kind, n);
SELECT t.kind, cpht_fop_agg(t.h, s.id * t.n) AS new, count(DISTINCT s.id * t.n) AS distinct_ids
FROM tabs t CROSS JOIN staging s GROUP BY t.h, t.kind ORDER BY t.h;
SET enable_sort = off;
SELECT t.kind, cpht_fop_agg(t.h, s.id * t.n + 50000) AS new,
	count(DISTINCT s.id * t.n + 50000) AS distinct_ids
FROM tabs t CROSS JOIN staging s GROUP BY t.h, t.kind ORDER BY t.h;
RESET enable_sort;
SELECT kind, cpht_count(h) FROM tabs ORDER BY h;

-- keys outside key_bits
SELECT cpht_create(10000, 'iceberg', 12) AS h12 \gset
SELECT cpht_fop_agg(:h12, g) FROM generate_series(4000, 4100) g;
SELECT cpht_count(:h12);

-- cpht_fop_rows: the rows whose key is new, each new key once
CREATE TEMP TABLE events (LIKE staging);
SELECT cpht_create(10000) AS r \gset
SELECT cpht_put(:r, '{0,1,2,3,4,5,6,7,8,9}');
INSERT INTO events SELECT * FROM cpht_fop_rows(:r, NULL::staging, 'SELECT * FROM staging');
SELECT count(*) AS rows, count(DISTINCT id) AS ids, min(id), max(id) FROM events;
-- exactly the distinct rows of staging less the known keys
SELECT count(*) AS missing FROM (
	(SELECT DISTINCT ON (id) id, payload FROM staging WHERE id >= 10 ORDER BY id)
	EXCEPT ALL SELECT id, payload FROM events) d;
SELECT count(*) AS extra FROM (
	SELECT id, payload FROM events
	EXCEPT ALL (SELECT DISTINCT ON (id) id, payload FROM staging WHERE id >= 10 ORDER BY id)) d;
SELECT cpht_count(:r);
-- the second run finds nothing new
INSERT INTO events SELECT * FROM cpht_fop_rows(:r, NULL::staging, 'SELECT * FROM staging');
SELECT count(*) FROM cpht_fop_rows(:r, NULL::staging, 'SELECT * FROM staging');
-- new rows among old ones
INSERT INTO staging VALUES (5000, 'late'), (5001, 'late'), (5000, 'late'), (3, 'payload 3');
INSERT INTO events SELECT * FROM cpht_fop_rows(:r, NULL::staging, 'SELECT * FROM staging');
SELECT * FROM events WHERE id >= 4001 ORDER BY id;
DELETE FROM staging WHERE id >= 5000;

-- another key column, named with key_column
CREATE TEMP TABLE staging2 (body text, event_id bigint, seq int);
INSERT INTO staging2 SELECT 'b' || (g % 1500), g % 1500, 0 FROM generate_series(1, 2500) g;
SELECT cpht_create(10000) AS r2 \gset
SELECT count(*), count(DISTINCT event_id)
FROM cpht_fop_rows(:r2, NULL::staging2, 'SELECT * FROM staging2', key_column => 'event_id');
SELECT count(*)
FROM cpht_fop_rows(:r2, NULL::staging2, 'SELECT * FROM staging2', 'event_id');
-- any query whose columns match the row type
SELECT count(*)
FROM cpht_fop_rows(:r2, NULL::staging2,
	'SELECT ''x'' || g, g::bigint + 100000 AS k, 1 FROM generate_series(1, 1500) g',
	key_column => 'k');

-- errors
\set VERBOSITY default
-- no column of that name
SELECT * FROM cpht_fop_rows(:r, NULL::staging, 'SELECT id AS key, payload FROM staging');
SELECT * FROM cpht_fop_rows(:r2, NULL::staging2, 'SELECT * FROM staging2');
-- the key column is not bigint
SELECT * FROM cpht_fop_rows(:r, NULL::staging, 'SELECT id::int AS id, payload FROM staging');
-- the query's columns are not the row type's
SELECT * FROM cpht_fop_rows(:r, NULL::staging, 'SELECT payload, id FROM staging');
SELECT * FROM cpht_fop_rows(:r, NULL::staging, 'SELECT id FROM staging');
SELECT * FROM cpht_fop_rows(:r, NULL::staging, 'SELECT id, payload, 1 FROM staging');
-- a NULL key
SELECT * FROM cpht_fop_rows(:r, NULL::staging,
	'SELECT * FROM staging UNION ALL SELECT NULL, ''no key''');
-- a key outside key_bits
SELECT count(*) FROM cpht_fop_rows(:h12, NULL::staging, 'SELECT id + 100 AS id, payload FROM staging');
-- not a query
SELECT * FROM cpht_fop_rows(:r, NULL::staging, 'DELETE FROM staging');
SELECT * FROM cpht_fop_rows(:r, NULL::staging, 'INSERT INTO staging VALUES (1) RETURNING *');
SELECT * FROM cpht_fop_rows(:r, NULL::staging, 'SELECT * INTO staging_copy FROM staging');
-- an unknown handle
SELECT * FROM cpht_fop_rows(12345, NULL::staging, 'SELECT * FROM staging');
SELECT cpht_fop_agg(12345, id) FROM staging;
-- none of the failing calls left a key behind
SELECT cpht_count(:r), cpht_count(:r2), cpht_count(:h12);

-- streaming follows the transaction
CREATE TEMP TABLE staging3 AS
	SELECT g::bigint + 100000 AS id, 'payload ' || g AS payload FROM generate_series(1, 3000) g;
BEGIN;
INSERT INTO events SELECT * FROM cpht_fop_rows(:r, NULL::staging, 'SELECT * FROM staging3');
SELECT cpht_count(:r);
ROLLBACK;
SELECT cpht_count(:r), cpht_find(:r, '{100001,101500,103000}');
SELECT count(*) FROM events WHERE id > 100000;
BEGIN;
SELECT cpht_fop_agg(:r, id) FROM staging3;
ROLLBACK;
SELECT cpht_count(:r);
-- a stream that fails in its third batch leaves none of its keys
\set VERBOSITY terse
INSERT INTO events SELECT * FROM cpht_fop_rows(:r, NULL::staging,
	'SELECT * FROM staging3 UNION ALL SELECT NULL, ''no key''');
SELECT cpht_fop_agg(:r, CASE WHEN id = 102500 THEN NULL ELSE id END), 1 / (count(*) - 3000)
FROM staging3;
\set VERBOSITY default
SELECT cpht_count(:r), cpht_find(:r, '{100001,101500,103000}');
-- and a committed one stays
INSERT INTO events SELECT * FROM cpht_fop_rows(:r, NULL::staging, 'SELECT * FROM staging3');
SELECT cpht_count(:r), count(*) FILTER (WHERE id > 100000) FROM events;

RESET cpht.batch_size;
SELECT cpht_drop_all();
