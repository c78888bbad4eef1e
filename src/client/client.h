/*
 * client/client.h — the door of client/: a backend's side of the cpht
 * worker protocol (shmem/protocol.h): its request slot, arena windows,
 * the calls on shared tables and on private tables held by the worker,
 * waits on other transactions, telling the worker how transactions end,
 * creating and dropping shared tables inside transaction blocks (with the
 * lock on their names), the rows of cpht_shared_tables, and the hooks for
 * DROP DATABASE, DROP EXTENSION and owners.
 *
 * Who: cpht.c, api/, plan/, stream/, session/ and tableref/ may include it
 * (test/check-layout.sh); waits.h is private.  The *_init functions are
 * called from _PG_init, those of db_drop.c, owners.c and ddl_xact.c only
 * while preloading (in the postmaster).  Requests need cpht preloaded
 * (ERROR 55000 otherwise).
 *
 * Concurrency: callers are backends and parallel workers, on their own
 * thread; each process owns the slot of its pgprocno and has at most one
 * request out.  The slot's state moves by atomics with barriers (no lock);
 * window_free, the worker's pid, generation and GPU fields and the pending
 * drops are read and written under the control spinlock; a backend waits
 * for a free window on window_cv and for the durable restore on durable_cv
 * (up to a minute), and never waits for a window while it holds one.
 * owners.c reads the catalog under catalog_lock in shared mode; the
 * caller of cpht_shared_entry_visible holds it.  A write that met other
 * transactions' keys waits on their xid locks (XactLockTableWait); a name
 * is locked by a heavyweight lock held to the end of the transaction.
 * Waiting for the worker never calls CHECK_FOR_INTERRUPTS while the worker
 * holds the request: a cancel or terminate is passed through the slot and
 * the worker undoes the call.  cpht_client_send and the calls built on it
 * raise the worker's ERROR; cpht_client_send_quiet and the stream calls
 * while the request is out never raise.  A parallel worker's writes end
 * with its leader's transaction: only the leader tells the worker.
 */
#ifndef CPHT_CLIENT_H
#define CPHT_CLIENT_H

#include "shmem/protocol.h"

/* A shared table as the worker knows it. */
typedef struct CphtSharedRef
{
	int32		entry;			/* catalog index */
	uint64		table_id;
	bool		transactional;	/* writes wait for other transactions */
	bool		durable;		/* changes go to WAL (the worker's durable.c) */
} CphtSharedRef;

/* ERROR 55000 unless cpht was preloaded; `what` names the refused feature
 * in the message. */
extern void cpht_client_require_preload(const char *what);

/*
 * Takes this backend's request slot (once per backend; ERROR without
 * preload).  Requests attach on their own; a leader whose parallel
 * workers write for its transaction attaches before they start, so that
 * its transaction's end reaches the worker although the leader itself
 * never sent a request (xact_end.c).
 */
extern void cpht_client_attach(void);

/* This backend's request, zeroed, to fill and pass to cpht_client_send. */
extern CphtRequest *cpht_client_request(void);

/*
 * Submits the request and waits for the reply, cancelable: a cancel or
 * terminate request while waiting is passed on to the worker, which stops
 * and undoes the running call.  Raises the worker's ERROR, if any; a
 * kernel status is left in the reply for the caller.  The reply is valid
 * until the next request.
 */
extern CphtReply *cpht_client_send(void);

/*
 * cpht_client_send for a transaction's end, which must not raise: NULL when
 * no worker runs (or this backend never talked to one), else the reply,
 * whose error, if any, the caller reports as it can.
 */
extern CphtReply *cpht_client_send_quiet(void);

/* Whether this backend may send a request now: attached, the postmaster
 * alive, and no request of its own still out (a wait for one ended by
 * postmaster death leaves it submitted). */
extern bool cpht_client_idle(void);

/* An arena window for one call (waits, cancelable, while none is free),
 * and its release; a window still held when the backend exits is
 * released then.  try_acquire takes a further window only if one is free
 * now (-1 if not): a backend never waits for a window while it holds
 * one. */
extern int	cpht_client_window_acquire(void);
extern int	cpht_client_window_try_acquire(void);
extern void cpht_client_window_release(int window);
/* Enters the first nkeys keys of a held window and their status bytes into
 * this backend's page tables before a copy fills them (a call of nkeys). */
extern void cpht_client_window_enter(int window, uint64 nkeys);

/*
 * A STREAM request (protocol.h): stream_submit hands the filled request to
 * the worker, with the keys of pieces [0, filled) in their windows, and
 * returns at once;
 * stream_filled tells the worker that the keys of pieces [0, pieces) are
 * in their windows; stream_wait waits, cancelable as cpht_client_send,
 * until the worker has run more pieces than *ran (false, *ran updated) or
 * has answered (true).  None of them raises while the request is out.
 * stream_reply, after stream_wait said true, raises the worker's ERROR if
 * any and returns the reply.
 */
extern void cpht_client_stream_submit(uint64 filled);
extern void cpht_client_stream_filled(uint64 pieces);
extern bool cpht_client_stream_wait(uint64 *ran);
extern CphtReply *cpht_client_stream_reply(void);

/*
 * A batch call on a shared table: the keys (already checked against the
 * table's key_bits) go through arena windows, in pieces when they do not
 * fit one, and the table sees a single call.  status gets a byte per key
 * (NULL for PUT); returns the number of keys inserted by PUT.  handle
 * names the table in errors.
 */
extern uint64 cpht_remote_call(const CphtSharedRef *ref, int32 handle, CphtCall call,
							   const uint64 *keys, uint64 n, uint8 *status);

/* Where the worker spent the time of this backend's last successful
 * cpht_remote_call (cpht.trace). */
extern void cpht_remote_last_times(cpht_call_times *out);
/* This backend's calls that fit one transfer window, summed since it
 * started (ms): on its side waiting for a window, its keys into the window,
 * waiting for the worker's answer, statuses out of the window; then the
 * worker's time on these calls, and of that its transaction bookkeeping
 * (CphtReply.worker_ms, txn_ms). */
#define CPHT_WINDOW_SPLIT_PARTS 6
extern void cpht_remote_window_split(double out[CPHT_WINDOW_SPLIT_PARTS]);

/* COUNT, STATS, REBUILD (returns the tombstones removed) and DROP. */
extern uint64 cpht_remote_count(const CphtSharedRef *ref);
extern void cpht_remote_stats(const CphtSharedRef *ref, int32 handle, cpht_stats *out);
extern uint64 cpht_remote_rebuild(const CphtSharedRef *ref, int32 handle);
extern void cpht_remote_drop(const CphtSharedRef *ref);

/*
 * A piece of an export (SCAN) of a shared table (ref), or of the private
 * table table_id (ref NULL): at most max keys (and no more than a window)
 * into keys[0..out->value), the kernel status and the scan_* fields in
 * *out.  On a transactional shared table it first waits for the other
 * transactions that have changes on it.
 */
extern void cpht_remote_scan(const CphtSharedRef *ref, uint64 table_id, uint64 position,
							 uint64 *keys, uint64 max, CphtReply *out);

/* False once the backend left its slot on the way out (and without
 * preloading): no request can be sent any more. */
extern bool cpht_client_can_send(void);

/* db_drop.c: with cpht preloaded, the shared tables of a database go with
 * it and with its cpht extension (an object access hook notes the drop,
 * the commit tells the worker).  From _PG_init in the postmaster. */
extern void cpht_db_drop_init(void);

/* owners.c: with cpht preloaded, DROP ROLE of a role owning shared tables
 * is refused, REASSIGN OWNED and DROP OWNED handle them.  From _PG_init in
 * the postmaster. */
extern void cpht_owners_init(void);

/* The cpht worker's GPU state (CPHT_GPU_USABLE or CPHT_GPU_UNUSABLE with
 * the reason), waiting for a worker to run; *generation gets the worker's
 * start count. */
extern int	cpht_client_gpu(char *reason, size_t len, uint64 *generation);
extern void cpht_client_gpu_room(int *count, uint64 *free_bytes);

/* cpht.inject_device_fault: guc.h */

/*
 * A request on a private table held by the worker: `op` with the table's
 * id and the backend's memory budget; raises the worker's ERROR, leaves a
 * kernel status in the reply.
 */
extern CphtReply *cpht_remote_private(CphtOp op, uint64 table_id, uint64 memory_budget,
									  uint64 offset);

/*
 * A batch call on a private table held by the worker, as cpht_remote_call
 * but the kernel status and its message are left in *reply (status,
 * message, memory_delta summed over the pieces, times) for the caller.
 */
extern uint64 cpht_remote_private_call(uint64 table_id, uint64 memory_budget, CphtCall call,
									   const uint64 *keys, uint64 n, uint8 *status,
									   CphtReply *reply);

/*
 * Waits (cancelably, up to a minute) until the cpht worker has restored the
 * durable tables after a start or a restart of the worker; returns at once
 * on a standby, which restores nothing.
 */
extern void cpht_shared_wait_restored(void);

/* xact_end.c: a write of (sub)transaction sub_xid of top_xid is about to
 * be sent. */
extern void cpht_xact_end_note_write(TransactionId top_xid, TransactionId sub_xid);

/* xact_end.c: registers the transaction callbacks (from _PG_init). */
extern void cpht_xact_end_init(void);

/*
 * xact_end.c: statements a backend notes to tell the worker at commit
 * (db_drop.c, owners.c), each item of `size` bytes with its int nesting
 * level at `level_offset`: a subtransaction's abort drops the items noted
 * in it, its commit hands them to its parent.  `event` is the subtransaction
 * callback's; other events change nothing.
 */
extern void cpht_noted_subxact_end(int event, void *items, int *n, size_t size,
								   size_t level_offset);

/*
 * ddl_xact.c: creating and dropping shared tables inside a transaction
 * block.  cpht_ddl_lock_name takes the exclusive lock on a shared table's
 * name in this database, held to the end of the transaction; in_block:
 * whether creating and dropping are undone by a rollback (a transaction
 * block, or a subtransaction such as a function's EXCEPTION block);
 * create_xid: the xid a CREATE carries there (Invalid outside; for a
 * durable table after an XID record); note_create and note_drop: the
 * table's creation is kept at commit, dropped at rollback, or its drop is
 * sent at commit, forgotten at rollback; drop_pending: this transaction
 * dropped it; entry_visible: whether this session sees catalog entry e
 * (another transaction's creation that has not committed, or a drop of
 * this transaction, hides it); init: the callbacks (from _PG_init).
 */
extern void cpht_ddl_lock_name(const char *name);
extern bool cpht_ddl_in_block(void);
/*
 * catalog_rows.c: the rows of cpht_shared_tables follow a shared table's
 * creation (key_bits 0: the width follows the keys; shards 0: not
 * sharded), drop, change of owner and REASSIGN/DROP OWNED (new_owner
 * invalid: the rows go), in the calling transaction, as the table's owner;
 * nothing where the table does not exist (an extension not updated yet).
 * cpht_catalog_table: the table's qualified name, owner and schema (false:
 * none); cpht_catalog_exec_as_owner: a statement run as that owner.
 */
extern void cpht_catalog_row_created(const char *name, Oid owner, const char *kind,
									 int64 capacity, int32 key_bits, bool transactional,
									 bool durable, int shards);
extern void cpht_catalog_row_dropped(const char *name);
extern void cpht_catalog_row_owner(const char *name, Oid owner);
extern void cpht_catalog_rows_reassign(Oid old_owner, Oid new_owner);
extern bool cpht_catalog_table(char **qualified, Oid *owner, char **schema);
extern uint64 cpht_catalog_exec_as_owner(Oid owner, const char *sql, int nargs, Oid *types,
										 Datum *values, const char *nulls);

extern TransactionId cpht_ddl_create_xid(bool durable);
extern void cpht_ddl_note_create(int32 entry, uint64 table_id, const char *name);
extern void cpht_ddl_note_drop(int32 entry, uint64 table_id, const char *name, bool durable);
/* The LOG line of a shared table created or dropped (by role, in db):
 * they are function calls, which log_statement = ddl does not see.  A
 * drop inside a transaction block is logged at its commit. */
extern void cpht_ddl_log(const char *name, bool durable, bool created, const char *db,
						 const char *role);
extern bool cpht_ddl_drop_pending(int32 entry, uint64 table_id);
extern bool cpht_shared_entry_visible(int32 entry, const CphtCatalogEntry *e);
extern void cpht_ddl_xact_init(void);

#endif							/* CPHT_CLIENT_H */
