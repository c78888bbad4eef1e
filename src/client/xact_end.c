/*
 * xact_end.c — a transaction that wrote to transactional shared tables
 * tells the cpht worker how it ended, before it releases its xid locks:
 * writers waiting on those locks (waits.c) then find its keys settled.
 *
 * PostgreSQL calls the transaction callbacks of a commit or an abort, and
 * the subtransaction callback of a subtransaction's abort, before it
 * releases the (sub)transaction's locks (xact.c: CallXactCallbacks, then
 * ResourceOwnerRelease ... RESOURCE_RELEASE_LOCKS).  A backend that exits
 * with a transaction open, normally or by pg_terminate_backend, aborts it
 * in ShutdownPostgres (AbortOutOfAnyTransaction), through the same
 * callbacks, before its locks go; the request slot still works then.
 *
 * These messages never raise: interrupts are held while a transaction
 * ends, and an ERROR there would be a PANIC or a loop.  When no worker
 * runs, the tables were lost with it, so there is nothing to undo: a
 * WARNING says so.
 */
#include "postgres.h"

#include "access/parallel.h"
#include "access/transam.h"
#include "access/xact.h"
#include "storage/pmsignal.h"

#include "client/waits.h"

/* The top transaction that wrote to a transactional shared table, and the
 * latest (sub)transaction that did. */
static TransactionId written_top = InvalidTransactionId;
static TransactionId last_write = InvalidTransactionId;

void
cpht_xact_end_note_write(TransactionId top_xid, TransactionId sub_xid)
{
	/* a parallel worker writes for its leader, which ends the transaction */
	if (IsParallelWorker())
		return;

	/*
	 * The end goes through this backend's request slot.  A leader whose
	 * parallel workers alone write never sent a request of its own: it
	 * takes its slot now, while it still may raise.
	 */
	cpht_client_attach();
	written_top = top_xid;
	last_write = sub_xid;
}

static void
tell_worker(CphtOp op, TransactionId sub_xid)
{
	CphtRequest *req;
	CphtReply  *rep;

	/*
	 * The slot is attached when the write is noted, and a request's wait
	 * ends with its reply, so only the postmaster's death leaves it busy.
	 */
	if (!cpht_client_idle())
	{
		ereport(WARNING,
				(errmsg("the cpht worker could not be told that transaction %u ended", written_top),
				 PostmasterIsAlive() ?
				 errdetail("This session's request to the cpht worker has not ended.") :
				 errdetail("The postmaster exited: the server is going down.")));
		return;
	}
	req = cpht_client_request();
	req->op = op;
	req->top_xid = written_top;
	req->sub_xid = sub_xid;
	rep = cpht_client_send_quiet();
	if (rep == NULL)
		ereport(WARNING,
				(errmsg("the cpht worker could not be told that transaction %u ended", written_top),
				 errdetail("No cpht worker runs now: the next one keeps or undoes the transaction's changes of durable shared tables as the transaction ended; other shared tables were lost with the worker.")));
	else if (rep->sqlerrcode != 0)
		ereport(WARNING,
				(errmsg("the cpht worker failed to end transaction %u: %s", written_top, rep->message)));
}

static void
at_xact_event(XactEvent event, void *arg)
{
	(void) arg;
	if (!TransactionIdIsValid(written_top))
		return;
	switch (event)
	{
		case XACT_EVENT_PRE_PREPARE:
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot prepare a transaction that changed transactional shared cpht tables"),
					 errdetail("Other sessions wait for its changes, which the cpht worker undoes or keeps only when the transaction ends in this session.")));
			break;
		case XACT_EVENT_COMMIT:
			tell_worker(CPHT_OP_XACT_COMMIT, InvalidTransactionId);
			written_top = last_write = InvalidTransactionId;
			break;
		case XACT_EVENT_ABORT:
			tell_worker(CPHT_OP_XACT_ABORT, InvalidTransactionId);
			written_top = last_write = InvalidTransactionId;
			break;
		default:
			break;
	}
}

static void
at_subxact_event(SubXactEvent event, SubTransactionId mySubid,
				 SubTransactionId parentSubid, void *arg)
{
	TransactionId xid;

	(void) mySubid;
	(void) parentSubid;
	(void) arg;
	if (event != SUBXACT_EVENT_ABORT_SUB || !TransactionIdIsValid(written_top))
		return;

	/*
	 * The aborting subtransaction is still current.  Without an xid it
	 * wrote nothing; it or its children wrote to shared tables only if the
	 * latest write's xid follows or equals its own (writes inside it come
	 * after it got its xid).
	 */
	xid = GetCurrentTransactionIdIfAny();
	if (!TransactionIdIsValid(xid) || !TransactionIdFollowsOrEquals(last_write, xid))
		return;
	tell_worker(CPHT_OP_XACT_ROLLBACK_TO, xid);
}

void
cpht_xact_end_init(void)
{
	RegisterXactCallback(at_xact_event, NULL);
	RegisterSubXactCallback(at_subxact_event, NULL);
}

void
cpht_noted_subxact_end(int event, void *items, int *n, size_t size, size_t level_offset)
{
	int			level = GetCurrentTransactionNestLevel();
	char	   *base = items;

#define LEVEL_OF(i) ((int *) (base + (size_t) (i) * size + level_offset))
	if (event == SUBXACT_EVENT_ABORT_SUB)
	{
		int			kept = 0;

		for (int i = 0; i < *n; i++)
			if (*LEVEL_OF(i) < level)
			{
				if (kept != i)
					memcpy(base + (size_t) kept * size, base + (size_t) i * size, size);
				kept++;
			}
		*n = kept;
	}
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		for (int i = 0; i < *n; i++)
			if (*LEVEL_OF(i) >= level)
				*LEVEL_OF(i) = level - 1;
	}
#undef LEVEL_OF
}
