/*
 * session/session.h — the door of session/: the tables this session has
 * open, by handle.  handles.c keeps the registry, txn.c makes private
 * tables transactional, shared_handles.c keeps this session's handles of
 * shared tables; below it, tableref/ reaches tables wherever they live.
 *
 * A handle is an integer naming one table.  Private tables' handles count
 * up from 1 in the session that created them and are never reused there,
 * so a stale handle fails loudly instead of reaching another table.  A
 * shared table's handle is CPHT_SHARED_HANDLE_BASE plus its table id,
 * which the cpht worker never gives twice while the server runs: the same
 * number names the same shared table in every session (a client behind a
 * transaction pooler may keep it from one server session to the next).
 * The two ranges never meet.
 *
 * Who: cpht.c, api/, plan/ and stream/ may include it
 * (test/check-layout.sh); cpht_txn_init is called from _PG_init.
 *
 * Concurrency: the registry is the backend's own memory, used on its own
 * thread, with no lock.  A parallel worker has no private tables (0A000):
 * it reaches only the shared tables its leader handed over
 * (cpht_parallel_adopt_handle, from the setting plan/hooks.c writes).
 * shared_handles.c reads the shared catalog under catalog_lock in shared
 * mode, copying the entry and releasing the lock before anything else;
 * resolving a handle first waits, cancelably, for the worker to restore
 * the durable tables (client/client.h).  The functions raise ERROR, but
 * cpht_shared_lookup and cpht_shared_name, for the planner and output
 * functions, answer NULL or false for a handle that names no table the
 * role may use (only a cancel or out of memory raises there); txn.c's
 * transaction callbacks never raise during an abort (a table that cannot
 * be rolled back is dropped with a WARNING).
 */
#ifndef CPHT_SESSION_H
#define CPHT_SESSION_H

#include "fmgr.h"

#include "client/client.h"
#include "tableref/tableref.h"

/* Shared tables' handles start here; private ones stay below it. */
#define CPHT_SHARED_HANDLE_BASE (1 << 30)
/* The largest table id a shared handle can carry. */
#define CPHT_MAX_SHARED_TABLE_ID ((uint64) (PG_INT32_MAX - CPHT_SHARED_HANDLE_BASE))

static inline bool
cpht_handle_is_shared(int32 handle)
{
	return handle >= CPHT_SHARED_HANDLE_BASE;
}

/*
 * The session's entry for one handle (the handle itself is the int32): the
 * table it names, private or shared, and what the session knows of it.
 */
typedef struct CphtHandleEntry
{
	CphtTableRef *table;			/* NULL once dropped */
	int32		handle;
	cpht_kind	kind;
	cpht_device device;
	int			key_bits;
	int64		capacity;		/* as asked for in cpht_create() */
	uint64		bytes;			/* slot memory of the table */
	bool		transactional;	/* changes follow transactions (txn.c) */
	bool		rolled_back;	/* gone because its creating transaction
								 * rolled back (txn.c), not dropped */
	/* A shared table lives in the cpht worker (shared_handles.c), table is
	 * NULL: */
	bool		shared;
	CphtTableRef *shared_tableref;	/* its reference: which table, checked
									 * before each operation
									 * (cpht_tableref_shared_entry and
									 * _table_id, tableref/tableref.h) */
} CphtHandleEntry;

/* Makes room for one more table; call before creating it, so that
 * registering the created table cannot fail and leak it. */
extern void cpht_handles_reserve(void);

/* Registers a created table (after cpht_handles_reserve) and returns its
 * handle. */
extern int32 cpht_handles_add(const CphtHandleEntry *entry);

/* Registers a shared table under its handle (entry->handle, in the shared
 * range) and returns the registered entry, which stays where it is for
 * the session's life. */
extern CphtHandleEntry *cpht_handles_add_shared(const CphtHandleEntry *entry);

/* The live table of a private handle; ERROR if unknown, dropped or shared
 * (0A000 in a parallel worker, which has no private tables).  The pointer
 * is valid until the next cpht_handles_reserve(). */
extern CphtHandleEntry *cpht_handles_get(int32 handle);

/*
 * The entry of a live private table's handle or of a shared table's
 * handle (the shared table's calls check that it still exists), for the
 * operations both have; ERROR as cpht_handles_get otherwise.  A shared
 * handle this session has not registered yet is looked up in the shared
 * catalog (cpht_shared_resolve), except in a parallel worker, which
 * reaches only the shared tables its leader handed over (0A000).
 */
extern CphtHandleEntry *cpht_handles_use(int32 handle);

/* The table the operations of tableref/tableref.h work on, of cpht_handles_use's
 * entry. */
static inline CphtTableRef *
cpht_handle_table(const CphtHandleEntry *h)
{
	return h->shared ? h->shared_tableref : h->table;
}

/* The entry of a shared table's handle this session registered (dropped or
 * not), or NULL when it has not registered it. */
extern CphtHandleEntry *cpht_handles_shared(int32 handle);

/* Live private tables in handle order: pass 0 first, then the previous handle;
 * returns NULL after the last. */
extern CphtHandleEntry *cpht_handles_next(int32 after);

/* The entry of a handle whatever its state (NULL if never created): for
 * txn.c, which takes tables out of and back into entries. */
extern CphtHandleEntry *cpht_handles_entry(int32 handle);

/* Points an entry at its table, or at none (NULL), telling the memory cap
 * (memcap.h) of the slot memory that came or went; every change of
 * entry->table goes through it. */
extern void cpht_handles_set_table(CphtHandleEntry *entry, CphtTableRef *table);

extern void cpht_handles_drop(int32 handle);
extern int	cpht_handles_drop_all(void);

/*
 * txn.c: transactional tables: keys put or deleted by a (sub)transaction
 * that aborts are undone, tables created in it disappear and tables
 * dropped in it come back.
 */

/* Registers the transaction callbacks (from _PG_init; no CUDA involved). */
extern void cpht_txn_init(void);

/* Call before any operation that may change the table: remembers where the
 * current subtransaction's changes start in the table's undo log. */
extern void cpht_txn_before_write(CphtHandleEntry *h);

/* A table was created: it disappears if the creating transaction aborts. */
extern void cpht_txn_created(CphtHandleEntry *h);

/* Drops a table transactionally: the handle is gone at once, the memory is
 * freed at commit, and an abort brings the table back. */
extern void cpht_txn_drop(int32 handle);

/*
 * shared_handles.c: this session's handles of shared tables, and what
 * the rest of the backend asks about them (their SQL functions are in
 * api/shared.c).
 */

/*
 * The session's entry for the shared table of catalog entry `entry` (*e a
 * copy of it), registered under the table's handle if it was not yet.
 */
extern CphtHandleEntry *cpht_shared_register(int32 entry, const CphtCatalogEntry *e);

/*
 * The shared table of a handle, usable by the current role
 * (cpht_tableref_shared_check of its reference): ERROR 42704 when it was
 * dropped, 58000 when it was lost, 42501 when the role may not use it.
 * *name and *owner (when not NULL) get its name and owner.
 */
extern CphtSharedRef cpht_shared_ref(int32 handle, char *name, Oid *owner);

/*
 * The entry of shared handle `handle`, which this session has not
 * registered, looked up in the shared catalog and registered: 42704 when
 * no shared table of this database has that handle (58000 when a cpht
 * worker before the running one gave it), 42501 when the role may not use
 * it; with missing_ok NULL instead of either.
 */
extern CphtHandleEntry *cpht_shared_resolve(int32 handle, bool missing_ok);

/* The entry of a shared handle, registered now if it was not (NULL when it
 * names no shared table the role may use, and in a parallel worker for one
 * the leader did not hand over): for the planner, which must not raise. */
extern CphtHandleEntry *cpht_shared_lookup(int32 handle);


/* Whether handle names a shared table of this database that the current
 * role may use; its name into name (NAMEDATALEN bytes) if so.  Registers
 * nothing and raises nothing: for output functions and EXPLAIN. */
extern bool cpht_shared_name(int32 handle, char *name);

/* The handles this session opened or created for shared tables (dropped
 * ones included); returns how many. */
extern int	cpht_shared_open_handles(const int32 **handles);

/*
 * A parallel worker's handle for the leader's shared table: the same
 * number the leader's session gave it, naming the catalog entry and table
 * id the leader had.  Instead of an entry, the leader (plan/hooks.c) may
 * pass one of these: the table it dropped, or dropped in its open
 * transaction; the worker then refuses the handle as the leader does.
 */
#define CPHT_LEADER_DROPPED			(-1)
#define CPHT_LEADER_DROP_PENDING	(-2)
extern void cpht_shared_adopt(int32 handle, int32 entry, uint64 table_id);

/* In a parallel worker: registers the leader's shared table of this
 * handle under the same handle, unless already done; ERROR when the
 * leader had no shared table of that handle. */
extern void cpht_parallel_adopt_handle(int32 handle);

#endif							/* CPHT_SESSION_H */
