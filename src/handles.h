/*
 * handles.h — the session's registry of tables.
 *
 * A handle is a small integer naming one table of this backend.  Handles
 * start at 1 and are never reused within a session, so a stale handle held
 * by a client fails loudly instead of reaching another table.
 */
#ifndef CPHT_HANDLES_H
#define CPHT_HANDLES_H

#include "access.h"

typedef struct CphtHandle
{
	CphtTable  *table;			/* NULL once dropped */
	int32		handle;
	cpht_kind	kind;
	cpht_device device;
	int			key_bits;
	int64		capacity;		/* as asked for in cpht_create() */
	uint64		bytes;			/* slot memory of the table */
	bool		transactional;	/* changes follow transactions (txn.c) */
	bool		rolled_back;	/* gone because its creating transaction
								 * rolled back (txn.c), not dropped */
	/* A shared table lives in the cpht worker (shared_tables.c), table is
	 * NULL: */
	bool		shared;
	int32		shared_entry;	/* its catalog index, -1 once dropped here */
	uint64		shared_table_id;
	uint64		shared_generation;	/* the cpht worker's generation when
									 * opened (protocol.h) */
	CphtTable  *shared_access;	/* the operations on it (access.h) */
} CphtHandle;

/* Makes room for one more table; call before creating it, so that
 * registering the created table cannot fail and leak it. */
extern void cpht_handles_reserve(void);

/* Registers a created table (after cpht_handles_reserve) and returns its
 * handle. */
extern int32 cpht_handles_add(const CphtHandle *entry);

/* Registers an entry under a given handle that has no table yet (handles
 * below it that were never given one stay unknown): a parallel worker gives
 * the leader's shared tables the leader's handles, in whatever order its
 * aggregates name them (parallel_plan.c). */
extern int32 cpht_handles_add_at(int32 handle, const CphtHandle *entry);

/* The live table of a handle; ERROR if unknown, dropped or shared.  The pointer is
 * valid until the next cpht_handles_reserve(). */
extern CphtHandle *cpht_handles_get(int32 handle);

/* The entry of a live private table's handle or of a shared table's
 * handle (the shared table's calls check that it still exists), for the
 * operations both have; ERROR as cpht_handles_get otherwise. */
extern CphtHandle *cpht_handles_use(int32 handle);

/* The table the operations of access.h work on, of cpht_handles_use's
 * entry. */
static inline CphtTable *
cpht_handle_table(const CphtHandle *h)
{
	return h->shared ? h->shared_access : h->table;
}

/* The entry of a shared table's handle (dropped or not), or NULL when the
 * handle is not one. */
extern CphtHandle *cpht_handles_shared(int32 handle);

/* Live private tables in handle order: pass 0 first, then the previous handle;
 * returns NULL after the last. */
extern CphtHandle *cpht_handles_next(int32 after);

/* The entry of a handle whatever its state (NULL if never created): for
 * txn.c, which takes tables out of and back into entries. */
extern CphtHandle *cpht_handles_entry(int32 handle);

/* Bytes of slot memory all live tables of the session hold. */
extern uint64 cpht_handles_total_bytes(void);

/* Points an entry at its table, or at none (NULL), keeping the total of
 * cpht_handles_total_bytes(); every change of entry->table goes through it. */
extern void cpht_handles_set_table(CphtHandle *entry, CphtTable *table);

extern void cpht_handles_drop(int32 handle);
extern int	cpht_handles_drop_all(void);

#endif							/* CPHT_HANDLES_H */
