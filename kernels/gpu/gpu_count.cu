/*
 * gpu_count.cu — count the live and tombstone slots of each level (for
 * cpht_table_stats).  One streaming pass over the slot memory.
 */
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>

#include "gpu/gpu_ops.h"

template <class T>
__global__ void __launch_bounds__(GPU_BLOCK)
scan_kernel(const T *slots, uint64_t n, unsigned long long *counts)
{
	unsigned long long live = 0,
				tomb = 0;

	for (uint64_t i = (uint64_t) blockIdx.x * GPU_BLOCK + threadIdx.x; i < n; i += (uint64_t) gridDim.x * GPU_BLOCK)
	{
		T			s = slots[i];

		live += slot_is_live(s);
		tomb += s == (T) CPHT_SLOT_TOMBSTONE;
	}
	{
		const cooperative_groups::thread_block_tile<32> warp =
			cooperative_groups::tiled_partition<32>(cooperative_groups::this_thread_block());

		live = cooperative_groups::reduce(warp, live, cooperative_groups::plus<unsigned long long>());
		tomb = cooperative_groups::reduce(warp, tomb, cooperative_groups::plus<unsigned long long>());
	}
	/* One atomic per warp. */
	if ((threadIdx.x & 31) == 0)
	{
		atomicAdd(&counts[0], live);
		atomicAdd(&counts[1], tomb);
	}
}

cpht_status
gpu_scan_levels(cpht_table *t, uint64_t *live, uint64_t *tombstones)
{
	gpu_state  *st = gpu_state_of(t);
	gpu_carve	c = {NULL, 0};
	unsigned long long *counts;
	unsigned long long host[2 * CPHT_MAX_LEVELS];
	cpht_status rc;

	(void) carve<unsigned long long>(&c, 2 * CPHT_MAX_LEVELS);
	rc = gpu_scratch_reserve(t, c.off);
	if (rc != CPHT_OK)
		return rc;
	counts = (unsigned long long *) st->scratch;
	GPU_TRY(t, cudaMemsetAsync(counts, 0, sizeof(host), st->comp), "clearing counters");

	for (int l = 0; l < t->levels; l++)
	{
		const layout_level *lv = &t->level[l];
		uint64_t	n = lv->buckets * (uint64_t) lv->bucket_slots;
		unsigned	grid = gpu_grid(st, n, 8);

		switch (lv->slot_bits)
		{
			case 16:
				scan_kernel<<<grid, GPU_BLOCK, 0, st->comp>>>((const unsigned short *) lv->slots, n, counts + 2 * l);
				break;
			case 32:
				scan_kernel<<<grid, GPU_BLOCK, 0, st->comp>>>((const unsigned *) lv->slots, n, counts + 2 * l);
				break;
			default:
				scan_kernel<<<grid, GPU_BLOCK, 0, st->comp>>>((const unsigned long long *) lv->slots, n, counts + 2 * l);
				break;
		}
		GPU_LAUNCHED(t, "counting slots");
	}
	GPU_TRY(t, cudaMemcpyAsync(host, counts, sizeof(host), cudaMemcpyDeviceToHost, st->comp), "reading counts");
	GPU_TRY(t, cudaStreamSynchronize(st->comp), "counting slots");
	for (int l = 0; l < t->levels; l++)
	{
		live[l] = host[2 * l];
		tombstones[l] = host[2 * l + 1];
	}
	return CPHT_OK;
}
