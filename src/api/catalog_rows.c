/*
 * catalog_rows.c — the table cpht_shared_tables, the definitions of this
 * database's shared tables, which pg_dump carries.
 *
 * Shared tables live in the cpht worker, not in the database's catalogs,
 * so pg_dump would carry none of them.  The extension's table
 * cpht_shared_tables holds one row per shared table of the database (its
 * name, owner, kind, capacity, key width, transactional, durable, shards)
 * and is registered with pg_extension_config_dump: a dump holds its rows,
 * and a restore inserts them after CREATE EXTENSION.  Its AFTER INSERT
 * trigger (cpht_shared_tables_created) then creates each table the row
 * names and the worker does not hold, owned by the row's owner, bound to
 * the inserting transaction (client/ddl_xact.c): a restore that fails creates
 * nothing.  Keys are not carried (docs/dump-restore.md says how).
 *
 * In step.  cpht_create with a name inserts the row, cpht_drop of a shared
 * table deletes it and cpht_alter_owner updates it, each in the calling
 * transaction, as the table's owner role (the extension's owner): the
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

#include "api/lifecycle.h"
#include "client/client.h"
#include "session/session.h"

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
 * exist (no extension here, or one not updated yet). */
static bool
catalog_table(char **qualified, Oid *owner, char **schema_out)
{
	Oid			ext = get_extension_oid("cpht", true);
	Oid			nsp;
	Oid			rel;
	HeapTuple	tup;
	char	   *schema;

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
static uint64
exec_as_owner(Oid owner, const char *sql, int nargs, Oid *types, Datum *values,
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

	if (!catalog_table(&table, &table_owner, NULL))
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
	(void) exec_as_owner(table_owner, psprintf(
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

	if (!catalog_table(&table, &table_owner, NULL))
		return;
	values[0] = CStringGetTextDatum(name);
	(void) exec_as_owner(table_owner, psprintf(
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

	if (!catalog_table(&table, &table_owner, NULL))
		return;
	values[0] = CStringGetTextDatum(name);
	values[1] = ObjectIdGetDatum(owner);
	(void) exec_as_owner(table_owner, psprintf(
		"UPDATE %s SET owner = $2 WHERE name OPERATOR(pg_catalog.=) $1", table),
		2, types, values, NULL);
}

/* The value of column name of a row (isnull set). */
static Datum
column(HeapTuple tuple, TupleDesc desc, const char *name, bool *isnull)
{
	int			attno = SPI_fnumber(desc, name);

	if (attno <= 0)
		elog(ERROR, "%s has no column \"%s\"", CATALOG_TABLE, name);
	return heap_getattr(tuple, attno, desc, isnull);
}

/*
 * AFTER INSERT FOR EACH ROW: the shared table a new row names, unless the
 * worker holds it (cpht_create inserted the row).  Owned by the row's
 * owner, bound to this transaction even outside a transaction block, so a
 * restore whose COPY fails leaves no table behind.  Without cpht in
 * shared_preload_libraries the row stays and a WARNING says the table was
 * not made.
 */
PG_FUNCTION_INFO_V1(cpht_shared_tables_created);
Datum
cpht_shared_tables_created(PG_FUNCTION_ARGS)
{
	TriggerData *trig = (TriggerData *) fcinfo->context;
	TupleDesc	desc;
	HeapTuple	row;
	bool		isnull;
	char	   *name;
	Oid			owner;
	char	   *table;
	char	   *schema;
	Oid			table_owner;
	Oid			types[7] = {INT8OID, TEXTOID, INT4OID, BOOLOID, TEXTOID, INT4OID, BOOLOID};
	Datum		values[7];
	char		nulls[7] = "       ";

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_AFTER(trig->tg_event) ||
		!TRIGGER_FIRED_FOR_ROW(trig->tg_event) || !TRIGGER_FIRED_BY_INSERT(trig->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("cpht_shared_tables_created must be fired after insert for each row")));
	desc = RelationGetDescr(trig->tg_relation);
	row = trig->tg_trigtuple;
	name = TextDatumGetCString(column(row, desc, "name", &isnull));
	owner = DatumGetObjectId(column(row, desc, "owner", &isnull));

	if (cpht_control == NULL)
	{
		ereport(WARNING,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("shared cpht table \"%s\" was not created", name),
				 errdetail("cpht is not in shared_preload_libraries: there is no cpht worker to hold it."),
				 errhint("Its row stays in %s; with cpht preloaded, delete the row and insert it again to create the table.", CATALOG_TABLE)));
		return PointerGetDatum(NULL);
	}
	if (cpht_shared_exists(name))
		return PointerGetDatum(NULL);
	if (!catalog_table(&table, &table_owner, &schema))
		return PointerGetDatum(NULL);

	values[0] = column(row, desc, "capacity", &isnull);
	values[1] = column(row, desc, "kind", &isnull);
	values[2] = column(row, desc, "key_bits", &isnull);
	nulls[2] = isnull ? 'n' : ' ';
	values[3] = column(row, desc, "transactional", &isnull);
	values[4] = CStringGetTextDatum(name);
	values[5] = column(row, desc, "shards", &isnull);
	nulls[5] = isnull ? 'n' : ' ';
	values[6] = column(row, desc, "durable", &isnull);

	/*
	 * Made by the restoring role and given to the row's owner, as
	 * pg_restore gives every object its owner: the owner need not hold
	 * CREATE on the new database (a dump does not carry that grant), but
	 * the restoring role must be a superuser or have the owner's
	 * privileges, as ALTER ... OWNER TO asks.
	 */
	if (!has_privs_of_role(GetUserId(), owner))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to create shared cpht table \"%s\" owned by role \"%s\"",
						name, GetUserNameFromId(owner, false)),
				 errdetail("Creating a shared table from a row of %s needs the privileges of its owner.", CATALOG_TABLE),
				 errhint("Restore as a superuser, or as a member of that role.")));
	cpht_ddl_bind_to_transaction(true);
	cpht_shared_create_as(owner);
	PG_TRY();
	{
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		if (SPI_execute_with_args(psprintf(
				"SELECT %s.cpht_create($1, $2, $3, $4, name => $5, shards => $6, durable => $7)",
				quote_identifier(schema)), 7, types, values, nulls, false, 0) != SPI_OK_SELECT)
			elog(ERROR, "cpht could not create shared table \"%s\" from %s", name, CATALOG_TABLE);
		SPI_finish();
	}
	PG_FINALLY();
	{
		cpht_ddl_bind_to_transaction(false);
		cpht_shared_create_as(InvalidOid);
	}
	PG_END_TRY();
	ereport(NOTICE,
			(errmsg("shared cpht table \"%s\" created from its row in %s", name, CATALOG_TABLE)));
	return PointerGetDatum(NULL);
}

/*
 * cpht_catalog_sync(): the rows of cpht_shared_tables made those of the
 * shared tables the worker holds in this database (committed ones): a row
 * added for each table without one, updated where it differs, deleted for
 * each name no table has.  Returns how many rows changed.  For a database
 * updated from 0.3, and after a statement that failed between a creation
 * or drop outside a transaction block and the end of its transaction.
 */
PG_FUNCTION_INFO_V1(cpht_catalog_sync);
Datum
cpht_catalog_sync(PG_FUNCTION_ARGS)
{
	char	   *table;
	Oid			table_owner;
	uint64		changed = 0;
	Datum	   *names;
	int			nnames = 0;

	if (!catalog_table(&table, &table_owner, NULL))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table %s does not exist", CATALOG_TABLE),
				 errhint("Update the extension: ALTER EXTENSION cpht UPDATE.")));
	if (cpht_control == NULL)
		PG_RETURN_INT64(0);
	names = palloc(sizeof(Datum) * Max(cpht_control->max_tables, 1));
	for (int i = 0; i < cpht_control->max_tables; i++)
	{
		CphtCatalogEntry e;
		Oid			types[7] = {TEXTOID, REGROLEOID, TEXTOID, INT8OID, INT4OID, BOOLOID, BOOLOID};
		Datum		values[7];
		char		nulls[7] = "       ";

		LWLockAcquire(cpht_control->catalog_lock, LW_SHARED);
		e = cpht_catalog[i];
		LWLockRelease(cpht_control->catalog_lock);
		if (e.state != CPHT_ENTRY_LIVE || e.dboid != MyDatabaseId ||
			TransactionIdIsValid(e.create_xid))
			continue;
		values[0] = CStringGetTextDatum(NameStr(e.name));
		values[1] = ObjectIdGetDatum(e.owner);
		values[2] = CStringGetTextDatum(e.kind == CPHT_CUCKOO ? "cuckoo" : "iceberg");
		values[3] = Int64GetDatum(e.capacity);
		values[4] = Int32GetDatum(e.key_bits);
		nulls[4] = e.key_bits == 0 ? 'n' : ' ';
		values[5] = BoolGetDatum(e.transactional);
		values[6] = BoolGetDatum(e.durable);
		changed += exec_as_owner(table_owner, psprintf(
			"INSERT INTO %s AS t (name, owner, kind, capacity, key_bits, transactional, durable) "
			"VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (name) DO UPDATE "
			"SET owner = excluded.owner, kind = excluded.kind, key_bits = excluded.key_bits, "
			"transactional = excluded.transactional, durable = excluded.durable "
			"WHERE (t.owner, t.kind, t.key_bits, t.transactional, t.durable) IS DISTINCT FROM "
			"(excluded.owner, excluded.kind, excluded.key_bits, excluded.transactional, excluded.durable)",
			table), 7, types, values, nulls);
		names[nnames++] = values[0];
	}
	{
		Oid			types[1] = {TEXTARRAYOID};
		Datum		values[1];

		values[0] = PointerGetDatum(construct_array(names, nnames, TEXTOID, -1, false, TYPALIGN_INT));
		changed += exec_as_owner(table_owner, psprintf(
			"DELETE FROM %s WHERE name OPERATOR(pg_catalog.<>) ALL ($1)", table),
			1, types, values, NULL);
	}
	PG_RETURN_INT64((int64) changed);
}
