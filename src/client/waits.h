/*
 * waits.h — writes on transactional shared tables wait for the open
 * transactions that changed the same keys, as a unique index makes an
 * insert wait (waits.c); and those transactions tell the worker when they
 * end (xact_end.c).
 */
#ifndef CPHT_WAITS_H
#define CPHT_WAITS_H

#include "client/client.h"

/*
 * Tags a request on a shared table with the caller's transaction when the
 * table is transactional: a write gets the top transaction and the current
 * (sub)transaction, assigning their xids (so that others can wait for
 * them), and marks the transaction as one the worker must hear the end
 * of; a read gets the top transaction if it has one (it sees its own
 * changes).
 */
extern void cpht_waits_tag(CphtRequest *req, bool transactional, bool write);

/* What a write met: owners' (sub)transactions, and what was waited for. */
typedef struct CphtConflicts
{
	int			n;
	TransactionId sub[CPHT_MAX_CONFLICTS];	/* of the first changes */
	TransactionId top[CPHT_MAX_CONFLICTS];	/* their top transactions */
	bool		waited_top[CPHT_MAX_CONFLICTS]; /* this round waited for top */
} CphtConflicts;

/* Whether the reply is a conflict; if so, its owners go to *c. */
extern bool cpht_waits_conflicts(const CphtReply *rep, CphtConflicts *c);

/*
 * Waits for the owners of a conflict to end (their xid locks: cancelable,
 * deadlock-detected).  prev is the previous round of the same call (n 0
 * for none).
 */
extern void cpht_waits_wait(CphtConflicts *c, const CphtConflicts *prev);

#endif							/* CPHT_WAITS_H */
