/*
 * memcap.c — cpht.max_memory: what one session may hold, and making sure a
 * cap a superuser set is the one in force.
 *
 * Counting.  Tables are counted by the slot memory they were created with,
 * which session/handles.c (live tables) and session/txn.c (tables whose
 * drop has not committed yet) add and take away here as they change; what
 * a table grows by, and both layouts while it grows, the kernels count
 * through memory_hook() like their undo logs.  The batch buffers
 * of the streaming functions and the rows cpht_fop_rows holds per batch are
 * reserved here before they are allocated and released when freed.  The
 * undo logs grow inside the kernels, possibly on a stream's helper thread,
 * so the kernels ask memory_hook() (cpht_set_memory_hook) first: it weighs
 * the growth against the cap using an atomic count of what the kernels
 * hold and a snapshot of the rest, which this thread refreshes
 * (cpht_memory_sync) before every table call, and a refusal becomes
 * CPHT_ERR_LIMIT, 53400, with the call undone.
 *
 * Keeping the cap.  A cap set by a superuser for a role or database
 * (ALTER ROLE/DATABASE ... SET) or in the configuration files must hold
 * whatever the session asks for at connection time.  When cpht is loaded
 * into a running session (not from shared_preload_libraries), its settings
 * existed only as placeholders while the connection was set up, and a
 * placeholder keeps just the one value of the highest-priority source.  A
 * non-superuser's PGOPTIONS='-c cpht.max_memory=0' (source "client")
 * outranks the role's setting, so the placeholder holds only it; when
 * DefineCustomIntVariable() then re-applies that value for the real,
 * superuser-only variable, the role may not set it and the value is
 * dropped with a WARNING — and the role's and database's values are gone
 * with it, leaving the default (no limit).  So once per session, in a
 * transaction, cpht applies the configuration files' and pg_db_role_setting's
 * values of cpht.max_memory again, in the order and with the sources the
 * connection start uses.  GUC priorities make this harmless where nothing
 * was lost: a value from a higher-priority source that was accepted (a
 * superuser's PGOPTIONS or SET) stays in force.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "utils/rel.h"
#include "access/xact.h"
#include "catalog/indexing.h"
#include "catalog/pg_db_role_setting.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/snapmgr.h"

#include "cpht_table.h"
#include "guc.h"
#include "memcap.h"

#define MAX_MEMORY_NAME "cpht.max_memory"

/* Slot memory of the session's tables, live or dropped by the open
 * transaction (cpht_memory_tables_changed). */
static uint64 tables_held = 0;

/* Bytes reserved by cpht_memory_reserve() and not released yet. */
static uint64 buffers_held = 0;

/* Undo log bytes the kernels hold (changed from any thread). */
static CphtMemCounter kernel_held;

/* Everything else, as of the last cpht_memory_sync(), for memory_hook. */
static pg_atomic_uint64 other_held;

/* Whether the superuser-set values have been applied again. */
static bool cap_settled = false;

/* The last value of cpht.max_memory in one configuration file, if any. */
static char *
file_value(const char *file, char *found)
{
	ConfigVariable *head = NULL,
			   *tail = NULL;

	/* A file that cannot be read keeps what the server read at start. */
	if (!ParseConfigFile(file, false, NULL, 0, 0, LOG, &head, &tail))
	{
		FreeConfigVariables(head);
		return found;
	}
	for (ConfigVariable *v = head; v; v = v->next)
		if (pg_strcasecmp(v->name, MAX_MEMORY_NAME) == 0)
			found = pstrdup(v->value);
	FreeConfigVariables(head);
	return found;
}

/* cpht.max_memory in one row of pg_db_role_setting, or NULL. */
static char *
role_setting_value(Relation rel, Snapshot snapshot, Oid database, Oid role)
{
	ScanKeyData keys[2];
	SysScanDesc scan;
	HeapTuple	tuple;
	char	   *found = NULL;

	ScanKeyInit(&keys[0], Anum_pg_db_role_setting_setdatabase,
				BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(database));
	ScanKeyInit(&keys[1], Anum_pg_db_role_setting_setrole,
				BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(role));
	scan = systable_beginscan(rel, DbRoleSettingDatidRolidIndexId, true,
							  snapshot, 2, keys);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		bool		isnull;
		Datum		d = heap_getattr(tuple, Anum_pg_db_role_setting_setconfig,
									 RelationGetDescr(rel), &isnull);
		Datum	   *elems;
		bool	   *nulls;
		int			n;

		if (isnull)
			continue;
		deconstruct_array(DatumGetArrayTypeP(d), TEXTOID, -1, false, TYPALIGN_INT,
						  &elems, &nulls, &n);
		for (int i = 0; i < n; i++)
		{
			char	   *name;
			char	   *value;

			if (nulls[i])
				continue;
			ParseLongOption(TextDatumGetCString(elems[i]), &name, &value);
			if (value && pg_strcasecmp(name, MAX_MEMORY_NAME) == 0)
				found = value;
		}
	}
	systable_endscan(scan);
	return found;
}

static void
apply(const char *value, GucContext context, GucSource source)
{
	if (value)
		(void) set_config_option(MAX_MEMORY_NAME, value, context, source,
								 GUC_ACTION_SET, true, WARNING, false);
}

void
cpht_memory_settle(void)
{
	Relation	rel;
	Snapshot	snapshot;
	Oid			role = GetSessionUserId();
	Oid			database = MyDatabaseId;
	char	   *from_file = NULL;

	/* Catalogs can be read only in a transaction of a connected backend. */
	if (cap_settled || !IsTransactionState() || !OidIsValid(database))
		return;
	cap_settled = true;

	/* postgresql.conf, then postgresql.auto.conf (ALTER SYSTEM), which
	 * overrides it, as the server reads them. */
	from_file = file_value(ConfigFileName, from_file);
	from_file = file_value(PG_AUTOCONF_FILENAME, from_file);
	apply(from_file, PGC_SIGHUP, PGC_S_FILE);

	/* As the connection start applies them (postinit.c), most specific first;
	 * a source never overrides a value of a higher-priority one. */
	rel = table_open(DbRoleSettingRelationId, AccessShareLock);
	snapshot = RegisterSnapshot(GetCatalogSnapshot(DbRoleSettingRelationId));
	apply(role_setting_value(rel, snapshot, database, role), PGC_SUSET, PGC_S_DATABASE_USER);
	apply(role_setting_value(rel, snapshot, InvalidOid, role), PGC_SUSET, PGC_S_USER);
	apply(role_setting_value(rel, snapshot, database, InvalidOid), PGC_SUSET, PGC_S_DATABASE);
	apply(role_setting_value(rel, snapshot, InvalidOid, InvalidOid), PGC_SUSET, PGC_S_GLOBAL);
	UnregisterSnapshot(snapshot);
	table_close(rel, AccessShareLock);
}

void
cpht_memcounter_init(CphtMemCounter *c)
{
	pg_atomic_init_u64(&c->count, 0);
}

int64
cpht_memcounter_read(CphtMemCounter *c)
{
	return (int64) pg_atomic_read_u64(&c->count);
}

bool
cpht_memcounter_add(CphtMemCounter *c, int64 delta, int64 limit)
{
	uint64		old;

	if (delta <= 0)
	{
		pg_atomic_fetch_add_u64(&c->count, delta);
		return true;
	}
	old = pg_atomic_read_u64(&c->count);
	for (;;)
	{
		/* counts are bytes, far from overflowing an int64 */
		if (limit != PG_INT64_MAX && (int64) old + delta > limit)
			return false;
		if (pg_atomic_compare_exchange_u64(&c->count, &old, old + (uint64) delta))
			return true;
	}
}

/* The kernels' question: may they take delta more bytes?  Only atomics
 * and a plain read of the setting: it may run on a helper thread. */
static int
memory_hook(int64_t delta)
{
	int			cap_kb = cpht_max_memory_kb;
	int64		limit = PG_INT64_MAX;

	if (cap_kb > 0)
		limit = (int64) cap_kb * 1024 - (int64) pg_atomic_read_u64(&other_held);
	return cpht_memcounter_add(&kernel_held, delta, limit) ? 1 : 0;
}

void
cpht_memory_init(void)
{
	cpht_memcounter_init(&kernel_held);
	pg_atomic_init_u64(&other_held, 0);
	cpht_set_memory_hook(memory_hook);
}

void
cpht_memory_sync(void)
{
	/* Only a cap compares against it. */
	pg_atomic_write_u64(&other_held, cpht_max_memory_kb > 0 ?
						tables_held + buffers_held : 0);
}

void
cpht_memory_tables_changed(int64 delta)
{
	Assert(delta >= 0 || (uint64) -delta <= tables_held);
	if (delta >= 0)
		tables_held += (uint64) delta;
	else
		tables_held -= Min((uint64) -delta, tables_held);
}

uint64
cpht_memory_held(void)
{
	return tables_held + buffers_held + (uint64) Max(cpht_memcounter_read(&kernel_held), 0);
}

void
cpht_memory_check(uint64 bytes, const char *what)
{
	uint64		held;
	uint64		cap;

	cpht_memory_settle();
	if (cpht_max_memory_kb <= 0)
		return;
	cap = (uint64) cpht_max_memory_kb * 1024;
	held = cpht_memory_held();
	if (held + bytes > cap || bytes > cap)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("%s of " UINT64_FORMAT " bytes would exceed cpht.max_memory", what, bytes),
				 errdetail("This session's cpht tables and buffers hold " UINT64_FORMAT " bytes (dropped tables until their transaction commits) and cpht.max_memory is %d kB.",
						   held, cpht_max_memory_kb),
				 errhint("Drop tables with cpht_drop(), use a smaller table, cpht.batch_size or cpht.batch_memory, or ask a superuser to raise cpht.max_memory.")));
}

void
cpht_memory_reserve(uint64 bytes, const char *what)
{
	cpht_memory_check(bytes, what);
	buffers_held += bytes;
	cpht_memory_sync();
}

void
cpht_memory_release(uint64 bytes)
{
	Assert(bytes <= buffers_held);
	buffers_held -= Min(bytes, buffers_held);
	cpht_memory_sync();
}

static void
reserved_release(void *arg)
{
	CphtReserved *r = arg;

	cpht_memory_release(r->bytes);
	r->bytes = 0;
}

void
cpht_reserved_init(CphtReserved *r, MemoryContext cxt)
{
	r->bytes = 0;
	r->release.func = reserved_release;
	r->release.arg = r;
	MemoryContextRegisterResetCallback(cxt, &r->release);
}

void
cpht_reserved_add(CphtReserved *r, uint64 bytes, const char *what)
{
	cpht_memory_reserve(bytes, what);
	r->bytes += bytes;
}

void
cpht_reserved_sub(CphtReserved *r, uint64 bytes)
{
	Assert(bytes <= r->bytes);
	cpht_memory_release(bytes);
	r->bytes -= bytes;
}

void
cpht_memory_worker_delta(int64 delta)
{
	/* never below nothing held, whatever the worker reports */
	(void) cpht_memcounter_add(&kernel_held, Max(delta, -Max(cpht_memcounter_read(&kernel_held), 0)),
							   PG_INT64_MAX);
}

uint64
cpht_memory_budget(void)
{
	uint64		cap,
				held;

	if (cpht_max_memory_kb <= 0)
		return PG_UINT64_MAX;
	cap = (uint64) cpht_max_memory_kb * 1024;
	held = cpht_memory_held();
	return held >= cap ? 0 : cap - held;
}

/*
 * The cpht.max_memory set for role itself (ALTER ROLE ... [IN DATABASE
 * this one] SET), in kB; 0 when none is.  A shared table a superuser
 * creates after SET ROLE to a capped role, or gives to one, is held to
 * that role's cap too, not only to the session's (quota.c).
 */
int
cpht_memory_role_cap_kb(Oid role)
{
	Relation	rel;
	Snapshot	snapshot;
	char	   *value;
	int			kb = 0;
	const char *hint = NULL;

	rel = table_open(DbRoleSettingRelationId, AccessShareLock);
	snapshot = RegisterSnapshot(GetCatalogSnapshot(DbRoleSettingRelationId));
	value = role_setting_value(rel, snapshot, MyDatabaseId, role);
	if (value == NULL)
		value = role_setting_value(rel, snapshot, InvalidOid, role);
	UnregisterSnapshot(snapshot);
	table_close(rel, AccessShareLock);
	if (value == NULL || !parse_int(value, &kb, GUC_UNIT_KB, &hint) || kb < 0)
		return 0;
	return kb;
}
