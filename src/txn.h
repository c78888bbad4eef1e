/*
 * txn.h — transactional tables: keys put or deleted by a (sub)transaction
 * that aborts are undone, tables created in it disappear and tables
 * dropped in it come back.
 */
#ifndef CPHT_TXN_H
#define CPHT_TXN_H

#include "handles.h"

/* Registers the transaction callbacks (from _PG_init; no CUDA involved). */
extern void cpht_txn_init(void);

/* Call before any operation that may change the table: remembers where the
 * current subtransaction's changes start in the table's undo log. */
extern void cpht_txn_before_write(CphtHandle *h);

/* A table was created: it disappears if the creating transaction aborts. */
extern void cpht_txn_created(CphtHandle *h);

/* Drops a table transactionally: the handle is gone at once, the memory is
 * freed at commit, and an abort brings the table back. */
extern void cpht_txn_drop(int32 handle);

/* Bytes of tables dropped by the current transaction, not yet freed. */
extern uint64 cpht_txn_pending_drop_bytes(void);

#endif							/* CPHT_TXN_H */
