/*
 * dispatch.c — the cpht worker's requests: the shared tables it holds and
 * what each request does to them.
 *
 * Requests are served one at a time, by the worker's only PostgreSQL
 * thread; the kernels use their own helper threads inside a call.  Each
 * request runs under its own error handler and memory context: an ERROR
 * (an unknown table, a taken name) becomes the reply, with its SQLSTATE,
 * and the worker goes on with the next request.
 *
 * A call whose keys fit in one arena window runs on the window in place
 * (CALL).  A larger one is uploaded piece by piece into a buffer of the
 * calling slot, run whole (RUN), and its statuses downloaded piece by
 * piece: the table sees one call, all or nothing, whatever its size.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "port/pg_bitutils.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/memutils.h"

#include "cpht_table.h"
#include "protocol.h"
#include "worker.h"
#include "durable.h"
#include "xacts.h"

/* A large call being assembled for one slot (malloc'ed buffers). */
typedef struct LargeCall
{
	int			pid;			/* backend that uploads it */
	uint64		total;
	uint64		uploaded;		/* keys [0, uploaded) are in */
	uint64	   *keys;
	uint8	   *status;
} LargeCall;

static cpht_table **tables = NULL;	/* by catalog index */
static uint64 *table_ids = NULL;
static LargeCall *large = NULL; /* by slot */
static int	serving = -1;		/* slot of the request being served */
static MemoryContext request_cxt = NULL;

/* The cancel flag of the call running now, read by the kernels. */
static pg_atomic_uint32 *volatile running_cancel = NULL;

int
cpht_worker_interrupt(void)
{
	pg_atomic_uint32 *c = running_cancel;

	return c != NULL && pg_atomic_read_u32(c) != 0;
}

void
cpht_worker_tables_init(void)
{
	CphtControl *ctl = cpht_control;

	tables = MemoryContextAllocZero(TopMemoryContext, sizeof(cpht_table *) * ctl->max_tables);
	table_ids = MemoryContextAllocZero(TopMemoryContext, sizeof(uint64) * ctl->max_tables);
	large = MemoryContextAllocZero(TopMemoryContext, sizeof(LargeCall) * ctl->nslots);
	request_cxt = AllocSetContextCreate(TopMemoryContext, "cpht worker request",
										ALLOCSET_DEFAULT_SIZES);
	cpht_xacts_init();

	/* What a previous worker held is gone with its memory. */
	LWLockAcquire(ctl->catalog_lock, LW_EXCLUSIVE);
	for (int i = 0; i < ctl->max_tables; i++)
	{
		CphtCatalogEntry *e = &cpht_catalog[i];

		if (e->state == CPHT_ENTRY_LIVE)
		{
			e->state = CPHT_ENTRY_LOST;
			if (e->lost_reason[0] == '\0')
				strlcpy(e->lost_reason, "the cpht worker restarted", CPHT_TEXT_LEN);
		}
		else if (e->state == CPHT_ENTRY_CREATING)
			e->state = CPHT_ENTRY_FREE;
	}
	LWLockRelease(ctl->catalog_lock);
}

static void
large_free(LargeCall *c)
{
	free(c->keys);
	free(c->status);
	memset(c, 0, sizeof(*c));
}

/* The live table a request names; ERROR if it is gone. */
static cpht_table *
request_table(const CphtRequest *req)
{
	CphtCatalogEntry *e;

	if (req->private_table)
		return cpht_private_table(serving, req->table_id);
	if (req->entry < 0 || req->entry >= cpht_control->max_tables)
		elog(ERROR, "cpht request names table entry %d of %d", req->entry,
			 cpht_control->max_tables);
	if (tables[req->entry] != NULL && table_ids[req->entry] == req->table_id)
		return tables[req->entry];

	e = &cpht_catalog[req->entry];
	if (e->state == CPHT_ENTRY_LOST && e->table_id == req->table_id)
		ereport(ERROR,
				(errcode(ERRCODE_SYSTEM_ERROR),
				 errmsg("shared cpht table \"%s\" was lost", NameStr(e->name)),
				 errdetail("Its memory was in a cpht worker that exited: %s.", e->lost_reason),
				 errhint("Create it again with cpht_create(..., name => '%s').", NameStr(e->name))));
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("shared cpht table does not exist"),
			 errdetail("It was dropped.")));
	pg_unreachable();
}

static void
check_window(const CphtRequest *req)
{
	if (req->window < 0 || req->window >= cpht_control->nwindows ||
		req->nkeys > cpht_control->window_keys)
		elog(ERROR, "cpht request names window %d with " UINT64_FORMAT " keys",
			 req->window, req->nkeys);
}

static void
reply_status(CphtReply *rep, cpht_status status, const char *message)
{
	rep->status = status;
	if (status != CPHT_OK && message != NULL)
		strlcpy(rep->message, message, CPHT_TEXT_LEN);
}

/*
 * A shared table holds part of a call that could not be undone: nobody
 * could tell its keys from committed ones, so the table is lost for every
 * session (58000 naming it from now on), and so is the call.
 */
static void
lose_after_failed_undo(CphtSlot *slot, cpht_table *t, const char *what)
{
	char		reason[CPHT_TEXT_LEN];

	snprintf(reason, sizeof(reason), "%s: %s", what, cpht_table_error(t));
	ereport(WARNING, (errmsg("shared cpht table lost: %s", reason)));
	slot->rep.value = 0;
	reply_status(&slot->rep, CPHT_ERR_DEVICE, reason);
	cpht_worker_table_lose(slot->req.entry, reason);
}

/* The kernels' batch operation, with the slot's cancel flag as their
 * interrupt check. */
static cpht_status
kernel_call(CphtSlot *slot, cpht_table *t, CphtCall call, const uint64 *keys,
			uint64 n, uint8 *status)
{
	cpht_status st;

	running_cancel = &slot->cancel;
	switch (call)
	{
		case CPHT_CALL_FOP:
			st = cpht_table_find_or_put(t, keys, n, status);
			break;
		case CPHT_CALL_FIND:
			st = cpht_table_find(t, keys, n, status);
			break;
		case CPHT_CALL_PUT:
			st = cpht_table_put(t, keys, n, &slot->rep.value);
			break;
		case CPHT_CALL_ERASE:
			st = cpht_table_erase(t, keys, n, status);
			break;
		default:
			running_cancel = NULL;
			elog(ERROR, "unknown cpht call %d", (int) call);
	}
	running_cancel = NULL;
	return st;
}

/* Runs a batch call with the slot's cancel flag as the interrupt check. */
static void
run_call(CphtSlot *slot, cpht_table *t, CphtCall call, const uint64 *keys,
		 uint64 n, uint8 *status)
{
	CphtReply  *rep = &slot->rep;
	cpht_status st;
	uint64		position;

	/* Canceled while queued: nothing ran. */
	if (pg_atomic_read_u32(&slot->cancel))
	{
		reply_status(rep, CPHT_ERR_CANCELED, "the call was canceled before it ran");
		return;
	}
	/*
	 * A private table behaves as in its backend: the kernels stop between
	 * chunks, and a call that ended stays (its transaction's savepoints,
	 * kept by the backend, undo it where needed).
	 */
	if (slot->req.private_table)
	{
		st = kernel_call(slot, t, call, keys, n, status);
		cpht_table_call_times(t, &rep->times);
		reply_status(rep, st, cpht_table_error(t));
		return;
	}
	/* A transactional table: a write meeting other transactions' pending
	 * keys does not run (xacts.c). */
	if (cpht_xacts_before_call(&slot->req, call, keys, n, rep))
		return;
	/*
	 * The kernels stop at chunk boundaries; a cancel that comes during the
	 * last chunk is honoured from the undo log, which holds this call
	 * alone: every shared table logs, and the log is emptied after each
	 * call.
	 */
	position = cpht_table_log_position(t);
	st = kernel_call(slot, t, call, keys, n, status);
	if (st == CPHT_OK && call != CPHT_CALL_FIND && pg_atomic_read_u32(&slot->cancel))
	{
		st = cpht_table_rollback_to(t, position);
		if (st == CPHT_OK)
		{
			st = CPHT_ERR_CANCELED;
			rep->value = 0;
			reply_status(rep, st, "the call was canceled as it ended and was undone");
			cpht_table_truncate_log(t, position);
			return;
		}
		lose_after_failed_undo(slot, t, "a canceled call could not be undone");
		return;
	}
	/*
	 * A durable table's changes go to WAL now, in the order the table
	 * changed; before they are recorded for their transaction, whose
	 * failure below fails the call, so that its (sub)transaction aborts
	 * and recovery skips these records.
	 */
	if (st == CPHT_OK && call != CPHT_CALL_FIND)
	{
		st = cpht_durable_log_call(&slot->req, t, position, rep);
		if (st != CPHT_OK)
		{
			rep->value = 0;
			if (cpht_table_rollback_to(t, position) != CPHT_OK)
			{
				lose_after_failed_undo(slot, t, "a call whose changes could not be logged could not be undone");
				return;
			}
			cpht_table_truncate_log(t, position);
			reply_status(rep, st, "out of host memory in the cpht worker for the WAL of a durable table's call");
			return;
		}
	}
	if (st == CPHT_OK)
	{
		st = cpht_xacts_after_call(&slot->req, t, call, keys, n, status, position);
		/* its changes could not be recorded for their transaction */
		if (st != CPHT_OK)
		{
			rep->value = 0;
			if (cpht_table_rollback_to(t, position) != CPHT_OK)
			{
				lose_after_failed_undo(slot, t, "a call whose changes could not be recorded could not be undone");
				return;
			}
		}
	}
	cpht_table_truncate_log(t, position);
	cpht_table_call_times(t, &rep->times);
	reply_status(rep, st, cpht_table_error(t));
}

static void
after_write(const CphtRequest *req, cpht_table *t)
{
	if (req->private_table)
		return;
	/* a table lost by a call whose undo failed is gone */
	if (tables[req->entry] != t)
		return;
	pg_atomic_write_u64(&cpht_catalog[req->entry].count,
						cpht_xacts_committed_count(req->entry, cpht_table_count(t)));
}

static void
op_create(CphtSlot *slot)
{
	const CphtRequest *req = &slot->req;
	CphtReply  *rep = &slot->rep;
	CphtControl *ctl = cpht_control;
	CphtCatalogEntry *e = NULL;
	cpht_table *table = NULL;
	cpht_status st;
	char		errbuf[CPHT_TEXT_LEN];
	int			i;

	LWLockAcquire(ctl->catalog_lock, LW_EXCLUSIVE);
	for (i = 0; i < ctl->max_tables; i++)
	{
		CphtCatalogEntry *o = &cpht_catalog[i];

		if (o->state == CPHT_ENTRY_FREE || o->dboid != req->dboid ||
			strcmp(NameStr(o->name), NameStr(req->name)) != 0)
			continue;
		if (o->state != CPHT_ENTRY_LOST)
		{
			LWLockRelease(ctl->catalog_lock);
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_OBJECT),
					 errmsg("shared cpht table \"%s\" already exists", NameStr(req->name)),
					 errhint("Open it with cpht_open('%s'), or drop it first.", NameStr(req->name))));
		}
		/* a lost table of that name is replaced */
		o->state = CPHT_ENTRY_FREE;
	}
	for (i = 0; i < ctl->max_tables; i++)
	{
		if (cpht_catalog[i].state == CPHT_ENTRY_FREE)
		{
			e = &cpht_catalog[i];
			break;
		}
	}
	if (e == NULL)
	{
		LWLockRelease(ctl->catalog_lock);
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many shared cpht tables"),
				 errdetail("The server holds at most %d (cpht.max_shared_tables).", ctl->max_tables),
				 errhint("Drop a shared table, or raise cpht.max_shared_tables and restart the server.")));
	}
	/* The name is taken while the table is created, outside the lock. */
	memset(e->lost_reason, 0, CPHT_TEXT_LEN);
	e->name = req->name;
	e->dboid = req->dboid;
	e->table_id = 0;
	e->state = CPHT_ENTRY_CREATING;
	LWLockRelease(ctl->catalog_lock);

	errbuf[0] = '\0';
	st = cpht_table_create(&req->params, &table, errbuf, sizeof(errbuf));

	LWLockAcquire(ctl->catalog_lock, LW_EXCLUSIVE);
	if (st != CPHT_OK)
	{
		e->state = CPHT_ENTRY_FREE;
		LWLockRelease(ctl->catalog_lock);
		reply_status(rep, st, errbuf);
		return;
	}
	/* for undoing a call canceled after its last chunk (run_call) */
	cpht_table_set_logging(table, 1);
	tables[i] = table;
	table_ids[i] = ctl->next_table_id++;
	e->table_id = table_ids[i];
	e->owner = req->owner;
	e->kind = req->params.kind;
	e->device = req->params.device;
	e->key_bits = req->params.key_bits;
	e->transactional = req->transactional;
	e->durable = false;
	e->create_lsn = InvalidXLogRecPtr;
	cpht_xacts_table_created(i, table_ids[i], req->transactional);
	e->capacity = req->capacity;
	e->bytes = cpht_params_table_bytes(&req->params);
	pg_atomic_write_u64(&e->count, 0);
	LWLockRelease(ctl->catalog_lock);

	/* A durable table is logged and saved before anyone can use it. */
	if (req->durable)
	{
		PG_TRY();
		{
			cpht_durable_created(i, table, &req->params);
		}
		PG_CATCH();
		{
			LWLockAcquire(ctl->catalog_lock, LW_EXCLUSIVE);
			e->state = CPHT_ENTRY_FREE;
			LWLockRelease(ctl->catalog_lock);
			tables[i] = NULL;
			table_ids[i] = 0;
			cpht_xacts_table_dropped(i);
			cpht_table_destroy(table);
			PG_RE_THROW();
		}
		PG_END_TRY();
	}
	LWLockAcquire(ctl->catalog_lock, LW_EXCLUSIVE);
	e->state = CPHT_ENTRY_LIVE;
	LWLockRelease(ctl->catalog_lock);

	rep->entry = i;
	rep->table_id = table_ids[i];
}

static void
op_drop(CphtSlot *slot)
{
	const CphtRequest *req = &slot->req;
	cpht_table *t = request_table(req);

	cpht_durable_dropped(req->entry);
	LWLockAcquire(cpht_control->catalog_lock, LW_EXCLUSIVE);
	cpht_catalog[req->entry].state = CPHT_ENTRY_FREE;
	LWLockRelease(cpht_control->catalog_lock);
	tables[req->entry] = NULL;
	table_ids[req->entry] = 0;
	cpht_xacts_table_dropped(req->entry);
	cpht_table_destroy(t);
}

cpht_table *
cpht_worker_table(int entry, uint64 table_id)
{
	if (entry < 0 || entry >= cpht_control->max_tables || table_ids[entry] != table_id)
		return NULL;
	return tables[entry];
}

void
cpht_worker_table_install(int entry, uint64 table_id, cpht_table *t, bool transactional)
{
	tables[entry] = t;
	table_ids[entry] = table_id;
	cpht_xacts_table_created(entry, table_id, transactional);
}

void
cpht_worker_table_drop(int entry)
{
	cpht_table *t = tables[entry];

	cpht_durable_dropped(entry);
	LWLockAcquire(cpht_control->catalog_lock, LW_EXCLUSIVE);
	cpht_catalog[entry].state = CPHT_ENTRY_FREE;
	LWLockRelease(cpht_control->catalog_lock);
	tables[entry] = NULL;
	table_ids[entry] = 0;
	cpht_xacts_table_dropped(entry);
	cpht_table_destroy(t);
}

void
cpht_worker_table_lose(int entry, const char *reason)
{
	cpht_table *t = tables[entry];

	/* a durable table is gone for recovery too (durable.c keeps the file
	 * of one it could not replay at start) */
	cpht_durable_dropped(entry);

	LWLockAcquire(cpht_control->catalog_lock, LW_EXCLUSIVE);
	cpht_catalog[entry].state = CPHT_ENTRY_LOST;
	strlcpy(cpht_catalog[entry].lost_reason, reason, CPHT_TEXT_LEN);
	LWLockRelease(cpht_control->catalog_lock);
	tables[entry] = NULL;
	table_ids[entry] = 0;
	cpht_xacts_table_dropped(entry);
	cpht_table_destroy(t);
}

static void
op_call(CphtSlot *slot)
{
	const CphtRequest *req = &slot->req;
	cpht_table *t = request_table(req);

	check_window(req);
	run_call(slot, t, req->call, cpht_window_keys(req->window), req->nkeys,
			 cpht_window_status(req->window));
	if (req->call != CPHT_CALL_FIND)
		after_write(req, t);
}

static void
op_upload(CphtSlot *slot, LargeCall *c)
{
	const CphtRequest *req = &slot->req;

	check_window(req);
	if (req->offset == 0)
	{
		large_free(c);
		c->keys = malloc(sizeof(uint64) * Max(req->total, 1));
		c->status = malloc(Max(req->total, 1));
		if (c->keys == NULL || c->status == NULL)
		{
			large_free(c);
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory in the cpht worker"),
					 errdetail("A call of " UINT64_FORMAT " keys needs " UINT64_FORMAT " bytes there.",
							   req->total, req->total * (sizeof(uint64) + 1))));
		}
		c->pid = slot->pid;
		c->total = req->total;
	}
	if (c->keys == NULL || c->pid != slot->pid || req->offset != c->uploaded ||
		req->total != c->total || req->nkeys > c->total - c->uploaded)
		elog(ERROR, "cpht upload of keys " UINT64_FORMAT " to " UINT64_FORMAT
			 " does not continue the call", req->offset, req->offset + req->nkeys);
	memcpy(c->keys + req->offset, cpht_window_keys(req->window), sizeof(uint64) * req->nkeys);
	c->uploaded += req->nkeys;
}

static void
op_run(CphtSlot *slot, LargeCall *c)
{
	const CphtRequest *req = &slot->req;
	cpht_table *t = request_table(req);

	if (c->keys == NULL || c->pid != slot->pid || c->uploaded != c->total ||
		req->total != c->total)
		elog(ERROR, "cpht call run before all its keys were uploaded");
	run_call(slot, t, req->call, c->keys, c->total, c->status);
	if (req->call != CPHT_CALL_FIND)
		after_write(req, t);
	/* Without statuses to download, the call is over; after a conflict it
	 * is sent again whole. */
	if (req->call == CPHT_CALL_PUT || slot->rep.status != CPHT_OK || slot->rep.nconflicts > 0)
		large_free(c);
}

static void
op_download(CphtSlot *slot, LargeCall *c)
{
	const CphtRequest *req = &slot->req;

	check_window(req);
	if (c->status == NULL || c->pid != slot->pid || req->offset > c->total ||
		req->nkeys > c->total - req->offset)
		elog(ERROR, "cpht download of statuses " UINT64_FORMAT " to " UINT64_FORMAT
			 " has no call", req->offset, req->offset + req->nkeys);
	memcpy(cpht_window_status(req->window), c->status + req->offset, req->nkeys);
	if (req->offset + req->nkeys == c->total)
		large_free(c);
}

static void
handle_request(CphtSlot *slot, int s)
{
	const CphtRequest *req = &slot->req;
	CphtReply  *rep = &slot->rep;
	cpht_table *t;

	switch (req->op)
	{
		case CPHT_OP_CREATE:
			op_create(slot);
			break;
		case CPHT_OP_DROP:
			op_drop(slot);
			break;
		case CPHT_OP_CALL:
			op_call(slot);
			break;
		case CPHT_OP_UPLOAD:
			op_upload(slot, &large[s]);
			break;
		case CPHT_OP_RUN:
			op_run(slot, &large[s]);
			break;
		case CPHT_OP_DOWNLOAD:
			op_download(slot, &large[s]);
			break;
		case CPHT_OP_COUNT:
			rep->value = cpht_xacts_count(req, cpht_table_count(request_table(req)));
			break;
		case CPHT_OP_STATS:
			t = request_table(req);
			reply_status(rep, cpht_table_stats(t, &rep->stats), cpht_table_error(t));
			break;
		case CPHT_OP_REBUILD:
			{
				cpht_stats	before;

				t = request_table(req);
				cpht_xacts_check_rebuild(req);
				reply_status(rep, cpht_table_stats(t, &before), cpht_table_error(t));
				if (rep->status != CPHT_OK)
					break;
				running_cancel = &slot->cancel;
				reply_status(rep, cpht_table_rebuild(t), cpht_table_error(t));
				running_cancel = NULL;
				rep->value = before.tombstones[0] + before.tombstones[1];
				break;
			}
		case CPHT_OP_CHECKPOINT:
			rep->value = (uint64) cpht_durable_checkpoint(true);
			break;
		case CPHT_OP_XACT_COMMIT:
		case CPHT_OP_XACT_ABORT:
		case CPHT_OP_XACT_ROLLBACK_TO:
			cpht_xacts_end(req);
			break;
		default:
			if (!cpht_private_request(slot, s))
				elog(ERROR, "unknown cpht request %d", (int) req->op);
	}
}

static void
reply(int s)
{
	pg_write_barrier();
	pg_atomic_write_u32(&cpht_slots[s].state, CPHT_SLOT_DONE);
	SetLatch(&ProcGlobal->allProcs[s].procLatch);
}

static void
serve_one(int s)
{
	CphtSlot   *slot = &cpht_slots[s];
	MemoryContext old;

	pg_read_barrier();
	memset(&slot->rep, 0, sizeof(CphtReply));
	old = MemoryContextSwitchTo(request_cxt);
	serving = s;
	cpht_private_request_begin(&slot->req);
	PG_TRY();
	{
		/* a slot that changed hands drops its predecessor's large call */
		if (large[s].keys != NULL && large[s].pid != slot->pid)
			large_free(&large[s]);
		/* tests only: a sticky fault, as a broken kernel would leave */
		if (slot->req.inject_device_fault)
			(void) cpht_gpu_break_context();
		handle_request(slot, s);
	}
	PG_CATCH();
	{
		ErrorData  *ed;

		running_cancel = NULL;
		MemoryContextSwitchTo(request_cxt);
		ed = CopyErrorData();
		FlushErrorState();
		LWLockReleaseAll();
		slot->rep.sqlerrcode = ed->sqlerrcode;
		strlcpy(slot->rep.message, ed->message ? ed->message : "", CPHT_TEXT_LEN);
		if (ed->detail)
			strlcpy(slot->rep.detail, ed->detail, CPHT_TEXT_LEN);
		if (ed->hint)
			strlcpy(slot->rep.hint, ed->hint, CPHT_TEXT_LEN);
		ereport(DEBUG1,
				(errmsg_internal("cpht worker answered a request of process %d with an error: %s",
								 slot->pid, slot->rep.message)));
	}
	PG_END_TRY();
	slot->rep.memory_delta = cpht_private_request_end();
	serving = -1;
	MemoryContextSwitchTo(old);
	MemoryContextReset(request_cxt);
	if (slot->rep.status == CPHT_ERR_DEVICE_LOST)
	{
		char		reason[CPHT_TEXT_LEN];

		/* This request gets its own message; the worker cannot go on. */
		strlcpy(reason, slot->rep.message, sizeof(reason));
		reply(s);
		cpht_worker_device_lost(reason);
	}
	reply(s);
}

void
cpht_worker_serve(void)
{
	int			nwords = (cpht_control->nslots + 63) / 64;

	for (int w = 0; w < nwords; w++)
	{
		uint64		bits = pg_atomic_exchange_u64(&cpht_submitted[w], 0);

		while (bits != 0)
		{
			int			b = pg_rightmost_one_pos64(bits);
			int			s = w * 64 + b;

			bits &= bits - 1;
			if (s < cpht_control->nslots &&
				pg_atomic_read_u32(&cpht_slots[s].state) == CPHT_SLOT_SUBMITTED)
				serve_one(s);
		}
	}
}

void
cpht_worker_shutdown(const char *reason, int errcode)
{
	CphtControl *ctl = cpht_control;

	/* an exit from inside a request may hold the catalog lock */
	LWLockReleaseAll();
	SpinLockAcquire(&ctl->mutex);
	ctl->worker_pid = 0;
	SpinLockRelease(&ctl->mutex);

	/* No backend waits for an answer that will not come. */
	for (int s = 0; s < ctl->nslots; s++)
	{
		CphtSlot   *slot = &cpht_slots[s];

		if (pg_atomic_read_u32(&slot->state) != CPHT_SLOT_SUBMITTED)
			continue;
		memset(&slot->rep, 0, sizeof(CphtReply));
		slot->rep.sqlerrcode = errcode;
		strlcpy(slot->rep.message, "terminating cpht call because the cpht worker is exiting", CPHT_TEXT_LEN);
		snprintf(slot->rep.detail, CPHT_TEXT_LEN,
				 "Tables in the cpht worker are lost when it exits: %s.", reason);
		reply(s);
	}
	SpinLockAcquire(&ctl->mutex);
	strlcpy(ctl->exit_reason, reason, CPHT_TEXT_LEN);
	SpinLockRelease(&ctl->mutex);

	LWLockAcquire(ctl->catalog_lock, LW_EXCLUSIVE);
	for (int i = 0; i < ctl->max_tables; i++)
	{
		if (cpht_catalog[i].state == CPHT_ENTRY_LIVE)
		{
			cpht_catalog[i].state = CPHT_ENTRY_LOST;
			strlcpy(cpht_catalog[i].lost_reason, reason, CPHT_TEXT_LEN);
		}
	}
	LWLockRelease(ctl->catalog_lock);
}
