/*
 * gpu_cuckoo.cu — the compact bucketed cuckoo table on the GPU: put with a
 * bounded eviction chain (Alg. 4 of the paper), find with the early stop,
 * erase by tombstone, and the sort-based find-or-put.
 *
 * Semantics match kernels/cpu/cpu_cuckoo.c: CPHT_CUCKOO_CHOICES hash choices;
 * put takes the first free slot (EMPTY or TOMBSTONE; EMPTY only while the
 * undo log holds deleted keys, whose tombstones are kept) of the bucket,
 * else evicts the slot mix64(key ^ step << 40 ^ seed3) mod B (while
 * tombstones are kept, the first live slot from there on, cyclically) and
 * carries the evicted key to its next choice; erase reports where the key
 * was (CPHT_WHERE); find stops at the first bucket with an
 * EMPTY slot.  Put and find never run in one kernel: an eviction takes a
 * key out of the table for a moment.
 */
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <string.h>

#include "gpu/gpu_coop.h"
#include "gpu/gpu_ops.h"

struct ck_args
{
	layout_level lv;
	int			key_bits;
	int			max_evictions;
	int			keep;			/* put: tombstones are kept (not free) */
	uint8_t		hit;			/* find: what a present key reports */
	uint8_t		miss;			/* ... and an absent one */
	const uint64_t *keys;		/* input keys, or NULL: the keys of `list` */
	gpu_list	list;
	uint8_t    *out;
	uint64_t   *homeless;
	uint32_t   *homeless_count;
};

template <int SW, int B>
struct ck_base
{
	typedef gpu_geom<SW, B> G;
	typedef gpu_lane<SW, B> snap;
	static constexpr int W = G::W;
	static constexpr int D = W < 4 ? W : 4;
	static constexpr bool ROLL = false;
	ck_args		a;
	const uint32_t *smem;		/* prefix sums of the input lists */

	explicit ck_base(const ck_args &args) : a(args), smem(NULL) {}

	/* The layout to compile for (gpu_coop_launch); kept tombstones take
	 * the instance for any, so that their eviction path is not compiled
	 * into every put. */
	__host__ __device__ __forceinline__ int layout() const
	{
		return a.keep ? GPU_LAYOUT_ANY : gpu_level_layout(a.lv);
	}
	__device__ __forceinline__ void fix_layout(int layout)
	{
		gpu_level_fix(a.lv, layout);
		if (layout != GPU_LAYOUT_ANY)
			a.keep = 0;
	}

	__device__ __forceinline__ uint64_t address(uint64_t k, int c) const
	{
		return gpu_level_address(a.lv, a.key_bits, k, c);
	}
	__device__ __forceinline__ uint64_t want(uint64_t k, int c) const
	{
		return gpu_level_slot(a.lv, a.key_bits, k, c);
	}
	__device__ __forceinline__ uint32_t begin(uint32_t n, uint32_t *shared)
	{
		/* Input from a key array, or from lists filled on the device. */
		if (a.keys)
			return n;
		smem = shared;
		return gpu_list_begin(a.list, shared);
	}
	__device__ __forceinline__ uint64_t key(uint32_t i) const
	{
		return a.keys ? __ldcs(a.keys + i) : a.list.keys[gpu_list_at(a.list, smem, i)];
	}
	/* The first read of a key is its first choice's bucket. */
	__device__ __forceinline__ void load(const gpu_tile<W> &g, uint64_t k, snap &s) const
	{
		gpu_lane_load<SW, B>(s, a.lv.slots, address(k, 0), (int) g.thread_rank());
	}
	__device__ __forceinline__ void done(uint32_t i, bool have, uint64_t, uint8_t r) const
	{
		if (have && a.out)
			a.out[i] = r;
	}
};

template <int SW, int B>
struct ck_find : ck_base<SW, B>
{
	typedef ck_base<SW, B> L;
	typedef typename L::snap snap;
	static constexpr int W = L::W;
	explicit ck_find(const ck_args &args) : L(args) {}

	__device__ __forceinline__ uint8_t run(const gpu_tile<W> &g, uint64_t k, snap &s) const
	{
		for (int c = 0; c < CPHT_CUCKOO_CHOICES; c++)
		{
			if (c > 0)
				gpu_lane_load<SW, B>(s, this->a.lv.slots, this->address(k, c), (int) g.thread_rank());
			/* Found at this choice. */
			if (g.any(gpu_lane_eq<SW, B>(s, this->want(k, c)) != 0))
				return this->a.hit;
			/* A bucket with an EMPTY slot: no key went past it. */
			if (g.any(gpu_lane_eq<SW, B>(s, CPHT_SLOT_EMPTY) != 0))
				return this->a.miss;
		}
		return this->a.miss;
	}
};

template <int SW, int B>
struct ck_erase : ck_base<SW, B>
{
	typedef ck_base<SW, B> L;
	typedef typename L::snap snap;
	typedef gpu_geom<SW, B> G;
	static constexpr int W = L::W;
	explicit ck_erase(const ck_args &args) : L(args) {}

	__device__ __forceinline__ uint8_t run(const gpu_tile<W> &g, uint64_t k, snap &s) const
	{
		int			c = 0;

		while (c < CPHT_CUCKOO_CHOICES)
		{
			const uint64_t want = this->want(k, c);
			int			at = gpu_first_slot<SW, B>(g, gpu_lane_eq<SW, B>(s, want));
			int			code = 0;

			if (at < B)
			{
				code = g.shfl(gpu_claim_slot<SW, B>(g, this->a.lv.slots, this->address(k, c) * B, s, at,
													CPHT_SLOT_TOMBSTONE), at / G::S);
				/* Removed it: say where it was. */
				if (code == GPU_CLAIM_TOOK)
					return CPHT_WHERE(c, at);
				/* A duplicate removed it first, or a neighbour changed; the
				 * snapshot now shows it: look again. */
				continue;
			}
			/* A bucket with an EMPTY slot: no key went past it. */
			if (g.any(gpu_lane_eq<SW, B>(s, CPHT_SLOT_EMPTY) != 0))
				return 0;
			if (++c < CPHT_CUCKOO_CHOICES)
				gpu_lane_load<SW, B>(s, this->a.lv.slots, this->address(k, c), (int) g.thread_rank());
		}
		return 0;
	}
};

template <int SW, int B>
struct ck_put : ck_base<SW, B>
{
	typedef ck_base<SW, B> L;
	typedef typename L::snap snap;
	typedef gpu_geom<SW, B> G;
	static constexpr int W = L::W;
	/* The eviction chain is long code: one copy per read-ahead key, not
	 * one per key of the tile (gpu_coop_kernel). */
	static constexpr bool ROLL = true;
	explicit ck_put(const ck_args &args) : L(args) {}

	__device__ __forceinline__ uint8_t run(const gpu_tile<W> &g, uint64_t k, snap &s) const
	{
		const int	cb = this->a.lv.choice_bits;
		int			c = 0;

		for (int step = 0; step < this->a.max_evictions; step++)
		{
			const uint64_t address = this->address(k, c);
			const uint64_t want = this->want(k, c);
			int			at = gpu_first_slot<SW, B>(g, this->a.keep ? gpu_lane_eq<SW, B>(s, CPHT_SLOT_EMPTY)
												   : gpu_lane_free<SW, B>(s));
			uint64_t	old = 0;

			if (at < B)
			{
				int			code = 0;

				code = g.shfl(gpu_claim_slot<SW, B>(g, this->a.lv.slots, address * B, s, at, want), at / G::S);
				/* Took a free slot: the chain ends here. */
				if (code == GPU_CLAIM_TOOK)
					return CPHT_PUT;
				/* Lost it to another put; the snapshot now shows the winner:
				 * look again (counts as a step, as on the CPU). */
				continue;
			}

			/* The bucket is full: evict a pseudo-random victim. */
			at = (int) (layout_mix64(k ^ ((uint64_t) step << 40) ^ this->a.lv.seeds[3]) % (uint64_t) B);
			if (this->a.keep)
			{
				/* Live slots only (puts never make a live slot free): the
				 * first from `at` on, cyclically; none: the next choice. */
				unsigned	from = 0,
							live = 0;
				int			v;

#pragma unroll
				for (int u = 0; u < G::S; u++)
				{
					unsigned	l = (unsigned) slot_is_live(s.s[u]);

					live |= l << u;
					from |= (l && (int) g.thread_rank() * G::S + u >= at) << u;
				}
				v = gpu_first_slot<SW, B>(g, from);
				if (v >= B)
					v = gpu_first_slot<SW, B>(g, live);
				if (v >= B)
				{
					c = layout_next_choice(c, CPHT_CUCKOO_CHOICES);
					gpu_lane_load<SW, B>(s, this->a.lv.slots, this->address(k, c), (int) g.thread_rank());
					continue;
				}
				at = v;
			}
			if ((int) g.thread_rank() == at / G::S)
				old = gpu_slot_swap<SW>(this->a.lv.slots, address * B + at, want);
			old = g.shfl(old, at / G::S);
			/* The slot had just been freed: nobody was evicted. */
			if (!slot_is_live(old))
				return CPHT_PUT;
			/* Continue with the evicted key at its next choice. */
			c = slot_choice(old, cb);
			k = layout_key(gpu_level_perm(this->a.lv, this->a.key_bits, c), address, slot_remainder(old, cb));
			c = layout_next_choice(c, CPHT_CUCKOO_CHOICES);
			gpu_lane_load<SW, B>(s, this->a.lv.slots, this->address(k, c), (int) g.thread_rank());
		}
		/* The chain ran out of steps: k (maybe an older key) has no slot. */
		if ((int) g.thread_rank() == 0)
			this->a.homeless[atomicAdd(this->a.homeless_count, 1u)] = k;
		return CPHT_PUT;
	}
};

/* ---- launching ----------------------------------------------------------- */

/* Each operation of this table, for the level's geometry (gpu_coop.h). */
template <template <int, int> class OP>
static cpht_status
launch(cpht_table *t, const ck_args &a, uint32_t n, const char *what)
{
	return gpu_coop_launch_level<OP>(t, a, n, what);
}

static ck_args
args_of(const cpht_table *t)
{
	ck_args		a;

	memset(&a, 0, sizeof(a));
	a.lv = t->level[0];
	a.key_bits = t->params.key_bits;
	a.max_evictions = t->params.max_evictions > 0 ? t->params.max_evictions : CPHT_DEFAULT_MAX_EVICTIONS;
	a.keep = t->keep_tombstones;
	a.hit = 1;
	a.miss = 0;
	return a;
}

/* Find with these outputs, grouped by bucket when the batch is large. */
static cpht_status
find_as(cpht_table *t, const uint64_t *dkeys, uint32_t n, uint8_t *dout, uint8_t hit, uint8_t miss)
{
	gpu_state  *st = gpu_state_of(t);
	ck_args		a = args_of(t);
	gpu_group	grp;
	gpu_carve	c = {NULL, 0};
	cpht_status rc;

	memset(&grp, 0, sizeof(grp));
	/* Its find step reads only; the put step takes distinct keys in sorted
	 * order, already grouped by nothing useful. */
	grp.bits = gpu_group_bits(t, n, 0);
	a.hit = hit;
	a.miss = miss;
	a.keys = dkeys;
	a.out = dout;
	if (grp.bits)
	{
		gpu_group_carve(&c, &grp, n);
		rc = gpu_scratch_reserve(t, c.off);
		if (rc != CPHT_OK)
			return rc;
		c.base = st->scratch;
		c.off = 0;
		gpu_group_carve(&c, &grp, n);
		rc = gpu_group_keys(t, &grp, dkeys, n);
		if (rc != CPHT_OK)
			return rc;
		a.keys = grp.keys;
		a.out = grp.res;
	}
	rc = launch<ck_find>(t, a, n, "cuckoo find");
	if (rc == CPHT_OK && grp.bits)
		rc = gpu_group_results(t, &grp, n, dout);
	return rc;
}

cpht_status
gpu_cuckoo_find(cpht_table *t, const uint64_t *dkeys, uint32_t n, uint8_t *dfound)
{
	return find_as(t, dkeys, n, dfound, 1, 0);
}

cpht_status
gpu_cuckoo_erase(cpht_table *t, const uint64_t *dkeys, uint32_t n, uint8_t *dpresent)
{
	ck_args		a = args_of(t);

	a.keys = dkeys;
	a.out = dpresent;
	return launch<ck_erase>(t, a, n, "cuckoo erase");
}

cpht_status
gpu_cuckoo_put(cpht_table *t, const uint64_t *dkeys, uint32_t n,
			   uint64_t *dhomeless, uint32_t *dhomeless_count)
{
	ck_args		a = args_of(t);

	a.keys = dkeys;
	a.homeless = dhomeless;
	a.homeless_count = dhomeless_count;
	return launch<ck_put>(t, a, n, "cuckoo put");
}

/* Put the keys of lists filled on the device (at most n of them). */
static cpht_status
put_lists(cpht_table *t, const gpu_list &list, uint32_t n, uint64_t *dhomeless, uint32_t *dhomeless_count)
{
	ck_args		a = args_of(t);

	a.keys = NULL;
	a.list = list;
	a.homeless = dhomeless;
	a.homeless_count = dhomeless_count;
	return launch<ck_put>(t, a, n, "cuckoo put");
}

/* ---- sort-based find-or-put ---------------------------------------------- */

__global__ void __launch_bounds__(GPU_BLOCK)
ck_gather(const uint64_t *keys, const uint32_t *index, uint32_t m, uint64_t *out)
{
	for (size_t j = (size_t) blockIdx.x * GPU_BLOCK + threadIdx.x; j < m; j += (size_t) gridDim.x * GPU_BLOCK)
		out[j] = keys[index[j]];
}

/*
 * Sorted absent keys: the first of each run of equal keys (its first
 * occurrence in the batch, the sort being stable) stays PUT and joins the
 * put list; the others become FOUND.
 */
__global__ void __launch_bounds__(GPU_BLOCK)
ck_mark(const uint64_t *sorted, const uint32_t *index, uint32_t m, uint8_t *status, gpu_list puts)
{
	/* The grid covers m rounded up to whole blocks: every warp lane reaches
	 * the warp-wide append below. */
	const uint32_t j = blockIdx.x * GPU_BLOCK + threadIdx.x;
	const bool	have = j < m;
	const uint64_t k = have ? sorted[j] : 0;
	const bool	head = have && (j == 0 || sorted[j - 1] != k);

	if (have && !head)
		status[index[j]] = CPHT_FOUND;
	gpu_list_append(puts, head, k, j);
}

cpht_status
gpu_cuckoo_fop(cpht_table *t, const uint64_t *dkeys, uint32_t n, uint8_t *dstatus,
			   uint64_t *homeless, size_t *nhomeless)
{
	gpu_state  *st = gpu_state_of(t);
	gpu_carve	c = {NULL, 0};
	uint32_t   *sel_index = NULL,
			   *sorted_index = NULL,
			   *counts = NULL;
	uint64_t   *sel_keys = NULL,
			   *sorted_keys = NULL,
			   *dhomeless = NULL;
	gpu_list	puts;
	void	   *tmp = NULL;
	size_t		select_bytes = 0,
				sort_bytes = 0,
				tmp_bytes;
	uint32_t	m,
				h;
	thrust::counting_iterator<uint32_t> positions(0);
	cpht_status rc;

	if (n == 0)
		return CPHT_OK;

	/* 1. Find: present keys are FOUND, absent ones PUT for now. */
	rc = find_as(t, dkeys, n, dstatus, CPHT_FOUND, CPHT_PUT);
	if (rc != CPHT_OK)
		return rc;

	/* Temporaries (after the find, whose grouping used the same scratch). */
	(void) cub::DeviceSelect::Flagged(NULL, select_bytes, positions, dstatus, sel_index, counts, (int) n);
	(void) cub::DeviceRadixSort::SortPairs(NULL, sort_bytes, sel_keys, sorted_keys, sel_index,
										   sorted_index, (int) n, 0, table_sort_bits(t));
	tmp_bytes = select_bytes > sort_bytes ? select_bytes : sort_bytes;
	for (int pass = 0; pass < 2; pass++)
	{
		counts = carve<uint32_t>(&c, 2);	/* absent keys, homeless keys */
		sel_index = carve<uint32_t>(&c, n);
		sorted_index = carve<uint32_t>(&c, n);
		sel_keys = carve<uint64_t>(&c, n);
		sorted_keys = carve<uint64_t>(&c, n);
		gpu_list_carve(&c, &puts, n, 0);
		dhomeless = carve<uint64_t>(&c, n);
		tmp = carve<char>(&c, tmp_bytes);
		if (pass == 0)
		{
			rc = gpu_scratch_reserve(t, c.off);
			if (rc != CPHT_OK)
				return rc;
			c.base = st->scratch;
			c.off = 0;
		}
	}
	GPU_TRY(t, cudaMemsetAsync(counts, 0, 2 * sizeof(uint32_t), st->comp), "clearing counters");

	/* 2. The absent keys' positions, in input order. */
	GPU_TRY(t, cub::DeviceSelect::Flagged(tmp, select_bytes, positions, dstatus, sel_index, counts,
										  (int) n, st->comp), "selecting absent keys");
	GPU_TRY(t, cudaMemcpyAsync(st->pin_count, counts, sizeof(uint32_t), cudaMemcpyDeviceToHost, st->comp),
			"reading the number of absent keys");
	GPU_TRY(t, cudaStreamSynchronize(st->comp), "waiting for the find");
	m = st->pin_count[0];
	/* Every key was present: nothing to insert. */
	if (m == 0)
		return CPHT_OK;

	/* 3. Sort them with their positions (stable: first occurrences first). */
	ck_gather<<<gpu_grid(st, m, 8), GPU_BLOCK, 0, st->comp>>>(dkeys, sel_index, m, sel_keys);
	GPU_LAUNCHED(t, "gathering absent keys");
	GPU_TRY(t, cub::DeviceRadixSort::SortPairs(tmp, sort_bytes, sel_keys, sorted_keys, sel_index,
											   sorted_index, (int) m, 0, table_sort_bits(t), st->comp),
			"sorting absent keys");

	/* 4. One PUT per distinct key; the distinct keys form the put lists. */
	GPU_TRY(t, cudaMemsetAsync(puts.counts, 0, GPU_LISTS * GPU_LIST_PAD * sizeof(uint32_t), st->comp),
			"clearing counters");
	ck_mark<<<(m + GPU_BLOCK - 1) / GPU_BLOCK, GPU_BLOCK, 0, st->comp>>>(sorted_keys, sorted_index, m, dstatus, puts);
	GPU_LAUNCHED(t, "marking first occurrences");

	/* 5. Put them (Alg. 4); chains that run out leave homeless keys. */
	rc = put_lists(t, puts, m, dhomeless, counts + 1);
	if (rc != CPHT_OK)
		return rc;
	GPU_TRY(t, cudaMemcpyAsync(st->pin_count + 1, counts + 1, sizeof(uint32_t), cudaMemcpyDeviceToHost, st->comp),
			"reading the number of homeless keys");
	GPU_TRY(t, cudaStreamSynchronize(st->comp), "waiting for the put");
	h = st->pin_count[1];
	if (h > 0)
	{
		GPU_TRY(t, cudaMemcpy(homeless + *nhomeless, dhomeless, h * sizeof(uint64_t), cudaMemcpyDeviceToHost),
				"reading homeless keys");
		*nhomeless += h;
	}
	return CPHT_OK;
}
