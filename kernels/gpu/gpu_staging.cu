/*
 * gpu_staging.cu — a GPU table's transfer buffers: two pinned host buffers
 * and two device buffers of one chunk of keys each (and their results),
 * through which the host pipeline (gpu_pipeline.cu) moves a batch, and
 * gpu_download device memory to the host.  Made with the table for
 * batches as large as the table, larger when a batch asks for it and the
 * memory hook (cpht.max_memory) allows, never smaller while the table
 * lives; the find scratch of one chunk goes with them.
 */
#include <string.h>

#include "gpu/gpu_ops.h"

/* Bytes of the transfer buffers for chunks of `chunk` keys: pinned host
 * keys and results, device keys and results, two of each. */
uint64_t
gpu_staging_bytes_for(size_t chunk)
{
	return (uint64_t) chunk * (sizeof(uint64_t) + 1) * 4;
}

/* One set of transfer buffers: two pinned host and two device buffers of
 * one chunk each, for one chunk size. */
typedef struct staging_set
{
	uint64_t   *pin_keys[2];
	uint8_t    *pin_out[2];
	uint64_t   *dkeys[2];
	uint8_t    *dout[2];
} staging_set;

static void
staging_set_free(staging_set *s)
{
	for (int b = 0; b < 2; b++)
	{
		if (s->pin_keys[b])
			(void) cudaFreeHost(s->pin_keys[b]);
		if (s->pin_out[b])
			(void) cudaFreeHost(s->pin_out[b]);
		if (s->dkeys[b])
			(void) cudaFree(s->dkeys[b]);
		if (s->dout[b])
			(void) cudaFree(s->dout[b]);
	}
	memset(s, 0, sizeof(*s));
}

static cudaError_t
staging_set_alloc(staging_set *s, size_t chunk)
{
	cudaError_t err = cudaSuccess;

	memset(s, 0, sizeof(*s));
	for (int b = 0; b < 2 && err == cudaSuccess; b++)
	{
		err = cudaMallocHost((void **) &s->pin_keys[b], chunk * sizeof(uint64_t));
		if (err == cudaSuccess)
			err = cudaMallocHost((void **) &s->pin_out[b], chunk);
		if (err == cudaSuccess)
			err = cudaMalloc((void **) &s->dkeys[b], chunk * sizeof(uint64_t));
		if (err == cudaSuccess)
			err = cudaMalloc((void **) &s->dout[b], chunk);
	}
	if (err != cudaSuccess)
		staging_set_free(s);
	return err;
}

static void
staging_set_of(gpu_state *st, staging_set *s)
{
	for (int b = 0; b < 2; b++)
	{
		s->pin_keys[b] = st->pin_keys[b];
		s->pin_out[b] = st->pin_out[b];
		s->dkeys[b] = st->dkeys[b];
		s->dout[b] = st->dout[b];
	}
}

static void
staging_set_install(gpu_state *st, const staging_set *s, size_t chunk)
{
	for (int b = 0; b < 2; b++)
	{
		st->pin_keys[b] = s->pin_keys[b];
		st->pin_out[b] = s->pin_out[b];
		st->dkeys[b] = s->dkeys[b];
		st->dout[b] = s->dout[b];
	}
	st->chunk_cap = chunk;
}

void
gpu_free_staging(gpu_state *st)
{
	staging_set old;

	table_memory_give(gpu_staging_bytes_for(st->chunk_cap));
	staging_set_of(st, &old);
	staging_set_free(&old);
	staging_set_install(st, &old, 0);
}

/*
 * Chunk buffers for batches of n keys (capped at GPU_CHUNK_KEYS), counted
 * against the memory hook (cpht.max_memory).
 *
 * A table that has buffers keeps them unless the larger ones, and the
 * larger find scratch that goes with them, can be had: then its calls run
 * in smaller chunks.  A call meets the limit where the table itself grows,
 * and above all the undo of a call refused by the limit needs no memory it
 * cannot have (a failed undo loses a shared table).  The hook is asked for
 * the difference, which is kept while the new buffers are made beside the
 * old ones: no other thread (a sharded table's shards run on threads of
 * their own) can take the room between freeing the old and making the new,
 * and a refusal or a device out of memory leaves the old ones in place.
 */
cpht_status
gpu_ensure_staging(cpht_table *t, size_t n)
{
	gpu_state  *st = gpu_state_of(t);
	size_t		want = (size_t) 1 << 16;
	size_t		(*scratch_for) (uint32_t) = gpu_kinds[t->params.kind].find_scratch_bytes;
	uint64_t	more;
	staging_set fresh,
				old;
	cudaError_t err;

	while (want < n && want < GPU_CHUNK_KEYS)
		want <<= 1;
	if (want <= st->chunk_cap)
		return CPHT_OK;
	more = gpu_staging_bytes_for(want) - gpu_staging_bytes_for(st->chunk_cap);
	if (!table_memory_take(more))
	{
		if (st->chunk_cap > 0)
			return CPHT_OK;
		return table_fail(t, CPHT_ERR_LIMIT,
						  "GPU transfer buffers of %llu bytes would pass the memory limit",
						  (unsigned long long) gpu_staging_bytes_for(want));
	}
	if (st->chunk_cap > 0 && scratch_for && scratch_for((uint32_t) want) > st->scratch_cap)
	{
		/* the find scratch of the larger chunk: gpu_scratch_reserve asks
		 * for this much more below */
		size_t		s = scratch_for((uint32_t) want);
		uint64_t	scratch_more = s + s / 8 - st->scratch_cap;

		if (!table_memory_take(scratch_more))
		{
			table_memory_give(more);
			return CPHT_OK;
		}
		table_memory_give(scratch_more);
	}
	err = staging_set_alloc(&fresh, want);
	if (err != cudaSuccess)
	{
		table_memory_give(more);
		if (err == cudaErrorMemoryAllocation && st->chunk_cap > 0)
		{
			(void) cudaGetLastError();
			return CPHT_OK;
		}
		return gpu_fail(t, err, "allocating transfer buffers");
	}
	/* The old buffers may be in use by queued copies. */
	err = cudaDeviceSynchronize();
	if (err != cudaSuccess)
	{
		staging_set_free(&fresh);
		table_memory_give(more);
		return gpu_fail(t, err, "waiting for the device");
	}
	staging_set_of(st, &old);
	staging_set_free(&old);
	staging_set_install(st, &fresh, want);
	/*
	 * With them, the scratch a find of one chunk needs (the iceberg's): a find
	 * then takes no memory of its own, so a table that the memory hook
	 * keeps from growing still answers finds of any size.
	 */
	if (scratch_for)
		return gpu_scratch_reserve(t, scratch_for((uint32_t) want));
	return CPHT_OK;
}
