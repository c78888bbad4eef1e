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
 *     static constexpr bool ROLL;        keep the W / D rounds a loop (long code)
 *     struct snap;                       one lane's part of the key's bucket(s)
 *     uint32_t begin(uint32_t n, uint32_t *smem);   number of inputs (n, or a
 *                                        device-side count; may use smem, once,
 *                                        with every thread of the block)
 *     uint64_t key(uint32_t i) const;    input key i
 *     void load(tile, key, snap&) const; issue the first bucket read
 *     uint8_t run(tile, key, snap&) const;   decide; may write, read on
 *     void done(uint32_t i, bool have, uint64_t key, uint8_t r) const;
 *                                        (done is called by every lane of
 *                                         the warp, for warp-wide appends)
 *     int layout() const;                the instance to run (gpu_coop_launch)
 *     void fix_layout(int layout);       its fields as far as they are known
 *   };
 *
 * Read-ahead: the first reads of D keys are issued before the first of them
 * is decided, so a tile has D bucket reads in flight instead of one.  A
 * snapshot may then be older than a write made by the tile itself moments
 * before; that is harmless, because the algorithms only ever CAS against a
 * slot value they saw, and a failed CAS hands them the slot's real value.
 *
 * The loop strides over the input with a grid that fills the device once,
 * so at any moment the blocks work on one window of the input: when the
 * input is grouped by bucket (gpu_group.cu) that window touches a slice of
 * the table that fits in L2.
 */
#ifndef CPHT_GPU_COOP_H
#define CPHT_GPU_COOP_H

#include <cooperative_groups/scan.h>

#include "gpu/gpu_bucket.h"
#include "gpu/gpu_common.h"

/*
 * Lists that one kernel appends keys to and the next consumes (keys for
 * level 2, absent keys to put).  One shared counter would serialise a
 * warp-wide atomic from nearly every warp on one L2 line; instead there
 * are GPU_LISTS lists, list c taking the warps whose first item index i
 * has (i / 32) % GPU_LISTS == c.  That bounds each list to cap entries, and
 * the counters sit on separate lines.  The consumer sees the lists as one
 * sequence through a prefix sum of the counts kept in shared memory.
 */
#define GPU_LISTS 32
#define GPU_LIST_PAD 32			/* counter stride in words: 128 bytes */
#define GPU_LIST_SMEM 64		/* shared words a consumer needs */

typedef struct gpu_list
{
	uint64_t   *keys;			/* GPU_LISTS * cap */
	uint32_t   *index;			/* GPU_LISTS * cap, or NULL */
	uint32_t   *counts;			/* GPU_LISTS * GPU_LIST_PAD, zeroed before use */
	uint32_t	cap;
} gpu_list;

/* Entries per list for appends from items 0..n-1. */
static inline uint32_t
gpu_list_cap(uint32_t n)
{
	return (uint32_t) (((uint64_t) n + 32 * GPU_LISTS - 1) / (32 * GPU_LISTS) * 32);
}

/* Lay out a list for appends from n items (counts need clearing). */
static inline void
gpu_list_carve(gpu_carve *c, gpu_list *l, uint32_t n, int with_index)
{
	l->cap = gpu_list_cap(n);
	l->keys = carve<uint64_t>(c, (size_t) l->cap * GPU_LISTS);
	l->index = with_index ? carve<uint32_t>(c, (size_t) l->cap * GPU_LISTS) : NULL;
	l->counts = carve<uint32_t>(c, GPU_LISTS * GPU_LIST_PAD);
}

/*
 * Warp-wide append of (key, i) for the lanes where `want` holds: one atomic
 * per warp.  Every lane of the warp must call it, with its own item index i
 * (the warp's indices share i / 32).
 */
__device__ __forceinline__ void
gpu_list_append(const gpu_list &l, bool want, uint64_t key, uint32_t i)
{
	GPU_WARP_BALLOT(want);
	uint32_t	list = (i >> 5) % GPU_LISTS;

	GPU_WARP_APPEND(uint32_t, &l.counts[list * GPU_LIST_PAD], want, at,
	{
		size_t		slot = (size_t) list * l.cap + at + (uint32_t) GPU_WARP_RANK;

		l.keys[slot] = key;
		if (l.index)
			l.index[slot] = i;
	});
}

/* Consumer: prefix sums of the list counts into smem; returns the total.
 * Every thread of the block must call it. */
__device__ __forceinline__ uint32_t
gpu_list_begin(const gpu_list &l, uint32_t *smem)
{
	if (threadIdx.x < 32)
	{
		uint32_t	c = l.counts[threadIdx.x * GPU_LIST_PAD];

		c = cooperative_groups::inclusive_scan(cooperative_groups::tiled_partition<32>(cooperative_groups::this_thread_block()),
											   c);
		smem[threadIdx.x + 1] = c;
		if (threadIdx.x == 0)
			smem[0] = 0;
	}
	__syncthreads();
	return smem[GPU_LISTS];
}

/* Where the i-th entry of the concatenated lists is stored. */
__device__ __forceinline__ size_t
gpu_list_at(const gpu_list &l, const uint32_t *smem, uint32_t i)
{
	int			k = 0;

	/* The last list whose prefix is <= i (empty lists are skipped over). */
#pragma unroll
	for (int step = GPU_LISTS / 2; step > 0; step >>= 1)
		if (smem[k + step] <= i)
			k += step;
	return (size_t) k * l.cap + (i - smem[k]);
}

/*
 * One round of the loop: keys j0 .. j0 + D - 1 of the tile, their first
 * reads issued together, then decided one after another; the tile lane
 * whose key it was keeps the result in *res.
 */
template <class Op>
__device__ __forceinline__ void
gpu_coop_round(const Op &op, const gpu_tile<Op::W> &g, uint64_t key, unsigned pending, int j0,
			   uint8_t *res)
{
	constexpr int D = Op::D;
	typename Op::snap s[D];
	uint64_t	k[D];

#pragma unroll
	for (int d = 0; d < D; d++)
	{
		k[d] = g.shfl(key, j0 + d);
		if ((pending >> (j0 + d)) & 1)
			op.load(g, k[d], s[d]);
	}
#pragma unroll
	for (int d = 0; d < D; d++)
	{
		if ((pending >> (j0 + d)) & 1)
		{
			uint8_t		r = op.run(g, k[d], s[d]);

			if ((int) g.thread_rank() == j0 + d)
				*res = r;
		}
	}
}

template <class Op, int LAYOUT>
__global__ void __launch_bounds__(GPU_BLOCK)
gpu_coop_kernel(Op op_arg, uint32_t n)
{
	constexpr int W = Op::W;
	constexpr int D = Op::D;
	__shared__ uint32_t smem[GPU_LIST_SMEM];
	const gpu_tile<W> g = gpu_tile_make<W>();
	Op			op(op_arg);

	/* What this instance's layout fixes: the compiler drops the rest
	 * (gpu_coop_launch). */
	op.fix_layout(LAYOUT);
	/* A second pass learns its input size from the first, on the device. */
	const uint32_t count = op.begin(n, smem);

	for (uint32_t base = blockIdx.x * GPU_BLOCK; base < count; base += gridDim.x * GPU_BLOCK)
	{
		const uint32_t i = base + threadIdx.x;
		const bool	have = i < count;
		const uint64_t key = have ? op.key(i) : 0;
		const unsigned pending = g.ballot(have);
		uint8_t		res = 0;

		/*
		 * W / D rounds.  Unrolled they hold W copies of the operation's
		 * code.  An operation whose code is long (Op::ROLL: the cuckoo
		 * put and its eviction chain) keeps them a loop of D copies: with
		 * 8 copies a tile of 128-byte buckets outgrew the instruction
		 * cache (Nsight Compute, H100, 32-bit slots, a put to fill 0.9:
		 * 7.65 G instructions in 14.3 ms as a loop, 7.09 G in 17.1 ms
		 * unrolled).  The unrolled rounds are written out rather than
		 * calling gpu_coop_round: through it the compiler schedules them
		 * differently, and these are the kernels measured.
		 */
		if constexpr (Op::ROLL)
		{
#pragma unroll 1
			for (int j0 = 0; j0 < W; j0 += D)
				gpu_coop_round(op, g, key, pending, j0, &res);
		}
		else
		{
#pragma unroll
			for (int j0 = 0; j0 < W; j0 += D)
			{
				typename Op::snap s[D];
				uint64_t	k[D];

#pragma unroll
				for (int d = 0; d < D; d++)
				{
					k[d] = g.shfl(key, j0 + d);
					if ((pending >> (j0 + d)) & 1)
						op.load(g, k[d], s[d]);
				}
#pragma unroll
				for (int d = 0; d < D; d++)
				{
					if ((pending >> (j0 + d)) & 1)
					{
						uint8_t		r = op.run(g, k[d], s[d]);

						if ((int) g.thread_rank() == j0 + d)
							res = r;
					}
				}
			}
		}
		op.done(i, have, key, res);
	}
}

/*
 * Launch the loop over at most n keys (the op's begin() says how many).
 *
 * Each operation is compiled three times (gpu_bucket.h): for 2^N buckets,
 * for other bucket counts, and for any layout (folded keys; a cuckoo put
 * while tombstones are kept), and op.layout() picks the instance.  The
 * branches of the split not taken and of the fold cost little at run
 * time, but every lane of a tile computes a key's address, slot value and
 * (cuckoo eviction) inverse for each of the tile's keys, and the unrolled
 * rounds inline an operation once per key of the tile.  Compiled into one
 * kernel for every layout, they made the kernels of 64- and 128-byte
 * buckets take more registers (fewer resident warps) and more
 * instructions, and the cuckoo put outgrow the instruction cache (Nsight
 * Compute, H100, 32-slot buckets of 32-bit slots: a find 4.78 G
 * instructions at 50% occupancy against 3.83 G at 62.5% compiled for 2^N
 * buckets; a put to fill 0.9 waited for instruction fetch in 62% of its
 * stall cycles and ran 3 times longer).
 */
template <class Op>
static cpht_status
gpu_coop_launch(cpht_table *t, const Op &op, uint32_t n, const char *what)
{
	gpu_state  *st = gpu_state_of(t);
	/* Resident blocks per multiprocessor: a property of the compiled kernel. */
	static const int occupancy[3] = {gpu_occupancy(gpu_coop_kernel<Op, GPU_LAYOUT_ANY>),
									 gpu_occupancy(gpu_coop_kernel<Op, GPU_LAYOUT_XOR>),
									 gpu_occupancy(gpu_coop_kernel<Op, GPU_LAYOUT_DIV>)};
	const int	layout = op.layout();
	const unsigned grid = gpu_grid(st, n, occupancy[layout]);
	static_assert(GPU_BLOCK % 32 == 0, "blocks are whole warps");

	/* Nothing to do: a zero-size launch would be an error. */
	if (n == 0)
		return CPHT_OK;
	if (layout == GPU_LAYOUT_XOR)
		gpu_coop_kernel<Op, GPU_LAYOUT_XOR><<<grid, GPU_BLOCK, 0, st->comp>>>(op, n);
	else if (layout == GPU_LAYOUT_DIV)
		gpu_coop_kernel<Op, GPU_LAYOUT_DIV><<<grid, GPU_BLOCK, 0, st->comp>>>(op, n);
	else
		gpu_coop_kernel<Op, GPU_LAYOUT_ANY><<<grid, GPU_BLOCK, 0, st->comp>>>(op, n);
	GPU_LAUNCHED(t, what);
	return CPHT_OK;
}

/*
 * Launch operation OP instantiated for the level's geometry (slot width and
 * bucket size, fields of args.lv): a plain switch, shared by every table.
 */
template <template <int, int> class OP, class Args>
static cpht_status
gpu_coop_launch_level(cpht_table *t, const Args &a, uint32_t n, const char *what)
{
	switch (a.lv.slot_bits * 100 + a.lv.bucket_slots)
	{
		case 1604: return gpu_coop_launch(t, OP<16, 4>(a), n, what);
		case 1608: return gpu_coop_launch(t, OP<16, 8>(a), n, what);
		case 1616: return gpu_coop_launch(t, OP<16, 16>(a), n, what);
		case 1632: return gpu_coop_launch(t, OP<16, 32>(a), n, what);
		case 3204: return gpu_coop_launch(t, OP<32, 4>(a), n, what);
		case 3208: return gpu_coop_launch(t, OP<32, 8>(a), n, what);
		case 3216: return gpu_coop_launch(t, OP<32, 16>(a), n, what);
		case 3232: return gpu_coop_launch(t, OP<32, 32>(a), n, what);
		case 6404: return gpu_coop_launch(t, OP<64, 4>(a), n, what);
		case 6408: return gpu_coop_launch(t, OP<64, 8>(a), n, what);
		case 6416: return gpu_coop_launch(t, OP<64, 16>(a), n, what);
		case 6432: return gpu_coop_launch(t, OP<64, 32>(a), n, what);
	}
	return table_fail(t, CPHT_ERR_INVALID, "no GPU kernel for %d-slot buckets of %d-bit slots",
					  a.lv.bucket_slots, a.lv.slot_bits);
}

#endif							/* CPHT_GPU_COOP_H */
