/*
 * bench_keys.cuh — the benchmark inputs, generated on the device: unique
 * keys, the find-or-put batches and the queries of gpu_bench.cu, shared
 * with cuco_bench.cu so that both time the same keys; and what both
 * need besides: CK, which ends a benchmark at its first CUDA error, the
 * grid of a kernel over n items and the median of repetitions.
 */
#ifndef CPHT_BENCH_KEYS_CUH
#define CPHT_BENCH_KEYS_CUH

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "table/layout.h"

#ifndef KEY_BITS
#define KEY_BITS 37
#endif

/* A CUDA runtime call that must succeed: a benchmark stops at its first error. */
#define CK(call) \
	do { \
		cudaError_t e_ = (call); \
		if (e_ != cudaSuccess) \
		{ \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
			exit(1); \
		} \
	} while (0)

/* Blocks of 256 threads for n items, at most 64 per SM of a 132-SM GPU
 * (the kernels loop over the rest). */
static unsigned
grid_for(uint64_t n)
{
	uint64_t	b = (n + 255) / 256;

	return (unsigned) (b < 132 * 64 ? (b ? b : 1) : 132 * 64);
}

/* The median of the repetitions' times (0 for none). */
static double
median(std::vector<double> v)
{
	std::sort(v.begin(), v.end());
	if (v.empty())
		return 0;
	return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

/* The fills of a --fills F,F,... option, in place of the defaults. */
static void
parse_fills(const char *arg, std::vector<double> &fills)
{
	char	   *list = strdup(arg);

	fills.clear();
	for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ","))
		fills.push_back(atof(tok));
	free(list);
}

/* ---- key generation (device) ------------------------------------------ */

/* A bijection of [0, 2^37): unique key number i -> key. */
__host__ __device__ static inline uint64_t
key_of(uint64_t i, uint64_t salt)
{
	const uint64_t m = ((uint64_t) 1 << KEY_BITS) - 1;
	uint64_t	x = (i + salt) & m;

	x = (x * 0x9e3779b97f4a7c15ULL) & m;
	x ^= x >> 19;
	x = (x * 0xbf58476d1ce4e5b9ULL) & m;
	x ^= x >> 17;
	x = (x * 0x94d049bb133111ebULL) & m;
	x ^= x >> 21;
	return x;
}

/* keys[j] = key number first + j. */
__global__ void
gen_unique(uint64_t *keys, uint64_t n, uint64_t first, uint64_t salt)
{
	for (uint64_t j = blockIdx.x * (uint64_t) blockDim.x + threadIdx.x; j < n; j += (uint64_t) gridDim.x * blockDim.x)
		keys[j] = key_of(first + j, salt);
}

/* fop input: key numbers 0..u-1 once each, then n-u draws from [0, u);
 * rank[j] a random sort key for the shuffle. */
__global__ void
gen_fop(uint64_t *keys, uint32_t *rank, uint64_t n, uint64_t u, uint64_t salt, uint64_t seed)
{
	for (uint64_t j = blockIdx.x * (uint64_t) blockDim.x + threadIdx.x; j < n; j += (uint64_t) gridDim.x * blockDim.x)
	{
		uint64_t	num = j < u ? j : layout_mix64(j ^ seed) % u;

		keys[j] = key_of(num, salt);
		rank[j] = (uint32_t) layout_mix64(j * 31 + seed);
	}
}

/* fop50 input: distinct key numbers [lo, lo + n) (the table holds [0, mid)). */
__global__ void
gen_range(uint64_t *keys, uint32_t *rank, uint64_t n, uint64_t lo, uint64_t salt, uint64_t seed)
{
	for (uint64_t j = blockIdx.x * (uint64_t) blockDim.x + threadIdx.x; j < n; j += (uint64_t) gridDim.x * blockDim.x)
	{
		keys[j] = key_of(lo + j, salt);
		rank[j] = (uint32_t) layout_mix64(j * 31 + seed);
	}
}

/* Queries: a hit is a random key number below `present`, a miss one at or
 * above it; *hits counts the hits. */
__global__ void
gen_queries(uint64_t *keys, uint64_t n, uint64_t present, double pos, uint64_t salt, uint64_t seed,
			unsigned long long *hits)
{
	unsigned long long h = 0;

	for (uint64_t j = blockIdx.x * (uint64_t) blockDim.x + threadIdx.x; j < n; j += (uint64_t) gridDim.x * blockDim.x)
	{
		uint64_t	r = layout_mix64(j ^ seed);
		bool		hit = (double) (r >> 11) * (1.0 / 9007199254740992.0) < pos;

		keys[j] = hit ? key_of(layout_mix64(r) % present, salt) : key_of(present + layout_mix64(r) % ((uint64_t) 1 << 30), salt);
		h += hit;
	}
	atomicAdd(hits, h);
}

#endif							/* CPHT_BENCH_KEYS_CUH */
