-- cpht demo: deduplicating an ingest inside the database.
--
-- events holds what was loaded so far; staging receives the next batch,
-- which repeats ids already loaded and repeats ids within itself.  A cpht
-- table remembers every id seen, so each batch is filtered with one call
-- instead of a lookup per row in the events index.
\set ON_ERROR_STOP 1
\set QUIET on
\pset footer off
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS cpht;
DROP TABLE IF EXISTS events, staging;
SELECT setseed(0.2024) AS seeded \gset
\set QUIET off

\echo
\echo '== 1. a million events are already loaded'
CREATE TABLE events (id bigint PRIMARY KEY, payload text NOT NULL);
INSERT INTO events SELECT g * 7, 'old event ' || g FROM generate_series(1, 1000000) g;
SELECT count(*) AS events FROM events;

\echo
\echo '== 2. a cpht table remembers the ids seen (on the GPU where cpht.device allows)'
SELECT cpht_create(capacity => 5000000) AS h \gset
SELECT cpht_put(:h, array_agg(id)) AS ids_remembered FROM events;

\echo
\echo '== 3. the next batch arrives in staging: old ids, new ids, repeats'
CREATE TABLE staging AS
	SELECT (random() * 10000000)::bigint AS id, 'new event ' || g AS payload
	FROM generate_series(1, 1000000) g;
SELECT count(*) AS staged_rows, count(DISTINCT s.id) AS distinct_ids,
	count(e.id) AS rows_already_loaded
FROM staging s LEFT JOIN events e USING (id);

\echo
\echo '== 4. one cpht_fop call marks one row of every new id; only those rows are inserted'
WITH batch AS (
	SELECT array_agg(id) AS ids, array_agg(payload) AS payloads FROM staging
)
INSERT INTO events (id, payload)
SELECT u.id, u.payload
FROM batch, unnest(batch.ids, batch.payloads, cpht_fop(:h, batch.ids)) AS u(id, payload, is_new)
WHERE u.is_new;

\echo
\echo '== 5. the result is what PostgreSQL itself computes'
SELECT (SELECT count(*) FROM events) AS events,
	cpht_count(:h) AS ids_in_cpht,
	(SELECT count(*) FROM (SELECT id FROM events UNION SELECT id FROM staging) AS u) AS distinct_ids_overall;

\echo
\echo '== 6. the next batch: cpht_fop_new returns just the new ids'
TRUNCATE staging;
INSERT INTO staging
	SELECT (random() * 12000000)::bigint, 'newer event ' || g FROM generate_series(1, 200000) g;
CREATE TEMP TABLE new_ids AS
	SELECT unnest(cpht_fop_new(:h, array_agg(id))) AS id FROM staging;
INSERT INTO events (id, payload)
SELECT DISTINCT ON (id) id, payload FROM staging JOIN new_ids USING (id) ORDER BY id;
SELECT count(*) AS new_ids, (SELECT count(*) FROM events) AS events, cpht_count(:h) AS ids_in_cpht
FROM new_ids;

\echo
\echo '== 7. membership without inserting: cpht_find'
SELECT cpht_find(:h, ARRAY[7, 8, 14, -1]) AS "7, 8, 14, -1 seen?";

\echo
\echo '== 8. the table'
SELECT handle, kind, device, key_bits, count, pg_size_pretty(bytes) AS size FROM cpht_tables();
SELECT jsonb_pretty(cpht_info(:h)) AS info;

SELECT cpht_drop(:h);
DROP TABLE events, staging;
\echo '== done'
