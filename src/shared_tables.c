/*
 * shared_tables.c — shared tables by name (cpht in shared_preload_libraries).
 *
 * cpht_create(..., name => 'x') creates a table in the cpht worker that
 * every session of the database opens with cpht_open('x').  In this
 * version shared tables:
 *   - live in the worker, on the device cpht.device picks there;
 *   - are transactional by default (the worker's xacts.c): a key put or
 *     deleted by an open transaction is seen by others as it was before,
 *     and their writes of that key wait for the transaction to end, as
 *     inserts into a unique index do (client/waits.c); with
 *     transactional => false a key is in the table once the call that put
 *     it returns;
 *   - are created and dropped at once, which no rollback undoes, so
 *     neither runs inside a transaction block (like CREATE DATABASE);
 *   - belong to the creating role: it, its members (has_privs_of_role) and
 *     superusers may use and drop them.
 * Names and privileges are checked here, in the backend, which has the
 * catalogs; the worker checks that the table still exists.
 */
#include "postgres.h"

#include "access/parallel.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_authid.h"
#include "commands/dbcommands.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "guc.h"
#include "errors.h"
#include "handles.h"
#include "lifecycle.h"
#include "memcap.h"
#include "shared_tables.h"

/* cpht_create of 0.1: private tables (lifecycle.c). */
extern Datum cpht_create(PG_FUNCTION_ARGS);

/* Handles this session opened or created for shared tables. */
static int32 *shared_handles = NULL;
static int	nshared = 0;
static int	maxshared = 0;

int32
cpht_shared_handle_of(int32 entry, uint64 table_id)
{
	CphtHandle *h;

	if (table_id == 0 || table_id > CPHT_MAX_SHARED_TABLE_ID)
		return 0;
	h = cpht_handles_shared(CPHT_SHARED_HANDLE_BASE + (int32) table_id);
	return h != NULL && h->shared_entry == entry ? h->handle : 0;
}

int
cpht_shared_open_handles(const int32 **handles)
{
	*handles = shared_handles;
	return nshared;
}

/* How often a cpht worker started: a handle of an older worker's table
 * does not reach the table a later one restored. */
static uint64
worker_generation(void)
{
	uint64		generation;

	SpinLockAcquire(&cpht_control->mutex);
	generation = cpht_control->generation;
	SpinLockRelease(&cpht_control->mutex);
	return generation;
}

/* ERROR for handle, opened before the cpht worker restarted; durable_name
 * names the durable table when it is known. */
static void
restarted_error(int32 handle, const char *durable_name)
{
	if (durable_name == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_SYSTEM_ERROR),
				 errmsg("cpht table %d was opened before the cpht worker restarted", handle),
				 errdetail("Handles of shared tables do not outlive the cpht worker; a durable table is restored by the new worker and reached through a new handle."),
				 errhint("Open the table again with cpht_open().")));
	ereport(ERROR,
			(errcode(ERRCODE_SYSTEM_ERROR),
			 errmsg("cpht table %d was opened before the cpht worker restarted", handle),
			 errdetail("Durable shared table \"%s\" is restored by the new worker and reached through a new handle.",
					   durable_name),
			 errhint("Open the table again with cpht_open('%s').", durable_name)));
}

/*
 * The session's entry for the shared table of catalog entry `entry` (*e a
 * copy of it), registered under the table's handle if it was not yet.
 * The handle is the table's id in the shared range (handles.h), the same
 * number in every session.
 */
static CphtHandle *
register_handle(int32 entry, const CphtCatalogEntry *e)
{
	CphtHandle	h;
	CphtHandle *registered;

	if (e->table_id == 0 || e->table_id > CPHT_MAX_SHARED_TABLE_ID)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("shared cpht table \"%s\" has no handle", NameStr(e->name)),
				 errdetail("Its table id " UINT64_FORMAT " is past the " UINT64_FORMAT " shared tables a server can create between restarts.",
						   e->table_id, CPHT_MAX_SHARED_TABLE_ID),
				 errhint("Restart the server.")));
	registered = cpht_handles_shared(CPHT_SHARED_HANDLE_BASE + (int32) e->table_id);
	if (registered != NULL)
		return registered;

	if (nshared == maxshared)
	{
		maxshared = maxshared ? maxshared * 2 : 8;
		shared_handles = shared_handles
			? repalloc(shared_handles, sizeof(int32) * maxshared)
			: MemoryContextAlloc(TopMemoryContext, sizeof(int32) * maxshared);
	}
	memset(&h, 0, sizeof(h));
	h.handle = CPHT_SHARED_HANDLE_BASE + (int32) e->table_id;
	h.shared = true;
	h.shared_entry = entry;
	h.shared_table_id = e->table_id;
	h.shared_generation = worker_generation();
	h.kind = e->kind;
	h.device = e->device;
	h.key_bits = e->key_bits;
	h.transactional = e->transactional;
	h.capacity = e->capacity;
	h.bytes = e->bytes;
	h.shared_access = cpht_access_shared(0);
	cpht_access_set_handle(h.shared_access, h.handle);
	registered = cpht_handles_add_shared(&h);
	shared_handles[nshared++] = h.handle;
	return registered;
}

static void
check_privileges(const char *name, Oid owner)
{
	if (!has_privs_of_role(GetUserId(), owner))
	{
		char	   *role = GetUserNameFromId(owner, true);

		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for shared cpht table \"%s\"", name),
				 role ?
				 errdetail("Only role \"%s\", its members and superusers may use it.", role) :
				 errdetail("Its owner role was dropped: only superusers may use it.")));
	}
}

static void
lost_error(const CphtCatalogEntry *e)
{
	ereport(ERROR,
			(errcode(ERRCODE_SYSTEM_ERROR),
			 errmsg("shared cpht table \"%s\" was lost", NameStr(e->name)),
			 errdetail("Its memory was in a cpht worker that exited: %s.", e->lost_reason),
			 errhint("Create it again with cpht_create(..., name => %s).", quote_literal_cstr(NameStr(e->name)))));
}

CphtSharedRef
cpht_shared_ref(int32 handle, char *name, Oid *owner)
{
	CphtHandle *h = cpht_handles_use(handle);
	CphtCatalogEntry copy;
	CphtSharedRef ref;

	Assert(h->shared);
	if (h->shared_entry < 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("cpht table %d does not exist", handle),
				 errdetail("It was dropped.")));

	LWLockAcquire(cpht_control->catalog_lock, LW_SHARED);
	copy = cpht_catalog[h->shared_entry];
	LWLockRelease(cpht_control->catalog_lock);

	if (copy.table_id != h->shared_table_id ||
		(copy.state != CPHT_ENTRY_LIVE && copy.state != CPHT_ENTRY_LOST))
	{
		/*
		 * The worker that held the table exited.  A durable table is back
		 * under a new table id (ids are never reused while the server
		 * runs), reached by opening it again; any other was lost, and the
		 * catalog entry may hold another table by now.
		 */
		if (worker_generation() != h->shared_generation)
			restarted_error(handle, NULL);
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("cpht table %d does not exist", handle),
				 errdetail("The shared table it named was dropped.")));
	}
	/* a durable table whose worker exited comes back under a new id */
	if (copy.state == CPHT_ENTRY_LOST && copy.durable)
		restarted_error(handle, NameStr(copy.name));
	if (copy.state == CPHT_ENTRY_LOST)
		lost_error(&copy);
	check_privileges(NameStr(copy.name), copy.owner);

	if (name)
		strlcpy(name, NameStr(copy.name), NAMEDATALEN);
	if (owner)
		*owner = copy.owner;
	ref.entry = h->shared_entry;
	ref.table_id = h->shared_table_id;
	ref.transactional = copy.transactional;
	ref.durable = copy.durable;
	return ref;
}

uint64
cpht_shared_call(int32 handle, CphtCall call, const uint64 *keys, uint64 n,
				 uint8 *status)
{
	CphtSharedRef ref = cpht_shared_ref(handle, NULL, NULL);

	return cpht_remote_call(&ref, handle, call, keys, n, status);
}

void
cpht_shared_adopt(int32 handle, int32 entry, uint64 table_id)
{
	CphtCatalogEntry copy;

	if (entry < 0 || entry >= cpht_control->max_tables)
		elog(ERROR, "cpht shared table entry %d out of range", entry);
	LWLockAcquire(cpht_control->catalog_lock, LW_SHARED);
	copy = cpht_catalog[entry];
	LWLockRelease(cpht_control->catalog_lock);
	/* Dropped since the leader opened it: the handle's first use says so
	 * (cpht_shared_ref compares the table ids). */
	copy.table_id = table_id;
	if (handle != CPHT_SHARED_HANDLE_BASE + (int64) table_id)
		elog(ERROR, "cpht handle %d does not name shared table id " UINT64_FORMAT, handle, table_id);
	(void) register_handle(entry, &copy);
}

/* 42602 for a name no shared table can have, at create and at open alike. */
static void
check_name(const char *name)
{
	if (name[0] == '\0' || strlen(name) >= NAMEDATALEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_NAME),
				 errmsg("invalid shared cpht table name \"%s\"", cpht_echo_name(name)),
				 errdetail("A name has 1 to %d bytes.", NAMEDATALEN - 1)));
}

/*
 * Creating a shared table takes one of the worker's cpht.max_shared_tables
 * slots and a name every session of the database sees, and a durable one
 * costs WAL and disk: like CREATE SCHEMA, it needs CREATE on the database,
 * which PostgreSQL grants only to the database's owner (and superusers)
 * unless someone grants it.  Checked here, before anything goes to the
 * worker.  durable is a parameter of cpht_create, which stays executable
 * by PUBLIC for private tables, so this check is what guards durable
 * tables too.
 */
static void
check_create_privilege(const char *name, bool durable)
{
	if (pg_database_aclcheck(MyDatabaseId, GetUserId(), ACL_CREATE) != ACLCHECK_OK)
	{
		char	   *db = get_database_name(MyDatabaseId);
		char	   *role = GetUserNameFromId(GetUserId(), false);

		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to create %s cpht table \"%s\"",
						durable ? "durable shared" : "shared", name),
				 errdetail("Creating a shared cpht table needs the CREATE privilege on database \"%s\".",
						   db ? db : "?"),
				 errhint("A superuser or the database's owner can grant it: GRANT CREATE ON DATABASE %s TO %s.",
						 quote_identifier(db ? db : "?"), quote_identifier(role))));
	}
}

/* Creating and dropping take effect at once: no rollback would undo them. */
static void
refuse_transaction_block(const char *what)
{
	if (IsTransactionBlock() || IsSubTransaction())
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("%s cannot run inside a transaction block", what),
				 errdetail("Creating and dropping a shared cpht table take effect at once and cannot be rolled back."),
				 errhint("Run it on its own, outside BEGIN ... COMMIT and outside functions with EXCEPTION blocks.")));
}

/*
 * cpht_create(capacity, kind, key_bits, transactional, name): without a
 * name, a private table as in 0.1; with one, a shared table.  Not STRICT
 * because name defaults to NULL, so a NULL among the other arguments gives
 * NULL here as STRICT did.
 */
PG_FUNCTION_INFO_V1(cpht_create_named);
Datum
cpht_create_named(PG_FUNCTION_ARGS)
{
	const char *name;
	cpht_params params;
	uint64		bytes;
	CphtRequest *req;
	CphtReply  *rep;
	CphtCatalogEntry copy;
	int32		entry;

	bool		durable = false;

	/* key_bits (argument 2) may be NULL: the key width follows the keys;
	 * so may shards (argument 5): cpht.shards (cpht_create_shards_arg) */
	for (int a = 0; a < 4; a++)
		if (a != 2 && PG_ARGISNULL(a))
			PG_RETURN_NULL();
	if (PG_NARGS() > 6)
	{
		if (PG_ARGISNULL(6))
			PG_RETURN_NULL();
		durable = PG_GETARG_BOOL(6);
	}
	if (durable && cpht_create_shards_arg(fcinfo, true) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("a durable cpht table cannot be sharded"),
				 errdetail("Snapshots of durable tables hold one table's slots."),
				 errhint("Create the durable table with shards => 1.")));
	if (PG_NARGS() < 5 || PG_ARGISNULL(4))
	{
		if (durable)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("a durable cpht table needs a name"),
					 errdetail("Only shared tables, which the cpht worker holds, can be durable."),
					 errhint("Pass name => '...' with durable => true, with cpht in shared_preload_libraries.")));
		return cpht_create(fcinfo);
	}

	name = text_to_cstring(PG_GETARG_TEXT_PP(4));
	cpht_client_require_preload(durable ? "cpht_create with durable => true" : "cpht_create with a name");
	check_name(name);
	check_create_privilege(name, durable);
	refuse_transaction_block("creating a shared cpht table");

	bytes = cpht_create_params(PG_GETARG_INT64(0), text_to_cstring(PG_GETARG_TEXT_PP(1)),
							   PG_ARGISNULL(2) ? 0 : PG_GETARG_INT32(2), cpht_create_shards_arg(fcinfo, durable), &params);
	/* A role capped by cpht.max_memory gets no larger table this way. */
	cpht_memory_check(bytes, "shared cpht table");
	/* the GPU as the cpht worker found it (access.c) */
	params.device = cpht_choose_device();
	bytes = cpht_create_fit_gpus(fcinfo, durable, &params, bytes, "shared cpht table");
	params.seed = cpht_new_seed();
	params.cpu_threads = cpht_cpu_threads;

	/*
	 * The worker creates shared tables only once it restored the durable
	 * ones: a new table must not take the name of one not back yet.
	 */
	cpht_shared_wait_restored();
	req = cpht_client_request();
	req->op = CPHT_OP_CREATE;
	req->params = params;
	req->capacity = PG_GETARG_INT64(0);
	req->transactional = PG_GETARG_BOOL(3);
	req->durable = durable;
	namestrcpy(&req->name, name);
	req->dboid = MyDatabaseId;
	req->owner = GetUserId();
	/* the table keeps this session's cap (the worker's quota.c): settled
	 * by cpht_memory_check above, and only a superuser can change it */
	req->memory_cap_kb = cpht_max_memory_kb;
	rep = cpht_client_send();
	if (rep->status != CPHT_OK)
		cpht_check_status(rep->status, 0, rep->message);
	entry = rep->entry;

	LWLockAcquire(cpht_control->catalog_lock, LW_SHARED);
	copy = cpht_catalog[entry];
	LWLockRelease(cpht_control->catalog_lock);
	copy.table_id = rep->table_id;	/* even if dropped since */
	PG_RETURN_INT32(register_handle(entry, &copy)->handle);
}

/*
 * The catalog entry of a name in this database (LIVE or LOST), copied into
 * *copy; -1 when there is none.
 */
static int32
find_by_name(const char *name, CphtCatalogEntry *copy)
{
	int32		entry = -1;

	LWLockAcquire(cpht_control->catalog_lock, LW_SHARED);
	for (int i = 0; i < cpht_control->max_tables; i++)
	{
		CphtCatalogEntry *e = &cpht_catalog[i];

		if ((e->state == CPHT_ENTRY_LIVE || e->state == CPHT_ENTRY_LOST) &&
			e->dboid == MyDatabaseId && strcmp(NameStr(e->name), name) == 0)
		{
			entry = i;
			*copy = *e;
			break;
		}
	}
	LWLockRelease(cpht_control->catalog_lock);
	return entry;
}

/*
 * Right after a start or a worker restart the worker is still restoring
 * durable tables: a name it has not reached yet is missing, or lost from
 * the previous worker.  cpht_open, cpht_tables() and the creation of a
 * durable table wait for the restore (cancelably, at most DURABLE_WAIT_MS)
 * rather than answering that.  A standby restores
 * nothing until it is promoted, so there it does not wait.
 */
#define DURABLE_WAIT_MS 60000

void
cpht_shared_wait_restored(void)
{
	CphtControl *ctl = cpht_control;
	TimestampTz until;

	if (pg_atomic_read_u32(&ctl->durable_ready) == 1 || RecoveryInProgress())
		return;
	until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), DURABLE_WAIT_MS);
	ConditionVariablePrepareToSleep(&ctl->durable_cv);
	while (pg_atomic_read_u32(&ctl->durable_ready) == 0 && GetCurrentTimestamp() < until)
		(void) ConditionVariableTimedSleep(&ctl->durable_cv, 1000, PG_WAIT_EXTENSION);
	ConditionVariableCancelSleep();
}

/*
 * A shared table's handle that this session has not registered: the
 * number carries the table id, which the shared catalog names (ids are
 * never reused while the server runs).  The table must be of this
 * database and usable by the current role, as for cpht_open.
 */
CphtHandle *
cpht_shared_resolve(int32 handle, bool missing_ok)
{
	uint64		table_id = (uint64) (handle - CPHT_SHARED_HANDLE_BASE);
	uint64		first_id = 0;
	CphtCatalogEntry copy;
	int32		entry = -1;

	Assert(cpht_handle_is_shared(handle));
	if (cpht_control != NULL)
	{
		/* tables being restored are open to no one (see cpht_open) */
		cpht_shared_wait_restored();
		LWLockAcquire(cpht_control->catalog_lock, LW_SHARED);
		first_id = cpht_control->first_table_id;
		for (int i = 0; i < cpht_control->max_tables; i++)
		{
			CphtCatalogEntry *e = &cpht_catalog[i];

			if ((e->state == CPHT_ENTRY_LIVE || e->state == CPHT_ENTRY_LOST) &&
				e->table_id == table_id && e->dboid == MyDatabaseId)
			{
				entry = i;
				copy = *e;
				break;
			}
		}
		LWLockRelease(cpht_control->catalog_lock);
	}
	if (entry < 0)
	{
		if (missing_ok)
			return NULL;
		/* ids grow with every table: one below the running worker's
		 * first was given by a worker before it */
		if (table_id != 0 && table_id < first_id)
			restarted_error(handle, NULL);
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("cpht table %d does not exist", handle),
				 errdetail("No shared table of this database has this handle."),
				 errhint("Open shared tables by name with cpht_open().")));
	}
	if (missing_ok && !has_privs_of_role(GetUserId(), copy.owner))
		return NULL;
	/*
	 * Reached by number, not by name: a role without rights on it learns
	 * neither its name nor its owner (handles can be counted through, and
	 * cpht_tables() does not show such tables either).
	 */
	if (!has_privs_of_role(GetUserId(), copy.owner))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for cpht table %d", handle),
				 errdetail("It is a shared table of another role.")));
	/* a lost table is registered too: its calls say so, and cpht_drop
	 * frees its name */
	return register_handle(entry, &copy);
}

CphtHandle *
cpht_shared_lookup(int32 handle)
{
	CphtHandle *h = cpht_handles_shared(handle);

	if (h == NULL && cpht_handle_is_shared(handle) && !IsParallelWorker())
		h = cpht_shared_resolve(handle, true);
	return h;
}

/* cpht_open(name): this session's handle of a shared table. */
PG_FUNCTION_INFO_V1(cpht_open);
Datum
cpht_open(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	CphtCatalogEntry copy;
	int32		entry = -1;

	cpht_client_require_preload("cpht_open");
	/* a name no table can have is a wrong name, not a missing table */
	check_name(name);

	/*
	 * Tables the worker is still restoring are open to no one: the restore
	 * installs them one by one and may still replay WAL into them.
	 */
	cpht_shared_wait_restored();
	entry = find_by_name(name, &copy);
	/*
	 * A standby's worker holds no durable table (it restores them when the
	 * server is promoted), so a name missing there may well be one.
	 */
	if (entry < 0 && RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("durable shared cpht tables are not available on a standby"),
				 errdetail("Shared table \"%s\" is not in this server's cpht worker; durable shared tables are restored when the server is promoted.", name),
				 errhint("Read the table on the primary.")));
	if (entry < 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("shared cpht table \"%s\" does not exist", name),
				 errhint("Create it with cpht_create(..., name => %s).", quote_literal_cstr(name))));
	if (copy.state == CPHT_ENTRY_LOST)
		lost_error(&copy);
	check_privileges(name, copy.owner);

	PG_RETURN_INT32(register_handle(entry, &copy)->handle);
}

/* ---- cpht_drop on a shared handle ---------------------------------------- */

static int32
handle_arg(FunctionCallInfo fcinfo)
{
	return PG_GETARG_INT32(0);
}

/* A lost table has no memory left to free: dropping it frees its name. */
static bool
drop_lost(CphtHandle *h)
{
	CphtCatalogEntry *e;
	bool		dropped = false;

	if (h->shared_entry < 0)
		return false;
	e = &cpht_catalog[h->shared_entry];
	LWLockAcquire(cpht_control->catalog_lock, LW_EXCLUSIVE);
	if (e->state == CPHT_ENTRY_LOST && e->table_id == h->shared_table_id)
	{
		if (!has_privs_of_role(GetUserId(), e->owner))
		{
			LWLockRelease(cpht_control->catalog_lock);
			check_privileges(NameStr(e->name), e->owner);
		}
		e->state = CPHT_ENTRY_FREE;
		dropped = true;
	}
	LWLockRelease(cpht_control->catalog_lock);
	if (dropped)
		h->shared_entry = -1;
	return dropped;
}

/* Drops the table for every session, at once. */
Datum
cpht_shared_drop(PG_FUNCTION_ARGS)
{
	int32		handle = handle_arg(fcinfo);
	CphtSharedRef ref;

	/* a handle this session did not open yet is looked up by its number */
	CphtHandle *h = cpht_handles_use(handle);
	bool		lost;

	LWLockAcquire(cpht_control->catalog_lock, LW_SHARED);
	lost = h->shared_entry >= 0 &&
		cpht_catalog[h->shared_entry].state == CPHT_ENTRY_LOST &&
		cpht_catalog[h->shared_entry].table_id == h->shared_table_id;
	LWLockRelease(cpht_control->catalog_lock);

	if (lost)
	{
		refuse_transaction_block("dropping a shared cpht table");
		if (drop_lost(h))
			PG_RETURN_VOID();
	}
	/* whether it exists and the role may drop it, then when */
	ref = cpht_shared_ref(handle, NULL, NULL);
	refuse_transaction_block("dropping a shared cpht table");
	cpht_remote_drop(&ref);
	h->shared_entry = -1;
	PG_RETURN_VOID();
}

/* cpht_checkpoint(): snapshots of the durable tables that changed, now. */
PG_FUNCTION_INFO_V1(cpht_checkpoint);
Datum
cpht_checkpoint(PG_FUNCTION_ARGS)
{
	CphtRequest *req;

	/*
	 * As CHECKPOINT: a snapshot round writes every changed durable table
	 * of every database and stalls their writers meanwhile.  EXECUTE is
	 * not granted to PUBLIC; this check holds where it was granted anyway,
	 * or where the 0.3 library runs an extension not updated yet.
	 */
	if (!has_privs_of_role(GetUserId(), ROLE_PG_CHECKPOINT))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to run cpht_checkpoint()"),
				 errdetail("Only superusers and roles with privileges of the \"pg_checkpoint\" role may run it."),
				 errhint("A superuser can grant it: GRANT pg_checkpoint TO %s.",
						 quote_identifier(GetUserNameFromId(GetUserId(), false)))));
	cpht_client_require_preload("cpht_checkpoint");
	req = cpht_client_request();
	req->op = CPHT_OP_CHECKPOINT;
	PG_RETURN_INT32((int32) cpht_client_send()->value);
}

/*
 * cpht_alter_owner(name, new_owner): as ALTER ... OWNER TO.  The caller
 * must have the privileges of the current owner (or be a superuser), be a
 * member of the new owner, and have CREATE on the database, which creating
 * the table would have needed: giving a table away must not let a role
 * hold more tables than it could create.  Takes effect at once, for every
 * session; the worker logs the change of a durable table so that it
 * survives restarts.
 */
PG_FUNCTION_INFO_V1(cpht_alter_owner);
Datum
cpht_alter_owner(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	Oid			new_owner = PG_GETARG_OID(1);
	CphtCatalogEntry copy;
	int32		entry;
	CphtRequest *req;

	cpht_client_require_preload("cpht_alter_owner");
	check_name(name);
	/* regrole accepts any number: the role must exist */
	if (!SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(new_owner)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("role with OID %u does not exist", new_owner)));
	cpht_shared_wait_restored();
	entry = find_by_name(name, &copy);
	if (entry < 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("shared cpht table \"%s\" does not exist", name)));
	if (copy.state == CPHT_ENTRY_LOST)
		lost_error(&copy);
	check_privileges(name, copy.owner);
	if (copy.owner == new_owner)
		PG_RETURN_VOID();
	if (!superuser())
	{
		check_is_member_of_role(GetUserId(), new_owner);
		if (pg_database_aclcheck(MyDatabaseId, GetUserId(), ACL_CREATE) != ACLCHECK_OK)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied to change the owner of shared cpht table \"%s\"", name),
					 errdetail("Changing the owner of a shared cpht table needs the CREATE privilege on the database, as creating one does.")));
	}
	/* whether the role may, then when */
	refuse_transaction_block("changing the owner of a shared cpht table");

	req = cpht_client_request();
	req->op = CPHT_OP_ALTER_OWNER;
	req->entry = entry;
	req->table_id = copy.table_id;
	req->owner = new_owner;
	(void) cpht_client_send();
	PG_RETURN_VOID();
}
