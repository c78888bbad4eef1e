/*
 * gpu_bench.cu — throughput of the GPU tables, kernel time only, in the
 * paper's setting (section 5.1): 2^27 primary and 2^24 secondary slots
 * (iceberg) or 2^27 slots (cuckoo), keys drawn uniformly from [0, 2^37),
 * keys already in device memory, CUDA events around the operation, the
 * median of several repetitions (the permutations change between them,
 * as in the paper).
 *
 *   put   fill an empty table to `fill` with unique keys (iceberg: its
 *         find-or-put; cuckoo: Alg. 4 directly, as the paper)
 *   find  2^26 queries on a table filled to `fill`; `pos` of them hit
 *   fop   the paper's find-or-put: table prefilled to `pos`, then as many
 *         keys as the table has slots, mixing present and new keys with
 *         duplicates, ending at `fill`
 *   fop50 cuCollections' insert_and_find with 50% new keys: table
 *         prefilled to fill/2, then fill * slots distinct keys, half of
 *         them present, ending at `fill`
 *
 * Each figure is also given as a share of the device's ceiling, measured
 * here first: random 32-byte sector reads (finds, find-or-puts) and random
 * 8-byte compare-and-swaps (puts).
 *
 * Output: CSV on stdout (or --csv FILE) and a log on stderr.
 * Options: --quick (fewer configurations), --reps N, --tables iceberg|cuckoo|all,
 *          --modes direct,grouped,fine (which batch handling to time: as it
 *          comes, grouped by bucket in quarter-L2 or sixteenth-L2 slices),
 *          --only KIND:BITS:BUCKET (one configuration, e.g. iceberg:32:8),
 *          --fills F,F,... (subset of the fills), --no-ceilings, --no-e2e,
 *          --e2e-only (only the end-to-end measurement, with --no-ceilings).
 *          --reps 0 runs each measurement once, untimed (for profilers).
 */
#include <cub/device/device_radix_sort.cuh>
#include <thrust/count.h>
#include <thrust/execution_policy.h>

#include <algorithm>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vector>

#include "gpu/gpu_ops.h"

#define KEY_BITS 37
#define PRIMARY_SLOTS ((uint64_t) 1 << 27)
#define SECONDARY_SLOTS ((uint64_t) 1 << 24)
#define QUERIES ((uint64_t) 1 << 26)

#define TRY(call) \
	do { \
		cpht_status s_ = (call); \
		if (s_ != CPHT_OK) \
		{ \
			fprintf(stderr, "%s:%d: %s: status %d: %s\n", __FILE__, __LINE__, #call, (int) s_, cpht_table_error(t)); \
			exit(1); \
		} \
	} while (0)

#include "bench_keys.cuh"

/* ---- ceilings ---------------------------------------------------------- */

/* Each thread reads VECS consecutive 16-byte vectors at a random aligned
 * place: VECS = 2 is one random 32-byte sector, 1 half a sector. */
template <int VECS>
__global__ void __launch_bounds__(256)
ceil_read(const uint4 *buf, uint64_t mask, uint64_t n, uint64_t seed, unsigned *sink)
{
	unsigned	acc = 0;

	for (uint64_t j = blockIdx.x * (uint64_t) blockDim.x + threadIdx.x; j < n; j += (uint64_t) gridDim.x * blockDim.x)
	{
		const uint4 *p = buf + (layout_mix64(j ^ seed) & mask) * (uint64_t) VECS;
		uint4		x[VECS];

#pragma unroll
		for (int v = 0; v < VECS; v++)
			x[v] = __ldcg(p + v);
#pragma unroll
		for (int v = 0; v < VECS; v++)
			acc ^= x[v].x ^ x[v].w;
	}
	if (acc == 0x9e3779b9u)
		atomicAdd(sink, 1u);
}

/* A tile of LANES lanes reads LANES * 16 random aligned bytes, 16 a lane,
 * in one instruction: 2 lanes = one 32-byte sector (how a bucket of 32
 * bytes is read), 8 lanes = one 128-byte line. */
template <int LANES>
__global__ void __launch_bounds__(256)
ceil_tile(const uint4 *buf, uint64_t mask, uint64_t n, uint64_t seed, unsigned *sink)
{
	unsigned	acc = 0;

	for (uint64_t j = blockIdx.x * (uint64_t) blockDim.x + threadIdx.x; j < n * LANES; j += (uint64_t) gridDim.x * blockDim.x)
	{
		uint4		x = __ldcg(buf + (layout_mix64((j / LANES) ^ seed) & mask) * LANES + (j % LANES));

		acc ^= x.x ^ x.w;
	}
	if (acc == 0x9e3779b9u)
		atomicAdd(sink, 1u);
}

__global__ void
ceil_cas(unsigned long long *buf, uint64_t mask, uint64_t n, uint64_t seed)
{
	for (uint64_t j = blockIdx.x * (uint64_t) blockDim.x + threadIdx.x; j < n; j += (uint64_t) gridDim.x * blockDim.x)
		atomicCAS(buf + (layout_mix64(j ^ seed) & mask), 0ull, j | 1);
}

/* ---- timing helpers ------------------------------------------------------ */

static cudaEvent_t ev0,
			ev1;
static int	check_failures = 0;	/* result checks that failed (reported, not fatal) */

static double
elapsed_ms(cudaStream_t s)
{
	float		ms = 0;

	CK(cudaEventRecord(ev1, s));
	CK(cudaEventSynchronize(ev1));
	CK(cudaEventElapsedTime(&ms, ev0, ev1));
	return ms;
}

typedef struct ceilings
{
	double		sector;			/* G random 32-byte sectors / s */
	double		half;			/* G random 16-byte reads / s */
	double		line;			/* G random 128-byte lines / s */
	double		cas;			/* G random 8-byte CAS / s */
	double		sector_small;	/* sectors, from a 512 MB buffer (a table's size) */
	double		sector_thread;	/* sectors, one thread reading both halves */
} ceilings;

static ceilings
measure_ceilings(void)
{
	const uint64_t bytes = (uint64_t) 8 << 30;
	const uint64_t n = (uint64_t) 1 << 28;
	char	   *buf;
	unsigned   *sink;
	ceilings	c;
	cudaStream_t s = 0;

	CK(cudaMalloc(&buf, bytes));
	CK(cudaMalloc(&sink, sizeof(unsigned)));
	CK(cudaMemset(buf, 0x5a, bytes));
	for (int kind = 0; kind < 6; kind++)
	{
		std::vector<double> t;

		for (int rep = 0; rep < 4; rep++)
		{
			CK(cudaEventRecord(ev0, s));
			if (kind == 0)
				ceil_tile<2><<<grid_for(n * 2), 256, 0, s>>>((const uint4 *) buf, (bytes / 32) - 1, n, rep, sink);
			else if (kind == 1)
				ceil_read<1><<<grid_for(n), 256, 0, s>>>((const uint4 *) buf, (bytes / 16) - 1, n, rep, sink);
			else if (kind == 2)
				ceil_tile<8><<<grid_for(n * 8), 256, 0, s>>>((const uint4 *) buf, (bytes / 128) - 1, n, rep, sink);
			else if (kind == 4)
				ceil_tile<2><<<grid_for(n * 2), 256, 0, s>>>((const uint4 *) buf, ((uint64_t) 512 << 20) / 32 - 1, n, rep, sink);
			else if (kind == 5)
				ceil_read<2><<<grid_for(n), 256, 0, s>>>((const uint4 *) buf, (bytes / 32) - 1, n, rep, sink);
			else
			{
				/* Successful CASes (they dirty their sector), as inserts do. */
				if (rep == 0)
					CK(cudaMemset(buf, 0, bytes));
				ceil_cas<<<grid_for(n), 256, 0, s>>>((unsigned long long *) buf, (bytes / 8) - 1, n, rep);
			}
			CK(cudaGetLastError());
			if (rep > 0)
				t.push_back(elapsed_ms(s));
			else
				CK(cudaDeviceSynchronize());
		}
		double		rate = (double) n / (median(t) * 1e6);

		if (kind == 0)
			c.sector = rate;
		else if (kind == 1)
			c.half = rate;
		else if (kind == 2)
			c.line = rate;
		else if (kind == 3)
			c.cas = rate;
		else if (kind == 4)
			c.sector_small = rate;
		else
			c.sector_thread = rate;
	}
	CK(cudaFree(buf));
	CK(cudaFree(sink));
	return c;
}

/* ---- the table benchmark --------------------------------------------------- */

typedef struct tcfg
{
	cpht_kind	kind;
	int			sw0,
				sw1,
				b0,
				b1;
} tcfg;

static const double all_fills[] = {0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95};
static std::vector<double> fills(all_fills, all_fills + 8);
static const double find_pos[] = {0, 0.5, 0.75, 1};
static const double fop_pos[] = {0, 0.5, 0.75};

typedef struct bench
{
	FILE	   *csv;
	char		device[128];
	char		date[32];
	ceilings	ceil;
	int			reps;
	int			modes[3];		/* GPU_GROUP_OFF, _ON, _FINE to time */
	int			nmodes;
	/* device buffers */
	uint64_t   *keys;			/* up to all slots */
	uint64_t   *keys2;
	uint32_t   *rank;
	uint32_t   *rank2;
	uint64_t   *queries;
	uint8_t    *out;
	uint64_t   *dhomeless;
	uint32_t   *dcount;
	unsigned long long *dhits;
	void	   *sort_tmp;
	size_t		sort_bytes;
	uint64_t   *homeless;		/* host */
} bench;

static uint64_t
total_slots(const tcfg *c)
{
	return c->kind == CPHT_ICEBERG ? PRIMARY_SLOTS + SECONDARY_SLOTS : PRIMARY_SLOTS;
}

static void
set_seed(cpht_table *t, uint64_t seed)
{
	for (int l = 0; l < t->levels; l++)
		for (int c = 0; c < 4; c++)
			t->level[l].seeds[c] = layout_choice_seed(seed, l, c);
}

static void
clear_table(cpht_table *t)
{
	for (int l = 0; l < t->levels; l++)
		CK(cudaMemset(t->level[l].slots, 0,
					  t->level[l].buckets * t->level[l].bucket_slots * (t->level[l].slot_bits / 8)));
	CK(cudaDeviceSynchronize());
}

static uint64_t
count_eq(const uint8_t *d, uint64_t n, uint8_t v)
{
	return (uint64_t) thrust::count(thrust::device, d, d + n, v);
}

/*
 * Insert unique keys (prefill, or the timed put when `times` is given: the
 * events bracket the operation alone).  Returns 0 if the table ran out of
 * room.
 */
static int
insert_unique(bench *b, cpht_table *t, const uint64_t *dkeys, uint64_t n, std::vector<double> *times = NULL)
{
	cudaStream_t s = gpu_state_of(t)->comp;
	uint32_t	h = 0;

	if (n == 0)
		return 1;
	CK(cudaMemset(b->dcount, 0, sizeof(uint32_t)));
	CK(cudaDeviceSynchronize());
	CK(cudaEventRecord(ev0, s));
	if (t->params.kind == CPHT_ICEBERG)
		TRY(gpu_iceberg_fop(t, dkeys, (uint32_t) n, b->out));
	else
		TRY(gpu_cuckoo_put(t, dkeys, (uint32_t) n, b->dhomeless, b->dcount));
	if (times)
		times->push_back(elapsed_ms(s));
	CK(cudaDeviceSynchronize());
	if (t->params.kind == CPHT_ICEBERG)
		return count_eq(b->out, n, CPHT_FULL) == 0;
	CK(cudaMemcpy(&h, b->dcount, sizeof(h), cudaMemcpyDeviceToHost));
	return h == 0;
}

/* The find-or-put of the table's kind, timed when `times` is given.
 * Returns 0 if a cuckoo chain left a key homeless. */
static int
timed_fop(bench *b, cpht_table *t, const uint64_t *dkeys, uint64_t n, std::vector<double> *times)
{
	cudaStream_t s = gpu_state_of(t)->comp;
	size_t		nh = 0;

	CK(cudaDeviceSynchronize());
	CK(cudaEventRecord(ev0, s));
	if (t->params.kind == CPHT_ICEBERG)
		TRY(gpu_iceberg_fop(t, dkeys, (uint32_t) n, b->out));
	else
		TRY(gpu_cuckoo_fop(t, dkeys, (uint32_t) n, b->out, b->homeless, &nh));
	if (times)
		times->push_back(elapsed_ms(s));
	CK(cudaDeviceSynchronize());
	return nh == 0;
}

/*
 * The repetitions of a timed find-or-put: each fills a cleared table with
 * the `prefill` unique keys in b->queries, then times find-or-put of the
 * n keys in b->keys (all but the first repetition), and checks that it put
 * `puts` keys and found no table full.  0 when a repetition failed.
 */
static int
fop_reps(bench *b, cpht_table *t, uint64_t prefill, uint64_t n, uint64_t puts, uint64_t seed,
		 const char *what, std::vector<double> *tf)
{
	int			ok = 1;

	for (int rep = 0; rep <= b->reps && ok; rep++)
	{
		set_seed(t, seed + rep);
		clear_table(t);
		ok = insert_unique(b, t, b->queries, prefill);
		ok = ok && timed_fop(b, t, b->keys, n, rep > 0 ? tf : NULL);
		if (ok)
		{
			uint64_t	got = count_eq(b->out, n, CPHT_PUT);

			ok = count_eq(b->out, n, CPHT_FULL) == 0;
			if (ok && got != puts)
			{
				fprintf(stderr, "CHECK FAILED: %s: %llu PUT, %llu expected\n",
						what, (unsigned long long) got, (unsigned long long) puts);
				check_failures++;
			}
		}
	}
	return ok;
}

static void
shuffle(bench *b, uint64_t *keys, uint32_t *rank, uint64_t n)
{
	size_t		need = 0;

	CK(cub::DeviceRadixSort::SortPairs(NULL, need, rank, b->rank2, keys, b->keys2, (int) n));
	if (need > b->sort_bytes)
	{
		if (b->sort_tmp)
			CK(cudaFree(b->sort_tmp));
		CK(cudaMalloc(&b->sort_tmp, need));
		b->sort_bytes = need;
	}
	CK(cub::DeviceRadixSort::SortPairs(b->sort_tmp, need, rank, b->rank2, keys, b->keys2, (int) n));
	CK(cudaMemcpy(keys, b->keys2, n * sizeof(uint64_t), cudaMemcpyDeviceToDevice));
}

static const char *
mode_name(int mode)
{
	return mode == GPU_GROUP_ON ? "grouped" : mode == GPU_GROUP_FINE ? "fine" : "direct";
}

static void
emit(bench *b, const tcfg *c, const char *op, double pos, double fill, int mode, double gps,
	 double ms, uint64_t n, int ok)
{
	double		ceiling = strcmp(op, "put") == 0 ? b->ceil.cas : b->ceil.sector;
	char		posbuf[16];

	if (strcmp(op, "put") == 0 || strcmp(op, "fop50") == 0)
		snprintf(posbuf, sizeof(posbuf), "-");
	else
		snprintf(posbuf, sizeof(posbuf), "%g", pos);
	fprintf(b->csv, "%s,%s,%s,%s,%s,%d,%d/%d,%d,%.2f,%s,%.3f,%.3f,%llu,%.3f,%d\n",
			b->date, b->device, c->kind == CPHT_ICEBERG ? "iceberg" : "cuckoo", op, posbuf,
			c->sw0, c->b0, c->kind == CPHT_ICEBERG ? c->b1 : 0, c->kind == CPHT_ICEBERG ? c->sw1 : 0,
			fill, mode_name(mode), ok ? gps : 0.0, ok ? ms : 0.0,
			(unsigned long long) n, ok ? gps / ceiling : 0.0, ok);
	fflush(b->csv);
	fprintf(stderr, "  %-7s %-5s pos %-4s fill %.2f %-7s %8.2f G/s  (%.3f ms, %.0f%% of ceiling)%s\n",
			c->kind == CPHT_ICEBERG ? "iceberg" : "cuckoo", op, posbuf, fill,
			mode_name(mode), ok ? gps : 0.0, ms,
			ok ? 100.0 * gps / ceiling : 0.0, ok ? "" : "  FULL");
}

/*
 * One fill: put; finds on the filled table; fops from each `pos`; fop50.
 * Returns 0 when the put ran out of room (higher fills will too).
 */
static int
bench_fill(bench *b, cpht_table *t, const tcfg *c, double fill, int mode)
{
	const uint64_t total = total_slots(c);
	const uint64_t u = (uint64_t) (fill * (double) total);
	const uint64_t salt = 0x1234567;
	cudaStream_t s = gpu_state_of(t)->comp;
	int			put_ok = 1;

	gpu_set_grouping(t, mode);

	/* put, then find on the filled table (per repetition: new permutations) */
	{
		std::vector<double> tput;
		std::vector<double> tfind[4];

		gen_unique<<<grid_for(u), 256>>>(b->keys, u, 0, salt);
		CK(cudaGetLastError());
		for (int rep = 0; rep <= b->reps && put_ok; rep++)
		{
			set_seed(t, 1000 + rep);
			clear_table(t);
			put_ok = insert_unique(b, t, b->keys, u, rep > 0 ? &tput : NULL);
			if (!put_ok)
				break;
			for (int p = 0; p < 4; p++)
			{
				unsigned long long hits = 0;
				uint64_t	found;

				CK(cudaMemset(b->dhits, 0, sizeof(unsigned long long)));
				gen_queries<<<grid_for(QUERIES), 256>>>(b->queries, QUERIES, u, find_pos[p], salt, 77 + rep * 7 + p, b->dhits);
				CK(cudaGetLastError());
				CK(cudaDeviceSynchronize());
				CK(cudaEventRecord(ev0, s));
				if (c->kind == CPHT_ICEBERG)
					TRY(gpu_iceberg_find(t, b->queries, (uint32_t) QUERIES, b->out));
				else
					TRY(gpu_cuckoo_find(t, b->queries, (uint32_t) QUERIES, b->out));
				if (rep > 0)
					tfind[p].push_back(elapsed_ms(s));
				CK(cudaDeviceSynchronize());
				CK(cudaMemcpy(&hits, b->dhits, sizeof(hits), cudaMemcpyDeviceToHost));
				found = count_eq(b->out, QUERIES, 1);
				if (found != hits)
				{
					fprintf(stderr, "CHECK FAILED: find: %llu found, %llu expected\n",
							(unsigned long long) found, hits);
					check_failures++;
				}
			}
		}
		emit(b, c, "put", 0, fill, mode, put_ok ? u / (median(tput) * 1e6) : 0, median(tput), u, put_ok);
		if (!put_ok)
			return 0;
		for (int p = 0; p < 4; p++)
			emit(b, c, "find", find_pos[p], fill, mode, QUERIES / (median(tfind[p]) * 1e6),
				 median(tfind[p]), QUERIES, 1);
	}

	/* fop: prefill to pos, then `total` keys with duplicates ending at fill */
	{
		const uint64_t n = total;

		gen_fop<<<grid_for(n), 256>>>(b->keys, b->rank, n, u, salt, 4242);
		CK(cudaGetLastError());
		shuffle(b, b->keys, b->rank, n);
		for (int p = 0; p < 3; p++)
		{
			const uint64_t before = (uint64_t) (fop_pos[p] * (double) total);
			std::vector<double> tf;
			int			ok;

			if (before > u)
				continue;
			gen_unique<<<grid_for(before), 256>>>(b->queries, before, 0, salt);
			CK(cudaGetLastError());
			ok = fop_reps(b, t, before, n, u - before, 2000, "fop", &tf);
			emit(b, c, "fop", fop_pos[p], fill, mode, ok ? n / (median(tf) * 1e6) : 0, median(tf), n, ok);
		}
	}

	/* fop50: prefill [0, u/2), then key numbers [0, u) once each: half
	 * present, half new, ending at `fill` */
	{
		const uint64_t half = u / 2;
		std::vector<double> tf;
		int			ok;

		gen_range<<<grid_for(u), 256>>>(b->keys, b->rank, u, 0, salt, 99);
		CK(cudaGetLastError());
		shuffle(b, b->keys, b->rank, u);
		gen_unique<<<grid_for(half), 256>>>(b->queries, half, 0, salt);
		CK(cudaGetLastError());
		ok = fop_reps(b, t, half, u, u - half, 3000, "fop50", &tf);
		emit(b, c, "fop50", 0.5, fill, mode, ok ? u / (median(tf) * 1e6) : 0, median(tf), u, ok);
	}
	return 1;
}

static void
bench_table(bench *b, const tcfg *c)
{
	cpht_params p;
	cpht_table *t = NULL;
	char		err[512];

	memset(&p, 0, sizeof(p));
	p.kind = c->kind;
	p.device = CPHT_DEVICE_GPU;
	p.key_bits = KEY_BITS;
	p.seed = 1;
	p.slots[0] = PRIMARY_SLOTS;
	p.bucket_slots[0] = c->b0;
	p.slot_bits[0] = c->sw0;
	if (c->kind == CPHT_ICEBERG)
	{
		p.slots[1] = SECONDARY_SLOTS;
		p.bucket_slots[1] = c->b1;
		p.slot_bits[1] = c->sw1;
	}
	if (cpht_table_create(&p, &t, err, sizeof(err)) != CPHT_OK)
	{
		fprintf(stderr, "create %s %d/%d %d-bit: %s\n", c->kind == CPHT_ICEBERG ? "iceberg" : "cuckoo",
				c->b0, c->b1, c->sw0, err);
		return;
	}
	fprintf(stderr, "%s %d-bit buckets %d/%d: %llu bytes of slots\n",
			c->kind == CPHT_ICEBERG ? "iceberg" : "cuckoo", c->sw0, c->b0, c->b1,
			(unsigned long long) cpht_params_table_bytes(&p));
	for (int m = 0; m < b->nmodes; m++)
	{
		/* Grouping that cannot apply to this table is not timed twice. */
		gpu_set_grouping(t, b->modes[m]);
		if (b->modes[m] != GPU_GROUP_OFF && gpu_group_bits(t, PRIMARY_SLOTS, 1) == 0)
			continue;
		for (size_t f = 0; f < fills.size(); f++)
			if (!bench_fill(b, t, c, fills[f], b->modes[m]))
				break;
	}
	cpht_table_destroy(t);
}

/*
 * End to end through the public interface: host arrays in, host arrays
 * out, the table layer's chunks and the backend's pinned pipeline included
 * (wall-clock time).  A table sized by cpht_params_for_capacity for 2^26
 * keys; a batch of 2^26 keys, half of them distinct new ones.  Each
 * repetition creates a fresh (transactional) table and runs, in order: the
 * find-or-put that inserts (e2e_fop), the same again with every key present
 * (e2e_fop_present), and a find (e2e_find); medians over --reps
 * repetitions (at least 2), with the call's split from
 * cpht_table_call_times.
 */
static void
bench_end_to_end(bench *b)
{
	const uint64_t n = (uint64_t) 1 << 26;
	const int	reps = b->reps > 1 ? b->reps : 2;
	const char *names[3] = {"e2e_fop", "e2e_fop_present", "e2e_find"};
	cpht_kind	kinds[2] = {CPHT_ICEBERG, CPHT_CUCKOO};
	std::vector<uint64_t> keys(n);
	std::vector<uint8_t> st(n);

	for (uint64_t i = 0; i < n; i++)
		keys[i] = key_of(i % (n / 2), 777);
	for (int kk = 0; kk < 2; kk++)
	{
		cpht_params p;
		char		err[512];
		tcfg		c = {kinds[kk], 0, 0, 0, 0};
		std::vector<double> ms[3],
					stage[3],
					wait[3],
					out[3];
		double		fill = 0;

		if (cpht_params_for_capacity(kinds[kk], n, KEY_BITS, &p, err, sizeof(err)) != CPHT_OK)
			continue;
		p.device = CPHT_DEVICE_GPU;
		for (int r = 0; r < reps; r++)
		{
			cpht_table *t = NULL;

			if (cpht_table_create(&p, &t, err, sizeof(err)) != CPHT_OK)
			{
				fprintf(stderr, "end to end: %s\n", err);
				return;
			}
			cpht_table_set_logging(t, 1);
			c.sw0 = t->level[0].slot_bits;
			c.b0 = t->level[0].bucket_slots;
			if (t->levels > 1)
			{
				c.sw1 = t->level[1].slot_bits;
				c.b1 = t->level[1].bucket_slots;
			}
			for (int op = 0; op < 3; op++)
			{
				struct timespec t0,
							t1;
				cpht_call_times ct;

				clock_gettime(CLOCK_MONOTONIC, &t0);
				if (op < 2)
					TRY(cpht_table_find_or_put(t, keys.data(), n, st.data()));
				else
					TRY(cpht_table_find(t, keys.data(), n, st.data()));
				clock_gettime(CLOCK_MONOTONIC, &t1);
				cpht_table_call_times(t, &ct);
				ms[op].push_back(1e3 * (double) (t1.tv_sec - t0.tv_sec) + 1e-6 * (double) (t1.tv_nsec - t0.tv_nsec));
				stage[op].push_back(ct.stage_in);
				wait[op].push_back(ct.wait);
				out[op].push_back(ct.copy_out);
			}
			fill = (double) cpht_table_count(t) / (double) (p.slots[0] + p.slots[1]);
			cpht_table_destroy(t);
		}
		for (int op = 0; op < 3; op++)
		{
			double		m = median(ms[op]);

			fprintf(b->csv, "%s,%s,%s,%s,-,%d,%d/%d,%d,%.2f,host,%.3f,%.3f,%llu,-,%d\n",
					b->date, b->device, kinds[kk] == CPHT_ICEBERG ? "iceberg" : "cuckoo",
					names[op], c.sw0, c.b0, c.b1, c.sw1, fill,
					n / (m * 1e6), m, (unsigned long long) n, reps);
			fprintf(stderr, "  end to end %s %s: %.2f G keys/s (median %.1f ms of %d for %llu host keys;"
					" staging %.1f, waiting %.1f, copying results %.1f ms)\n",
					kinds[kk] == CPHT_ICEBERG ? "iceberg" : "cuckoo", names[op],
					n / (m * 1e6), m, reps, (unsigned long long) n,
					median(stage[op]), median(wait[op]), median(out[op]));
		}
	}
}

int
main(int argc, char **argv)
{
	bench		b;
	int			quick = 0;
	int			ceilings_on = 1;
	int			e2e = 1;
	int			e2e_only = 0;
	const char *only = NULL;
	const char *tables = "all";
	const char *csv = NULL;
	std::vector<tcfg> cfgs;
	char		why[512];
	cudaDeviceProp prop;
	time_t		now = time(NULL);

	memset(&b, 0, sizeof(b));
	b.reps = 3;
	b.modes[0] = GPU_GROUP_OFF;
	b.modes[1] = GPU_GROUP_ON;
	b.nmodes = 2;
	for (int i = 1; i < argc; i++)
	{
		if (strcmp(argv[i], "--quick") == 0)
			quick = 1;
		else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
			b.reps = atoi(argv[++i]);
		else if (strcmp(argv[i], "--tables") == 0 && i + 1 < argc)
			tables = argv[++i];
		else if (strcmp(argv[i], "--csv") == 0 && i + 1 < argc)
			csv = argv[++i];
		else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
			only = argv[++i];
		else if (strcmp(argv[i], "--no-ceilings") == 0)
			ceilings_on = 0;
		else if (strcmp(argv[i], "--no-e2e") == 0)
			e2e = 0;
		else if (strcmp(argv[i], "--e2e-only") == 0)
			e2e_only = 1;
		else if (strcmp(argv[i], "--fills") == 0 && i + 1 < argc)
			parse_fills(argv[++i], fills);
		else if (strcmp(argv[i], "--modes") == 0 && i + 1 < argc)
		{
			const char *m = argv[++i];

			b.nmodes = 0;
			if (strstr(m, "direct"))
				b.modes[b.nmodes++] = GPU_GROUP_OFF;
			if (strstr(m, "grouped"))
				b.modes[b.nmodes++] = GPU_GROUP_ON;
			if (strstr(m, "fine"))
				b.modes[b.nmodes++] = GPU_GROUP_FINE;
		}
		else
		{
			fprintf(stderr, "usage: %s [--quick] [--reps N] [--tables iceberg|cuckoo|all] [--modes direct,grouped] [--csv FILE] [--no-ceilings] [--no-e2e | --e2e-only]\n", argv[0]);
			return 2;
		}
	}
	if (!cpht_gpu_usable(why, sizeof(why)))
	{
		fprintf(stderr, "SKIP: %s\n", why);
		return 77;
	}
	CK(cudaGetDeviceProperties(&prop, 0));
	snprintf(b.device, sizeof(b.device), "%s", prop.name);
	strftime(b.date, sizeof(b.date), "%Y-%m-%d", gmtime(&now));
	b.csv = csv ? fopen(csv, "w") : stdout;
	if (b.csv == NULL)
	{
		perror(csv);
		return 1;
	}
	CK(cudaEventCreate(&ev0));
	CK(cudaEventCreate(&ev1));

	if (ceilings_on)
		b.ceil = measure_ceilings();
	else
		b.ceil.sector = b.ceil.sector_small = b.ceil.sector_thread = b.ceil.half = b.ceil.line = b.ceil.cas = 1;
	fprintf(stderr, "%s (%d SMs, %zu MB L2), %s\n", prop.name, prop.multiProcessorCount,
			(size_t) prop.l2CacheSize >> 20, b.date);
	fprintf(stderr, "ceilings: random 32 B sectors %.2f G/s (%.2f in 512 MB; %.2f read by one thread), 16 B reads %.2f G/s, 128 B lines %.2f G/s, 8 B CAS %.2f G/s\n",
			b.ceil.sector, b.ceil.sector_small, b.ceil.sector_thread, b.ceil.half, b.ceil.line, b.ceil.cas);
	fprintf(b.csv, "date,device,table,op,pos,slot_bits,bucket,secondary_bits,fill,mode,gkeys_s,ms,n,share_of_ceiling,ok\n");
	fprintf(b.csv, "%s,%s,ceiling,sector_read,-,-,-,-,-,-,%.3f,-,-,1,1\n", b.date, b.device, b.ceil.sector);
	fprintf(b.csv, "%s,%s,ceiling,read16,-,-,-,-,-,-,%.3f,-,-,1,1\n", b.date, b.device, b.ceil.half);
	fprintf(b.csv, "%s,%s,ceiling,line_read,-,-,-,-,-,-,%.3f,-,-,1,1\n", b.date, b.device, b.ceil.line);
	fprintf(b.csv, "%s,%s,ceiling,cas8,-,-,-,-,-,-,%.3f,-,-,1,1\n", b.date, b.device, b.ceil.cas);
	fprintf(b.csv, "%s,%s,ceiling,sector_read_512M,-,-,-,-,-,-,%.3f,-,-,1,1\n", b.date, b.device, b.ceil.sector_small);
	fprintf(b.csv, "%s,%s,ceiling,sector_read_1thread,-,-,-,-,-,-,%.3f,-,-,1,1\n", b.date, b.device, b.ceil.sector_thread);
	if (e2e_only)
	{
		bench_end_to_end(&b);
		return 0;
	}

	{
		const uint64_t most = PRIMARY_SLOTS + SECONDARY_SLOTS;

		CK(cudaMalloc(&b.keys, most * sizeof(uint64_t)));
		CK(cudaMalloc(&b.keys2, most * sizeof(uint64_t)));
		CK(cudaMalloc(&b.rank, most * sizeof(uint32_t)));
		CK(cudaMalloc(&b.rank2, most * sizeof(uint32_t)));
		CK(cudaMalloc(&b.queries, most * sizeof(uint64_t)));
		CK(cudaMalloc(&b.out, most));
		CK(cudaMalloc(&b.dhomeless, most * sizeof(uint64_t)));
		CK(cudaMalloc(&b.dcount, sizeof(uint32_t)));
		CK(cudaMalloc(&b.dhits, sizeof(unsigned long long)));
		b.homeless = (uint64_t *) malloc(most * sizeof(uint64_t));
	}

	for (int b0 = 8; b0 <= 32; b0 *= 2)
	{
		if (quick && b0 == 16)
			continue;
		if (strcmp(tables, "cuckoo") != 0)
		{
			tcfg		c16 = {CPHT_ICEBERG, 16, 32, b0, b0 / 2};
			tcfg		c32 = {CPHT_ICEBERG, 32, 32, b0, b0 / 2};
			tcfg		c64 = {CPHT_ICEBERG, 64, 64, b0, b0 / 2};

			cfgs.push_back(c16);
			cfgs.push_back(c32);
			if (!quick)
				cfgs.push_back(c64);
		}
		if (strcmp(tables, "iceberg") != 0)
		{
			tcfg		k32 = {CPHT_CUCKOO, 32, 0, b0, 0};
			tcfg		k64 = {CPHT_CUCKOO, 64, 0, b0, 0};

			cfgs.push_back(k32);
			if (!quick)
				cfgs.push_back(k64);
		}
	}
	if (!quick && e2e && !only)
		bench_end_to_end(&b);
	for (size_t i = 0; i < cfgs.size(); i++)
	{
		time_t		t0 = time(NULL);
		char		name[64];

		snprintf(name, sizeof(name), "%s:%d:%d", cfgs[i].kind == CPHT_ICEBERG ? "iceberg" : "cuckoo",
				 cfgs[i].sw0, cfgs[i].b0);
		if (only && strcmp(only, name) != 0)
			continue;

		bench_table(&b, &cfgs[i]);
		fprintf(stderr, "  (%ld s)\n", (long) (time(NULL) - t0));
	}
	if (b.csv != stdout)
		fclose(b.csv);
	if (check_failures)
		fprintf(stderr, "%d result checks FAILED\n", check_failures);
	return check_failures ? 1 : 0;
}
