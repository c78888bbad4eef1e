/*
 * client.h — a backend's side of the cpht worker protocol: its request
 * slot, arena windows, and the calls on shared tables built from them.
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
extern TransactionId cpht_ddl_create_xid(bool durable);
extern void cpht_ddl_note_create(int32 entry, uint64 table_id, const char *name);
extern void cpht_ddl_note_drop(int32 entry, uint64 table_id, const char *name);
extern bool cpht_ddl_drop_pending(int32 entry, uint64 table_id);
extern bool cpht_shared_entry_visible(int32 entry, const CphtCatalogEntry *e);
extern void cpht_ddl_xact_init(void);

#endif							/* CPHT_CLIENT_H */
