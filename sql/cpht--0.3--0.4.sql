/* cpht 0.3 -> 0.4 */
\echo Use "ALTER EXTENSION cpht UPDATE TO '0.4'" to load this file. \quit

-- Each change below has its own headed section.

-- ---------------------------------------------------------------------------
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
