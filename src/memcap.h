/*
 * memcap.h — cpht.max_memory: counting what a session holds and keeping the
 * cap a superuser set.
 */
#ifndef CPHT_MEMCAP_H
#define CPHT_MEMCAP_H

/*
 * Once per session, inside a transaction: applies cpht.max_memory again
 * from the configuration files and pg_db_role_setting, whose values are
 * lost when a placeholder set at connection time is refused as cpht loads
 * (memcap.c says how).  Does nothing outside a transaction or once done.
 */
extern void cpht_memory_settle(void);

/* Registers the kernels' memory hook (from _PG_init). */
extern void cpht_memory_init(void);

/* Call before a table call that may grow an undo log or the table: lets
 * the kernels' memory hook see what the session holds besides what the
 * kernels count themselves. */
extern void cpht_memory_sync(void);

/* Bytes the session holds: tables (those dropped by the open transaction
 * included), reserved buffers and undo logs. */
extern uint64 cpht_memory_held(void);

/* ERROR 53400 when `bytes` more would pass cpht.max_memory; `what` names
 * the allocation in the message ("cpht table", "stream buffer"). */
extern void cpht_memory_check(uint64 bytes, const char *what);

/* cpht_memory_check, then counts the bytes as held until released. */
extern void cpht_memory_reserve(uint64 bytes, const char *what);
extern void cpht_memory_release(uint64 bytes);

/* Bytes the cpht worker's kernels took (positive) or gave back for this
 * session's tables there: counted as its undo logs are. */
extern void cpht_memory_worker_delta(int64 delta);

/* What cpht.max_memory still allows this session, for a request to the
 * cpht worker; PG_UINT64_MAX without a cap. */
extern uint64 cpht_memory_budget(void);

#endif							/* CPHT_MEMCAP_H */
