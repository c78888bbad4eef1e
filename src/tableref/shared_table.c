/*
 * shared_table.c — the placement of a shared table, held by the cpht
 * worker for every session that opens it by name.
 *
 * The reference keeps which table it reaches: the catalog index, the table
 * id and the cpht worker it was opened under.  Every operation first checks
 * it against the shared catalog (cpht_tableref_shared_check): that the
 * table was not dropped, that the worker holding it still runs, that the
 * role may use it.  Those checks and the worker's answers raise their own
 * errors, as shared tables always did, so the operations here return only
 * CPHT_OK.  session/shared_handles.c registers the references under the
 * session's handles and checks a handle through them (cpht_shared_ref).
 *
 * A shared table's transactions are kept by the cpht worker (worker/
 * xacts.c), not by this session's savepoints: session/txn.c never asks for
 * its undo log, and the log entries below only refuse.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "tableref/tableref_internal.h"
#include "client/client.h"
#include "errors.h"

/* ---- the reference and its check ---------------------------------------- */

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

void
cpht_shared_restarted_error(int32 handle, const char *durable_name)
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

CphtTableRef *
cpht_tableref_shared(int32 handle, int32 entry, uint64 table_id)
{
	CphtTableRef *t = MemoryContextAllocZero(TopMemoryContext, sizeof(CphtTableRef));

	t->ops = &cpht_shared_routine;
	t->handle = handle;
	t->shared_entry = entry;
	t->shared_table_id = table_id;
	t->shared_generation = worker_generation();
	return t;
}

int32
cpht_tableref_shared_entry(const CphtTableRef *t)
{
	return t->shared_entry;
}

uint64
cpht_tableref_shared_table_id(const CphtTableRef *t)
{
	return t->shared_table_id;
}

void
cpht_tableref_shared_forget(CphtTableRef *t)
{
	t->shared_entry = -1;
}

void
cpht_shared_check_privileges(const char *name, Oid owner)
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

void
cpht_shared_lost_error(const CphtCatalogEntry *e)
{
	ereport(ERROR,
			(errcode(ERRCODE_SYSTEM_ERROR),
			 errmsg("shared cpht table \"%s\" was lost", NameStr(e->name)),
			 errdetail("Its memory was in a cpht worker that exited: %s.", e->lost_reason),
			 errhint("Create it again with cpht_create(..., name => %s).", quote_literal_cstr(NameStr(e->name)))));
}

CphtSharedRef
cpht_tableref_shared_check(CphtTableRef *t, char *name, Oid *owner)
{
	int32		handle = t->handle;
	CphtCatalogEntry copy;
	uint64		first_id;
	CphtSharedRef ref;

	Assert(t->ops == &cpht_shared_routine);
	if (t->shared_entry < 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("cpht table %d does not exist", handle),
				 errdetail("It was dropped.")));

	LWLockAcquire(cpht_control->catalog_lock, LW_SHARED);
	copy = cpht_catalog[t->shared_entry];
	first_id = cpht_control->first_table_id;
	LWLockRelease(cpht_control->catalog_lock);

	if (copy.table_id == t->shared_table_id &&
		cpht_ddl_drop_pending(t->shared_entry, t->shared_table_id))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("cpht table %d does not exist", handle),
				 errdetail("This transaction dropped shared table \"%s\"; a rollback keeps it.",
						   NameStr(copy.name))));
	if (copy.table_id != t->shared_table_id ||
		(copy.state != CPHT_ENTRY_LIVE && copy.state != CPHT_ENTRY_LOST))
	{
		/*
		 * The worker that held the table exited.  A durable table is back
		 * under a new table id (ids are never reused while the server
		 * runs), reached by opening it again; any other was lost, and the
		 * catalog entry may hold another table by now.  A parallel
		 * worker's reference is made after the restart, from the leader's
		 * table id: an id below the running worker's first (ids grow with
		 * every table) was given by a worker before it.
		 */
		if (worker_generation() != t->shared_generation ||
			t->shared_table_id < first_id)
			cpht_shared_restarted_error(handle, NULL);
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("cpht table %d does not exist", handle),
				 errdetail("The shared table it named was dropped.")));
	}
	/* a durable table whose worker exited comes back under a new id */
	if (copy.state == CPHT_ENTRY_LOST && copy.durable)
		cpht_shared_restarted_error(handle, NameStr(copy.name));
	if (copy.state == CPHT_ENTRY_LOST)
		cpht_shared_lost_error(&copy);
	cpht_shared_check_privileges(NameStr(copy.name), copy.owner);

	if (name)
		strlcpy(name, NameStr(copy.name), NAMEDATALEN);
	if (owner)
		*owner = copy.owner;
	ref.entry = t->shared_entry;
	ref.table_id = t->shared_table_id;
	ref.transactional = copy.transactional;
	ref.durable = copy.durable;
	return ref;
}

/* ---- the placement ------------------------------------------------------ */

static cpht_status
shared_create(const cpht_params *params, bool logging, CphtTableRef *t, char *errbuf,
			  size_t errlen)
{
	/* opened by cpht_tableref_shared, never created here */
	elog(ERROR, "a shared cpht table is not created through its placement");
	pg_unreachable();
}

static void
shared_destroy(CphtTableRef *t)
{
	/* the worker holds the table; this session forgets only its handle */
}

static bool
shared_lost(const CphtTableRef *t)
{
	/* a lost shared table is reported by the handle's check, at its use */
	return false;
}

static uint64
shared_slot_bytes(CphtTableRef *t, uint64 created_bytes)
{
	return created_bytes;
}

/* A batch call: checked first, raised by the check or the worker's answer. */
static cpht_status
shared_call(CphtTableRef *t, CphtCall call, const uint64 *keys, size_t n, uint8 *status,
			uint64 *value)
{
	CphtSharedRef ref = cpht_tableref_shared_check(t, NULL, NULL);
	uint64		v = cpht_remote_call(&ref, t->handle, call, keys, n, status);

	/* where the worker's time went, for cpht.trace */
	cpht_remote_last_times(&t->times);
	if (value)
		*value = v;
	return CPHT_OK;
}

static uint64
shared_count(CphtTableRef *t)
{
	CphtSharedRef ref = cpht_tableref_shared_check(t, NULL, NULL);

	return cpht_remote_count(&ref);
}

static cpht_status
shared_rebuild(CphtTableRef *t, uint64 *removed)
{
	CphtSharedRef ref = cpht_tableref_shared_check(t, NULL, NULL);

	*removed = cpht_remote_rebuild(&ref, t->handle);
	return CPHT_OK;
}

static cpht_status
shared_stats(CphtTableRef *t, cpht_stats *out)
{
	CphtSharedRef ref = cpht_tableref_shared_check(t, NULL, NULL);

	cpht_remote_stats(&ref, t->handle, out);
	return CPHT_OK;
}

static cpht_status
shared_scan(CphtTableRef *t, uint64 *position, uint64 *keys, size_t max, CphtScanPiece *piece)
{
	CphtSharedRef ref = cpht_tableref_shared_check(t, NULL, NULL);
	CphtReply	rep;

	cpht_remote_scan(&ref, 0, *position, keys, max, &rep);
	if (rep.status != CPHT_OK)
		cpht_check_status(rep.status, t->handle, rep.message);
	piece->n = rep.value;
	*position = rep.scan_position;
	piece->end = rep.scan_end;
	piece->changes = rep.scan_changes;
	piece->count = rep.scan_count;
	return CPHT_OK;
}

static const char *
shared_error(const CphtTableRef *t)
{
	return t->error;
}

static void
shared_call_times(const CphtTableRef *t, cpht_call_times *out)
{
	*out = t->times;
}

static uint64
shared_log_position(CphtTableRef *t)
{
	elog(ERROR, "shared cpht table %d has no undo log in this session", t->handle);
	pg_unreachable();
}

/* rollback_to and truncate_log run in transaction callbacks: no ERROR */
static cpht_status
shared_rollback_to(CphtTableRef *t, uint64 position)
{
	strlcpy(t->error, "a shared table has no undo log in this session", sizeof(t->error));
	return CPHT_ERR_INVALID;
}

static void
shared_truncate_log(CphtTableRef *t, uint64 position)
{
}

const CphtTableRoutine cpht_shared_routine = {
	.placement = "worker",
	.create = shared_create,
	.destroy = shared_destroy,
	.lost = shared_lost,
	.slot_bytes = shared_slot_bytes,
	.call = shared_call,
	.count = shared_count,
	.rebuild = shared_rebuild,
	.stats = shared_stats,
	.scan = shared_scan,
	.error = shared_error,
	.call_times = shared_call_times,
	.log_position = shared_log_position,
	.rollback_to = shared_rollback_to,
	.truncate_log = shared_truncate_log,
	.stream_open = cpht_call_stream_open,
	.stream_start = cpht_call_stream_start,
	.stream_finish = cpht_call_stream_finish,
	.stream_close = cpht_call_stream_close,
};
