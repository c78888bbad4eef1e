/*
 * shared_table.c — the placement of a shared table, held by the cpht
 * worker for every session that opens it by name.
 *
 * Every operation first checks this session's handle of the table
 * (cpht_shared_ref, cpht_shared_call of session/shared_handles.c): that it
 * was not dropped, that the worker holding it still runs, that the role
 * may use it.  Those checks and the worker's answers raise their own
 * errors, as shared tables always did, so the operations here return only
 * CPHT_OK.  This is why tableref/ includes session/session.h
 * (docs/layout.md lists it among the known exceptions to the layers).
 *
 * A shared table's transactions are kept by the cpht worker (worker/
 * xacts.c), not by this session's savepoints: session/txn.c never asks for
 * its undo log, and the log entries below only refuse.
 */
#include "postgres.h"

#include "tableref/tableref_internal.h"
#include "client/client.h"
#include "errors.h"
#include "session/session.h"

static cpht_status
shared_create(const cpht_params *params, bool logging, CphtTableRef *t, char *errbuf,
			  size_t errlen)
{
	/* opened by cpht_tableref_shared, never created here */
	elog(ERROR, "a shared cpht table is not created through its placement");
	pg_unreachable();
}

static void
shared_destroy(CphtTableRef *t)
{
	/* the worker holds the table; this session forgets only its handle */
}

static bool
shared_lost(const CphtTableRef *t)
{
	/* a lost shared table is reported by the handle's check, at its use */
	return false;
}

static uint64
shared_slot_bytes(CphtTableRef *t, uint64 created_bytes)
{
	return created_bytes;
}

/* A batch call: checked and raised by session/shared_handles.c. */
static cpht_status
shared_call(CphtTableRef *t, CphtCall call, const uint64 *keys, size_t n, uint8 *status,
			uint64 *value)
{
	uint64		v = cpht_shared_call(t->handle, call, keys, n, status);

	/* where the worker's time went, for cpht.trace */
	cpht_remote_last_times(&t->times);
	if (value)
		*value = v;
	return CPHT_OK;
}

static uint64
shared_count(CphtTableRef *t)
{
	CphtSharedRef ref = cpht_shared_ref(t->handle, NULL, NULL);

	return cpht_remote_count(&ref);
}

static cpht_status
shared_rebuild(CphtTableRef *t, uint64 *removed)
{
	CphtSharedRef ref = cpht_shared_ref(t->handle, NULL, NULL);

	*removed = cpht_remote_rebuild(&ref, t->handle);
	return CPHT_OK;
}

static cpht_status
shared_stats(CphtTableRef *t, cpht_stats *out)
{
	CphtSharedRef ref = cpht_shared_ref(t->handle, NULL, NULL);

	cpht_remote_stats(&ref, t->handle, out);
	return CPHT_OK;
}

static cpht_status
shared_scan(CphtTableRef *t, uint64 *position, uint64 *keys, size_t max, CphtScanPiece *piece)
{
	CphtSharedRef ref = cpht_shared_ref(t->handle, NULL, NULL);
	CphtReply	rep;

	cpht_remote_scan(&ref, 0, *position, keys, max, &rep);
	if (rep.status != CPHT_OK)
		cpht_check_status(rep.status, t->handle, rep.message);
	piece->n = rep.value;
	*position = rep.scan_position;
	piece->end = rep.scan_end;
	piece->changes = rep.scan_changes;
	piece->count = rep.scan_count;
	return CPHT_OK;
}

static const char *
shared_error(const CphtTableRef *t)
{
	return t->error;
}

static void
shared_call_times(const CphtTableRef *t, cpht_call_times *out)
{
	*out = t->times;
}

static uint64
shared_log_position(CphtTableRef *t)
{
	elog(ERROR, "shared cpht table %d has no undo log in this session", t->handle);
	pg_unreachable();
}

/* rollback_to and truncate_log run in transaction callbacks: no ERROR */
static cpht_status
shared_rollback_to(CphtTableRef *t, uint64 position)
{
	strlcpy(t->error, "a shared table has no undo log in this session", sizeof(t->error));
	return CPHT_ERR_INVALID;
}

static void
shared_truncate_log(CphtTableRef *t, uint64 position)
{
}

const CphtTableRoutine cpht_shared_routine = {
	.placement = "worker",
	.create = shared_create,
	.destroy = shared_destroy,
	.lost = shared_lost,
	.slot_bytes = shared_slot_bytes,
	.call = shared_call,
	.count = shared_count,
	.rebuild = shared_rebuild,
	.stats = shared_stats,
	.scan = shared_scan,
	.error = shared_error,
	.call_times = shared_call_times,
	.log_position = shared_log_position,
	.rollback_to = shared_rollback_to,
	.truncate_log = shared_truncate_log,
	.stream_open = cpht_call_stream_open,
	.stream_start = cpht_call_stream_start,
	.stream_finish = cpht_call_stream_finish,
	.stream_close = cpht_call_stream_close,
};
