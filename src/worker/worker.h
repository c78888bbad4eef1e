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

/* At exit: answers whatever is still submitted and marks the tables lost. */
extern void cpht_worker_shutdown(const char *reason);

/* The kernels' interrupt check while the worker runs a call: the calling
 * backend's cancel flag. */
extern int	cpht_worker_interrupt(void);

/* The live table at a catalog index with that id, or NULL (xacts.c). */
struct cpht_table;
extern struct cpht_table *cpht_worker_table(int entry, uint64 table_id);

/* Marks a table lost for every session and frees it: its state cannot be
 * trusted any more (an undo failed). */
extern void cpht_worker_table_lose(int entry, const char *reason);

#endif							/* CPHT_WORKER_H */
