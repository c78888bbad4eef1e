/*
 * cpu_bench.c — throughput of the CPU implementation: put, find (0/50/100 %
 * hits) and find-or-put (50 % new keys) versus fill factor, for each layout.
 *
 *   test/bench/kernels/cpu_bench.bin [log2 primary slots = 22] [reps = 3] > out.csv
 *
 * For each fill f: put = filling an empty table from 0 to f with distinct
 * random keys; find = 2^20 queries on the table at f; fop = a batch that
 * takes the table from f - 0.05 to f, half of it keys already present,
 * shuffled.  Medians of `reps` runs, million keys per second, all cores.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpht_table.h"
#include "table/layout.h"

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return x < y ? -1 : x > y;
}

typedef struct layout_case
{
	const char *name;
	cpht_kind	kind;
	int			b0,
				b1;
} layout_case;

static cpht_table *
make(const layout_case *lc, int log2_slots, uint64_t seed)
{
	cpht_params p;
	cpht_table *t;
	char		err[256];

	memset(&p, 0, sizeof(p));
	p.kind = lc->kind;
	p.key_bits = 64;
	p.seed = seed;
	p.slots[0] = (uint64_t) 1 << log2_slots;
	p.bucket_slots[0] = lc->b0;
	if (lc->kind == CPHT_ICEBERG)
	{
		p.slots[1] = (uint64_t) 1 << (log2_slots - 3);
		p.bucket_slots[1] = lc->b1;
	}
	if (cpht_table_create(&p, &t, err, sizeof(err)) != CPHT_OK)
	{
		fprintf(stderr, "create: %s\n", err);
		exit(1);
	}
	return t;
}

/* Distinct keys: mix64 is a bijection, so distinct inputs stay distinct. */
static uint64_t
key_of(uint64_t i, uint64_t seed)
{
	return layout_mix64(i * 2 + 1 + (seed << 40));
}

int
main(int argc, char **argv)
{
	int			log2_slots = argc > 1 ? atoi(argv[1]) : 22;
	int			reps = argc > 2 ? atoi(argv[2]) : 3;
	layout_case cases[] = {
		{"iceberg 8/4", CPHT_ICEBERG, 8, 4},
		{"iceberg 16/8", CPHT_ICEBERG, 16, 8},
		{"iceberg 32/16", CPHT_ICEBERG, 32, 16},
		{"cuckoo 8", CPHT_CUCKOO, 8, 0},
		{"cuckoo 16", CPHT_CUCKOO, 16, 0},
		{"cuckoo 32", CPHT_CUCKOO, 32, 0},
	};
	double		fills[] = {0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95};
	size_t		nq = (size_t) 1 << 20;
	uint64_t   *q = malloc(nq * sizeof(uint64_t));
	uint8_t    *out = malloc(nq > ((size_t) 1 << log2_slots) ? nq : ((size_t) 1 << log2_slots) * 2);

	printf("layout,op,hits,fill,mkeys_per_s\n");
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
		for (size_t f = 0; f < sizeof(fills) / sizeof(fills[0]); f++)
		{
			double		put[16],
						fop[16],
						find[3][16];
			int			ok = 1;

			for (int r = 0; r < reps && ok; r++)
			{
				cpht_table *t = make(&cases[c], log2_slots, (uint64_t) r + 1);
				cpht_stats	st;
				uint64_t	total;
				uint64_t	before,
							target,
							inserted;
				size_t		nb;
				uint64_t   *keys;
				double		t0;

				cpht_table_stats(t, &st);
				total = st.slots[0] + st.slots[1];
				target = (uint64_t) (fills[f] * (double) total);
				before = (uint64_t) ((fills[f] - 0.05) * (double) total);
				keys = malloc(target * sizeof(uint64_t));
				for (uint64_t i = 0; i < target; i++)
					keys[i] = key_of(i, (uint64_t) r);

				/* put: empty -> f */
				t0 = now();
				if (cpht_table_put(t, keys, target, &inserted) != CPHT_OK)
					ok = 0;
				put[r] = (double) target / (now() - t0) / 1e6;

				/* find at f, 0 / 50 / 100 % hits */
				for (int h = 0; ok && h < 3; h++)
				{
					for (size_t i = 0; i < nq; i++)
						q[i] = (i % 2 == 0 ? h >= 1 : h == 2) ? keys[layout_mix64(i) % target]
							: key_of((uint64_t) 1 << 40 | i, (uint64_t) r);
					t0 = now();
					cpht_table_find(t, q, nq, out);
					find[h][r] = (double) nq / (now() - t0) / 1e6;
				}
				cpht_table_destroy(t);

				/* fop: f - 0.05 -> f with half of the batch already present */
				if (ok && fills[f] > 0.05)
				{
					uint64_t   *batch;

					t = make(&cases[c], log2_slots, (uint64_t) r + 1);
					if (cpht_table_put(t, keys, before, &inserted) != CPHT_OK)
						ok = 0;
					nb = 2 * (size_t) (target - before);
					batch = malloc(nb * sizeof(uint64_t));
					for (size_t i = 0; i < nb; i++)
						batch[i] = i % 2 ? keys[before + i / 2] : keys[layout_mix64(i) % before];
					t0 = now();
					if (ok && cpht_table_find_or_put(t, batch, nb, out) != CPHT_OK)
						ok = 0;
					fop[r] = (double) nb / (now() - t0) / 1e6;
					free(batch);
					cpht_table_destroy(t);
				}
				free(keys);
			}
			if (!ok)
			{
				printf("%s,put,,%.2f,FULL\n", cases[c].name, fills[f]);
				break;			/* higher fills fail too */
			}
			qsort(put, (size_t) reps, sizeof(double), cmp_double);
			qsort(fop, (size_t) reps, sizeof(double), cmp_double);
			printf("%s,put,,%.2f,%.1f\n", cases[c].name, fills[f], put[reps / 2]);
			for (int h = 0; h < 3; h++)
			{
				qsort(find[h], (size_t) reps, sizeof(double), cmp_double);
				printf("%s,find,%d,%.2f,%.1f\n", cases[c].name, h * 50, fills[f], find[h][reps / 2]);
			}
			printf("%s,fop,50,%.2f,%.1f\n", cases[c].name, fills[f], fop[reps / 2]);
			fflush(stdout);
		}
	free(q);
	free(out);
	return 0;
}
