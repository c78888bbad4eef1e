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
 * (CALL).  A larger one is streamed (STREAM): its pieces run one after the
 * other on the windows in place as the backend fills them, and statuses
 * stay there for the backend to copy out while the next piece runs.  The
 * table sees one call, all or nothing, whatever its size: a call that
 * fails or is canceled after some pieces ran is undone from the table's
 * undo log, which holds the call alone on a shared table (and is kept for
 * the call on a private table that keeps none).  While a call streams, the
 * worker serves nothing else, so no other call's changes mix with its
 * own in the log.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "port/pg_bitutils.h"
#include "portability/instr_time.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "cpht_table.h"
#include "shmem/protocol.h"
#include "worker/worker_internal.h"
#include "worker/durable.h"
#include "worker/xacts.h"

/*
 * The keys of a call as the worker finds them: CALL, one piece in one
 * window; STREAM, pieces of window_keys keys taking turns in up to
 * CPHT_STREAM_WINDOWS windows, each filled by the backend while earlier
 * ones run.
 */
typedef struct CallPieces
{
	int			win[CPHT_STREAM_WINDOWS];
	int			nwin;
	uint64		piece_keys;
	uint64		total;
	bool		streamed;
} CallPieces;

static cpht_table **tables = NULL;	/* by catalog index */
static uint64 *table_ids = NULL;
static int	serving = -1;		/* slot of the request being served */

/* The first table id this worker gives (ids are never reused while the
 * server runs). */
static uint64 first_table_id = 0;
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
	request_cxt = AllocSetContextCreate(TopMemoryContext, "cpht worker request",
										ALLOCSET_DEFAULT_SIZES);
	cpht_xacts_init();

	/* What a previous worker held is gone with its memory. */
	LWLockAcquire(ctl->catalog_lock, LW_EXCLUSIVE);
	first_table_id = ctl->next_table_id;
	ctl->first_table_id = first_table_id;	/* for backends (session/shared_handles.c) */
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
	e = &cpht_catalog[req->entry];
	/* the restore may still replay WAL into a durable table */
	if (cpht_durable_restoring() && e->durable)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("shared cpht table \"%s\" is being restored", NameStr(e->name)),
				 errdetail("The cpht worker restarted and restores the durable shared tables."),
				 errhint("Open the table again with cpht_open('%s'), which waits for the restore.",
						 NameStr(e->name))));
	if (tables[req->entry] != NULL && table_ids[req->entry] == req->table_id)
		return tables[req->entry];

	if (e->state == CPHT_ENTRY_LOST && e->table_id == req->table_id)
		ereport(ERROR,
				(errcode(ERRCODE_SYSTEM_ERROR),
				 errmsg("shared cpht table \"%s\" was lost", NameStr(e->name)),
				 errdetail("Its memory was in a cpht worker that exited: %s.", e->lost_reason),
				 errhint("Create it again with cpht_create(..., name => %s).", quote_literal_cstr(NameStr(e->name)))));
	/* ids grow with every table: a smaller one than this worker's first
	 * was opened before it started */
	if (req->table_id < first_table_id)
		ereport(ERROR,
				(errcode(ERRCODE_SYSTEM_ERROR),
				 errmsg("shared cpht table was opened before the cpht worker restarted"),
				 errdetail("Handles of shared tables do not outlive the cpht worker; a durable table is restored by the new worker and reached through a new handle."),
				 errhint("Open the table again with cpht_open().")));
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("shared cpht table does not exist"),
			 errdetail("It was dropped.")));
	pg_unreachable();
}

static void
check_window(int window, uint64 nkeys)
{
	if (window < 0 || window >= cpht_control->nwindows || nkeys > cpht_control->window_keys)
		elog(ERROR, "cpht request names window %d with " UINT64_FORMAT " keys",
			 window, nkeys);
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
 * interrupt check; PUT counts the keys it inserted into *inserted.  span,
 * where the backend sent one, is the keys' span, taken as it copied them
 * in (cpht_table_expect_span). */
static cpht_status
kernel_call(CphtSlot *slot, cpht_table *t, CphtCall call, const uint64 *keys,
			uint64 n, uint8 *status, const cpht_key_span *span, uint64 *inserted)
{
	cpht_status st;

	if (call != CPHT_CALL_FOP && call != CPHT_CALL_FIND && call != CPHT_CALL_PUT &&
		call != CPHT_CALL_ERASE)
		elog(ERROR, "unknown cpht call %d", (int) call);
	/* for the table call below only: it ends the hint */
	if (span != NULL)
		cpht_table_expect_span(t, keys, n, span);
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
			st = cpht_table_put(t, keys, n, inserted);
			break;
		case CPHT_CALL_ERASE:
			st = cpht_table_erase(t, keys, n, status);
			break;
		default:
			pg_unreachable();	/* checked above */
	}
	running_cancel = NULL;
	return st;
}

static void
add_times(cpht_call_times *sum, const cpht_table *t)
{
	cpht_call_times one;

	cpht_table_call_times(t, &one);
	cpht_call_times_add(sum, &one);
}

/*
 * Waits until the backend has filled piece p of a streamed call; false
 * when it canceled the call or left its slot instead.  The worker's latch,
 * set by the backend after each piece, is reset here: the caller sets it
 * again when the call ends, so requests submitted meanwhile are served.
 */
static bool
await_piece(CphtSlot *slot, uint64 p, int pid, double *waited_ms)
{
	instr_time	start,
				end;

	if (pg_atomic_read_u64(&slot->filled) > p)
	{
		pg_read_barrier();
		return true;
	}
	INSTR_TIME_SET_CURRENT(start);
	while (pg_atomic_read_u64(&slot->filled) <= p)
	{
		if (pg_atomic_read_u32(&slot->cancel) != 0 || slot->pid != pid)
			return false;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 100, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
	pg_read_barrier();
	INSTR_TIME_SET_CURRENT(end);
	INSTR_TIME_SUBTRACT(end, start);
	*waited_ms += INSTR_TIME_GET_MILLISEC(end);
	return true;
}

/* Tells the backend of a streamed call that pieces [0, ran) ran: their
 * statuses are in their windows. */
static void
piece_ran(CphtSlot *slot, int s, uint64 ran)
{
	pg_write_barrier();
	pg_atomic_write_u64(&slot->ran, ran);
	SetLatch(&ProcGlobal->allProcs[s].procLatch);
}

/*
 * Runs a batch call, piece by piece, with the slot's cancel flag as the
 * interrupt check; all or nothing.
 *
 * The kernels stop at chunk boundaries and undo the piece they run; the
 * pieces before it are undone from the undo log, from the position the
 * call started at.  Every shared table logs, and its log is emptied after
 * each call, so it holds this call alone.  A private table that keeps a
 * log for its backend's savepoints keeps the entries of a call that ended;
 * one that keeps none logs a streamed write while it runs.  A write on a
 * shared table canceled as its last piece ended is undone as well; on a
 * private table a call that ended stays, as in a backend.
 */
static void
run_call(CphtSlot *slot, int s, cpht_table *t, CphtCall call, const CallPieces *pc)
{
	const CphtRequest *req = &slot->req;
	CphtReply  *rep = &slot->rep;
	bool		shared = !req->private_table;
	bool		write = call != CPHT_CALL_FIND;
	bool		call_log = false;	/* logging turned on for this call */
	bool		undo = false;
	uint64		npieces = (pc->total + pc->piece_keys - 1) / pc->piece_keys;
	uint64		value = 0,
				position;
	cpht_call_times times;
	cpht_status st = CPHT_OK;
	const char *message = NULL;
	char		failed_part_way[CPHT_TEXT_LEN];
	int			pid = slot->pid;

	/* Canceled while queued: nothing ran. */
	if (pg_atomic_read_u32(&slot->cancel))
	{
		reply_status(rep, CPHT_ERR_CANCELED, "the call was canceled before it ran");
		return;
	}
	/* room to record a transactional write, taken before anything runs */
	if (shared)
		cpht_xacts_reserve(req, call, pc->total);
	if (!shared && write && npieces > 1 && !cpht_private_table_logs(s, req->table_id))
	{
		cpht_table_set_logging(t, 1);
		call_log = true;
	}
	position = cpht_table_log_position(t);
	memset(&times, 0, sizeof(times));

	for (uint64 p = 0; p < npieces; p++)
	{
		uint64		off = p * pc->piece_keys;
		uint64		len = Min(pc->piece_keys, pc->total - off);
		int			w = pc->win[p % pc->nwin];
		uint64		inserted = 0;
		instr_time	piece_start,
					piece_end;

		if (pc->streamed && !await_piece(slot, p, pid, &rep->stream_wait_ms))
		{
			st = CPHT_ERR_CANCELED;
			message = "the call was canceled part way and was undone";
			break;
		}
		/* A transactional write meeting other transactions' pending keys
		 * does not stay (xacts.c). */
		if (shared && cpht_xacts_conflicts(req, call, cpht_window_keys(w), len, rep))
			break;
		INSTR_TIME_SET_CURRENT(piece_start);
		st = kernel_call(slot, t, call, cpht_window_keys(w), len, cpht_window_status(w),
						 req->spans_given ? &req->piece_span[p % pc->nwin] : NULL, &inserted);
		INSTR_TIME_SET_CURRENT(piece_end);
		INSTR_TIME_SUBTRACT(piece_end, piece_start);
		rep->stream_run_ms += INSTR_TIME_GET_MILLISEC(piece_end);
		add_times(&times, t);
		if (st != CPHT_OK)
		{
			/* as a call in a backend says it: the pieces before are undone
			 * below */
			if (off > 0)
			{
				snprintf(failed_part_way, sizeof(failed_part_way),
						 "%s (after " UINT64_FORMAT " of " UINT64_FORMAT " keys, which were taken out again)",
						 cpht_table_error(t), off, pc->total);
				message = failed_part_way;
			}
			break;
		}
		value += inserted;
		/* a find answers others' pending keys as they were before */
		if (shared && call == CPHT_CALL_FIND)
			(void) cpht_xacts_after_call(req, t, call, cpht_window_keys(w), len,
										 cpht_window_status(w), position);
		if (pc->streamed)
			piece_ran(slot, s, p + 1);
	}
	if (pc->streamed)
		SetLatch(MyLatch);

	if (st == CPHT_OK && rep->nconflicts == 0 && write && shared)
	{
		if (pg_atomic_read_u32(&slot->cancel))
		{
			st = CPHT_ERR_CANCELED;
			message = "the call was canceled as it ended and was undone";
		}
		else
		{
			/*
			 * A durable table's changes go to WAL now, in the order the
			 * table changed, before they are recorded for their
			 * transaction: a failure of either fails the call, so that its
			 * (sub)transaction aborts and recovery skips these records.
			 */
			st = cpht_durable_log_call(req, t, position, rep);
			if (st == CPHT_ERR_NOMEM)
				message = "out of host memory in the cpht worker for the WAL of a durable table's call";
			else if (st != CPHT_OK)
				message = cpht_table_error(t);
			else
			{
				/* its changes recorded for its transaction, or undone */
				st = cpht_xacts_after_call(req, t, call, NULL, pc->total, NULL, position);
				if (st != CPHT_OK)
					message = cpht_table_error(t);
			}
		}
	}
	undo = write && (st != CPHT_OK || rep->nconflicts > 0);
	if (undo && cpht_table_rollback_to(t, position) != CPHT_OK)
	{
		if (shared)
		{
			lose_after_failed_undo(slot, t, st == CPHT_ERR_CANCELED ?
								   "a canceled call could not be undone" :
								   rep->nconflicts > 0 ?
								   "a call that met other transactions' keys could not be undone" :
								   "a failed call could not be undone");
			return;
		}
		st = CPHT_ERR_DEVICE;
		message = cpht_table_error(t);
	}
	if (shared)
		cpht_table_truncate_log(t, position);
	else if (call_log)
		cpht_table_set_logging(t, 0);
	rep->value = st == CPHT_OK && rep->nconflicts == 0 ? value : 0;
	rep->times = times;
	reply_status(rep, st, message != NULL ? message : cpht_table_error(t));
}

static void
after_write(const CphtRequest *req, cpht_table *t)
{
	uint64		bytes;

	if (req->private_table)
		return;
	/* a table lost by a call whose undo failed is gone */
	if (tables[req->entry] != t)
		return;
	pg_atomic_write_u64(&cpht_catalog[req->entry].count,
						cpht_xacts_committed_count(req->entry, cpht_table_count(t)));
	/* a write may have grown the table: cpht_tables() shows its bytes */
	bytes = cpht_table_slot_bytes(t);
	if (bytes != cpht_catalog[req->entry].bytes)
	{
		LWLockAcquire(cpht_control->catalog_lock, LW_EXCLUSIVE);
		cpht_catalog[req->entry].bytes = bytes;
		LWLockRelease(cpht_control->catalog_lock);
	}
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

	/*
	 * While the restore runs, a new table could take the name or the
	 * catalog entry of a durable table not restored yet (the backend waits
	 * for the restore before it asks; this refuses a request that came
	 * anyway).
	 */
	if (cpht_durable_restoring())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("shared cpht tables cannot be created while the cpht worker restores durable tables"),
				 errhint("Create the table again in a moment.")));
	/* within its owner's cap and cpht.max_shared_memory (quota.c) */
	cpht_quota_check_create(&req->name, req->owner, req->memory_cap_kb,
							cpht_params_table_bytes(&req->params));

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

	/*
	 * One database may hold cpht.max_shared_tables_per_database of the
	 * server's slots, so that it cannot take every one: tables of the
	 * database in any state but free count (a lost one holds its slot
	 * until dropped or replaced).  Only creation is refused: the restore
	 * of durable tables (durable_restore.c's install) takes no notice of it, so
	 * lowering the setting loses no table.
	 */
	{
		int			limit = cpht_tables_per_database_limit();
		int			used = 0;

		for (i = 0; i < ctl->max_tables; i++)
			if (cpht_catalog[i].state != CPHT_ENTRY_FREE && cpht_catalog[i].dboid == req->dboid)
				used++;
		SpinLockAcquire(&ctl->mutex);
		ctl->max_tables_per_database = limit;
		SpinLockRelease(&ctl->mutex);
		if (used >= limit)
		{
			LWLockRelease(ctl->catalog_lock);
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("too many shared cpht tables in this database"),
					 errdetail("A database holds at most %d of the server's %d (cpht.max_shared_tables_per_database).",
							   limit, ctl->max_tables),
					 errhint("Drop a shared table of this database, or raise cpht.max_shared_tables_per_database and reload the configuration.")));
		}
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
	/* the log is emptied after every call: keep room for a window's */
	cpht_table_keep_log(table, 2 * ctl->window_keys + 4096);
	tables[i] = table;
	table_ids[i] = ctl->next_table_id++;
	e->table_id = table_ids[i];
	e->owner = req->owner;
	e->kind = req->params.kind;
	e->device = req->params.device;
	e->key_bits = req->params.auto_key_bits ? 0 : req->params.key_bits;
	e->transactional = req->transactional;
	e->durable = false;
	e->create_lsn = InvalidXLogRecPtr;
	e->memory_cap_kb = Max(req->memory_cap_kb, 0);
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

	/* a durable table is gone for recovery too (durable_restore.c keeps the file
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

/*
 * run_call, and for a write on a shared table within the memory its owner's
 * cap and cpht.max_shared_memory leave (quota.c): a call the kernels' memory
 * hook refused was undone by run_call, and is answered with 53400 naming
 * the cap.
 */
static void
run_shared_budgeted(CphtSlot *slot, int s, cpht_table *t, const CallPieces *pc)
{
	const CphtRequest *req = &slot->req;
	bool		budgeted = !req->private_table && req->call != CPHT_CALL_FIND;

	if (budgeted)
		cpht_quota_begin(req->entry);
	run_call(slot, s, t, req->call, pc);
	if (budgeted && slot->rep.status == CPHT_ERR_LIMIT && cpht_quota_active())
		cpht_quota_refused(cpht_worker_budget_refused());
}

static void
op_call(CphtSlot *slot, int s)
{
	const CphtRequest *req = &slot->req;
	cpht_table *t = request_table(req);
	CallPieces	pc;

	check_window(req->window, req->nkeys);
	pc.win[0] = req->window;
	pc.nwin = 1;
	pc.piece_keys = Max(req->nkeys, 1);
	pc.total = req->nkeys;
	pc.streamed = false;
	if (req->nkeys > 0)
		run_shared_budgeted(slot, s, t, &pc);
	if (req->call != CPHT_CALL_FIND)
		after_write(req, t);
}

static void
op_stream(CphtSlot *slot, int s)
{
	const CphtRequest *req = &slot->req;
	cpht_table *t = request_table(req);
	CallPieces	pc;

	if (req->nstream_windows < 1 || req->nstream_windows > CPHT_STREAM_WINDOWS)
		elog(ERROR, "cpht stream names %d windows", req->nstream_windows);
	pc.nwin = req->nstream_windows;
	for (int i = 0; i < pc.nwin; i++)
	{
		check_window(req->stream_windows[i], 0);
		pc.win[i] = req->stream_windows[i];
		for (int j = 0; j < i; j++)
			if (pc.win[j] == pc.win[i])
				elog(ERROR, "cpht stream names window %d twice", pc.win[i]);
	}
	pc.piece_keys = cpht_control->window_keys;
	pc.total = req->total;
	pc.streamed = true;
	if (req->total == 0)
		elog(ERROR, "cpht stream of no keys");
	run_shared_budgeted(slot, s, t, &pc);
	if (req->call != CPHT_CALL_FIND)
		after_write(req, t);
}

/*
 * A piece of an export, into the request's window.  A transactional shared
 * table is read only while no other transaction has changes on it, so the
 * keys are committed ones (or the caller's own).
 */
static void
op_scan(CphtSlot *slot)
{
	const CphtRequest *req = &slot->req;
	CphtReply  *rep = &slot->rep;
	cpht_table *t = request_table(req);
	uint64		position = req->offset;
	size_t		n = 0;

	check_window(req->window, req->nkeys);
	if (cpht_xacts_scan_conflicts(req, rep))
		return;
	running_cancel = &slot->cancel;
	reply_status(rep, cpht_table_scan_keys(t, &position, cpht_window_keys(req->window),
										   (size_t) req->nkeys, &n),
				 cpht_table_error(t));
	running_cancel = NULL;
	rep->value = n;
	rep->scan_position = position;
	rep->scan_end = cpht_table_scan_end(t);
	rep->scan_changes = cpht_table_changes(t);
	rep->scan_count = cpht_table_count(t);
}

/*
 * A new owner for a shared table (the backend checked the roles).  A
 * durable table's snapshot file names its owner, and so does its CREATE
 * record: the change goes to WAL, flushed before the reply, and marks the
 * table changed, so that replay after a crash applies it and the next
 * round writes a file with the new owner (durable_rounds.c).
 */
static void
op_alter_owner(CphtSlot *slot)
{
	const CphtRequest *req = &slot->req;

	(void) request_table(req);
	if (!OidIsValid(req->owner))
		elog(ERROR, "cpht request gives no owner");
	/* giving a table away must not let it pass the new owner's cap */
	cpht_quota_check_owner_change(req->entry, req->owner, req->memory_cap_kb);
	cpht_durable_owner_changed(req->entry, req->owner);
	LWLockAcquire(cpht_control->catalog_lock, LW_EXCLUSIVE);
	cpht_catalog[req->entry].owner = req->owner;
	LWLockRelease(cpht_control->catalog_lock);
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
			op_call(slot, s);
			break;
		case CPHT_OP_STREAM:
			op_stream(slot, s);
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
				/* a rebuild holds both layouts for a while */
				if (!req->private_table)
					cpht_quota_begin(req->entry);
				running_cancel = &slot->cancel;
				reply_status(rep, cpht_table_rebuild(t), cpht_table_error(t));
				running_cancel = NULL;
				if (rep->status == CPHT_ERR_LIMIT && cpht_quota_active())
					cpht_quota_refused(cpht_worker_budget_refused());
				rep->value = before.tombstones[0] + before.tombstones[1];
				break;
			}
		case CPHT_OP_SCAN:
			op_scan(slot);
			break;
		case CPHT_OP_CHECKPOINT:
			rep->value = (uint64) cpht_durable_checkpoint(true);
			break;
		case CPHT_OP_DROP_DATABASE:
			cpht_worker_op_drop_database(slot);
			break;
		case CPHT_OP_ALTER_OWNER:
			op_alter_owner(slot);
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
	if (slot->req.private_table)
		cpht_private_note_bytes(s, &slot->req, &slot->rep);
	cpht_quota_end();
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

/*
 * Takes slot s's submitted request (SUBMITTED -> RUNNING); false when there
 * is none, or when its backend withdrew it on a cancel first.
 */
bool
cpht_worker_take_slot(int s)
{
	uint32		expected = CPHT_SLOT_SUBMITTED;

	return pg_atomic_compare_exchange_u32(&cpht_slots[s].state, &expected, CPHT_SLOT_RUNNING);
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
			if (s < cpht_control->nslots && cpht_worker_take_slot(s))
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
	/* the next worker restores the durable tables again */
	pg_atomic_write_u32(&ctl->durable_ready, 0);

	/* No backend waits for an answer that will not come. */
	for (int s = 0; s < ctl->nslots; s++)
	{
		CphtSlot   *slot = &cpht_slots[s];

		/* the request this worker was running, and those not yet taken */
		if (s != serving && !cpht_worker_take_slot(s))
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
