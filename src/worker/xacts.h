/*
 * xacts.h — transactional shared tables in the cpht worker: which open
 * transaction changed which keys, what those keys were before, and undoing
 * one transaction's changes alone.
 */
#ifndef CPHT_XACTS_H
#define CPHT_XACTS_H

#include "shmem/protocol.h"

/* At start. */
extern void cpht_xacts_init(void);

/* A table was created (transactional or not) or dropped at catalog index
 * entry; a drop forgets the pending changes on it. */
extern void cpht_xacts_table_created(int entry, uint64 table_id, bool transactional);
extern void cpht_xacts_table_dropped(int entry);

/*
 * Before a batch call of n keys on a table, for a write on a transactional
 * table: room to record the call's changes (ERROR when out of memory, so
 * before anything runs).
 */
extern void cpht_xacts_reserve(const CphtRequest *req, CphtCall call, uint64 n);

/*
 * Before each piece of such a write (all of a call that fits a window):
 * whether other open transactions changed any of its keys.  Then the reply
 * lists them and nothing of the call may stay: returns true.
 */
extern bool cpht_xacts_conflicts(const CphtRequest *req, CphtCall call,
								 const uint64 *keys, uint64 n, CphtReply *rep);

/*
 * After a call that succeeded (its changes are the table's log entries from
 * position on): a write's changes are recorded for its transaction (keys,
 * n and status unused); a find answers other transactions' pending keys as
 * they were before (called for each piece of a streamed find).  Returns
 * CPHT_OK, or the status of a failure to read the log (the call must then
 * be undone).
 */
extern cpht_status cpht_xacts_after_call(const CphtRequest *req, cpht_table *t, CphtCall call,
										 const uint64 *keys, uint64 n, uint8 *status,
										 uint64 position);

/*
 * Before a piece of an export: whether other open transactions have
 * changes on the table (then the reply names up to CPHT_MAX_CONFLICTS of
 * their top transactions, to wait for, and the piece must not be read).
 */
extern bool cpht_xacts_scan_conflicts(const CphtRequest *req, CphtReply *rep);

/* Bytes of the pending state of the table at catalog index entry: its open
 * transactions' undo lists and its pending map (quota.c counts them). */
extern uint64 cpht_xacts_table_bytes(int entry);

/* The table's count as the caller's transaction sees it, and as committed. */
extern uint64 cpht_xacts_count(const CphtRequest *req, uint64 physical);
extern uint64 cpht_xacts_committed_count(int entry, uint64 physical);

/* ERROR 55006 when open transactions hold deleted keys of the table. */
extern void cpht_xacts_check_rebuild(const CphtRequest *req);

/*
 * The changes open transactions made to the table at catalog index entry,
 * for its snapshot: fn is called per segment of each transaction's undo
 * list, oldest first within a transaction, with the writing
 * (sub)transaction and the entries (where[i] 0: inserted, else deleted).
 */
typedef void (*cpht_xacts_segment_fn) (void *arg, TransactionId subxid, const uint64 *keys,
									   const uint8 *where, uint64 n);
extern void cpht_xacts_each_segment(int entry, cpht_xacts_segment_fn fn, void *arg);

/* COMMIT, ABORT and ROLLBACK_TO requests. */
extern void cpht_xacts_end(const CphtRequest *req);

#endif							/* CPHT_XACTS_H */
