/*
 * catalog_sync.c — the SQL side of cpht_shared_tables (client/catalog_rows.c
 * writes its rows): the trigger that creates, at a restore, the shared
 * tables its rows define, and cpht_catalog_sync(), which writes the rows
 * again from the cpht worker.
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
#include "access/tupdesc.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
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
 * The shared table a row of cpht_shared_tables defines, unless the worker
 * holds one of that name: owned by the row's owner, bound to the current
 * transaction even outside a transaction block (a restore whose COPY
 * fails leaves no table behind).  Made in a subtransaction of its own: a
 * table that cannot be made (no room, a role's cap) gives a WARNING with
 * the reason and keeps its row, and the other rows' tables are made all
 * the same.  True when it made the table.
 */
static bool
create_from_row(HeapTuple row, TupleDesc desc)
{
	bool		isnull;
	char	   *name = TextDatumGetCString(column(row, desc, "name", &isnull));
	Oid			owner = DatumGetObjectId(column(row, desc, "owner", &isnull));
	char	   *table;
	char	   *schema;
	Oid			table_owner;
	Oid			types[7] = {INT8OID, TEXTOID, INT4OID, BOOLOID, TEXTOID, INT4OID, BOOLOID};
	Datum		values[7];
	char		nulls[7] = "       ";
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner_before = CurrentResourceOwner;
	bool		made = false;

	if (cpht_shared_exists(name) || !cpht_catalog_table(&table, &table_owner, &schema))
		return false;
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
	values[0] = column(row, desc, "capacity", &isnull);
	values[1] = column(row, desc, "kind", &isnull);
	values[2] = column(row, desc, "key_bits", &isnull);
	nulls[2] = isnull ? 'n' : ' ';
	values[3] = column(row, desc, "transactional", &isnull);
	values[4] = CStringGetTextDatum(name);
	values[5] = column(row, desc, "shards", &isnull);
	nulls[5] = isnull ? 'n' : ' ';
	values[6] = column(row, desc, "durable", &isnull);

	/* a subtransaction: the creation follows it, as inside a block
	 * (client/ddl_xact.c), and its rollback drops the table */
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
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
		cpht_shared_create_as(InvalidOid);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner_before;
		made = true;
	}
	PG_CATCH();
	{
		ErrorData  *ed;

		cpht_shared_create_as(InvalidOid);
		MemoryContextSwitchTo(cxt);
		ed = CopyErrorData();
		FlushErrorState();
		/* the subtransaction's abort drops what it made (client/ddl_xact.c) */
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner_before;
		ereport(WARNING,
				(errcode(ed->sqlerrcode),
				 errmsg("shared cpht table \"%s\" could not be created from its row in %s", name, CATALOG_TABLE),
				 errdetail("%s", ed->message),
				 errhint("The row stays; once the cause is fixed, SELECT cpht_catalog_sync() creates the table.")));
		FreeErrorData(ed);
	}
	PG_END_TRY();
	if (made)
		ereport(NOTICE,
				(errmsg("shared cpht table \"%s\" created from its row in %s", name, CATALOG_TABLE)));
	return made;
}

/*
 * AFTER INSERT FOR EACH ROW: the shared table a new row defines
 * (create_from_row), as a restore inserts the rows.  Without cpht in
 * shared_preload_libraries the row stays and a WARNING says the table was
 * not made.
 */
PG_FUNCTION_INFO_V1(cpht_shared_tables_created);
Datum
cpht_shared_tables_created(PG_FUNCTION_ARGS)
{
	TriggerData *trig = (TriggerData *) fcinfo->context;
	bool		isnull;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_AFTER(trig->tg_event) ||
		!TRIGGER_FIRED_FOR_ROW(trig->tg_event) || !TRIGGER_FIRED_BY_INSERT(trig->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("cpht_shared_tables_created must be fired after insert for each row")));
	if (cpht_control == NULL)
	{
		ereport(WARNING,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("shared cpht table \"%s\" was not created",
						TextDatumGetCString(column(trig->tg_trigtuple, RelationGetDescr(trig->tg_relation),
												   "name", &isnull))),
				 errdetail("cpht is not in shared_preload_libraries: there is no cpht worker to hold it."),
				 errhint("Its row stays in %s; with cpht preloaded, SELECT cpht_catalog_sync() creates the table.", CATALOG_TABLE)));
		return PointerGetDatum(NULL);
	}
	(void) create_from_row(trig->tg_trigtuple, RelationGetDescr(trig->tg_relation));
	return PointerGetDatum(NULL);
}

/*
 * cpht_catalog_sync(): cpht_shared_tables and the shared tables the worker
 * holds in this database (committed ones) made to agree, neither losing
 * anything: a row written for each table without one (or updated where it
 * differs), and each row's table created where the worker holds none
 * (create_from_row), as after a restart of the server (shared tables that
 * are not durable are gone; their definitions stay, as an unlogged
 * table's do), a restore into a server without cpht preloaded, or a row
 * whose table could not be made.  Returns how many rows and tables it
 * wrote.  A row stays until its table is dropped with cpht_drop (a drop
 * in a statement that failed afterwards leaves it: drop the table again).
 */
PG_FUNCTION_INFO_V1(cpht_catalog_sync);
Datum
cpht_catalog_sync(PG_FUNCTION_ARGS)
{
	char	   *table;
	Oid			table_owner;
	uint64		changed = 0;
	uint64		nrows;
	HeapTuple  *rows;
	TupleDesc	desc;
	MemoryContext cxt = CurrentMemoryContext;

	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cpht_catalog_sync() cannot run on a standby"),
				 errdetail("The rows of %s are the primary's.", CATALOG_TABLE)));
	if (!cpht_catalog_table(&table, &table_owner, NULL))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table %s does not exist", CATALOG_TABLE),
				 errhint("Update the extension: ALTER EXTENSION cpht UPDATE.")));
	if (cpht_control == NULL)
		PG_RETURN_INT64(0);
	cpht_shared_wait_restored();
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
		values[2] = CStringGetTextDatum(cpht_kind_name(e.kind));
		values[3] = Int64GetDatum(e.capacity);
		values[4] = Int32GetDatum(e.key_bits);
		nulls[4] = e.key_bits == 0 ? 'n' : ' ';
		values[5] = BoolGetDatum(e.transactional);
		values[6] = BoolGetDatum(e.durable);
		changed += cpht_catalog_exec_as_owner(table_owner, psprintf(
			"INSERT INTO %s AS t (name, owner, kind, capacity, key_bits, transactional, durable) "
			"VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (name) DO UPDATE "
			"SET owner = excluded.owner, kind = excluded.kind, key_bits = excluded.key_bits, "
			"transactional = excluded.transactional, durable = excluded.durable "
			"WHERE (t.owner, t.kind, t.key_bits, t.transactional, t.durable) IS DISTINCT FROM "
			"(excluded.owner, excluded.kind, excluded.key_bits, excluded.transactional, excluded.durable)",
			table), 7, types, values, nulls);
	}
	/* the rows, copied out before any table is made (which runs SPI too) */
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute(psprintf("SELECT * FROM %s ORDER BY name", table), true, 0) != SPI_OK_SELECT)
		elog(ERROR, "cpht could not read %s", CATALOG_TABLE);
	nrows = SPI_processed;
	{
		MemoryContext spi = MemoryContextSwitchTo(cxt);

		desc = CreateTupleDescCopy(SPI_tuptable->tupdesc);
		rows = palloc(sizeof(HeapTuple) * Max(nrows, 1));
		for (uint64 r = 0; r < nrows; r++)
			rows[r] = heap_copytuple(SPI_tuptable->vals[r]);
		MemoryContextSwitchTo(spi);
	}
	SPI_finish();
	for (uint64 r = 0; r < nrows; r++)
		if (create_from_row(rows[r], desc))
			changed++;
	PG_RETURN_INT64((int64) changed);
}
