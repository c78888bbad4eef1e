/*
 * gpu_bucket.h — how a tile of lanes sees one bucket: the tile itself
 * (ballot / any / shuffle over W lanes), the split of a bucket into 16-byte
 * lane parts, the per-lane slot masks, and the slot atomics.
 *
 * Width of a tile.  The paper gives every slot its own lane (a tile of B
 * lanes for B-slot buckets), so a tile has one bucket read in flight and a
 * warp at most 32/B.  Here each lane reads 16 bytes (one vector load) and
 * the tile is as wide as the bucket needs: an 8-slot bucket of 32-bit
 * slots is two lanes, of 16-bit slots one.  The bucket still arrives in one
 * coalesced access, and a warp keeps 4-16 times more reads in flight —
 * what random reads need to approach the memory's sector rate.
 */
#ifndef CPHT_GPU_BUCKET_H
#define CPHT_GPU_BUCKET_H

#include <stdint.h>

#include <cooperative_groups.h>

#include "table/layout.h"

/* ---- the 16-bit slot CAS ------------------------------------------------ */

/*
 * 16-bit slots change by a 32-bit CAS on their aligned pair (no 16-bit
 * atomic: slow on the paper's GPUs).  gpu_cas16 writes `want` into the half
 * of *word at bit `shift` (0 or 16) if the pair still is `pair`, and
 * returns the pair as it was (== pair when it took).  Every 16-bit slot
 * write goes through it: the one-shot CAS of a claim (gpu_slot_cas), the
 * eviction's exchange (gpu_slot_swap) and revive's put-back.
 */
__device__ __forceinline__ unsigned
gpu_cas16(unsigned *word, int shift, unsigned pair, uint64_t want)
{
	return atomicCAS(word, pair, (pair & ~(0xffffu << shift)) | ((unsigned) (uint16_t) want << shift));
}

/* The 16-bit slot at bit `shift` of a pair. */
__device__ __forceinline__ unsigned
gpu_half16(unsigned pair, int shift)
{
	return (pair >> shift) & 0xffffu;
}

/* ---- a tile of W consecutive lanes of a warp ---------------------------- */

/*
 * A tile of four or more lanes is cooperative_groups' static tile: ballot
 * (bit r set when the predicate holds at tile rank r), any, shfl by tile
 * rank, thread_rank().  Tiles of one and two lanes (16- and 32-byte
 * buckets) are gpu_small_tile below, which keeps the lane mask in a
 * register and skips the instructions a one-lane tile does not need: side
 * by side on an H200 (test/bench/kernels/gpu-results.md, "cooperative_groups")
 * cooperative_groups' tiles ran at 0.99-1.02x the hand-written ones from
 * four lanes up, but at 0.59-0.88x for the one-lane tile (16-bit 8/4
 * iceberg, whose one-thread tile still votes and shuffles) and 0.95x for
 * the two-lane tile's put of the 32-bit 8/4 iceberg.  A kernel makes its
 * tile once with gpu_tile_make; device functions take it by reference
 * (templates on the tile's type where they serve any W).
 */
template <unsigned W>
struct gpu_small_tile
{
	unsigned	mask;			/* the tile's lanes within the warp */
	int			base;			/* warp lane of the tile's rank 0 */
	int			rank;			/* my rank in the tile */

	__device__ __forceinline__ gpu_small_tile()
	{
		int			lane = (int) (threadIdx.x & 31);

		base = lane & ~(int) (W - 1);
		rank = lane & (int) (W - 1);
		mask = ((1u << W) - 1) << base;
	}

	__device__ __forceinline__ unsigned thread_rank() const
	{
		return (unsigned) rank;
	}

	/* Bit r set when the predicate holds at tile rank r. */
	__device__ __forceinline__ unsigned ballot(bool p) const
	{
		if (W == 1)
			return p ? 1u : 0u;
		return (__ballot_sync(mask, p) >> base) & ((1u << W) - 1);
	}

	__device__ __forceinline__ bool any(bool p) const
	{
		return ballot(p) != 0;
	}

	template <class T>
	__device__ __forceinline__ T shfl(T v, int src) const
	{
		if (W == 1)
			return v;
		return __shfl_sync(mask, v, src, W);
	}
};

template <unsigned W, bool SMALL = (W <= 2)>
struct gpu_tile_of
{
	typedef cooperative_groups::thread_block_tile<W> type;

	static __device__ __forceinline__ type make()
	{
		return cooperative_groups::tiled_partition<W>(cooperative_groups::this_thread_block());
	}
};

template <unsigned W>
struct gpu_tile_of<W, true>
{
	typedef gpu_small_tile<W> type;

	static __device__ __forceinline__ type make()
	{
		return gpu_small_tile<W>();
	}
};

template <unsigned W>
using gpu_tile = typename gpu_tile_of<W>::type;

template <unsigned W>
__device__ __forceinline__ gpu_tile<W>
gpu_tile_make(void)
{
	return gpu_tile_of<W>::make();
}

/* ---- bucket geometry ---------------------------------------------------- */

template <int SW> struct gpu_slot_type;
template <> struct gpu_slot_type<16> { typedef unsigned short type; };
template <> struct gpu_slot_type<32> { typedef unsigned int type; };
template <> struct gpu_slot_type<64> { typedef unsigned long long type; };

template <int BYTES> struct gpu_chunk_type;
template <> struct gpu_chunk_type<8> { typedef uint2 type; };
template <> struct gpu_chunk_type<16> { typedef uint4 type; };

/* A bucket of B slots of SW bits, read by W lanes of S slots each. */
template <int SW, int B>
struct gpu_geom
{
	typedef typename gpu_slot_type<SW>::type slot_t;
	static constexpr int BYTES = B * SW / 8;
	static constexpr int CB = BYTES < 16 ? BYTES : 16;	/* bytes per lane */
	static constexpr int W = BYTES / CB;	/* lanes per bucket */
	static constexpr int S = CB * 8 / SW;	/* slots per lane */
	typedef typename gpu_chunk_type<CB>::type chunk_t;
	static_assert(W >= 1 && W <= 32 && S >= 2, "unsupported bucket geometry");
};

/* One lane's part of a bucket snapshot. */
template <int SW, int B>
union gpu_lane
{
	typename gpu_geom<SW, B>::chunk_t c;
	typename gpu_geom<SW, B>::slot_t s[gpu_geom<SW, B>::S];
	unsigned	w[gpu_geom<SW, B>::CB / 4];
};

/*
 * Read my part of a bucket.  ld.global.cg goes to L2, the point of
 * coherence, so a re-read after a lost compare-and-swap sees the winner's
 * slot instead of a stale L1 line.
 */
template <int SW, int B>
__device__ __forceinline__ void
gpu_lane_load(gpu_lane<SW, B> &v, const void *slots, uint64_t address, int rank)
{
	typedef gpu_geom<SW, B> G;
	const typename G::chunk_t *p = (const typename G::chunk_t *) slots + address * G::W + rank;

	v.c = __ldcg(p);
}

/* Bit t set where my slot t equals x. */
template <int SW, int B>
__device__ __forceinline__ unsigned
gpu_lane_eq(const gpu_lane<SW, B> &v, uint64_t x)
{
	unsigned	m = 0;

#pragma unroll
	for (int t = 0; t < gpu_geom<SW, B>::S; t++)
		m |= (unsigned) (v.s[t] == (typename gpu_geom<SW, B>::slot_t) x) << t;
	return m;
}

/* Bit t set where my slot t is free for a cuckoo put (EMPTY or TOMBSTONE). */
template <int SW, int B>
__device__ __forceinline__ unsigned
gpu_lane_free(const gpu_lane<SW, B> &v)
{
	unsigned	m = 0;

#pragma unroll
	for (int t = 0; t < gpu_geom<SW, B>::S; t++)
		m |= (unsigned) !slot_is_live(v.s[t]) << t;
	return m;
}

/*
 * Index of the first slot of the bucket whose lane mask bit is set (masks
 * from gpu_lane_eq and friends), or B when no lane has one.  With the
 * prefix invariant this is the bucket's fill when the mask is "EMPTY".
 */
template <int SW, int B, class Tile>
__device__ __forceinline__ int
gpu_first_slot(const Tile &g, unsigned lane_mask)
{
	unsigned	lanes = g.ballot(lane_mask != 0);
	int			fl;

	if (lanes == 0)
		return B;
	fl = __ffs(lanes) - 1;
	return fl * gpu_geom<SW, B>::S + __ffs(g.shfl(lane_mask, fl)) - 1;
}

/* ---- slot atomics ------------------------------------------------------- */

/* My slot t, for a t known only at run time (an unrolled select keeps the
 * snapshot in registers; indexing it would move it to local memory). */
template <int SW, int B>
__device__ __forceinline__ uint64_t
gpu_lane_get(const gpu_lane<SW, B> &v, int t)
{
	uint64_t	x = 0;

#pragma unroll
	for (int u = 0; u < gpu_geom<SW, B>::S; u++)
		if (u == t)
			x = v.s[u];
	return x;
}

/* The 32-bit word w of my lane part (16-bit slots 2w and 2w+1). */
template <int SW, int B>
__device__ __forceinline__ unsigned
gpu_lane_word(const gpu_lane<SW, B> &v, int w)
{
	unsigned	x = 0;

#pragma unroll
	for (int u = 0; u < gpu_geom<SW, B>::CB / 4; u++)
		if (u == w)
			x = v.w[u];
	return x;
}

/* Set my slot t (16-bit slots: the 32-bit word w = t / 2) to x. */
template <int SW, int B>
__device__ __forceinline__ void
gpu_lane_set(gpu_lane<SW, B> &v, int t, uint64_t x)
{
	if (SW == 16)
	{
#pragma unroll
		for (int u = 0; u < gpu_geom<SW, B>::CB / 4; u++)
			if (u == (t >> 1))
				v.w[u] = (unsigned) x;
	}
	else
	{
#pragma unroll
		for (int u = 0; u < gpu_geom<SW, B>::S; u++)
			if (u == t)
				v.s[u] = (typename gpu_geom<SW, B>::slot_t) x;
	}
}

/*
 * Compare-and-swap my slot t (bucket slot `index` of the level) from the
 * value the snapshot holds to `want`.  Returns 1 on success; *seen is the
 * slot's value the atomic found.  On failure the snapshot takes the value
 * the atomic found, so the caller can go on without reading the bucket
 * again: a snapshot stays truthful about every non-empty slot (slots only
 * go from EMPTY to a key during these operations), which is all the
 * algorithms need (Lemma 2 of the paper), and each failure turns one more
 * snapshot slot non-empty, so the retries are bounded.
 *
 * 16-bit slots use gpu_cas16, expecting the pair as the snapshot saw it:
 * a neighbour that changed since the snapshot only makes the CAS fail like
 * a lost race.  (Slot pairs never straddle two lanes: a lane part starts at
 * an even slot.)
 */
template <int SW, int B>
__device__ __forceinline__ int
gpu_slot_cas(void *slots, uint64_t index, gpu_lane<SW, B> &v, int t,
			 uint64_t want, uint64_t *seen)
{
	typedef typename gpu_geom<SW, B>::slot_t slot_t;

	if (SW == 16)
	{
		unsigned   *word = (unsigned *) slots + (index >> 1);
		int			shift = (t & 1) * 16;
		unsigned	expect = gpu_lane_word(v, t >> 1);
		unsigned	old = gpu_cas16(word, shift, expect, want);

		*seen = gpu_half16(old, shift);
		if (old != expect)
			gpu_lane_set(v, t, old);
		return old == expect;
	}
	else
	{
		slot_t		expect = (slot_t) gpu_lane_get(v, t);
		slot_t		old = atomicCAS((slot_t *) slots + index, expect, (slot_t) want);

		*seen = old;
		if (old != expect)
			gpu_lane_set(v, t, old);
		return old == expect;
	}
}

/*
 * The lane holding slot `at` of the tile's bucket (whose first slot is
 * `first` in the level) tries to change it from what the snapshot shows to
 * `to`, with gpu_slot_cas.  On that lane it returns GPU_CLAIM_TOOK, or
 * GPU_CLAIM_SAME when the slot already held `to` (a concurrent call wrote
 * the same value), or GPU_CLAIM_LOST (the snapshot now shows the slot's new
 * value); other lanes get GPU_CLAIM_LOST.  Callers broadcast it from lane
 * at / S.
 */
enum
{
	GPU_CLAIM_LOST = 0,
	GPU_CLAIM_TOOK = 1,
	GPU_CLAIM_SAME = 2
};

template <int SW, int B, class Tile>
__device__ __forceinline__ int
gpu_claim_slot(const Tile &g, void *slots, uint64_t first, gpu_lane<SW, B> &s,
			   int at, uint64_t to)
{
	uint64_t	seen;

	if ((int) g.thread_rank() != at / gpu_geom<SW, B>::S)
		return GPU_CLAIM_LOST;
	if (gpu_slot_cas<SW, B>(slots, first + at, s, at % gpu_geom<SW, B>::S, to, &seen))
		return GPU_CLAIM_TOOK;
	return seen == to ? GPU_CLAIM_SAME : GPU_CLAIM_LOST;
}

/*
 * A level's permutation for hash choice c (0, 1 or 2), a key's bucket
 * address and its slot value there: layout.h's arithmetic, with the seed
 * picked by comparisons rather than seeds[c] (a run-time index into the
 * level, which kernels hold in registers, can move it to local memory).
 */
__device__ __forceinline__ layout_perm
gpu_level_perm(const layout_level &lv, int key_bits, int c)
{
	layout_perm p;

	p.seed = c == 0 ? lv.seeds[0] : c == 1 ? lv.seeds[1] : lv.seeds[2];
	p.key_bits = key_bits;
	p.addr_bits = lv.addr_bits;
	p.fold = lv.fold;
	p.buckets = lv.buckets;
	p.recip = lv.recip;
	return p;
}

/*
 * The layouts a kernel instance is compiled for (gpu_coop_launch): any;
 * 2^N buckets (the XOR split) with keys not folded; another bucket count
 * (the division split) with keys not folded.  gpu_level_layout says which
 * a level has, and gpu_level_fix, in an instance for XOR or DIV, tells the
 * compiler what the fields then are, so it leaves the other split and the
 * fold out.
 */
enum
{
	GPU_LAYOUT_ANY = 0,
	GPU_LAYOUT_XOR = 1,
	GPU_LAYOUT_DIV = 2
};

__host__ __device__ __forceinline__ int
gpu_level_layout(const layout_level &lv)
{
	return lv.fold ? GPU_LAYOUT_ANY : lv.recip == 0 ? GPU_LAYOUT_XOR : GPU_LAYOUT_DIV;
}

__device__ __forceinline__ void
gpu_level_fix(layout_level &lv, int layout)
{
	if (layout != GPU_LAYOUT_ANY)
		lv.fold = 0;
	if (layout == GPU_LAYOUT_XOR)
		lv.recip = 0;
	if (layout == GPU_LAYOUT_DIV)
		__builtin_assume(lv.recip != 0);
}

__device__ __forceinline__ uint64_t
gpu_level_address(const layout_level &lv, int key_bits, uint64_t k, int c)
{
	return layout_address(gpu_level_perm(lv, key_bits, c), k);
}

__device__ __forceinline__ uint64_t
gpu_level_slot(const layout_level &lv, int key_bits, uint64_t k, int c)
{
	return slot_encode(layout_remainder(gpu_level_perm(lv, key_bits, c), k), c, lv.choice_bits);
}

/* Atomically replace a slot, returning its old value (cuckoo eviction). */
template <int SW>
__device__ __forceinline__ uint64_t
gpu_slot_swap(void *slots, uint64_t index, uint64_t want)
{
	if (SW == 16)
	{
		unsigned   *word = (unsigned *) slots + (index >> 1);
		int			shift = (int) (index & 1) * 16;
		unsigned	old = __ldcg(word);

		for (;;)
		{
			unsigned	got = gpu_cas16(word, shift, old, want);

			if (got == old)
				return gpu_half16(old, shift);
			old = got;
		}
	}
	else if (SW == 32)
		return atomicExch((unsigned *) slots + index, (unsigned) want);
	else
		return atomicExch((unsigned long long *) slots + index, (unsigned long long) want);
}

#endif							/* CPHT_GPU_BUCKET_H */
