/* cpht 0.3 -> 0.4 */
\echo Use "ALTER EXTENSION cpht UPDATE TO '0.4'" to load this file. \quit

-- Each change below has its own headed section.

-- ---------------------------------------------------------------------------
-- cpht_array_agg: array_agg of bigint in parallel workers
-- ---------------------------------------------------------------------------
-- The same value as array_agg(bigint) without ORDER BY (every row's value,
-- NULLs included, in an unspecified order; NULL for no row), with combine,
-- serialize and deserialize functions, so that a parallel plan gathers the
-- keys in its workers.  The planner hook puts it in place of array_agg(x)
-- where an array function of cpht takes that array directly (see
-- docs/array-agg.md); it can also be called by name.
CREATE FUNCTION cpht_array_agg_step(internal, bigint)
RETURNS internal
AS 'MODULE_PATHNAME', 'cpht_array_agg_step'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE FUNCTION cpht_array_agg_final(internal)
RETURNS bigint[]
AS 'MODULE_PATHNAME', 'cpht_array_agg_final'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE FUNCTION cpht_array_agg_combine(internal, internal)
RETURNS internal
AS 'MODULE_PATHNAME', 'cpht_array_agg_combine'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE FUNCTION cpht_array_agg_serialize(internal)
RETURNS bytea
AS 'MODULE_PATHNAME', 'cpht_array_agg_serialize'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION cpht_array_agg_deserialize(bytea, internal)
RETURNS internal
AS 'MODULE_PATHNAME', 'cpht_array_agg_deserialize'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE AGGREGATE cpht_array_agg(key bigint) (
	SFUNC = cpht_array_agg_step,
	STYPE = internal,
	FINALFUNC = cpht_array_agg_final,
	COMBINEFUNC = cpht_array_agg_combine,
	SERIALFUNC = cpht_array_agg_serialize,
	DESERIALFUNC = cpht_array_agg_deserialize,
	PARALLEL = SAFE
);

COMMENT ON AGGREGATE cpht_array_agg(bigint) IS
'array_agg of bigint that parallel workers can gather: every value (NULLs included) once, in no specified order; NULL for no row';

-- The array functions that write run in the leader of a parallel plan
-- (they were PARALLEL UNSAFE, which kept the whole query in one process):
-- the keys they take can then be gathered by parallel workers.  The
-- executor hook assigns the transaction id a write on a transactional
-- shared table needs before parallel mode begins (src/plan/hooks.c).
ALTER FUNCTION cpht_fop(int, bigint[]) PARALLEL RESTRICTED;
ALTER FUNCTION cpht_fop_new(int, bigint[]) PARALLEL RESTRICTED;
ALTER FUNCTION cpht_put(int, bigint[]) PARALLEL RESTRICTED;

-- ---- Shared tables by name: the cpht_table type ---------------------------
-- A cpht_table names a shared table wherever a handle goes:
-- cpht_count('seen_ids'), cpht_fop_agg('seen_ids', id).  Its value is the
-- table's handle (four bytes, by value), the same number in every session,
-- so each function taking a handle gets an overload bound to the same C
-- function, and the planner hooks plan a constant cpht_table in parallel as
-- they plan a constant handle (src/api/names.c says why a type).  Input
-- reads a name with the checks of cpht_open (digits are a handle, a name of
-- digits goes in double quotes); output prints the name.  The type is in the
-- string category, so a string literal or an untyped parameter picks the
-- cpht_table overload and an integer the int one.  Text converts
-- implicitly, read when the call runs.
-- The I/O functions are STABLE, as regclass's are (PostgreSQL warns about
-- volatile ones), the one exception to cpht's rule that every function is
-- VOLATILE; the cast from text is VOLATILE.  Input is PARALLEL RESTRICTED:
-- it registers the table in the session, which parallel workers must not
-- do for themselves.
CREATE TYPE cpht_table;

CREATE FUNCTION cpht_table_in(cstring)
RETURNS cpht_table
AS 'MODULE_PATHNAME', 'cpht_table_in'
LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;

CREATE FUNCTION cpht_table_out(cpht_table)
RETURNS cstring
AS 'MODULE_PATHNAME', 'cpht_table_out'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

CREATE TYPE cpht_table (
	INPUT = cpht_table_in,
	OUTPUT = cpht_table_out,
	INTERNALLENGTH = 4,
	PASSEDBYVALUE,
	ALIGNMENT = int4,
	CATEGORY = 'S'
);

COMMENT ON TYPE cpht_table IS
'a shared cpht table named by its name, wherever a handle goes: read with the checks of cpht_open(name), held as the table''s handle, printed as its name';

CREATE FUNCTION cpht_table(text)
RETURNS cpht_table
AS 'MODULE_PATHNAME', 'cpht_table_from_text'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

COMMENT ON FUNCTION cpht_table(text) IS
'the shared table of a name (or a handle written in digits), with the checks of cpht_open(name)';

CREATE CAST (text AS cpht_table) WITH FUNCTION cpht_table(text) AS IMPLICIT;
-- the handle a name holds: 'seen_ids'::cpht_table::int
CREATE CAST (cpht_table AS int) WITHOUT FUNCTION;

-- The overloads: the same C functions, volatility, parallel safety and
-- strictness as the handle forms.
CREATE FUNCTION cpht_fop(handle cpht_table, keys bigint[])
RETURNS boolean[]
AS 'MODULE_PATHNAME', 'cpht_fop'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

CREATE FUNCTION cpht_fop_new(handle cpht_table, keys bigint[])
RETURNS bigint[]
AS 'MODULE_PATHNAME', 'cpht_fop_new'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

CREATE FUNCTION cpht_find(handle cpht_table, keys bigint[])
RETURNS boolean[]
AS 'MODULE_PATHNAME', 'cpht_find'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

CREATE FUNCTION cpht_put(handle cpht_table, keys bigint[])
RETURNS bigint
AS 'MODULE_PATHNAME', 'cpht_put'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

CREATE FUNCTION cpht_delete(handle cpht_table, keys bigint[])
RETURNS boolean[]
AS 'MODULE_PATHNAME', 'cpht_delete'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

CREATE FUNCTION cpht_count(handle cpht_table)
RETURNS bigint
AS 'MODULE_PATHNAME', 'cpht_count'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

CREATE FUNCTION cpht_info(handle cpht_table)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'cpht_info'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

CREATE FUNCTION cpht_drop(handle cpht_table)
RETURNS void
AS 'MODULE_PATHNAME', 'cpht_drop'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

CREATE FUNCTION cpht_rebuild(handle cpht_table)
RETURNS bigint
AS 'MODULE_PATHNAME', 'cpht_rebuild'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

CREATE FUNCTION cpht_fop_agg_step(internal, handle cpht_table, key bigint)
RETURNS internal
AS 'MODULE_PATHNAME', 'cpht_fop_agg_step'
LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE AGGREGATE cpht_fop_agg(handle cpht_table, key bigint) (
	SFUNC = cpht_fop_agg_step,
	STYPE = internal,
	FINALFUNC = cpht_fop_agg_final,
	FINALFUNC_MODIFY = READ_WRITE,
	COMBINEFUNC = cpht_fop_agg_combine,
	SERIALFUNC = cpht_fop_agg_serialize,
	DESERIALFUNC = cpht_fop_agg_deserialize,
	PARALLEL = SAFE
);

-- As for cpht_fop_agg(int, bigint): it inserts keys (CREATE AGGREGATE
-- records IMMUTABLE).
UPDATE pg_catalog.pg_proc
SET provolatile = 'v'
WHERE oid = 'cpht_fop_agg(cpht_table, bigint)'::pg_catalog.regprocedure;

CREATE FUNCTION cpht_fop_rows(handle cpht_table, rowtype anyelement, query text,
							  key_column text DEFAULT 'id')
RETURNS SETOF anyelement
AS 'MODULE_PATHNAME', 'cpht_fop_rows'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION cpht_export(handle cpht_table, OUT seq bigint, OUT chunk bytea)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'cpht_export'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED ROWS 3;

CREATE FUNCTION cpht_export_file(handle cpht_table, path text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'cpht_export_file'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

CREATE FUNCTION cpht_import_file(handle cpht_table, path text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'cpht_import_file'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

-- the same grants as the handle forms (see the update to 0.3)
REVOKE EXECUTE ON FUNCTION cpht_export_file(cpht_table, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cpht_export_file(cpht_table, text) TO pg_write_server_files;
REVOKE EXECUTE ON FUNCTION cpht_import_file(cpht_table, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cpht_import_file(cpht_table, text) TO pg_read_server_files;

CREATE FUNCTION cpht_import_agg_step(internal, handle cpht_table, chunk bytea)
RETURNS internal
AS 'MODULE_PATHNAME', 'cpht_import_agg_step'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE AGGREGATE cpht_import_agg(handle cpht_table, chunk bytea) (
	SFUNC = cpht_import_agg_step,
	STYPE = internal,
	FINALFUNC = cpht_import_agg_final,
	FINALFUNC_MODIFY = READ_WRITE,
	PARALLEL = UNSAFE
);

UPDATE pg_catalog.pg_proc
SET provolatile = 'v'
WHERE oid = 'cpht_import_agg(cpht_table, bytea)'::pg_catalog.regprocedure;

CREATE FUNCTION cpht_fop_relation(handle cpht_table, rel regclass, key_column name DEFAULT 'id')
RETURNS bigint
AS 'MODULE_PATHNAME', 'cpht_fop_relation'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

CREATE FUNCTION cpht_fop_new_relation(handle cpht_table, rel regclass, key_column name DEFAULT 'id')
RETURNS SETOF bigint
AS 'MODULE_PATHNAME', 'cpht_fop_new_relation'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED ROWS 1000;

CREATE FUNCTION cpht_insert_new(handle cpht_table, source regclass, target regclass,
								key_column name DEFAULT 'id')
RETURNS bigint
AS 'MODULE_PATHNAME', 'cpht_insert_new'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION cpht_fop(cpht_table, bigint[]) IS 'cpht_fop(int, bigint[]) of a shared table named by its name';
COMMENT ON FUNCTION cpht_fop_new(cpht_table, bigint[]) IS 'cpht_fop_new(int, bigint[]) of a shared table named by its name';
COMMENT ON FUNCTION cpht_find(cpht_table, bigint[]) IS 'cpht_find(int, bigint[]) of a shared table named by its name';
COMMENT ON FUNCTION cpht_put(cpht_table, bigint[]) IS 'cpht_put(int, bigint[]) of a shared table named by its name';
COMMENT ON FUNCTION cpht_delete(cpht_table, bigint[]) IS 'cpht_delete(int, bigint[]) of a shared table named by its name';
COMMENT ON FUNCTION cpht_count(cpht_table) IS 'cpht_count(int) of a shared table named by its name';
COMMENT ON FUNCTION cpht_info(cpht_table) IS 'cpht_info(int) of a shared table named by its name';
COMMENT ON FUNCTION cpht_drop(cpht_table) IS 'cpht_drop(int) of a shared table named by its name: dropped for every session, at once';
COMMENT ON FUNCTION cpht_rebuild(cpht_table) IS 'cpht_rebuild(int) of a shared table named by its name';
COMMENT ON AGGREGATE cpht_fop_agg(cpht_table, bigint) IS 'cpht_fop_agg(int, bigint) of a shared table named by its name; runs in parallel workers';
COMMENT ON FUNCTION cpht_fop_rows(cpht_table, anyelement, text, text) IS 'cpht_fop_rows(int, anyelement, text, text) of a shared table named by its name';
COMMENT ON FUNCTION cpht_export(cpht_table) IS 'cpht_export(int) of a shared table named by its name';
COMMENT ON FUNCTION cpht_export_file(cpht_table, text) IS 'cpht_export_file(int, text) of a shared table named by its name (roles with pg_write_server_files)';
COMMENT ON FUNCTION cpht_import_file(cpht_table, text) IS 'cpht_import_file(int, text) of a shared table named by its name (roles with pg_read_server_files)';
COMMENT ON AGGREGATE cpht_import_agg(cpht_table, bytea) IS 'cpht_import_agg(int, bytea) of a shared table named by its name';
COMMENT ON FUNCTION cpht_fop_relation(cpht_table, regclass, name) IS 'cpht_fop_relation(int, regclass, name) of a shared table named by its name';
COMMENT ON FUNCTION cpht_fop_new_relation(cpht_table, regclass, name) IS 'cpht_fop_new_relation(int, regclass, name) of a shared table named by its name; planned as a parallel node';
COMMENT ON FUNCTION cpht_insert_new(cpht_table, regclass, regclass, name) IS 'cpht_insert_new(int, regclass, regclass, name) of a shared table named by its name';

-- ---- Shared tables in transaction blocks, and if_not_exists ---------------
-- cpht_create gains if_not_exists (default false): with a name that a
-- shared table of this database has, it returns that table's handle with a
-- NOTICE instead of failing with 42710 (an ERROR still when the table is
-- durable or transactional where the call asks otherwise).  Creating and
-- dropping shared tables now also work inside transaction blocks: a
-- rollback undoes them (docs/transactions-ddl.md).
DROP FUNCTION cpht_create(bigint, text, int, boolean, text, int, boolean);
CREATE FUNCTION cpht_create(capacity bigint, kind text DEFAULT 'iceberg',
							key_bits int DEFAULT NULL, transactional boolean DEFAULT true,
							name text DEFAULT NULL, shards int DEFAULT NULL,
							durable boolean DEFAULT false, if_not_exists boolean DEFAULT false)
RETURNS int
AS 'MODULE_PATHNAME', 'cpht_create_named'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION cpht_create(bigint, text, int, boolean, text, int, boolean, boolean) IS
'creates a table for capacity distinct keys (kind iceberg or cuckoo; keys of key_bits bits, or with key_bits NULL any bigint, the slots widening as keys need), which grows past it as keys arrive unless cpht.grow is off, and returns its handle; without a name a table of this session on the device cpht.device selects, with a name a shared table in the cpht worker that every session of the database can open (transactional: writes of a key another open transaction changed wait for it; durable: saved in the data directory and logged in WAL, so it survives restarts and crashes; inside a transaction block other sessions see it once the transaction commits, and a rollback drops it); if_not_exists: a shared table of that name is returned, with a notice, instead of an error; shards > 1 splits the keys by hash over that many tables, one per GPU in turn (or all on the CPU), and shards NULL takes cpht.shards (a durable table: 1)';

-- Monitoring: statistics of shared tables, their reset, the progress of
-- long calls (docs/monitoring.md).
-- ---------------------------------------------------------------------------

CREATE FUNCTION cpht_stat_tables(
	OUT handle int, OUT name text, OUT owner regrole, OUT durable boolean,
	OUT transactional boolean, OUT keys bigint, OUT bytes bigint,
	OUT calls bigint, OUT keys_sent bigint, OUT new_keys bigint,
	OUT call_time_ms double precision, OUT waits bigint, OUT growths bigint,
	OUT snapshot_lsn pg_lsn, OUT snapshot_time timestamptz,
	OUT wal_keep_lsn pg_lsn, OUT wal_held_bytes bigint,
	OUT stats_reset timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'cpht_stat_tables'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION cpht_stat_tables() IS
'per shared table of this database that the role may use: its keys and bytes, the calls, keys sent, new keys, time in calls, waits for other transactions and growths since it was created, restored or reset; for a durable table its last snapshot and the WAL it keeps';

CREATE VIEW cpht_stat_tables AS SELECT * FROM cpht_stat_tables();

COMMENT ON VIEW cpht_stat_tables IS 'cpht_stat_tables() as a view';
-- every role sees the tables it may use, as with cpht_tables()
GRANT SELECT ON cpht_stat_tables TO PUBLIC;

CREATE FUNCTION cpht_stat_reset(name text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'cpht_stat_reset'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION cpht_stat_reset(text) IS
'sets the counters of cpht_stat_tables back to zero for the shared tables of this database, or for the one named; superusers only unless granted';

-- as pg_stat_statements_reset: whoever the superuser grants it to
REVOKE ALL ON FUNCTION cpht_stat_reset(text) FROM PUBLIC;

CREATE FUNCTION cpht_stat_progress(
	OUT pid int, OUT datid oid, OUT relid oid, OUT operation text,
	OUT phase text, OUT handle int, OUT table_name text,
	OUT keys_done bigint, OUT keys_known bigint, OUT new_keys bigint,
	OUT rows_done bigint, OUT rows_known bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'cpht_stat_progress'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION cpht_stat_progress() IS
'per backend running cpht_fop_relation, cpht_fop_new_relation, cpht_insert_new or cpht_fop_rows: its phase, the keys sent of the keys known (the relation''s row estimate) and the new keys so far';

CREATE VIEW cpht_stat_progress AS SELECT * FROM cpht_stat_progress();

COMMENT ON VIEW cpht_stat_progress IS 'cpht_stat_progress() as a view';
-- every role sees its own calls, as with pg_stat_progress_copy
GRANT SELECT ON cpht_stat_progress TO PUBLIC;

-- ---- cpht_fop_new_agg: the new keys of a group, from parallel workers ------
-- cpht_fop_new of every key of the group, streamed in batches as
-- cpht_fop_agg streams them; returns the keys that were new (NULL over no
-- rows).  Over a shared table it runs in parallel workers, each handing the
-- leader only its new keys, and the planner puts it in the place of
-- cpht_fop_new(h, array_agg(x)) there (src/plan/array_agg.c).  VOLATILE as
-- cpht_fop_agg: it inserts keys (CREATE AGGREGATE records IMMUTABLE).
CREATE FUNCTION cpht_fop_new_agg_step(internal, handle int, key bigint)
RETURNS internal
AS 'MODULE_PATHNAME', 'cpht_fop_new_agg_step'
LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE FUNCTION cpht_fop_new_agg_step(internal, handle cpht_table, key bigint)
RETURNS internal
AS 'MODULE_PATHNAME', 'cpht_fop_new_agg_step'
LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE FUNCTION cpht_fop_new_agg_final(internal)
RETURNS bigint[]
AS 'MODULE_PATHNAME', 'cpht_fop_new_agg_final'
LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE FUNCTION cpht_fop_new_agg_serialize(internal)
RETURNS bytea
AS 'MODULE_PATHNAME', 'cpht_fop_new_agg_serialize'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

CREATE FUNCTION cpht_fop_new_agg_deserialize(bytea, internal)
RETURNS internal
AS 'MODULE_PATHNAME', 'cpht_fop_new_agg_deserialize'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

CREATE FUNCTION cpht_fop_new_agg_combine(internal, internal)
RETURNS internal
AS 'MODULE_PATHNAME', 'cpht_fop_new_agg_combine'
LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE AGGREGATE cpht_fop_new_agg(handle int, key bigint) (
	SFUNC = cpht_fop_new_agg_step,
	STYPE = internal,
	FINALFUNC = cpht_fop_new_agg_final,
	FINALFUNC_MODIFY = READ_WRITE,
	COMBINEFUNC = cpht_fop_new_agg_combine,
	SERIALFUNC = cpht_fop_new_agg_serialize,
	DESERIALFUNC = cpht_fop_new_agg_deserialize,
	PARALLEL = SAFE
);

CREATE AGGREGATE cpht_fop_new_agg(handle cpht_table, key bigint) (
	SFUNC = cpht_fop_new_agg_step,
	STYPE = internal,
	FINALFUNC = cpht_fop_new_agg_final,
	FINALFUNC_MODIFY = READ_WRITE,
	COMBINEFUNC = cpht_fop_new_agg_combine,
	SERIALFUNC = cpht_fop_new_agg_serialize,
	DESERIALFUNC = cpht_fop_new_agg_deserialize,
	PARALLEL = SAFE
);

UPDATE pg_catalog.pg_proc
SET provolatile = 'v'
WHERE oid IN ('cpht_fop_new_agg(int, bigint)'::pg_catalog.regprocedure,
			  'cpht_fop_new_agg(cpht_table, bigint)'::pg_catalog.regprocedure);

COMMENT ON AGGREGATE cpht_fop_new_agg(int, bigint) IS
'find-or-put of every key of the group (a null key is an error), streamed in batches; returns the keys that were new, each once, in no particular order; over a shared table it runs in parallel workers';
COMMENT ON AGGREGATE cpht_fop_new_agg(cpht_table, bigint) IS
'cpht_fop_new_agg(int, bigint) of a shared table named by its name; runs in parallel workers';
