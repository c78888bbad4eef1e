-- One repetition of sql-call-timing.sql: two fresh tables, four calls.
SELECT cpht_create(100000000) AS h \gset
SELECT cpht_create(100000000, transactional => false) AS hn \gset
\echo == table column, transactional, new keys
SELECT cardinality(cpht_fop(:h, a)) FROM a50;
\echo == in memory, transactional, all present
SELECT cardinality(cpht_fop(:h, array_cat(a, '{}'))) FROM a50;
\echo == in memory, non-transactional, new keys
SELECT cardinality(cpht_fop(:hn, array_cat(a, '{}'))) FROM a50;
\echo == in memory, non-transactional, all present
SELECT cardinality(cpht_fop(:hn, array_cat(a, '{}'))) FROM a50;
BEGIN;
SELECT cpht_drop(:h), cpht_drop(:hn);
COMMIT;
