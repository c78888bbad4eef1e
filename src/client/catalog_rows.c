/*
 * client/catalog_rows.c — the rows of the table cpht_shared_tables, the
 * definitions of this database's shared tables, which pg_dump carries:
 * written as shared tables are created, dropped and given to other roles
 * (api/shared.c, client/owners.c); the table's trigger and
 * cpht_catalog_sync() are api/catalog_sync.c's.
 *
 * Shared tables live in the cpht worker, not in the database's catalogs,
 * so pg_dump would carry none of them.  The extension's table
 * cpht_shared_tables holds one row per shared table of the database (its
 * name, owner, kind, capacity, key width, transactional, durable, shards)
 * and is registered with pg_extension_config_dump: a dump holds its rows,
 * and a restore inserts them after CREATE EXTENSION.  Its AFTER INSERT
 * trigger (cpht_shared_tables_created) then creates each table the row
 * names and the worker does not hold, owned by the row's owner, bound to
 * the inserting transaction (client/ddl_xact.c): a restore that fails
 * creates nothing; a table that cannot be made keeps its row (a WARNING).  Keys are not carried (docs/dump-restore.md says how).
 *
 * In step.  cpht_create with a name inserts the row, cpht_drop of a shared
 * table deletes it, cpht_alter_owner and REASSIGN OWNED update it and
 * DROP OWNED deletes it, each in the calling transaction, as the table's owner role (the extension's owner): the
 * table's privileges let every role read it and none write it.  A
 * creation or drop made outside a transaction block takes effect in the
 * worker at once, while its row follows the statement's transaction, so
 * a statement that fails after it leaves the two apart:
 * cpht_catalog_sync() writes the rows again from the worker.  Without the
 * table (an extension not updated to 0.4) nothing is written.
 *
 * Every statement built here qualifies its objects and operators.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/skey.h"
#include "access/table.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "client/client.h"

#define CATALOG_TABLE "cpht_shared_tables"

/* The schema of extension ext (PostgreSQL 15 keeps its own lookup static). */
static Oid
extension_schema(Oid ext)
{
	Relation	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	Oid			nsp = InvalidOid;

	ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(ext));
	scan = systable_beginscan(rel, ExtensionOidIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
		nsp = ((Form_pg_extension) GETSTRUCT(tup))->extnamespace;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return nsp;
}

/* The qualified name of the table and its owner; false where it does not
 * exist (no extension here, or one not updated yet) or may not be written
 * (a standby). */
bool
cpht_catalog_table(char **qualified, Oid *owner, char **schema_out)
{
	Oid			ext;
	Oid			nsp;
	Oid			rel;
	HeapTuple	tup;
	char	   *schema;

	/*
	 * A standby writes nothing: its shared tables (not durable) are its
	 * own, and the primary's rows reach it with the rest of the database.
	 */
	if (RecoveryInProgress())
		return false;
	ext = get_extension_oid("cpht", true);
	if (!OidIsValid(ext))
		return false;
	nsp = extension_schema(ext);
	if (!OidIsValid(nsp))
		return false;
	rel = get_relname_relid(CATALOG_TABLE, nsp);
	if (!OidIsValid(rel))
		return false;
	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(rel));
	if (!HeapTupleIsValid(tup))
		return false;
	*owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	ReleaseSysCache(tup);
	schema = get_namespace_name(nsp);
	*qualified = psprintf("%s.%s", quote_identifier(schema), CATALOG_TABLE);
	if (schema_out)
		*schema_out = schema;
	return true;
}

/* Runs sql (with $n parameters) as the table's owner. */
uint64
cpht_catalog_exec_as_owner(Oid owner, const char *sql, int nargs, Oid *types, Datum *values,
			  const char *nulls)
{
	Oid			save_user;
	int			save_sec;
	int			rc;
	uint64		n;

	GetUserIdAndSecContext(&save_user, &save_sec);
	SetUserIdAndSecContext(owner, save_sec | SECURITY_LOCAL_USERID_CHANGE);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	rc = SPI_execute_with_args(sql, nargs, types, values, nulls, false, 0);
	if (rc < 0)
		elog(ERROR, "cpht could not write %s: SPI error %d", CATALOG_TABLE, rc);
	n = SPI_processed;
	SPI_finish();
	SetUserIdAndSecContext(save_user, save_sec);
	return n;
}

void
cpht_catalog_row_created(const char *name, Oid owner, const char *kind, int64 capacity,
						 int32 key_bits, bool transactional, bool durable, int shards)
{
	char	   *table;
	Oid			table_owner;
	Oid			types[8] = {TEXTOID, REGROLEOID, TEXTOID, INT8OID, INT4OID, BOOLOID, BOOLOID, INT4OID};
	Datum		values[8];
	char		nulls[8] = "        ";

	if (!cpht_catalog_table(&table, &table_owner, NULL))
		return;
	values[0] = CStringGetTextDatum(name);
	values[1] = ObjectIdGetDatum(owner);
	values[2] = CStringGetTextDatum(kind);
	values[3] = Int64GetDatum(capacity);
	values[4] = Int32GetDatum(key_bits);
	nulls[4] = key_bits == 0 ? 'n' : ' ';
	values[5] = BoolGetDatum(transactional);
	values[6] = BoolGetDatum(durable);
	values[7] = Int32GetDatum(shards);
	nulls[7] = shards <= 0 ? 'n' : ' ';
	/* a restore's row is there already: its trigger made this table */
	(void) cpht_catalog_exec_as_owner(table_owner, psprintf(
		"INSERT INTO %s (name, owner, kind, capacity, key_bits, transactional, durable, shards) "
		"VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (name) DO NOTHING", table),
		8, types, values, nulls);
}

void
cpht_catalog_row_dropped(const char *name)
{
	char	   *table;
	Oid			table_owner;
	Oid			types[1] = {TEXTOID};
	Datum		values[1];

	if (!cpht_catalog_table(&table, &table_owner, NULL))
		return;
	values[0] = CStringGetTextDatum(name);
	(void) cpht_catalog_exec_as_owner(table_owner, psprintf(
		"DELETE FROM %s WHERE name OPERATOR(pg_catalog.=) $1", table),
		1, types, values, NULL);
}

void
cpht_catalog_row_owner(const char *name, Oid owner)
{
	char	   *table;
	Oid			table_owner;
	Oid			types[2] = {TEXTOID, REGROLEOID};
	Datum		values[2];

	if (!cpht_catalog_table(&table, &table_owner, NULL))
		return;
	values[0] = CStringGetTextDatum(name);
	values[1] = ObjectIdGetDatum(owner);
	(void) cpht_catalog_exec_as_owner(table_owner, psprintf(
		"UPDATE %s SET owner = $2 WHERE name OPERATOR(pg_catalog.=) $1", table),
		2, types, values, NULL);
}

/*
 * REASSIGN OWNED BY old TO new: the rows of old's tables name new; DROP
 * OWNED BY old (new invalid): they go, as the tables do at commit
 * (owners.c).
 */
void
cpht_catalog_rows_reassign(Oid old_owner, Oid new_owner)
{
	char	   *table;
	Oid			table_owner;
	Oid			types[2] = {REGROLEOID, REGROLEOID};
	Datum		values[2];

	if (!cpht_catalog_table(&table, &table_owner, NULL))
		return;
	values[0] = ObjectIdGetDatum(old_owner);
	values[1] = ObjectIdGetDatum(new_owner);
	if (OidIsValid(new_owner))
		(void) cpht_catalog_exec_as_owner(table_owner, psprintf(
			"UPDATE %s SET owner = $2 WHERE owner OPERATOR(pg_catalog.=) $1", table),
			2, types, values, NULL);
	else
		(void) cpht_catalog_exec_as_owner(table_owner, psprintf(
			"DELETE FROM %s WHERE owner OPERATOR(pg_catalog.=) $1", table),
			1, types, values, NULL);
}
