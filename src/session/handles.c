/*
 * handles.c — the session's registry of tables.
 *
 * Tables live in memory the kernels allocate (malloc, or GPU memory), which
 * no memory context owns, so the registry itself sits in TopMemoryContext
 * and an exit callback destroys whatever the session left behind.  Without
 * it a backend that exits would leave GPU memory to the driver's cleanup.
 */
#include "postgres.h"

#include "access/parallel.h"
#include "storage/ipc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "memcap.h"
#include "session/session.h"

/* entries[h - 1] is private handle h; entries are never removed, only
 * emptied. */
static CphtHandleEntry *entries = NULL;
static int32 nentries = 0;
static int32 maxentries = 0;
static bool exit_callback_registered = false;

/* Shared tables this session registered, by handle: their numbers are
 * sparse (table ids), and an entry never moves once made. */
typedef struct SharedSlot
{
	int32		handle;			/* hash key */
	CphtHandleEntry entry;
} SharedSlot;

static HTAB *shared_slots = NULL;

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

	/* private handles stay below the shared ones */
	if (nentries == CPHT_SHARED_HANDLE_BASE - 1)
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
										 sizeof(CphtHandleEntry) * maxentries);
	}
	else
	{
		int32		newmax = Min(maxentries * 2, CPHT_SHARED_HANDLE_BASE - 1);

		entries = repalloc_huge(entries, sizeof(CphtHandleEntry) * (Size) newmax);
		memset(entries + maxentries, 0,
			   sizeof(CphtHandleEntry) * (Size) (newmax - maxentries));
		maxentries = newmax;
	}
}

int32
cpht_handles_add(const CphtHandleEntry *entry)
{
	CphtHandleEntry *slot;

	Assert(nentries < maxentries);
	slot = &entries[nentries++];
	*slot = *entry;
	slot->handle = nentries;
	if (slot->table != NULL)
		cpht_memory_tables_changed((int64) slot->bytes);
	return slot->handle;
}

CphtHandleEntry *
cpht_handles_add_shared(const CphtHandleEntry *entry)
{
	SharedSlot *slot;
	bool		found;

	Assert(entry->shared && cpht_handle_is_shared(entry->handle));
	if (shared_slots == NULL)
	{
		HASHCTL		ctl;

		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(int32);
		ctl.entrysize = sizeof(SharedSlot);
		ctl.hcxt = TopMemoryContext;
		shared_slots = hash_create("cpht shared handles", 16, &ctl,
								   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	slot = hash_search(shared_slots, &entry->handle, HASH_ENTER, &found);
	if (found)
		elog(ERROR, "cpht handle %d is already registered", entry->handle);
	slot->entry = *entry;
	return &slot->entry;
}

/* A handle a parallel worker does not have: the leader's private tables
 * and the shared tables it did not hand over stay in the leader. */
static void
not_in_parallel_worker(int32 handle)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("cpht table %d cannot be used in a parallel worker", handle),
			 cpht_handle_is_shared(handle) ?
			 errdetail("Parallel workers reach only the shared tables the leader's cpht_fop_agg or cpht_fop_new_relation names.") :
			 errdetail("A table created without a name belongs to the session that created it, which parallel workers cannot reach."),
			 errhint("Mark functions that use cpht tables PARALLEL RESTRICTED or PARALLEL UNSAFE.")));
}

CphtHandleEntry *
cpht_handles_get(int32 handle)
{
	if (cpht_handle_is_shared(handle))
	{
		/* whether it names a shared table at all, then that it does */
		(void) cpht_handles_use(handle);
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cpht table %d is a shared table", handle),
				 errdetail("This operation is not available for shared tables.")));
	}

	if (handle < 1 || handle > nentries)
	{
		if (IsParallelWorker())
			not_in_parallel_worker(handle);
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("cpht table %d does not exist", handle),
				 errhint("Handles come from cpht_create() and belong to the session that created them.")));
	}

	if (entries[handle - 1].table == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("cpht table %d does not exist", handle),
				 entries[handle - 1].rolled_back ?
				 errdetail("The transaction that created it rolled back.") :
				 errdetail("It was dropped.")));

	return &entries[handle - 1];
}

CphtHandleEntry *
cpht_handles_use(int32 handle)
{
	CphtHandleEntry *h;

	if (!cpht_handle_is_shared(handle))
		return cpht_handles_get(handle);
	h = cpht_handles_shared(handle);
	if (h != NULL)
		return h;
	if (IsParallelWorker())
		not_in_parallel_worker(handle);
	return cpht_shared_resolve(handle, false);
}

CphtHandleEntry *
cpht_handles_shared(int32 handle)
{
	SharedSlot *slot;

	if (!cpht_handle_is_shared(handle) || shared_slots == NULL)
		return NULL;
	slot = hash_search(shared_slots, &handle, HASH_FIND, NULL);
	return slot ? &slot->entry : NULL;
}

CphtHandleEntry *
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

CphtHandleEntry *
cpht_handles_entry(int32 handle)
{
	if (handle < 1 || handle > nentries)
		return NULL;
	return &entries[handle - 1];
}

void
cpht_handles_set_table(CphtHandleEntry *entry, CphtTableRef *table)
{
	/* the slot memory of live tables (entries whose table is set) counts
	 * against cpht.max_memory */
	if (entry->table != NULL)
		cpht_memory_tables_changed(-(int64) entry->bytes);
	entry->table = table;
	if (table != NULL)
		cpht_memory_tables_changed((int64) entry->bytes);
}

void
cpht_handles_drop(int32 handle)
{
	CphtHandleEntry *entry = cpht_handles_get(handle);
	CphtTableRef *table = entry->table;

	/* Forget the table first: should destroy ever fail to return, the
	 * handle must not point at freed memory. */
	cpht_handles_set_table(entry, NULL);
	cpht_tableref_destroy(table);
}

int
cpht_handles_drop_all(void)
{
	int			dropped = 0;
	int32		h;

	for (h = 0; h < nentries; h++)
	{
		CphtTableRef *table = entries[h].table;

		if (table != NULL)
		{
			cpht_handles_set_table(&entries[h], NULL);
			cpht_tableref_destroy(table);
			dropped++;
		}
	}
	return dropped;
}
