/*
 * local.c — the placement of a table in this backend: every operation is a
 * call of the kernels (cpht_table.h) on the table this backend holds.
 *
 * The kernels return their status and keep the message of a failed call,
 * which cpht_tableref_error() hands on; nothing here raises but the refusal
 * to create a GPU table in a backend of a server that preloads cpht (only
 * the cpht worker may initialise CUDA).  The kernels count their own
 * memory against cpht.max_memory (memcap.c).
 */
#include "postgres.h"

#include "tableref/tableref_internal.h"

static cpht_status
local_create(const cpht_params *params, bool logging, CphtTableRef *t, char *errbuf,
			 size_t errlen)
{
	cpht_status st;

	if (params->device == CPHT_DEVICE_GPU)
		cpht_forbid_cuda_here("creating a GPU table");
	st = cpht_table_create(params, &t->local, errbuf, errlen);
	if (st == CPHT_OK)
		cpht_table_set_logging(t->local, logging);
	return st;
}

static void
local_destroy(CphtTableRef *t)
{
	cpht_table_destroy(t->local);
}

static bool
local_lost(const CphtTableRef *t)
{
	/* this backend holds it as long as it runs */
	return false;
}

static uint64
local_slot_bytes(CphtTableRef *t, uint64 created_bytes)
{
	return cpht_table_slot_bytes(t->local);
}

static cpht_status
local_call(CphtTableRef *t, CphtCall call, const uint64 *keys, size_t n, uint8 *status,
		   uint64 *value)
{
	switch (call)
	{
		case CPHT_CALL_FOP:
			return cpht_table_find_or_put(t->local, keys, n, status);
		case CPHT_CALL_FIND:
			return cpht_table_find(t->local, keys, n, status);
		case CPHT_CALL_PUT:
			return cpht_table_put(t->local, keys, n, value);
		case CPHT_CALL_ERASE:
			return cpht_table_erase(t->local, keys, n, status);
	}
	elog(ERROR, "unknown cpht call %d", (int) call);
	pg_unreachable();
}

static uint64
local_count(CphtTableRef *t)
{
	return cpht_table_count(t->local);
}

static cpht_status
local_rebuild(CphtTableRef *t, uint64 *removed)
{
	cpht_stats	before;
	cpht_status st;

	st = cpht_table_stats(t->local, &before);
	if (st != CPHT_OK)
		return st;
	st = cpht_table_rebuild(t->local);
	if (st == CPHT_OK)
		*removed = before.tombstones[0] + before.tombstones[1];
	return st;
}

static cpht_status
local_stats(CphtTableRef *t, cpht_stats *out)
{
	return cpht_table_stats(t->local, out);
}

static cpht_status
local_scan(CphtTableRef *t, uint64 *position, uint64 *keys, size_t max, CphtScanPiece *piece)
{
	cpht_status st;

	st = cpht_table_scan_keys(t->local, position, keys, max, &piece->n);
	piece->end = cpht_table_scan_end(t->local);
	piece->changes = cpht_table_changes(t->local);
	piece->count = cpht_table_count(t->local);
	return st;
}

static const char *
local_error(const CphtTableRef *t)
{
	return cpht_table_error(t->local);
}

static void
local_call_times(const CphtTableRef *t, cpht_call_times *out)
{
	cpht_table_call_times(t->local, out);
}

static uint64
local_log_position(CphtTableRef *t)
{
	return cpht_table_log_position(t->local);
}

static cpht_status
local_rollback_to(CphtTableRef *t, uint64 position)
{
	return cpht_table_rollback_to(t->local, position);
}

static void
local_truncate_log(CphtTableRef *t, uint64 position)
{
	cpht_table_truncate_log(t->local, position);
}

/* The kernels' own stream: a batch runs while the caller reads the next. */
static bool
local_stream_open(CphtTableRefStream *s)
{
	s->local = cpht_stream_open(s->table->local);
	return s->local != NULL;
}

static cpht_status
local_stream_start(CphtTableRefStream *s, const uint64 *keys, size_t n)
{
	return cpht_stream_start(s->local, keys, n);
}

static cpht_status
local_stream_finish(CphtTableRefStream *s, const uint8 **status, size_t *n, uint64 *inserted)
{
	return cpht_stream_finish(s->local, status, n, inserted);
}

static void
local_stream_close(CphtTableRefStream *s)
{
	cpht_stream_close(s->local);
}

const CphtTableRoutine cpht_local_routine = {
	.placement = "backend",
	.create = local_create,
	.destroy = local_destroy,
	.lost = local_lost,
	.slot_bytes = local_slot_bytes,
	.call = local_call,
	.count = local_count,
	.rebuild = local_rebuild,
	.stats = local_stats,
	.scan = local_scan,
	.error = local_error,
	.call_times = local_call_times,
	.log_position = local_log_position,
	.rollback_to = local_rollback_to,
	.truncate_log = local_truncate_log,
	.stream_open = local_stream_open,
	.stream_start = local_stream_start,
	.stream_finish = local_stream_finish,
	.stream_close = local_stream_close,
};
