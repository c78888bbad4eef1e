-- cpht_fop_rows returns rows of its row type as an INSERT would store them,
-- whatever the query does to the settings while it runs; and the error
-- texts of the streaming functions and of handles that are gone.

-- ---- settings are read once per call -----------------------------------
-- The query raises cpht.batch_size while it runs: the batches stay of the
-- size the call started with (its buffers were sized for it).
CREATE TEMP TABLE big (id bigint, payload text);
INSERT INTO big SELECT g, 'x' FROM generate_series(1, 100000) g;
SET cpht.batch_size = 1024;
SELECT cpht_create(1000000) AS h \gset
SELECT count(*) FROM cpht_fop_rows(:h, NULL::big,
	$$SELECT id, payload FROM big WHERE set_config('cpht.batch_size', '1048576', false) IS NOT NULL$$);
SET cpht.batch_size = 1024;
SELECT count(*) FROM cpht_fop_rows(:h, NULL::big,
	$$SELECT id + 100000 AS id, payload FROM big WHERE set_config('cpht.batch_size', '1040', false) IS NOT NULL$$);
SELECT cpht_count(:h);
-- and lowering it in the middle is harmless too
SET cpht.batch_size = 4096;
SELECT count(*) FROM cpht_fop_rows(:h, NULL::big,
	$$SELECT id + 200000 AS id, payload FROM big WHERE set_config('cpht.batch_size', '1024', false) IS NOT NULL$$);
RESET cpht.batch_size;
-- cpht.batch_memory likewise
SET cpht.batch_memory = '64kB';
SELECT count(*) FROM cpht_fop_rows(:h, NULL::big,
	$$SELECT id + 300000 AS id, payload FROM big WHERE set_config('cpht.batch_memory', '1GB', false) IS NOT NULL$$);
RESET cpht.batch_memory;
SELECT cpht_count(:h);

-- ---- rows are coerced to the row type as an INSERT coerces them ----------
CREATE TEMP TABLE staging (id bigint, payload text);
INSERT INTO staging SELECT g, 'longpayload' || g FROM generate_series(1, 20) g;
CREATE TEMP TABLE events (id bigint PRIMARY KEY, payload varchar(3), n numeric(3,1), c char(2));
SELECT cpht_create(1000) AS e \gset
-- too long for varchar(3)
INSERT INTO events SELECT * FROM cpht_fop_rows(:e, NULL::events,
	'SELECT id, payload::varchar, 1.25::numeric, ''ab''::bpchar FROM staging');
-- too large for numeric(3,1)
INSERT INTO events SELECT * FROM cpht_fop_rows(:e, NULL::events,
	'SELECT id, left(payload, 3)::varchar, 12345.6789::numeric, ''ab''::bpchar FROM staging');
-- too long for char(2)
INSERT INTO events SELECT * FROM cpht_fop_rows(:e, NULL::events,
	'SELECT id, left(payload, 3)::varchar, 1.25::numeric, ''abcdef''::bpchar FROM staging');
-- the failed statements left no key behind
SELECT cpht_count(:e);
-- what fits is stored as INSERT stores it: numeric rounded to its scale,
-- char padded, and assignment casts (text to varchar and to char) taken
INSERT INTO events SELECT * FROM cpht_fop_rows(:e, NULL::events,
	'SELECT id, left(payload, 3), 1.25::numeric, ''a''::text FROM staging WHERE id <= 3');
SELECT id, payload, n, c, octet_length(c) AS c_bytes FROM events ORDER BY id;
-- the same through INSERT, for comparison
CREATE TEMP TABLE events_insert (LIKE events);
INSERT INTO events_insert SELECT id, left(payload, 3), 1.25::numeric, 'a'::text FROM staging WHERE id <= 3;
SELECT count(*) AS differ FROM (TABLE events EXCEPT TABLE events_insert) d;
-- a column with no assignment cast is 42804
\set VERBOSITY sqlstate
SELECT * FROM cpht_fop_rows(:e, NULL::events, 'SELECT id, payload, now(), ''ab'' FROM staging');
\set VERBOSITY default
SELECT * FROM cpht_fop_rows(:e, NULL::events, 'SELECT id, payload, now(), ''ab'' FROM staging');

-- domains: of a column, and of the row type itself
CREATE DOMAIN short_text AS text CHECK (length(VALUE) <= 5);
CREATE DOMAIN small_id AS bigint CHECK (VALUE < 100);
CREATE TYPE pair AS (id bigint, payload text);
CREATE DOMAIN ordered_pair AS pair CHECK ((VALUE).payload <> 'bad');
CREATE TEMP TABLE dom_rows (id small_id, payload short_text);
SELECT cpht_create(1000) AS d \gset
SELECT * FROM cpht_fop_rows(:d, NULL::dom_rows, 'SELECT id, payload FROM staging');
SELECT * FROM cpht_fop_rows(:d, NULL::dom_rows, 'SELECT id + 1000 AS id, ''ok'' FROM staging');
SELECT * FROM cpht_fop_rows(:d, NULL::dom_rows, 'SELECT id, ''ok'' FROM staging WHERE id <= 2') ORDER BY id;
SELECT * FROM cpht_fop_rows(:d, NULL::ordered_pair, 'SELECT id + 100 AS id, ''bad'' FROM staging');
SELECT * FROM cpht_fop_rows(:d, NULL::ordered_pair, 'SELECT id + 100 AS id, ''good'' FROM staging WHERE id <= 2') ORDER BY id;
SELECT cpht_count(:d);

-- a key column of a domain over bigint is a bigint key column
SELECT * FROM cpht_fop_rows(:d, NULL::dom_rows, 'SELECT id::small_id, ''dom'' FROM staging WHERE id BETWEEN 3 AND 4') ORDER BY id;
-- a domain over another type is not
SELECT * FROM cpht_fop_rows(:d, NULL::dom_rows, 'SELECT left(payload, 3)::short_text AS id, payload FROM staging');

-- ---- errors and words -----------------------------------------------------
-- the hint of a NULL key quotes the column name as SQL needs it
CREATE TEMP TABLE odd ("case" bigint, "Mixed Case" bigint);
INSERT INTO odd VALUES (NULL, NULL);
SELECT * FROM cpht_fop_rows(:d, NULL::odd, 'SELECT * FROM odd', 'case');
SELECT * FROM cpht_fop_rows(:d, NULL::odd, 'SELECT * FROM odd', 'Mixed Case');

-- a table whose creating transaction rolled back was never committed
BEGIN;
SELECT cpht_create(100) AS rb \gset
ROLLBACK;
SELECT cpht_count(:rb);
BEGIN;
SAVEPOINT s;
SELECT cpht_create(100) AS rb2 \gset
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT cpht_fop(:rb2, '{1}');
-- a dropped one says so
SELECT cpht_drop(:e);
SELECT cpht_count(:e);

-- cpht.trace reports every cpht_fop_new call, also one that finds no new
-- key (the times vary, so only the SQLSTATE of the NOTICE is shown)
SET cpht.trace = on;
\set VERBOSITY sqlstate
SELECT cpht_fop_new(:h, '{1,2,3}');
SELECT cpht_fop_new(:h, '{-5}');
-- and a relation's feed once per call (cpht_fop_relation, cpht_fop_new_relation)
SELECT cpht_fop_relation(:h, 'big', 'id');
SELECT count(*) FROM cpht_fop_new_relation(:h, 'big', 'id');
\set VERBOSITY default
RESET cpht.trace;

SELECT cpht_drop_all() > 0 AS dropped;
