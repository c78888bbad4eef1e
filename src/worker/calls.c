/*
 * calls.c — running calls on a table in the cpht worker: a CALL (its keys
 * in one arena window), a streamed call (STREAM: pieces in up to
 * CPHT_STREAM_WINDOWS windows that the backend fills as earlier ones run),
 * a piece of an export (SCAN) and a rebuild, with the calling backend's
 * cancel flag as the kernels' interrupt check.
 *
 * A call whose keys fit in one arena window runs on the window in place.
 * A larger one is streamed: its pieces run one after the other on the
 * windows in place as the backend fills them, and statuses stay there for
 * the backend to copy out while the next piece runs.  The table sees one
 * call, all or nothing, whatever its size: a call that fails or is
 * canceled after some pieces ran is undone from the table's undo log,
 * which holds the call alone on a shared table (and is kept for the call
 * on a private table that keeps none).  While a call streams, the worker
 * serves nothing else, so no other call's changes mix with its own in the
 * log.
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

/* The cancel flag of the call running now, read by the kernels. */
static pg_atomic_uint32 *volatile running_cancel = NULL;

int
cpht_worker_interrupt(void)
{
	pg_atomic_uint32 *c = running_cancel;

	return c != NULL && pg_atomic_read_u32(c) != 0;
}

static void
check_window(int window, uint64 nkeys)
{
	if (window < 0 || window >= cpht_control->nwindows || nkeys > cpht_control->window_keys)
		elog(ERROR, "cpht request names window %d with " UINT64_FORMAT " keys",
			 window, nkeys);
}

void
cpht_worker_reply_status(CphtReply *rep, cpht_status status, const char *message)
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
	cpht_worker_reply_status(&slot->rep, CPHT_ERR_DEVICE, reason);
	cpht_worker_shared_lose(slot->req.entry, reason);
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
 * cpht_stat_tables: a call on the shared table at catalog index `entry`
 * ended.  Only a call that ran to the end counts as a call, with its keys
 * and the keys it put that were new; one that met other transactions'
 * keys counts as a wait (its caller waits, then sends it again); the
 * worker's time counts for every call.
 */
static void
count_call(int entry, bool completed, bool waited, uint64 keys, uint64 new_keys,
		   int growths, const instr_time *start)
{
	CphtTableStats *st = &cpht_catalog[entry].stats;
	instr_time	now;

	INSTR_TIME_SET_CURRENT(now);
	INSTR_TIME_SUBTRACT(now, *start);
	pg_atomic_fetch_add_u64(&st->time_us, INSTR_TIME_GET_MICROSEC(now));
	if (waited)
		pg_atomic_fetch_add_u64(&st->waits, 1);
	if (!completed)
		return;
	pg_atomic_fetch_add_u64(&st->calls, 1);
	pg_atomic_fetch_add_u64(&st->keys, keys);
	pg_atomic_fetch_add_u64(&st->new_keys, new_keys);
	if (growths > 0)
		pg_atomic_fetch_add_u64(&st->growths, (uint64) growths);
}

/* rep->txn_ms += now - *mark (cpht.trace) */
static void
txn_time(CphtReply *rep, const instr_time *mark)
{
	instr_time	now;

	INSTR_TIME_SET_CURRENT(now);
	INSTR_TIME_SUBTRACT(now, *mark);
	rep->txn_ms += INSTR_TIME_GET_MILLISEC(now);
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
	instr_time	call_start,
				mark;
	uint64		count_before = 0;

	INSTR_TIME_SET_CURRENT(call_start);

	/* Canceled while queued: nothing ran. */
	if (pg_atomic_read_u32(&slot->cancel))
	{
		cpht_worker_reply_status(rep, CPHT_ERR_CANCELED, "the call was canceled before it ran");
		return;
	}
	/* room to record a transactional write, taken before anything runs */
	if (shared)
	{
		INSTR_TIME_SET_CURRENT(mark);
		cpht_xacts_reserve(req, call, pc->total);
		txn_time(rep, &mark);
	}
	if (!shared && write && npieces > 1 && !cpht_private_table_logs(s, req->table_id))
	{
		cpht_table_set_logging(t, 1);
		call_log = true;
	}
	position = cpht_table_log_position(t);
	memset(&times, 0, sizeof(times));
	/* the new keys of a find-or-put are what it adds to the count */
	if (shared && call == CPHT_CALL_FOP)
		count_before = cpht_table_count(t);

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
		INSTR_TIME_SET_CURRENT(mark);
		if (shared && cpht_xacts_conflicts(req, call, cpht_window_keys(w), len, rep))
			break;
		txn_time(rep, &mark);
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
		INSTR_TIME_SET_CURRENT(mark);
		if (shared && call == CPHT_CALL_FIND)
			(void) cpht_xacts_after_call(req, t, call, cpht_window_keys(w), len,
										 cpht_window_status(w), position);
		txn_time(rep, &mark);
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
			INSTR_TIME_SET_CURRENT(mark);
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
			txn_time(rep, &mark);
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
	INSTR_TIME_SET_CURRENT(mark);
	if (shared)
		cpht_table_truncate_log(t, position);
	txn_time(rep, &mark);
	if (!shared && call_log)
		cpht_table_set_logging(t, 0);
	rep->value = st == CPHT_OK && rep->nconflicts == 0 ? value : 0;
	rep->times = times;
	cpht_worker_reply_status(rep, st, message != NULL ? message : cpht_table_error(t));
	if (shared)
	{
		bool		completed = st == CPHT_OK && rep->nconflicts == 0;
		uint64		new_keys = 0;

		if (completed && call == CPHT_CALL_FOP)
			new_keys = cpht_table_count(t) - count_before;
		else if (completed && call == CPHT_CALL_PUT)
			new_keys = value;
		count_call(req->entry, completed, rep->nconflicts > 0, pc->total, new_keys,
				   times.grows, &call_start);
	}
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

void
cpht_worker_op_call(CphtSlot *slot, int s)
{
	const CphtRequest *req = &slot->req;
	cpht_table *t = cpht_worker_request_table(req);
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
		cpht_worker_shared_written(req, t);
}

void
cpht_worker_op_stream(CphtSlot *slot, int s)
{
	const CphtRequest *req = &slot->req;
	cpht_table *t = cpht_worker_request_table(req);
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
		cpht_worker_shared_written(req, t);
}

/*
 * A piece of an export, into the request's window.  A transactional shared
 * table is read only while no other transaction has changes on it, so the
 * keys are committed ones (or the caller's own).
 */
void
cpht_worker_op_scan(CphtSlot *slot)
{
	const CphtRequest *req = &slot->req;
	CphtReply  *rep = &slot->rep;
	cpht_table *t = cpht_worker_request_table(req);
	uint64		position = req->offset;
	size_t		n = 0;

	check_window(req->window, req->nkeys);
	if (cpht_xacts_scan_conflicts(req, rep))
		return;
	running_cancel = &slot->cancel;
	cpht_worker_reply_status(rep, cpht_table_scan_keys(t, &position, cpht_window_keys(req->window),
										   (size_t) req->nkeys, &n),
				 cpht_table_error(t));
	running_cancel = NULL;
	rep->value = n;
	rep->scan_position = position;
	rep->scan_end = cpht_table_scan_end(t);
	rep->scan_changes = cpht_table_changes(t);
	rep->scan_count = cpht_table_count(t);
}

/* REBUILD: the table's layout again, without its tombstones; replies
 * with how many there were. */
void
cpht_worker_op_rebuild(CphtSlot *slot)
{
	const CphtRequest *req = &slot->req;
	CphtReply  *rep = &slot->rep;
	cpht_table *t;
	cpht_stats	before;

	t = cpht_worker_request_table(req);
	cpht_xacts_check_rebuild(req);
	cpht_worker_reply_status(rep, cpht_table_stats(t, &before), cpht_table_error(t));
	if (rep->status != CPHT_OK)
		return;
	/* a rebuild holds both layouts for a while */
	if (!req->private_table)
		cpht_quota_begin(req->entry);
	running_cancel = &slot->cancel;
	cpht_worker_reply_status(rep, cpht_table_rebuild(t), cpht_table_error(t));
	running_cancel = NULL;
	if (rep->status == CPHT_ERR_LIMIT && cpht_quota_active())
		cpht_quota_refused(cpht_worker_budget_refused());
	rep->value = before.tombstones[0] + before.tombstones[1];
}

/* After an ERROR in a request: no call runs any more. */
void
cpht_worker_call_reset(void)
{
	running_cancel = NULL;
}
