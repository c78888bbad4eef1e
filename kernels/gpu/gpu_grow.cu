/*
 * gpu_grow.cu — moving a GPU table's keys into its larger layout when it
 * grows (backend move_keys; table_grow.c drives it).
 *
 * The old slots are read a range at a time: a kernel decodes the live slots
 * of the range back into keys (the inverse permutation of layout.h) and
 * packs them into the new table's device key buffer, and the new table's
 * own find-or-put kernels insert them.  So the keys stay in device memory;
 * the host sees only a count per range.  The range is one chunk of the new
 * table's transfer buffers, so growth needs no device memory beyond the
 * two tables and what a find-or-put of one chunk uses.
 */
#include <stdlib.h>

#include "gpu/gpu_ops.h"

/* Decode the live slots [begin, begin + len) of a level into keys, packed
 * at out[*count...] in any order (one atomic per warp). */
template <class T>
__global__ void __launch_bounds__(GPU_BLOCK)
grow_gather(const T *slots, uint64_t begin, uint64_t len, layout_level lv, int key_bits,
			uint64_t *out, unsigned *count)
{
	const uint64_t stride = (uint64_t) gridDim.x * GPU_BLOCK;
	/* Whole warps iterate together (the ballot needs every lane). */
	const uint64_t bound = (len + 31) & ~(uint64_t) 31;

	for (uint64_t i = (uint64_t) blockIdx.x * GPU_BLOCK + threadIdx.x; i < bound; i += stride)
	{
		uint64_t	s = i < len ? (uint64_t) slots[begin + i] : 0;
		bool		live = slot_is_live(s);
		GPU_WARP_BALLOT(live);

		GPU_WARP_APPEND(unsigned, count, live, at,
		{
			int			choice = slot_choice(s, lv.choice_bits);
			uint64_t	bucket = (begin + i) / (uint64_t) lv.bucket_slots;

			out[at + GPU_WARP_RANK] =
				layout_key(layout_level_perm(&lv, key_bits, choice), bucket,
						   slot_remainder(s, lv.choice_bits));
		});
	}
}

static cpht_status
gather_range(cpht_table *to, const layout_level *lv, int key_bits, uint64_t begin, uint64_t len,
			 uint64_t *dkeys, unsigned *dcount, uint32_t *m)
{
	gpu_state  *st = gpu_state_of(to);
	unsigned	grid = gpu_grid(st, len, 8);

	GPU_TRY(to, cudaMemsetAsync(dcount, 0, sizeof(unsigned), st->comp), "clearing a counter");
	switch (lv->slot_bits)
	{
		case 16:
			grow_gather<<<grid, GPU_BLOCK, 0, st->comp>>>((const unsigned short *) lv->slots, begin, len,
														  *lv, key_bits, dkeys, dcount);
			break;
		case 32:
			grow_gather<<<grid, GPU_BLOCK, 0, st->comp>>>((const unsigned *) lv->slots, begin, len,
														  *lv, key_bits, dkeys, dcount);
			break;
		default:
			grow_gather<<<grid, GPU_BLOCK, 0, st->comp>>>((const unsigned long long *) lv->slots, begin, len,
														  *lv, key_bits, dkeys, dcount);
			break;
	}
	GPU_LAUNCHED(to, "decoding the old slots");
	GPU_TRY(to, cudaMemcpyAsync(st->pin_count, dcount, sizeof(unsigned), cudaMemcpyDeviceToHost, st->comp),
			"reading the number of keys");
	GPU_TRY(to, cudaStreamSynchronize(st->comp), "decoding the old slots");
	*m = st->pin_count[0];
	return CPHT_OK;
}

cpht_status
gpu_move_keys(cpht_table *to, cpht_table *from, uint64_t *full)
{
	gpu_state  *st = gpu_state_of(to);
	uint64_t	range = st->chunk_cap;	/* the buffers it has: as large as the memory hook let them grow */
	uint64_t   *homeless = NULL;
	unsigned   *dcount = NULL;
	cpht_status rc = CPHT_OK;

	*full = 0;
	GPU_TRY(to, cudaSetDevice(st->device), "selecting the device");
	/* The old table's kernels are done before its slots are read. */
	GPU_TRY(to, cudaStreamSynchronize(gpu_state_of(from)->comp), "waiting for the table's kernels");
	if (range == 0)
		return table_fail(to, CPHT_ERR_INVALID, "the grown table has no transfer buffers");
	if (to->kind_policy->evicts && (homeless = (uint64_t *) malloc(range * sizeof(uint64_t))) == NULL)
		return table_fail(to, CPHT_ERR_NOMEM, "out of host memory for growing the table");
	{
		cudaError_t err = cudaMalloc((void **) &dcount, sizeof(unsigned));

		if (err != cudaSuccess)
		{
			free(homeless);
			return gpu_fail(to, err, "allocating a counter");
		}
	}
	for (int l = 0; rc == CPHT_OK && l < from->levels; l++)
	{
		const layout_level *lv = &from->level[l];
		uint64_t	nslots = lv->buckets * (uint64_t) lv->bucket_slots;

		for (uint64_t at = 0; rc == CPHT_OK && at < nslots && *full == 0; at += range)
		{
			uint32_t	m = 0;
			size_t		nhomeless = 0;
			cpht_tally	tally = {0, 0};

			if (at > 0 && table_interrupted())
			{
				rc = table_fail(to, CPHT_ERR_CANCELED, "growing the table was canceled; the table is unchanged");
				break;
			}
			if (table_fault_step())
			{
				rc = table_fail(to, CPHT_ERR_DEVICE, "GPU: injected fault while moving keys");
				break;
			}
			rc = gather_range(to, lv, from->params.key_bits, at, nslots - at < range ? nslots - at : range,
							  st->dkeys[0], dcount, &m);
			if (rc != CPHT_OK || m == 0)
				continue;
			rc = gpu_tally_reset(to);
			if (rc == CPHT_OK)
				rc = gpu_kinds[to->params.kind].find_or_put(to, st->dkeys[0], m, st->dout[0],
															homeless, &nhomeless);
			if (rc == CPHT_OK)
				rc = gpu_tally_chunk(to, st->dkeys[0], st->dout[0], m, CPHT_PUT, CPHT_NO_LOG);
			if (rc == CPHT_OK)
				rc = gpu_tally_read(to, &tally);
			/* Every key is new to the table: what was not put found no slot. */
			if (rc == CPHT_OK)
				*full = (m - tally.hits) + nhomeless;
		}
	}
	(void) cudaFree(dcount);
	free(homeless);
	return rc;
}
