/*
 * memcap.h — cpht.max_memory: counting what a session holds and keeping the
 * cap a superuser set; and the counter of bytes taken against a limit
 * (CphtMemCounter) that both this cap and the cpht worker's memory budgets
 * (worker/private.c) answer the kernels' memory hook with.
 *
 * Who: a leaf of src/: any src/ file may include it.  The cpht worker uses
 * CphtMemCounter alone.  The rest is for backends and parallel workers:
 * cpht_memory_init from _PG_init; cpht_memory_settle once per session
 * inside a transaction (it reads pg_db_role_setting under AccessShareLock);
 * the check, reserve and release calls wherever the session takes memory
 * for tables, buffers or undo logs; cpht_memory_sync before a table call.
 *
 * Concurrency: the counts are the process's own (statics, not shared
 * memory): a parallel worker counts what it holds against its own copy of
 * the cap.  No lock is taken.  CphtMemCounter is safe on any thread (an
 * atomic with a compare-and-swap loop): the kernels' memory hook runs on
 * their helper threads and reads only atomics and the setting, as of the
 * last cpht_memory_sync.  Every other function runs on the process's own
 * thread.  cpht_memory_check, cpht_memory_reserve and cpht_reserved_add
 * raise ERROR 53400 beyond the cap; the releases, cpht_reserved_sub and
 * the memory context callback of CphtReserved never raise.
 */
#ifndef CPHT_MEMCAP_H
#define CPHT_MEMCAP_H

#include "port/atomics.h"

/*
 * Bytes taken against a limit, from any thread (the kernels' memory hook
 * runs on a stream's helper threads): a signed count, so that a budget may
 * get back more than it took.  cpht_memcounter_add adds delta: always when
 * delta <= 0, and a positive delta only if the count stays at or below
 * limit (PG_INT64_MAX: no limit); false, with nothing added, otherwise.
 */
typedef struct CphtMemCounter
{
	pg_atomic_uint64 count;		/* an int64, in two's complement */
} CphtMemCounter;

extern void cpht_memcounter_init(CphtMemCounter *c);
extern int64 cpht_memcounter_read(CphtMemCounter *c);
extern bool cpht_memcounter_add(CphtMemCounter *c, int64 delta, int64 limit);

/*
 * Once per session, inside a transaction: applies cpht.max_memory again
 * from the configuration files and pg_db_role_setting, whose values are
 * lost when a placeholder set at connection time is refused as cpht loads
 * (memcap.c says how).  Does nothing outside a transaction or once done.
 */
extern void cpht_memory_settle(void);

/* The cpht.max_memory set for a role itself (ALTER ROLE ... SET), kB; 0: none. */
extern int	cpht_memory_role_cap_kb(Oid role);

/* Registers the kernels' memory hook (from _PG_init). */
extern void cpht_memory_init(void);

/* Call before a table call that may grow an undo log or the table: lets
 * the kernels' memory hook see what the session holds besides what the
 * kernels count themselves. */
extern void cpht_memory_sync(void);

/*
 * The slot memory of the session's tables changed by delta bytes: a table
 * created, dropped, or dropped by the open transaction and then freed or
 * brought back.  session/handles.c and session/txn.c tell every change as
 * it happens, so that the cap reads one number and needs nothing of them.
 */
extern void cpht_memory_tables_changed(int64 delta);

/* Bytes the session holds: tables (those dropped by the open transaction
 * included), reserved buffers and undo logs. */
extern uint64 cpht_memory_held(void);

/* ERROR 53400 when `bytes` more would pass cpht.max_memory; `what` names
 * the allocation in the message ("cpht table", "stream buffer"). */
extern void cpht_memory_check(uint64 bytes, const char *what);

/* cpht_memory_check, then counts the bytes as held until released. */
extern void cpht_memory_reserve(uint64 bytes, const char *what);
extern void cpht_memory_release(uint64 bytes);

/*
 * Bytes counted against cpht.max_memory for as long as a memory context
 * lives: cpht_reserved_init registers a callback on cxt that gives back
 * whatever is still counted when cxt is reset or deleted, however the
 * statement ends (after a reset, init again to keep counting).  The
 * struct must live as long as cxt: in it, or in a context that outlives it.
 */
typedef struct CphtReserved
{
	uint64		bytes;
	MemoryContextCallback release;
} CphtReserved;

extern void cpht_reserved_init(CphtReserved *r, MemoryContext cxt);
/* cpht_memory_reserve of bytes more (53400 beyond the cap), or giving
 * back bytes of what r counts. */
extern void cpht_reserved_add(CphtReserved *r, uint64 bytes, const char *what);
extern void cpht_reserved_sub(CphtReserved *r, uint64 bytes);

/* Bytes the cpht worker's kernels took (positive) or gave back for this
 * session's tables there: counted as its undo logs are. */
extern void cpht_memory_worker_delta(int64 delta);

/* What cpht.max_memory still allows this session, for a request to the
 * cpht worker; PG_UINT64_MAX without a cap. */
extern uint64 cpht_memory_budget(void);

#endif							/* CPHT_MEMCAP_H */
