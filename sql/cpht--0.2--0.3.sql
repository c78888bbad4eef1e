/* cpht 0.2 -> 0.3: privileges, quotas and safe defaults */
\echo Use "ALTER EXTENSION cpht UPDATE TO '0.3'" to load this file. \quit


-- ---- Privileges and owners of shared tables --------------------------------
-- Functions that read or write server files, and cpht_checkpoint (which
-- writes every changed durable table of every database and so stalls
-- durable writes, as CHECKPOINT does), are no longer executable by PUBLIC.
-- Their C functions check the role as well (pg_read_server_files,
-- pg_write_server_files, pg_checkpoint), so a GRANT made by mistake lets
-- no other role in.  EXECUTE goes to those predefined roles instead, so
-- their members may run these functions as they may run CHECKPOINT and
-- COPY to and from files.  cpht_create stays executable by PUBLIC: it
-- creates private tables, and for a shared or durable table it checks that
-- the role has CREATE on the database.
REVOKE EXECUTE ON FUNCTION cpht_checkpoint() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cpht_checkpoint() TO pg_checkpoint;
REVOKE EXECUTE ON FUNCTION cpht_export_file(int, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cpht_export_file(int, text) TO pg_write_server_files;
REVOKE EXECUTE ON FUNCTION cpht_import_file(int, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cpht_import_file(int, text) TO pg_read_server_files;

COMMENT ON FUNCTION cpht_checkpoint() IS
'writes a snapshot of every durable shared table that changed since its last one, lets the server remove the WAL before the oldest snapshot, and returns how many it wrote (superusers and members of pg_checkpoint)';

-- A shared table's owner can be changed, as ALTER ... OWNER TO changes an
-- object's: by the owner (or a role with its privileges) or a superuser,
-- to a role the caller is a member of, by a role with CREATE on the
-- database.  It takes effect at once (no transaction block), and a durable
-- table keeps its new owner across restarts.
CREATE FUNCTION cpht_alter_owner(name text, new_owner regrole)
RETURNS void
AS 'MODULE_PATHNAME', 'cpht_alter_owner'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION cpht_alter_owner(text, regrole) IS
'makes new_owner the owner of shared table name of this database, at once; durable tables keep it across restarts';
