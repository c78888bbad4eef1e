/*
 * quota.c — what shared tables may hold in the cpht worker.
 *
 * A session's cpht.max_memory bounds the tables it holds itself (memcap.c),
 * but a shared table lives in the worker, where any session that may use
 * it makes it grow, and where every open transaction that wrote to it
 * keeps an undo list and, while several write at once, a pending map
 * (xacts.c, 9 bytes and up to 128 bytes a changed key).  Two bounds hold
 * there:
 *
 *   - The owner's cap.  A shared table keeps the cpht.max_memory of the
 *     session that created it (CphtCatalogEntry.memory_cap_kb; a durable
 *     table keeps it in its snapshot and CREATE record).  A request that
 *     would make the shared tables of the table's owner hold more than
 *     that, together, is refused.  The cap is taken once, at creation,
 *     rather than from whichever session writes: the owner's tables are
 *     bounded the same whoever uses them (a member of the owner role or a
 *     superuser writing into them, a pooled connection), a role cannot
 *     lift it (cpht.max_memory is superuser-only, and a cap a superuser
 *     set for the role is restored when a session asks to drop it, see
 *     memcap.c), and a durable table keeps it across restarts.  Tables
 *     created before this existed, and tables created by an uncapped
 *     session, have none.
 *   - cpht.max_shared_memory, over all shared tables of the server, set
 *     by a superuser in the configuration files (reloadable).  -1, the
 *     default, lets the worker derive it (cpht_quota_server_cap).
 *
 * What counts: a table's slots as they are now (growth included) and the
 * pending state of its open transactions.  While a write (or a rebuild)
 * runs, its budget — the smaller room either bound leaves — is enforced by
 * the kernels' memory hook (private.c), which sees a growing table's new
 * layout while the old one is still held, the call's undo log and a GPU
 * table's transfer buffers, and by the reservations xacts.c makes for the
 * call's pending state.  A refused request changes nothing: the kernels
 * undo the call (CPHT_ERR_LIMIT), a refused reservation comes before the
 * call runs, and calls.c answers both with ERROR 53400.
 *
 * Not counted, and never refused: what the undo of an abort or a rollback
 * to a savepoint needs (ending a transaction must not fail), a durable
 * table's restore, and the undo-log store a shared table keeps between
 * calls (up to two transfer windows of entries; its growth was counted
 * against the call that grew it).
 *
 * Only the worker writes catalog entries, so it reads them here without
 * the catalog lock.
 */
#include "postgres.h"

#include <unistd.h>

#include "cpht_table.h"
#include "shmem/protocol.h"
#include "worker/worker_internal.h"
#include "worker/xacts.h"

/* The derived cpht.max_shared_memory where the host's memory cannot be
 * read. */
#define FALLBACK_SERVER_CAP ((uint64) 8 << 30)

/* The budget of the request being served (cpht_quota_begin). */
static bool active = false;
static int	active_entry = -1;
static uint64 owner_held = 0;
static uint64 owner_cap = 0;
static uint64 server_held = 0;
static uint64 server_cap = 0;
static bool derived_logged = false;

uint64
cpht_quota_server_cap(void)
{
	long		pages,
				page_size;
	uint64		host,
				gpu = 0;

	if (cpht_max_shared_memory_mb == 0)
		return 0;
	if (cpht_max_shared_memory_mb > 0)
		return (uint64) cpht_max_shared_memory_mb * 1024 * 1024;

	/*
	 * -1: half of the host's memory, leaving the rest to PostgreSQL's
	 * shared buffers, backends and the kernel's page cache, plus the
	 * memory of the GPUs the worker uses.  Host memory is the one to keep:
	 * past it the OOM killer ends the worker, and its SIGKILL restarts the
	 * whole server.  A GPU table's slots are device memory, which a GPU
	 * refuses cleanly when full (53200), so the GPUs add their memory
	 * rather than share the host's half.
	 */
	pages = sysconf(_SC_PHYS_PAGES);
	page_size = sysconf(_SC_PAGESIZE);
	host = pages > 0 && page_size > 0 ? (uint64) pages * (uint64) page_size / 2 : FALLBACK_SERVER_CAP;
	SpinLockAcquire(&cpht_control->mutex);
	if (cpht_control->gpu_state == CPHT_GPU_USABLE)
		gpu = cpht_control->gpu_total_bytes * (uint64) Max(cpht_control->gpu_count, 1);
	SpinLockRelease(&cpht_control->mutex);
	/* once per worker: the bound is not visible anywhere else */
	if (!derived_logged)
	{
		derived_logged = true;
		ereport(LOG,
				(errmsg("cpht worker bounds the memory of shared tables to " UINT64_FORMAT " MB",
						(host + gpu) >> 20),
				 errdetail("cpht.max_shared_memory is -1: half of the host's memory (" UINT64_FORMAT " MB) plus the memory of the GPUs the worker uses (" UINT64_FORMAT " MB).",
						   host >> 20, gpu >> 20)));
	}
	return host + gpu;
}

/* Bytes the live table at catalog index i holds: slots and pending state. */
static uint64
table_bytes(int i)
{
	CphtCatalogEntry *e = &cpht_catalog[i];
	cpht_table *t = cpht_worker_shared_table(i, e->table_id);

	/* the catalog's bytes follow a table's growth after each write; the
	 * table itself has them even after an abort's undo grew it */
	return (t != NULL ? cpht_table_slot_bytes(t) : e->bytes) + cpht_xacts_table_bytes(i);
}

/* The bytes of owner's live shared tables and of all of them. */
static void
sums(Oid owner, uint64 *own, uint64 *all)
{
	*own = 0;
	*all = 0;
	for (int i = 0; i < cpht_control->max_tables; i++)
	{
		uint64		b;

		if (cpht_catalog[i].state != CPHT_ENTRY_LIVE)
			continue;
		b = table_bytes(i);
		*all += b;
		if (cpht_catalog[i].owner == owner)
			*own += b;
	}
}

static uint64
room(uint64 cap, uint64 held)
{
	if (cap == 0)
		return PG_UINT64_MAX;
	return held >= cap ? 0 : cap - held;
}

/*
 * ERROR 53400: `needed` more bytes (0: unknown) for table `name` would pass
 * the owner's cap (owner true) or cpht.max_shared_memory.
 */
static void
refuse(const char *name, bool owner, uint64 held, uint64 needed, uint64 cap)
{
	char		need[64];

	if (needed > 0)
		snprintf(need, sizeof(need), " " UINT64_FORMAT " bytes", needed);
	else
		need[0] = '\0';
	if (owner)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("shared cpht table \"%s\" would exceed its owner's memory cap", name),
				 errdetail("Its owner's shared tables hold " UINT64_FORMAT " bytes with open transactions' changes; this needs%s more, past their cap of " UINT64_FORMAT " bytes (the creating session's cpht.max_memory).",
						   held, need[0] ? need : " some", cap),
				 errhint("End open transactions on them or drop some of them, or ask a superuser to raise cpht.max_memory for the owner and create the table again.")));
	ereport(ERROR,
			(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
			 errmsg("shared cpht table \"%s\" would exceed cpht.max_shared_memory", name),
			 errdetail("All shared tables hold " UINT64_FORMAT " bytes with open transactions' changes; this needs%s more, past cpht.max_shared_memory (" UINT64_FORMAT " bytes).",
					   held, need[0] ? need : " some", cap),
			 errhint("End open transactions on shared tables or drop some of them, or ask a superuser to raise cpht.max_shared_memory.")));
}

void
cpht_quota_check_create(const NameData *name, Oid owner, int32 cap_kb, uint64 bytes)
{
	uint64		own,
				all,
				cap = cap_kb > 0 ? (uint64) cap_kb * 1024 : 0,
				scap = cpht_quota_server_cap();

	if (cap == 0 && scap == 0)
		return;
	sums(owner, &own, &all);
	if (bytes > room(cap, own))
		refuse(NameStr(*name), true, own, bytes, cap);
	if (bytes > room(scap, all))
		refuse(NameStr(*name), false, all, bytes, scap);
}

/*
 * Table entry is to belong to new_owner: its bytes join the new owner's
 * shared tables, which must stay within the table's own cap, the new
 * owner's own (new_owner_cap_kb, set for the role; 0: none) and the cap of
 * every table the new owner has (each was promised that bound).
 */
void
cpht_quota_check_owner_change(int entry, Oid new_owner, int32 new_owner_cap_kb)
{
	CphtCatalogEntry *e = &cpht_catalog[entry];
	uint64		own,
				all,
				bytes = table_bytes(entry),
				cap = e->memory_cap_kb > 0 ? (uint64) e->memory_cap_kb * 1024 : 0;

	if (new_owner_cap_kb > 0 && (cap == 0 || (uint64) new_owner_cap_kb * 1024 < cap))
		cap = (uint64) new_owner_cap_kb * 1024;

	if (e->owner == new_owner)
		return;
	for (int i = 0; i < cpht_control->max_tables; i++)
	{
		CphtCatalogEntry *o = &cpht_catalog[i];
		uint64		c;

		if (o->state != CPHT_ENTRY_LIVE || o->owner != new_owner || o->memory_cap_kb <= 0)
			continue;
		c = (uint64) o->memory_cap_kb * 1024;
		if (cap == 0 || c < cap)
			cap = c;
	}
	if (cap == 0)
		return;
	sums(new_owner, &own, &all);
	if (bytes > room(cap, own))
		refuse(NameStr(e->name), true, own, bytes, cap);
}

void
cpht_quota_begin(int entry)
{
	CphtCatalogEntry *e = &cpht_catalog[entry];

	active = false;
	owner_cap = e->memory_cap_kb > 0 ? (uint64) e->memory_cap_kb * 1024 : 0;
	server_cap = cpht_quota_server_cap();
	if (owner_cap == 0 && server_cap == 0)
		return;
	sums(e->owner, &owner_held, &server_held);
	active = true;
	active_entry = entry;
	cpht_worker_budget_on(Min(room(owner_cap, owner_held), room(server_cap, server_held)));
}

void
cpht_quota_end(void)
{
	active = false;
	active_entry = -1;
}

bool
cpht_quota_active(void)
{
	return active;
}

void
cpht_quota_take(uint64 bytes)
{
	if (active && !cpht_worker_budget_take(bytes))
		cpht_quota_refused(bytes);
}

void
cpht_quota_refused(uint64 needed)
{
	const char *name = NameStr(cpht_catalog[active_entry].name);

	Assert(active);
	/* the bound that left less room is the one the request met */
	if (room(owner_cap, owner_held) <= room(server_cap, server_held))
		refuse(name, true, owner_held, needed, owner_cap);
	refuse(name, false, server_held, needed, server_cap);
	pg_unreachable();
}
