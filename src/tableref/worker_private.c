/*
 * worker_private.c — a session's private table held by the cpht worker:
 * every operation is a request on this backend's slot (client/).
 *
 * Errors keep the wording of a table in the backend: a kernel status and
 * its message come back in the reply and are returned as the kernels
 * would return them.  Only the worker's own ERRORs (it is not running)
 * are raised as they come.
 *
 * Memory.  Each request carries what cpht.max_memory still allows, and the
 * reply the bytes the worker's kernels took or gave back for the table;
 * the backend counts them as its own (memcap.c), as it counts the undo
 * logs of its own tables.
 *
 * A table whose worker exited is lost: every operation but destroy fails
 * with 58000 naming it.
 */
#include "postgres.h"

#include "tableref/tableref_internal.h"
#include "client/client.h"
#include "memcap.h"

static void
account(CphtTableRef *t, int64 delta)
{
	if (delta != 0)
	{
		t->memory += delta;
		cpht_memory_worker_delta(delta);
	}
}

/* Whether the worker that holds the table still runs. */
static bool
alive(const CphtTableRef *t, char *reason, size_t len)
{
	uint64		generation;
	int			pid;

	SpinLockAcquire(&cpht_control->mutex);
	generation = cpht_control->generation;
	pid = cpht_control->worker_pid;
	if (reason)
		strlcpy(reason, cpht_control->exit_reason, len);
	SpinLockRelease(&cpht_control->mutex);
	/* a worker that exited and none yet in its place: lost too */
	return generation == t->generation && pid != 0;
}

static void
check_alive(const CphtTableRef *t)
{
	char		reason[CPHT_TEXT_LEN];

	if (alive(t, reason, sizeof(reason)))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_SYSTEM_ERROR),
			 errmsg("cpht table %d was lost", t->handle),
			 errdetail("It lived in a cpht worker that exited: %s.",
					   reason[0] ? reason : "the cpht worker restarted"),
			 errhint("Drop it with cpht_drop(%d) and create it again.", t->handle)));
}

static cpht_status
take_status(CphtTableRef *t, const CphtReply *rep)
{
	if (rep->table_bytes != 0)
		t->slot_bytes = rep->table_bytes;
	if (rep->status != CPHT_OK)
		strlcpy(t->error, rep->message, sizeof(t->error));
	return rep->status;
}

static bool
worker_lost(const CphtTableRef *t)
{
	return !alive(t, NULL, 0);
}

static cpht_status
worker_create(const cpht_params *params, bool logging, CphtTableRef *t, char *errbuf,
			  size_t errlen)
{
	CphtRequest *req;
	CphtReply  *rep;
	uint64		generation;

	(void) cpht_client_gpu(NULL, 0, &generation);
	req = cpht_client_request();
	req->op = CPHT_OP_PRIVATE_CREATE;
	req->private_table = true;
	req->params = *params;
	req->logging = logging;
	/* a GPU table's transfer buffers count against cpht.max_memory, as
	 * they do for a table in the backend */
	req->memory_budget = cpht_memory_budget();
	rep = cpht_client_send();
	if (rep->status != CPHT_OK)
	{
		strlcpy(errbuf, rep->message, errlen);
		return rep->status;
	}
	t->remote_id = rep->table_id;
	t->generation = generation;
	t->slot_bytes = rep->table_bytes;
	account(t, rep->memory_delta);
	return CPHT_OK;
}

static void
worker_destroy(CphtTableRef *t)
{
	/* its bytes are no longer this session's, whatever happens next */
	cpht_memory_worker_delta(-t->memory);
	t->memory = 0;
	/* A lost table has nothing left to free; at exit the worker frees it. */
	if (!cpht_client_can_send() || !alive(t, NULL, 0))
		return;
	PG_TRY();
	{
		(void) cpht_remote_private(CPHT_OP_PRIVATE_DROP, t->remote_id, PG_UINT64_MAX, 0);
	}
	PG_CATCH();
	{
		/* freed by the worker when it restarts or the backend exits */
		EmitErrorReport();
		FlushErrorState();
	}
	PG_END_TRY();
}

static cpht_status
worker_call(CphtTableRef *t, CphtCall call, const uint64 *keys, size_t n, uint8 *status,
			uint64 *value)
{
	CphtReply	rep;
	uint64		v;

	check_alive(t);
	v = cpht_remote_private_call(t->remote_id, cpht_memory_budget(), call, keys, n, status, &rep);
	account(t, rep.memory_delta);
	t->times = rep.times;
	if (value)
		*value = rep.status == CPHT_OK ? v : 0;
	return take_status(t, &rep);
}

static uint64
worker_count(CphtTableRef *t)
{
	check_alive(t);
	return cpht_remote_private(CPHT_OP_COUNT, t->remote_id, PG_UINT64_MAX, 0)->value;
}

static cpht_status
worker_rebuild(CphtTableRef *t, uint64 *removed)
{
	CphtReply  *rep;

	check_alive(t);
	rep = cpht_remote_private(CPHT_OP_REBUILD, t->remote_id, cpht_memory_budget(), 0);
	account(t, rep->memory_delta);
	*removed = rep->status == CPHT_OK ? rep->value : 0;
	return take_status(t, rep);
}

static cpht_status
worker_stats(CphtTableRef *t, cpht_stats *out)
{
	CphtReply  *rep;

	check_alive(t);
	rep = cpht_remote_private(CPHT_OP_STATS, t->remote_id, PG_UINT64_MAX, 0);
	*out = rep->stats;
	return take_status(t, rep);
}

static cpht_status
worker_scan(CphtTableRef *t, uint64 *position, uint64 *keys, size_t max, CphtScanPiece *piece)
{
	CphtReply	rep;

	check_alive(t);
	cpht_remote_scan(NULL, t->remote_id, *position, keys, max, &rep);
	if (rep.status == CPHT_OK)
	{
		piece->n = rep.value;
		*position = rep.scan_position;
	}
	piece->end = rep.scan_end;
	piece->changes = rep.scan_changes;
	piece->count = rep.scan_count;
	return take_status(t, &rep);
}

static uint64
worker_log_position(CphtTableRef *t)
{
	check_alive(t);
	return cpht_remote_private(CPHT_OP_LOG_POSITION, t->remote_id, PG_UINT64_MAX, 0)->value;
}

/* rollback_to and truncate_log run in transaction callbacks: no ERROR. */
static cpht_status
worker_rollback_to(CphtTableRef *t, uint64 position)
{
	char		reason[CPHT_TEXT_LEN];
	cpht_status st = CPHT_ERR_DEVICE;
	MemoryContext cxt = CurrentMemoryContext;

	/* An exiting backend's open transaction: the worker frees the table. */
	if (!cpht_client_can_send())
		return CPHT_OK;
	if (!alive(t, reason, sizeof(reason)))
	{
		snprintf(t->error, sizeof(t->error), "it lived in a cpht worker that exited: %s",
				 reason[0] ? reason : "the cpht worker restarted");
		return CPHT_ERR_DEVICE;
	}
	PG_TRY();
	{
		CphtReply  *rep = cpht_remote_private(CPHT_OP_LOG_ROLLBACK_TO, t->remote_id, PG_UINT64_MAX, position);

		account(t, rep->memory_delta);
		st = take_status(t, rep);
	}
	PG_CATCH();
	{
		ErrorData  *ed;

		MemoryContextSwitchTo(cxt);
		ed = CopyErrorData();
		FlushErrorState();
		strlcpy(t->error, ed->message ? ed->message : "the cpht worker failed", sizeof(t->error));
		FreeErrorData(ed);
		st = CPHT_ERR_DEVICE;
	}
	PG_END_TRY();
	return st;
}

static void
worker_truncate_log(CphtTableRef *t, uint64 position)
{
	if (!cpht_client_can_send() || !alive(t, NULL, 0))
		return;
	PG_TRY();
	{
		CphtReply  *rep = cpht_remote_private(CPHT_OP_TRUNCATE_LOG, t->remote_id, PG_UINT64_MAX, position);

		account(t, rep->memory_delta);
	}
	PG_CATCH();
	{
		/* the log stays in the worker; the table's keys are right */
		EmitErrorReport();
		FlushErrorState();
	}
	PG_END_TRY();
}

static uint64
worker_slot_bytes(CphtTableRef *t, uint64 created_bytes)
{
	/* as of its last reply; none yet: what it was created with */
	return t->slot_bytes != 0 ? t->slot_bytes : created_bytes;
}

static const char *
worker_error(const CphtTableRef *t)
{
	return t->error;
}

static void
worker_call_times(const CphtTableRef *t, cpht_call_times *out)
{
	*out = t->times;
}

const CphtTableRoutine cpht_worker_private_routine = {
	.placement = "worker",
	.create = worker_create,
	.destroy = worker_destroy,
	.lost = worker_lost,
	.slot_bytes = worker_slot_bytes,
	.call = worker_call,
	.count = worker_count,
	.rebuild = worker_rebuild,
	.stats = worker_stats,
	.scan = worker_scan,
	.error = worker_error,
	.call_times = worker_call_times,
	.log_position = worker_log_position,
	.rollback_to = worker_rollback_to,
	.truncate_log = worker_truncate_log,
	.stream_open = cpht_call_stream_open,
	.stream_start = cpht_call_stream_start,
	.stream_finish = cpht_call_stream_finish,
	.stream_close = cpht_call_stream_close,
};
