/*
 * shard_bench.c — one find-or-put call of many keys on one table against
 * the same call on a table sharded over several tables.
 *
 *   shard_bench [keys] [shards] [reps] [key_bits] [gpu|cpu] [pinned]
 *
 * For each repetition, side by side: a table of one shard and a table of
 * `shards` shards, both sized for `keys` keys, on the GPUs (the default:
 * one shard per GPU) or on the CPU; on each, one find-or-put of `keys`
 * distinct keys (all new) and then the same call again (all found); each
 * table's creation is timed too (a routed table makes its routing
 * buffers then).  The
 * keys are in an ordinary (malloc'ed) host array, so the times include the
 * transfers and, for the sharded table, splitting the batch by shard and
 * putting the answers back in order.  Every call of the sharded table
 * prints its phases (cpht_call_times): the calling thread's splitting
 * (stage_in), its waiting for the shards after its own work (wait) and
 * putting the answers back (copy_out), the pieces the call went in and the
 * threads splitting them.  The end prints the medians of both tables and
 * of the sharded table's phases.
 *
 * GPU shards whose GPUs reach each other's memory take the device path
 * (the call routed on the GPUs, kernels/shards/shards_route.c); the bench
 * then times a third table, the same sharded table on the host path, and
 * prints the routed calls' phases: keys onto the GPUs (in), routing and
 * sending them to their shards (exchange), the shards' calls (device),
 * the answers back to the GPUs the keys came from (back), answers off the
 * GPUs (out).  `pinned` registers the keys and answers
 * (cpht_host_register), as the worker's transfer windows are, so that
 * every table's transfers go by DMA from them as they are.
 *
 * Build and run on a GPU machine (after make), from the repository root
 * (every kernel object make built, not the unit tests' fallback ones):
 *   gcc -O2 -std=gnu11 -DCPHT_WITH_GPU -Ikernels -o test/bench/kernels/shard_bench.bin \
 *     test/bench/kernels/shard_bench.c $(ls kernels/{cpu,gpu,shards,table,util}/*.o | grep -v unit.o) \
 *     -L/usr/local/cuda/lib64 -lcudart_static -ldl -lrt -lpthread -lstdc++ -lm \
 *   && test/bench/kernels/shard_bench.bin 200000000 2 5
 * On the CPU (the same build): test/bench/kernels/shard_bench.bin 20000000 2 3 64 cpu
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpht_table.h"
#include "bench_clock.h"
#include "shards/shards_internal.h"	/* the path a sharded table takes */

#define MAX_REPS 15

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

/* One call's milliseconds, and a sharded call's phases. */
typedef struct call_ms
{
	double		ms;
	double		split;
	double		wait;
	double		answers;
	double		exchange;
	double		back;
} call_ms;

/* One find-or-put of every key on t, timed. */
static int
timed_call(cpht_table *t, int shards, const char *what, const uint64_t *keys, size_t n,
		   uint8_t *st, call_ms *out)
{
	double		t0 = now_ms();
	cpht_call_times ct;

	if (cpht_table_find_or_put(t, keys, n, st) != CPHT_OK)
	{
		printf("find_or_put %s (%d shards): %s\n", what, shards, cpht_table_error(t));
		return 1;
	}
	out->ms = now_ms() - t0;
	cpht_table_call_times(t, &ct);
	out->split = ct.stage_in;
	out->wait = ct.wait;
	out->answers = ct.copy_out;
	out->exchange = ct.exchange_in;
	out->back = ct.exchange_out;
	if (shards > 1 && ct.routed)
		printf("    %-5s %8.1f ms routed: in %.1f ms, exchange %.1f ms, device %.1f ms, back %.1f ms, out %.1f ms; %d pieces\n",
			   what, out->ms, ct.stage_in, ct.exchange_in, ct.wait, ct.exchange_out, ct.copy_out, ct.pieces);
	else if (shards > 1)
		printf("    %-5s %8.1f ms: split %.1f ms, wait %.1f ms, answers back %.1f ms; %d pieces, %d threads\n",
			   what, out->ms, ct.stage_in, ct.wait, ct.copy_out, ct.pieces, ct.threads);
	return 0;
}

/* One table: a find-or-put of all keys (all new), then again (all found). */
static int
one(cpht_device dev, int shards, int host_path, const uint64_t *keys, size_t n, int key_bits, uint8_t *st,
	call_ms *put, call_ms *found, int *device_path)
{
	cpht_params p;
	cpht_table *t;
	char		err[256];
	cpht_stats	s;
	double		create_ms;

	cpht_params_for_capacity(CPHT_ICEBERG, n, key_bits, &p, err, sizeof(err));
	p.device = dev;
	p.seed = 12345;
	p.shards = shards;
	create_ms = now_ms();
	if (cpht_table_create(&p, &t, err, sizeof(err)) != CPHT_OK)
	{
		printf("create (%d shards): %s\n", shards, err);
		return 1;
	}
	create_ms = now_ms() - create_ms;
	if (shards > 1 && host_path)
		shards_use_host_path(t);
	if (shards > 1 && device_path)
		*device_path = strcmp(t->sharded->path->name, "device") == 0;
	if (timed_call(t, shards, "new", keys, n, st, put) ||
		timed_call(t, shards, "found", keys, n, st, found))
		return 1;
	cpht_table_stats(t, &s);
	printf("  %d shard(s)%s on %s: %llu keys, %llu slots, grows %llu: created in %.1f ms, new %.1f ms (%.2f G keys/s), found %.1f ms (%.2f G keys/s)\n",
		   shards, shards > 1 ? (host_path ? " host path" : " device path") : "", s.device_name, (unsigned long long) s.count, (unsigned long long) (s.slots[0] + s.slots[1]),
		   (unsigned long long) s.grows, create_ms, put->ms, n / put->ms / 1e6, found->ms, n / found->ms / 1e6);
	cpht_table_destroy(t);
	return 0;
}

/* The medians of one phase over the repetitions. */
static double
median_of(const call_ms *runs, int reps, size_t field)
{
	double		v[MAX_REPS];

	for (int r = 0; r < reps; r++)
		v[r] = *(const double *) ((const char *) &runs[r] + field);
	return median(v, reps);
}

static void
report(const char *what, const call_ms *one_table, const call_ms *sharded, int shards, int reps,
	   const char *single, int routed)
{
	double		m1 = median_of(one_table, reps, offsetof(call_ms, ms)),
				mn = median_of(sharded, reps, offsetof(call_ms, ms));

	if (routed)
		printf("median, %-9s %s %.1f ms, %d shards routed %.1f ms: %.2fx (in %.1f ms, exchange %.1f ms, device %.1f ms, back %.1f ms, out %.1f ms)\n",
			   what, single, m1, shards, mn, m1 / mn,
			   median_of(sharded, reps, offsetof(call_ms, split)),
			   median_of(sharded, reps, offsetof(call_ms, exchange)),
			   median_of(sharded, reps, offsetof(call_ms, wait)),
			   median_of(sharded, reps, offsetof(call_ms, back)),
			   median_of(sharded, reps, offsetof(call_ms, answers)));
	else
		printf("median, %-9s %s %.1f ms, %d shards host path %.1f ms: %.2fx (split %.1f ms, wait %.1f ms, answers back %.1f ms)\n",
			   what, single, m1, shards, mn, m1 / mn,
			   median_of(sharded, reps, offsetof(call_ms, split)),
			   median_of(sharded, reps, offsetof(call_ms, wait)),
			   median_of(sharded, reps, offsetof(call_ms, answers)));
}

int
main(int argc, char **argv)
{
	long long	arg[4] = {200000000, 2, 3, 64};
	int			nargs = 0;
	cpht_device dev = CPHT_DEVICE_GPU;
	size_t		n;
	int			shards,
				reps,
				key_bits;
	uint64_t   *keys;
	uint8_t    *st;
	call_ms		put1[MAX_REPS],
				found1[MAX_REPS],
				putn[MAX_REPS],
				foundn[MAX_REPS],
				puth[MAX_REPS],
				foundh[MAX_REPS];
	int			pinned = 0,
				device_path = 0;
	char		why[256];
	uint64_t	x = 0x9e3779b97f4a7c15ULL;

	for (int i = 1; i < argc; i++)
	{
		if (strcmp(argv[i], "cpu") == 0)
			dev = CPHT_DEVICE_CPU;
		else if (strcmp(argv[i], "gpu") == 0)
			dev = CPHT_DEVICE_GPU;
		else if (strcmp(argv[i], "pinned") == 0)
			pinned = 1;
		else if (nargs < 4)
			arg[nargs++] = atoll(argv[i]);
	}
	n = (size_t) arg[0];
	shards = (int) arg[1];
	reps = arg[2] < 1 ? 1 : arg[2] > MAX_REPS ? MAX_REPS : (int) arg[2];
	key_bits = (int) arg[3];
	if (dev == CPHT_DEVICE_GPU && !cpht_gpu_usable(why, sizeof(why)))
	{
		printf("SKIP: %s\n", why);
		return 77;
	}
	keys = malloc(n * sizeof(uint64_t));
	st = malloc(n);
	if (keys == NULL || st == NULL)
	{
		printf("out of memory for %zu keys\n", n);
		return 1;
	}
	/* distinct keys: a bijection of 0..n-1 (odd multiplier, then masked
	 * to key_bits only when that keeps them distinct) */
	for (size_t i = 0; i < n; i++)
	{
		uint64_t	k = (uint64_t) (i + 1) * x;

		keys[i] = key_bits == 64 ? k ^ (k >> 29) : (i * 0xbf58476d1ce4e5b9ULL) & (((uint64_t) 1 << key_bits) - 1);
	}
	if (pinned && (!cpht_host_register(keys, n * sizeof(uint64_t), why, sizeof(why)) ||
				   !cpht_host_register(st, n, why, sizeof(why))))
	{
		printf("registering the keys and answers: %s\n", why);
		return 1;
	}
	if (dev == CPHT_DEVICE_GPU)
		printf("%zu keys, %d-bit, %d shards over %d GPUs, %d repetitions, keys and answers in %s memory\n", n,
			   key_bits, shards, cpht_gpu_count(), reps, pinned ? "registered" : "ordinary");
	else
		printf("%zu keys, %d-bit, %d CPU shards, %d repetitions\n", n, key_bits, shards, reps);
	for (int r = 0; r < reps; r++)
	{
		if (one(dev, 1, 0, keys, n, key_bits, st, &put1[r], &found1[r], NULL) ||
			one(dev, shards, 0, keys, n, key_bits, st, &putn[r], &foundn[r], &device_path))
			return 1;
		if (device_path &&
			one(dev, shards, 1, keys, n, key_bits, st, &puth[r], &foundh[r], NULL))
			return 1;
	}
	report("all new:", put1, putn, shards, reps, dev == CPHT_DEVICE_GPU ? "1 GPU" : "1 table", device_path);
	report("all found:", found1, foundn, shards, reps, dev == CPHT_DEVICE_GPU ? "1 GPU" : "1 table", device_path);
	if (device_path)
	{
		report("all new:", put1, puth, shards, reps, "1 GPU", 0);
		report("all found:", found1, foundh, shards, reps, "1 GPU", 0);
	}
	free(keys);
	free(st);
	return 0;
}
