/*
 * xacts_views.c — what others see of a transactional shared table with
 * open transactions: its count as a transaction sees it and as committed
 * (every open transaction's changes left out but the caller's), the bytes
 * its pending state holds (quota.c), the open transactions' changes for
 * its snapshot, and the refusal to rebuild while deleted keys are held.
 *
 * Invariants: an open transaction's delta is the keys present now minus
 * before it, so leaving out the deltas gives the committed count.
 * Locking: none (the worker serves one request at a time).
 */
#include "postgres.h"

#include "worker/xacts_internal.h"

uint64
cpht_xacts_table_bytes(int entry)
{
	TableXacts *tx = &cpht_table_xacts[entry];
	uint64		bytes;
	dlist_iter	it;

	if (!tx->transactional)
		return 0;
	bytes = pending_bytes(&tx->map);
	dlist_foreach(it, &tx->xacts)
	{
		XactTable  *tt = dlist_container(XactTable, table_node, it.cur);

		bytes += sizeof(XactTable) + cpht_xacts_list_bytes(tt->cap, tt->segcap);
	}
	return bytes;
}

uint64
cpht_xacts_count(const CphtRequest *req, uint64 physical)
{
	TableXacts *tx = cpht_xacts_request_table(req);
	int64		count = (int64) physical;
	dlist_iter	it;

	if (tx == NULL)
		return physical;
	dlist_foreach(it, &tx->xacts)
	{
		XactTable  *tt = dlist_container(XactTable, table_node, it.cur);

		if (tt->xact->xid != req->top_xid)
			count -= tt->delta;
	}
	return (uint64) count;
}

uint64
cpht_xacts_committed_count(int entry, uint64 physical)
{
	TableXacts *tx = &cpht_table_xacts[entry];
	int64		count = (int64) physical;
	dlist_iter	it;

	if (!tx->transactional)
		return physical;
	dlist_foreach(it, &tx->xacts)
		count -= dlist_container(XactTable, table_node, it.cur)->delta;
	return (uint64) count;
}

void
cpht_xacts_each_segment(int entry, cpht_xacts_segment_fn fn, void *arg)
{
	TableXacts *tx = &cpht_table_xacts[entry];
	dlist_iter	it;

	if (!tx->transactional)
		return;
	dlist_foreach(it, &tx->xacts)
	{
		XactTable  *tt = dlist_container(XactTable, table_node, it.cur);

		for (int s = 0; s < tt->nsegs; s++)
		{
			uint64		start = tt->segs[s].start;
			uint64		end = s + 1 < tt->nsegs ? tt->segs[s + 1].start : tt->n;

			if (end > start)
				fn(arg, tt->segs[s].subxid, tt->keys + start, tt->where + start, end - start);
		}
	}
}

void
cpht_xacts_check_rebuild(const CphtRequest *req)
{
	TableXacts *tx = cpht_xacts_request_table(req);

	if (tx != NULL && tx->held_deletes > 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("shared cpht table cannot be rebuilt while open transactions have deleted keys from it"),
				 errdetail(UINT64_FORMAT " deleted keys must stay in their places until their transactions end: a rollback puts them back there.",
						   tx->held_deletes),
				 errhint("Run cpht_rebuild again when those transactions have ended.")));
}
