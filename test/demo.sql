-- cpht demo: deduplicating an ingest inside the database, the way the
-- README recommends.
--
-- events holds what was loaded so far; staging receives the next batch,
-- which repeats ids already loaded and repeats ids within itself.  A shared
-- cpht table, opened by name from any session, remembers every id seen;
-- cpht_insert_new inserts the rows of staging whose id is new with one
-- call, where INSERT ... ON CONFLICT DO NOTHING probes the primary key once
-- per row.  Needs cpht in shared_preload_libraries (test/run-demo.sh starts
-- such a server).
\set ON_ERROR_STOP 1
\set QUIET on
\pset footer off
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS cpht;
DROP TABLE IF EXISTS events, events_pg, staging;
SELECT setseed(0.2024) AS seeded \gset
\set QUIET off

\echo
\echo '== 1. a million events are already loaded (events, primary key on id)'
CREATE TABLE events (id bigint PRIMARY KEY, payload text NOT NULL);
INSERT INTO events SELECT g * 5, 'old event ' || g FROM generate_series(1, 1000000) g;
-- the same rows for PostgreSQL's own way, so that both start alike
CREATE TABLE events_pg (id bigint PRIMARY KEY, payload text NOT NULL);
INSERT INTO events_pg SELECT * FROM events;
\set QUIET on
VACUUM ANALYZE events;
VACUUM ANALYZE events_pg;
\set QUIET off

\echo
\echo '== 2. a shared cpht table of the ids seen, by name, seeded from events'
-- once, outside a transaction block; any session opens it with cpht_open
SELECT cpht_create(capacity => 5000000, name => 'seen_ids') > 0 AS created;
SELECT cpht_fop_relation(cpht_open('seen_ids'), 'events') AS ids_seeded;

\echo
\echo '== 3. the next batch arrives in staging: old ids, new ids, repeats'
CREATE TABLE staging (id bigint NOT NULL, payload text NOT NULL);
INSERT INTO staging
	SELECT (random() * 10000000)::bigint, 'new event ' || g FROM generate_series(1, 1000000) g;
\set QUIET on
VACUUM ANALYZE staging;
\set QUIET off
SELECT count(*) AS staged_rows, count(DISTINCT s.id) AS distinct_ids,
	count(e.id) AS rows_already_loaded
FROM staging s LEFT JOIN events e USING (id);

\echo
\echo '== 4. the batch both ways, timed: cpht_insert_new, then ON CONFLICT DO NOTHING'
SELECT clock_timestamp() AS t0 \gset
SELECT cpht_insert_new(cpht_open('seen_ids'), source => 'staging', target => 'events') AS cpht_rows \gset
SELECT clock_timestamp() AS t1 \gset
INSERT INTO events_pg SELECT * FROM staging ON CONFLICT (id) DO NOTHING;
SELECT clock_timestamp() AS t2 \gset
SELECT :'cpht_rows'::bigint AS "cpht_insert_new rows",
	round(extract(epoch FROM :'t1'::timestamptz - :'t0'::timestamptz), 2) AS "cpht s",
	(SELECT count(*) FROM events_pg) - 1000000 AS "ON CONFLICT rows",
	round(extract(epoch FROM :'t2'::timestamptz - :'t1'::timestamptz), 2) AS "ON CONFLICT s",
	round(extract(epoch FROM :'t2'::timestamptz - :'t1'::timestamptz)
		/ nullif(extract(epoch FROM :'t1'::timestamptz - :'t0'::timestamptz), 0), 1) AS "ON CONFLICT / cpht",
	NOT EXISTS (SELECT id FROM events EXCEPT SELECT id FROM events_pg)
		AND NOT EXISTS (SELECT id FROM events_pg EXCEPT SELECT id FROM events) AS "same ids";

\echo
\echo '== 5. a load that rolls back forgets the ids of its batch'
TRUNCATE staging;
INSERT INTO staging
	SELECT (random() * 10000000)::bigint, 'newer event ' || g FROM generate_series(1, 100000) g;
BEGIN;
SELECT cpht_insert_new(cpht_open('seen_ids'), source => 'staging', target => 'events') AS inserted_then_rolled_back;
ROLLBACK;
-- the same batch is new again: neither its rows nor its ids stayed
SELECT cpht_insert_new(cpht_open('seen_ids'), source => 'staging', target => 'events') AS inserted_again;

\echo
\echo '== 6. the shared table'
SELECT t.name, t.device, t.count AS ids, pg_size_pretty(t.bytes) AS size,
	round(t.bytes::numeric / nullif(t.count, 0), 1) AS bytes_per_id,
	(SELECT count(*) FROM events) AS events
FROM cpht_tables() AS t WHERE t.name = 'seen_ids';

\set QUIET on
\o /dev/null
SELECT cpht_drop(cpht_open('seen_ids'));
DROP TABLE events, events_pg, staging;
\o
\echo '== done'
