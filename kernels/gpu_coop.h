/*
 * gpu_coop.h — the one cooperative work-sharing loop (Alg. 3 of the paper)
 * that runs every table operation.
 *
 * Each thread loads one input key.  The W lanes of a tile then work on the
 * tile's W keys one after another: the key is broadcast, the tile reads
 * the key's bucket together (one coalesced access), decides with ballots,
 * and one lane writes.  What an operation does with a key is a functor:
 *
 *   struct Op {
 *     static constexpr int W;            lanes per tile (bucket bytes / 16)
 *     static constexpr int D;            keys whose first read is issued together
 *     struct snap;                       one lane's part of the key's bucket(s)
 *     uint64_t key(uint32_t i) const;    input key i
 *     void load(tile, key, snap&) const; issue the first bucket read
 *     uint8_t run(tile, key, snap&) const;   decide; may write and re-read
 *     void done(uint32_t i, bool have, uint64_t key, uint8_t r) const;
 *   };                                   (done is called by every lane of
 *                                         the warp, for warp-wide appends)
 *
 * Read-ahead: the first reads of D keys are issued before the first of them
 * is decided, so a tile has D bucket reads in flight instead of one.  A
 * snapshot may then be older than a write made by the tile itself moments
 * before; that is harmless, because the algorithms only ever CAS against a
 * slot value they saw, and a failed CAS makes them re-read.
 *
 * The loop strides over the input with a grid that fills the device once,
 * so at any moment the blocks work on one window of the input: when the
 * input is grouped by bucket (gpu_group.cu) that window touches a slice of
 * the table that fits in L2.
 */
#ifndef CPHT_GPU_COOP_H
#define CPHT_GPU_COOP_H

#include "gpu_bucket.h"
#include "gpu_common.h"

template <class Op>
__global__ void __launch_bounds__(GPU_BLOCK)
gpu_coop_kernel(Op op, uint32_t n, const uint32_t *n_dev)
{
	constexpr int W = Op::W;
	constexpr int D = Op::D;
	const gpu_tile<W> g;
	/* A second pass learns its input size from the first, on the device. */
	const uint32_t count = n_dev ? *n_dev : n;

	for (uint32_t base = blockIdx.x * GPU_BLOCK; base < count; base += gridDim.x * GPU_BLOCK)
	{
		const uint32_t i = base + threadIdx.x;
		const bool	have = i < count;
		const uint64_t key = have ? op.key(i) : 0;
		const unsigned todo = g.ballot(have);
		uint8_t		res = 0;

#pragma unroll
		for (int j0 = 0; j0 < W; j0 += D)
		{
			typename Op::snap s[D];
			uint64_t	k[D];

#pragma unroll
			for (int d = 0; d < D; d++)
			{
				k[d] = g.shfl(key, j0 + d);
				if ((todo >> (j0 + d)) & 1)
					op.load(g, k[d], s[d]);
			}
#pragma unroll
			for (int d = 0; d < D; d++)
			{
				if ((todo >> (j0 + d)) & 1)
				{
					uint8_t		r = op.run(g, k[d], s[d]);

					if (g.rank == j0 + d)
						res = r;
				}
			}
		}
		op.done(i, have, key, res);
	}
}

/* Launch the loop over n keys (or *n_dev keys, counted on the device). */
template <class Op>
static cpht_status
gpu_coop_launch(cpht_table *t, const Op &op, uint32_t n, const uint32_t *n_dev, const char *what)
{
	gpu_state  *st = gpu_state_of(t);
	/* Resident blocks per multiprocessor: a property of the compiled kernel. */
	static const int occupancy = gpu_occupancy(gpu_coop_kernel<Op>);
	static_assert(GPU_BLOCK % 32 == 0, "blocks are whole warps");

	/* Nothing to do: a zero-size launch would be an error. */
	if (n == 0)
		return CPHT_OK;
	gpu_coop_kernel<Op><<<gpu_grid(st, n, occupancy), GPU_BLOCK, 0, st->comp>>>(op, n, n_dev);
	GPU_LAUNCHED(t, what);
	return CPHT_OK;
}

/*
 * Warp-wide append of (key, index) for the lanes where `want` holds: one
 * atomic per warp.  Every lane of the warp must call it.
 */
__device__ __forceinline__ void
gpu_append(bool want, uint64_t key, uint32_t index, uint64_t *keys_out,
		   uint32_t *index_out, uint32_t *count)
{
	unsigned	ballot = __ballot_sync(0xffffffffu, want);
	int			lane = (int) (threadIdx.x & 31);
	uint32_t	at = 0;

	/* Nobody in this warp has anything to append. */
	if (ballot == 0)
		return;
	if (lane == __ffs(ballot) - 1)
		at = atomicAdd(count, (uint32_t) __popc(ballot));
	at = __shfl_sync(0xffffffffu, at, __ffs(ballot) - 1);
	if (want)
	{
		uint32_t	slot = at + (uint32_t) __popc(ballot & ((1u << lane) - 1));

		keys_out[slot] = key;
		if (index_out)
			index_out[slot] = index;
	}
}

#endif							/* CPHT_GPU_COOP_H */
