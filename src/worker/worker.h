/*
 * worker.h — the cpht worker's parts: main.c runs the process, dispatch.c
 * serves requests and holds the tables.
 */
#ifndef CPHT_WORKER_H
#define CPHT_WORKER_H

#include "fmgr.h"

/* Entry point named in the background worker registration. */
extern PGDLLEXPORT void cpht_worker_main(Datum arg);

/* At start: the worker's table registry; shared tables a previous worker
 * held are marked lost, since their memory died with it. */
extern void cpht_worker_tables_init(void);

/* Serves every submitted request (one pass over the submission bitmap). */
extern void cpht_worker_serve(void);
extern bool cpht_worker_take_slot(int s);

/* At exit: answers whatever is still submitted (with the SQLSTATE
 * errcode) and marks the tables lost. */
extern void cpht_worker_shutdown(const char *reason, int errcode);

/* The kernels' interrupt check while the worker runs a call: the calling
 * backend's cancel flag. */
extern int	cpht_worker_interrupt(void);

/* private.c: private tables of backends, held in the worker. */
#include "protocol.h"

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

/* main.c: a sticky device fault ends the worker; the postmaster starts a
 * new one.  Answers every request in flight with 58000 first. */
extern void cpht_worker_device_lost(const char *reason) pg_attribute_noreturn();

/* The live table at a catalog index with that id, or NULL (xacts.c). */
struct cpht_table;
extern struct cpht_table *cpht_worker_table(int entry, uint64 table_id);

/* Marks a table lost for every session and frees it: its state cannot be
 * trusted any more (an undo failed). */
extern void cpht_worker_table_lose(int entry, const char *reason);

/* durable.c: a table restored from its snapshot or created from WAL goes
 * live at catalog index entry with this id (catalog fields set by the
 * caller, under the catalog lock); a DROP record drops one. */
extern void cpht_worker_table_install(int entry, uint64 table_id, struct cpht_table *t,
									  bool transactional);
extern void cpht_worker_table_drop(int entry);

/*
 * databases.c: the shared tables of dropped databases and of databases
 * whose cpht extension was dropped.  op_drop_database serves
 * CPHT_OP_DROP_DATABASE; drop_pending drops those noted for after the
 * restore of durable tables; drop_orphans, once per worker start after that
 * restore, drops the tables and snapshot files of databases that no longer
 * exist (pg_database), with a LOG line each.
 */
extern void cpht_worker_op_drop_database(CphtSlot *slot);
extern void cpht_worker_drop_pending(void);
extern void cpht_worker_drop_orphans(void);

#endif							/* CPHT_WORKER_H */
