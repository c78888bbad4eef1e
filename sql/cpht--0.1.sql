/* cpht--0.1.sql — compact hash sets of bigint keys */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION cpht" to load this file. \quit

-- Tables belong to the backend that created them, so every function is
-- VOLATILE.  By default they follow transactions: what an aborted
-- (sub)transaction put, deleted, created or dropped is undone.  Parallel workers cannot see
-- them: functions that change a table are PARALLEL UNSAFE, the ones that
-- only read are PARALLEL RESTRICTED (they run in the leader).  STRICT makes
-- a NULL argument give NULL.

CREATE FUNCTION cpht_create(capacity bigint, kind text DEFAULT 'iceberg',
							key_bits int DEFAULT 64, transactional boolean DEFAULT true)
RETURNS int
AS 'MODULE_PATHNAME', 'cpht_create'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION cpht_create(bigint, text, int, boolean) IS
'creates a table that holds capacity distinct keys (kind iceberg or cuckoo, keys of key_bits bits) on the device cpht.device selects, and returns its handle; transactional => false skips the undo log';

CREATE FUNCTION cpht_fop(handle int, keys bigint[])
RETURNS boolean[]
AS 'MODULE_PATHNAME', 'cpht_fop'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION cpht_fop(int, bigint[]) IS
'find-or-put: inserts the absent keys; true where a key was newly inserted (once per distinct new key), in input order';

CREATE FUNCTION cpht_fop_new(handle int, keys bigint[])
RETURNS bigint[]
AS 'MODULE_PATHNAME', 'cpht_fop_new'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION cpht_fop_new(int, bigint[]) IS
'find-or-put returning only the newly inserted keys, in input order';

CREATE FUNCTION cpht_find(handle int, keys bigint[])
RETURNS boolean[]
AS 'MODULE_PATHNAME', 'cpht_find'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

COMMENT ON FUNCTION cpht_find(int, bigint[]) IS
'membership: true where a key is in the table';

CREATE FUNCTION cpht_put(handle int, keys bigint[])
RETURNS bigint
AS 'MODULE_PATHNAME', 'cpht_put'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION cpht_put(int, bigint[]) IS
'inserts the absent keys and returns how many were inserted';

CREATE FUNCTION cpht_delete(handle int, keys bigint[])
RETURNS boolean[]
AS 'MODULE_PATHNAME', 'cpht_delete'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION cpht_delete(int, bigint[]) IS
'deletes keys; true where a key was present and is now deleted';

CREATE FUNCTION cpht_count(handle int)
RETURNS bigint
AS 'MODULE_PATHNAME', 'cpht_count'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

COMMENT ON FUNCTION cpht_count(int) IS
'number of distinct keys in the table';

CREATE FUNCTION cpht_info(handle int)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'cpht_info'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

COMMENT ON FUNCTION cpht_info(int) IS
'layout and fill of a table: kind, device, key_bits, count, levels, bytes';

CREATE FUNCTION cpht_tables(OUT handle int, OUT kind text, OUT device text,
							OUT key_bits int, OUT count bigint, OUT bytes bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'cpht_tables'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED ROWS 10;

COMMENT ON FUNCTION cpht_tables() IS
'the tables of this session';

CREATE FUNCTION cpht_drop(handle int)
RETURNS void
AS 'MODULE_PATHNAME', 'cpht_drop'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION cpht_drop(int) IS
'drops a table and frees its memory';

CREATE FUNCTION cpht_drop_all()
RETURNS int
AS 'MODULE_PATHNAME', 'cpht_drop_all'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION cpht_drop_all() IS
'drops every table of this session and returns how many were dropped';

CREATE FUNCTION cpht_rebuild(handle int)
RETURNS bigint
AS 'MODULE_PATHNAME', 'cpht_rebuild'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION cpht_rebuild(int) IS
'rebuilds a table from its live keys, freeing the slots deleted keys left as tombstones; returns how many tombstones it removed';

-- Streaming: any number of rows, batches of cpht.batch_size keys.

CREATE FUNCTION cpht_fop_agg_step(internal, handle int, key bigint)
RETURNS internal
AS 'MODULE_PATHNAME', 'cpht_fop_agg_step'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION cpht_fop_agg_final(internal)
RETURNS bigint
AS 'MODULE_PATHNAME', 'cpht_fop_agg_final'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE AGGREGATE cpht_fop_agg(handle int, key bigint) (
	SFUNC = cpht_fop_agg_step,
	STYPE = internal,
	FINALFUNC = cpht_fop_agg_final,
	FINALFUNC_MODIFY = READ_WRITE,
	PARALLEL = UNSAFE
);

COMMENT ON AGGREGATE cpht_fop_agg(int, bigint) IS
'find-or-put of every non-null key of the group, streamed in batches; returns how many keys were new';

CREATE FUNCTION cpht_fop_rows(handle int, rowtype anyelement, query text,
							  key_column text DEFAULT 'id')
RETURNS SETOF anyelement
AS 'MODULE_PATHNAME', 'cpht_fop_rows'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION cpht_fop_rows(int, anyelement, text, text) IS
'runs query (rows of rowtype) through a cursor, find-or-puts the bigint key_column of each row in batches, and returns the rows whose key was new: each new key once';
