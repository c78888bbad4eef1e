/*
 * tableref.c — where a new table goes (cpht.device, cpht.placement), and
 * the operations on a table, each a call through the routine of its
 * placement (tableref_internal.h), picked when the table is created or
 * opened.  Nothing here knows how a placement does its work.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/memutils.h"

#include "tableref/tableref_internal.h"
#include "client/client.h"
#include "guc.h"
#include "errors.h"


/*
 * In a backend of a preloaded server, nothing may initialise CUDA: the
 * worker holds the cluster's only context.  A path that would (a GPU table
 * created in the backend, a probe of the GPU) is a bug.
 */
void
cpht_forbid_cuda_here(const char *what)
{
	if (cpht_control != NULL)
		elog(ERROR, "%s in a backend of a server that preloads cpht: only the cpht worker may initialise CUDA",
			 what);
}

cpht_device
cpht_tableref_choose_device(void)
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
		cpht_forbid_cuda_here("probing the GPU");
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
cpht_tableref_gpu_room(int *count, uint64 *free_bytes)
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
cpht_tableref_in_worker(const cpht_params *params)
{
	return cpht_control != NULL &&
		(params->device == CPHT_DEVICE_GPU || cpht_placement_setting == CPHT_PLACEMENT_WORKER);
}

cpht_status
cpht_tableref_create(const cpht_params *params, bool in_worker, bool logging,
					 CphtTableRef **out, char *errbuf, size_t errlen)
{
	CphtTableRef *t = MemoryContextAllocZero(TopMemoryContext, sizeof(CphtTableRef));
	cpht_status st;

	*out = NULL;
	t->ops = in_worker ? &cpht_worker_private_routine : &cpht_local_routine;
	PG_TRY();
	{
		st = t->ops->create(params, logging, t, errbuf, errlen);
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
cpht_tableref_set_handle(CphtTableRef *t, int32 handle)
{
	t->handle = handle;
}

void
cpht_tableref_destroy(CphtTableRef *t)
{
	if (t == NULL)
		return;
	t->ops->destroy(t);
	pfree(t);
}

const char *
cpht_tableref_placement(const CphtTableRef *t)
{
	return t->ops->placement;
}

uint64
cpht_tableref_slot_bytes(CphtTableRef *t, uint64 created_bytes)
{
	return t->ops->slot_bytes(t, created_bytes);
}

bool
cpht_tableref_lost(const CphtTableRef *t)
{
	return t->ops->lost(t);
}

cpht_status
cpht_tableref_find_or_put(CphtTableRef *t, const uint64 *keys, size_t n, uint8 *status)
{
	return t->ops->call(t, CPHT_CALL_FOP, keys, n, status, NULL);
}

cpht_status
cpht_tableref_find(CphtTableRef *t, const uint64 *keys, size_t n, uint8 *found)
{
	return t->ops->call(t, CPHT_CALL_FIND, keys, n, found, NULL);
}

cpht_status
cpht_tableref_put(CphtTableRef *t, const uint64 *keys, size_t n, uint64 *inserted)
{
	return t->ops->call(t, CPHT_CALL_PUT, keys, n, NULL, inserted);
}

cpht_status
cpht_tableref_erase(CphtTableRef *t, const uint64 *keys, size_t n, uint8 *present)
{
	return t->ops->call(t, CPHT_CALL_ERASE, keys, n, present, NULL);
}

uint64
cpht_tableref_count(CphtTableRef *t)
{
	return t->ops->count(t);
}

cpht_status
cpht_tableref_rebuild(CphtTableRef *t, uint64 *removed)
{
	*removed = 0;
	return t->ops->rebuild(t, removed);
}

cpht_status
cpht_tableref_stats(CphtTableRef *t, cpht_stats *out)
{
	return t->ops->stats(t, out);
}

cpht_status
cpht_tableref_scan(CphtTableRef *t, uint64 *position, uint64 *keys, size_t max,
				   CphtScanPiece *piece)
{
	memset(piece, 0, sizeof(*piece));
	return t->ops->scan(t, position, keys, max, piece);
}

const char *
cpht_tableref_error(const CphtTableRef *t)
{
	return t->ops->error(t);
}

void
cpht_tableref_call_times(const CphtTableRef *t, cpht_call_times *out)
{
	t->ops->call_times(t, out);
}

uint64
cpht_tableref_log_position(CphtTableRef *t)
{
	return t->ops->log_position(t);
}

cpht_status
cpht_tableref_rollback_to(CphtTableRef *t, uint64 position)
{
	return t->ops->rollback_to(t, position);
}

void
cpht_tableref_truncate_log(CphtTableRef *t, uint64 position)
{
	t->ops->truncate_log(t, position);
}

/* ---- streams ------------------------------------------------------------ */

CphtTableRefStream *
cpht_tableref_stream_open(CphtTableRef *t)
{
	CphtTableRefStream *s = calloc(1, sizeof(CphtTableRefStream));

	if (s == NULL)
		return NULL;
	s->table = t;
	if (!t->ops->stream_open(s))
	{
		free(s);
		return NULL;
	}
	return s;
}

cpht_status
cpht_tableref_stream_start(CphtTableRefStream *s, const uint64 *keys, size_t n)
{
	return s->table->ops->stream_start(s, keys, n);
}

cpht_status
cpht_tableref_stream_finish(CphtTableRefStream *s, const uint8 **status, size_t *n, uint64 *inserted)
{
	return s->table->ops->stream_finish(s, status, n, inserted);
}

void
cpht_tableref_stream_close(CphtTableRefStream *s)
{
	if (s == NULL)
		return;
	s->table->ops->stream_close(s);
	free(s);
}
