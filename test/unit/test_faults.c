/*
 * test_faults.c — a device fault in the middle of a call undoes the call
 * whole.
 *
 * The test-only fault injection (faults.h) makes the k-th backend
 * step of a call fail after the steps before it changed the table (CPU:
 * steps of a find-or-put or erase; GPU: pipeline chunks).  For both kinds
 * and both devices (the GPU where one is usable), with and without the
 * undo log, a find_or_put, put or erase of two million keys fails at
 * step 2 or 3, and afterwards the table must be as before: the same count,
 * every old key found, no key of the call found, the undo log as long as
 * before, and on the iceberg table (whose undo empties the slots again)
 * the very same slots.  A first check calls the backend directly to show
 * that the failing step comes after steps that inserted keys.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpht_table.h"
#include "table/device_ops.h"
#include "unit.h"

#define OLD_KEYS 60000
#define NEW_KEYS 200000
/*
 * Keys of a failing call: at least four steps on its device.  A CPU step is
 * 64K keys; a GPU step is a pipeline chunk of up to 4M keys (the transfer
 * buffers' size, GPU_CHUNK_KEYS), so GPU calls carry 16M keys.
 */
#define CPU_CALL_KEYS ((size_t) 1 << 21)
#define GPU_CALL_KEYS ((size_t) 1 << 24)

static size_t
call_size(cpht_device dev)
{
	return dev == CPHT_DEVICE_GPU ? GPU_CALL_KEYS : CPU_CALL_KEYS;
}
#define KEY_BITS 40

typedef enum op
{
	OP_FOP,
	OP_PUT,
	OP_ERASE
} op;

static const char *const op_names[] = {"find_or_put", "put", "erase"};

static uint64_t old_keys[OLD_KEYS];
static uint64_t new_keys[NEW_KEYS];

static void
draw_keys(void)
{
	uint64_t	rng = 99;

	/* Distinct by their low bits; old keys have bit 39 clear, new keys set. */
	for (int i = 0; i < OLD_KEYS; i++)
		old_keys[i] = (unit_rand(&rng) & ((1ULL << 39) - 1) & ~((1ULL << 18) - 1)) | (uint64_t) i;
	for (int i = 0; i < NEW_KEYS; i++)
		new_keys[i] = (unit_rand(&rng) & ((1ULL << 39) - 1) & ~((1ULL << 18) - 1)) | (uint64_t) i | (1ULL << 39);
}

static cpht_table *
make(cpht_kind kind, cpht_device dev, int logging)
{
	cpht_params p;
	cpht_table *t = NULL;
	char		err[256];
	uint64_t	inserted = 0;

	cpht_params_for_capacity(kind, 400000, KEY_BITS, &p, err, sizeof(err));
	p.device = dev;
	p.seed = 5;
	p.fixed_size = 1;			/* slots compared bit for bit: no growth */
	if (cpht_table_create(&p, &t, err, sizeof(err)) != CPHT_OK)
	{
		CHECK(0, "create: %s", err);
		return NULL;
	}
	CHECK(cpht_table_put(t, old_keys, OLD_KEYS, &inserted) == CPHT_OK && inserted == OLD_KEYS,
		  "fill: %s", cpht_table_error(t));
	cpht_table_set_logging(t, logging);
	/* Something in the log already, of both runs. */
	CHECK(cpht_table_put(t, new_keys, 10, &inserted) == CPHT_OK, "logged put");
	{
		uint8_t		present[5];

		CHECK(cpht_table_erase(t, new_keys, 5, present) == CPHT_OK, "logged erase");
	}
	return t;
}

/*
 * The failing call's keys: for find_or_put and put, the new keys spread
 * over the whole batch among old keys; for erase, the old keys spread over
 * it among absent keys.
 */
static uint64_t *
call_keys(op o, size_t n)
{
	uint64_t   *k = malloc(n * sizeof(uint64_t));
	uint64_t	rng = 7;

	for (size_t i = 0; i < n; i++)
	{
		if (o == OP_ERASE)
			k[i] = i % 16 == 0 ? old_keys[(i / 16) % OLD_KEYS]
				: (unit_rand(&rng) & ((1ULL << 39) - 1)) | (1ULL << 39);
		else
			/* the new keys spread once over the whole call, so each step
			 * (GPU: each 4M-key chunk) brings a part of them */
			k[i] = i % 8 == 0 ? new_keys[(size_t) ((double) (i / 8) * NEW_KEYS / (n / 8)) % NEW_KEYS]
				: old_keys[unit_rand(&rng) % OLD_KEYS];
	}
	return k;
}

/* Host copy of every level's slots. */
static void *
slots_copy(cpht_table *t)
{
	size_t		total = 0,
				at = 0;
	char	   *buf;

	for (int l = 0; l < t->levels; l++)
		total += t->level[l].buckets * t->level[l].bucket_slots * (size_t) (t->level[l].slot_bits / 8);
	buf = malloc(total + 1);
	for (int l = 0; l < t->levels; l++)
	{
		CHECK(t->ops->copy_slots(t, l, buf + at) == CPHT_OK, "copy slots");
		at += t->level[l].buckets * t->level[l].bucket_slots * (size_t) (t->level[l].slot_bits / 8);
	}
	return buf;
}

static size_t
slots_bytes(cpht_table *t)
{
	size_t		total = 0;

	for (int l = 0; l < t->levels; l++)
		total += t->level[l].buckets * t->level[l].bucket_slots * (size_t) (t->level[l].slot_bits / 8);
	return total;
}

static void
check_unchanged(cpht_table *t, const char *what, uint64_t count, uint64_t log_len,
				const void *slots_before)
{
	uint8_t    *found = malloc(OLD_KEYS > NEW_KEYS ? OLD_KEYS : NEW_KEYS);
	size_t		missing = 0,
				extra = 0;

	CHECK(cpht_table_count(t) == count, "%s: count %llu, was %llu", what,
		  (unsigned long long) cpht_table_count(t), (unsigned long long) count);
	CHECK(cpht_table_log_position(t) == log_len, "%s: log length %llu, was %llu", what,
		  (unsigned long long) cpht_table_log_position(t), (unsigned long long) log_len);
	CHECK(cpht_table_find(t, old_keys, OLD_KEYS, found) == CPHT_OK, "%s: find", what);
	for (int i = 0; i < OLD_KEYS; i++)
		missing += !found[i];
	CHECK(missing == 0, "%s: %zu old keys missing", what, missing);
	CHECK(cpht_table_find(t, new_keys + 10, NEW_KEYS - 10, found) == CPHT_OK, "%s: find", what);
	for (int i = 0; i < NEW_KEYS - 10; i++)
		extra += found[i];
	CHECK(extra == 0, "%s: %zu keys of the failed call present", what, extra);
	if (slots_before)
	{
		void	   *now = slots_copy(t);

		CHECK(memcmp(now, slots_before, slots_bytes(t)) == 0, "%s: slots differ from before", what);
		free(now);
	}
	free(found);
}

static void
run_case(cpht_kind kind, cpht_device dev, int logging, op o, unsigned step)
{
	char		what[160];
	cpht_table *t = make(kind, dev, logging);
	const size_t ncall = call_size(dev);
	uint64_t   *keys = call_keys(o, ncall);
	uint8_t    *out = malloc(ncall);
	uint64_t	count,
				log_len,
				inserted = 0;
	void	   *before = NULL;
	cpht_status rc;

	snprintf(what, sizeof(what), "%s %s %s log=%d step %u",
			 kind == CPHT_CUCKOO ? "cuckoo" : "iceberg", dev == CPHT_DEVICE_GPU ? "GPU" : "CPU",
			 op_names[o], logging, step);
	if (t == NULL)
		return;
	count = cpht_table_count(t);
	log_len = cpht_table_log_position(t);
	if (kind == CPHT_ICEBERG)
		before = slots_copy(t);
	cpht_fault_arm(step);
	if (o == OP_FOP)
		rc = cpht_table_find_or_put(t, keys, ncall, out);
	else if (o == OP_PUT)
		rc = cpht_table_put(t, keys, ncall, &inserted);
	else
		rc = cpht_table_erase(t, keys, ncall, out);
	cpht_fault_arm(0);
	CHECK(rc == CPHT_ERR_DEVICE, "%s: status %d (%s)", what, (int) rc, cpht_table_error(t));
	CHECK(strstr(cpht_table_error(t), "injected fault") != NULL, "%s: message %s", what,
		  cpht_table_error(t));
	check_unchanged(t, what, count, log_len, before);

	/* The table still works: the same call without a fault. */
	if (o == OP_ERASE)
	{
		CHECK(cpht_table_erase(t, keys, ncall, out) == CPHT_OK, "%s: erase again", what);
		CHECK(cpht_table_count(t) == count - OLD_KEYS, "%s: count after erase", what);
	}
	else
	{
		CHECK(cpht_table_put(t, keys, ncall, &inserted) == CPHT_OK, "%s: put again", what);
		CHECK(inserted == NEW_KEYS - 5, "%s: inserted %llu", what, (unsigned long long) inserted);
	}
	if (logging)
	{
		CHECK(cpht_table_rollback_to(t, log_len) == CPHT_OK, "%s: rollback", what);
		check_unchanged(t, what, count, log_len, NULL);
	}
	free(before);
	free(out);
	free(keys);
	cpht_table_destroy(t);
}

/*
 * The test means something only if the step that fails comes after steps
 * that changed the table: call the backend itself (no table layer to undo
 * it) and see that it stored some of the new keys, but not all of them.
 */
static void
check_partial(cpht_kind kind, cpht_device dev)
{
	cpht_table *t = make(kind, dev, 0);
	const size_t ncall = call_size(dev);
	uint64_t   *keys = call_keys(OP_FOP, ncall);
	uint8_t    *status = malloc(ncall);
	uint64_t   *homeless = malloc(ncall * sizeof(uint64_t));
	size_t		nhomeless = 0,
				puts = 0;
	cpht_tally	tally;
	cpht_status rc;

	if (t == NULL)
		return;
	cpht_fault_arm(2);
	rc = t->ops->find_or_put(t, keys, ncall, status, homeless, &nhomeless, &tally, CPHT_NO_LOG);
	cpht_fault_arm(0);
	CHECK(rc == CPHT_ERR_DEVICE, "partial %s: status %d", t->ops->name, (int) rc);
	CHECK(cpht_table_find(t, new_keys + 10, NEW_KEYS - 10, status) == CPHT_OK, "partial: find");
	for (size_t i = 0; i < NEW_KEYS - 10; i++)
		puts += status[i];
	CHECK(puts > 0 && puts < NEW_KEYS - 10, "partial %s %s: %zu keys stored before the fault",
		  t->ops->name, kind == CPHT_CUCKOO ? "cuckoo" : "iceberg", puts);
	free(status);
	free(homeless);
	free(keys);
	cpht_table_destroy(t);
}

/*
 * cpht.max_memory bounds a GPU table's transfer buffers and scratch area:
 * with the memory hook refusing them, creating a GPU table fails with
 * CPHT_ERR_LIMIT; with a generous one, every byte taken is given back.
 */
static int64_t hook_held = 0;
static int64_t hook_cap = 0;

static int
memory_hook(int64_t delta)
{
	if (delta > 0 && hook_held + delta > hook_cap)
		return 0;
	hook_held += delta;
	return 1;
}

static void
check_gpu_memory_hook(void)
{
	cpht_params p;
	cpht_table *t = NULL;
	char		err[256];
	uint64_t	inserted = 0;
	cpht_stats	st;

	cpht_params_for_capacity(CPHT_CUCKOO, 400000, KEY_BITS, &p, err, sizeof(err));
	p.device = CPHT_DEVICE_GPU;
	p.fixed_size = 1;			/* the cap is for the transfer buffers alone */
	cpht_set_memory_hook(memory_hook);
	hook_cap = 1 << 20;
	CHECK(cpht_table_create(&p, &t, err, sizeof(err)) == CPHT_ERR_LIMIT, "GPU create under a 1 MB cap: %s", err);
	CHECK(hook_held == 0, "GPU create refused: %lld bytes still held", (long long) hook_held);
	hook_cap = (int64_t) 1 << 40;
	CHECK(cpht_table_create(&p, &t, err, sizeof(err)) == CPHT_OK, "GPU create: %s", err);
	CHECK(cpht_table_put(t, old_keys, OLD_KEYS, &inserted) == CPHT_OK, "GPU put");
	CHECK(cpht_table_stats(t, &st) == CPHT_OK && hook_held >= (int64_t) st.staging_bytes &&
		  st.staging_bytes > 0, "GPU: hook holds %lld bytes, staging is %llu", (long long) hook_held,
		  (unsigned long long) st.staging_bytes);
	cpht_table_destroy(t);
	CHECK(hook_held == 0, "GPU table destroyed: %lld bytes still held", (long long) hook_held);
	cpht_set_memory_hook(NULL);
}

/*
 * A growing GPU table meets the memory cap part way through a large put:
 * the put fails on the cap, and its undo must not need larger transfer
 * buffers than the table has (a failed undo loses a shared table).  The
 * cap leaves room for the table's first buffers and a few growths, not for
 * the buffers a piece of this size would like, so the pieces run in the
 * chunks the buffers allow until a growth is refused.
 */
static void
check_gpu_cap_undo(void)
{
	cpht_params p;
	cpht_table *t = NULL;
	char		err[256];
	uint64_t	inserted = 0,
				position;
	size_t		n = (size_t) 4 << 20,
				piece = (size_t) 1 << 18;
	uint64_t   *keys = malloc(n * sizeof(uint64_t));
	uint8_t    *found = malloc(n);
	size_t		still = 0;
	cpht_status rc;

	CHECK(keys && found, "out of memory");
	for (size_t i = 0; i < n; i++)
		keys[i] = (uint64_t) i + 1;
	cpht_params_for_capacity(CPHT_ICEBERG, 1000, KEY_BITS, &p, err, sizeof(err));
	p.device = CPHT_DEVICE_GPU;
	cpht_set_memory_hook(memory_hook);
	hook_held = 0;
	hook_cap = (int64_t) 1 << 40;
	CHECK(cpht_table_create(&p, &t, err, sizeof(err)) == CPHT_OK, "GPU create (cap undo): %s", err);
	hook_cap = hook_held + ((int64_t) 6 << 20);
	cpht_table_set_logging(t, 1);
	position = cpht_table_log_position(t);
	/* in pieces, as the cpht worker runs a call through its transfer windows */
	rc = CPHT_OK;
	for (size_t off = 0; rc == CPHT_OK && off < n; off += piece)
		rc = cpht_table_put(t, keys + off, piece, &inserted);
	CHECK(rc == CPHT_ERR_LIMIT, "GPU put of %zu keys under a cap: status %d (%s)", n, (int) rc,
		  cpht_table_error(t));
	CHECK(strstr(cpht_table_error(t), "transfer buffers") == NULL,
		  "GPU put under a cap failed on its transfer buffers, not on the table's growth: %s",
		  cpht_table_error(t));
	CHECK(cpht_table_log_position(t) > position, "GPU put under a cap stored no key before the cap");
	rc = cpht_table_rollback_to(t, position);
	CHECK(rc == CPHT_OK, "GPU undo of a put refused by the cap: %s", cpht_table_error(t));
	CHECK(cpht_table_count(t) == 0, "GPU undo left %llu keys", (unsigned long long) cpht_table_count(t));
	CHECK(cpht_table_find(t, keys, n, found) == CPHT_OK, "GPU find after the undo: %s", cpht_table_error(t));
	for (size_t i = 0; i < n; i++)
		still += found[i] != 0;
	CHECK(still == 0, "GPU undo left %zu keys findable", still);
	CHECK(cpht_table_put(t, keys, 1000, &inserted) == CPHT_OK && inserted == 1000,
		  "GPU put of 1000 keys after the undo: %s", cpht_table_error(t));
	cpht_table_destroy(t);
	CHECK(hook_held == 0, "GPU table destroyed: %lld bytes still held", (long long) hook_held);
	cpht_set_memory_hook(NULL);
	free(keys);
	free(found);
}

int
main(void)
{
	char		why[256];
	int			devices = 1;

	draw_keys();
	if (cpht_gpu_usable(why, sizeof(why)))
	{
		devices = 2;
		check_gpu_memory_hook();
		check_gpu_cap_undo();
	}
	else
		printf("test_faults: GPU part SKIPPED: %s\n", why);
	for (int d = 0; d < devices; d++)
		for (int k = 0; k < 2; k++)
		{
			cpht_kind	kind = k ? CPHT_CUCKOO : CPHT_ICEBERG;
			cpht_device dev = d ? CPHT_DEVICE_GPU : CPHT_DEVICE_CPU;

			check_partial(kind, dev);
			for (int o = OP_FOP; o <= OP_ERASE; o++)
				for (int logging = 0; logging < 2; logging++)
					for (unsigned step = 2; step <= 3; step++)
						run_case(kind, dev, logging, (op) o, step);
		}
	UNIT_DONE();
}
