/*
 * txn.c — transactional tables.
 *
 * The main use is deduplicating ingests: "have we seen this id?" decides
 * whether a row is loaded.  If a transaction that put keys aborted and the
 * table kept them, a retried load would skip those rows forever.  So every
 * transactional table keeps an undo log (kernels/table.c): before the first
 * change a subtransaction makes to a table, its position in the log is
 * pushed as a savepoint; an aborting subtransaction rolls the table back to
 * it, a committing one hands it to its parent, and the top-level commit
 * forgets the log.
 *
 * Tables are session objects, so creation and drop follow the same rule: a
 * table created by an aborted (sub)transaction is destroyed, a drop is only
 * carried out (memory freed) at commit, and an abort brings the table back.
 *
 * The callbacks never raise an ERROR during abort: if undoing fails (out of
 * memory, a device fault) the table can no longer be trusted, so it is
 * dropped with a WARNING.
 */
#include "postgres.h"

#include "access/xact.h"
#include "utils/memutils.h"

#include "cpht_table.h"
#include "txn.h"

typedef struct Savepoint
{
	SubTransactionId subid;
	uint64		position;		/* undo log length when subid first wrote */
} Savepoint;

/* What the current transaction did to one table. */
typedef struct TxnTable
{
	int32		handle;
	SubTransactionId created;	/* creating subxact, while not committed */
	SubTransactionId dropped;	/* dropping subxact, while not committed */
	cpht_table *dropped_table;	/* the table while its drop is pending */
	int			depth;
	int			cap;
	Savepoint  *stack;
} TxnTable;

static TxnTable *touched = NULL;
static int	ntouched = 0;
static int	maxtouched = 0;

static TxnTable *
txn_entry(int32 handle)
{
	for (int i = 0; i < ntouched; i++)
		if (touched[i].handle == handle)
			return &touched[i];
	if (ntouched == maxtouched)
	{
		maxtouched = maxtouched ? maxtouched * 2 : 8;
		touched = touched
			? repalloc(touched, sizeof(TxnTable) * maxtouched)
			: MemoryContextAlloc(TopMemoryContext, sizeof(TxnTable) * maxtouched);
	}
	memset(&touched[ntouched], 0, sizeof(TxnTable));
	touched[ntouched].handle = handle;
	return &touched[ntouched++];
}

void
cpht_txn_before_write(CphtHandle *h)
{
	SubTransactionId cur = GetCurrentSubTransactionId();
	TxnTable   *e;

	if (!h->transactional)
		return;
	e = txn_entry(h->handle);
	if (e->depth > 0 && e->stack[e->depth - 1].subid == cur)
		return;
	if (e->depth == e->cap)
	{
		e->cap = e->cap ? e->cap * 2 : 4;
		e->stack = e->stack
			? repalloc(e->stack, sizeof(Savepoint) * e->cap)
			: MemoryContextAlloc(TopMemoryContext, sizeof(Savepoint) * e->cap);
	}
	e->stack[e->depth].subid = cur;
	e->stack[e->depth].position = cpht_table_log_position(h->table);
	e->depth++;
}

void
cpht_txn_created(CphtHandle *h)
{
	txn_entry(h->handle)->created = GetCurrentSubTransactionId();
}

void
cpht_txn_drop(int32 handle)
{
	CphtHandle *h = cpht_handles_get(handle);
	TxnTable   *e = txn_entry(handle);

	e->dropped = GetCurrentSubTransactionId();
	e->dropped_table = h->table;
	h->table = NULL;			/* the handle is gone from now on */
}

uint64
cpht_txn_pending_drop_bytes(void)
{
	uint64		bytes = 0;

	for (int i = 0; i < ntouched; i++)
		if (touched[i].dropped_table)
		{
			CphtHandle *h = cpht_handles_entry(touched[i].handle);

			bytes += h ? h->bytes : 0;
		}
	return bytes;
}

/* Destroys a table the transaction no longer wants, whatever state its
 * handle is in. */
static void
destroy_entry_table(TxnTable *e)
{
	CphtHandle *h = cpht_handles_entry(e->handle);
	cpht_table *t = e->dropped_table ? e->dropped_table : h ? h->table : NULL;

	if (h)
		h->table = NULL;
	e->dropped_table = NULL;
	cpht_table_destroy(t);
}

/* The live table of an entry, whether or not a drop is pending. */
static cpht_table *
entry_table(TxnTable *e)
{
	CphtHandle *h = cpht_handles_entry(e->handle);

	return e->dropped_table ? e->dropped_table : h ? h->table : NULL;
}

/* Roll a table back to a savepoint; a table that cannot be rolled back is
 * dropped, since it would hold keys of an aborted transaction. */
static void
rollback_entry(TxnTable *e, uint64 position)
{
	cpht_table *t = entry_table(e);
	cpht_status rc;

	if (t == NULL)
		return;
	rc = cpht_table_rollback_to(t, position);
	if (rc != CPHT_OK)
	{
		ereport(WARNING,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("cpht table %d could not be rolled back and was dropped", e->handle),
				 errdetail("%s", cpht_table_error(t))));
		destroy_entry_table(e);
	}
}

static void
forget_entry(int i)
{
	if (touched[i].stack)
		pfree(touched[i].stack);
	touched[i] = touched[--ntouched];
}

static void
at_subxact_event(SubXactEvent event, SubTransactionId mySubid,
				 SubTransactionId parentSubid, void *arg)
{
	(void) arg;
	if (event != SUBXACT_EVENT_ABORT_SUB && event != SUBXACT_EVENT_COMMIT_SUB)
		return;

	for (int i = 0; i < ntouched; i++)
	{
		TxnTable   *e = &touched[i];
		bool		top_is_mine = e->depth > 0 && e->stack[e->depth - 1].subid == mySubid;

		if (event == SUBXACT_EVENT_ABORT_SUB)
		{
			if (top_is_mine)
				rollback_entry(e, e->stack[--e->depth].position);
			if (e->dropped == mySubid)
			{
				/* The drop is undone: the handle works again. */
				CphtHandle *h = cpht_handles_entry(e->handle);

				if (h)
					h->table = e->dropped_table;
				e->dropped_table = NULL;
				e->dropped = InvalidSubTransactionId;
			}
			if (e->created == mySubid)
			{
				CphtHandle *h = cpht_handles_entry(e->handle);

				if (h)
					h->rolled_back = true;
				destroy_entry_table(e);
				e->created = InvalidSubTransactionId;
				e->depth = 0;
			}
		}
		else
		{
			/* The parent owns these changes now; its own savepoint, if it
			 * has one, is older and covers them. */
			if (top_is_mine)
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
	}
}

static void
at_xact_event(XactEvent event, void *arg)
{
	(void) arg;
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			for (int i = ntouched - 1; i >= 0; i--)
			{
				TxnTable   *e = &touched[i];
				cpht_table *t = entry_table(e);

				if (e->dropped_table)
					destroy_entry_table(e);
				else if (t)
					cpht_table_truncate_log(t, 0);
				forget_entry(i);
			}
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			for (int i = ntouched - 1; i >= 0; i--)
			{
				TxnTable   *e = &touched[i];

				if (e->depth > 0)
					rollback_entry(e, e->stack[0].position);
				if (e->dropped_table)
				{
					CphtHandle *h = cpht_handles_entry(e->handle);

					if (h)
						h->table = e->dropped_table;
					e->dropped_table = NULL;
				}
				if (e->created != InvalidSubTransactionId)
				{
					CphtHandle *h = cpht_handles_entry(e->handle);

					if (h)
						h->rolled_back = true;
					destroy_entry_table(e);
				}
				forget_entry(i);
			}
			break;
		case XACT_EVENT_PRE_PREPARE:
			if (ntouched > 0)
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
