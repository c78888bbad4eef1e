/*
 * worker/worker_internal.h — the cpht worker's parts: main.c runs the
 * process, dispatch.c serves requests, registry.c holds the shared
 * tables, calls.c runs calls on them.  Only files of worker/ include it.
 */
#ifndef CPHT_WORKER_INTERNAL_H
#define CPHT_WORKER_INTERNAL_H

#include "fmgr.h"

#include "shmem/protocol.h"
#include "worker/worker.h"

/* cpht_worker_main: worker/worker.h */

/* registry.c, at start: the worker's table registry; shared tables a previous worker
 * held are marked lost, since their memory died with it. */
extern void cpht_worker_shared_init(void);

/* dispatch.c: at start, the requests' memory context; serving every
 * submitted request (one pass over the submission bitmap); taking slot s's
 * request; the slot of the request being served (-1: none). */
extern void cpht_worker_serve_init(void);
extern void cpht_worker_serve(void);
extern bool cpht_worker_take_slot(int s);
extern int	cpht_worker_serving(void);

/* dispatch.c, at exit: answers whatever is still submitted (with the SQLSTATE
 * errcode) and marks the tables lost. */
extern void cpht_worker_shutdown(const char *reason, int errcode);

/* calls.c: the kernels' interrupt check while the worker runs a call: the calling
 * backend's cancel flag. */
extern int	cpht_worker_interrupt(void);

/*
 * calls.c: the requests that run the kernels on a table (CALL, STREAM,
 * SCAN, REBUILD), each ERRORing as the request's answer; call_reset, after
 * an ERROR in a request, says that no call runs any more; reply_status
 * sets a reply's status and, on failure, its message.
 */
extern void cpht_worker_op_call(CphtSlot *slot, int s);
extern void cpht_worker_op_stream(CphtSlot *slot, int s);
extern void cpht_worker_op_scan(CphtSlot *slot);
extern void cpht_worker_op_rebuild(CphtSlot *slot);
extern void cpht_worker_call_reset(void);
extern void cpht_worker_reply_status(CphtReply *rep, cpht_status status, const char *message);

/* private.c: private tables of backends, held in the worker. */

/* At start: the registry and the worker's memory hook. */
extern void cpht_private_init(void);

/* Serves the CPHT_OP_PRIVATE_* and undo log requests; false for others. */
extern bool cpht_private_request(CphtSlot *slot, int s);

/* The private table id of slot s, held by the slot's current process;
 * ERROR 58000 when the worker holds no such table. */
extern struct cpht_table *cpht_private_table(int s, uint64 id);

/* Whether that table keeps an undo log for its backend's savepoints. */
extern bool cpht_private_table_logs(int s, uint64 id);

/* Frees the private tables whose backend left its slot. */
extern void cpht_private_sweep(void);

/* After a request on a private table of slot s: its slot bytes into the
 * reply and into cpht_worker_info's private_bytes (it may have grown). */
extern void cpht_private_note_bytes(int s, const CphtRequest *req, CphtReply *rep);

/* Around each request: the backend's memory budget for a private table,
 * and the net bytes the kernels took meanwhile. */
extern void cpht_private_request_begin(const CphtRequest *req);
extern int64 cpht_private_request_end(void);

/*
 * A request on a shared table whose kernels and pending state may take at
 * most `left` bytes more (quota.c): budget_on turns the budget on for the
 * rest of the request, budget_take takes bytes of it for the worker's own
 * allocations (false, nothing taken, when they pass it), budget_refused is
 * what the last refusal asked for.
 */
extern void cpht_worker_budget_on(uint64 left);
extern bool cpht_worker_budget_take(uint64 bytes);
extern uint64 cpht_worker_budget_refused(void);

/*
 * quota.c: what shared tables may hold.  A table's bytes are its slots and
 * its open transactions' pending state; its owner's shared tables together
 * are bounded by the table's memory_cap_kb, all of them by
 * cpht.max_shared_memory.  check_create: ERROR 53400 when a new table of
 * `bytes` would pass either.  begin: before a write (or rebuild) of the
 * table at catalog index entry, the budget for its kernels and pending
 * state (cpht_worker_budget_*); refused: ERROR 53400 after such a request
 * failed with CPHT_ERR_LIMIT, or a pending reservation was refused
 * (`needed` bytes more), with the figures of the cap that was hit.
 */
extern uint64 cpht_quota_server_cap(void);
extern void cpht_quota_check_create(const NameData *name, Oid owner, int32 cap_kb, uint64 bytes);
extern void cpht_quota_check_owner_change(int entry, Oid new_owner, int32 new_owner_cap_kb);
extern void cpht_quota_begin(int entry);
extern void cpht_quota_end(void);
extern bool cpht_quota_active(void);
extern void cpht_quota_take(uint64 bytes);
extern void cpht_quota_refused(uint64 needed) pg_attribute_noreturn();

/* main.c: a sticky device fault ends the worker; the postmaster starts a
 * new one.  Answers every request in flight with 58000 first. */
extern void cpht_worker_device_lost(const char *reason) pg_attribute_noreturn();

/*
 * registry.c: the shared tables the worker holds, by catalog index (the
 * cpht_worker_shared_* functions; a backend's private tables held here are
 * private.c's).  request_table: the live table a request names (a private
 * one of the slot served, or a shared one); ERROR when it is gone, lost,
 * opened before this worker started or being restored.  op_create, op_drop,
 * op_alter_owner serve those requests; shared_written: after a write, the
 * catalog's count and bytes of the table.
 */
struct cpht_table;
extern struct cpht_table *cpht_worker_request_table(const CphtRequest *req);
extern void cpht_worker_op_create(CphtSlot *slot);
extern void cpht_worker_op_drop(CphtSlot *slot);
extern void cpht_worker_op_alter_owner(CphtSlot *slot);
extern void cpht_worker_op_create_commit(CphtSlot *slot);
extern void cpht_worker_shared_written(const CphtRequest *req, struct cpht_table *t);

/* The live shared table at a catalog index with that id, or NULL. */
extern struct cpht_table *cpht_worker_shared_table(int entry, uint64 table_id);

/* Marks a shared table lost for every session and frees it: its state cannot be
 * trusted any more (an undo failed). */
extern void cpht_worker_shared_lose(int entry, const char *reason);

/* durable_restore.c: a shared table restored from its snapshot or created from WAL goes
 * live at catalog index entry with this id (catalog fields set by the
 * caller, under the catalog lock); a DROP record drops one. */
extern void cpht_worker_shared_install(int entry, uint64 table_id, struct cpht_table *t,
									   bool transactional);
extern void cpht_worker_shared_drop(int entry);

/*
 * databases.c: the shared tables of dropped databases and of databases
 * whose cpht extension was dropped.  op_drop_database serves
 * CPHT_OP_DROP_DATABASE; drop_pending drops those noted for after the
 * restore of durable tables; read_databases reads pg_database once per
 * worker start, before that restore; drop_orphans, after it, drops the
 * tables and snapshot files of databases that no longer existed then, with
 * a LOG line each.
 */
extern void cpht_worker_op_drop_database(CphtSlot *slot);
extern void cpht_worker_drop_pending(void);
extern void cpht_worker_read_databases(void);
extern void cpht_worker_drop_orphans(void);

#endif							/* CPHT_WORKER_INTERNAL_H */
