/*
 * test_spread.c — the fill a table reaches before its first FULL, for the
 * key patterns databases hold, against random keys.  Structured keys must
 * fill each layout at least as high as random keys do: the permutation
 * lets every key bit move the bucket address (robust spread) while keeping
 * runs of nearby keys in nearby buckets (locality).
 *
 * Prints the table of fills; `test_spread.bin -v` adds per-seed detail.
 */
#include <string.h>

#include "cpu/cpu_ops.h"
#include "unit.h"

typedef enum pattern
{
	RANDOM, SEQUENTIAL, STRIDE_256, TIMESTAMP_HIGH, SNOWFLAKE, NPATTERNS
} pattern;

static const char *pattern_names[] = {
	"random", "sequential", "stride 2^8", "timestamp-high", "snowflake"
};

/* The i-th key of a pattern (64-bit keys). */
static uint64_t
pattern_key(pattern pat, uint64_t i, uint64_t *rng)
{
	switch (pat)
	{
		case RANDOM:
			return unit_rand(rng);
		case SEQUENTIAL:
			return 1000000 + i;
		case STRIDE_256:
			return i << 8;
		case TIMESTAMP_HIGH:
			return (i / 64) << 14 | (i % 64);
		case SNOWFLAKE:
			/* 41-bit milliseconds, 10-bit worker id fixed at 37, 12-bit sequence
			 * of about 300 ids per millisecond. */
			return ((1700000000000ULL + i / 300) << 22) | (37ULL << 12) | (i % 300);
		default:
			return 0;
	}
}

typedef struct layout_case
{
	const char *name;
	cpht_kind	kind;
	int			b0,
				b1;
} layout_case;

/* Insert pattern keys one at a time until the first FULL; return the fill. */
static double
fill_before_full(const layout_case *lc, pattern pat, uint64_t seed)
{
	cpht_params p;
	cpht_table *t;
	char		err[256];
	uint64_t	rng = seed * 7919;
	uint64_t	total;
	uint64_t	stored = 0;

	memset(&p, 0, sizeof(p));
	p.kind = lc->kind;
	p.key_bits = 64;
	p.seed = seed;
	p.cpu_threads = 1;
	p.slots[0] = (uint64_t) 1 << 17;
	p.bucket_slots[0] = lc->b0;
	if (lc->kind == CPHT_ICEBERG)
	{
		p.slots[1] = (uint64_t) 1 << 14;
		p.bucket_slots[1] = lc->b1;
	}
	if (cpht_table_create(&p, &t, err, sizeof(err)) != CPHT_OK)
	{
		fprintf(stderr, "create: %s\n", err);
		exit(2);
	}
	total = p.slots[0] + p.slots[1];
	for (uint64_t i = 0; stored < total; i++)
	{
		uint64_t	key = pattern_key(pat, i, &rng);
		uint64_t	homeless;

		if (lc->kind == CPHT_ICEBERG)
		{
			uint8_t		s = iceberg_fop(t, key);

			if (s == CPHT_FULL)
				break;
			stored += s == CPHT_PUT;
		}
		else
		{
			if (!cuckoo_put(t, key, &homeless))
				break;
			stored++;
		}
	}
	cpht_table_destroy(t);
	return (double) stored / (double) total;
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return x < y ? -1 : x > y;
}

int
main(int argc, char **argv)
{
	layout_case cases[] = {
		{"iceberg 8/4", CPHT_ICEBERG, 8, 4},
		{"iceberg 16/8", CPHT_ICEBERG, 16, 8},
		{"iceberg 32/16", CPHT_ICEBERG, 32, 16},
		{"cuckoo 8", CPHT_CUCKOO, 8, 0},
		{"cuckoo 16", CPHT_CUCKOO, 16, 0},
	};
	enum
	{
		SEEDS = 5
	};
	int			verbose = argc > 1 && strcmp(argv[1], "-v") == 0;

	printf("%-14s", "fill before FULL");
	for (int pat = 0; pat < NPATTERNS; pat++)
		printf(" %15s", pattern_names[pat]);
	printf("\n");
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
	{
		double		median[NPATTERNS];
		double		random_low = 0;

		printf("%-16s", cases[c].name);
		for (int pat = 0; pat < NPATTERNS; pat++)
		{
			double		fills[SEEDS];

			for (int s = 0; s < SEEDS; s++)
				fills[s] = fill_before_full(&cases[c], (pattern) pat, (uint64_t) s + 1);
			qsort(fills, SEEDS, sizeof(double), cmp_double);
			median[pat] = fills[SEEDS / 2];
			if (pat == RANDOM)
				random_low = fills[0];
			printf(" %15.3f", median[pat]);
			if (verbose)
				printf(" [%.3f..%.3f]", fills[0], fills[SEEDS - 1]);
		}
		printf("\n");
		/*
		 * "As high as random keys": the structured pattern's median reaches
		 * at least the lowest fill random keys reached over the seeds (the
		 * fill at the first FULL varies a little from seed to seed).
		 */
		for (int pat = 1; pat < NPATTERNS; pat++)
			CHECK(median[pat] >= random_low,
				  "%s: %s keys fill %.3f, random keys %.3f (lowest %.3f)",
				  cases[c].name, pattern_names[pat], median[pat], median[RANDOM], random_low);
	}
	UNIT_DONE();
}
