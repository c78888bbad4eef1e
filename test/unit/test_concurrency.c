/*
 * test_concurrency.c — several threads run find-or-put on one iceberg table
 * at once, every key offered by every thread many times: each distinct key
 * must be PUT exactly once over all threads, and be stored once.  This is
 * the situation the lockless algorithm's correctness proof is about.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "cpu/cpu_ops.h"
#include "unit.h"

#define THREADS 8
#define DISTINCT 40000
#define ROUNDS 10

typedef struct worker
{
	cpht_table *t;
	const uint64_t *keys;
	_Atomic int *puts;			/* per distinct key */
	_Atomic int *fulls;
	uint64_t	seed;
} worker;

static void *
run(void *arg)
{
	worker	   *w = arg;
	uint64_t	rng = w->seed;

	for (int r = 0; r < ROUNDS * DISTINCT; r++)
	{
		size_t		i = (size_t) (unit_rand(&rng) % DISTINCT);
		uint8_t		s = iceberg_fop(w->t, w->keys[i]);

		if (s == CPHT_PUT)
			atomic_fetch_add(&w->puts[i], 1);
		else if (s == CPHT_FULL)
			atomic_fetch_add(w->fulls, 1);
	}
	/* Then every key once, in order, so none is missed by the random draw. */
	for (size_t i = 0; i < DISTINCT; i++)
		if (iceberg_fop(w->t, w->keys[i]) == CPHT_PUT)
			atomic_fetch_add(&w->puts[i], 1);
	return NULL;
}

static void
check_geometry(int b0, int b1, int width, int key_bits)
{
	cpht_params p;
	cpht_table *t;
	char		err[256];
	uint64_t   *keys = malloc(DISTINCT * sizeof(uint64_t));
	_Atomic int *puts = calloc(DISTINCT, sizeof(_Atomic int));
	_Atomic int fulls = 0;
	pthread_t	tids[THREADS];
	worker		w[THREADS];
	int			once = 0;
	uint8_t    *found = malloc(DISTINCT);
	cpht_stats	st;

	memset(&p, 0, sizeof(p));
	p.kind = CPHT_ICEBERG;
	p.key_bits = key_bits;
	p.seed = 3;
	/* Small table (fill ~0.55) so that level 2 and its races are exercised. */
	p.slots[0] = 65536;
	p.slots[1] = 8192;
	p.bucket_slots[0] = b0;
	p.bucket_slots[1] = b1;
	p.slot_bits[0] = width;
	p.slot_bits[1] = 0;
	if (cpht_table_create(&p, &t, err, sizeof(err)) != CPHT_OK)
	{
		fprintf(stderr, "create: %s\n", err);
		exit(2);
	}
	for (size_t i = 0; i < DISTINCT; i++)
		keys[i] = (layout_mix64(i + 1) ^ (i << 7)) & layout_mask(key_bits);
	/* make the keys distinct even after masking */
	for (size_t i = 0; i < DISTINCT; i++)
		keys[i] = ((keys[i] >> 16) << 16 | i) & layout_mask(key_bits);

	for (int k = 0; k < THREADS; k++)
	{
		w[k] = (worker) {t, keys, puts, &fulls, 1000 + (uint64_t) k};
		pthread_create(&tids[k], NULL, run, &w[k]);
	}
	for (int k = 0; k < THREADS; k++)
		pthread_join(tids[k], NULL);

	for (size_t i = 0; i < DISTINCT; i++)
		once += atomic_load(&puts[i]) == 1;
	CHECK(atomic_load(&fulls) == 0, "%d FULL answers", atomic_load(&fulls));
	CHECK(once == DISTINCT, "%d of %d keys were PUT exactly once (%d/%d buckets)",
		  once, DISTINCT, b0, b1);
	CHECK(cpht_table_find(t, keys, DISTINCT, found) == CPHT_OK && memchr(found, 0, DISTINCT) == NULL,
		  "all keys found");
	cpht_table_stats(t, &st);
	CHECK(st.live[0] + st.live[1] == DISTINCT, "stored %llu slots for %d keys",
		  (unsigned long long) (st.live[0] + st.live[1]), DISTINCT);
	CHECK(st.live[1] > 0, "level 2 was used");
	cpht_table_destroy(t);
	free(keys);
	free(puts);
	free(found);
}

int
main(void)
{
	check_geometry(16, 8, 0, 64);
	check_geometry(8, 4, 16, 28);
	check_geometry(32, 16, 32, 40);
	UNIT_DONE();
}
