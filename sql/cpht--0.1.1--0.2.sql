/* cpht--0.1.1--0.2.sql — upgrade from 0.1.1: shared tables */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION cpht UPDATE TO '0.2'" to load this file. \quit

-- cpht_create gains name: a named table is shared, held by the cpht worker
-- (cpht in shared_preload_libraries) and opened by name with cpht_open.
-- transactional (default true) applies to shared tables too: their writes
-- wait for the open transactions that changed the same keys, as inserts
-- into a unique index do, and an abort undoes a transaction's changes.
-- Not STRICT, because name defaults to NULL; the C function returns NULL
-- for a NULL among the other arguments, as STRICT did.
DROP FUNCTION cpht_create(bigint, text, int, boolean);
CREATE FUNCTION cpht_create(capacity bigint, kind text DEFAULT 'iceberg',
							key_bits int DEFAULT 64, transactional boolean DEFAULT true,
							name text DEFAULT NULL)
RETURNS int
AS 'MODULE_PATHNAME', 'cpht_create_named'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION cpht_create(bigint, text, int, boolean, text) IS
'creates a table for capacity distinct keys (kind iceberg or cuckoo, keys of key_bits bits), which grows past it as keys arrive unless cpht.grow is off, and returns its handle; without a name a table of this session on the device cpht.device selects, with a name a shared table in the cpht worker that every session of the database can open (transactional: writes of a key another open transaction changed wait for it)';

CREATE FUNCTION cpht_open(name text)
RETURNS int
AS 'MODULE_PATHNAME', 'cpht_open'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION cpht_open(text) IS
'the handle of a shared table of this database in this session: the same handle on every call';

-- cpht_tables lists shared tables too: new columns name, owner, shared,
-- placement.
DROP FUNCTION cpht_tables();
CREATE FUNCTION cpht_tables(OUT handle int, OUT kind text, OUT device text,
							OUT key_bits int, OUT count bigint, OUT bytes bigint,
							OUT name text, OUT owner regrole, OUT shared boolean,
							OUT placement text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'cpht_tables'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED ROWS 10;

COMMENT ON FUNCTION cpht_tables() IS
'the tables of this session, then the shared tables of this database (handle null where not opened in this session)';

COMMENT ON FUNCTION cpht_drop(int) IS
'drops a table and frees its memory; a shared table is dropped for every session, at once';

CREATE FUNCTION cpht_worker_info()
RETURNS jsonb
AS 'MODULE_PATHNAME', 'cpht_worker_info'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION cpht_worker_info() IS
'the cpht worker: whether cpht was preloaded, its pid, how often it started, shared tables, transfer windows, the private tables it holds and its GPU';

-- Tables grow past their capacity (cpht.grow, on by default); cpht_info
-- reports initial_slots, grows, last_grow_ms, last_grow_at and bytes_per_key.
COMMENT ON FUNCTION cpht_info(int) IS
'the table''s kind, device, layout (slots per level, now and at creation), fill, growths (how many, the last one''s time and duration), bytes per key and undo log, as jsonb';

-- Sharded tables: cpht_create gains shards (default 1).  A table of N
-- shards splits its keys by a hash of the key over N tables, one per GPU in
-- turn (cpht.devices), or all on the CPU, and answers as one table;
-- cpht_info lists the shards.
DROP FUNCTION cpht_create(bigint, text, int, boolean, text);
CREATE FUNCTION cpht_create(capacity bigint, kind text DEFAULT 'iceberg',
							key_bits int DEFAULT 64, transactional boolean DEFAULT true,
							name text DEFAULT NULL, shards int DEFAULT 1)
RETURNS int
AS 'MODULE_PATHNAME', 'cpht_create_named'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION cpht_create(bigint, text, int, boolean, text, int) IS
'creates a table for capacity distinct keys (kind iceberg or cuckoo, keys of key_bits bits), which grows past it as keys arrive unless cpht.grow is off, and returns its handle; without a name a table of this session on the device cpht.device selects, with a name a shared table in the cpht worker that every session of the database can open (transactional: writes of a key another open transaction changed wait for it); shards > 1 splits the keys by hash over that many tables, one per GPU in turn (or all on the CPU)';
