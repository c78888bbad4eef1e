/*
 * gpu_iceberg.cu — the compact iceberg table on the GPU: find-or-put
 * (Alg. 1/2 of the paper), find and erase, as functors of the cooperative
 * loop (gpu_coop.h).
 *
 * Two passes.  Pass 1 works on the primary bucket only; a key whose
 * primary bucket is full (and does not hold it) is appended to an overflow
 * list, and pass 2 runs the level-2 half of the algorithm on that list.
 * This is Alg. 1 with its two loops in two kernels: a full primary bucket
 * stays full (slots are only ever filled, or turned into tombstones, during
 * a call), so a key that left level 1 would have found it full at any later
 * time too, and the order property of the correctness proof holds as
 * before.  Splitting keeps each kernel small (registers, occupancy), lets
 * the two levels have any geometry without a cross product of kernels, and
 * lets pass 1 run over a batch grouped by primary bucket.
 *
 * Semantics match kernels/cpu/cpu_iceberg.c: level 1 fills its first EMPTY
 * slot; level 2 fills the first EMPTY slot of the strictly less full
 * secondary bucket, the second one on a tie; tombstones count as occupied
 * and are never reused.
 */
#include <string.h>

#include "gpu/gpu_coop.h"
#include "gpu/gpu_ops.h"

/* What every iceberg functor carries. */
struct ice_args
{
	layout_level lv;			/* the level the pass works on */
	int			key_bits;
	int			undo;			/* erase: EMPTY instead of TOMBSTONE */
	const uint64_t *keys;		/* pass 1 input */
	uint8_t    *out;			/* results */
	gpu_list	ovf;			/* keys for level 2 and their result positions */
};

/* ---- pass 1: the primary bucket ---------------------------------------- */

template <int SW, int B>
struct ice_level1
{
	typedef gpu_geom<SW, B> G;
	typedef gpu_lane<SW, B> snap;
	static constexpr int W = G::W;
	static constexpr int D = W < 4 ? W : 4;
	static constexpr bool ROLL = false;
	ice_args	a;

	explicit ice_level1(const ice_args &args) : a(args) {}

	/* The layout to compile for (gpu_coop_launch). */
	__host__ __device__ __forceinline__ int layout() const
	{
		return gpu_level_layout(a.lv);
	}
	__device__ __forceinline__ void fix_layout(int layout)
	{
		gpu_level_fix(a.lv, layout);
	}

	__device__ __forceinline__ uint64_t address(uint64_t k) const
	{
		return gpu_level_address(a.lv, a.key_bits, k, 0);
	}
	__device__ __forceinline__ uint64_t want(uint64_t k) const
	{
		return gpu_level_slot(a.lv, a.key_bits, k, 0);
	}
	__device__ __forceinline__ uint32_t begin(uint32_t n, uint32_t *)
	{
		return n;
	}
	__device__ __forceinline__ uint64_t key(uint32_t i) const
	{
		return __ldcs(a.keys + i);	/* read once: keep L2 for the table */
	}
	__device__ __forceinline__ void load(const gpu_tile<W> &g, uint64_t k, snap &s) const
	{
		gpu_lane_load<SW, B>(s, a.lv.slots, address(k), (int) g.thread_rank());
	}
	/* Results in input order; keys for level 2 onto the overflow lists. */
	__device__ __forceinline__ void done(uint32_t i, bool have, uint64_t k, uint8_t r) const
	{
		if (have)
			a.out[i] = r;
		gpu_list_append(a.ovf, have && r == GPU_NEXT, k, i);
	}
};

template <int SW, int B>
struct ice_fop1 : ice_level1<SW, B>
{
	typedef ice_level1<SW, B> L;
	typedef typename L::snap snap;
	typedef gpu_geom<SW, B> G;
	static constexpr int W = L::W;
	explicit ice_fop1(const ice_args &args) : L(args) {}

	/*
	 * Two keys of the tile per round, the rounds a loop (gpu_coop.h).
	 * Each round holds D copies of the claim loop below; unrolled rounds
	 * of 4 keys (the level's default) put 4 copies in the kernel of a
	 * 4-lane tile and 8 in that of an 8-lane one (32-slot buckets of 16-
	 * and 32-bit slots), and that find-or-put ran 3-6% below the kernels
	 * of 2026-11-22.  Rounds of 2 in a loop: 0.96-1.03x (16-bit) and
	 * 1.08-1.14x (32-bit) of those on an H200, puts 1.03x and 1.12x,
	 * tables of smaller buckets unchanged (test/bench/kernels/gpu-results.md).
	 * Moving the first look for the key out of the claim loop, or writing
	 * the first claim out before it, made the kernel slower (0.6-0.9x).
	 */
	static constexpr int D = W < 2 ? W : 2;
	static constexpr bool ROLL = true;

	__device__ __forceinline__ uint8_t run(const gpu_tile<W> &g, uint64_t k, snap &s) const
	{
		const uint64_t addr = this->address(k);
		const uint64_t want = this->want(k);

		for (;;)
		{
			unsigned	empty;
			int			at;
			int			code = 0;

			/* The key is in its primary bucket: done. */
			if (g.any(gpu_lane_eq<SW, B>(s, want) != 0))
				return CPHT_FOUND;
			empty = gpu_lane_eq<SW, B>(s, CPHT_SLOT_EMPTY);
			at = gpu_first_slot<SW, B>(g, empty);
			/* Full primary bucket without the key: only level 2 can hold it. */
			if (at == B)
				return GPU_NEXT;
			code = g.shfl(gpu_claim_slot<SW, B>(g, this->a.lv.slots, addr * B, s, at, want), at / G::S);
			/* Took the first empty slot. */
			if (code == GPU_CLAIM_TOOK)
				return CPHT_PUT;
			/* A concurrent find-or-put of the same key took it first. */
			if (code == GPU_CLAIM_SAME)
				return CPHT_FOUND;
			/* Another key took the slot; the snapshot now shows it: go on. */
		}
	}
};

template <int SW, int B>
struct ice_find1 : ice_level1<SW, B>
{
	typedef ice_level1<SW, B> L;
	typedef typename L::snap snap;
	static constexpr int W = L::W;
	explicit ice_find1(const ice_args &args) : L(args) {}

	__device__ __forceinline__ uint8_t run(const gpu_tile<W> &g, uint64_t k, snap &s) const
	{
		/* Found in the primary bucket. */
		if (g.any(gpu_lane_eq<SW, B>(s, this->want(k)) != 0))
			return 1;
		/* A primary bucket with room: the key never went to level 2. */
		if (g.any(gpu_lane_eq<SW, B>(s, CPHT_SLOT_EMPTY) != 0))
			return 0;
		return GPU_NEXT;
	}
};

template <int SW, int B>
struct ice_erase1 : ice_level1<SW, B>
{
	typedef ice_level1<SW, B> L;
	typedef typename L::snap snap;
	typedef gpu_geom<SW, B> G;
	static constexpr int W = L::W;
	explicit ice_erase1(const ice_args &args) : L(args) {}

	__device__ __forceinline__ uint8_t run(const gpu_tile<W> &g, uint64_t k, snap &s) const
	{
		const uint64_t addr = this->address(k);
		const uint64_t want = this->want(k);
		const uint64_t repl = this->a.undo ? CPHT_SLOT_EMPTY : CPHT_SLOT_TOMBSTONE;

		for (;;)
		{
			unsigned	m = gpu_lane_eq<SW, B>(s, want);
			int			at = gpu_first_slot<SW, B>(g, m);
			int			code = 0;

			if (at == B)
			{
				/*
				 * Not in the primary bucket.  If it has an EMPTY slot the key
				 * never went to level 2 — except while undoing, when slots
				 * empty in any order and a hole proves nothing.
				 */
				if (!this->a.undo && g.any(gpu_lane_eq<SW, B>(s, CPHT_SLOT_EMPTY) != 0))
					return 0;
				return GPU_NEXT;
			}
			code = g.shfl(gpu_claim_slot<SW, B>(g, this->a.lv.slots, addr * B, s, at, repl), at / G::S);
			/* Removed it: say where it was. */
			if (code == GPU_CLAIM_TOOK)
				return CPHT_WHERE(0, at);
			/* A duplicate in the batch removed it first (or a 16-bit
			 * neighbour changed); the snapshot now shows it: look again. */
		}
	}
};

/* ---- pass 2: the two secondary buckets ---------------------------------- */

template <int SW, int B>
struct ice_level2
{
	typedef gpu_geom<SW, B> G;
	struct snap
	{
		gpu_lane<SW, B> b0,
					b1;
	};
	static constexpr int W = G::W;
	static constexpr int D = W < 2 ? W : 2;
	static constexpr bool ROLL = false;
	ice_args	a;
	const uint32_t *smem;		/* prefix sums of the overflow lists */

	explicit ice_level2(const ice_args &args) : a(args), smem(NULL) {}

	/* The layout to compile for (gpu_coop_launch). */
	__host__ __device__ __forceinline__ int layout() const
	{
		return gpu_level_layout(a.lv);
	}
	__device__ __forceinline__ void fix_layout(int layout)
	{
		gpu_level_fix(a.lv, layout);
	}

	__device__ __forceinline__ uint64_t address(uint64_t k, int c) const
	{
		/* c != 0: two choices, so the compiler drops the third seed */
		return gpu_level_address(a.lv, a.key_bits, k, c != 0);
	}
	__device__ __forceinline__ uint64_t want(uint64_t k, int c) const
	{
		return gpu_level_slot(a.lv, a.key_bits, k, c != 0);
	}
	__device__ __forceinline__ uint32_t begin(uint32_t, uint32_t *shared)
	{
		smem = shared;
		return gpu_list_begin(a.ovf, shared);
	}
	__device__ __forceinline__ uint64_t key(uint32_t i) const
	{
		return a.ovf.keys[gpu_list_at(a.ovf, smem, i)];
	}
	/* Both secondary buckets at once: two independent reads in flight. */
	__device__ __forceinline__ void load(const gpu_tile<W> &g, uint64_t k, snap &s) const
	{
		gpu_lane_load<SW, B>(s.b0, a.lv.slots, address(k, 0), (int) g.thread_rank());
		gpu_lane_load<SW, B>(s.b1, a.lv.slots, address(k, 1), (int) g.thread_rank());
	}
	__device__ __forceinline__ void done(uint32_t i, bool have, uint64_t, uint8_t r) const
	{
		if (have)
			a.out[a.ovf.index[gpu_list_at(a.ovf, smem, i)]] = r;
	}
	__device__ __forceinline__ bool holds(const gpu_tile<W> &g, uint64_t k, const snap &s) const
	{
		return g.any((gpu_lane_eq<SW, B>(s.b0, want(k, 0)) | gpu_lane_eq<SW, B>(s.b1, want(k, 1))) != 0);
	}
};

template <int SW, int B>
struct ice_fop2 : ice_level2<SW, B>
{
	typedef ice_level2<SW, B> L;
	typedef typename L::snap snap;
	typedef gpu_geom<SW, B> G;
	static constexpr int W = L::W;
	explicit ice_fop2(const ice_args &args) : L(args) {}

	__device__ __forceinline__ uint8_t run(const gpu_tile<W> &g, uint64_t k, snap &s) const
	{
		for (;;)
		{
			int			load0,
						load1,
						c,
						at,
						code = 0;

			/* The key is in one of its secondary buckets: done. */
			if (this->holds(g, k, s))
				return CPHT_FOUND;
			load0 = gpu_first_slot<SW, B>(g, gpu_lane_eq<SW, B>(s.b0, CPHT_SLOT_EMPTY));
			load1 = gpu_first_slot<SW, B>(g, gpu_lane_eq<SW, B>(s.b1, CPHT_SLOT_EMPTY));
			/* The strictly less full bucket, the second on a tie (Alg. 1 l. 13). */
			c = load0 < load1 ? 0 : 1;
			at = c ? load1 : load0;
			/* The less full bucket is full, so both are: no slot for the key. */
			if (at == B)
				return CPHT_FULL;
			{
				const uint64_t want = this->want(k, c);
				const uint64_t first = this->address(k, c) * B;

				/* Each snapshot by name: c is the same on every lane. */
				code = g.shfl(c ? gpu_claim_slot<SW, B>(g, this->a.lv.slots, first, s.b1, at, want)
							  : gpu_claim_slot<SW, B>(g, this->a.lv.slots, first, s.b0, at, want),
							  at / G::S);
			}
			if (code == GPU_CLAIM_TOOK)
				return CPHT_PUT;
			/* A concurrent find-or-put of the same key took the slot. */
			if (code == GPU_CLAIM_SAME)
				return CPHT_FOUND;
			/* Another key took it; the snapshot now shows it, and the loads
			 * are recomputed from it. */
		}
	}
};

template <int SW, int B>
struct ice_find2 : ice_level2<SW, B>
{
	typedef ice_level2<SW, B> L;
	typedef typename L::snap snap;
	static constexpr int W = L::W;
	explicit ice_find2(const ice_args &args) : L(args) {}

	__device__ __forceinline__ uint8_t run(const gpu_tile<W> &g, uint64_t k, snap &s) const
	{
		return this->holds(g, k, s) ? 1 : 0;
	}
};

template <int SW, int B>
struct ice_erase2 : ice_level2<SW, B>
{
	typedef ice_level2<SW, B> L;
	typedef typename L::snap snap;
	typedef gpu_geom<SW, B> G;
	static constexpr int W = L::W;
	explicit ice_erase2(const ice_args &args) : L(args) {}

	__device__ __forceinline__ uint8_t run(const gpu_tile<W> &g, uint64_t k, snap &s) const
	{
		const uint64_t repl = this->a.undo ? CPHT_SLOT_EMPTY : CPHT_SLOT_TOMBSTONE;

		for (;;)
		{
			int			at0 = gpu_first_slot<SW, B>(g, gpu_lane_eq<SW, B>(s.b0, this->want(k, 0)));
			int			at1 = gpu_first_slot<SW, B>(g, gpu_lane_eq<SW, B>(s.b1, this->want(k, 1)));
			int			c = at0 < B ? 0 : 1;
			int			at = c ? at1 : at0;
			int			code = 0;

			/* In neither secondary bucket: not in the table. */
			if (at == B)
				return 0;
			{
				const uint64_t first = this->address(k, c) * B;

				code = g.shfl(c ? gpu_claim_slot<SW, B>(g, this->a.lv.slots, first, s.b1, at, repl)
							  : gpu_claim_slot<SW, B>(g, this->a.lv.slots, first, s.b0, at, repl),
							  at / G::S);
			}
			if (code == GPU_CLAIM_TOOK)
				return CPHT_WHERE(1 + c, at);
			/* A duplicate removed it first, or a neighbour changed; the
			 * snapshot now shows it: look again. */
		}
	}
};

/* ---- launching ----------------------------------------------------------- */

/* Each operation of this table, for the level's geometry (gpu_coop.h). */
template <template <int, int> class OP>
static cpht_status
launch(cpht_table *t, const ice_args &a, uint32_t n, const char *what)
{
	return gpu_coop_launch_level<OP>(t, a, n, what);
}

size_t
gpu_iceberg_scratch_bytes(uint32_t n)
{
	gpu_carve	c = {NULL, 0};
	gpu_list	ovf;

	gpu_list_carve(&c, &ovf, n, 1);
	return c.off;
}

/*
 * Run pass 1 (P1) over the batch, grouped by primary bucket when that pays,
 * then pass 2 (P2) over the overflow list.
 */
template <template <int, int> class P1, template <int, int> class P2>
static cpht_status
two_passes(cpht_table *t, const uint64_t *dkeys, uint32_t n, uint8_t *dout, int undo, int inserts,
		   const char *what1, const char *what2)
{
	gpu_state  *st = gpu_state_of(t);
	gpu_group	grp;
	gpu_carve	c = {NULL, 0};
	ice_args	a;
	cpht_status rc;

	if (n == 0)
		return CPHT_OK;
	memset(&grp, 0, sizeof(grp));
	memset(&a, 0, sizeof(a));
	grp.bits = gpu_group_bits(t, n, inserts);

	/* Size the temporaries, reserve them, then lay them out for real. */
	for (int pass = 0; pass < 2; pass++)
	{
		gpu_list_carve(&c, &a.ovf, n, 1);
		if (grp.bits)
			gpu_group_carve(&c, &grp, n);
		if (pass == 0)
		{
			rc = gpu_scratch_reserve(t, c.off);
			if (rc != CPHT_OK)
				return rc;
			c.base = st->scratch;
			c.off = 0;
		}
	}
	GPU_TRY(t, cudaMemsetAsync(a.ovf.counts, 0, GPU_LISTS * GPU_LIST_PAD * sizeof(uint32_t), st->comp),
			"clearing counters");

	a.key_bits = t->params.key_bits;
	a.undo = undo;
	a.keys = dkeys;
	a.out = dout;
	if (grp.bits)
	{
		rc = gpu_group_keys(t, &grp, dkeys, n);
		if (rc != CPHT_OK)
			return rc;
		a.keys = grp.keys;
		a.out = grp.res;
	}

	a.lv = t->level[0];
	rc = launch<P1>(t, a, n, what1);
	if (rc != CPHT_OK)
		return rc;

	/* Pass 2 reads the overflow lists; their lengths stay on the device. */
	a.lv = t->level[1];
	rc = launch<P2>(t, a, n, what2);
	if (rc != CPHT_OK)
		return rc;

	if (grp.bits)
		return gpu_group_results(t, &grp, n, dout);
	return CPHT_OK;
}

cpht_status
gpu_iceberg_fop(cpht_table *t, const uint64_t *dkeys, uint32_t n, uint8_t *dstatus)
{
	return two_passes<ice_fop1, ice_fop2>(t, dkeys, n, dstatus, 0, 1,
										  "iceberg find-or-put, level 1",
										  "iceberg find-or-put, level 2");
}

cpht_status
gpu_iceberg_find(cpht_table *t, const uint64_t *dkeys, uint32_t n, uint8_t *dfound)
{
	return two_passes<ice_find1, ice_find2>(t, dkeys, n, dfound, 0, 0,
											"iceberg find, level 1", "iceberg find, level 2");
}

cpht_status
gpu_iceberg_erase(cpht_table *t, const uint64_t *dkeys, uint32_t n, uint8_t *dpresent, int to_empty)
{
	return two_passes<ice_erase1, ice_erase2>(t, dkeys, n, dpresent, to_empty, 0,
											  "iceberg erase, level 1", "iceberg erase, level 2");
}
