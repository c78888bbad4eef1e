/*
 * gpu_group.cu — group a batch by primary bucket before running it, so
 * that the table is touched one L2-sized slice at a time.
 *
 * Why: a batch as large as the table touches each bucket several times at
 * random.  Every touch then costs a DRAM sector read, and every insert a
 * sector write-back: the random-sector and random-CAS ceilings of the
 * device.  Grouped, the keys of one slice arrive together, the slice's
 * buckets stay in L2 while they do, and each comes from DRAM about once.
 *
 * How: a one-digit radix partition on the top bits of the key's primary
 * bucket address (histogram per block, one scan, scatter), which costs
 * three streaming passes over the keys, all coalesced (the scatter sorts
 * each tile by group in shared memory first).  The scatter records each
 * key's place in its sorted tile, and the results come back to input order
 * through it.  The order of keys inside a group does not matter: every
 * operation is correct under any interleaving of its keys.
 */
#include <cooperative_groups.h>
#include <cooperative_groups/scan.h>
#include <cub/device/device_scan.cuh>

#include "gpu/gpu_ops.h"

#define GROUP_ITEMS 16			/* keys per thread in histogram and scatter */
#define GROUP_TILE (GPU_BLOCK * GROUP_ITEMS)
#define GROUP_MAX_BITS 8

__device__ __forceinline__ unsigned
group_of(layout_perm p, int shift, uint64_t key)
{
	return (unsigned) (layout_address(p, key) >> shift);
}

__global__ void __launch_bounds__(GPU_BLOCK)
group_hist(const uint64_t *keys, uint32_t n, layout_perm p, int shift, int groups,
		   uint32_t *counts, uint32_t nblocks)
{
	__shared__ uint32_t h[1 << GROUP_MAX_BITS];
	const size_t base = (size_t) blockIdx.x * GROUP_TILE;

	for (int q = threadIdx.x; q < groups; q += GPU_BLOCK)
		h[q] = 0;
	__syncthreads();
#pragma unroll 4
	for (int j = 0; j < GROUP_ITEMS; j++)
	{
		size_t		i = base + (size_t) j * GPU_BLOCK + threadIdx.x;

		if (i < n)
			atomicAdd(&h[group_of(p, shift, __ldg(keys + i))], 1u);
	}
	__syncthreads();
	for (int q = threadIdx.x; q < groups; q += GPU_BLOCK)
		counts[(size_t) q * nblocks + blockIdx.x] = h[q];
}

/*
 * Exclusive prefix sum of h[0..groups) into off[0..groups) by one warp,
 * groups <= 32 * GROUP_SCAN_PER_LANE.
 */
#define GROUP_SCAN_PER_LANE ((1 << GROUP_MAX_BITS) / 32)

__device__ __forceinline__ void
group_scan_warp(const uint32_t *h, uint32_t *off, int groups)
{
	int			lane = (int) (threadIdx.x & 31);
	uint32_t	v[GROUP_SCAN_PER_LANE];
	uint32_t	sum = 0,
				run;

#pragma unroll
	for (int j = 0; j < GROUP_SCAN_PER_LANE; j++)
	{
		int			q = lane * GROUP_SCAN_PER_LANE + j;

		v[j] = q < groups ? h[q] : 0;
		sum += v[j];
	}
	run = cooperative_groups::exclusive_scan(cooperative_groups::tiled_partition<32>(cooperative_groups::this_thread_block()),
											 sum);
#pragma unroll
	for (int j = 0; j < GROUP_SCAN_PER_LANE; j++)
	{
		int			q = lane * GROUP_SCAN_PER_LANE + j;

		if (q < groups)
			off[q] = run;
		run += v[j];
	}
}

/* The group of local position q: the last group whose local offset is <= q. */
__device__ __forceinline__ int
group_at(const uint32_t *local_off, int bits, uint32_t q)
{
	int			g = 0;

	for (int step = (1 << bits) / 2; step > 0; step >>= 1)
		if (local_off[g + step] <= q)
			g += step;
	return g;
}

/*
 * Scatter one tile of keys to its groups.  The tile is first sorted by
 * group in shared memory, so each group's run is written by consecutive
 * threads (coalesced) instead of one 8-byte store per sector.  Each key's
 * place in the sorted tile (a 16-bit local position) is kept for
 * group_back.
 */
__global__ void __launch_bounds__(GPU_BLOCK)
group_scatter(const uint64_t *keys, uint32_t n, layout_perm p, int shift, int bits,
			  const uint32_t *offsets, uint32_t nblocks, uint64_t *gkeys, uint16_t *lpos)
{
	__shared__ uint64_t sk[GROUP_TILE];
	__shared__ uint32_t hist[1 << GROUP_MAX_BITS];
	__shared__ uint32_t local_off[(1 << GROUP_MAX_BITS) + 1];
	__shared__ uint32_t global_off[1 << GROUP_MAX_BITS];
	const int	groups = 1 << bits;
	const size_t base = (size_t) blockIdx.x * GROUP_TILE;
	const uint32_t len = n - base < GROUP_TILE ? (uint32_t) (n - base) : GROUP_TILE;
	uint64_t	k[GROUP_ITEMS];
	uint32_t	rank[GROUP_ITEMS];
	uint16_t	grp[GROUP_ITEMS];

	for (int q = threadIdx.x; q < groups; q += GPU_BLOCK)
	{
		hist[q] = 0;
		global_off[q] = offsets[(size_t) q * nblocks + blockIdx.x];
	}
	__syncthreads();
#pragma unroll
	for (int j = 0; j < GROUP_ITEMS; j++)
	{
		uint32_t	i = j * GPU_BLOCK + threadIdx.x;

		if (i < len)
		{
			k[j] = __ldcs(keys + base + i);
			grp[j] = (uint16_t) group_of(p, shift, k[j]);
			rank[j] = atomicAdd(&hist[grp[j]], 1u);
		}
	}
	__syncthreads();
	if (threadIdx.x < 32)
		group_scan_warp(hist, local_off, groups);
	if (threadIdx.x == 0)
		local_off[groups] = len;
	__syncthreads();
#pragma unroll
	for (int j = 0; j < GROUP_ITEMS; j++)
	{
		uint32_t	i = j * GPU_BLOCK + threadIdx.x;

		if (i < len)
		{
			uint32_t	q = local_off[grp[j]] + rank[j];

			sk[q] = k[j];
			lpos[base + i] = (uint16_t) q;
		}
	}
	__syncthreads();
	for (uint32_t q = threadIdx.x; q < len; q += GPU_BLOCK)
	{
		int			g = group_at(local_off, bits, q);

		gkeys[global_off[g] + (q - local_off[g])] = sk[q];
	}
}

/*
 * Results back to input order, one tile per block: read the tile's group
 * runs of results (coalesced) into shared memory in the tile's sorted
 * order, then pick each key's result by its local position.
 */
__global__ void __launch_bounds__(GPU_BLOCK)
group_back(const uint32_t *counts, const uint32_t *offsets, uint32_t nblocks, int bits,
		   const uint16_t *lpos, const uint8_t *res, uint32_t n, uint8_t *out)
{
	__shared__ uint8_t sr[GROUP_TILE];
	__shared__ uint32_t hist[1 << GROUP_MAX_BITS];
	__shared__ uint32_t local_off[(1 << GROUP_MAX_BITS) + 1];
	__shared__ uint32_t global_off[1 << GROUP_MAX_BITS];
	const int	groups = 1 << bits;
	const size_t base = (size_t) blockIdx.x * GROUP_TILE;
	const uint32_t len = n - base < GROUP_TILE ? (uint32_t) (n - base) : GROUP_TILE;

	for (int q = threadIdx.x; q < groups; q += GPU_BLOCK)
	{
		hist[q] = counts[(size_t) q * nblocks + blockIdx.x];
		global_off[q] = offsets[(size_t) q * nblocks + blockIdx.x];
	}
	__syncthreads();
	if (threadIdx.x < 32)
		group_scan_warp(hist, local_off, groups);
	if (threadIdx.x == 0)
		local_off[groups] = len;
	__syncthreads();
	for (uint32_t q = threadIdx.x; q < len; q += GPU_BLOCK)
	{
		int			g = group_at(local_off, bits, q);

		sr[q] = res[global_off[g] + (q - local_off[g])];
	}
	__syncthreads();
	for (uint32_t i = threadIdx.x; i < len; i += GPU_BLOCK)
		out[base + i] = sr[__ldcs(lpos + base + i)];
}

static layout_perm
primary_perm(const cpht_table *t)
{
	return layout_level_perm(&t->level[0], t->params.key_bits, 0);
}

int
gpu_group_bits(const cpht_table *t, size_t n, int inserts)
{
	const gpu_state *st = gpu_state_of(t);
	const layout_level *lv = &t->level[0];
	uint64_t	bytes = lv->buckets * (uint64_t) lv->bucket_slots * (uint64_t) (lv->slot_bits / 8);
	uint64_t	bucket_bytes = (uint64_t) lv->bucket_slots * (uint64_t) (lv->slot_bits / 8);
	/* Slices of a quarter of L2 (GPU_GROUP_FINE: a sixteenth). */
	uint64_t	slice = st->l2_bytes / (st->grouping == GPU_GROUP_FINE ? 16 : 4);
	int			bits = 0;

	if (slice < ((uint64_t) 1 << 20))
		slice = (uint64_t) 1 << 20;
	if (st->grouping == GPU_GROUP_OFF)
		return 0;
	while ((bytes >> bits) > slice && bits < GROUP_MAX_BITS && bits < lv->addr_bits)
		bits++;
	/* The level fits in L2 as it is: grouping would only cost. */
	if (bits == 0)
		return 0;
	if (st->grouping != GPU_GROUP_AUTO)
		return bits;

	/*
	 * The automatic rule follows what the H100 measurements showed
	 * (test/bench/kernels/gpu-results.md): grouping paid only for batches that
	 * insert, on primary buckets one lane reads (16 bytes or less), with at
	 * least 8 keys per 32-byte sector of the level; finds and wider buckets
	 * lost more to the three extra passes than L2 gave back.
	 */
	if (!inserts || bucket_bytes > 16)
		return 0;
	return (uint64_t) n * 32 >= 8 * bytes ? bits : 0;
}

void
gpu_group_carve(gpu_carve *c, gpu_group *g, uint32_t n)
{
	size_t		cells;

	g->nblocks = (uint32_t) ((n + GROUP_TILE - 1) / GROUP_TILE);
	cells = ((size_t) 1 << g->bits) * g->nblocks;
	g->keys = carve<uint64_t>(c, n);
	g->pos = carve<uint16_t>(c, n);
	g->res = carve<uint8_t>(c, n);
	g->counts = carve<uint32_t>(c, cells);
	g->offsets = carve<uint32_t>(c, cells);
	g->tmp_bytes = 0;
	(void) cub::DeviceScan::ExclusiveSum(NULL, g->tmp_bytes, g->counts, g->offsets, (int) cells);
	g->tmp = carve<char>(c, g->tmp_bytes);
}

cpht_status
gpu_group_keys(cpht_table *t, const gpu_group *g, const uint64_t *dkeys, uint32_t n)
{
	gpu_state  *st = gpu_state_of(t);
	layout_perm p = primary_perm(t);
	int			shift = t->level[0].addr_bits - g->bits;
	int			groups = 1 << g->bits;
	size_t		tmp_bytes = g->tmp_bytes;

	group_hist<<<g->nblocks, GPU_BLOCK, 0, st->comp>>>(dkeys, n, p, shift, groups, g->counts, g->nblocks);
	GPU_LAUNCHED(t, "grouping histogram");
	GPU_TRY(t, cub::DeviceScan::ExclusiveSum(g->tmp, tmp_bytes, g->counts, g->offsets,
											 (int) ((size_t) groups * g->nblocks), st->comp),
			"grouping scan");
	group_scatter<<<g->nblocks, GPU_BLOCK, 0, st->comp>>>(dkeys, n, p, shift, g->bits, g->offsets,
														   g->nblocks, g->keys, g->pos);
	GPU_LAUNCHED(t, "grouping scatter");
	return CPHT_OK;
}

cpht_status
gpu_group_results(cpht_table *t, const gpu_group *g, uint32_t n, uint8_t *dout)
{
	gpu_state  *st = gpu_state_of(t);

	group_back<<<g->nblocks, GPU_BLOCK, 0, st->comp>>>(g->counts, g->offsets, g->nblocks, g->bits,
													   g->pos, g->res, n, dout);
	GPU_LAUNCHED(t, "grouping results");
	return CPHT_OK;
}
