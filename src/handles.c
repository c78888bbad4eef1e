/*
 * handles.c — the session's registry of tables.
 *
 * Tables live in memory the kernels allocate (malloc, or GPU memory), which
 * no memory context owns, so the registry itself sits in TopMemoryContext
 * and an exit callback destroys whatever the session left behind.  Without
 * it a backend that exits would leave GPU memory to the driver's cleanup.
 */
#include "postgres.h"

#include "storage/ipc.h"
#include "utils/memutils.h"

#include "handles.h"

/* entries[h - 1] is handle h; entries are never removed, only emptied. */
static CphtHandle *entries = NULL;
static int32 nentries = 0;
static int32 maxentries = 0;
static bool exit_callback_registered = false;

/* Slot memory of the live tables (entries whose table is set), kept as
 * tables come and go so that checking the memory cap costs nothing. */
static uint64 live_bytes = 0;

static void
cpht_handles_at_exit(int code, Datum arg)
{
	(void) code;
	(void) arg;
	cpht_handles_drop_all();
}

void
cpht_handles_reserve(void)
{
	if (!exit_callback_registered)
	{
		on_proc_exit(cpht_handles_at_exit, (Datum) 0);
		exit_callback_registered = true;
	}

	if (nentries == PG_INT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many cpht tables created in this session"),
				 errhint("Start a new session.")));

	if (nentries < maxentries)
		return;

	if (entries == NULL)
	{
		maxentries = 16;
		entries = MemoryContextAllocZero(TopMemoryContext,
										 sizeof(CphtHandle) * maxentries);
	}
	else
	{
		int32		newmax = maxentries > PG_INT32_MAX / 2 ? PG_INT32_MAX : maxentries * 2;

		entries = repalloc_huge(entries, sizeof(CphtHandle) * (Size) newmax);
		memset(entries + maxentries, 0,
			   sizeof(CphtHandle) * (Size) (newmax - maxentries));
		maxentries = newmax;
	}
}

int32
cpht_handles_add(const CphtHandle *entry)
{
	CphtHandle *slot;

	Assert(nentries < maxentries);
	slot = &entries[nentries++];
	*slot = *entry;
	slot->handle = nentries;
	if (slot->table != NULL)
		live_bytes += slot->bytes;
	return slot->handle;
}

int32
cpht_handles_add_at(int32 handle, const CphtHandle *entry)
{
	CphtHandle *slot;

	/* the handles up to this one exist, unknown until given a table */
	while (nentries < handle)
	{
		cpht_handles_reserve();
		memset(&entries[nentries], 0, sizeof(CphtHandle));
		entries[nentries].shared_entry = -1;
		entries[nentries].handle = nentries + 1;
		nentries++;
	}
	slot = &entries[handle - 1];
	if (slot->shared || slot->table != NULL)
		elog(ERROR, "cpht handle %d is already registered", handle);
	*slot = *entry;
	slot->handle = handle;
	if (slot->table != NULL)
		live_bytes += slot->bytes;
	return handle;
}

CphtHandle *
cpht_handles_get(int32 handle)
{
	if (handle < 1 || handle > nentries)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("cpht table %d does not exist", handle),
				 errhint("Handles come from cpht_create() and belong to the session that created them.")));

	/* Callers reach shared tables through shared_tables.c. */
	if (entries[handle - 1].shared)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cpht table %d is a shared table", handle),
				 errdetail("This operation is not available for shared tables.")));

	if (entries[handle - 1].table == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("cpht table %d does not exist", handle),
				 entries[handle - 1].rolled_back ?
				 errdetail("The transaction that created it rolled back.") :
				 errdetail("It was dropped.")));

	return &entries[handle - 1];
}

CphtHandle *
cpht_handles_use(int32 handle)
{
	CphtHandle *h = cpht_handles_shared(handle);

	return h ? h : cpht_handles_get(handle);
}

CphtHandle *
cpht_handles_shared(int32 handle)
{
	if (handle < 1 || handle > nentries || !entries[handle - 1].shared)
		return NULL;
	return &entries[handle - 1];
}

CphtHandle *
cpht_handles_next(int32 after)
{
	int32		h;

	for (h = after < 0 ? 0 : after; h < nentries; h++)
	{
		if (entries[h].table != NULL)
			return &entries[h];
	}
	return NULL;
}

CphtHandle *
cpht_handles_entry(int32 handle)
{
	if (handle < 1 || handle > nentries)
		return NULL;
	return &entries[handle - 1];
}

uint64
cpht_handles_total_bytes(void)
{
	return live_bytes;
}

void
cpht_handles_set_table(CphtHandle *entry, CphtTable  *table)
{
	if (entry->table != NULL)
		live_bytes -= entry->bytes;
	entry->table = table;
	if (table != NULL)
		live_bytes += entry->bytes;
}

void
cpht_handles_drop(int32 handle)
{
	CphtHandle *entry = cpht_handles_get(handle);
	CphtTable  *table = entry->table;

	/* Forget the table first: should destroy ever fail to return, the
	 * handle must not point at freed memory. */
	cpht_handles_set_table(entry, NULL);
	cpht_access_destroy(table);
}

int
cpht_handles_drop_all(void)
{
	int			dropped = 0;
	int32		h;

	for (h = 0; h < nentries; h++)
	{
		CphtTable  *table = entries[h].table;

		if (table != NULL)
		{
			cpht_handles_set_table(&entries[h], NULL);
			cpht_access_destroy(table);
			dropped++;
		}
	}
	return dropped;
}
