/*
 * xacts.c — transactional shared tables in the cpht worker: each write
 * call's changes recorded for its transaction, and a transaction's end
 * (commit, abort, rollback to a savepoint) applied to them.
 *
 * Many transactions change one shared table at once, so the table's single
 * undo log cannot serve them (rolling it back to a position undoes
 * everyone's later calls).  Instead each call runs with the log on, as
 * every shared table call does, and its entries — the keys it inserted,
 * the keys it deleted with their places — are read out of the log into an
 * undo list of the calling transaction for that table (XactTable); the log
 * is then emptied as before.  An abort undoes the transaction's list alone,
 * newest first (cpht_table_undo): keys of different open transactions are
 * disjoint, so the order between transactions does not matter.
 *
 * Which open transaction changed which key is the pending map
 * (xacts_conflicts.c); what other transactions see of a table with open
 * transactions is xacts_views.c; the state they share is
 * xacts_internal.h.
 *
 * Savepoints: a transaction's list is cut into segments by the
 * subtransaction that wrote them.  When subtransaction X aborts, everything
 * written since X began belongs to X or its children, whose xids all follow
 * X's (a child gets its xid after its parent), and everything before has
 * smaller xids; so the segments to undo are the last ones whose xid
 * follows or equals X.
 *
 * Held deletes: a deleted key's tombstone must stay where it is until its
 * transaction ends, since an abort puts the key back there; the kernels
 * keep such tombstones while the caller holds deletes
 * (cpht_table_hold_deletes), and refuse to rebuild then.
 *
 * Locking: none.  The worker serves one request at a time and alone reads
 * and writes this state; backends see only the committed count it
 * publishes in the catalog entry (an atomic).
 */
#include "postgres.h"

#include "access/transam.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "worker/worker_internal.h"
#include "worker/xacts_internal.h"

TableXacts *cpht_table_xacts = NULL;
static HTAB *xacts = NULL;

void
cpht_xacts_init(void)
{
	HASHCTL		ctl;

	cpht_table_xacts = MemoryContextAllocZero(TopMemoryContext,
											  sizeof(TableXacts) * cpht_control->max_tables);
	ctl.keysize = sizeof(TransactionId);
	ctl.entrysize = sizeof(Xact);
	ctl.hcxt = TopMemoryContext;
	xacts = hash_create("cpht open transactions", 64, &ctl,
						HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

static void
xact_table_free_lists(XactTable *tt)
{
	free(tt->keys);
	free(tt->where);
	free(tt->segs);
	tt->keys = NULL;
	tt->where = NULL;
	tt->segs = NULL;
	tt->n = tt->cap = 0;
	tt->nsegs = tt->segcap = 0;
}

void
cpht_xacts_table_created(int entry, uint64 table_id, bool transactional)
{
	TableXacts *tx = &cpht_table_xacts[entry];

	memset(tx, 0, sizeof(*tx));
	tx->transactional = transactional;
	tx->table_id = table_id;
	dlist_init(&tx->xacts);
}

void
cpht_xacts_table_dropped(int entry)
{
	TableXacts *tx = &cpht_table_xacts[entry];
	dlist_mutable_iter it;

	if (!tx->transactional)
		return;
	/* The transactions stay open; what they did to this table is gone. */
	dlist_foreach_modify(it, &tx->xacts)
	{
		XactTable  *tt = dlist_container(XactTable, table_node, it.cur);

		dlist_delete(&tt->table_node);
		xact_table_free_lists(tt);
		tt->entry = -1;
	}
	pending_free(&tx->map);
	memset(tx, 0, sizeof(*tx));
}

TableXacts *
cpht_xacts_request_table(const CphtRequest *req)
{
	TableXacts *tx;

	if (req->private_table || req->entry < 0 || req->entry >= cpht_control->max_tables)
		return NULL;
	tx = &cpht_table_xacts[req->entry];

	if (!tx->transactional || tx->table_id != req->table_id)
		return NULL;
	return tx;
}

/* The caller's record of the table, created if new. */
static XactTable *
xact_table(TableXacts *tx, const CphtRequest *req)
{
	Xact	   *x;
	XactTable  *tt;
	bool		found;

	x = hash_search(xacts, &req->top_xid, HASH_ENTER, &found);
	if (!found)
		x->tables = NULL;
	for (tt = x->tables; tt != NULL; tt = tt->next_in_xact)
		if (tt->entry == req->entry)
			return tt;
	tt = MemoryContextAllocZero(TopMemoryContext, sizeof(XactTable));
	tt->xact = x;
	tt->entry = req->entry;
	tt->next_in_xact = x->tables;
	x->tables = tt;
	dlist_push_tail(&tx->xacts, &tt->table_node);
	return tt;
}

static void
out_of_memory(uint64 n)
{
	ereport(ERROR,
			(errcode(ERRCODE_OUT_OF_MEMORY),
			 errmsg("out of memory in the cpht worker"),
			 errdetail("Recording the changes of a call of " UINT64_FORMAT " keys on a transactional shared table needs more memory there.", n)));
}

uint64
cpht_xacts_list_bytes(uint64 cap, int segcap)
{
	return cap * (sizeof(uint64) + sizeof(uint8)) + (uint64) segcap * sizeof(XactSegment);
}

/*
 * Room for n more entries and one more segment, before the call runs.
 * What it adds to the table's pending state is taken from the request's
 * budget first (quota.c: ERROR 53400 beyond the table's memory caps), so
 * a refused call leaves everything as it was.
 */
static void
reserve(TableXacts *tx, XactTable *tt, uint64 n)
{
	uint64		new_cap = tt->n + n > tt->cap ? Max(Max(tt->cap * 2, tt->n + n), 1024) : tt->cap;
	int			new_segcap = tt->nsegs == tt->segcap ? Max(tt->segcap * 2, 8) : tt->segcap;

	cpht_quota_take(cpht_xacts_list_bytes(new_cap, new_segcap) - cpht_xacts_list_bytes(tt->cap, tt->segcap) +
					(tx->indexed ? pending_reserve_bytes(&tx->map, n) : 0));
	if (tt->n + n > tt->cap)
	{
		uint64		cap = new_cap;
		uint64	   *keys = realloc(tt->keys, cap * sizeof(uint64));
		uint8	   *where;

		if (keys == NULL)
			out_of_memory(n);
		tt->keys = keys;
		where = realloc(tt->where, cap);
		if (where == NULL)
			out_of_memory(n);
		tt->where = where;
		tt->cap = cap;
	}
	if (tt->nsegs == tt->segcap)
	{
		int			cap = new_segcap;
		XactSegment *segs = realloc(tt->segs, cap * sizeof(XactSegment));

		if (segs == NULL)
			out_of_memory(n);
		tt->segs = segs;
		tt->segcap = cap;
	}
	if (tx->indexed && !pending_reserve(&tx->map, n))
		out_of_memory(n);
}

TableXacts *
cpht_xacts_write_table(const CphtRequest *req, CphtCall call)
{
	TableXacts *tx = cpht_xacts_request_table(req);

	if (tx == NULL || call == CPHT_CALL_FIND)
		return NULL;
	if (!TransactionIdIsValid(req->top_xid) || !TransactionIdIsValid(req->sub_xid))
		elog(ERROR, "a write on a transactional shared cpht table names no transaction");
	return tx;
}

void
cpht_xacts_reserve(const CphtRequest *req, CphtCall call, uint64 n)
{
	TableXacts *tx = cpht_xacts_request_table(req);

	if (tx == NULL)
		return;
	/* meeting another transaction's pending keys needs the map */
	if (cpht_xacts_others_pending(tx, req->top_xid))
		cpht_xacts_index_pending(tx);
	if (cpht_xacts_write_table(req, call) != NULL)
		reserve(tx, xact_table(tx, req), n);
}

/* Record the call's log entries [position, log end) for the caller. */
static cpht_status
record(TableXacts *tx, const CphtRequest *req, cpht_table *t, uint64 position)
{
	XactTable  *tt = xact_table(tx, req);
	uint64		m = cpht_table_log_position(t) - position;
	uint64		base = tt->n;
	uint64		deletes = 0;
	cpht_status st;

	if (m == 0)
		return CPHT_OK;
	Assert(tt->n + m <= tt->cap);
	st = cpht_table_log_read(t, position, m, tt->keys + base, tt->where + base);
	if (st != CPHT_OK)
		return st;
	if (tt->nsegs == 0 || tt->segs[tt->nsegs - 1].subxid != req->sub_xid)
	{
		tt->segs[tt->nsegs].subxid = req->sub_xid;
		tt->segs[tt->nsegs].start = base;
		tt->nsegs++;
	}
	for (uint64 i = base; i < base + m; i++)
		deletes += tt->where[i] != 0;
	tt->delta += (int64) (m - deletes) - (int64) deletes;
	for (uint64 i = base; tx->indexed && i < base + m; i++)
	{
		bool		found;
		PendingEntry *e = pending_insert(&tx->map, tt->keys[i], &found);

		if (!found)
		{
			e->owner = tt;
			e->subxid = req->sub_xid;
			e->before_present = tt->where[i] != 0;
			e->first = i;
		}
		else if (e->owner != tt)
			elog(WARNING, "cpht worker: key " UINT64_FORMAT " changed by two open transactions", tt->keys[i]);
	}
	tt->n += m;
	tt->deletes += deletes;
	tx->held_deletes += deletes;
	cpht_table_hold_deletes(t, (int64) deletes);
	return CPHT_OK;
}

cpht_status
cpht_xacts_after_call(const CphtRequest *req, cpht_table *t, CphtCall call,
					  const uint64 *keys, uint64 n, uint8 *status, uint64 position)
{
	TableXacts *tx = cpht_xacts_request_table(req);

	if (tx == NULL)
		return CPHT_OK;
	if (call != CPHT_CALL_FIND)
		return record(tx, req, t, position);
	cpht_xacts_answer_find(tx, req, keys, n, status);
	return CPHT_OK;
}

/* Writes the committed count of a live table into its catalog entry. */
static void
publish_count(int entry)
{
	cpht_table *t = cpht_worker_shared_table(entry, cpht_table_xacts[entry].table_id);

	if (t != NULL)
		pg_atomic_write_u64(&cpht_catalog[entry].count,
							cpht_xacts_committed_count(entry, cpht_table_count(t)));
}

/*
 * Undo the entries [from, n) of a transaction's list and forget the
 * pending keys whose first change was among them.
 */
static void
undo_from(XactTable *tt, uint64 from)
{
	TableXacts *tx;
	cpht_table *t;
	uint64		deletes = 0;
	cpht_status st;

	if (tt->entry < 0 || from >= tt->n)
		return;
	tx = &cpht_table_xacts[tt->entry];
	t = cpht_worker_shared_table(tt->entry, tx->table_id);
	Assert(t != NULL);
	st = cpht_table_undo(t, tt->keys + from, tt->where + from, tt->n - from);
	for (uint64 i = from; i < tt->n; i++)
	{
		if (tx->indexed)
		{
			PendingEntry *e = pending_find(&tx->map, tt->keys[i]);

			if (e != NULL && e->owner == tt && e->first >= from)
				pending_remove(&tx->map, tt->keys[i]);
		}
		tt->delta += tt->where[i] != 0 ? 1 : -1;
		deletes += tt->where[i] != 0;
	}
	tt->n = from;
	tt->deletes -= deletes;
	tx->held_deletes -= deletes;
	cpht_table_hold_deletes(t, -(int64) deletes);
	if (st != CPHT_OK)
	{
		char		reason[CPHT_TEXT_LEN];

		snprintf(reason, sizeof(reason), "a transaction's changes could not be undone: %s",
				 cpht_table_error(t));
		ereport(WARNING,
				(errmsg("shared cpht table lost: %s", reason)));
		cpht_worker_shared_lose(tt->entry, reason);
	}
}

/* A transaction ends for one table: forget its pending keys and list. */
static void
forget(XactTable *tt)
{
	TableXacts *tx;

	if (tt->entry >= 0)
	{
		tx = &cpht_table_xacts[tt->entry];
		if (tx->indexed && !cpht_xacts_others_pending(tx, tt->xact->xid))
			cpht_xacts_unindex_pending(tx);
		for (uint64 i = 0; tx->indexed && i < tt->n; i++)
		{
			PendingEntry *e = pending_find(&tx->map, tt->keys[i]);

			if (e != NULL && e->owner == tt)
				pending_remove(&tx->map, tt->keys[i]);
		}
		tx->held_deletes -= tt->deletes;
		cpht_table_hold_deletes(cpht_worker_shared_table(tt->entry, tx->table_id), -(int64) tt->deletes);
		dlist_delete(&tt->table_node);
	}
	xact_table_free_lists(tt);
	pfree(tt);
}

void
cpht_xacts_end(const CphtRequest *req)
{
	Xact	   *x = hash_search(xacts, &req->top_xid, HASH_FIND, NULL);
	XactTable  *tt,
			   *next;

	/* A transaction that changed nothing here (or before this worker). */
	if (x == NULL)
		return;
	if (req->op == CPHT_OP_XACT_ROLLBACK_TO)
	{
		for (tt = x->tables; tt != NULL; tt = tt->next_in_xact)
		{
			int			s = tt->nsegs;

			/* a table lost (dropped, or by a failed undo) has no lists */
			if (tt->entry < 0)
				continue;
			while (s > 0 && TransactionIdFollowsOrEquals(tt->segs[s - 1].subxid, req->sub_xid))
				s--;
			if (s < tt->nsegs)
			{
				undo_from(tt, tt->segs[s].start);
				if (tt->entry >= 0)
					tt->nsegs = s;
			}
		}
		return;
	}
	for (tt = x->tables; tt != NULL; tt = next)
	{
		int			entry;

		next = tt->next_in_xact;
		/* Newest first; a table lost by a failed undo has entry -1 now. */
		if (req->op == CPHT_OP_XACT_ABORT)
			undo_from(tt, 0);
		entry = tt->entry;
		forget(tt);
		/* cpht_tables() shows the committed count: it changed now */
		if (entry >= 0)
			publish_count(entry);
	}
	hash_search(xacts, &req->top_xid, HASH_REMOVE, NULL);
}
