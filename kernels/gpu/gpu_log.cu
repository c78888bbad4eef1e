/*
 * gpu_log.cu — the undo log of a GPU table, kept in device memory, and the
 * tally of a batch's results.
 *
 * After each chunk's kernels, one more kernel reads the chunk's result
 * bytes: it counts the keys the chunk inserted (or removed) and the keys
 * that found no slot, and, for a transactional table, appends the inserted
 * (removed) keys to the log array.  So neither the result bytes nor the
 * log pass through host code: a 50-million-key ingest logs 400 MB without
 * a transfer.  Within one call's run the order of entries does not matter
 * (every entry of a run is undone the same way), so the kernel appends
 * with one atomic per warp, in any order.
 *
 * The log array grows like a vector (table_log.c decides the capacity): a new
 * cudaMalloc, a device-to-device copy, the old one freed.  Growing it is
 * the one device allocation that happens in the middle of a large call; if
 * it fails, the table layer undoes the chunks already done.
 */
#include "gpu/gpu_ops.h"

/* counters[0]: keys whose result is `hit` (CPHT_WHERE(0, 0): any place
 * code, for an erase); counters[1]: CPHT_FULL. */
__global__ static void
tally_kernel(const uint64_t *keys, const uint8_t *out, uint32_t n, uint8_t hit,
			 uint64_t *log, unsigned long long *counters)
{
	const unsigned lane = threadIdx.x & 31;
	const size_t stride = (size_t) gridDim.x * blockDim.x;
	/* Whole warps iterate together (ballots need every lane): the bound
	 * is n rounded up to a multiple of 32, the same for all lanes. */
	const size_t bound = ((size_t) n + 31) & ~(size_t) 31;

	for (size_t i = (size_t) blockIdx.x * blockDim.x + threadIdx.x; i < bound; i += stride)
	{
		uint8_t		r = i < n ? out[i] : 0xff;
		bool		is_hit = hit == CPHT_WHERE(0, 0) ? i < n && CPHT_IS_WHERE(r) : r == hit;
		GPU_WARP_BALLOT(is_hit);
		unsigned	full = __ballot_sync(0xffffffffu, r == CPHT_FULL);

		/* the hits' count, and with a log the hit keys into it */
		GPU_WARP_APPEND(unsigned long long, &counters[0], is_hit, at,
		{
			if (log != NULL)
				log[at + GPU_WARP_RANK] = keys[i];
		});
		if (lane == 0 && full)
			atomicAdd(&counters[1], (unsigned long long) __popc(full));
	}
}

cpht_status
gpu_tally_reset(cpht_table *t)
{
	gpu_state  *st = gpu_state_of(t);

	GPU_TRY(t, cudaMemsetAsync(st->dtally, 0, 2 * sizeof(unsigned long long), st->comp),
			"clearing counters");
	return CPHT_OK;
}

cpht_status
gpu_tally_chunk(cpht_table *t, const uint64_t *dkeys, const uint8_t *dout, uint32_t n,
				uint8_t hit, uint64_t log_at)
{
	gpu_state  *st = gpu_state_of(t);
	static int	blocks_per_sm = 0;
	uint64_t   *log = NULL;

	if (blocks_per_sm == 0)
		blocks_per_sm = gpu_occupancy(tally_kernel);
	/* Entries go at log_at + (hits counted so far in this call). */
	if (log_at != CPHT_NO_LOG)
		log = (uint64_t *) t->log_store + log_at;
	tally_kernel<<<gpu_grid(st, n, blocks_per_sm), GPU_BLOCK, 0, st->comp>>>
		(dkeys, dout, n, hit, log, st->dtally);
	GPU_LAUNCHED(t, "counting results");
	return CPHT_OK;
}

cpht_status
gpu_tally_read(cpht_table *t, cpht_tally *tally)
{
	gpu_state  *st = gpu_state_of(t);

	GPU_TRY(t, cudaMemcpyAsync(st->pin_tally, st->dtally, 2 * sizeof(unsigned long long),
							   cudaMemcpyDeviceToHost, st->comp), "reading counters");
	GPU_TRY(t, cudaStreamSynchronize(st->comp), "reading counters");
	tally->hits = st->pin_tally[0];
	tally->full = st->pin_tally[1];
	return CPHT_OK;
}

/* ---- the log store (backend entries, see device_ops.h) -------------- */

cpht_status
gpu_log_reserve(cpht_table *t, uint64_t entries, uint64_t keep)
{
	gpu_state  *st = gpu_state_of(t);
	uint64_t   *grown = NULL;
	cudaError_t err;

	GPU_TRY(t, cudaSetDevice(st->device), "selecting the device");
	/* Queued kernels may still append to the old array. */
	GPU_TRY(t, cudaStreamSynchronize(st->comp), "waiting for the table's kernels");
	err = cudaMalloc((void **) &grown, entries * sizeof(uint64_t));
	if (err != cudaSuccess)
	{
		(void) cudaGetLastError();
		return table_fail(t, gpu_status_of(err),
						  "GPU: no room for the undo log (%llu MB of device memory): %s",
						  (unsigned long long) (entries * sizeof(uint64_t) >> 20),
						  cudaGetErrorString(err));
	}
	if (keep > 0)
		err = cudaMemcpyAsync(grown, t->log_store, keep * sizeof(uint64_t),
							  cudaMemcpyDeviceToDevice, st->comp);
	if (err == cudaSuccess)
		err = cudaStreamSynchronize(st->comp);
	if (err != cudaSuccess)
	{
		(void) cudaFree(grown);
		return gpu_fail(t, err, "growing the undo log");
	}
	if (t->log_store)
		(void) cudaFree(t->log_store);
	t->log_store = grown;
	return CPHT_OK;
}

cpht_status
gpu_log_write(cpht_table *t, uint64_t at, const uint64_t *keys, size_t n)
{
	gpu_state  *st = gpu_state_of(t);

	GPU_TRY(t, cudaSetDevice(st->device), "selecting the device");
	/*
	 * On the kernels' stream, waited for: a cudaMemcpy from pageable memory
	 * returns once the keys are staged, before they reach the device, and
	 * the table's other streams do not wait for the legacy stream it runs
	 * on (gpu_download reads the log on one of them).
	 */
	GPU_TRY(t, cudaMemcpyAsync((uint64_t *) t->log_store + at, keys, n * sizeof(uint64_t),
							   cudaMemcpyHostToDevice, st->comp), "writing the undo log");
	GPU_TRY(t, cudaStreamSynchronize(st->comp), "writing the undo log");
	return CPHT_OK;
}

cpht_status
gpu_log_read(cpht_table *t, uint64_t at, size_t n, uint64_t *keys)
{
	/* gpu_download waits for the table's kernels, which write the log */
	return gpu_download(t, keys, (const uint64_t *) t->log_store + at, n * sizeof(uint64_t));
}

void
gpu_log_release(cpht_table *t)
{
	gpu_state  *st = gpu_state_of(t);

	if (t->log_store == NULL)
		return;
	(void) cudaSetDevice(st->device);
	(void) cudaStreamSynchronize(st->comp);
	(void) cudaFree(t->log_store);
	(void) cudaGetLastError();
	t->log_store = NULL;
}
