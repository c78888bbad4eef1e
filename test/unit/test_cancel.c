/*
 * test_cancel.c — a canceled erase, find or rebuild leaves the table as it
 * was.
 *
 * The interrupt check (cpht_set_interrupt_check) answers "stop" at its K-th
 * question.  For every K at which the call still asks (so a cancel after
 * each chunk of an erase, and at each check of a rebuild), the call must
 * return CPHT_ERR_CANCELED and the table be unchanged: the same count,
 * every key still present, the undo log as long as before and the slots
 * the same byte for byte.  Both kinds, on the CPU and (where one is
 * usable) the GPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpht_table.h"
#include "table/device_ops.h"
#include "unit.h"

#define TABLE_KEYS 600000		/* a rebuild checks every 2^18 items */
/* Keys of an erase or find: four CPU chunks, three GPU chunks (2^24 keys) */
#define CPU_CALL_KEYS ((size_t) 1 << 20)
#define GPU_CALL_KEYS ((size_t) 40 << 20)

static size_t call_keys = CPU_CALL_KEYS;
#define KEY_BITS 48

static unsigned checks_left = 0;	/* 0: never stop */

static int
stop_at_kth(void)
{
	return checks_left != 0 && --checks_left == 0;
}

static size_t
slots_bytes(const cpht_table *t)
{
	size_t		total = 0;

	for (int l = 0; l < t->levels; l++)
		total += t->level[l].buckets * t->level[l].bucket_slots * (size_t) (t->level[l].slot_bits / 8);
	return total;
}

static char *
slots_copy(cpht_table *t)
{
	char	   *buf = malloc(slots_bytes(t));
	size_t		at = 0;

	for (int l = 0; l < t->levels; l++)
	{
		CHECK(t->ops->copy_slots(t, l, buf + at) == CPHT_OK, "copy slots");
		at += t->level[l].buckets * t->level[l].bucket_slots * (size_t) (t->level[l].slot_bits / 8);
	}
	return buf;
}

typedef enum op
{
	OP_ERASE,
	OP_FIND,
	OP_REBUILD
} op;

static const char *const op_names[] = {"erase", "find", "rebuild"};

static cpht_status
run_op(cpht_table *t, op o, const uint64_t *keys, uint8_t *out)
{
	if (o == OP_ERASE)
		return cpht_table_erase(t, keys, call_keys, out);
	if (o == OP_FIND)
		return cpht_table_find(t, keys, call_keys, out);
	return cpht_table_rebuild(t);
}

static void
run_kind(cpht_kind kind, cpht_device dev)
{
	cpht_params p;
	cpht_table *t = NULL;
	char		err[256];
	uint64_t   *stored;
	uint64_t   *keys;
	uint8_t    *out;
	uint64_t	rng = 3,
				inserted = 0;
	const char *kname = kind == CPHT_CUCKOO ? "cuckoo" : "iceberg";

	call_keys = dev == CPHT_DEVICE_GPU ? GPU_CALL_KEYS : CPU_CALL_KEYS;
	stored = malloc(TABLE_KEYS * sizeof(uint64_t));
	keys = malloc(call_keys * sizeof(uint64_t));
	out = malloc(call_keys);

	for (size_t i = 0; i < TABLE_KEYS; i++)
		stored[i] = (unit_rand(&rng) & ((1ULL << KEY_BITS) - 1) & ~((1ULL << 21) - 1)) | i;
	/* The call's keys: the stored ones spread among absent ones. */
	for (size_t i = 0; i < call_keys; i++)
		keys[i] = i % 4 == 0 && i / 4 < TABLE_KEYS ? stored[i / 4]
			: (unit_rand(&rng) & ((1ULL << KEY_BITS) - 1)) | (1ULL << (KEY_BITS - 1));
	cpht_params_for_capacity(kind, TABLE_KEYS * 11 / 10, KEY_BITS, &p, err, sizeof(err));
	p.device = dev;
	if (cpht_table_create(&p, &t, err, sizeof(err)) != CPHT_OK)
	{
		CHECK(0, "create: %s", err);
		goto out;
	}
	CHECK(cpht_table_put(t, stored, TABLE_KEYS, &inserted) == CPHT_OK && inserted == TABLE_KEYS,
		  "fill: %s", cpht_table_error(t));
	/* Tombstones for the rebuild to clear, and a log with deleted keys. */
	CHECK(cpht_table_erase(t, stored, TABLE_KEYS / 10, out) == CPHT_OK, "erase a tenth");
	CHECK(cpht_table_put(t, stored, TABLE_KEYS / 20, &inserted) == CPHT_OK, "put some back");
	cpht_table_set_logging(t, 1);
	CHECK(cpht_table_erase(t, stored + TABLE_KEYS / 10, 1000, out) == CPHT_OK, "logged erase");

	/*
	 * Cancel at the first check, the second, ... until the call asks fewer
	 * times than that and succeeds; every canceled attempt must leave the
	 * table as it was.
	 */
	for (int o = OP_ERASE; o <= OP_REBUILD; o++)
	{
		uint64_t	count = cpht_table_count(t),
					log_len = cpht_table_log_position(t);
		char	   *before = slots_copy(t);
		cpht_stats	st_before,
					st_after;
		unsigned	k;
		cpht_status rc = CPHT_ERR_CANCELED;

		CHECK(cpht_table_stats(t, &st_before) == CPHT_OK, "stats");
		for (k = 1; rc == CPHT_ERR_CANCELED && k < 1000; k++)
		{
			char		what[96];
			char	   *now;

			snprintf(what, sizeof(what), "%s %s %s canceled at check %u", kname,
					 dev == CPHT_DEVICE_GPU ? "GPU" : "CPU", op_names[o], k);
			checks_left = k;
			rc = run_op(t, (op) o, keys, out);
			checks_left = 0;
			if (rc != CPHT_ERR_CANCELED)
				break;
			CHECK(cpht_table_count(t) == count, "%s: count %llu, was %llu", what,
				  (unsigned long long) cpht_table_count(t), (unsigned long long) count);
			CHECK(cpht_table_log_position(t) == log_len, "%s: log length", what);
			now = slots_copy(t);
			CHECK(memcmp(now, before, slots_bytes(t)) == 0, "%s: slots changed", what);
			free(now);
			CHECK(cpht_table_stats(t, &st_after) == CPHT_OK, "stats");
			CHECK(st_after.stashed == st_before.stashed && st_after.live[0] == st_before.live[0] &&
				  st_after.tombstones[0] == st_before.tombstones[0], "%s: stats changed", what);
		}
		CHECK(rc == CPHT_OK, "%s %s: status %d after %u cancels", kname, op_names[o], (int) rc, k - 1);
		CHECK(k - 1 >= 2, "%s %s: canceled at only %u checks", kname, op_names[o], k - 1);
		/* The erase that went through is taken back. */
		if (o == OP_ERASE)
			CHECK(cpht_table_rollback_to(t, log_len) == CPHT_OK && cpht_table_count(t) == count,
				  "%s: rollback of the erase", kname);
		free(before);
	}
	/* Every stored key (but the logged erase's) is still found. */
	{
		size_t		missing = 0;

		CHECK(cpht_table_find(t, stored, TABLE_KEYS, out) == CPHT_OK, "find all");
		for (size_t i = 0; i < TABLE_KEYS; i++)
			missing += !out[i] && !(i >= TABLE_KEYS / 20 && i < TABLE_KEYS / 10) &&
				!(i >= TABLE_KEYS / 10 && i < TABLE_KEYS / 10 + 1000);
		CHECK(missing == 0, "%s: %zu keys lost", kname, missing);
	}
	cpht_table_destroy(t);
out:
	free(stored);
	free(keys);
	free(out);
}

int
main(void)
{
	char		why[256];

	cpht_set_interrupt_check(stop_at_kth);
	run_kind(CPHT_ICEBERG, CPHT_DEVICE_CPU);
	run_kind(CPHT_CUCKOO, CPHT_DEVICE_CPU);
	if (cpht_gpu_usable(why, sizeof(why)))
	{
		run_kind(CPHT_ICEBERG, CPHT_DEVICE_GPU);
		run_kind(CPHT_CUCKOO, CPHT_DEVICE_GPU);
	}
	else
		printf("test_cancel: GPU part SKIPPED: %s\n", why);
	UNIT_DONE();
}
