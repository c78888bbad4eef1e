/*
 * grow_bench.c — a grown table against a right-sized one.
 *
 *   grow_bench [cpu|gpu] [keys] [batch]
 *
 * Streams `keys` distinct random 64-bit keys in batches through
 * find-or-put into a table created for them (right-sized) and into one
 * created for 1000 keys (grown), then times, on each final table, a find
 * of every key and a find-or-put of every key again (all found).  Prints
 * the layouts, the growths and their time.  Host arrays, so the GPU times
 * include the transfers, the same for both tables.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpht_table.h"
#include "bench_clock.h"
#include "table/layout.h"

static int
run(const char *name, cpht_device dev, uint64_t capacity, const uint64_t *keys, size_t n, size_t batch)
{
	cpht_params p;
	cpht_table *t;
	cpht_stats	s;
	char		err[256];
	uint8_t    *out = malloc(n);
	double		t0,
				ingest,
				find,
				fop,
				grow_ms = 0;
	uint64_t	puts = 0;

	cpht_params_for_capacity(CPHT_ICEBERG, capacity, 64, &p, err, sizeof(err));
	p.device = dev;
	p.seed = 1;
	if (cpht_table_create(&p, &t, err, sizeof(err)) != CPHT_OK)
	{
		printf("%s: create: %s\n", name, err);
		return 1;
	}
	t0 = now_ms();
	for (size_t at = 0; at < n; at += batch)
	{
		size_t		m = n - at < batch ? n - at : batch;
		cpht_call_times ct;

		if (cpht_table_find_or_put(t, keys + at, m, out + at) != CPHT_OK)
		{
			printf("%s: fop: %s\n", name, cpht_table_error(t));
			return 1;
		}
		cpht_table_call_times(t, &ct);
		grow_ms += ct.grow;
	}
	ingest = now_ms() - t0;
	for (size_t i = 0; i < n; i++)
		puts += out[i] == CPHT_PUT;
	t0 = now_ms();
	cpht_table_find(t, keys, n, out);
	find = now_ms() - t0;
	t0 = now_ms();
	cpht_table_find_or_put(t, keys, n, out);
	fop = now_ms() - t0;
	cpht_table_stats(t, &s);
	printf("%s: %zu keys, %llu new; slots %llu+%llu (%llu bytes, %.2f B/key); grew %llu times, %.1f ms growing (%.2f ns per key stored)\n",
		   name, n, (unsigned long long) puts, (unsigned long long) s.slots[0], (unsigned long long) s.slots[1],
		   (unsigned long long) s.table_bytes, (double) s.table_bytes / (double) n, (unsigned long long) s.grows,
		   grow_ms, grow_ms * 1e6 / (double) n);
	printf("%s: ingest %.1f ms (%.1f Mkeys/s), find %.1f ms (%.1f Mkeys/s), fop of present keys %.1f ms (%.1f Mkeys/s)\n",
		   name, ingest, n / ingest / 1e3, find, n / find / 1e3, fop, n / fop / 1e3);
	cpht_table_destroy(t);
	free(out);
	return 0;
}

int
main(int argc, char **argv)
{
	cpht_device dev = argc > 1 && strcmp(argv[1], "gpu") == 0 ? CPHT_DEVICE_GPU : CPHT_DEVICE_CPU;
	size_t		n = argc > 2 ? strtoull(argv[2], NULL, 10) : 10000000;
	size_t		batch = argc > 3 ? strtoull(argv[3], NULL, 10) : 1000000;
	uint64_t   *keys = malloc(n * sizeof(uint64_t));

	for (size_t i = 0; i < n; i++)
		keys[i] = layout_mix64(i + 12345);
	return run("right-sized", dev, n, keys, n, batch) | run("grown from 1000", dev, 1000, keys, n, batch);
}
