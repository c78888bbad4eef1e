/*
 * xacts_internal.h — the state of transactional shared tables in the cpht
 * worker, shared by the files that keep it (private to xacts*.c): xacts.c
 * records calls and ends transactions, xacts_conflicts.c keeps the pending
 * map and answers from it, xacts_views.c says what others see (counts,
 * memory, the snapshot's segments, the rebuild check).
 *
 * The worker serves one request at a time and is the only process that
 * reads or writes this state: nothing here locks.
 */
#ifndef CPHT_XACTS_INTERNAL_H
#define CPHT_XACTS_INTERNAL_H

#include "lib/ilist.h"

#include "cpht_table.h"
#include "shmem/protocol.h"
#include "worker/pending.h"
#include "worker/xacts.h"

typedef struct XactSegment
{
	TransactionId subxid;		/* the writing (sub)transaction */
	uint64		start;			/* its first entry in the list */
} XactSegment;

typedef struct Xact Xact;

/* What one open transaction changed in one table. */
typedef struct XactTable
{
	Xact	   *xact;
	int			entry;			/* catalog index, -1 once the table is gone */
	uint64	   *keys;			/* undo list, malloc'ed: entries as the */
	uint8	   *where;			/* kernels' log had them */
	uint64		n;
	uint64		cap;
	XactSegment *segs;
	int			nsegs;
	int			segcap;
	int64		delta;			/* keys present now minus before */
	uint64		deletes;		/* deleted entries in the list (held) */
	struct XactTable *next_in_xact;
	dlist_node	table_node;
} XactTable;

struct Xact
{
	TransactionId xid;			/* hash key: the top transaction */
	XactTable  *tables;
};

/* Per catalog index: the pending state of a transactional table. */
typedef struct TableXacts
{
	bool		transactional;
	uint64		table_id;
	PendingMap	map;
	bool		indexed;		/* map holds every open transaction's keys */
	dlist_head	xacts;			/* XactTable.table_node of open transactions */
	uint64		held_deletes;
} TableXacts;

/* Per catalog index (cpht_control->max_tables entries; xacts.c). */
extern TableXacts *cpht_table_xacts;

/* xacts.c: the table state a request names, or NULL when not
 * transactional (a private table's requests name no catalog entry). */
extern TableXacts *cpht_xacts_request_table(const CphtRequest *req);

/* xacts.c: the table's state when req is a write on a transactional one
 * (ERROR when such a write names no transaction), else NULL. */
extern TableXacts *cpht_xacts_write_table(const CphtRequest *req, CphtCall call);

/* xacts.c: bytes of an undo list of cap entries with segcap segments. */
extern uint64 cpht_xacts_list_bytes(uint64 cap, int segcap);

/* xacts_conflicts.c: the pending map.  Whether an open transaction other
 * than top has pending changes on the table; building the map (ERROR when
 * out of memory, the map left unbuilt) and forgetting it whole. */
extern bool cpht_xacts_others_pending(TableXacts *tx, TransactionId top);
extern void cpht_xacts_index_pending(TableXacts *tx);
extern void cpht_xacts_unindex_pending(TableXacts *tx);
/* a find's statuses of others' pending keys, as they were before */
extern void cpht_xacts_answer_find(TableXacts *tx, const CphtRequest *req, const uint64 *keys,
								   uint64 n, uint8 *status);

#endif							/* CPHT_XACTS_INTERNAL_H */
