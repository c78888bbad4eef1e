-- Every function and aggregate of cpht changes or reads a table that lives
-- outside the catalog, so each one must be VOLATILE: the planner may skip,
-- merge or repeat calls of anything else.  Except cpht_array_agg and its
-- support functions, which read no table: IMMUTABLE, as array_agg, so that
-- equal calls in one query share one state.

SELECT p.oid::regprocedure AS routine, p.prokind, p.provolatile
FROM pg_proc p
JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'cpht'
WHERE p.provolatile <> 'v' AND p.proname !~ '^cpht_array_agg'
  -- a type's input and output functions: PostgreSQL wants them not
  -- volatile (cpht_table's are STABLE, as regclass's)
  AND NOT EXISTS (SELECT 1 FROM pg_type t WHERE p.oid IN (t.typinput, t.typoutput))
ORDER BY 1;

-- The three plans that went wrong while cpht_fop_agg was IMMUTABLE.
CREATE TEMP TABLE stg AS SELECT g::bigint AS id FROM generate_series(1, 3000) g;

-- 1. An unused output column of a subquery: the aggregate still runs.
SELECT cpht_create(10000) AS h \gset
SELECT count(*) FROM (SELECT cpht_fop_agg(:h, id) FROM stg) s;
SELECT cpht_count(:h);

-- 2. The same call twice in one select list: two aggregates, each runs once;
-- the keys are inserted once, so one of them reports them new.
SELECT cpht_create(10000) AS h \gset
SELECT a + b AS new_keys, least(a, b) AS found_by_the_other
FROM (SELECT cpht_fop_agg(:h, id) AS a, cpht_fop_agg(:h, id) AS b FROM stg) s;
SELECT cpht_count(:h);

-- 3. A qual on the aggregate's output is not pushed down into the subquery
-- (that would evaluate it twice: once in HAVING, once in the output).
SELECT cpht_create(10000) AS h \gset
SELECT new_count FROM (SELECT cpht_fop_agg(:h, id) AS new_count FROM stg) s
WHERE new_count > 0;
SELECT cpht_count(:h);
SELECT new_count FROM (SELECT cpht_fop_agg(:h, id) AS new_count FROM stg) s
WHERE new_count > 0;

-- An installation of 0.1 gets the same catalog by ALTER EXTENSION UPDATE.
SELECT cpht_drop_all() >= 0 AS dropped;
DROP EXTENSION cpht;
CREATE EXTENSION cpht VERSION '0.1';
SELECT provolatile FROM pg_proc WHERE oid = 'cpht_fop_agg(int, bigint)'::regprocedure;
ALTER EXTENSION cpht UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'cpht';
SELECT provolatile FROM pg_proc WHERE oid = 'cpht_fop_agg(int, bigint)'::regprocedure;
-- 0.2: shared tables (cpht_open, cpht_create's name, cpht_tables' new columns)
SELECT 'cpht_open(text)'::regprocedure AS open,
	pg_get_function_identity_arguments('cpht_create'::regproc) AS create_arguments;
SELECT array_agg(a ORDER BY n) AS cpht_tables_columns
FROM unnest((SELECT proargnames FROM pg_proc WHERE proname = 'cpht_tables')) WITH ORDINALITY AS u(a, n);
