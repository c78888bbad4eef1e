/* cpht--0.1--0.1.1.sql — upgrade from 0.1 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION cpht UPDATE TO '0.1.1'" to load this file. \quit

-- CREATE AGGREGATE has no volatility clause and records every aggregate as
-- IMMUTABLE.  cpht_fop_agg inserts keys, so the planner must treat it as
-- VOLATILE: an immutable aggregate is dropped when its output is unused,
-- merged with an identical call in the same query, and copied into a pushed
-- down qual, so the keys were inserted never or twice.  The planner reads
-- the aggregate's own pg_proc row for this (not its support functions').
UPDATE pg_catalog.pg_proc
SET provolatile = 'v'
WHERE oid = 'cpht_fop_agg(int, bigint)'::pg_catalog.regprocedure;
