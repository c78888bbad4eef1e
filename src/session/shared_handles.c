/*
 * shared_handles.c — this session's handles of shared tables (cpht in
 * shared_preload_libraries): registering them, resolving a handle this
 * session has not opened, checking a handle (through its reference, whose
 * check is tableref/shared_table.c's), and the leader's handles in
 * parallel workers.  The SQL functions that create,
 * open, drop and give away shared tables are in api/shared.c.
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
 *   - are created and dropped at once outside a transaction block; inside
 *     one, a creation is seen by other sessions once it commits and
 *     undone by a rollback, a drop takes effect at commit
 *     (client/ddl_xact.c);
 *   - belong to the creating role: it, its members (has_privs_of_role) and
 *     superusers may use and drop them.
 * Names and privileges are checked in the backend, which has the
 * catalogs (here and in api/shared.c); the worker checks that the table
 * still exists.
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
#include "session/session.h"
#include "memcap.h"

/* Handles this session opened or created for shared tables. */
static int32 *shared_handles = NULL;
static int	nshared = 0;
static int	maxshared = 0;

int
cpht_shared_open_handles(const int32 **handles)
{
	*handles = shared_handles;
	return nshared;
}

/*
 * The session's entry for the shared table of catalog entry `entry` (*e a
 * copy of it), registered under the table's handle if it was not yet.
 * The handle is the table's id in the shared range (session.h), the same
 * number in every session.
 */
CphtHandleEntry *
cpht_shared_register(int32 entry, const CphtCatalogEntry *e)
{
	CphtHandleEntry h;
	CphtHandleEntry *registered;

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
	h.kind = e->kind;
	h.device = e->device;
	h.key_bits = e->key_bits;
	h.transactional = e->transactional;
	h.capacity = e->capacity;
	h.bytes = e->bytes;
	h.shared_tableref = cpht_tableref_shared(h.handle, entry, e->table_id);
	registered = cpht_handles_add_shared(&h);
	shared_handles[nshared++] = h.handle;
	return registered;
}

CphtSharedRef
cpht_shared_ref(int32 handle, char *name, Oid *owner)
{
	CphtHandleEntry *h = cpht_handles_use(handle);

	Assert(h->shared);
	return cpht_tableref_shared_check(h->shared_tableref, name, owner);
}

void
cpht_shared_adopt(int32 handle, int32 entry, uint64 table_id)
{
	CphtCatalogEntry copy;

	/* the leader dropped it (plan/hooks.c) */
	if (entry == CPHT_LEADER_DROPPED)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("cpht table %d does not exist", handle),
				 errdetail("It was dropped.")));
	if (entry == CPHT_LEADER_DROP_PENDING)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("cpht table %d does not exist", handle),
				 errdetail("The transaction of this parallel worker's leader dropped the shared table; a rollback keeps it.")));
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
	(void) cpht_shared_register(entry, &copy);
}

/*
 * A shared table's handle that this session has not registered: the
 * number carries the table id, which the shared catalog names (ids are
 * never reused while the server runs).  The table must be of this
 * database and usable by the current role, as for cpht_open.
 */
CphtHandleEntry *
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
				e->table_id == table_id && e->dboid == MyDatabaseId &&
				cpht_shared_entry_visible(i, e))
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
			cpht_shared_restarted_error(handle, NULL);
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
	return cpht_shared_register(entry, &copy);
}

bool
cpht_shared_name(int32 handle, char *name)
{
	uint64		table_id = (uint64) (handle - CPHT_SHARED_HANDLE_BASE);
	bool		found = false;
	Oid			owner = InvalidOid;

	if (cpht_control == NULL || !cpht_handle_is_shared(handle))
		return false;
	LWLockAcquire(cpht_control->catalog_lock, LW_SHARED);
	for (int i = 0; i < cpht_control->max_tables; i++)
	{
		CphtCatalogEntry *e = &cpht_catalog[i];

		if ((e->state == CPHT_ENTRY_LIVE || e->state == CPHT_ENTRY_LOST) &&
			e->table_id == table_id && e->dboid == MyDatabaseId)
		{
			strlcpy(name, NameStr(e->name), NAMEDATALEN);
			owner = e->owner;
			found = true;
			break;
		}
	}
	LWLockRelease(cpht_control->catalog_lock);
	/* as cpht_shared_resolve: no name for a role without rights on it */
	return found && has_privs_of_role(GetUserId(), owner);
}

CphtHandleEntry *
cpht_shared_lookup(int32 handle)
{
	CphtHandleEntry *h = cpht_handles_shared(handle);

	if (h == NULL && cpht_handle_is_shared(handle) && !IsParallelWorker())
		h = cpht_shared_resolve(handle, true);
	return h;
}

/* ---- parallel workers: the leader's handles (guc.h's
 * cpht_leader_shared_tables, set by plan/hooks.c) ---------------------------- */

void
cpht_parallel_adopt_handle(int32 handle)
{
	const char *p = cpht_leader_shared_tables;

	Assert(IsParallelWorker());
	if (cpht_handles_shared(handle) != NULL)
		return;
	while (p != NULL && *p != '\0')
	{
		int32		h,
					entry;
		uint64		table_id;
		int			used = 0;

		if (sscanf(p, "%d:%d:" UINT64_FORMAT "%n", &h, &entry, &table_id, &used) != 3 || used == 0)
			break;
		if (h == handle)
		{
			cpht_shared_adopt(handle, entry, table_id);
			return;
		}
		p += used;
		if (*p == ',')
			p++;
	}
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("cpht table %d is not a shared table of the leader of this parallel worker", handle),
			 errdetail("Parallel workers reach only shared tables the leader's session has open.")));
}
