/*
 * durable_hold.c — every checkpoint waits for the cpht worker's snapshot
 * round after it, so that a base backup copies files its WAL can replay.
 *
 * Why: a base backup holds WAL only from its start checkpoint's redo
 * position on, and copies pg_cpht/ at some moment after that checkpoint
 * completed.  A durable table's file in the copy is usable only if it is
 * exact at a position in that WAL: written after the redo position, or
 * named by an EXACT record written after it (durable_rounds.c).  The
 * round the worker runs after every checkpoint gives exactly that for
 * every table (changed tables get a new file, the others an EXACT
 * record), but without this file a short backup could copy pg_cpht/, and
 * even end, before that round.
 *
 * How: once the checkpointer has fixed the redo position, it waits while
 * any process that had DELAY_CHKPT_START set in its PGPROC at that moment
 * keeps it set under the same virtual transaction id (the protocol that
 * commit records use for pg_xact; storage/proc.h).  The worker keeps the
 * flag set all the time it holds durable tables, under a local
 * transaction id of its own, and takes a new id once the round after the
 * latest redo position has run (or failed): a checkpoint waiting on the
 * old id goes on, one that fixes its redo position later finds the new id
 * and waits for the next round.  The id is never inserted into the lock
 * table: nobody can wait for it as for a transaction, and nothing but the
 * checkpointer's comparison sees it.
 *
 * Invariants: the flag is set only while the worker is in no transaction
 * (a transaction's end clears it, and would let a waiting checkpoint go
 * on early: the worker's only transaction, reading pg_database at its
 * start, runs before the first hold); a checkpoint is let go only after a
 * round that began after its redo position ended, or failed (logged).  A
 * checkpoint waits at most for one poll of the worker's loop (0.2 s with
 * durable tables) and one round; while the worker is not running (a
 * restart of the worker alone) nothing waits.  Only the worker process
 * runs this; it touches only its own PGPROC, as PostgreSQL's own code sets
 * these two fields without a lock.
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "storage/proc.h"
#include "storage/sinvaladt.h"

#include "worker/durable_internal.h"

static bool holding = false;

/* A new local transaction id under the flag: checkpoints waiting on the
 * previous one go on. */
static void
take_new_id(void)
{
	MyProc->lxid = GetNextLocalTransactionId();
	MyProc->delayChkptFlags |= DELAY_CHKPT_START;
}

void
durable_hold_checkpoints(void)
{
	Assert(!IsTransactionState());
	if (holding && (MyProc->delayChkptFlags & DELAY_CHKPT_START) != 0 &&
		MyProc->lxid != InvalidLocalTransactionId)
		return;
	take_new_id();
	holding = true;
}

void
durable_hold_let_go(void)
{
	if (holding)
		take_new_id();
}

void
durable_hold_stop(void)
{
	if (!holding)
		return;
	MyProc->delayChkptFlags &= ~DELAY_CHKPT_START;
	MyProc->lxid = InvalidLocalTransactionId;
	holding = false;
}
