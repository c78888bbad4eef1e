/*
 * remote.c — calls on shared tables, built from requests to the cpht
 * worker (client.c).
 *
 * Keys are copied from the caller's array into an arena window once and
 * statuses out of it once.  A call larger than a window is streamed
 * (STREAM): the worker runs it piece by piece on the windows while this
 * backend fills the next piece and empties the last, and undoes the pieces
 * that ran if the call fails or is canceled part way, so the table sees
 * one all-or-nothing call.  A cancel while the call is out is passed to the
 * worker, which undoes it.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "portability/instr_time.h"

#include "client/client.h"
#include "guc.h"
#include "worker/worker.h"
#include "errors.h"
#include "memcap.h"
#include "client/waits.h"

static void
check_reply(const CphtReply *rep, int32 handle)
{
	if (rep->status != CPHT_OK)
		cpht_check_status(rep->status, handle, rep->message);
}

static cpht_call_times last_times;

void
cpht_remote_last_times(cpht_call_times *out)
{
	*out = last_times;
}

/* The table a request names: a shared table, or (ref NULL) the private
 * table of private_id. */
static uint64 private_id;
static uint64 private_budget;

/* This backend's side of its one-window calls, summed (ms): see
 * cpht_remote_window_split. */
static double split_ms[CPHT_WINDOW_SPLIT_PARTS];

void
cpht_remote_window_split(double out[CPHT_WINDOW_SPLIT_PARTS])
{
	memcpy(out, split_ms, sizeof(split_ms));
}

/* split_ms[i] += now - *mark; *mark = now */
static inline void
split_step(int i, instr_time *mark)
{
	instr_time	now;

	INSTR_TIME_SET_CURRENT(now);
	split_ms[i] += INSTR_TIME_GET_MILLISEC(now) - INSTR_TIME_GET_MILLISEC(*mark);
	*mark = now;
}

static CphtRequest *
table_request(CphtOp op, const CphtSharedRef *ref)
{
	CphtRequest *req = cpht_client_request();

	req->op = op;
	if (ref != NULL)
	{
		req->entry = ref->entry;
		req->table_id = ref->table_id;
	}
	else
	{
		req->private_table = true;
		req->entry = -1;
		req->table_id = private_id;
		req->memory_budget = private_budget;
	}
	return req;
}

/*
 * The reply of a request that ran a call (CALL or STREAM): NULL when it met
 * other transactions' keys (*conflicts has them; nothing of it stayed);
 * otherwise the reply, also copied to *out, its memory added to *delta.
 */
static CphtReply *
run_reply(CphtReply *rep, CphtConflicts *conflicts, CphtReply *out, int64 *delta)
{
	if (cpht_waits_conflicts(rep, conflicts))
		return NULL;
	*delta += rep->memory_delta;
	*out = *rep;
	return rep;
}

/* Tags a request that runs a call with the caller's transaction, on a
 * transactional shared table; a write on a durable one first puts the
 * (sub)transaction's xid in WAL (durable_wal.c). */
static void
tag_run(CphtRequest *req, const CphtSharedRef *ref, CphtCall call)
{
	if (ref != NULL)
	{
		cpht_waits_tag(req, ref->transactional, call != CPHT_CALL_FIND);
		if (ref->durable && ref->transactional && call != CPHT_CALL_FIND)
			cpht_wal_mark_xid(req->sub_xid);
	}
}

/*
 * The keys of piece p of a streamed call into a window.  On several
 * threads (cpht.cpu_threads): copying is all this backend does while the
 * worker runs the piece before, and one thread's copy of a window takes
 * longer than the GPU's transfer and kernels on it.
 */
static void
fill_piece(int w, const uint64 *keys, uint64 n, uint64 p, cpht_key_span *span)
{
	uint64		off = p * cpht_control->window_keys;
	uint64		len = Min(cpht_control->window_keys, n - off);

	cpht_client_window_enter(w, len);
	cpht_copy_keys_spanned(cpht_window_keys(w), keys + off, len, cpht_cpu_threads, span);
}

/* *sum += now - start: cpht.trace's split of a streamed call */
static inline void
accum_since(instr_time *sum, instr_time start)
{
	instr_time	now;

	INSTR_TIME_SET_CURRENT(now);
	INSTR_TIME_ACCUM_DIFF(*sum, now, start);
}

/*
 * A call larger than a window, streamed through the nwin windows win[]:
 * while the worker runs piece p, this backend copies the keys of the
 * pieces after it into the other windows and the statuses of the pieces
 * before it out of theirs.  With one window the pieces take turns in it.  Nothing
 * here raises while the request is out; a cancel is passed to the worker,
 * which stops at the next piece (or chunk) and undoes the call.
 */
static CphtReply *
stream_call(const CphtSharedRef *ref, CphtCall call, const uint64 *keys, uint64 n,
			uint8 *status, const int *win, int nwin)
{
	uint64		window_keys = cpht_control->window_keys;
	uint64		npieces = (n + window_keys - 1) / window_keys;
	cpht_key_span first_span;
	uint64		filled = 0,		/* pieces whose keys are in a window */
				copied = 0,		/* pieces whose statuses were copied out */
				ran = 0;		/* pieces the worker has run */
	bool		done = false;
	CphtRequest *req;
	CphtReply  *rep;
	instr_time	mark,
				keys_in,		/* copying keys into windows */
				statuses_out,	/* copying statuses out */
				waiting;		/* waiting for the worker */

	INSTR_TIME_SET_ZERO(keys_in);
	INSTR_TIME_SET_ZERO(statuses_out);
	INSTR_TIME_SET_ZERO(waiting);

	/*
	 * Nothing is out yet: a cancel raises here.  The request goes out as
	 * soon as the first piece is in, so the worker starts on it while the
	 * second is copied.
	 */
	CHECK_FOR_INTERRUPTS();
	INSTR_TIME_SET_CURRENT(mark);
	fill_piece(win[0], keys, n, 0, &first_span);
	accum_since(&keys_in, mark);
	filled = 1;
	req = table_request(CPHT_OP_STREAM, ref);
	req->call = call;
	req->spans_given = true;
	req->piece_span[0] = first_span;
	req->window = win[0];
	memcpy(req->stream_windows, win, sizeof(int) * nwin);
	req->nstream_windows = nwin;
	req->total = n;
	tag_run(req, ref, call);
	cpht_client_stream_submit(filled);

	for (;;)
	{
		/* The next piece, once its window's statuses are out. */
		if (!done && filled < npieces && filled < copied + nwin &&
			!QueryCancelPending && !ProcDiePending)
		{
			INSTR_TIME_SET_CURRENT(mark);
			fill_piece(win[filled % nwin], keys, n, filled,
					   &req->piece_span[filled % nwin]);
			accum_since(&keys_in, mark);
			cpht_client_stream_filled(++filled);
			continue;
		}
		if (copied < ran)
		{
			uint64		off = copied * window_keys;

			/* the result array is fresh memory: its page faults are
			 * shared by the copying threads too */
			INSTR_TIME_SET_CURRENT(mark);
			if (status != NULL)
				cpht_parallel_memcpy(status + off, cpht_window_status(win[copied % nwin]),
									 Min(window_keys, n - off), cpht_cpu_threads);
			accum_since(&statuses_out, mark);
			copied++;
			continue;
		}
		if (done)
			break;
		INSTR_TIME_SET_CURRENT(mark);
		done = cpht_client_stream_wait(&ran);
		accum_since(&waiting, mark);
	}
	rep = cpht_client_stream_reply();
	if (cpht_trace)
		ereport(NOTICE,
				(errmsg("cpht: a call of " UINT64_FORMAT " keys streamed through the cpht worker in " UINT64_FORMAT " pieces, %d windows",
						n, npieces, nwin),
				 errdetail("This session copied keys in for %.3f ms and statuses out for %.3f ms and waited for the worker %.3f ms; the worker ran the pieces' table calls for %.3f ms and waited for pieces %.3f ms.",
						   INSTR_TIME_GET_MILLISEC(keys_in), INSTR_TIME_GET_MILLISEC(statuses_out),
						   INSTR_TIME_GET_MILLISEC(waiting), rep->stream_run_ms,
						   rep->stream_wait_ms)));
	return rep;
}

/*
 * One batch call, once.  A kernel status other than CPHT_OK ends it and is
 * left in *out (with the memory the kernels took) for the caller to raise.
 * On a transactional shared table a write that meets keys other open
 * transactions changed leaves nothing of it: *conflicts gets their owners
 * and nothing else comes back.
 */
static uint64
call_pieces(const CphtSharedRef *ref, CphtCall call, const uint64 *keys, uint64 n,
			uint8 *status, CphtReply *out, CphtConflicts *conflicts)
{
	uint64		window_keys = cpht_control->window_keys;
	uint64		value = 0;
	int			win[CPHT_STREAM_WINDOWS];
	int			nwin = 0;
	int64		delta = 0;

	instr_time	mark;

	memset(out, 0, sizeof(*out));

	INSTR_TIME_SET_CURRENT(mark);
	win[nwin++] = cpht_client_window_acquire();
	/* more windows, where free, let copies overlap the worker's runs */
	while (n > window_keys && nwin < CPHT_STREAM_WINDOWS &&
		   (uint64) nwin < (n + window_keys - 1) / window_keys)
	{
		int			w = cpht_client_window_try_acquire();

		if (w < 0)
			break;
		win[nwin++] = w;
	}
	PG_TRY();
	{
		CphtRequest *req;
		CphtReply  *rep;

		if (n <= window_keys)
		{
			cpht_key_span span;

			/* the split is of calls that fit one window (a stream has its
			 * own, stream_call) */
			split_step(0, &mark);
			cpht_client_window_enter(win[0], n);
			cpht_copy_keys_spanned(cpht_window_keys(win[0]), keys, n, cpht_cpu_threads, &span);
			split_step(1, &mark);
			req = table_request(CPHT_OP_CALL, ref);
			req->call = call;
			req->spans_given = true;
			req->piece_span[0] = span;
			req->window = win[0];
			req->nkeys = n;
			tag_run(req, ref, call);
			rep = run_reply(cpht_client_send(), conflicts, out, &delta);
			split_step(2, &mark);
			if (rep != NULL)
			{
				split_ms[4] += out->worker_ms;
				split_ms[5] += out->txn_ms;
				value = rep->value;
				if (status != NULL && rep->status == CPHT_OK)
					memcpy(status, cpht_window_status(win[0]), n);
			}
			split_step(3, &mark);
		}
		else
		{
			rep = run_reply(stream_call(ref, call, keys, n, status, win, nwin),
							conflicts, out, &delta);
			if (rep != NULL)
				value = rep->value;
		}
	}
	PG_FINALLY();
	{
		for (int i = 0; i < nwin; i++)
			cpht_client_window_release(win[i]);
	}
	PG_END_TRY();
	out->memory_delta = delta;
	return value;
}

uint64
cpht_remote_call(const CphtSharedRef *ref, int32 handle, CphtCall call,
				 const uint64 *keys, uint64 n, uint8 *status)
{
	CphtConflicts prev;

	prev.n = 0;
	/* After a conflict: wait for the owners (no window held), then again. */
	for (;;)
	{
		CphtConflicts conflicts;
		CphtReply	rep;
		uint64		value;

		conflicts.n = 0;
		value = call_pieces(ref, call, keys, n, status, &rep, &conflicts);
		if (conflicts.n == 0)
		{
			check_reply(&rep, handle);
			last_times = rep.times;
			return value;
		}
		cpht_waits_wait(&conflicts, &prev);
		prev = conflicts;
	}
}

uint64
cpht_remote_private_call(uint64 table_id, uint64 memory_budget, CphtCall call,
						 const uint64 *keys, uint64 n, uint8 *status, CphtReply *reply)
{
	CphtConflicts none;

	private_id = table_id;
	private_budget = memory_budget;
	none.n = 0;
	return call_pieces(NULL, call, keys, n, status, reply, &none);
}

CphtReply *
cpht_remote_private(CphtOp op, uint64 table_id, uint64 memory_budget, uint64 offset)
{
	CphtRequest *req;

	private_id = table_id;
	private_budget = memory_budget;
	req = table_request(op, NULL);
	req->offset = offset;
	return cpht_client_send();
}

uint64
cpht_remote_count(const CphtSharedRef *ref)
{
	cpht_waits_tag(table_request(CPHT_OP_COUNT, ref), ref->transactional, false);
	return cpht_client_send()->value;
}

void
cpht_remote_stats(const CphtSharedRef *ref, int32 handle, cpht_stats *out)
{
	CphtReply  *rep;

	(void) table_request(CPHT_OP_STATS, ref);
	rep = cpht_client_send();
	check_reply(rep, handle);
	*out = rep->stats;
}

uint64
cpht_remote_rebuild(const CphtSharedRef *ref, int32 handle)
{
	CphtReply  *rep;

	(void) table_request(CPHT_OP_REBUILD, ref);
	rep = cpht_client_send();
	check_reply(rep, handle);
	return rep->value;
}

void
cpht_remote_scan(const CphtSharedRef *ref, uint64 table_id, uint64 position,
				 uint64 *keys, uint64 max, CphtReply *out)
{
	CphtConflicts prev;

	prev.n = 0;
	max = Min(max, cpht_control->window_keys);
	/* While other transactions have changes on the table: wait, again. */
	for (;;)
	{
		CphtConflicts conflicts;
		int			w;

		conflicts.n = 0;
		w = cpht_client_window_acquire();
		PG_TRY();
		{
			CphtRequest *req;
			CphtReply  *rep;

			private_id = table_id;
			private_budget = PG_UINT64_MAX;
			req = table_request(CPHT_OP_SCAN, ref);
			req->window = w;
			req->offset = position;
			req->nkeys = max;
			if (ref != NULL)
				cpht_waits_tag(req, ref->transactional, false);
			rep = cpht_client_send();
			if (!cpht_waits_conflicts(rep, &conflicts))
			{
				*out = *rep;
				if (rep->status == CPHT_OK)
					memcpy(keys, cpht_window_keys(w), sizeof(uint64) * rep->value);
			}
		}
		PG_FINALLY();
		{
			cpht_client_window_release(w);
		}
		PG_END_TRY();
		if (conflicts.n == 0)
			return;
		cpht_waits_wait(&conflicts, &prev);
		prev = conflicts;
	}
}

void
cpht_remote_drop(const CphtSharedRef *ref)
{
	(void) table_request(CPHT_OP_DROP, ref);
	(void) cpht_client_send();
}
