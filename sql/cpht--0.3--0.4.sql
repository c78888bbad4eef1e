/* cpht 0.3 -> 0.4 */
\echo Use "ALTER EXTENSION cpht UPDATE TO '0.4'" to load this file. \quit

-- Each change below has its own headed section.

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
