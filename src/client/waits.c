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
#include "storage/lmgr.h"
#include "storage/procarray.h"

#include "waits.h"

void
cpht_waits_tag(CphtRequest *req, bool transactional, bool write)
{
	if (!transactional)
		return;
	if (write)
	{
		req->sub_xid = GetCurrentTransactionId();
		req->top_xid = GetTopTransactionId();
		cpht_xact_end_note_write(req->top_xid, req->sub_xid);
	}
	else
		req->top_xid = GetTopTransactionIdIfAny();
}

bool
cpht_waits_conflicts(const CphtReply *rep, TransactionId *conflicts, int *nconflicts)
{
	if (rep->sqlerrcode != 0 || rep->nconflicts <= 0)
		return false;
	*nconflicts = Min(rep->nconflicts, CPHT_MAX_CONFLICTS);
	memcpy(conflicts, rep->conflicts, sizeof(TransactionId) * *nconflicts);
	return true;
}

void
cpht_waits_wait(const TransactionId *xids, int n, const TransactionId *waited, int nwaited)
{
	for (int i = 0; i < n; i++)
	{
		for (int j = 0; j < nwaited; j++)
		{
			/* Its lock was released, so it told the worker it ended. */
			if (xids[i] == waited[j] && !TransactionIdIsInProgress(xids[i]))
				ereport(ERROR,
						(errcode(ERRCODE_INTERNAL_ERROR),
						 errmsg("shared cpht table keeps changes of transaction %u, which has ended", xids[i]),
						 errdetail("The cpht worker was not told that the transaction ended.")));
		}
	}
	for (int i = 0; i < n; i++)
		XactLockTableWait(xids[i], NULL, NULL, XLTW_None);
}
