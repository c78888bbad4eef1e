/*
 * test_gpu_vs_cpu.c — differential test: the same batches through a CPU
 * table and a GPU table of the same parameters, comparing every output.
 *
 * Batches carry millions of keys with heavy duplication inside one batch
 * (a few hot keys repeated a million times, plus random keys from a pool
 * that later batches hit again), for both table kinds and several slot
 * widths and bucket sizes.  What must agree:
 *   - find_or_put: the set of keys reported PUT, each exactly once (the
 *     occurrence may differ on the iceberg table, where concurrent threads
 *     race; on the cuckoo table the first occurrence wins on both, so the
 *     status arrays must be equal byte for byte), and the counts;
 *   - find: byte for byte;
 *   - erase: the set of keys removed, once each; the counts;
 *   - a call that runs out of room: CPHT_ERR_FULL on both, and afterwards
 *     both hold exactly what they held before (finds, counts, slot stats).
 *
 * Where no GPU is usable (no driver, no device, or a build without CUDA)
 * it prints "SKIP: <reason>" and exits 77.  CPHT_DIFF_SELF=1 runs the same
 * comparisons with a second CPU table in place of the GPU one (a check of
 * the test itself on machines without a GPU).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpht_table.h"
#include "table/layout.h"
#include "unit.h"

#define SKIP_CODE 77

static int	self_check = 0;

typedef struct config
{
	const char *name;
	cpht_kind	kind;
	int			key_bits;
	uint64_t	slots[2];
	int			buckets[2];
	int			widths[2];
	double		fill;			/* distinct keys drawn, as a share of all slots */
} config;

static const config configs[] = {
	{"iceberg 16/32-bit 8/4", CPHT_ICEBERG, 32, {1 << 20, 1 << 17}, {8, 4}, {16, 32}, 0.45},
	{"iceberg 32/32-bit 16/8", CPHT_ICEBERG, 40, {1 << 21, 1 << 18}, {16, 8}, {32, 32}, 0.60},
	{"iceberg 64/64-bit 32/16", CPHT_ICEBERG, 64, {1 << 20, 1 << 17}, {32, 16}, {64, 64}, 0.70},
	{"iceberg 16/16-bit 32/32", CPHT_ICEBERG, 27, {1 << 21, 1 << 18}, {32, 32}, {16, 16}, 0.70},
	{"cuckoo 32-bit 8", CPHT_CUCKOO, 40, {1 << 21, 0}, {8, 0}, {32, 0}, 0.70},
	{"cuckoo 16-bit 16", CPHT_CUCKOO, 29, {1 << 20, 0}, {16, 0}, {16, 0}, 0.80},
	{"cuckoo 64-bit 32", CPHT_CUCKOO, 64, {1 << 20, 0}, {32, 0}, {64, 0}, 0.85},
};

static cpht_table *
make(const config *c, cpht_device dev, uint64_t seed)
{
	cpht_params p;
	cpht_table *t = NULL;
	char		err[512];

	memset(&p, 0, sizeof(p));
	p.kind = c->kind;
	p.device = dev;
	p.key_bits = c->key_bits;
	p.seed = seed;
	p.fixed_size = 1;			/* the overfull batch must find the table full */
	for (int l = 0; l < (c->kind == CPHT_ICEBERG ? 2 : 1); l++)
	{
		p.slots[l] = c->slots[l];
		p.bucket_slots[l] = c->buckets[l];
		p.slot_bits[l] = c->widths[l];
	}
	if (cpht_table_create(&p, &t, err, sizeof(err)) != CPHT_OK)
	{
		fprintf(stderr, "%s: create on %s failed: %s\n", c->name, dev == CPHT_DEVICE_GPU ? "GPU" : "CPU", err);
		exit(2);
	}
	return t;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t	x = *(const uint64_t *) a;
	uint64_t	y = *(const uint64_t *) b;

	return x < y ? -1 : x > y;
}

/* Keys whose status equals `value`, sorted. */
static uint64_t *
keys_with(const uint64_t *keys, const uint8_t *st, size_t n, uint8_t value, size_t *m)
{
	uint64_t   *out = malloc((n ? n : 1) * sizeof(uint64_t));

	*m = 0;
	for (size_t i = 0; i < n; i++)
		if (st[i] == value)
			out[(*m)++] = keys[i];
	qsort(out, *m, sizeof(uint64_t), cmp_u64);
	return out;
}

/* Same multiset of keys with status `value` on both, none twice. */
static int
same_key_set(const uint64_t *keys, const uint8_t *a, const uint8_t *b, size_t n, uint8_t value)
{
	size_t		ma,
				mb;
	uint64_t   *ka = keys_with(keys, a, n, value, &ma);
	uint64_t   *kb = keys_with(keys, b, n, value, &mb);
	int			ok = ma == mb && memcmp(ka, kb, ma * sizeof(uint64_t)) == 0;

	for (size_t i = 1; ok && i < mb; i++)
		ok = kb[i] != kb[i - 1];
	free(ka);
	free(kb);
	return ok;
}

static void
shuffle(uint64_t *v, size_t n, uint64_t *rng)
{
	for (size_t i = n; i > 1; i--)
	{
		size_t		j = unit_rand(rng) % i;
		uint64_t	x = v[i - 1];

		v[i - 1] = v[j];
		v[j] = x;
	}
}

/* The d-th distinct key of a config's pool: a bijection of [0, 2^key_bits)
 * (multiplications by odd numbers and xor-shifts), so different d never
 * give the same key. */
static uint64_t
pool_key(const config *c, uint64_t d)
{
	const uint64_t m = layout_mask(c->key_bits);
	const int	h = c->key_bits / 2;
	uint64_t	x = (d + 12345) & m;

	x = (x * 0x9e3779b97f4a7c15ULL) & m;
	x ^= x >> h;
	x = (x * 0xbf58476d1ce4e5b9ULL) & m;
	x ^= x >> (h + 1);
	x = (x * 0x94d049bb133111ebULL) & m;
	return x;
}

/*
 * A batch: `hot` copies of 4 hot keys, the rest random draws from the
 * pool's first `pool` keys (hot keys are pool keys too), shuffled.
 */
static void
make_batch(const config *c, uint64_t *keys, size_t n, size_t hot, uint64_t pool, uint64_t *rng)
{
	for (size_t i = 0; i < n; i++)
		keys[i] = i < hot ? pool_key(c, i % 4) : pool_key(c, unit_rand(rng) % pool);
	shuffle(keys, n, rng);
}

static void
compare_stats(const config *c, cpht_table *cpu, cpht_table *gpu, const char *when)
{
	cpht_stats	a,
				b;
	uint64_t	la = 0,
				lb = 0,
				ta = 0,
				tb = 0;

	CHECK(cpht_table_stats(cpu, &a) == CPHT_OK, "%s: cpu stats", c->name);
	CHECK(cpht_table_stats(gpu, &b) == CPHT_OK, "%s: gpu stats: %s", c->name, cpht_table_error(gpu));
	for (int l = 0; l < a.levels; l++)
	{
		la += a.live[l];
		lb += b.live[l];
		ta += a.tombstones[l];
		tb += b.tombstones[l];
	}
	CHECK(a.count == b.count, "%s %s: count cpu %llu gpu %llu", c->name, when,
		  (unsigned long long) a.count, (unsigned long long) b.count);
	CHECK(la + a.stashed == lb + b.stashed, "%s %s: live cpu %llu+%llu gpu %llu+%llu", c->name, when,
		  (unsigned long long) la, (unsigned long long) a.stashed,
		  (unsigned long long) lb, (unsigned long long) b.stashed);
	/* Cuckoo puts reuse tombstones, which ones depends on the order. */
	if (c->kind == CPHT_ICEBERG)
		CHECK(ta == tb, "%s %s: tombstones cpu %llu gpu %llu", c->name, when,
			  (unsigned long long) ta, (unsigned long long) tb);
	CHECK(lb + b.stashed == b.count, "%s %s: gpu live %llu != count %llu", c->name, when,
		  (unsigned long long) (lb + b.stashed), (unsigned long long) b.count);
}

static void
run_config(const config *c)
{
	const size_t n = (size_t) 1 << 21;	/* 2M keys a batch: one GPU chunk and a bit */
	const size_t nq = (size_t) 3 << 20;	/* queries: spans two GPU chunks */
	uint64_t	total = c->slots[0] + (c->kind == CPHT_ICEBERG ? c->slots[1] : 0);
	uint64_t	pool = (uint64_t) (c->fill * (double) total);
	uint64_t	rng = 99 + (uint64_t) c->key_bits;
	cpht_table *cpu = make(c, CPHT_DEVICE_CPU, 4242);
	cpht_table *gpu = make(c, self_check ? CPHT_DEVICE_CPU : CPHT_DEVICE_GPU, 4242);
	uint64_t   *keys = malloc((nq + n) * sizeof(uint64_t));
	uint8_t    *sa = malloc(nq + n);
	uint8_t    *sb = malloc(nq + n);

	for (int round = 0; round < 4; round++)
	{
		/* Round 0: 1M copies of the hot keys; later rounds reach the pool. */
		size_t		hot = round == 0 ? (size_t) 1 << 20 : (size_t) 1 << 16;
		size_t		m = round == 3 ? n + (n >> 1) : n;	/* round 3: two chunks */
		cpht_status ra,
					rb;

		make_batch(c, keys, m, hot, pool, &rng);
		memset(sb, 0xee, m);
		ra = cpht_table_find_or_put(cpu, keys, m, sa);
		rb = cpht_table_find_or_put(gpu, keys, m, sb);
		CHECK(ra == CPHT_OK && rb == CPHT_OK, "%s round %d fop: cpu %d gpu %d (%s)", c->name, round,
			  ra, rb, cpht_table_error(gpu));
		CHECK(same_key_set(keys, sa, sb, m, CPHT_PUT), "%s round %d: keys put differ", c->name, round);
		if (c->kind == CPHT_CUCKOO)
			CHECK(memcmp(sa, sb, m) == 0, "%s round %d: cuckoo status arrays differ", c->name, round);
		{
			size_t		bad = 0;

			for (size_t i = 0; i < m; i++)
				bad += sb[i] != CPHT_FOUND && sb[i] != CPHT_PUT;
			CHECK(bad == 0, "%s round %d: %zu statuses neither FOUND nor PUT", c->name, round, bad);
		}
		CHECK(cpht_table_count(cpu) == cpht_table_count(gpu), "%s round %d: count cpu %llu gpu %llu",
			  c->name, round, (unsigned long long) cpht_table_count(cpu),
			  (unsigned long long) cpht_table_count(gpu));

		/* Queries: half from the pool (many present), half never inserted. */
		for (size_t i = 0; i < nq; i++)
			keys[i] = (i & 1) ? pool_key(c, unit_rand(&rng) % pool) : pool_key(c, pool + unit_rand(&rng) % pool);
		memset(sb, 0xee, nq);
		ra = cpht_table_find(cpu, keys, nq, sa);
		rb = cpht_table_find(gpu, keys, nq, sb);
		CHECK(ra == CPHT_OK && rb == CPHT_OK && memcmp(sa, sb, nq) == 0,
			  "%s round %d: find differs", c->name, round);

		/* Erase some keys (with duplicates) after rounds 1 and 2. */
		if (round == 1 || round == 2)
		{
			size_t		ne = (size_t) 1 << 15;

			make_batch(c, keys, ne, ne / 8, pool, &rng);
			ra = cpht_table_erase(cpu, keys, ne, sa);
			rb = cpht_table_erase(gpu, keys, ne, sb);
			CHECK(ra == CPHT_OK && rb == CPHT_OK, "%s round %d erase: cpu %d gpu %d", c->name, round, ra, rb);
			CHECK(same_key_set(keys, sa, sb, ne, 1), "%s round %d: keys erased differ", c->name, round);
		}
		compare_stats(c, cpu, gpu, "after round");
	}

	/*
	 * Run out of room: a batch of more new distinct keys than the table has
	 * free slots.  Both must fail and hold exactly what they held.
	 */
	{
		uint64_t	before_cpu = cpht_table_count(cpu);
		uint64_t	before_gpu = cpht_table_count(gpu);
		/* Cuckoo: just past the free slots (each key that finds none runs a
		 * whole eviction chain, slow on the CPU side). */
		size_t		nf = c->kind == CPHT_ICEBERG ? (size_t) total
			: (size_t) (total - cpht_table_count(cpu) + total / 16);
		size_t		nold = (size_t) 1 << 20;
		cpht_stats	s0,
					s1;
		cpht_status ra,
					rb;
		uint64_t   *big = malloc((nf + nold) * sizeof(uint64_t));
		uint8_t    *fa = malloc(nf + nold);
		uint8_t    *fb = malloc(nf + nold);

		CHECK(cpht_table_stats(gpu, &s0) == CPHT_OK, "%s: stats", c->name);
		for (size_t i = 0; i < nf; i++)
			big[i] = pool_key(c, 4 * pool + i);
		ra = cpht_table_find_or_put(cpu, big, nf, fa);
		rb = cpht_table_find_or_put(gpu, big, nf, fb);
		CHECK(ra == CPHT_ERR_FULL && rb == CPHT_ERR_FULL, "%s: overfull batch: cpu %d gpu %d (%s)",
			  c->name, ra, rb, cpht_table_error(gpu));
		CHECK(cpht_table_count(cpu) == before_cpu && cpht_table_count(gpu) == before_gpu,
			  "%s: count changed by a failed call", c->name);
		CHECK(cpht_table_stats(gpu, &s1) == CPHT_OK, "%s: stats", c->name);
		if (c->kind == CPHT_ICEBERG)
		{
			/* Undone slot for slot: the same live slots in every level. */
			for (int l = 0; l < 2; l++)
				CHECK(s0.live[l] == s1.live[l] && s0.tombstones[l] == s1.tombstones[l],
					  "%s: level %d changed by a failed call (live %llu -> %llu)", c->name, l + 1,
					  (unsigned long long) s0.live[l], (unsigned long long) s1.live[l]);
		}
		/* Old keys and the failed batch's keys: same answers on both. */
		for (size_t i = 0; i < nold; i++)
			big[nf + i] = pool_key(c, unit_rand(&rng) % pool);
		ra = cpht_table_find(cpu, big, nf + nold, fa);
		rb = cpht_table_find(gpu, big, nf + nold, fb);
		CHECK(ra == CPHT_OK && rb == CPHT_OK && memcmp(fa, fb, nf + nold) == 0,
			  "%s: find after a failed call differs", c->name);
		{
			size_t		present = 0;

			for (size_t i = 0; i < nf; i++)
				present += fb[i];
			CHECK(present == 0, "%s: %zu keys of a failed call stayed", c->name, present);
		}
		compare_stats(c, cpu, gpu, "after a failed call");
		free(big);
		free(fa);
		free(fb);
	}

	printf("ok - %s: %llu keys\n", c->name, (unsigned long long) cpht_table_count(gpu));
	fflush(stdout);
	cpht_table_destroy(cpu);
	cpht_table_destroy(gpu);
	free(keys);
	free(sa);
	free(sb);
}

int
main(void)
{
	char		why[512];
	const char *self = getenv("CPHT_DIFF_SELF");

	self_check = self != NULL && strcmp(self, "1") == 0;
	if (!self_check && !cpht_gpu_usable(why, sizeof(why)))
	{
		printf("SKIP: %s\n", why);
		return SKIP_CODE;
	}
	for (size_t i = 0; i < sizeof(configs) / sizeof(configs[0]); i++)
		run_config(&configs[i]);
	UNIT_DONE();
}
