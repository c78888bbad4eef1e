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

-- ---- Export and import of a table's keys -----------------------------------
-- One byte format (a versioned header, little-endian keys, a CRC-32C
-- trailer) for server files and for streams of bytea chunks, loadable into
-- any table: another kind, key_bits, device or server.  The file functions
-- check the role's privileges themselves (pg_write_server_files,
-- pg_read_server_files), like COPY to and from files.

CREATE FUNCTION cpht_export(handle int, OUT seq bigint, OUT chunk bytea)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'cpht_export'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED ROWS 3;

COMMENT ON FUNCTION cpht_export(int) IS
'the table''s keys as an export: rows of bytea chunks (header, keys, CRC trailer) that concatenated in seq order are the file cpht_export_file writes; load them with cpht_import_agg(handle, chunk ORDER BY seq)';

CREATE FUNCTION cpht_export_file(handle int, path text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'cpht_export_file'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION cpht_export_file(int, text) IS
'writes the table''s keys to a file on the server (roles with pg_write_server_files), through a temporary file renamed into place; returns the number of keys';

CREATE FUNCTION cpht_import_file(handle int, path text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'cpht_import_file'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION cpht_import_file(int, text) IS
'find-or-put of the keys of an export file on the server (roles with pg_read_server_files), checked whole before any key is put; returns how many keys were new';

CREATE FUNCTION cpht_import_agg_step(internal, handle int, chunk bytea)
RETURNS internal
AS 'MODULE_PATHNAME', 'cpht_import_agg_step'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION cpht_import_agg_final(internal)
RETURNS bigint
AS 'MODULE_PATHNAME', 'cpht_import_agg_final'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE AGGREGATE cpht_import_agg(handle int, chunk bytea) (
	SFUNC = cpht_import_agg_step,
	STYPE = internal,
	FINALFUNC = cpht_import_agg_final,
	FINALFUNC_MODIFY = READ_WRITE,
	PARALLEL = UNSAFE
);

-- CREATE AGGREGATE records an aggregate as IMMUTABLE, and the planner reads
-- the aggregate's own row: cpht_import_agg inserts keys (as cpht_fop_agg).
UPDATE pg_catalog.pg_proc
SET provolatile = 'v'
WHERE oid = 'cpht_import_agg(int, bytea)'::pg_catalog.regprocedure;

COMMENT ON AGGREGATE cpht_import_agg(int, bytea) IS
'find-or-put of the keys of an export given as its chunks in order (ORDER BY seq; split anywhere); returns how many keys were new';

-- Automatic key width: key_bits defaults to NULL, a table whose slots
-- start as narrow as possible and widen the first time a key needs more
-- (negative keys included); an explicit key_bits keeps its meaning.
-- cpht_tables shows key_bits NULL for such a table; cpht_info reports
-- key_width, the current key_bits, signed_keys, slot_key_bits and widens.
--
-- Sharded tables: cpht_create gains shards (default NULL: the cpht.shards
-- setting, 1 unless set; a durable table 1).  A table of N shards splits
-- its keys by a hash of the key over N tables, one per GPU in turn
-- (cpht.devices), or all on the CPU, and answers as one table; cpht_info
-- lists the shards.
--
-- Durable shared tables: cpht_create gains durable (default false).  A
-- durable table is saved in the data directory (pg_cpht/) and its changes
-- go to WAL, so it survives a clean restart and a crash exactly as
-- committed; cpht_checkpoint() saves every durable table that changed now.
DROP FUNCTION cpht_create(bigint, text, int, boolean, text);
CREATE FUNCTION cpht_create(capacity bigint, kind text DEFAULT 'iceberg',
							key_bits int DEFAULT NULL, transactional boolean DEFAULT true,
							name text DEFAULT NULL, shards int DEFAULT NULL,
							durable boolean DEFAULT false)
RETURNS int
AS 'MODULE_PATHNAME', 'cpht_create_named'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION cpht_create(bigint, text, int, boolean, text, int, boolean) IS
'creates a table for capacity distinct keys (kind iceberg or cuckoo; keys of key_bits bits, or with key_bits NULL any bigint, the slots widening as keys need), which grows past it as keys arrive unless cpht.grow is off, and returns its handle; without a name a table of this session on the device cpht.device selects, with a name a shared table in the cpht worker that every session of the database can open (transactional: writes of a key another open transaction changed wait for it; durable: saved in the data directory and logged in WAL, so it survives restarts and crashes); shards > 1 splits the keys by hash over that many tables, one per GPU in turn (or all on the CPU), and shards NULL takes cpht.shards (a durable table: 1)';

-- Parallel streaming: cpht_fop_agg over a shared table runs in parallel
-- workers.  Each worker streams its rows' keys to the table and hands the
-- leader the count of its new keys (serialize, deserialize, combine); the
-- workers act for the leader's transaction.  The aggregate is PARALLEL
-- SAFE, but the planner hook of cpht plans a query in parallel only when
-- every cpht_fop_agg of it names a shared table this session opened by a
-- constant (or a bound parameter): a private table lives in its session,
-- where parallel workers cannot reach it.
CREATE FUNCTION cpht_fop_agg_serialize(internal)
RETURNS bytea
AS 'MODULE_PATHNAME', 'cpht_fop_agg_serialize'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

CREATE FUNCTION cpht_fop_agg_deserialize(bytea, internal)
RETURNS internal
AS 'MODULE_PATHNAME', 'cpht_fop_agg_deserialize'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

CREATE FUNCTION cpht_fop_agg_combine(internal, internal)
RETURNS internal
AS 'MODULE_PATHNAME', 'cpht_fop_agg_combine'
LANGUAGE C VOLATILE PARALLEL SAFE;

ALTER FUNCTION cpht_fop_agg_step(internal, int, bigint) PARALLEL SAFE;
ALTER FUNCTION cpht_fop_agg_final(internal) PARALLEL SAFE;

DROP AGGREGATE cpht_fop_agg(int, bigint);
CREATE AGGREGATE cpht_fop_agg(handle int, key bigint) (
	SFUNC = cpht_fop_agg_step,
	STYPE = internal,
	FINALFUNC = cpht_fop_agg_final,
	FINALFUNC_MODIFY = READ_WRITE,
	COMBINEFUNC = cpht_fop_agg_combine,
	SERIALFUNC = cpht_fop_agg_serialize,
	DESERIALFUNC = cpht_fop_agg_deserialize,
	PARALLEL = SAFE
);

-- As in the update to 0.1.1: the aggregate inserts keys, so the planner
-- must see it VOLATILE (CREATE AGGREGATE records IMMUTABLE).
UPDATE pg_catalog.pg_proc
SET provolatile = 'v'
WHERE oid = 'cpht_fop_agg(int, bigint)'::pg_catalog.regprocedure;

COMMENT ON AGGREGATE cpht_fop_agg(int, bigint) IS
'find-or-put of every non-null key of the group, streamed in batches; returns how many keys were new; over a shared table it runs in parallel workers';

CREATE FUNCTION cpht_checkpoint()
RETURNS int
AS 'MODULE_PATHNAME', 'cpht_checkpoint'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION cpht_checkpoint() IS
'writes a snapshot of every durable shared table that changed since its last one, lets the server remove the WAL before the oldest snapshot, and returns how many it wrote';

-- Whole relations: find-or-put of every non-null key of a relation's
-- column, read by a parallel heap scan of cpht's own whose workers hand
-- the keys to the calling backend, which sends them to the table in large
-- batches (no function call per row).  Relations the scan cannot read as
-- a query would (row-level security, partitioned or inherited tables,
-- views, foreign tables) are read by SELECT key_column FROM rel instead.
CREATE FUNCTION cpht_fop_relation(handle int, rel regclass, key_column name DEFAULT 'id')
RETURNS bigint
AS 'MODULE_PATHNAME', 'cpht_fop_relation'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION cpht_fop_relation(int, regclass, name) IS
'find-or-put of every non-null key of column key_column (bigint, integer or smallint) of relation rel, read by a parallel scan; returns how many keys were new';

CREATE FUNCTION cpht_fop_new_relation(handle int, rel regclass, key_column name DEFAULT 'id')
RETURNS SETOF bigint
AS 'MODULE_PATHNAME', 'cpht_fop_new_relation'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED ROWS 1000;

COMMENT ON FUNCTION cpht_fop_new_relation(int, regclass, name) IS
'find-or-put of every non-null key of column key_column (bigint, integer or smallint) of relation rel, read by a parallel scan; returns the keys that were new, each once';

-- Loading the new rows of a relation: the rows of source whose key was
-- new go into target, one row per new key, as
-- INSERT INTO target SELECT * FROM cpht_fop_rows(handle, NULL::source,
-- 'SELECT * FROM source', key_column) puts them, with the new rows picked by
-- the parallel scan of cpht_fop_relation (row tids rather than rows) and
-- inserted by INSERTs that read them by tid (in key order into a target
-- indexed by the key).  Sources that scan cannot read as a query would run
-- that cpht_fop_rows statement instead.
CREATE FUNCTION cpht_insert_new(handle int, source regclass, target regclass,
								key_column name DEFAULT 'id')
RETURNS bigint
AS 'MODULE_PATHNAME', 'cpht_insert_new'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION cpht_insert_new(int, regclass, regclass, name) IS
'inserts into target the rows of source whose key_column (bigint) was new, one row per new key, as INSERT INTO target SELECT * FROM source would insert them; returns how many rows were inserted';
