/*
 * private.c — private tables the cpht worker holds for backends.
 *
 * With cpht preloaded, a table created without a name lives in the worker
 * when it goes to the GPU (only the worker initialises CUDA) or when
 * cpht.placement = worker.  It belongs to the backend that created it: only
 * requests from that backend's slot, while the same process holds the
 * slot, reach it.  It goes away when that backend drops it, or when the
 * slot is no longer held by that process: the backend clears its slot's pid
 * as it exits (client.c, before_shmem_exit, by pg_terminate_backend too)
 * and sets the worker's latch, and the worker's sweep, run on every wake,
 * frees the tables whose owner is gone.  A new backend on the same slot is
 * caught the same way.
 *
 * Memory.  The kernels ask the worker's memory hook before they grow an
 * undo log or transfer buffers.  During a request on a private table it
 * weighs the growth against what the backend's cpht.max_memory leaves
 * (the request's memory_budget) and answers the net bytes taken or given
 * back in the reply, so the backend counts the undo logs of its tables
 * held here as its own.  A write on a shared table runs under a budget
 * too, set by quota.c from its owner's cap and cpht.max_shared_memory
 * (cpht_worker_budget_on); its bytes count against no session.
 */
#include "postgres.h"

#include "storage/proc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "cpht_table.h"
#include "memcap.h"
#include "shmem/protocol.h"
#include "worker/worker_internal.h"

typedef struct PrivateTable
{
	uint64		id;				/* hash key; never reused while the server runs */
	cpht_table *table;
	int			slot;
	int			pid;
	uint64		bytes;
	bool		logging;		/* keeps an undo log for its backend */
} PrivateTable;

static HTAB *privates = NULL;
static int *slot_tables = NULL; /* private tables per slot */
static int *slot_pid = NULL;	/* their owner */

/*
 * The memory budget of the request being served (see above): the net bytes
 * the kernels and the worker's own allocations took since the request began
 * (memcap.h's counter, the one the session's cap counts with), and while
 * budget_on, the most that count may reach.
 */
static CphtMemCounter budget_taken;
static bool budget_on = false;
static int64 budget_limit = PG_INT64_MAX;
static int64 budget_refused = 0;	/* what the last refusal asked for */

static void
publish_counts(int delta_tables, int64 delta_bytes)
{
	SpinLockAcquire(&cpht_control->mutex);
	cpht_control->private_tables += delta_tables;
	cpht_control->private_bytes += delta_bytes;
	SpinLockRelease(&cpht_control->mutex);
}

/*
 * The kernels' memory hook in the worker.  Only the worker's thread runs
 * kernels' memory requests here (its tables have no streams), but the
 * count is an atomic one all the same.
 */
static int
worker_memory_hook(int64_t delta)
{
	bool		on = __atomic_load_n(&budget_on, __ATOMIC_RELAXED);

	if (!cpht_memcounter_add(&budget_taken, delta, on ? budget_limit : PG_INT64_MAX))
	{
		__atomic_store_n(&budget_refused, delta, __ATOMIC_RELAXED);
		return 0;
	}
	return 1;
}

/* The limit of a budget of left bytes more than the request took so far
 * (PG_INT64_MAX, none, where that passes an int64). */
static int64
limit_from(uint64 left)
{
	int64		taken = cpht_memcounter_read(&budget_taken);

	if (left >= (uint64) PG_INT64_MAX || (taken > 0 && (int64) left > PG_INT64_MAX - taken))
		return PG_INT64_MAX;
	return taken + (int64) left;
}

void
cpht_private_init(void)
{
	HASHCTL		ctl;

	ctl.keysize = sizeof(uint64);
	ctl.entrysize = sizeof(PrivateTable);
	ctl.hcxt = TopMemoryContext;
	privates = hash_create("cpht worker private tables", 256, &ctl,
						   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	slot_tables = MemoryContextAllocZero(TopMemoryContext, sizeof(int) * cpht_control->nslots);
	slot_pid = MemoryContextAllocZero(TopMemoryContext, sizeof(int) * cpht_control->nslots);
	SpinLockAcquire(&cpht_control->mutex);
	cpht_control->private_tables = 0;
	cpht_control->private_bytes = 0;
	SpinLockRelease(&cpht_control->mutex);
	cpht_memcounter_init(&budget_taken);
	cpht_set_memory_hook(worker_memory_hook);
}

void
cpht_private_request_begin(const CphtRequest *req)
{
	cpht_memcounter_init(&budget_taken);
	budget_refused = 0;
	budget_on = req->private_table && req->memory_budget != PG_UINT64_MAX;
	budget_limit = limit_from(req->memory_budget);
}

void
cpht_worker_budget_on(uint64 left)
{
	budget_limit = limit_from(left);
	budget_refused = 0;
	budget_on = true;
}

bool
cpht_worker_budget_take(uint64 bytes)
{
	if (bytes > (uint64) PG_INT64_MAX)
		bytes = PG_INT64_MAX;
	if (bytes == 0)
		return true;
	if (!worker_memory_hook((int64) bytes))
		return false;
	return true;
}

uint64
cpht_worker_budget_refused(void)
{
	return (uint64) budget_refused;
}

int64
cpht_private_request_end(void)
{
	int64		delta = cpht_memcounter_read(&budget_taken);

	budget_on = false;
	cpht_memcounter_init(&budget_taken);
	return delta;
}

static void
destroy(PrivateTable *p)
{
	cpht_table *t = p->table;
	uint64		bytes = p->bytes;
	int			s = p->slot;

	(void) hash_search(privates, &p->id, HASH_REMOVE, NULL);
	if (--slot_tables[s] == 0)
		slot_pid[s] = 0;
	publish_counts(-1, -(int64) bytes);
	cpht_table_destroy(t);
}

static PrivateTable *
private_entry(int s, uint64 id)
{
	PrivateTable *p = hash_search(privates, &id, HASH_FIND, NULL);

	if (p == NULL || p->slot != s || p->pid != cpht_slots[s].pid)
	{
		char		reason[CPHT_TEXT_LEN];

		SpinLockAcquire(&cpht_control->mutex);
		strlcpy(reason, cpht_control->exit_reason, sizeof(reason));
		SpinLockRelease(&cpht_control->mutex);
		ereport(ERROR,
				(errcode(ERRCODE_SYSTEM_ERROR),
				 errmsg("cpht table was lost"),
				 errdetail("The cpht worker that held it exited: %s.",
						   reason[0] ? reason : "the cpht worker restarted")));
	}
	return p;
}

cpht_table *
cpht_private_table(int s, uint64 id)
{
	return private_entry(s, id)->table;
}

bool
cpht_private_table_logs(int s, uint64 id)
{
	return private_entry(s, id)->logging;
}

static void
private_create(CphtSlot *slot, int s)
{
	const CphtRequest *req = &slot->req;
	CphtReply  *rep = &slot->rep;
	cpht_table *table = NULL;
	PrivateTable *p;
	char		errbuf[CPHT_TEXT_LEN];
	cpht_status st;
	uint64		id;
	bool		found;

	/* a predecessor's tables on this slot go first */
	if (slot_tables[s] > 0 && slot_pid[s] != slot->pid)
		cpht_private_sweep();

	errbuf[0] = '\0';
	st = cpht_table_create(&req->params, &table, errbuf, sizeof(errbuf));
	if (st != CPHT_OK)
	{
		rep->status = st;
		strlcpy(rep->message, errbuf, CPHT_TEXT_LEN);
		return;
	}
	cpht_table_set_logging(table, req->logging);

	/*
	 * Ids of their own, with the top bit set: shared tables' handles carry
	 * their table ids (session/session.h), which private tables must not use up.
	 */
	SpinLockAcquire(&cpht_control->mutex);
	id = CPHT_PRIVATE_TABLE_ID_BIT | cpht_control->next_private_id++;
	SpinLockRelease(&cpht_control->mutex);
	p = hash_search(privates, &id, HASH_ENTER, &found);
	Assert(!found);
	p->table = table;
	p->slot = s;
	p->pid = slot->pid;
	p->bytes = cpht_params_table_bytes(&req->params);
	p->logging = req->logging;
	slot_tables[s]++;
	slot_pid[s] = slot->pid;
	publish_counts(1, (int64) p->bytes);
	rep->table_id = id;
}

bool
cpht_private_request(CphtSlot *slot, int s)
{
	const CphtRequest *req = &slot->req;
	CphtReply  *rep = &slot->rep;
	cpht_table *t;
	cpht_status st;

	switch (req->op)
	{
		case CPHT_OP_PRIVATE_CREATE:
			private_create(slot, s);
			return true;
		case CPHT_OP_PRIVATE_DROP:
			(void) cpht_private_table(s, req->table_id);
			destroy(hash_search(privates, &req->table_id, HASH_FIND, NULL));
			return true;
		case CPHT_OP_LOG_POSITION:
			rep->value = cpht_table_log_position(cpht_private_table(s, req->table_id));
			return true;
		case CPHT_OP_LOG_ROLLBACK_TO:
			t = cpht_private_table(s, req->table_id);
			st = cpht_table_rollback_to(t, req->offset);
			rep->status = st;
			if (st != CPHT_OK)
				strlcpy(rep->message, cpht_table_error(t), CPHT_TEXT_LEN);
			return true;
		case CPHT_OP_TRUNCATE_LOG:
			cpht_table_truncate_log(cpht_private_table(s, req->table_id), req->offset);
			return true;
		default:
			return false;
	}
}

void
cpht_private_note_bytes(int s, const CphtRequest *req, CphtReply *rep)
{
	uint64		id = req->op == CPHT_OP_PRIVATE_CREATE ? rep->table_id : req->table_id;
	PrivateTable *p = hash_search(privates, &id, HASH_FIND, NULL);
	uint64		bytes;

	if (p == NULL || p->slot != s)
		return;
	/* growth: cpht_worker_info's private_bytes follows the tables */
	bytes = cpht_table_slot_bytes(p->table);
	if (bytes != p->bytes)
	{
		publish_counts(0, (int64) bytes - (int64) p->bytes);
		p->bytes = bytes;
	}
	rep->table_bytes = bytes;
}

void
cpht_private_sweep(void)
{
	HASH_SEQ_STATUS scan;
	PrivateTable *p;
	bool		any = false;

	for (int s = 0; s < cpht_control->nslots && !any; s++)
		any = slot_tables[s] > 0 && cpht_slots[s].pid != slot_pid[s];
	if (!any)
		return;

	hash_seq_init(&scan, privates);
	while ((p = hash_seq_search(&scan)) != NULL)
	{
		/* Removing the entry just returned is allowed during a scan. */
		if (cpht_slots[p->slot].pid != p->pid)
			destroy(p);
	}
}
