/*
 * batches.c — the stream of batches: find-or-put over any number of rows.
 *
 * An array is limited to about 2^26 bigints (array_agg's state passes the
 * 1 GB allocation limit while doubling), so large ingests stream instead,
 * through a CphtBatchStream: the aggregates cpht_fop_agg (fop_agg.c) and
 * cpht_fop_new_agg (fop_new_agg.c), the set-returning cpht_fop_rows
 * (api/fop_rows.c), and a relation's key column (relfeed.c).
 *
 * The stream overlaps the table's work with the executor: batch k runs on a
 * helper thread (and on the GPU for GPU tables) while batch k+1 is collected
 * (the kernels' cpht_stream_start / cpht_stream_finish); a table in the
 * cpht worker or a shared table runs each batch when it is handed over
 * instead (tableref/call_stream.c).  The stream copies each batch, so a
 * batch in flight never points into memory the executor frees on an error;
 * the next call on the table waits for it.
 *
 * Settings are read once, when a stream opens: a query may change them
 * while it runs, and every buffer is sized from the values read then.
 */
#include "postgres.h"

#include <limits.h>

#include "fmgr.h"
#include "access/parallel.h"
#include "portability/instr_time.h"
#include "utils/guc.h"

#include "guc.h"
#include "cpht_table.h"
#include "client/client.h"
#include "errors.h"
#include "session/session.h"
#include "memcap.h"
#include "stream/stream.h"

void
cpht_check_key(uint64 key, int key_bits)
{
	if (key_bits > 0 && key_bits < 64 && (key >> key_bits) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("key " INT64_FORMAT " is out of range for a table with key_bits %d",
						(int64) key, key_bits),
				 errhint("Create the table with a larger key_bits.")));
}

/*
 * The kernels' stream object is malloc'ed and a helper thread may still be
 * working on its buffers when an ERROR unwinds the statement, so it is
 * closed by a callback of the memory context the caller's state lives in:
 * whether the statement ends normally or by an error, the batch is waited
 * for, the buffers freed and their bytes released from cpht.max_memory.
 */
static void
stream_close_callback(void *arg)
{
	CphtBatchStream *st = arg;

	if (st->stream != NULL)
		cpht_tableref_stream_close(st->stream);
	st->stream = NULL;
	cpht_memory_release(st->reserved);
	st->reserved = 0;
}

CphtBatchStream *
cpht_batch_stream_begin(MemoryContext cxt, int32 handle, uint64 caller_bytes_per_key)
{
	CphtBatchStream *st = MemoryContextAllocZero(cxt, sizeof(CphtBatchStream));
	CphtHandleEntry *h;
	uint64		bytes;

	/* a parallel worker reaches the leader's shared table by its handle */
	if (IsParallelWorker())
		cpht_parallel_adopt_handle(handle);
	h = cpht_handles_use(handle);

	st->handle = h->handle;
	st->key_bits = h->key_bits;
	cpht_remote_window_split(st->window_split_at_begin);
	st->batch_keys = cpht_batch_size;
	st->batch_bytes = (uint64) cpht_batch_memory_kb * 1024;

	/*
	 * The kernels' stream keeps two batches (one running, one whose result
	 * is being read) of keys and one status byte per key, next to what the
	 * caller holds.
	 */
	bytes = (uint64) st->batch_keys * (caller_bytes_per_key + 2 * (sizeof(uint64) + 1));
	cpht_memory_reserve(bytes, "cpht stream buffer");
	st->reserved = bytes;
	st->closer.func = stream_close_callback;
	st->closer.arg = st;
	MemoryContextRegisterResetCallback(cxt, &st->closer);

	st->stream = cpht_tableref_stream_open(cpht_handle_table(h));
	if (st->stream == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	return st;
}

void
cpht_batch_stream_reserve(CphtBatchStream *st, uint64 bytes, const char *what)
{
	cpht_memory_reserve(bytes, what);
	st->reserved += bytes;
}

void
cpht_batch_stream_release(CphtBatchStream *st, uint64 bytes)
{
	Assert(bytes <= st->reserved);
	cpht_memory_release(bytes);
	st->reserved -= bytes;
}

/* every stream's batches in this backend (cpht_batch_stream_totals) */
static CphtBatchStreamTotals totals;

void
cpht_batch_stream_totals(CphtBatchStreamTotals *out)
{
	*out = totals;
}

uint64
cpht_batch_stream_swap(CphtBatchStream *st, const uint64 *keys, int n, const uint8 **status, size_t *nstatus)
{
	CphtHandleEntry *h;
	uint64		inserted = 0;
	const uint8 *done;
	size_t		got;
	instr_time	start,
				mark;

	/* No batch may pass the buffers sized when the stream began. */
	if (n < 0 || n > st->batch_keys)
		elog(ERROR, "cpht stream batch of %d keys exceeds its %d-key buffers", n, st->batch_keys);
	h = cpht_handles_use(st->handle);
	cpht_txn_before_write(h);
	cpht_memory_sync();
	INSTR_TIME_SET_CURRENT(start);
	cpht_check_status(cpht_tableref_stream_finish(st->stream, &done, &got, &inserted),
					  st->handle, cpht_tableref_error(cpht_handle_table(h)));
	INSTR_TIME_SET_CURRENT(mark);
	INSTR_TIME_SUBTRACT(mark, start);
	st->wait_ms += INSTR_TIME_GET_MILLISEC(mark);
	if (got > 0)
	{
		cpht_call_times one;

		/* the table's last call is the batch just collected */
		cpht_tableref_call_times(cpht_handle_table(h), &one);
		cpht_call_times_add(&st->times, &one);
		st->batches++;
		st->keys += got;
		/* cpht_stat_progress, when this call reports one */
		cpht_progress_sent(got, inserted);
		totals.keys += got;
		totals.new_keys += inserted;
		totals.table_ms += one.total;
	}
	if (status)
	{
		*status = done;
		*nstatus = got;
	}
	if (n > 0)
	{
		INSTR_TIME_SET_CURRENT(start);
		cpht_check_status(cpht_tableref_stream_start(st->stream, keys, (size_t) n),
						  st->handle, cpht_tableref_error(cpht_handle_table(h)));
		INSTR_TIME_SET_CURRENT(mark);
		INSTR_TIME_SUBTRACT(mark, start);
		st->hand_over_ms += INSTR_TIME_GET_MILLISEC(mark);
	}
	return inserted;
}

void
cpht_batch_stream_report(CphtBatchStream *st, const char *fn)
{
	const cpht_call_times *t = &st->times;
	double		split[CPHT_WINDOW_SPLIT_PARTS];
	char		shared[384] = "";

	if (!cpht_trace || st->batches == 0)
		return;
	/* a table in the cpht worker: this process's side of the hand-over */
	cpht_remote_window_split(split);
	for (int i = 0; i < CPHT_WINDOW_SPLIT_PARTS; i++)
		split[i] -= st->window_split_at_begin[i];
	if (split[0] + split[1] + split[2] + split[3] > 0)
		snprintf(shared, sizeof(shared),
				 "  Of the hand-over: waiting for a transfer window %.3f ms, keys into it %.3f ms, waiting for the worker %.3f ms, statuses out %.3f ms.  The worker spent %.3f ms on these batches, %.3f ms of it on their transaction's bookkeeping.",
				 split[0], split[1], split[2], split[3], split[4], split[5]);
	ereport(NOTICE,
			(errmsg("%s: " UINT64_FORMAT " keys in " UINT64_FORMAT " batches: table calls %.3f ms",
					fn, st->keys, st->batches, t->total),
			 errdetail_internal("%s  This process handed the batches over in %.3f ms and waited %.3f ms for their answers.%s",
								cpht_call_times_sentence(t, true),
								st->hand_over_ms, st->wait_ms, shared)));
}
