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
