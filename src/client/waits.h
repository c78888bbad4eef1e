/*
 * waits.h — writes on transactional shared tables wait for the open
 * transactions that changed the same keys, as a unique index makes an
 * insert wait (waits.c); and those transactions tell the worker when they
 * end (xact_end.c).
 */
#ifndef CPHT_WAITS_H
#define CPHT_WAITS_H

#include "client.h"

/*
 * Tags a request on a shared table with the caller's transaction when the
 * table is transactional: a write gets the top transaction and the current
 * (sub)transaction, assigning their xids (so that others can wait for
 * them), and marks the transaction as one the worker must hear the end
 * of; a read gets the top transaction if it has one (it sees its own
 * changes).
 */
extern void cpht_waits_tag(CphtRequest *req, bool transactional, bool write);

/* Whether the reply is a conflict; if so, its xids go to conflicts. */
extern bool cpht_waits_conflicts(const CphtReply *rep, TransactionId *conflicts,
								 int *nconflicts);

/*
 * Waits for each (sub)transaction of a conflict to end (its xid lock:
 * cancelable, deadlock-detected).  waited lists those of the previous
 * round: one of them named again after it ended is an error, not a loop.
 */
extern void cpht_waits_wait(const TransactionId *xids, int n,
							const TransactionId *waited, int nwaited);

/* xact_end.c: a write of (sub)transaction sub_xid of top_xid is about to
 * be sent. */
extern void cpht_xact_end_note_write(TransactionId top_xid, TransactionId sub_xid);

/* xact_end.c: registers the transaction callbacks (from _PG_init). */
extern void cpht_xact_end_init(void);

#endif							/* CPHT_WAITS_H */
