/*
 * test_same_slots.c — the CPU and the GPU lay keys out identically, so a
 * table's slots mean the same on either device (what saving a table on one
 * device and loading it on the other relies on).
 *
 * For both kinds and key widths 16, 32, 37 and 64 (the layouts
 * cpht_params_for_capacity picks for them):
 *
 *   A. One key per call: find-or-put, erase and put of single keys run the
 *      same deterministic placement on both devices, so after the same
 *      sequence the slot arrays must be equal byte for byte, level by level,
 *      and so must the stashes.  (Within a batch the GPU places keys
 *      concurrently: which of two keys racing for a bucket's last slot wins
 *      may differ, so batches are compared by part B instead.)  The
 *      tables have room for every key, so neither grows: a growth moves all
 *      keys as one batch, which places them as a batch does.
 *
 *   B. Batches, and the slot image moved across: a table filled in batches
 *      on one device has its slots copied into a fresh table of the same
 *      parameters on the other device.  The copy must find every key the
 *      original holds and none of a set of absent keys, report the same
 *      count and per-level live slots, and a further batch of find-or-put
 *      must report the same keys new on both.
 *
 * Where no GPU is usable it prints "SKIP: <reason>" and exits 77;
 * CPHT_SAME_SLOTS_SELF=1 runs it with the CPU on both sides.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpht_table.h"
#include "table/device_ops.h"
#include "unit.h"

#define SKIP_CODE 77

/* The second device: the GPU, or the CPU again with CPHT_SAME_SLOTS_SELF=1
 * (a check of the test itself where no GPU is usable). */
static cpht_device other = CPHT_DEVICE_GPU;

static cpht_table *
make(cpht_kind kind, int key_bits, uint64_t capacity, cpht_device dev)
{
	cpht_params p;
	cpht_table *t = NULL;
	char		err[512];

	if (cpht_params_for_capacity(kind, capacity, key_bits, &p, err, sizeof(err)) != CPHT_OK)
	{
		fprintf(stderr, "params: %s\n", err);
		exit(2);
	}
	p.device = dev;
	p.seed = 0x5eed0000u + (uint64_t) key_bits;
	if (cpht_table_create(&p, &t, err, sizeof(err)) != CPHT_OK)
	{
		fprintf(stderr, "create on %s failed: %s\n", dev == CPHT_DEVICE_GPU ? "GPU" : "CPU", err);
		exit(2);
	}
	return t;
}

static uint64_t
key_of(uint64_t *rng, int key_bits)
{
	uint64_t	k = unit_rand(rng);

	return key_bits < 64 ? k & ((UINT64_C(1) << key_bits) - 1) : k;
}

static size_t
level_bytes(const cpht_table *t, int l)
{
	return (size_t) (t->params.slots[l] * (uint64_t) t->params.slot_bits[l] / 8);
}

static void *
slots_of(cpht_table *t, int l)
{
	void	   *host = malloc(level_bytes(t, l));

	if (host == NULL || t->ops->copy_slots(t, l, host) != CPHT_OK)
	{
		fprintf(stderr, "copy_slots failed\n");
		exit(2);
	}
	return host;
}

/* A: the same single-key calls on both devices, then the slots compared. */
static void
one_key_calls(cpht_kind kind, int key_bits)
{
	const char *name = kind == CPHT_ICEBERG ? "iceberg" : "cuckoo";
	cpht_table *t[2];
	uint64_t	rng = 42 + (uint64_t) key_bits;
	uint64_t   *keys = malloc(4000 * sizeof(uint64_t));
	int			diffs = 0;

	t[0] = make(kind, key_bits, 4000, CPHT_DEVICE_CPU);
	t[1] = make(kind, key_bits, 4000, other);
	for (int i = 0; i < 4000; i++)
		keys[i] = key_of(&rng, key_bits);

	for (int d = 0; d < 2; d++)
	{
		uint8_t		st;
		uint64_t	put;

		/* 3000 find-or-puts, 600 deletes, 1000 puts (some repeat old keys) */
		for (int i = 0; i < 3000; i++)
			CHECK(cpht_table_find_or_put(t[d], &keys[i], 1, &st) == CPHT_OK, "%s/%d fop %d", name, key_bits, i);
		for (int i = 0; i < 3000; i += 5)
			CHECK(cpht_table_erase(t[d], &keys[i], 1, &st) == CPHT_OK, "%s/%d erase %d", name, key_bits, i);
		for (int i = 2500; i < 3500; i++)
			CHECK(cpht_table_put(t[d], &keys[i], 1, &put) == CPHT_OK, "%s/%d put %d", name, key_bits, i);
	}

	for (int d = 0; d < 2; d++)
	{
		cpht_stats	s;

		CHECK(cpht_table_stats(t[d], &s) == CPHT_OK && s.grows == 0, "%s/%d: the %s table grew", name, key_bits,
			  d ? "second" : "CPU");
	}
	CHECK(cpht_table_count(t[0]) == cpht_table_count(t[1]), "%s/%d counts %llu vs %llu", name, key_bits,
		  (unsigned long long) cpht_table_count(t[0]), (unsigned long long) cpht_table_count(t[1]));
	for (int l = 0; l < t[0]->levels; l++)
	{
		void	   *a = slots_of(t[0], l);
		void	   *b = slots_of(t[1], l);

		if (memcmp(a, b, level_bytes(t[0], l)) != 0)
			diffs++;
		CHECK(memcmp(a, b, level_bytes(t[0], l)) == 0, "%s/%d: level %d slots differ between CPU and GPU",
			  name, key_bits, l);
		free(a);
		free(b);
	}
	CHECK(t[0]->nstash == t[1]->nstash &&
		  (t[0]->nstash == 0 || memcmp(t[0]->stash, t[1]->stash, t[0]->nstash * sizeof(uint64_t)) == 0),
		  "%s/%d: stashes differ", name, key_bits);
	printf("# A %s key_bits %d: %llu keys, slot arrays %s\n", name, key_bits,
		   (unsigned long long) cpht_table_count(t[0]), diffs ? "DIFFER" : "identical");
	cpht_table_destroy(t[0]);
	cpht_table_destroy(t[1]);
	free(keys);
}

/* B: a table filled in batches on device `from`, its slots loaded into a
 * table on the other device. */
static void
image_across(cpht_kind kind, int key_bits, int gpu_first)
{
	cpht_device from = gpu_first ? other : CPHT_DEVICE_CPU;
	cpht_device to = gpu_first ? CPHT_DEVICE_CPU : other;
	const char *name = kind == CPHT_ICEBERG ? "iceberg" : "cuckoo";
	const char *dir = gpu_first ? "GPU->CPU" : "CPU->GPU";
	const size_t n = 600000,
				m = 200000;
	uint64_t	rng = 7 + (uint64_t) key_bits + (uint64_t) gpu_first;
	uint64_t   *keys = malloc((n + m) * sizeof(uint64_t));
	uint8_t    *st = malloc(n + m);
	uint8_t    *st2 = malloc(n + m);
	cpht_table *src = make(kind, key_bits, 1000000, from);
	cpht_table *dst = make(kind, key_bits, 1000000, to);
	cpht_stats	s1,
				s2;
	size_t		missing = 0,
				extra = 0,
				differ = 0;
	uint64_t	moved;

	for (size_t i = 0; i < n + m; i++)
		keys[i] = key_of(&rng, key_bits);
	for (size_t at = 0; at < n; at += 65536)
		CHECK(cpht_table_find_or_put(src, keys + at, at + 65536 < n ? 65536 : n - at, st) == CPHT_OK,
			  "%s/%d %s: fill", name, key_bits, dir);
	CHECK(cpht_table_erase(src, keys, n / 10, st) == CPHT_OK, "%s/%d %s: erase", name, key_bits, dir);
	CHECK(src->nstash == 0, "%s/%d %s: no stash at this fill", name, key_bits, dir);

	for (int l = 0; l < src->levels; l++)
	{
		void	   *img = slots_of(src, l);

		CHECK(dst->ops->write_slots(dst, l, img) == CPHT_OK, "%s/%d %s: write_slots", name, key_bits, dir);
		free(img);
	}
	dst->count = src->count;
	moved = src->count;

	/* every key still held is found, the erased ones and the fresh ones are not */
	CHECK(cpht_table_find(dst, keys, n + m, st) == CPHT_OK, "%s/%d %s: find", name, key_bits, dir);
	CHECK(cpht_table_find(src, keys, n + m, st2) == CPHT_OK, "%s/%d %s: find", name, key_bits, dir);
	for (size_t i = 0; i < n + m; i++)
	{
		missing += st2[i] && !st[i];
		extra += st[i] && !st2[i];
	}
	CHECK(missing == 0 && extra == 0, "%s/%d %s: %zu keys missing, %zu extra in the copy",
		  name, key_bits, dir, missing, extra);
	CHECK(cpht_table_stats(src, &s1) == CPHT_OK && cpht_table_stats(dst, &s2) == CPHT_OK, "stats");
	for (int l = 0; l < src->levels; l++)
		CHECK(s1.live[l] == s2.live[l] && s1.tombstones[l] == s2.tombstones[l],
			  "%s/%d %s: level %d live %llu/%llu tombstones %llu/%llu", name, key_bits, dir, l,
			  (unsigned long long) s1.live[l], (unsigned long long) s2.live[l],
			  (unsigned long long) s1.tombstones[l], (unsigned long long) s2.tombstones[l]);

	/* the same further batch: the same keys new on both */
	CHECK(cpht_table_find_or_put(src, keys + n - m, 2 * m, st) == CPHT_OK, "fop src");
	CHECK(cpht_table_find_or_put(dst, keys + n - m, 2 * m, st2) == CPHT_OK, "fop dst");
	for (size_t i = 0; i < 2 * m; i++)
		differ += (st[i] == CPHT_PUT) != (st2[i] == CPHT_PUT);
	CHECK(cpht_table_count(src) == cpht_table_count(dst), "%s/%d %s: counts after a batch", name, key_bits, dir);
	/* a key repeated in the batch may be PUT at another occurrence: compare
	 * the number of new keys, which must match exactly */
	{
		size_t		a = 0,
					b = 0;

		for (size_t i = 0; i < 2 * m; i++)
		{
			a += st[i] == CPHT_PUT;
			b += st2[i] == CPHT_PUT;
		}
		CHECK(a == b, "%s/%d %s: %zu vs %zu new keys in the next batch", name, key_bits, dir, a, b);
	}
	printf("# B %s key_bits %d %s: %llu keys moved, %zu missing, %zu extra; next batch: %zu keys judged differently\n",
		   name, key_bits, dir, (unsigned long long) moved, missing, extra, differ);
	cpht_table_destroy(src);
	cpht_table_destroy(dst);
	free(keys);
	free(st);
	free(st2);
}

int
main(void)
{
	static const int widths[] = {16, 32, 37, 64};
	char		why[512];

	if (getenv("CPHT_SAME_SLOTS_SELF"))
		other = CPHT_DEVICE_CPU;
	else if (!cpht_gpu_usable(why, sizeof(why)))
	{
		printf("SKIP: %s\n", why);
		return SKIP_CODE;
	}
	for (int k = 0; k < 2; k++)
		for (int w = 0; w < 4; w++)
		{
			cpht_kind	kind = k ? CPHT_CUCKOO : CPHT_ICEBERG;

			one_key_calls(kind, widths[w]);
			if (widths[w] > 20)		/* 16-bit keys: 65536 in all, too few for B */
			{
				image_across(kind, widths[w], 1);
				image_across(kind, widths[w], 0);
			}
		}
	UNIT_DONE();
}
