/*
 * waits.c — a write on a transactional shared table that meets keys other
 * open transactions changed waits for them, as an insert into a unique
 * index waits for the transaction that inserted the same key: on its xid
 * lock (XactLockTableWait), so the wait is cancelable, shows in pg_locks
 * and pg_stat_activity (Lock: transactionid) and takes part in deadlock
 * detection.  The worker ran nothing of the call; once the owners ended
 * (and, before releasing their locks, told the worker: xact_end.c) the
 * call is sent again and sees their outcome: a key is new again if its
 * owner rolled back, present if it committed.
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "storage/lmgr.h"
#include "storage/procarray.h"

#include "client/waits.h"

void
cpht_waits_tag(CphtRequest *req, bool transactional, bool write)
{
	if (!transactional)
		return;
	if (write)
	{
		/* others wait for the writer's xid, and a standby assigns none */
		if (RecoveryInProgress())
			ereport(ERROR,
					(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
					 errmsg("cannot write to a transactional shared cpht table during recovery"),
					 errdetail("Writes to a transactional shared table need a transaction id, which a server in recovery does not assign."),
					 errhint("On a standby, use a shared table created with transactional => false.")));
		req->sub_xid = GetCurrentTransactionId();
		req->top_xid = GetTopTransactionId();
		cpht_xact_end_note_write(req->top_xid, req->sub_xid);
	}
	else
		req->top_xid = GetTopTransactionIdIfAny();
}

bool
cpht_waits_conflicts(const CphtReply *rep, CphtConflicts *c)
{
	if (rep->sqlerrcode != 0 || rep->nconflicts <= 0)
		return false;
	c->n = Min(rep->nconflicts, CPHT_MAX_CONFLICTS);
	memcpy(c->sub, rep->conflicts, sizeof(TransactionId) * c->n);
	memcpy(c->top, rep->conflict_tops, sizeof(TransactionId) * c->n);
	return true;
}

/*
 * A (sub)transaction's xid lock goes when it aborts (after it told the
 * worker), but also when it commits into its parent: XactLockTableWait
 * then waits for the top transaction, unless that one is already leaving
 * the proc array and has not yet told the worker (the window between
 * ProcArrayEndTransaction and its commit callback).  So an owner named
 * again after its (sub)transaction was waited for is waited for by its top
 * transaction, whose lock goes only after the worker heard of its end;
 * named again after that, it is an error, not a loop.
 */
void
cpht_waits_wait(CphtConflicts *c, const CphtConflicts *prev)
{
	for (int i = 0; i < c->n; i++)
	{
		int			again = -1;

		for (int j = 0; j < prev->n; j++)
			if (prev->sub[j] == c->sub[i])
				again = j;
		c->waited_top[i] = again >= 0;
		if (again >= 0 && (prev->waited_top[again] || c->top[i] == c->sub[i]) &&
			!TransactionIdIsInProgress(c->top[i]))
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("shared cpht table keeps changes of transaction %u, which has ended", c->top[i]),
					 errdetail("The cpht worker was not told that the transaction ended.")));
	}
	for (int i = 0; i < c->n; i++)
		XactLockTableWait(c->waited_top[i] ? c->top[i] : c->sub[i], NULL, NULL, XLTW_None);
}
