/*
 * test_undo.c — the undo log behind transactional tables: savepoints are
 * log positions; rolling back to one restores exactly the keys present
 * then (inserted keys gone, deleted keys back), for both kinds; rolling
 * back only inserts on an iceberg table restores its slots bit for bit.
 */
#include <string.h>

#include "cpht_table.h"
#include "table/device_ops.h"
#include "reference_set.h"
#include "unit.h"

#define POOL 30000

/* Every check runs on the CPU, then on the GPU where one is usable (the
 * GPU keeps the log in device memory: a different store, same answers). */
static cpht_device device = CPHT_DEVICE_CPU;

/* Level 0's slots, wherever they live. */
static void
copy_level0(cpht_table *t, void *host)
{
	t->ops->copy_slots(t, 0, host);
}

/* Does the table hold exactly the keys of the reference (over the pool)? */
static int
same_keys(cpht_table *t, const ref_set *ref, const uint64_t *pool)
{
	uint8_t    *found = malloc(POOL);
	int			wrong = 0;

	cpht_table_find(t, pool, POOL, found);
	for (size_t i = 0; i < POOL; i++)
		wrong += found[i] != ref_has(ref, pool[i]);
	free(found);
	return wrong == 0 && cpht_table_count(t) == ref->count;
}

static void
copy_ref(ref_set *dst, const ref_set *src)
{
	size_t		size = src->mask + 1;

	dst->keys = malloc(size * sizeof(uint64_t));
	dst->used = malloc(size);
	memcpy(dst->keys, src->keys, size * sizeof(uint64_t));
	memcpy(dst->used, src->used, size);
	dst->mask = src->mask;
	dst->count = src->count;
}

static void
check_kind(cpht_kind kind)
{
	cpht_params p;
	cpht_table *t;
	char		err[256];
	uint64_t	pool[POOL];
	uint64_t	batch[5000];
	uint8_t		out[5000];
	uint64_t	rng = 17;
	ref_set		ref,
				saved[3];
	uint64_t	mark[3];
	void	   *slots0;
	size_t		bytes0;

	cpht_params_for_capacity(kind, POOL, 64, &p, err, sizeof(err));
	p.device = device;
	p.seed = 11;
	CHECK(cpht_table_create(&p, &t, err, sizeof(err)) == CPHT_OK, "create %s", err);
	cpht_table_set_logging(t, 1);
	ref_init(&ref, POOL);
	for (size_t i = 0; i < POOL; i++)
		pool[i] = unit_rand(&rng);

	for (int level = 0; level < 3; level++)
	{
		/* Savepoint, then inserts and (from the second level on) deletes. */
		mark[level] = cpht_table_log_position(t);
		copy_ref(&saved[level], &ref);
		if (level == 0)
		{
			bytes0 = t->params.slots[0] * (size_t) (t->level[0].slot_bits / 8);
			slots0 = malloc(bytes0);
			copy_level0(t, slots0);
		}
		for (int round = 0; round < 3; round++)
		{
			for (int i = 0; i < 5000; i++)
				batch[i] = pool[unit_rand(&rng) % POOL];
			CHECK(cpht_table_find_or_put(t, batch, 5000, out) == CPHT_OK, "fop");
			for (int i = 0; i < 5000; i++)
				ref_add(&ref, batch[i]);
			if (level > 0)
			{
				for (int i = 0; i < 1000; i++)
					batch[i] = pool[unit_rand(&rng) % POOL];
				CHECK(cpht_table_erase(t, batch, 1000, out) == CPHT_OK, "erase");
				for (int i = 0; i < 1000; i++)
					ref_del(&ref, batch[i]);
			}
		}
		CHECK(same_keys(t, &ref, pool), "level %d: table matches reference", level);
	}

	/* Roll back the innermost savepoint, commit the middle one's work into
	 * the outer transaction, then roll back everything. */
	CHECK(cpht_table_rollback_to(t, mark[2]) == CPHT_OK, "rollback to 2");
	CHECK(same_keys(t, &saved[2], pool), "after rollback to savepoint 2");
	CHECK(cpht_table_rollback_to(t, mark[1]) == CPHT_OK, "rollback to 1");
	CHECK(same_keys(t, &saved[1], pool), "after rollback to savepoint 1");
	CHECK(cpht_table_log_position(t) == mark[1], "log truncated at the savepoint");
	CHECK(cpht_table_rollback_to(t, mark[0]) == CPHT_OK, "rollback to 0");
	CHECK(same_keys(t, &saved[0], pool), "after rollback to the start");

	/* A savepoint followed by inserts only (the aborted ingest): an iceberg
	 * table gets its slots back bit for bit, no tombstones. */
	if (kind == CPHT_ICEBERG)
	{
		uint64_t	m = cpht_table_log_position(t);

		copy_level0(t, slots0);
		for (int i = 0; i < 5000; i++)
			batch[i] = pool[unit_rand(&rng) % POOL];
		CHECK(cpht_table_find_or_put(t, batch, 5000, out) == CPHT_OK, "fop");
		CHECK(cpht_table_rollback_to(t, m) == CPHT_OK, "rollback inserts");
		{
			void	   *now = malloc(bytes0);

			copy_level0(t, now);
			CHECK(memcmp(slots0, now, bytes0) == 0, "inserts-only rollback restores the slots bit for bit");
			free(now);
		}
		CHECK(same_keys(t, &saved[0], pool), "after rolling back inserts only");
	}

	/* Commit: what is forgotten cannot be rolled back. */
	for (int i = 0; i < 5000; i++)
		batch[i] = pool[i];
	CHECK(cpht_table_find_or_put(t, batch, 5000, out) == CPHT_OK, "fop after rollback");
	cpht_table_truncate_log(t, 0);
	CHECK(cpht_table_rollback_to(t, 0) == CPHT_OK && cpht_table_count(t) == 5000, "committed keys stay");

	for (int level = 0; level < 3; level++)
		ref_free(&saved[level]);
	ref_free(&ref);
	free(slots0);
	cpht_table_destroy(t);
}

/*
 * A rollback that brings a deleted key back puts it in a new slot, maybe
 * behind slots an outer savepoint's inserts took; rolling those inserts
 * back afterwards must not hide it (found by the SQL fuzz).
 */
static void
check_reput_then_outer_rollback(void)
{
	cpht_params p;
	cpht_table *t;
	char		err[256];
	uint64_t	old[64],
				added[512];
	uint8_t		out[512];
	uint64_t	outer,
				inner,
				ins;
	int			missing = 0;

	cpht_params_for_capacity(CPHT_ICEBERG, 2000, 64, &p, err, sizeof(err));
	p.device = device;
	CHECK(cpht_table_create(&p, &t, err, sizeof(err)) == CPHT_OK, "create");
	cpht_table_set_logging(t, 1);
	for (int i = 0; i < 64; i++)
		old[i] = (uint64_t) i * 7;
	for (int i = 0; i < 512; i++)
		added[i] = 100000 + (uint64_t) i;
	cpht_table_put(t, old, 64, &ins);
	cpht_table_truncate_log(t, 0);	/* committed */

	outer = cpht_table_log_position(t);
	cpht_table_put(t, added, 512, &ins);
	inner = cpht_table_log_position(t);
	cpht_table_erase(t, old, 64, out);
	CHECK(cpht_table_rollback_to(t, inner) == CPHT_OK, "rollback inner");
	CHECK(cpht_table_rollback_to(t, outer) == CPHT_OK, "rollback outer");
	cpht_table_find(t, old, 64, out);
	for (int i = 0; i < 64; i++)
		missing += !out[i];
	CHECK(missing == 0, "%d committed keys hidden after nested rollbacks", missing);
	CHECK(cpht_table_count(t) == 64, "count 64");
	cpht_table_destroy(t);
}

/*
 * Undoing deletes needs room for the keys again, even when the table is
 * full or tombstones from earlier rounds fill it: single deletes in a table
 * filled to its first FULL, and all keys of a table filled to the capacity
 * it was created for, deleted and rolled back round after round.
 */
static void
check_rollback_deletes_when_full(cpht_kind kind)
{
	cpht_params p;
	cpht_table *t;
	char		err[256];
	uint64_t	keys[4096];
	uint8_t		out[4096];
	size_t		n = 0;
	int			failures = 0;

	cpht_params_for_capacity(kind, 1000, 64, &p, err, sizeof(err));
	p.device = device;
	p.fixed_size = 1;			/* filled to its first FULL */
	CHECK(cpht_table_create(&p, &t, err, sizeof(err)) == CPHT_OK, "create");
	cpht_table_set_logging(t, 1);
	for (uint64_t k = 1; n < 4096; k++)
	{
		keys[n] = layout_mix64(k);
		if (cpht_table_find_or_put(t, keys + n, 1, out) != CPHT_OK)
			break;
		n++;
	}
	cpht_table_truncate_log(t, 0);
	for (size_t i = 0; i < n; i += 7)
	{
		uint64_t	mark = cpht_table_log_position(t);

		failures += cpht_table_erase(t, keys + i, 1, out) != CPHT_OK || !out[0];
		failures += cpht_table_rollback_to(t, mark) != CPHT_OK;
	}
	CHECK(failures == 0, "full table: %d failed deletes or rollbacks: %s", failures, cpht_table_error(t));
	CHECK(cpht_table_find(t, keys, n, out) == CPHT_OK && memchr(out, 0, n) == NULL, "all keys back");
	CHECK(cpht_table_count(t) == n, "count %zu", n);
	cpht_table_destroy(t);

	/* the capacity it was made for, every key deleted and rolled back */
	CHECK(cpht_table_create(&p, &t, err, sizeof(err)) == CPHT_OK, "create");
	cpht_table_set_logging(t, 1);
	n = 1000;
	CHECK(cpht_table_find_or_put(t, keys, n, out) == CPHT_OK, "fill to capacity");
	cpht_table_truncate_log(t, 0);
	for (int round = 0; round < 30; round++)
	{
		uint64_t	mark = cpht_table_log_position(t);

		failures += cpht_table_erase(t, keys, n, out) != CPHT_OK;
		failures += cpht_table_rollback_to(t, mark) != CPHT_OK;
	}
	CHECK(failures == 0, "%d failed deletes or rollbacks: %s", failures, cpht_table_error(t));
	CHECK(cpht_table_find(t, keys, n, out) == CPHT_OK && memchr(out, 0, n) == NULL, "all keys back");
	CHECK(cpht_table_count(t) == n, "count %zu", n);
	cpht_table_destroy(t);
}

/* A call that inserts nothing, on a table whose log was just given back
 * (a large transaction committed), logs nothing and touches no memory. */
static void
check_empty_log_then_no_inserts(void)
{
	cpht_params p;
	cpht_table *t;
	char		err[256];
	size_t		n = 100000;
	uint64_t   *keys = malloc(n * sizeof(uint64_t));
	uint8_t    *out = malloc(n);

	cpht_params_for_capacity(CPHT_ICEBERG, n, 64, &p, err, sizeof(err));
	p.device = device;
	CHECK(cpht_table_create(&p, &t, err, sizeof(err)) == CPHT_OK, "create");
	cpht_table_set_logging(t, 1);
	for (size_t i = 0; i < n; i++)
		keys[i] = layout_mix64(i);
	CHECK(cpht_table_find_or_put(t, keys, n, out) == CPHT_OK, "insert");
	cpht_table_truncate_log(t, 0);	/* commit: the large log is freed */
	CHECK(cpht_table_find_or_put(t, keys, n, out) == CPHT_OK && memchr(out, 1, n) == NULL, "all present");
	CHECK(cpht_table_erase(t, keys, 0, out) == CPHT_OK, "empty erase");
	CHECK(cpht_table_log_position(t) == 0, "nothing logged");
	cpht_table_destroy(t);
	free(keys);
	free(out);
}

/*
 * A table whose log is emptied after every call (the cpht worker's shared
 * tables) keeps the store cpht_table_keep_log asks for: the next call of
 * that size allocates nothing.  Without it, emptying the log frees a large
 * store; a store larger than the one kept is freed too.
 */
static void
check_keep_log(void)
{
	cpht_params p;
	cpht_table *t;
	cpht_stats	st;
	char		err[256];
	size_t		n = 200000;
	uint64_t   *keys = malloc(3 * n * sizeof(uint64_t));
	uint8_t    *out = malloc(2 * n);
	uint64_t	kept;

	cpht_params_for_capacity(CPHT_ICEBERG, 4 * n, 64, &p, err, sizeof(err));
	p.device = device;
	CHECK(cpht_table_create(&p, &t, err, sizeof(err)) == CPHT_OK, "create");
	cpht_table_set_logging(t, 1);
	for (size_t i = 0; i < 3 * n; i++)
		keys[i] = layout_mix64(i + 77);
	CHECK(cpht_table_find_or_put(t, keys, n, out) == CPHT_OK, "insert");
	cpht_table_truncate_log(t, 0);
	CHECK(cpht_table_stats(t, &st) == CPHT_OK && st.log_bytes == 0,
		  "an emptied log gives its store back by default (%llu bytes held)",
		  (unsigned long long) st.log_bytes);

	cpht_table_keep_log(t, 2 * n + 4096);
	CHECK(cpht_table_erase(t, keys, n, out) == CPHT_OK, "erase");
	cpht_table_truncate_log(t, 0);
	CHECK(cpht_table_stats(t, &st) == CPHT_OK && st.log_bytes > 0,
		  "an emptied log keeps the store asked for");
	kept = st.log_bytes;
	CHECK(cpht_table_find_or_put(t, keys, n, out) == CPHT_OK && cpht_table_log_position(t) == n,
		  "the next call logs into it");
	cpht_table_truncate_log(t, 0);
	CHECK(cpht_table_stats(t, &st) == CPHT_OK && st.log_bytes == kept,
		  "and it stays the same store (%llu bytes, was %llu)",
		  (unsigned long long) st.log_bytes, (unsigned long long) kept);
	/* a call that logs more than is kept: the larger store goes back */
	CHECK(cpht_table_find_or_put(t, keys + n, 2 * n, out) == CPHT_OK &&
		  cpht_table_log_position(t) == 2 * n, "a larger call");
	cpht_table_truncate_log(t, 0);
	CHECK(cpht_table_stats(t, &st) == CPHT_OK && st.log_bytes == 0,
		  "a store larger than the one kept is given back (%llu bytes held)",
		  (unsigned long long) st.log_bytes);
	cpht_table_destroy(t);
	free(keys);
	free(out);
}

/*
 * Large calls: the host log is filled by several threads block by block,
 * the GPU's by a kernel chunk by chunk (and a call of more than one 16M-key
 * chunk grows the device log between chunks, keeping what the earlier
 * chunks logged).  Insert n keys cycling through `period` distinct ones
 * after a savepoint, delete every other one after a second, and roll back
 * to each: the keys present then, exactly.
 */
static void
check_large_calls(cpht_kind kind, size_t n, size_t period)
{
	cpht_params p;
	cpht_table *t;
	char		err[256];
	size_t		base = 50000;
	uint64_t   *keys = malloc(n * sizeof(uint64_t));
	uint64_t   *half = malloc(n / 2 * sizeof(uint64_t));
	uint8_t    *out = malloc(n);
	uint64_t	m1,
				m2,
				distinct = 0;
	size_t		wrong = 0;

	cpht_params_for_capacity(kind, period, 64, &p, err, sizeof(err));
	p.device = device;
	CHECK(cpht_table_create(&p, &t, err, sizeof(err)) == CPHT_OK, "create %s", err);
	cpht_table_set_logging(t, 1);
	for (size_t i = 0; i < n; i++)
		keys[i] = layout_mix64(i % period + 7);
	/* committed before the savepoints */
	CHECK(cpht_table_find_or_put(t, keys, base, out) == CPHT_OK, "base");
	cpht_table_truncate_log(t, 0);

	m1 = cpht_table_log_position(t);
	CHECK(cpht_table_find_or_put(t, keys, n, out) == CPHT_OK, "large insert: %s", cpht_table_error(t));
	for (size_t i = 0; i < n; i++)
		distinct += out[i] == CPHT_PUT;
	CHECK(distinct == period - base, "large insert put %llu", (unsigned long long) distinct);
	CHECK(cpht_table_log_position(t) == m1 + distinct, "every insert logged");
	m2 = cpht_table_log_position(t);
	for (size_t i = 0; i < n / 2; i++)
		half[i] = keys[2 * i];
	CHECK(cpht_table_erase(t, half, n / 2, out) == CPHT_OK, "large delete");
	CHECK(cpht_table_count(t) == period / 2, "count after delete %llu", (unsigned long long) cpht_table_count(t));

	CHECK(cpht_table_rollback_to(t, m2) == CPHT_OK, "rollback the delete: %s", cpht_table_error(t));
	CHECK(cpht_table_count(t) == period, "count back to %zu", period);
	CHECK(cpht_table_find(t, keys, n, out) == CPHT_OK && memchr(out, 0, n) == NULL, "every key back");

	CHECK(cpht_table_rollback_to(t, m1) == CPHT_OK, "rollback the insert: %s", cpht_table_error(t));
	CHECK(cpht_table_count(t) == base, "count back to the committed keys");
	CHECK(cpht_table_find(t, keys, n, out) == CPHT_OK, "find");
	for (size_t i = 0; i < n; i++)
		wrong += out[i] != (i % period < base);
	CHECK(wrong == 0, "%zu keys wrong after rolling back the large insert", wrong);
	cpht_table_destroy(t);
	free(keys);
	free(half);
	free(out);
}

static void
check_all(void)
{
	check_large_calls(CPHT_ICEBERG, 1200000, 800000);
	check_large_calls(CPHT_CUCKOO, 1200000, 800000);
	if (device == CPHT_DEVICE_GPU)
		check_large_calls(CPHT_ICEBERG, 40000000, 30000000);
	check_empty_log_then_no_inserts();
	check_keep_log();
	check_rollback_deletes_when_full(CPHT_ICEBERG);
	check_rollback_deletes_when_full(CPHT_CUCKOO);
	check_reput_then_outer_rollback();
	check_kind(CPHT_ICEBERG);
	check_kind(CPHT_CUCKOO);
}

int
main(void)
{
	char		why[256];

	check_all();
	if (cpht_gpu_usable(why, sizeof(why)))
	{
		device = CPHT_DEVICE_GPU;
		check_all();
		printf("test_undo: CPU and GPU\n");
	}
	else
		printf("test_undo: GPU part SKIPPED: %s\n", why);
	UNIT_DONE();
}
