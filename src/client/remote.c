/*
 * remote.c — calls on shared tables, built from requests to the cpht
 * worker (client.c).
 *
 * Keys are copied from the caller's array into an arena window once and
 * statuses out of it once.  A call larger than a window goes up in pieces
 * (UPLOAD), runs whole in the worker (RUN) and comes back in pieces
 * (DOWNLOAD), so the table sees one all-or-nothing call.  A cancel between
 * pieces raises here before the call ran; a cancel while it runs is passed
 * to the worker, which undoes it.
 */
#include "postgres.h"

#include "miscadmin.h"

#include "client.h"
#include "durable.h"
#include "errors.h"
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
 * Sends the request that runs a call (CALL or RUN), tagged with the
 * caller's transaction on a transactional shared table.  NULL when it met
 * other transactions' keys (*conflicts has them; nothing ran); otherwise
 * the reply, also copied to *out, its memory added to *delta.
 */
static CphtReply *
send_run(CphtRequest *req, const CphtSharedRef *ref, CphtCall call,
		 CphtConflicts *conflicts, CphtReply *out, int64 *delta)
{
	CphtReply  *rep;

	if (ref != NULL)
	{
		cpht_waits_tag(req, ref->transactional, call != CPHT_CALL_FIND);
		if (ref->durable && ref->transactional && call != CPHT_CALL_FIND)
			cpht_wal_mark_xid(req->sub_xid);
	}
	rep = cpht_client_send();
	if (cpht_waits_conflicts(rep, conflicts))
		return NULL;
	*delta += rep->memory_delta;
	*out = *rep;
	return rep;
}

/*
 * The pieces of one batch call, once.  A kernel status other than CPHT_OK
 * ends it and is left in *out (with the memory the kernels took, summed
 * over the requests) for the caller to raise.  On a transactional shared
 * table a write that meets keys other open transactions changed runs not
 * at all: *conflicts gets their owners and nothing else comes back.
 */
static uint64
call_pieces(const CphtSharedRef *ref, CphtCall call, const uint64 *keys, uint64 n,
			uint8 *status, CphtReply *out, CphtConflicts *conflicts)
{
	uint64		window_keys = cpht_control->window_keys;
	uint64		value = 0;
	int			w;
	int64		delta = 0;

	memset(out, 0, sizeof(*out));

	w = cpht_client_window_acquire();
	PG_TRY();
	{
		CphtRequest *req;
		CphtReply  *rep;

		if (n <= window_keys)
		{
			memcpy(cpht_window_keys(w), keys, sizeof(uint64) * n);
			req = table_request(CPHT_OP_CALL, ref);
			req->call = call;
			req->window = w;
			req->nkeys = n;
			rep = send_run(req, ref, call, conflicts, out, &delta);
			if (rep == NULL)
				goto done;
			value = rep->value;
			if (status != NULL && rep->status == CPHT_OK)
				memcpy(status, cpht_window_status(w), n);
		}
		else
		{
			for (uint64 off = 0; off < n; off += window_keys)
			{
				uint64		piece = Min(window_keys, n - off);

				CHECK_FOR_INTERRUPTS();
				memcpy(cpht_window_keys(w), keys + off, sizeof(uint64) * piece);
				req = table_request(CPHT_OP_UPLOAD, ref);
				req->window = w;
				req->offset = off;
				req->nkeys = piece;
				req->total = n;
				(void) cpht_client_send();
			}
			req = table_request(CPHT_OP_RUN, ref);
			req->call = call;
			req->total = n;
			rep = send_run(req, ref, call, conflicts, out, &delta);
			if (rep == NULL)
				goto done;
			value = rep->value;
			if (status != NULL && rep->status == CPHT_OK)
			{
				for (uint64 off = 0; off < n; off += window_keys)
				{
					uint64		piece = Min(window_keys, n - off);

					req = table_request(CPHT_OP_DOWNLOAD, ref);
					req->window = w;
					req->offset = off;
					req->nkeys = piece;
					(void) cpht_client_send();
					memcpy(status + off, cpht_window_status(w), piece);
				}
			}
		}
done:
		;
	}
	PG_FINALLY();
	{
		cpht_client_window_release(w);
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
cpht_remote_drop(const CphtSharedRef *ref)
{
	(void) table_request(CPHT_OP_DROP, ref);
	(void) cpht_client_send();
}
