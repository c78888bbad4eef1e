/*
 * test_grow.c — tables that grow: on the CPU and (where one is usable) on
 * the GPU, for both kinds.
 *
 *  - a batch far larger than the table, every key three times: each key is
 *    PUT exactly once, the count is exact, the table grew;
 *  - a stream of batches that overlap earlier ones: each key new exactly
 *    once over the stream;
 *  - a transaction that deletes keys (some twice, reinserted in between),
 *    then grows the table, then rolls back: exactly the keys before it;
 *  - the memory hook refusing the larger layout: CPHT_ERR_LIMIT and the
 *    table unchanged, then the same call goes through once it may; every
 *    byte the growth took is given back when the table is destroyed;
 *  - a growth doubles the buckets, holding at its peak the old and the new
 *    slots, 1.5 times the new (for a GPU table, with its transfer buffers);
 *  - growth impossible (every key bit in the bucket address): CPHT_ERR_FULL,
 *    the table unchanged; a fixed_size table reports CPHT_ERR_FULL;
 *  - a GPU table grows like the CPU table fed the same batches: the same
 *    answers, the same layout, the same number of growths.
 */
#include <string.h>

#include "cpht_table.h"
#include "table/layout.h"
#include "util/faults.h"
#include "table/device_ops.h"
#include "unit.h"
#include "unit_tables.h"

static uint64_t
grows_of(cpht_table *t)
{
	cpht_stats	s;

	return cpht_table_stats(t, &s) == CPHT_OK ? s.grows : 0;
}

static uint64_t
slots_of(cpht_table *t)
{
	cpht_stats	s;

	if (cpht_table_stats(t, &s) != CPHT_OK)
		return 0;
	return s.slots[0] + s.slots[1];
}

/* A copy of the stash (sorted), to tell later which keys joined it. */
typedef struct stash_copy
{
	uint64_t   *keys;
	size_t		n;
} stash_copy;

static stash_copy
stash_of(cpht_table *t)
{
	stash_copy	c;

	c.n = t->nstash;
	c.keys = malloc((c.n + 1) * sizeof(uint64_t));
	memcpy(c.keys, t->stash, c.n * sizeof(uint64_t));
	return c;
}

/*
 * Keys in the stash now that were not in `before`.  (A rollback may take
 * keys out of it: a stashed key that the log shows inserted after a
 * delete is taken out, then goes back into its logged tombstone.)
 */
static size_t
newly_stashed(cpht_table *t, stash_copy before)
{
	size_t		added = 0;

	for (size_t i = 0; i < t->nstash; i++)
	{
		size_t		lo = 0,
					hi = before.n;

		while (lo < hi)
		{
			size_t		mid = (lo + hi) / 2;

			if (before.keys[mid] < t->stash[i])
				lo = mid + 1;
			else
				hi = mid;
		}
		added += lo == before.n || before.keys[lo] != t->stash[i];
	}
	return added;
}

/* Distinct 64-bit keys (mix64 is a bijection). */
static uint64_t
key_of(uint64_t i)
{
	return layout_mix64(i + 1) ^ 0x5bd1e995ULL;
}

static void
check_duplicates(cpht_kind kind, cpht_device dev, const char *what)
{
	const size_t distinct = 200000;
	size_t		n = 3 * distinct;
	cpht_table *t = unit_table(kind, dev, 1000, 64, 42);
	uint64_t   *keys = malloc(n * sizeof(uint64_t));
	uint32_t   *idx = malloc(n * sizeof(uint32_t));
	uint8_t    *status = malloc(n);
	uint8_t    *puts = calloc(distinct, 1);
	uint64_t	rng = 7;
	size_t		wrong = 0;

	if (t == NULL)
		return;
	for (size_t i = 0; i < n; i++)
		idx[i] = (uint32_t) (i % distinct);
	for (size_t i = n - 1; i > 0; i--)
	{
		size_t		j = (size_t) (unit_rand(&rng) % (i + 1));
		uint32_t	x = idx[i];

		idx[i] = idx[j];
		idx[j] = x;
	}
	for (size_t i = 0; i < n; i++)
		keys[i] = key_of(idx[i]);
	CHECK(cpht_table_find_or_put(t, keys, n, status) == CPHT_OK, "%s: batch: %s", what, cpht_table_error(t));
	for (size_t i = 0; i < n; i++)
		puts[idx[i]] += status[i] == CPHT_PUT;
	for (size_t i = 0; i < distinct; i++)
		wrong += puts[i] != 1;
	CHECK(wrong == 0, "%s: %zu keys not PUT exactly once", what, wrong);
	CHECK(cpht_table_count(t) == distinct, "%s: count %llu", what, (unsigned long long) cpht_table_count(t));
	CHECK(grows_of(t) >= 1 && slots_of(t) > distinct, "%s: grew %llu times to %llu slots", what,
		  (unsigned long long) grows_of(t), (unsigned long long) slots_of(t));

	/* The same batch again: all found; absent keys stay absent. */
	CHECK(cpht_table_find_or_put(t, keys, n, status) == CPHT_OK && memchr(status, CPHT_PUT, n) == NULL,
		  "%s: second batch all found", what);
	for (size_t i = 0; i < 1000; i++)
		keys[i] = key_of(distinct + i);
	CHECK(cpht_table_find(t, keys, 1000, status) == CPHT_OK && memchr(status, 1, 1000) == NULL,
		  "%s: absent keys not found", what);

	/* A stream of overlapping batches: each key new exactly once. */
	{
		const size_t universe = 400000,
					batch = 30000;
		uint8_t    *seen = calloc(universe, 1);

		wrong = 0;
		for (size_t i = 0; i < distinct; i++)
			seen[i] = 1;
		for (int b = 0; b < 20; b++)
		{
			memset(puts, 0, distinct);
			for (size_t i = 0; i < batch; i++)
			{
				idx[i] = (uint32_t) (unit_rand(&rng) % universe);
				keys[i] = key_of(idx[i]);
			}
			CHECK(cpht_table_find_or_put(t, keys, batch, status) == CPHT_OK, "%s: stream", what);
			for (size_t i = 0; i < batch; i++)
				if (status[i] == CPHT_PUT)
				{
					wrong += seen[idx[i]] != 0;
					seen[idx[i]] = 2;
				}
			for (size_t i = 0; i < batch; i++)
			{
				/* a key absent before the batch was PUT once in it */
				wrong += seen[idx[i]] == 0;
				if (seen[idx[i]] == 2)
					seen[idx[i]] = 1;
			}
		}
		{
			uint64_t	in = 0;

			for (size_t i = 0; i < universe; i++)
				in += seen[i];
			CHECK(cpht_table_count(t) == in, "%s: stream count %llu, expected %llu", what,
				  (unsigned long long) cpht_table_count(t), (unsigned long long) in);
		}
		CHECK(wrong == 0, "%s: stream: %zu keys new twice or never", what, wrong);
		free(seen);
	}
	free(keys);
	free(idx);
	free(status);
	free(puts);
	cpht_table_destroy(t);
}

/* The table holds exactly keys [0, n) of key_of (and none of the `beyond`
 * keys after them). */
static void
expect_exactly(cpht_table *t, size_t n, size_t beyond, const char *what, const char *after)
{
	uint64_t   *keys = malloc((n + beyond) * sizeof(uint64_t));
	uint8_t    *found = malloc(n + beyond);
	size_t		wrong = 0;

	for (size_t i = 0; i < n + beyond; i++)
		keys[i] = key_of(i);
	CHECK(cpht_table_find(t, keys, n + beyond, found) == CPHT_OK, "%s: find after %s: %s", what, after,
		  cpht_table_error(t));
	for (size_t i = 0; i < n + beyond; i++)
		wrong += found[i] != (i < n);
	CHECK(wrong == 0, "%s: after %s: %zu keys wrong", what, after, wrong);
	CHECK(cpht_table_count(t) == n, "%s: after %s: count %llu, expected %zu", what, after,
		  (unsigned long long) cpht_table_count(t), n);
	free(keys);
	free(found);
}

static void
check_transaction(cpht_kind kind, cpht_device dev, const char *what)
{
	const size_t base = 5000,
				more = 60000;
	cpht_table *t = unit_table(kind, dev, 1000, 64, 42);
	uint64_t   *keys = malloc((base + more) * sizeof(uint64_t));
	uint8_t    *out = malloc(base + more);
	uint64_t	grows,
				mark;
	stash_copy	stashed;

	if (t == NULL)
		return;
	for (size_t i = 0; i < base + more; i++)
		keys[i] = key_of(i);
	CHECK(cpht_table_find_or_put(t, keys, base, out) == CPHT_OK, "%s: base", what);
	cpht_table_set_logging(t, 1);

	/* Deletes whose tombstones the log needs: keys 0..999; 0..299 come
	 * back and 0..99 go again (two tombstones of one key). */
	CHECK(cpht_table_erase(t, keys, 1000, out) == CPHT_OK, "%s: erase", what);
	CHECK(cpht_table_find_or_put(t, keys, 300, out) == CPHT_OK, "%s: reinsert", what);
	CHECK(cpht_table_erase(t, keys, 100, out) == CPHT_OK, "%s: erase again", what);
	mark = cpht_table_log_position(t);
	grows = grows_of(t);
	CHECK(cpht_table_find_or_put(t, keys + base, more, out) == CPHT_OK, "%s: more: %s", what,
		  cpht_table_error(t));
	CHECK(cpht_table_grow(t) == CPHT_OK, "%s: grow: %s", what, cpht_table_error(t));
	CHECK(grows_of(t) >= grows + 2, "%s: grew %llu times in the transaction", what,
		  (unsigned long long) (grows_of(t) - grows));

	/* Back to the savepoint: keys 100..4999 without 300..999.  The deleted
	 * keys go back into their tombstones, none to the stash (where a key
	 * whose logged place held no tombstone would end up). */
	stashed = stash_of(t);
	CHECK(cpht_table_rollback_to(t, mark) == CPHT_OK, "%s: rollback to savepoint: %s", what,
		  cpht_table_error(t));
	CHECK(newly_stashed(t, stashed) == 0, "%s: the rollback stashed %zu keys (stash %zu, was %zu)", what,
		  newly_stashed(t, stashed), t->nstash, stashed.n);
	CHECK(cpht_table_find(t, keys, base + more, out) == CPHT_OK, "%s: find", what);
	{
		size_t		wrong = 0;

		for (size_t i = 0; i < base + more; i++)
			wrong += out[i] != ((i >= 100 && i < 300) || (i >= 1000 && i < base));
		CHECK(wrong == 0, "%s: after the rollback to the savepoint: %zu keys wrong", what, wrong);
	}
	/* Grow again with the deletes still logged, then roll back whole. */
	CHECK(cpht_table_grow(t) == CPHT_OK, "%s: grow: %s", what, cpht_table_error(t));
	CHECK(cpht_table_rollback_to(t, 0) == CPHT_OK, "%s: rollback: %s", what, cpht_table_error(t));
	CHECK(newly_stashed(t, stashed) == 0, "%s: the rollback stashed %zu keys (stash %zu, was %zu)", what,
		  newly_stashed(t, stashed), t->nstash, stashed.n);
	free(stashed.keys);
	expect_exactly(t, base, more, what, "the rollback");
	cpht_table_set_logging(t, 0);
	free(keys);
	free(out);
	cpht_table_destroy(t);
}

static void
check_memory_hook(cpht_kind kind, cpht_device dev, const char *what)
{
	cpht_table *t;
	uint64_t   *keys = malloc(20000 * sizeof(uint64_t));
	uint8_t    *out = malloc(20000);
	uint64_t	slots;
	size_t		n = 0;

	unit_hook_held = 0;
	unit_hook_limit = INT64_MAX;
	cpht_set_memory_hook(unit_memory_hook);
	t = unit_table(kind, dev, 1000, 64, 42);
	if (t == NULL)
		return;
	slots = slots_of(t);
	for (size_t i = 0; i < 20000; i++)
		keys[i] = key_of(i);
	/* Fill to just under the growth threshold. */
	while (n + 1 < slots * 8 / 10 && cpht_table_find_or_put(t, keys + n, 1, out) == CPHT_OK)
		n++;
	CHECK(grows_of(t) == 0 && slots_of(t) == slots, "%s: no growth yet", what);
	unit_hook_limit = unit_hook_held;		/* nothing more */
	CHECK(cpht_table_find_or_put(t, keys, 20000, out) == CPHT_ERR_LIMIT, "%s: refused growth is CPHT_ERR_LIMIT: %s",
		  what, cpht_table_error(t));
	CHECK(slots_of(t) == slots && grows_of(t) == 0, "%s: layout unchanged", what);
	expect_exactly(t, n, 20000 - n, what, "a refused growth");
	unit_hook_limit = INT64_MAX;
	CHECK(cpht_table_find_or_put(t, keys, 20000, out) == CPHT_OK, "%s: allowed growth", what);
	CHECK(grows_of(t) > 0, "%s: grew", what);
	expect_exactly(t, 20000, 1000, what, "an allowed growth");
	cpht_table_destroy(t);
	CHECK(unit_hook_held == 0, "%s: %lld bytes not given back", what, (long long) unit_hook_held);
	cpht_set_memory_hook(NULL);
	free(keys);
	free(out);
}

static void
check_doubling(cpht_kind kind, cpht_device dev, const char *what)
{
	cpht_table *t;
	cpht_stats	before,
				after;
	int64_t		held,
				buffers;

	unit_hook_held = 0;
	unit_hook_limit = INT64_MAX;
	cpht_set_memory_hook(unit_memory_hook);
	t = unit_table(kind, dev, 100000, 64, 42);
	if (t == NULL)
		return;
	CHECK(cpht_table_stats(t, &before) == CPHT_OK, "%s: stats", what);
	held = unit_hook_held;
	unit_hook_peak = unit_hook_held;
	CHECK(cpht_table_grow(t) == CPHT_OK, "%s: grow: %s", what, cpht_table_error(t));
	CHECK(cpht_table_stats(t, &after) == CPHT_OK, "%s: stats", what);
	CHECK(after.slots[0] >= 2 * before.slots[0] && after.slots[0] <= 2 * before.slots[0] + 64 &&
		  after.slots[1] >= 2 * before.slots[1] && after.slots[1] <= 2 * before.slots[1] + 64,
		  "%s: slots %llu+%llu grew to %llu+%llu, not twice", what,
		  (unsigned long long) before.slots[0], (unsigned long long) before.slots[1],
		  (unsigned long long) after.slots[0], (unsigned long long) after.slots[1]);
	/*
	 * At the peak: what the table held plus the new slots, and a GPU
	 * table's transfer buffers as far as they grew (made anew they would
	 * count again).
	 */
	buffers = (int64_t) after.staging_bytes - (int64_t) before.staging_bytes;
	if (buffers < 0)
		buffers = 0;
	CHECK(unit_hook_peak - held <= (int64_t) after.table_bytes + buffers &&
		  (double) (unit_hook_peak - held - buffers + (int64_t) before.table_bytes) <= 1.5 * (double) after.table_bytes + 64,
		  "%s: %lld bytes more at the peak of a growth from %llu to %llu bytes of slots", what,
		  (long long) (unit_hook_peak - held), (unsigned long long) before.table_bytes,
		  (unsigned long long) after.table_bytes);
	cpht_table_destroy(t);
	cpht_set_memory_hook(NULL);
}

static void
check_growth_impossible(cpht_kind kind, cpht_device dev, const char *what)
{
	cpht_table *t = unit_table(kind, dev, 100, 8, 42);
	uint64_t	keys[256];
	uint8_t		out[256];
	int			grows = 0;
	cpht_status rc;

	if (t == NULL)
		return;
	for (int i = 0; i < 256; i++)
		keys[i] = (uint64_t) i;
	CHECK(cpht_table_find_or_put(t, keys, 200, out) == CPHT_OK, "%s: 200 of 256 keys", what);
	while ((rc = cpht_table_grow(t)) == CPHT_OK && grows < 64)
		grows++;
	CHECK(rc == CPHT_ERR_FULL, "%s: growth past the key domain is CPHT_ERR_FULL (%d): %s", what, rc,
		  cpht_table_error(t));
	CHECK(strstr(cpht_table_error(t), "cannot grow") != NULL, "%s: message: %s", what, cpht_table_error(t));
	CHECK(cpht_table_count(t) == 200 && cpht_table_find(t, keys, 256, out) == CPHT_OK &&
		  memchr(out, 0, 200) == NULL && memchr(out + 200, 1, 56) == NULL,
		  "%s: unchanged after the refused growth", what);
	CHECK(cpht_table_find_or_put(t, keys, 256, out) == CPHT_OK && cpht_table_count(t) == 256,
		  "%s: the whole key domain fits", what);
	cpht_table_destroy(t);
}

static void
check_fixed_size(cpht_kind kind, cpht_device dev, const char *what)
{
	cpht_params p;
	cpht_table *t = NULL;
	char		err[256];
	uint64_t   *keys = malloc(10000 * sizeof(uint64_t));
	uint8_t    *out = malloc(10000);

	cpht_params_for_capacity(kind, 1000, 64, &p, err, sizeof(err));
	p.device = dev;
	p.fixed_size = 1;
	CHECK(cpht_table_create(&p, &t, err, sizeof(err)) == CPHT_OK, "%s: create", what);
	for (size_t i = 0; i < 10000; i++)
		keys[i] = key_of(i);
	CHECK(cpht_table_find_or_put(t, keys, 10000, out) == CPHT_ERR_FULL, "%s: fixed size is FULL", what);
	CHECK(cpht_table_count(t) == 0 && grows_of(t) == 0, "%s: unchanged", what);
	cpht_table_destroy(t);
	free(keys);
	free(out);
}

/* A device fault while the keys move: the table is as before, then grows. */
static void
check_fault_in_growth(cpht_kind kind, cpht_device dev, const char *what)
{
	cpht_table *t = unit_table(kind, dev, 1000, 64, 42);
	uint64_t   *keys = malloc(20000 * sizeof(uint64_t));
	uint8_t    *out = malloc(20000);
	uint64_t	slots;

	if (t == NULL)
		return;
	for (size_t i = 0; i < 20000; i++)
		keys[i] = key_of(i);
	CHECK(cpht_table_find_or_put(t, keys, 500, out) == CPHT_OK, "%s: 500 keys", what);
	slots = slots_of(t);
	/* step 1: the first move of the growth the call starts with */
	cpht_fault_arm(1);
	CHECK(cpht_table_find_or_put(t, keys, 20000, out) == CPHT_ERR_DEVICE, "%s: fault while growing: %s",
		  what, cpht_table_error(t));
	cpht_fault_arm(0);
	CHECK(slots_of(t) == slots && grows_of(t) == 0, "%s: layout unchanged after the fault", what);
	expect_exactly(t, 500, 19500, what, "a fault while growing");
	CHECK(cpht_table_find_or_put(t, keys, 20000, out) == CPHT_OK && grows_of(t) > 0, "%s: grows after", what);
	expect_exactly(t, 20000, 0, what, "growing after the fault");
	cpht_table_destroy(t);
	free(keys);
	free(out);
}

/* The GPU grows like the CPU: same batches, same answers and layouts. */
static void
check_gpu_like_cpu(cpht_kind kind, const char *what)
{
	cpht_table *cpu = unit_table(kind, CPHT_DEVICE_CPU, 1000, 64, 42);
	cpht_table *gpu = unit_table(kind, CPHT_DEVICE_GPU, 1000, 64, 42);
	const size_t batch = 50000;
	uint64_t   *keys = malloc(batch * sizeof(uint64_t));
	uint8_t    *a = malloc(batch),
			   *b = malloc(batch);
	size_t		differ = 0;

	if (cpu == NULL || gpu == NULL)
		return;
	for (int round = 0; round < 12; round++)
	{
		/* distinct keys per batch, half of them from earlier batches */
		for (size_t i = 0; i < batch; i++)
			keys[i] = key_of(round * batch / 2 + i);
		CHECK(cpht_table_find_or_put(cpu, keys, batch, a) == CPHT_OK &&
			  cpht_table_find_or_put(gpu, keys, batch, b) == CPHT_OK, "%s: round %d", what, round);
		differ += memcmp(a, b, batch) != 0;
	}
	CHECK(differ == 0, "%s: %zu batches answered differently", what, differ);
	CHECK(grows_of(cpu) == grows_of(gpu) && grows_of(cpu) > 0 && slots_of(cpu) == slots_of(gpu),
		  "%s: grows cpu %llu gpu %llu, slots cpu %llu gpu %llu", what,
		  (unsigned long long) grows_of(cpu), (unsigned long long) grows_of(gpu),
		  (unsigned long long) slots_of(cpu), (unsigned long long) slots_of(gpu));
	expect_exactly(gpu, 13 * batch / 2, batch, what, "the batches (GPU)");
	free(keys);
	free(a);
	free(b);
	cpht_table_destroy(cpu);
	cpht_table_destroy(gpu);
}

/*
 * The kind's policy: picked with the layout, the same through growth and
 * widening (the new layout keeps the kind), and its levels and choices are
 * the table's.
 */
static void
check_policy(cpht_kind kind, cpht_device dev, const char *what)
{
	cpht_table *t = unit_table(kind, dev, 1000, 0, 5);
	const cpht_kind_policy *pol = cpht_kind_policy_of(kind);
	uint64_t	keys[4000];
	uint8_t		out[4000];

	if (t == NULL)
		return;
	CHECK(pol != NULL && pol->kind == kind && t->kind_policy == pol, "%s: the table's policy", what);
	for (size_t i = 0; i < 4000; i++)
		keys[i] = i * 1000003;	/* wider than 8 bits: the table widens */
	CHECK(cpht_table_find_or_put(t, keys, 4000, out) == CPHT_OK && cpht_table_grow(t) == CPHT_OK,
		  "%s: widen and grow", what);
	CHECK(t->kind_policy == pol && t->levels == pol->levels, "%s: the policy after growth", what);
	for (int l = 0; l < t->levels; l++)
		CHECK(t->level[l].choices == pol->choices[l], "%s: level %d's choices", what, l);
	cpht_table_destroy(t);
}


int
main(void)
{
	char		why[256];
	int			gpu = cpht_gpu_usable(why, sizeof(why));

	if (!gpu)
		printf("# GPU part skipped: %s\n", why);
	for (int dev = 0; dev < 1 + gpu; dev++)
		for (int kind = 0; kind < 2; kind++)
		{
			char		what[64];

			snprintf(what, sizeof(what), "%s %s", dev ? "GPU" : "CPU", kind ? "cuckoo" : "iceberg");
			check_duplicates((cpht_kind) kind, (cpht_device) dev, what);
			check_transaction((cpht_kind) kind, (cpht_device) dev, what);
			check_memory_hook((cpht_kind) kind, (cpht_device) dev, what);
			check_doubling((cpht_kind) kind, (cpht_device) dev, what);
			check_growth_impossible((cpht_kind) kind, (cpht_device) dev, what);
			check_fixed_size((cpht_kind) kind, (cpht_device) dev, what);
			check_fault_in_growth((cpht_kind) kind, (cpht_device) dev, what);
			check_policy((cpht_kind) kind, (cpht_device) dev, what);
			if (dev == 1)
				check_gpu_like_cpu((cpht_kind) kind, what);
		}
	CHECK(cpht_kind_policy_of((cpht_kind) 2) == NULL && cpht_kind_policy_of((cpht_kind) -1) == NULL,
		  "no policy for an unknown kind");
	UNIT_DONE();
}
