/*
 * widen_bench.c — bytes per key of tables created without key_bits.
 *
 *   widen_bench [cpu|gpu] [keys] [bits] [batch] [auto]
 *
 * Streams `keys` distinct random keys of `bits` bits (default 100M, 37) in
 * batches through find-or-put into tables created for 1000 keys, for each
 * kind: one without key_bits, one with key_bits 64 (left out with `auto`,
 * for key counts whose 64-bit tables would not fit in memory).  Each time a table
 * grows it prints the layout it grew out of at its highest fill (the keys
 * stored after the last batch before the growth): slot widths and bytes
 * per key; at the end the final layout, the widenings and the times.
 * Build like grow_bench.c (cc with kernels/table/*.c and the CPU backend,
 * plus the GPU objects for gpu).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpht_table.h"
#include "bench_clock.h"
#include "table/layout.h"

static void
print_layout(const char *name, const char *when, const cpht_stats *s)
{
	printf("%s: %s: %llu keys, key_bits %d%s, slots %llu x %d bit + %llu x %d bit, fill %.4f, %.3f bytes/key\n",
		   name, when, (unsigned long long) s->count, s->key_bits, s->signed_keys ? " (signed)" : "",
		   (unsigned long long) s->slots[0], s->slot_bits[0], (unsigned long long) s->slots[1],
		   s->slot_bits[1], (double) s->count / (double) (s->slots[0] + s->slots[1]),
		   s->count ? (double) s->table_bytes / (double) s->count : 0.0);
}

static int
run(const char *name, cpht_kind kind, cpht_device dev, int key_bits, const uint64_t *keys, size_t n,
	size_t batch)
{
	cpht_params p;
	cpht_table *t;
	cpht_stats	s,
				prev;
	char		err[256];
	uint8_t    *out = malloc(batch);
	double		t0,
				ingest,
				grow_ms = 0,
				widen_ms = 0,
				best = 1e9;

	cpht_params_for_capacity(kind, 1000, key_bits, &p, err, sizeof(err));
	p.device = dev;
	p.seed = 1;
	if (cpht_table_create(&p, &t, err, sizeof(err)) != CPHT_OK)
	{
		printf("%s: create: %s\n", name, err);
		return 1;
	}
	cpht_table_stats(t, &prev);
	t0 = now_ms();
	for (size_t at = 0; at < n; at += batch)
	{
		size_t		m = n - at < batch ? n - at : batch;
		cpht_call_times ct;

		if (cpht_table_find_or_put(t, keys + at, m, out) != CPHT_OK)
		{
			printf("%s: fop: %s\n", name, cpht_table_error(t));
			return 1;
		}
		cpht_table_call_times(t, &ct);
		grow_ms += ct.grow;
		widen_ms += ct.widen;
		cpht_table_stats(t, &s);
		if (s.grows != prev.grows && prev.count > 0)
		{
			print_layout(name, "highest fill before a growth", &prev);
			if ((double) prev.table_bytes / (double) prev.count < best)
				best = (double) prev.table_bytes / (double) prev.count;
		}
		prev = s;
	}
	ingest = now_ms() - t0;
	print_layout(name, "final", &s);
	printf("%s: grew %llu times (%.1f ms), widened %llu times (%.1f ms); ingest %.1f ms; lowest bytes/key at a highest fill %.3f\n",
		   name, (unsigned long long) s.grows, grow_ms, (unsigned long long) s.widens, widen_ms, ingest, best);
	cpht_table_destroy(t);
	free(out);
	return 0;
}

int
main(int argc, char **argv)
{
	cpht_device dev = argc > 1 && strcmp(argv[1], "gpu") == 0 ? CPHT_DEVICE_GPU : CPHT_DEVICE_CPU;
	size_t		n = argc > 2 ? strtoull(argv[2], NULL, 10) : 100000000;
	int			bits = argc > 3 ? atoi(argv[3]) : 37;
	size_t		batch = argc > 4 ? strtoull(argv[4], NULL, 10) : 1000000;
	int			only_auto = argc > 5 && strcmp(argv[5], "auto") == 0;
	uint64_t   *keys = malloc(n * sizeof(uint64_t));
	int			rc = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);	/* lines as they come, into a file too */

	/* distinct keys of `bits` bits: a bijection on them, applied to 1..n */
	for (size_t i = 0; i < n; i++)
	{
		uint64_t	x = (uint64_t) i + 1;

		for (int r = 0; r < 3; r++)
		{
			x = (x * 0x9e3779b97f4a7c15ULL) & layout_mask(bits);
			x ^= x >> (bits / 2);
		}
		keys[i] = x;
	}
	rc |= run("iceberg, no key_bits", CPHT_ICEBERG, dev, 0, keys, n, batch);
	if (!only_auto)
		rc |= run("iceberg, key_bits 64", CPHT_ICEBERG, dev, 64, keys, n, batch);
	rc |= run("cuckoo, no key_bits", CPHT_CUCKOO, dev, 0, keys, n, batch);
	if (!only_auto)
		rc |= run("cuckoo, key_bits 64", CPHT_CUCKOO, dev, 64, keys, n, batch);
	free(keys);
	return rc;
}
