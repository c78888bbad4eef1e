/*
 * gpu_revive.cu — putting back keys whose deletion a rollback undoes.
 * Moving slots between device and host is in gpu_slot_copy.cu.
 *
 * Revive is rare and runs alone on the table (rollbacks never overlap other
 * calls), so it is one thread per key: the key goes back into the very slot
 * its erase reported (CPHT_WHERE: its bucket in find's order and the slot
 * in it), which still holds the key's tombstone (table_rollback.c says
 * why).  The CPU twin is revive_at in cpu_device.c.
 */
#include "gpu/gpu_bucket.h"	/* gpu_cas16 */
#include "gpu/gpu_ops.h"

static __device__ __forceinline__ uint64_t
revive_load(const layout_level &lv, uint64_t i)
{
	switch (lv.slot_bits)
	{
		case 16:
			return ((volatile const unsigned short *) lv.slots)[i];
		case 32:
			return ((volatile const unsigned int *) lv.slots)[i];
		default:
			return ((volatile const unsigned long long *) lv.slots)[i];
	}
}

/* Compare-and-swap one slot; 16-bit slots through their aligned 32-bit
 * pair (gpu_cas16), again while only the neighbour changed. */
static __device__ __forceinline__ bool
revive_cas(const layout_level &lv, uint64_t i, uint64_t expect, uint64_t want)
{
	switch (lv.slot_bits)
	{
		case 16:
			{
				unsigned   *word = (unsigned *) lv.slots + (i >> 1);
				int			shift = (int) (i & 1) * 16;
				unsigned	old = *(volatile unsigned *) word;

				for (;;)
				{
					unsigned	got;

					if (gpu_half16(old, shift) != (unsigned) expect)
						return false;	/* another key took the slot */
					got = gpu_cas16(word, shift, old, want);
					if (got == old)
						return true;
					old = got;	/* the neighbour changed: try again */
				}
			}
		case 32:
			return atomicCAS((unsigned *) lv.slots + i, (unsigned) expect, (unsigned) want) == (unsigned) expect;
		default:
			return atomicCAS((unsigned long long *) lv.slots + i, (unsigned long long) expect,
							 (unsigned long long) want) == (unsigned long long) expect;
	}
}

static __global__ void __launch_bounds__(GPU_BLOCK)
revive_kernel(layout_level l0, layout_level l1, int levels, int key_bits,
			  const uint64_t *keys, const uint8_t *where, uint32_t n, uint8_t *status)
{
	uint32_t	i = blockIdx.x * blockDim.x + threadIdx.x;
	int			level,
				c,
				j;

	if (i >= n)
		return;
	layout_where_bucket(levels, CPHT_WHERE_ORDER(where[i]), &level, &c);
	j = CPHT_WHERE_SLOT(where[i]);
	{
		const layout_level &lv = level == 0 ? l0 : l1;
		layout_perm p = layout_level_perm(&lv, key_bits, c);
		uint64_t	at = layout_bucket_start(&lv, layout_address(p, keys[i])) + (uint64_t) j;

		status[i] = c < lv.choices && j < lv.bucket_slots &&
			revive_load(lv, at) == CPHT_SLOT_TOMBSTONE &&
			revive_cas(lv, at, CPHT_SLOT_TOMBSTONE,
					   slot_encode(layout_remainder(p, keys[i]), c, lv.choice_bits))
			? CPHT_PUT : CPHT_FULL;
	}
}

cpht_status
gpu_revive(cpht_table *t, const uint64_t *dkeys, const uint8_t *dwhere, uint32_t n, uint8_t *dstatus)
{
	gpu_state  *st = gpu_state_of(t);
	uint32_t	blocks = (n + GPU_BLOCK - 1) / GPU_BLOCK;

	if (n == 0)
		return CPHT_OK;
	revive_kernel<<<blocks, GPU_BLOCK, 0, st->comp>>>(t->level[0], t->level[t->levels > 1 ? 1 : 0],
													  t->levels, t->params.key_bits, dkeys, dwhere, n,
													  dstatus);
	GPU_LAUNCHED(t, "putting keys back");
	return CPHT_OK;
}
