/*
 * tableref.h — a table wherever it lives: a private table in this backend
 * (the kernels called directly) or in the cpht worker (requests through
 * shared memory), or a shared table.  The SQL functions, transactions and
 * introspection call these instead of the kernels, so every placement runs
 * the same code and raises the same errors: an operation returns the
 * kernels' status and leaves their message in cpht_tableref_error(), as
 * cpht_table.h does.  A private table lives in the worker when cpht is
 * preloaded and either it goes to the GPU (only the worker initialises
 * CUDA then) or cpht.placement = worker.  A shared table's calls check
 * the reference against the shared catalog and the role's privileges and
 * raise their own errors, so its operations return only CPHT_OK (but
 * rollback_to: a shared table has no undo log in a session).  A table
 * in the worker is lost when the worker that holds it exits; using it then
 * fails with 58000 naming it, and dropping it only forgets it.
 *
 * Who: cpht.c, api/, plan/, stream/ and session/ may include it
 * (test/check-layout.sh); session/ does.  tableref_internal.h (the
 * routine of each placement) is private to the folder.
 *
 * Concurrency: a reference belongs to one process and is used on its
 * thread, one call at a time: the backend's (a parallel worker reaches
 * shared tables only).  A table in this backend may run a stream's batch
 * on a kernels' helper thread, which every other call waits for; without
 * preloading, choosing the GPU initialises CUDA in this backend.  A table
 * in the worker waits for the worker's reply through client/ (cancelable:
 * the cancel goes to the worker, which undoes the call).  A shared table's
 * check reads the catalog under catalog_lock in shared mode and the
 * worker's generation under the control spinlock; worker_private.c reads
 * the worker's generation and pid under that spinlock.  The worker's
 * ERROR of a request is raised here; destroy, rollback_to and
 * truncate_log never raise (they run in transaction callbacks and at exit).
 */
#ifndef CPHT_TABLEREF_H
#define CPHT_TABLEREF_H

#include "cpht_table.h"
#include "client/client.h"
#include "guc.h"

/*
 * A reference to one table, wherever it lives, with the routine of its
 * placement (tableref_internal.h).  Not the kernels' struct cpht_table: a
 * table in this backend holds one of those, a table in the worker only its
 * id there.
 */
typedef struct CphtTableRef CphtTableRef;

/* cpht.placement and its values: guc.h */

/*
 * The device a new private table goes to, by cpht.device.  Preloaded, the
 * worker's probe answers (the backend never touches CUDA); otherwise the
 * backend probes the GPU itself, only when the setting allows it.  ERROR
 * 55000 for cpht.device = gpu without a usable GPU.
 */
extern cpht_device cpht_tableref_choose_device(void);

/*
 * The GPUs a new GPU table may use: how many, and the room of the first
 * (its free memory now; preloaded, when the cpht worker started).  Call
 * only after cpht_tableref_choose_device chose the GPU.
 */
extern void cpht_tableref_gpu_room(int *count, uint64 *free_bytes);

/* Whether a new private table with these parameters goes to the worker. */
extern bool cpht_tableref_in_worker(const cpht_params *params);

/*
 * Creates a table (in the worker when in_worker), with its undo log on
 * when logging; CPHT_OK with *out set, or a status with the message in
 * errbuf.  A worker's ERROR (it is not running) is raised.
 */
extern cpht_status cpht_tableref_create(const cpht_params *params, bool in_worker, bool logging,
										CphtTableRef **out, char *errbuf, size_t errlen);

/* Names the table in errors (its handle, once it has one). */
extern void cpht_tableref_set_handle(CphtTableRef *t, int32 handle);

/*
 * Shared tables (shared_table.c).  The reference of the shared table at
 * catalog index entry with this table id, for handle (allocated once per
 * handle, by session/shared_handles.c); it keeps the cpht worker it was
 * opened under, so that a table a later worker restored under a new id is
 * not reached through it.
 */
extern CphtTableRef *cpht_tableref_shared(int32 handle, int32 entry, uint64 table_id);

/* Its catalog index (-1 once this session dropped the table) and table id. */
extern int32 cpht_tableref_shared_entry(const CphtTableRef *t);
extern uint64 cpht_tableref_shared_table_id(const CphtTableRef *t);

/* This session dropped the table: the reference reaches nothing any more. */
extern void cpht_tableref_shared_forget(CphtTableRef *t);

/*
 * The shared table of a reference, usable by the current role: ERROR 42704
 * when it was dropped, 58000 when it was lost or opened before the cpht
 * worker restarted, 42501 when the role may not use it.  *name and *owner
 * (when not NULL) get its name and owner.  Every operation on a shared
 * table checks this first.
 */
extern CphtSharedRef cpht_tableref_shared_check(CphtTableRef *t, char *name, Oid *owner);

/* ERROR 42501 unless the current role has the privileges of owner. */
extern void cpht_shared_check_privileges(const char *name, Oid owner);

/* ERROR 58000: the table of e was lost with a cpht worker that exited. */
extern void cpht_shared_lost_error(const CphtCatalogEntry *e);

/* ERROR 58000 for handle, opened before the cpht worker restarted;
 * durable_name names the durable table when it is known. */
extern void cpht_shared_restarted_error(int32 handle, const char *durable_name) pg_attribute_noreturn();

/* Frees the table; never raises (it runs in transaction callbacks and at
 * exit): a worker that cannot be asked frees it when the backend leaves. */
extern void cpht_tableref_destroy(CphtTableRef *t);

/* "backend" or "worker". */
extern const char *cpht_tableref_placement(const CphtTableRef *t);

/* Bytes of slot memory the table has now (it grows); created_bytes until
 * a table in the worker has answered a call. */
extern uint64 cpht_tableref_slot_bytes(CphtTableRef *t, uint64 created_bytes);

/* Whether the table lived in a cpht worker that exited. */
extern bool cpht_tableref_lost(const CphtTableRef *t);

extern cpht_status cpht_tableref_find_or_put(CphtTableRef *t, const uint64 *keys, size_t n, uint8 *status);
extern cpht_status cpht_tableref_find(CphtTableRef *t, const uint64 *keys, size_t n, uint8 *found);
extern cpht_status cpht_tableref_put(CphtTableRef *t, const uint64 *keys, size_t n, uint64 *inserted);
extern cpht_status cpht_tableref_erase(CphtTableRef *t, const uint64 *keys, size_t n, uint8 *present);
extern uint64 cpht_tableref_count(CphtTableRef *t);
/* Rebuilds; *removed gets the tombstones that were in the table. */
extern cpht_status cpht_tableref_rebuild(CphtTableRef *t, uint64 *removed);
extern cpht_status cpht_tableref_stats(CphtTableRef *t, cpht_stats *out);
extern const char *cpht_tableref_error(const CphtTableRef *t);
extern void cpht_tableref_call_times(const CphtTableRef *t, cpht_call_times *out);

/*
 * A piece of an export (cpht_table_scan_keys): at most max keys from
 * *position on into keys[0..piece->n), *position advanced; the piece says
 * where the scan ends and the table's change counter and key count as of
 * this piece, so that the caller sees whether the table changed between
 * pieces.  A table in the worker reads at most a transfer window a piece;
 * a transactional shared table is read only while no other transaction
 * has changes on it (the call waits for them).
 */
typedef struct CphtScanPiece
{
	size_t		n;
	uint64		end;
	uint64		changes;
	uint64		count;
} CphtScanPiece;

extern cpht_status cpht_tableref_scan(CphtTableRef *t, uint64 *position, uint64 *keys,
									  size_t max, CphtScanPiece *piece);

/* The undo log (session/txn.c).  rollback_to and truncate_log never raise: they
 * run in transaction callbacks; a worker that cannot be asked makes
 * rollback_to fail (CPHT_ERR_DEVICE, with the reason). */
extern uint64 cpht_tableref_log_position(CphtTableRef *t);
extern cpht_status cpht_tableref_rollback_to(CphtTableRef *t, uint64 position);
extern void cpht_tableref_truncate_log(CphtTableRef *t, uint64 position);

/*
 * Streams of find-or-put batches (cpht_stream_* of cpht_table.h).  A
 * table in the worker runs each batch when it is started and hands its statuses
 * out at the next finish.
 */
typedef struct CphtTableRefStream CphtTableRefStream;

extern CphtTableRefStream *cpht_tableref_stream_open(CphtTableRef *t);	/* NULL: out of memory */
extern cpht_status cpht_tableref_stream_start(CphtTableRefStream *s, const uint64 *keys, size_t n);
extern cpht_status cpht_tableref_stream_finish(CphtTableRefStream *s, const uint8 **status,
											   size_t *n, uint64 *inserted);
extern void cpht_tableref_stream_close(CphtTableRefStream *s);

#endif							/* CPHT_TABLEREF_H */
