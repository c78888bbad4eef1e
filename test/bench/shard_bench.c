/*
 * shard_bench.c — one find-or-put call of many keys on a table of one GPU
 * against the same call on a table sharded over several GPUs.
 *
 *   shard_bench [keys] [shards] [reps] [key_bits]
 *
 * For each repetition, side by side: a table of `shards` shards (one per
 * GPU) and a table on one GPU, both sized for `keys` keys; on each, one
 * find-or-put of `keys` distinct random keys (all new) and then the same
 * call again (all found).  Host arrays, so the times include the transfers
 * and, for the sharded table, splitting the batch and putting the answers
 * back in order.  Prints every run and the medians.
 *
 * Build (after make):
 *   gcc -O2 -std=gnu11 -DCPHT_WITH_GPU -Ikernels -o test/bench/shard_bench.bin \
 *     test/bench/shard_bench.c kernels/table*.o kernels/cpu_*.o kernels/radix_sort.o \
 *     kernels/gpu_*.o -L/usr/local/cuda/lib64 -lcudart_static -ldl -lrt -lpthread -lstdc++ -lm
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpht_table.h"

#define MAX_REPS 15

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return x < y ? -1 : x > y;
}

static double
median(double *v, int n)
{
	qsort(v, n, sizeof(double), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* One table: two find-or-put calls of all keys; ms of each in put[]/found[]. */
static int
one(int shards, const uint64_t *keys, size_t n, int key_bits, uint8_t *st,
	double *put_ms, double *found_ms)
{
	cpht_params p;
	cpht_table *t;
	char		err[256];
	double		t0;
	cpht_stats	s;

	cpht_params_for_capacity(CPHT_ICEBERG, n, key_bits, &p, err, sizeof(err));
	p.device = CPHT_DEVICE_GPU;
	p.seed = 12345;
	p.shards = shards;
	if (cpht_table_create(&p, &t, err, sizeof(err)) != CPHT_OK)
	{
		printf("create (%d shards): %s\n", shards, err);
		return 1;
	}
	t0 = now_ms();
	if (cpht_table_find_or_put(t, keys, n, st) != CPHT_OK)
	{
		printf("find_or_put (%d shards): %s\n", shards, cpht_table_error(t));
		return 1;
	}
	*put_ms = now_ms() - t0;
	t0 = now_ms();
	if (cpht_table_find_or_put(t, keys, n, st) != CPHT_OK)
	{
		printf("find_or_put again (%d shards): %s\n", shards, cpht_table_error(t));
		return 1;
	}
	*found_ms = now_ms() - t0;
	if (shards > 1)
	{
		cpht_call_times ct;

		cpht_table_call_times(t, &ct);
		printf("    last call: split %.1f ms, shards %.1f ms, answers back %.1f ms\n",
			   ct.stage_in, ct.wait, ct.copy_out);
	}
	cpht_table_stats(t, &s);
	printf("  %d shard(s) on %s: %llu keys, %llu slots, grows %llu: new %.1f ms (%.2f G keys/s), found %.1f ms (%.2f G keys/s)\n",
		   shards, s.device_name, (unsigned long long) s.count, (unsigned long long) (s.slots[0] + s.slots[1]),
		   (unsigned long long) s.grows, *put_ms, n / *put_ms / 1e6, *found_ms, n / *found_ms / 1e6);
	cpht_table_destroy(t);
	return 0;
}

int
main(int argc, char **argv)
{
	size_t		n = argc > 1 ? strtoull(argv[1], NULL, 10) : 200000000;
	int			shards = argc > 2 ? atoi(argv[2]) : 2;
	int			reps = argc > 3 ? atoi(argv[3]) : 3;
	int			key_bits = argc > 4 ? atoi(argv[4]) : 64;
	uint64_t   *keys = malloc(n * sizeof(uint64_t));
	uint8_t    *st = malloc(n);
	double		put1[MAX_REPS],
				found1[MAX_REPS],
				putn[MAX_REPS],
				foundn[MAX_REPS];
	char		why[256];
	uint64_t	x = 0x9e3779b97f4a7c15ULL;

	if (reps > MAX_REPS)
		reps = MAX_REPS;
	if (!cpht_gpu_usable(why, sizeof(why)))
	{
		printf("SKIP: %s\n", why);
		return 77;
	}
	/* distinct keys: a bijection of 0..n-1 (odd multiplier, then masked
	 * to key_bits only when that keeps them distinct) */
	for (size_t i = 0; i < n; i++)
	{
		uint64_t	k = (uint64_t) (i + 1) * x;

		keys[i] = key_bits == 64 ? k ^ (k >> 29) : (i * 0xbf58476d1ce4e5b9ULL) & (((uint64_t) 1 << key_bits) - 1);
	}
	printf("%zu keys, %d-bit, %d shards over %d GPUs, %d repetitions\n", n, key_bits, shards,
		   cpht_gpu_count(), reps);
	for (int r = 0; r < reps; r++)
	{
		if (one(1, keys, n, key_bits, st, &put1[r], &found1[r]) ||
			one(shards, keys, n, key_bits, st, &putn[r], &foundn[r]))
			return 1;
	}
	{
		double		p1 = median(put1, reps),
					f1 = median(found1, reps),
					pn = median(putn, reps),
					fn = median(foundn, reps);

		printf("median, all new:   1 GPU %.1f ms, %d shards %.1f ms: %.2fx\n", p1, shards, pn, p1 / pn);
		printf("median, all found: 1 GPU %.1f ms, %d shards %.1f ms: %.2fx\n", f1, shards, fn, f1 / fn);
	}
	free(keys);
	free(st);
	return 0;
}
