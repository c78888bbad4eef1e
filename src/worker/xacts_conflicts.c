/*
 * xacts_conflicts.c — the pending map of a transactional shared table and
 * what it answers: a write that meets another open transaction's pending
 * key, an export while others have changes, a find of such a key.
 *
 * The pending map (pending.c) of each table says which open transaction
 * changed a key, the key's state before that transaction's first change,
 * and the (sub)transaction of that first change.  It gives unique-index
 * semantics: a write that meets another transaction's pending key runs
 * not at all and names the owners, which the backend waits for (their xid
 * locks, XactLockTableWait) before it sends the call again; a find answers
 * such a key as it was before; a count leaves out other transactions'
 * pending changes.  Requests are served one at a time, so checking and
 * then applying is atomic.
 *
 * The map is built only when it is needed: when a request of one
 * transaction meets a table on which another transaction has pending
 * changes.  A lone loader (the common case: one transaction filling a
 * table) never meets anyone, and keeping a map of its keys would cost a
 * random access per key changed, both when it writes and when it ends,
 * plus 64 bytes of map per key.  The map is then built from the open
 * transactions' undo lists, which hold the same facts (each key's first
 * change, its kind, its segment's subtransaction), kept up to date while
 * any transaction has pending changes, and freed whole when the last one
 * ends.
 *
 * Invariants: while the map is built (TableXacts.indexed) it holds every
 * open transaction's changed keys, each with the owner of its first
 * change; xacts.c keeps it so as calls record and transactions end.
 * Locking: none (the worker serves one request at a time).
 */
#include "postgres.h"

#include "worker/worker_internal.h"
#include "worker/xacts_internal.h"

bool
cpht_xacts_others_pending(TableXacts *tx, TransactionId top)
{
	dlist_iter	it;

	dlist_foreach(it, &tx->xacts)
	{
		XactTable  *tt = dlist_container(XactTable, table_node, it.cur);

		if (tt->xact->xid != top && tt->n > 0)
			return true;
	}
	return false;
}

/*
 * Builds the pending map from the open transactions' undo lists, where a
 * key's first entry in its owner's list is its first change.  ERROR when
 * out of memory, with the map left unbuilt.
 */
void
cpht_xacts_index_pending(TableXacts *tx)
{
	uint64		total = 0;
	dlist_iter	it;

	if (tx->indexed)
		return;
	dlist_foreach(it, &tx->xacts)
		total += dlist_container(XactTable, table_node, it.cur)->n;
	/* the map is the table's pending state: within its memory caps */
	cpht_quota_take(pending_reserve_bytes(&tx->map, total));
	if (!pending_reserve(&tx->map, total))
	{
		pending_free(&tx->map);
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory in the cpht worker"),
				 errdetail("Checking a call against the " UINT64_FORMAT " keys other open transactions changed in a transactional shared table needs more memory there.",
						   total)));
	}
	dlist_foreach(it, &tx->xacts)
	{
		XactTable  *tt = dlist_container(XactTable, table_node, it.cur);

		for (int s = 0; s < tt->nsegs; s++)
		{
			uint64		end = s + 1 < tt->nsegs ? tt->segs[s + 1].start : tt->n;

			for (uint64 i = tt->segs[s].start; i < end; i++)
			{
				bool		found;
				PendingEntry *e = pending_insert(&tx->map, tt->keys[i], &found);

				if (found)
					continue;
				e->owner = tt;
				e->subxid = tt->segs[s].subxid;
				e->before_present = tt->where[i] != 0;
				e->first = i;
			}
		}
	}
	tx->indexed = true;
}

/* Forgets the whole pending map (no open transaction has changes left). */
void
cpht_xacts_unindex_pending(TableXacts *tx)
{
	pending_free(&tx->map);
	tx->indexed = false;
}

bool
cpht_xacts_conflicts(const CphtRequest *req, CphtCall call, const uint64 *keys,
					 uint64 n, CphtReply *rep)
{
	TableXacts *tx = cpht_xacts_write_table(req, call);

	/* A lone writer skips the probe. */
	if (tx == NULL || !cpht_xacts_others_pending(tx, req->top_xid))
		return false;
	Assert(tx->indexed);
	for (uint64 i = 0; i < n && rep->nconflicts < CPHT_MAX_CONFLICTS; i++)
	{
		PendingEntry *e = pending_find(&tx->map, keys[i]);
		bool		known = false;

		if (e == NULL || e->owner->xact->xid == req->top_xid)
			continue;
		for (int c = 0; c < rep->nconflicts; c++)
			known |= rep->conflicts[c] == e->subxid;
		if (!known)
		{
			rep->conflicts[rep->nconflicts] = e->subxid;
			rep->conflict_tops[rep->nconflicts++] = e->owner->xact->xid;
		}
	}
	return rep->nconflicts > 0;
}

bool
cpht_xacts_scan_conflicts(const CphtRequest *req, CphtReply *rep)
{
	TableXacts *tx = cpht_xacts_request_table(req);
	dlist_iter	it;

	if (tx == NULL || !cpht_xacts_others_pending(tx, req->top_xid))
		return false;
	dlist_foreach(it, &tx->xacts)
	{
		XactTable  *tt = dlist_container(XactTable, table_node, it.cur);
		TransactionId top = tt->xact->xid;
		bool		known = false;

		if (top == req->top_xid || tt->n == 0 || rep->nconflicts == CPHT_MAX_CONFLICTS)
			continue;
		for (int c = 0; c < rep->nconflicts; c++)
			known |= rep->conflict_tops[c] == top;
		if (!known)
		{
			/* the whole transaction: its top xid lock goes when it ends */
			rep->conflicts[rep->nconflicts] = top;
			rep->conflict_tops[rep->nconflicts++] = top;
		}
	}
	return rep->nconflicts > 0;
}

/* Others' pending keys as they were before. */
void
cpht_xacts_answer_find(TableXacts *tx, const CphtRequest *req, const uint64 *keys,
					   uint64 n, uint8 *status)
{
	if (!cpht_xacts_others_pending(tx, req->top_xid))
		return;
	Assert(tx->indexed);
	for (uint64 i = 0; i < n; i++)
	{
		PendingEntry *e = pending_find(&tx->map, keys[i]);

		if (e != NULL && e->owner->xact->xid != req->top_xid)
			status[i] = e->before_present;
	}
}
