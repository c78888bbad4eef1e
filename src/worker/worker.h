/*
 * worker/worker.h — the door of worker/: what runs outside the cpht worker
 * process.  Everything else of worker/ runs in the worker and is private
 * to the folder (worker_internal.h, durable.h, durable_internal.h,
 * xacts.h, xacts_internal.h, pending.h).
 *
 * Offers: the process's entry point (named in its registration,
 * shmem/shmem.c); the two steps of _PG_init while preloading that belong
 * to durable tables (the resource manager, refusing pg_upgrade); and the
 * one WAL record a backend writes itself (client/remote.c).
 *
 * Who: cpht.c and every layer above the worker may include it
 * (test/check-layout.sh); cpht.c and client/ do.  The worker itself never
 * includes client/, tableref/, session/ or api/.
 *
 * Concurrency: cpht_worker_main runs in the background worker, which
 * serves one request at a time on its main thread (the kernels may use
 * helper threads under a call) and answers a request's ERROR to that
 * request without ending; a sticky device fault ends it, and the
 * postmaster starts another.  cpht_wal_register and
 * cpht_catalog_refuse_binary_upgrade run in the postmaster while it loads
 * the library; the latter raises FATAL when a server started by
 * pg_upgrade has durable tables.  The resource manager's redo does
 * nothing (the worker replays its tables' WAL itself); its cleanup at the
 * end of recovery, in the startup process, keeps the WAL segments the
 * worker's restore needs.
 * cpht_wal_mark_xid runs in a backend, inside the (sub)transaction whose
 * xid it writes, before that one's first write to a transactional durable
 * table; it takes no lock of cpht's.
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
