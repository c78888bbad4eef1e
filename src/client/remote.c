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

#include "client.h"
#include "cpht.h"
#include "durable.h"
#include "errors.h"
#include "memcap.h"
#include "waits.h"

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
fill_piece(uint64 *window, const uint64 *keys, uint64 n, uint64 p)
{
	uint64		off = p * cpht_control->window_keys;

	cpht_parallel_memcpy(window, keys + off,
						 sizeof(uint64) * Min(cpht_control->window_keys, n - off),
						 cpht_cpu_threads);
}

/*
 * A call larger than a window, streamed through windows win[0] and (if
 * not -1) win[1]: while the worker runs piece p, this backend copies the
 * keys of piece p + 1 into the other window and the statuses of piece
 * p - 1 out of it.  With one window the pieces take turns in it.  Nothing
 * here raises while the request is out; a cancel is passed to the worker,
 * which stops at the next piece (or chunk) and undoes the call.
 */
static CphtReply *
stream_call(const CphtSharedRef *ref, CphtCall call, const uint64 *keys, uint64 n,
			uint8 *status, const int win[2])
{
	uint64		window_keys = cpht_control->window_keys;
	uint64		npieces = (n + window_keys - 1) / window_keys;
	int			nwin = win[1] >= 0 ? 2 : 1;
	uint64		filled = 0,		/* pieces whose keys are in a window */
				copied = 0,		/* pieces whose statuses were copied out */
				ran = 0;		/* pieces the worker has run */
	bool		done = false;
	CphtRequest *req;

	/* Nothing is out yet: a cancel raises here. */
	CHECK_FOR_INTERRUPTS();
	for (; filled < (uint64) nwin && filled < npieces; filled++)
		fill_piece(cpht_window_keys(win[filled]), keys, n, filled);
	req = table_request(CPHT_OP_STREAM, ref);
	req->call = call;
	req->window = win[0];
	req->window2 = win[1];
	req->total = n;
	tag_run(req, ref, call);
	cpht_client_stream_submit(filled);

	for (;;)
	{
		/* The next piece, once its window's statuses are out. */
		if (!done && filled < npieces && filled < copied + nwin &&
			!QueryCancelPending && !ProcDiePending)
		{
			fill_piece(cpht_window_keys(win[filled % nwin]), keys, n, filled);
			cpht_client_stream_filled(++filled);
			continue;
		}
		if (copied < ran)
		{
			uint64		off = copied * window_keys;

			if (status != NULL)
				memcpy(status + off, cpht_window_status(win[copied % nwin]),
					   Min(window_keys, n - off));
			copied++;
			continue;
		}
		if (done)
			break;
		done = cpht_client_stream_wait(&ran);
	}
	return cpht_client_stream_reply();
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
	int			win[2] = {-1, -1};
	int64		delta = 0;

	memset(out, 0, sizeof(*out));

	win[0] = cpht_client_window_acquire();
	PG_TRY();
	{
		CphtRequest *req;
		CphtReply  *rep;

		if (n <= window_keys)
		{
			memcpy(cpht_window_keys(win[0]), keys, sizeof(uint64) * n);
			req = table_request(CPHT_OP_CALL, ref);
			req->call = call;
			req->window = win[0];
			req->nkeys = n;
			tag_run(req, ref, call);
			rep = run_reply(cpht_client_send(), conflicts, out, &delta);
			if (rep != NULL)
			{
				value = rep->value;
				if (status != NULL && rep->status == CPHT_OK)
					memcpy(status, cpht_window_status(win[0]), n);
			}
		}
		else
		{
			/* a second window lets copies overlap the worker's runs */
			win[1] = cpht_client_window_try_acquire();
			rep = run_reply(stream_call(ref, call, keys, n, status, win),
							conflicts, out, &delta);
			if (rep != NULL)
				value = rep->value;
		}
	}
	PG_FINALLY();
	{
		for (int i = 0; i < 2; i++)
			if (win[i] >= 0)
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
