/*
 * txn.c — transactional tables.
 *
 * The main use is deduplicating ingests: "have we seen this id?" decides
 * whether a row is loaded.  If a transaction that put keys aborted and the
 * table kept them, a retried load would skip those rows forever.  So every
 * transactional table keeps an undo log (kernels/): before the first change
 * a subtransaction makes to a table, its position in the log is pushed as a
 * savepoint; an aborting subtransaction rolls the table back to it, a
 * committing one hands it to its parent, and the top-level commit forgets
 * the log.
 *
 * Tables are session objects, so creation and drop follow the same rule: a
 * table created by an aborted (sub)transaction is destroyed, a drop is only
 * carried out (memory freed) at commit, and an abort brings the table back.
 *
 * Cost: a transaction may touch hundreds of thousands of tables (one
 * cpht_create per row of a query) inside thousands of subtransactions (a
 * PL/pgSQL loop with an EXCEPTION block), so nothing here walks every
 * touched table per call or per subtransaction.  What a transaction did to
 * a table is found by handle in a hash table, and each open nesting level
 * lists the tables its subtransaction touched: a subtransaction's end visits
 * only those, and a commit hands them to the parent's list.
 *
 * The callbacks never raise an ERROR during abort: if undoing fails (a
 * device fault) the table can no longer be trusted, so it is dropped with a
 * WARNING.
 */
#include "postgres.h"

#include "access/xact.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "memcap.h"
#include "session/session.h"

typedef struct Savepoint
{
	SubTransactionId subid;
	uint64		position;		/* undo log length when subid first wrote */
} Savepoint;

/* What the current transaction did to one table (keyed by handle). */
typedef struct TxnTable
{
	int32		handle;
	SubTransactionId created;	/* creating subxact, while not committed */
	SubTransactionId dropped;	/* dropping subxact, while not committed */
	CphtTableRef *dropped_table;	/* the table while its drop is pending */
	int			depth;
	int			cap;
	Savepoint  *stack;
} TxnTable;

/* One table a nesting level's open subtransaction touched.  A list of
 * these per level, so that handing them to the parent only relinks nodes:
 * a subcommit allocates nothing. */
typedef struct Touch
{
	int32		handle;
	struct Touch *next;
} Touch;

/* All of it lives in txn_cxt, reset when the top-level transaction ends. */
static MemoryContext txn_cxt = NULL;
static HTAB *touched = NULL;
static Touch **levels = NULL;	/* levels[l]: nesting level l (1 = top) */
static int	nlevels = 0;
/* Slot memory of tables dropped by the transaction and not freed yet: it
 * still counts against cpht.max_memory (memcap.c), as it did live. */
static uint64 pending_drop_bytes = 0;

static void
pending_drop_add(int64 delta)
{
	pending_drop_bytes += (uint64) delta;	/* modulo 2^64: a negative delta subtracts */
	cpht_memory_tables_changed(delta);
}

/* Lists up to nesting level l exist. */
static void
levels_reserve(int l)
{
	int			n;

	if (l < nlevels)
		return;
	n = Max(l + 1, nlevels * 2);
	levels = levels
		? repalloc(levels, sizeof(Touch *) * n)
		: MemoryContextAlloc(txn_cxt, sizeof(Touch *) * n);
	memset(levels + nlevels, 0, sizeof(Touch *) * (n - nlevels));
	nlevels = n;
}

/*
 * Is the table's state tied to subtransaction s?  A savepoint of s can only
 * be the top of the stack or, when s is the parent of the subtransaction at
 * the top, the one below it: the stack holds nested subtransactions in order.
 */
static bool
tied_to(const TxnTable *e, SubTransactionId s, bool top_is_child)
{
	if (e->created == s || e->dropped == s)
		return true;
	if (top_is_child)
		return e->depth > 1 && e->stack[e->depth - 2].subid == s;
	return e->depth > 0 && e->stack[e->depth - 1].subid == s;
}

/*
 * The entry of a handle the current subtransaction is about to change:
 * created if new, and listed under the current nesting level if the
 * subtransaction had not touched it yet.
 */
static TxnTable *
txn_touch(int32 handle)
{
	SubTransactionId cur = GetCurrentSubTransactionId();
	int			level = GetCurrentTransactionNestLevel();
	TxnTable   *e;
	bool		found;

	if (txn_cxt == NULL)
		txn_cxt = AllocSetContextCreate(TopMemoryContext, "cpht transaction state",
										ALLOCSET_DEFAULT_SIZES);
	if (touched == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(int32);
		ctl.entrysize = sizeof(TxnTable);
		ctl.hcxt = txn_cxt;
		touched = hash_create("cpht tables of the transaction", 64, &ctl,
							  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	levels_reserve(level);

	e = hash_search(touched, &handle, HASH_ENTER, &found);
	if (!found)
	{
		memset(e, 0, sizeof(TxnTable));
		e->handle = handle;
	}
	if (!found || !tied_to(e, cur, false))
	{
		Touch	   *t = MemoryContextAlloc(txn_cxt, sizeof(Touch));

		t->handle = handle;
		t->next = levels[level];
		levels[level] = t;
	}
	return e;
}

void
cpht_txn_before_write(CphtHandleEntry *h)
{
	SubTransactionId cur = GetCurrentSubTransactionId();
	TxnTable   *e;

	/* A shared table's transactions are kept by the cpht worker (its
	 * writes wait and its ends are sent there: client/waits.c,
	 * client/xact_end.c), not by savepoints of this session. */
	if (!h->transactional || h->shared)
		return;
	e = txn_touch(h->handle);
	if (e->depth > 0 && e->stack[e->depth - 1].subid == cur)
		return;
	if (e->depth == e->cap)
	{
		e->cap = e->cap ? e->cap * 2 : 4;
		e->stack = e->stack
			? repalloc(e->stack, sizeof(Savepoint) * e->cap)
			: MemoryContextAlloc(txn_cxt, sizeof(Savepoint) * e->cap);
	}
	e->stack[e->depth].subid = cur;
	e->stack[e->depth].position = cpht_tableref_log_position(h->table);
	e->depth++;
}

void
cpht_txn_created(CphtHandleEntry *h)
{
	txn_touch(h->handle)->created = GetCurrentSubTransactionId();
}

void
cpht_txn_drop(int32 handle)
{
	CphtHandleEntry *h = cpht_handles_get(handle);
	TxnTable   *e = txn_touch(handle);

	e->dropped = GetCurrentSubTransactionId();
	e->dropped_table = h->table;
	pending_drop_add((int64) h->bytes);
	cpht_handles_set_table(h, NULL);	/* the handle is gone from now on */
}

/* A pending drop is undone: the handle works again. */
static void
undo_drop(TxnTable *e)
{
	CphtHandleEntry *h = cpht_handles_entry(e->handle);

	if (e->dropped_table == NULL)
		return;
	if (h)
	{
		pending_drop_add(-(int64) h->bytes);
		cpht_handles_set_table(h, e->dropped_table);
	}
	e->dropped_table = NULL;
	e->dropped = InvalidSubTransactionId;
}

/* Destroys a table the transaction no longer wants, whatever state its
 * handle is in. */
static void
destroy_entry_table(TxnTable *e)
{
	CphtHandleEntry *h = cpht_handles_entry(e->handle);
	CphtTableRef *t = e->dropped_table ? e->dropped_table : h ? h->table : NULL;

	if (h && e->dropped_table)
		pending_drop_add(-(int64) h->bytes);
	else if (h)
		cpht_handles_set_table(h, NULL);
	e->dropped_table = NULL;
	cpht_tableref_destroy(t);
}

/* The live table of an entry, whether or not a drop is pending. */
static CphtTableRef *
entry_table(TxnTable *e)
{
	CphtHandleEntry *h = cpht_handles_entry(e->handle);

	return e->dropped_table ? e->dropped_table : h ? h->table : NULL;
}

/* Roll a table back to a savepoint; a table that cannot be rolled back is
 * dropped, since it would hold keys of an aborted transaction. */
static void
rollback_entry(TxnTable *e, uint64 position)
{
	CphtTableRef *t = entry_table(e);
	cpht_status rc;

	if (t == NULL)
		return;
	rc = cpht_tableref_rollback_to(t, position);
	if (rc != CPHT_OK)
	{
		ereport(WARNING,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("cpht table %d could not be rolled back and was dropped", e->handle),
				 errdetail("%s", cpht_tableref_error(t))));
		destroy_entry_table(e);
	}
}

/* A subtransaction aborts: undo what it did to one table. */
static void
abort_sub_entry(TxnTable *e, SubTransactionId mySubid)
{
	if (e->depth > 0 && e->stack[e->depth - 1].subid == mySubid)
		rollback_entry(e, e->stack[--e->depth].position);
	if (e->dropped == mySubid)
		undo_drop(e);
	if (e->created == mySubid)
	{
		CphtHandleEntry *h = cpht_handles_entry(e->handle);

		if (h)
			h->rolled_back = true;
		destroy_entry_table(e);
		e->created = InvalidSubTransactionId;
		e->depth = 0;
	}
}

/* A subtransaction commits: its parent owns what it did to one table; the
 * parent's own savepoint, if it has one, is older and covers it. */
static void
commit_sub_entry(TxnTable *e, SubTransactionId mySubid, SubTransactionId parentSubid)
{
	if (e->depth > 0 && e->stack[e->depth - 1].subid == mySubid)
	{
		if (e->depth > 1 && e->stack[e->depth - 2].subid == parentSubid)
			e->depth--;
		else
			e->stack[e->depth - 1].subid = parentSubid;
	}
	if (e->dropped == mySubid)
		e->dropped = parentSubid;
	if (e->created == mySubid)
		e->created = parentSubid;
}

static void
at_subxact_event(SubXactEvent event, SubTransactionId mySubid,
				 SubTransactionId parentSubid, void *arg)
{
	int			level;
	Touch	   *next;

	(void) arg;
	if (event != SUBXACT_EVENT_ABORT_SUB && event != SUBXACT_EVENT_COMMIT_SUB)
		return;
	/* The callback runs while the subtransaction is still current. */
	level = GetCurrentTransactionNestLevel();
	if (touched == NULL || level >= nlevels)
		return;

	for (Touch *t = levels[level]; t != NULL; t = next)
	{
		TxnTable   *e = hash_search(touched, &t->handle, HASH_FIND, NULL);
		bool		hand_up = false;

		next = t->next;
		if (e == NULL)
			;
		else if (event == SUBXACT_EVENT_ABORT_SUB)
			abort_sub_entry(e, mySubid);
		else
		{
			/* Listed under the parent unless its state was tied to the
			 * parent already (then it is on the parent's list). */
			bool		on_parent_list = tied_to(e, parentSubid,
												 e->depth > 0 && e->stack[e->depth - 1].subid == mySubid);

			commit_sub_entry(e, mySubid, parentSubid);
			hand_up = !on_parent_list && tied_to(e, parentSubid, false);
		}
		if (hand_up)
		{
			t->next = levels[level - 1];
			levels[level - 1] = t;
		}
		else
			pfree(t);
	}
	levels[level] = NULL;
}

/* Forget the whole transaction's state. */
static void
txn_reset(void)
{
	touched = NULL;
	levels = NULL;
	nlevels = 0;
	pending_drop_add(-(int64) pending_drop_bytes);
	if (txn_cxt)
		MemoryContextReset(txn_cxt);
}

static void
at_xact_event(XactEvent event, void *arg)
{
	HASH_SEQ_STATUS scan;
	TxnTable   *e;

	(void) arg;
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			if (touched == NULL)
				break;
			hash_seq_init(&scan, touched);
			while ((e = hash_seq_search(&scan)) != NULL)
			{
				CphtTableRef *t = entry_table(e);

				if (e->dropped_table)
					destroy_entry_table(e);
				else if (t)
					cpht_tableref_truncate_log(t, 0);
			}
			txn_reset();
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			if (touched == NULL)
				break;
			hash_seq_init(&scan, touched);
			while ((e = hash_seq_search(&scan)) != NULL)
			{
				if (e->depth > 0)
					rollback_entry(e, e->stack[0].position);
				undo_drop(e);
				if (e->created != InvalidSubTransactionId)
				{
					CphtHandleEntry *h = cpht_handles_entry(e->handle);

					if (h)
						h->rolled_back = true;
					destroy_entry_table(e);
				}
			}
			txn_reset();
			break;
		case XACT_EVENT_PRE_PREPARE:
			if (touched != NULL && hash_get_num_entries(touched) > 0)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot prepare a transaction that changed cpht tables"),
						 errdetail("cpht tables belong to the session and cannot outlive it in a prepared transaction.")));
			break;
		default:
			break;
	}
}

void
cpht_txn_init(void)
{
	RegisterXactCallback(at_xact_event, NULL);
	RegisterSubXactCallback(at_subxact_event, NULL);
}
