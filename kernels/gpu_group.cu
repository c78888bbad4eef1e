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
 * three streaming passes over the keys.  The scatter records where each key
 * went (pos), and the results come back to input order through pos.  The
 * order of keys inside a group does not matter: every operation is correct
 * under any interleaving of its keys.
 */
#include <cub/device/device_scan.cuh>

#include "gpu_ops.h"

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

__global__ void __launch_bounds__(GPU_BLOCK)
group_scatter(const uint64_t *keys, uint32_t n, layout_perm p, int shift, int groups,
			  const uint32_t *offsets, uint32_t nblocks, uint64_t *gkeys, uint32_t *pos)
{
	__shared__ uint32_t cur[1 << GROUP_MAX_BITS];
	const size_t base = (size_t) blockIdx.x * GROUP_TILE;

	for (int q = threadIdx.x; q < groups; q += GPU_BLOCK)
		cur[q] = offsets[(size_t) q * nblocks + blockIdx.x];
	__syncthreads();
#pragma unroll 4
	for (int j = 0; j < GROUP_ITEMS; j++)
	{
		size_t		i = base + (size_t) j * GPU_BLOCK + threadIdx.x;

		if (i < n)
		{
			uint64_t	k = __ldcs(keys + i);
			uint32_t	at = atomicAdd(&cur[group_of(p, shift, k)], 1u);

			gkeys[at] = k;
			pos[i] = at;
		}
	}
}

__global__ void __launch_bounds__(GPU_BLOCK)
group_back(const uint32_t *pos, const uint8_t *res, uint32_t n, uint8_t *out)
{
	for (size_t i = (size_t) blockIdx.x * GPU_BLOCK + threadIdx.x; i < n; i += (size_t) gridDim.x * GPU_BLOCK)
		out[i] = res[__ldcs(pos + i)];
}

static layout_perm
primary_perm(const cpht_table *t)
{
	return layout_level_perm(&t->level[0], t->params.key_bits, 0);
}

int
gpu_group_bits(const cpht_table *t, size_t n)
{
	const gpu_state *st = gpu_state_of(t);
	const layout_level *lv = &t->level[0];
	uint64_t	bytes = lv->buckets * (uint64_t) lv->bucket_slots * (uint64_t) (lv->slot_bits / 8);
	uint64_t	slice = st->l2_bytes / 4 > ((uint64_t) 1 << 20) ? st->l2_bytes / 4 : ((uint64_t) 1 << 20);
	int			bits = 0;

	if (st->grouping == GPU_GROUP_OFF)
		return 0;
	while ((bytes >> bits) > slice && bits < GROUP_MAX_BITS && bits < lv->addr_bits)
		bits++;
	/* The level fits in L2 as it is: grouping would only cost. */
	if (bits == 0)
		return 0;
	if (st->grouping == GPU_GROUP_ON)
		return bits;
	/* Fewer keys than 32-byte sectors: buckets are seldom touched twice. */
	return (uint64_t) n * 32 >= bytes ? bits : 0;
}

void
gpu_group_carve(gpu_carve *c, gpu_group *g, uint32_t n)
{
	size_t		cells;

	g->nblocks = (uint32_t) ((n + GROUP_TILE - 1) / GROUP_TILE);
	cells = ((size_t) 1 << g->bits) * g->nblocks;
	g->keys = carve<uint64_t>(c, n);
	g->pos = carve<uint32_t>(c, n);
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
	group_scatter<<<g->nblocks, GPU_BLOCK, 0, st->comp>>>(dkeys, n, p, shift, groups, g->offsets,
														   g->nblocks, g->keys, g->pos);
	GPU_LAUNCHED(t, "grouping scatter");
	return CPHT_OK;
}

cpht_status
gpu_group_results(cpht_table *t, const gpu_group *g, uint32_t n, uint8_t *dout)
{
	gpu_state  *st = gpu_state_of(t);
	static const int occupancy = gpu_occupancy(group_back);

	group_back<<<gpu_grid(st, n, occupancy), GPU_BLOCK, 0, st->comp>>>(g->pos, g->res, n, dout);
	GPU_LAUNCHED(t, "grouping results");
	return CPHT_OK;
}
