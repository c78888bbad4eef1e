/*
 * tableref.c — the operations on a session's private table, dispatched to
 * the kernels in this backend or to worker_private.c; and where a new table
 * goes (cpht.device, cpht.placement).
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/memutils.h"

#include "tableref/tableref_internal.h"
#include "client/client.h"
#include "guc.h"
#include "errors.h"
#include "session/session.h"


/*
 * In a backend of a preloaded server, nothing may initialise CUDA: the
 * worker holds the cluster's only context.  A path that would (a GPU table
 * created in the backend, a probe of the GPU) is a bug.
 */
static void
forbid_cuda_here(const char *what)
{
	if (cpht_control != NULL)
		elog(ERROR, "%s in a backend of a server that preloads cpht: only the cpht worker may initialise CUDA",
			 what);
}

cpht_device
cpht_access_choose_device(void)
{
	char		reason[CPHT_TEXT_LEN];

	if (cpht_device_setting == CPHT_SETTING_CPU)
		return CPHT_DEVICE_CPU;

	reason[0] = '\0';
	if (cpht_control != NULL)
	{
		char		why[CPHT_TEXT_LEN];

		/* the worker probed the GPU when it started */
		if (cpht_client_gpu(why, sizeof(why), NULL) == CPHT_GPU_USABLE)
			return CPHT_DEVICE_GPU;
		snprintf(reason, sizeof(reason), "the cpht worker has no usable GPU: %s", why);
	}
	else
	{
		/* cpht_gpu_usable() initialises CUDA in this backend */
		forbid_cuda_here("probing the GPU");
		if (!cpht_gpu_built())
			strlcpy(reason, "this build of cpht has no GPU support", sizeof(reason));
		else if (cpht_gpu_usable(reason, sizeof(reason)))
			return CPHT_DEVICE_GPU;
	}
	if (cpht_device_setting == CPHT_SETTING_AUTO)
		return CPHT_DEVICE_CPU;
	cpht_check_status(CPHT_ERR_NODEVICE, 0, reason);
	pg_unreachable();
}

void
cpht_access_gpu_room(int *count, uint64 *free_bytes)
{
	char		name[CPHT_TEXT_LEN];
	uint64		total = 0;

	*free_bytes = 0;
	if (cpht_control != NULL)
	{
		cpht_client_gpu_room(count, free_bytes);
		return;
	}
	/* this backend initialised CUDA when it chose the GPU */
	*count = cpht_gpu_count();
	if (!cpht_gpu_info(name, sizeof(name), free_bytes, &total))
		*count = 0;
}

bool
cpht_access_in_worker(const cpht_params *params)
{
	return cpht_control != NULL &&
		(params->device == CPHT_DEVICE_GPU || cpht_placement_setting == CPHT_PLACEMENT_WORKER);
}

cpht_status
cpht_access_create(const cpht_params *params, bool in_worker, bool logging,
				   CphtTable **out, char *errbuf, size_t errlen)
{
	CphtTable  *t = MemoryContextAllocZero(TopMemoryContext, sizeof(CphtTable));
	cpht_status st;

	*out = NULL;
	PG_TRY();
	{
		if (in_worker)
			st = cpht_worker_table_create(params, logging, t, errbuf, errlen);
		else
		{
			if (params->device == CPHT_DEVICE_GPU)
				forbid_cuda_here("creating a GPU table");
			st = cpht_table_create(params, &t->local, errbuf, errlen);
			if (st == CPHT_OK)
				cpht_table_set_logging(t->local, logging);
		}
	}
	PG_CATCH();
	{
		pfree(t);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (st != CPHT_OK)
	{
		pfree(t);
		return st;
	}
	*out = t;
	return CPHT_OK;
}

void
cpht_access_set_handle(CphtTable *t, int32 handle)
{
	t->handle = handle;
}

CphtTable *
cpht_access_shared(int32 handle)
{
	CphtTable  *t = MemoryContextAllocZero(TopMemoryContext, sizeof(CphtTable));

	t->shared = true;
	t->handle = handle;
	return t;
}

/* A batch call on a shared table: checked and raised by session/shared_handles.c. */
static cpht_status
shared_call(CphtTable *t, CphtCall call, const uint64 *keys, size_t n, uint8 *status,
			uint64 *value)
{
	uint64		v = cpht_shared_call(t->handle, call, keys, n, status);

	/* where the worker's time went, for cpht.trace */
	cpht_remote_last_times(&t->times);
	if (value)
		*value = v;
	return CPHT_OK;
}

void
cpht_access_destroy(CphtTable *t)
{
	if (t == NULL)
		return;
	if (t->local)
		cpht_table_destroy(t->local);
	else
		cpht_worker_table_destroy(t);
	pfree(t);
}

const char *
cpht_access_placement(const CphtTable *t)
{
	return t->local ? "backend" : "worker";
}

uint64
cpht_access_slot_bytes(CphtTable *t, uint64 created_bytes)
{
	if (t->local)
		return cpht_table_slot_bytes(t->local);
	return t->slot_bytes != 0 ? t->slot_bytes : created_bytes;
}

bool
cpht_access_lost(const CphtTable *t)
{
	return !t->local && !t->shared && cpht_worker_table_lost(t);
}

cpht_status
cpht_access_find_or_put(CphtTable *t, const uint64 *keys, size_t n, uint8 *status)
{
	if (t->local)
		return cpht_table_find_or_put(t->local, keys, n, status);
	if (t->shared)
		return shared_call(t, CPHT_CALL_FOP, keys, n, status, NULL);
	return cpht_worker_table_call(t, CPHT_CALL_FOP, keys, n, status, NULL);
}

cpht_status
cpht_access_find(CphtTable *t, const uint64 *keys, size_t n, uint8 *found)
{
	if (t->local)
		return cpht_table_find(t->local, keys, n, found);
	if (t->shared)
		return shared_call(t, CPHT_CALL_FIND, keys, n, found, NULL);
	return cpht_worker_table_call(t, CPHT_CALL_FIND, keys, n, found, NULL);
}

cpht_status
cpht_access_put(CphtTable *t, const uint64 *keys, size_t n, uint64 *inserted)
{
	if (t->local)
		return cpht_table_put(t->local, keys, n, inserted);
	if (t->shared)
		return shared_call(t, CPHT_CALL_PUT, keys, n, NULL, inserted);
	return cpht_worker_table_call(t, CPHT_CALL_PUT, keys, n, NULL, inserted);
}

cpht_status
cpht_access_erase(CphtTable *t, const uint64 *keys, size_t n, uint8 *present)
{
	if (t->local)
		return cpht_table_erase(t->local, keys, n, present);
	if (t->shared)
		return shared_call(t, CPHT_CALL_ERASE, keys, n, present, NULL);
	return cpht_worker_table_call(t, CPHT_CALL_ERASE, keys, n, present, NULL);
}

uint64
cpht_access_count(CphtTable *t)
{
	if (t->shared)
	{
		CphtSharedRef ref = cpht_shared_ref(t->handle, NULL, NULL);

		return cpht_remote_count(&ref);
	}
	return t->local ? cpht_table_count(t->local) : cpht_worker_table_count(t);
}

cpht_status
cpht_access_rebuild(CphtTable *t, uint64 *removed)
{
	cpht_stats	before;
	cpht_status st;

	*removed = 0;
	if (t->shared)
	{
		CphtSharedRef ref = cpht_shared_ref(t->handle, NULL, NULL);

		*removed = cpht_remote_rebuild(&ref, t->handle);
		return CPHT_OK;
	}
	if (!t->local)
		return cpht_worker_table_rebuild(t, removed);
	st = cpht_table_stats(t->local, &before);
	if (st != CPHT_OK)
		return st;
	st = cpht_table_rebuild(t->local);
	if (st == CPHT_OK)
		*removed = before.tombstones[0] + before.tombstones[1];
	return st;
}

cpht_status
cpht_access_stats(CphtTable *t, cpht_stats *out)
{
	if (t->shared)
	{
		CphtSharedRef ref = cpht_shared_ref(t->handle, NULL, NULL);

		cpht_remote_stats(&ref, t->handle, out);
		return CPHT_OK;
	}
	return t->local ? cpht_table_stats(t->local, out) : cpht_worker_table_stats(t, out);
}

cpht_status
cpht_access_scan(CphtTable *t, uint64 *position, uint64 *keys, size_t max,
				 CphtScanPiece *piece)
{
	cpht_status st;

	memset(piece, 0, sizeof(*piece));
	if (t->local)
	{
		st = cpht_table_scan_keys(t->local, position, keys, max, &piece->n);
		piece->end = cpht_table_scan_end(t->local);
		piece->changes = cpht_table_changes(t->local);
		piece->count = cpht_table_count(t->local);
		return st;
	}
	if (t->shared)
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
	return cpht_worker_table_scan(t, position, keys, max, piece);
}

const char *
cpht_access_error(const CphtTable *t)
{
	return t->local ? cpht_table_error(t->local) : t->error;
}

void
cpht_access_call_times(const CphtTable *t, cpht_call_times *out)
{
	if (t->local)
		cpht_table_call_times(t->local, out);
	else
		*out = t->times;
}

/* A shared table's transactions are kept by the cpht worker (worker/
 * xacts.c), not by this session's savepoints, so the undo log operations
 * below are never called for one. */

uint64
cpht_access_log_position(CphtTable *t)
{
	Assert(!t->shared);
	return t->local ? cpht_table_log_position(t->local) : cpht_worker_table_log_position(t);
}

cpht_status
cpht_access_rollback_to(CphtTable *t, uint64 position)
{
	return t->local ? cpht_table_rollback_to(t->local, position) :
		cpht_worker_table_rollback_to(t, position);
}

void
cpht_access_truncate_log(CphtTable *t, uint64 position)
{
	if (t->local)
		cpht_table_truncate_log(t->local, position);
	else
		cpht_worker_table_truncate_log(t, position);
}

/* ---- streams ------------------------------------------------------------ */

CphtAccessStream *
cpht_access_stream_open(CphtTable *t)
{
	CphtAccessStream *s = calloc(1, sizeof(CphtAccessStream));

	if (s == NULL)
		return NULL;
	s->table = t;
	if (t->local)
	{
		s->local = cpht_stream_open(t->local);
		if (s->local == NULL)
		{
			free(s);
			return NULL;
		}
	}
	return s;
}

cpht_status
cpht_access_stream_start(CphtAccessStream *s, const uint64 *keys, size_t n)
{
	int			b;
	cpht_status st;

	if (s->local)
		return cpht_stream_start(s->local, keys, n);

	/* the buffer not handed out at the last finish */
	b = 1 - s->ready;
	if (s->cap[b] < n)
	{
		uint8	   *grown = realloc(s->status[b], n);

		if (grown == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory")));
		s->status[b] = grown;
		s->cap[b] = n;
	}
	st = s->table->shared ?
		shared_call(s->table, CPHT_CALL_FOP, keys, n, s->status[b], NULL) :
		cpht_worker_table_call(s->table, CPHT_CALL_FOP, keys, n, s->status[b], NULL);
	if (st != CPHT_OK)
		return st;
	s->inserted = 0;
	for (size_t i = 0; i < n; i++)
		s->inserted += s->status[b][i];
	s->ready = b;
	s->n = n;
	s->pending = true;
	return CPHT_OK;
}

cpht_status
cpht_access_stream_finish(CphtAccessStream *s, const uint8 **status, size_t *n, uint64 *inserted)
{
	if (s->local)
		return cpht_stream_finish(s->local, status, n, inserted);
	*status = s->pending ? s->status[s->ready] : NULL;
	*n = s->pending ? s->n : 0;
	*inserted = s->pending ? s->inserted : 0;
	s->pending = false;
	return CPHT_OK;
}

void
cpht_access_stream_close(CphtAccessStream *s)
{
	if (s == NULL)
		return;
	if (s->local)
		cpht_stream_close(s->local);
	free(s->status[0]);
	free(s->status[1]);
	free(s);
}
