/*
 * worker/worker.h — the door of worker/: what runs outside the cpht
 * worker process.  The process's entry point (named in its registration,
 * shmem/shmem.c), the two steps of _PG_init while preloading that belong
 * to durable tables, and the one WAL record a backend writes itself
 * (client/remote.c).  Everything else of worker/ runs in the worker and is
 * private to the folder (worker_internal.h, durable.h, xacts.h, pending.h).
 */
#ifndef CPHT_WORKER_DOOR_H
#define CPHT_WORKER_DOOR_H

#include "fmgr.h"

/* Entry point named in the background worker registration. */
extern PGDLLEXPORT void cpht_worker_main(Datum arg);

/* _PG_init while preloading: registers the resource manager
 * (durable_wal.c). */
extern void cpht_wal_register(void);

/* In the postmaster of a server started by pg_upgrade (-b): FATAL while
 * the data directory has durable tables, which pg_upgrade would leave
 * behind (durable_catalog.c). */
extern void cpht_catalog_refuse_binary_upgrade(void);

/*
 * A backend, before its first write in a (sub)transaction to a
 * transactional durable table: a record carrying its xid.  The worker's
 * records name the xid only in their payload; recovery advances the next
 * xid past the xids of records, so this keeps a crash from handing the
 * xid of an uncommitted write to a new transaction that could commit.
 */
extern void cpht_wal_mark_xid(TransactionId xid);

#endif							/* CPHT_WORKER_DOOR_H */
