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

-- Durable shared tables: cpht_create gains durable (default false).  A
-- durable table is saved in the data directory (pg_cpht/) and its changes
-- go to WAL, so it survives a clean restart and a crash exactly as
-- committed; cpht_checkpoint() saves every durable table that changed now.
DROP FUNCTION cpht_create(bigint, text, int, boolean, text);
CREATE FUNCTION cpht_create(capacity bigint, kind text DEFAULT 'iceberg',
							key_bits int DEFAULT 64, transactional boolean DEFAULT true,
							name text DEFAULT NULL, durable boolean DEFAULT false)
RETURNS int
AS 'MODULE_PATHNAME', 'cpht_create_named'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION cpht_create(bigint, text, int, boolean, text, boolean) IS
'creates a table for capacity distinct keys (kind iceberg or cuckoo, keys of key_bits bits), which grows past it as keys arrive unless cpht.grow is off, and returns its handle; without a name a table of this session on the device cpht.device selects, with a name a shared table in the cpht worker that every session of the database can open (transactional: writes of a key another open transaction changed wait for it; durable: saved in the data directory and logged in WAL, so it survives restarts and crashes)';

CREATE FUNCTION cpht_checkpoint()
RETURNS int
AS 'MODULE_PATHNAME', 'cpht_checkpoint'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION cpht_checkpoint() IS
'writes a snapshot of every durable shared table that changed since its last one, lets the server remove the WAL before the oldest snapshot, and returns how many it wrote';
