/*
 * test_route.c — a table sharded over several GPUs whose calls are routed
 * on the GPUs (kernels/shards/shards_route.c, kernels/gpu/gpu_route.cu)
 * against one table, the same sharded table on the host path, and a
 * reference set.  Runs where at least 2 GPUs are usable and can reach
 * each other's memory; skips (77) otherwise.
 *
 * What must hold, for 2 shards and for as many as the GPUs (up to 4):
 *   - the table takes the device path (chosen at creation);
 *   - find_or_put: a key present before is FOUND, an absent key is PUT at
 *     exactly one of its occurrences, on every table; the counts equal;
 *   - find: byte for byte equal on every table and to the reference;
 *   - batches of a few keys up to several pieces, keys repeated inside a
 *     batch and across batches, the tables created small so that they
 *     grow; keys and answers in ordinary and in registered host memory;
 *   - a fixed-size routed table that fills fails with CPHT_ERR_FULL, and
 *     a fault injected in a shard's call with CPHT_ERR_DEVICE, an
 *     interrupt between pieces with CPHT_ERR_CANCELED: each leaves the
 *     table as before the call (count, log position, the keys found);
 *   - a rollback of a logging routed table to a position before routed
 *     calls gives the keys found before them.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpht_table.h"
#include "reference_set.h"
#include "shards/shards_internal.h"	/* the path a sharded table took */
#include "util/faults.h"
#include "unit.h"

#define POOL 400000
#define ROUNDS 30

static uint64_t pool[POOL];

static cpht_table *
make(cpht_kind kind, uint64_t capacity, int shards, int fixed, int host_path)
{
	cpht_params p;
	cpht_table *t = NULL;
	char		err[256];
	cpht_status rc = cpht_params_for_capacity(kind, capacity, 64, &p, err, sizeof(err));

	CHECK(rc == CPHT_OK, "params: %s", err);
	p.device = CPHT_DEVICE_GPU;
	p.seed = 7 + (uint64_t) shards;
	p.shards = shards;
	p.fixed_size = fixed;
	rc = cpht_table_create(&p, &t, err, sizeof(err));
	CHECK(rc == CPHT_OK, "create (%d shards): %s", shards, err);
	if (rc != CPHT_OK)
		return NULL;
	if (shards > 1 && host_path)
		shards_use_host_path(t);
	return t;
}

static size_t
batch_size(uint64_t *rng)
{
	switch (unit_rand(rng) % 4)
	{
		case 0:
			return 1 + unit_rand(rng) % 100;
		case 1:
			return 1000 + unit_rand(rng) % 4000;
		case 2:
			return 70000 + unit_rand(rng) % 80000;
		default:
			return 300000 + unit_rand(rng) % 400000;
	}
}

static int
routed(const cpht_table *t)
{
	cpht_call_times ct;

	cpht_table_call_times(t, &ct);
	return ct.routed;
}

/*
 * Random batches through a routed table, the host path's and one table;
 * keys and answers in `keys` and `st*` (registered or not by the caller).
 */
static void
run_differential(cpht_kind kind, int shards, uint64_t *keys, uint8_t *st_r, uint8_t *st_h,
				 uint8_t *st_1, const char *memory)
{
	cpht_table *r = make(kind, 50000, shards, 0, 0);
	cpht_table *h = make(kind, 50000, shards, 0, 1);
	cpht_table *one = make(kind, 50000, 1, 0, 0);
	ref_set		ref,
				puts;
	uint64_t	rng = 99 + (uint64_t) shards;
	size_t		used = 20000;
	int			nrouted = 0;
	char		what[96];

	snprintf(what, sizeof(what), "%s, %d shards, %s memory", kind == CPHT_CUCKOO ? "cuckoo" : "iceberg",
			 shards, memory);
	if (!r || !h || !one)
		return;
	CHECK(strcmp(r->sharded->path->name, "device") == 0, "%s: the table took the %s path", what,
		  r->sharded->path->name);
	ref_init(&ref, POOL);
	for (int round = 0; round < ROUNDS; round++)
	{
		size_t		n = batch_size(&rng);
		size_t		wrong = 0,
					twice = 0,
					never = 0;
		cpht_status rc;

		if (used < POOL)
			used += POOL / ROUNDS;
		if (used > POOL)
			used = POOL;
		for (size_t i = 0; i < n; i++)
			keys[i] = pool[unit_rand(&rng) % used];
		if (round % 3 == 2)
		{
			/* find */
			memset(st_r, 0xee, n);
			memset(st_h, 0xee, n);
			memset(st_1, 0xee, n);
			CHECK(cpht_table_find(r, keys, n, st_r) == CPHT_OK, "%s: find: %s", what, cpht_table_error(r));
			nrouted += routed(r);
			CHECK(cpht_table_find(h, keys, n, st_h) == CPHT_OK, "%s: find: %s", what, cpht_table_error(h));
			CHECK(cpht_table_find(one, keys, n, st_1) == CPHT_OK, "%s: find: %s", what,
				  cpht_table_error(one));
			for (size_t i = 0; i < n; i++)
				wrong += st_r[i] != st_1[i] || st_h[i] != st_1[i] || st_1[i] != ref_has(&ref, keys[i]);
			CHECK(wrong == 0, "%s: round %d: %zu of %zu find answers differ", what, round, wrong, n);
			continue;
		}
		memset(st_r, 0xee, n);
		rc = cpht_table_find_or_put(r, keys, n, st_r);
		CHECK(rc == CPHT_OK, "%s: fop: %s", what, cpht_table_error(r));
		nrouted += routed(r);
		CHECK(cpht_table_find_or_put(h, keys, n, st_h) == CPHT_OK, "%s: fop: %s", what, cpht_table_error(h));
		CHECK(cpht_table_find_or_put(one, keys, n, st_1) == CPHT_OK, "%s: fop: %s", what,
			  cpht_table_error(one));
		/* FOUND where present before; PUT once per absent key */
		ref_init(&puts, 2 * n + 16);
		for (size_t i = 0; i < n; i++)
		{
			int			before = ref_has(&ref, keys[i]);

			if (before)
				wrong += st_r[i] != CPHT_FOUND || st_h[i] != CPHT_FOUND || st_1[i] != CPHT_FOUND;
			else if (st_r[i] == CPHT_PUT)
				twice += !ref_add(&puts, keys[i]);
			else
				wrong += st_r[i] != CPHT_FOUND;
		}
		for (size_t i = 0; i < n; i++)
			if (!ref_has(&ref, keys[i]))
				never += !ref_has(&puts, keys[i]);
		for (size_t i = 0; i < n; i++)
			ref_add(&ref, keys[i]);
		ref_free(&puts);
		CHECK(wrong == 0, "%s: round %d: %zu of %zu answers wrong", what, round, wrong, n);
		CHECK(twice == 0 && never == 0, "%s: round %d: %zu keys put twice, %zu new keys never put", what,
			  round, twice, never);
		CHECK(cpht_table_count(r) == cpht_table_count(one) && cpht_table_count(h) == cpht_table_count(one),
			  "%s: round %d: counts %llu (routed), %llu (host path), %llu (one table)", what, round,
			  (unsigned long long) cpht_table_count(r), (unsigned long long) cpht_table_count(h),
			  (unsigned long long) cpht_table_count(one));
	}
	/* a cuckoo shard that stashed keys (a rare failed eviction chain)
	 * sends its calls the host path until it grows */
	CHECK(kind == CPHT_CUCKOO ? nrouted >= ROUNDS / 2 : nrouted == ROUNDS,
		  "%s: %d of %d calls were routed on the GPUs", what, nrouted, ROUNDS);
	ref_free(&ref);
	cpht_table_destroy(r);
	cpht_table_destroy(h);
	cpht_table_destroy(one);
}

static atomic_int interrupt_calls;

static int
interrupt_second(void)
{
	return atomic_fetch_add(&interrupt_calls, 1) + 1 >= 2;
}

/*
 * Calls that stop: a fixed-size table that fills, a fault in a shard's
 * call, an interrupt between pieces (logging off and on); each leaves the
 * table as it was.
 */
static void
run_stops(cpht_kind kind, int shards, int logging)
{
	const size_t stored = 30000,
				n = 10 * ((size_t) 1 << 16);
	uint64_t   *keys = malloc(n * sizeof(uint64_t));
	uint8_t    *st = malloc(n);
	char		what[96];

	snprintf(what, sizeof(what), "stops, %s, %d shards, logging %d", kind == CPHT_CUCKOO ? "cuckoo" : "iceberg",
			 shards, logging);
	for (int how = 0; how < 3; how++)
	{
		cpht_table *t = make(kind, 60000, shards, how == 0, 0);
		uint64_t	log0;
		size_t		wrong = 0;
		cpht_status rc;

		if (t == NULL)
			break;
		cpht_table_set_logging(t, logging);
		for (size_t i = 0; i < stored; i++)
			keys[i] = pool[i];
		CHECK(cpht_table_find_or_put(t, keys, stored, st) == CPHT_OK, "%s: preload: %s", what,
			  cpht_table_error(t));
		/* every 50th key new, the rest stored: no growth needed (a growth
		 * reruns a shard's part, taking fault steps of its own), but for
		 * `how` 0, which brings more new keys than the table holds */
		for (size_t i = 0; i < n; i++)
			keys[i] = how == 0 ? pool[i % POOL] ^ 0x5555 : i % 50 == 0 ? pool[stored + i / 50] : pool[i % stored];
		log0 = cpht_table_log_position(t);
		if (how == 0)
			rc = cpht_table_find_or_put(t, keys, n, st);
		else if (how == 1)
		{
			cpht_fault_arm(3);
			rc = cpht_table_find_or_put(t, keys, n, st);
			cpht_fault_arm(0);
		}
		else
		{
			atomic_store(&interrupt_calls, 0);
			cpht_set_interrupt_check(interrupt_second);
			rc = cpht_table_find_or_put(t, keys, n, st);
			cpht_set_interrupt_check(NULL);
		}
		CHECK(rc == (how == 0 ? CPHT_ERR_FULL : how == 1 ? CPHT_ERR_DEVICE : CPHT_ERR_CANCELED),
			  "%s, stop %d: status %d (%s)", what, how, (int) rc, cpht_table_error(t));
		CHECK(routed(t), "%s, stop %d: the call was not routed", what, how);
		CHECK(cpht_table_count(t) == stored, "%s, stop %d: count %llu, was %zu", what, how,
			  (unsigned long long) cpht_table_count(t), stored);
		CHECK(cpht_table_log_position(t) == log0, "%s, stop %d: log at %llu, was %llu", what, how,
			  (unsigned long long) cpht_table_log_position(t), (unsigned long long) log0);
		CHECK(cpht_table_find(t, keys, n, st) == CPHT_OK, "%s: find: %s", what, cpht_table_error(t));
		for (size_t i = 0; i < n; i++)
			wrong += st[i] != (how != 0 && i % 50 != 0);
		CHECK(wrong == 0, "%s, stop %d: %zu keys found otherwise than before the call", what, how, wrong);
		cpht_table_destroy(t);
	}
	free(keys);
	free(st);
}

/* Rollback of a logging routed table. */
static void
run_rollback(cpht_kind kind, int shards)
{
	const size_t n = 200000;
	cpht_table *t = make(kind, 50000, shards, 0, 0);
	uint64_t   *keys = malloc(2 * n * sizeof(uint64_t));
	uint8_t    *st = malloc(2 * n);
	uint64_t	pos;
	size_t		wrong = 0;

	if (t == NULL)
		return;
	cpht_table_set_logging(t, 1);
	memcpy(keys, pool, 2 * n * sizeof(uint64_t));
	CHECK(cpht_table_find_or_put(t, keys, n, st) == CPHT_OK, "rollback: %s", cpht_table_error(t));
	pos = cpht_table_log_position(t);
	CHECK(cpht_table_find_or_put(t, keys, 2 * n, st) == CPHT_OK, "rollback: %s", cpht_table_error(t));
	CHECK(routed(t), "rollback: the call was not routed");
	CHECK(cpht_table_count(t) == 2 * n, "rollback: count %llu", (unsigned long long) cpht_table_count(t));
	CHECK(cpht_table_rollback_to(t, pos) == CPHT_OK, "rollback: %s", cpht_table_error(t));
	CHECK(cpht_table_count(t) == n, "rollback: count %llu after", (unsigned long long) cpht_table_count(t));
	CHECK(cpht_table_find(t, keys, 2 * n, st) == CPHT_OK, "rollback: find: %s", cpht_table_error(t));
	for (size_t i = 0; i < 2 * n; i++)
		wrong += st[i] != (i < n);
	CHECK(wrong == 0, "rollback, %d shards: %zu keys found otherwise", shards, wrong);
	cpht_table_destroy(t);
	free(keys);
	free(st);
}

/*
 * The pieces of a routed call (cpht_route_piece), on any machine: they
 * cover the batch in order without a gap, none is larger than the chunk,
 * a call of one chunk or less goes whole, one of two chunks or more
 * starts with pieces of an eighth, a quarter and a half of the chunk.
 */
static void
check_pieces(void)
{
	const size_t chunks[] = {1, 7, 8, 65536, (size_t) 1 << 25};
	const size_t counts[] = {0, 1, 5, 8, 9, 65536, 65537, 100000, 458752, 458753, 700000,
	(size_t) 200000000};

	for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++)
		for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++)
		{
			size_t		chunk = chunks[c],
						n = counts[k],
						at = 0,
						i,
						len = 0;
			int			ok = 1;

			for (i = 0; i < n + 4; i++)
			{
				size_t		lo = cpht_route_piece(chunk, n, i, &len);

				if (len == 0)
					break;
				ok &= lo == at && len <= chunk;
				if (n >= 2 * chunk && chunk >= 8 && i < 3)
					ok &= len == (chunk >> (3 - i)) || lo + len == n;
				at += len;
			}
			CHECK(ok && at == n, "chunk %zu, %zu keys: the pieces cover the keys in order", chunk, n);
			CHECK(n > chunk || i == (n > 0), "chunk %zu, %zu keys: %zu pieces for a call of one chunk",
				  chunk, n, i);
			if (n >= 2 * chunk && chunk >= 8)
				CHECK(cpht_route_piece(chunk, n, 0, &len) == 0 && len == chunk / 8,
					  "chunk %zu, %zu keys: the first piece an eighth of the chunk", chunk, n);
			else if (n > 0)
				CHECK(cpht_route_piece(chunk, n, 0, &len) == 0 && len == (n < chunk ? n : chunk),
					  "chunk %zu, %zu keys: under two chunks, whole chunks", chunk, n);
		}
}

int
main(void)
{
	char		why[256];
	uint64_t	rng = 12345;
	size_t		most = 700000;
	uint64_t   *keys;
	uint8_t    *st[3];
	int			gpus;
	cpht_table *probe;

	check_pieces();
	if (unit_failures > 0)
		UNIT_DONE();
	if (!cpht_gpu_usable(why, sizeof(why)))
	{
		printf("SKIP: %s (the pieces' arithmetic: %d checks passed)\n", why, unit_checks);
		return 77;
	}
	gpus = cpht_gpu_count();
	if (gpus < 2)
	{
		printf("SKIP: %d GPU usable, routing needs 2 (the pieces' arithmetic: %d checks passed)\n",
			   gpus, unit_checks);
		return 77;
	}
	for (size_t i = 0; i < POOL; i++)
		pool[i] = unit_rand(&rng);
	probe = make(CPHT_ICEBERG, 50000, 2, 0, 0);
	if (probe == NULL)
		UNIT_DONE();
	if (strcmp(probe->sharded->path->name, "device") != 0)
	{
		printf("SKIP: the GPUs cannot reach each other's memory (the table takes the %s path)\n",
			   probe->sharded->path->name);
		cpht_table_destroy(probe);
		return 77;
	}
	cpht_table_destroy(probe);
	printf("GPU: %d usable\n", gpus);
	keys = malloc(most * sizeof(uint64_t));
	for (int b = 0; b < 3; b++)
		st[b] = malloc(most);
	for (int shards = 2; shards <= (gpus < 4 ? gpus : 4); shards++)
	{
		if (shards == 3 && gpus > 3)
			continue;
		run_differential(CPHT_ICEBERG, shards, keys, st[0], st[1], st[2], "ordinary");
		run_differential(CPHT_CUCKOO, shards, keys, st[0], st[1], st[2], "ordinary");
		run_stops(CPHT_ICEBERG, shards, 0);
		run_stops(CPHT_ICEBERG, shards, 1);
		run_stops(CPHT_CUCKOO, shards, 0);
		run_rollback(CPHT_ICEBERG, shards);
		run_rollback(CPHT_CUCKOO, shards);
	}
	/* registered memory: keys and answers go by DMA as they are */
	CHECK(cpht_host_register(keys, most * sizeof(uint64_t), why, sizeof(why)), "register: %s", why);
	for (int b = 0; b < 3; b++)
		CHECK(cpht_host_register(st[b], most, why, sizeof(why)), "register: %s", why);
	run_differential(CPHT_ICEBERG, 2, keys, st[0], st[1], st[2], "registered");
	UNIT_DONE();
}
