/*
 * test_shards.c — a sharded table against one table and a reference set.
 *
 * The same random batches (keys drawn from a pool, so batches repeat keys
 * inside themselves and across batches; sizes from a few keys to more than
 * the size at which shards run on threads of their own) go through a table
 * of 2 or 3 shards and through an ordinary CPU table, both created small so
 * that both grow.  What must hold:
 *   - find_or_put: a key present before is FOUND, an absent key is PUT at
 *     exactly one of its occurrences (checked against the reference set);
 *     counts equal;
 *   - find: byte for byte equal to the one table's and to the reference;
 *   - erase: each present key reported once, counts equal;
 *   - transactions: savepoints taken on both, rolled back on both: the
 *     whole pool found alike afterwards; the entries of a call read out of
 *     the log (log_read) are the same (key, inserted or deleted) pairs on
 *     both, and undoing them (undo) brings both back alike, also after
 *     deletes were held across a growth (hold_deletes);
 *   - a call on a fixed-size sharded table that fills one shard fails with
 *     CPHT_ERR_FULL and leaves every shard as it was (logging on and off);
 *   - cpht_table_stats: the shards, their counts summing to the count; the
 *     slot bytes (cpht_table_slot_bytes) those of the shards after they
 *     grew; an automatic table's key width that of its widest key;
 *   - cpht_shards_to_fit: the fewest shards whose each fits a GPU's room;
 *   - the memory limit refusing one shard's undo log: the other shards'
 *     grown logs are given back with the call, and a call that fits works;
 *     an erase on a table that does not log holds no log memory after it;
 *   - a call of many pieces (the shards run one while the next is split and
 *     the previous one's answers go back): every answer what the pieces in
 *     order give, for find-or-put (keys repeated pieces apart), find and
 *     erase; a fault injected in a later piece, and an interrupt between
 *     pieces, undo the pieces done and the one in flight (logging on and
 *     off).
 * The CPU always; with a usable GPU the sharded table is also on the GPUs
 * (one shard per GPU when there are several).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpht_table.h"
#include "reference_set.h"
#include "shards/shards_internal.h"	/* a sharded table's shards */
#include "table/device_ops.h"
#include "util/faults.h"
#include "unit.h"
#include "unit_tables.h"

#define POOL 300000
#define ROUNDS 60

static uint64_t pool[POOL];
static ref_set pool_set;		/* every pool key */

static cpht_table *
make(cpht_kind kind, int key_bits, uint64_t capacity, cpht_device dev, int shards, int fixed)
{
	cpht_params p;
	cpht_table *t = NULL;
	char		err[256];
	cpht_status rc = cpht_params_for_capacity(kind, capacity, key_bits, &p, err, sizeof(err));

	CHECK(rc == CPHT_OK, "params: %s", err);
	p.device = dev;
	p.seed = 42 + (uint64_t) shards;
	p.shards = shards;
	p.fixed_size = fixed;
	rc = cpht_table_create(&p, &t, err, sizeof(err));
	CHECK(rc == CPHT_OK, "create (%d shards): %s", shards, err);
	return rc == CPHT_OK ? t : NULL;
}

static size_t
batch_size(uint64_t *rng)
{
	switch (unit_rand(rng) % 3)
	{
		case 0:
			return 1 + unit_rand(rng) % 100;
		case 1:
			return 1000 + unit_rand(rng) % 4000;
		default:
			return 70000 + unit_rand(rng) % 80000;
	}
}

static void
draw(uint64_t *rng, uint64_t *keys, size_t n, size_t pool_used)
{
	for (size_t i = 0; i < n; i++)
		keys[i] = pool[unit_rand(rng) % pool_used];
}

/* Both tables and the reference find every pool key alike. */
static void
compare_pool(cpht_table *s, cpht_table *u, ref_set *ref, const char *what)
{
	static uint8_t fs[POOL],
				fu[POOL];
	size_t		diff = 0,
				refdiff = 0;

	CHECK(cpht_table_find(s, pool, POOL, fs) == CPHT_OK, "%s: find: %s", what, cpht_table_error(s));
	CHECK(cpht_table_find(u, pool, POOL, fu) == CPHT_OK, "%s: find: %s", what, cpht_table_error(u));
	for (size_t i = 0; i < POOL; i++)
	{
		diff += fs[i] != fu[i];
		refdiff += ref && fs[i] != (uint8_t) ref_has(ref, pool[i]);
	}
	CHECK(diff == 0, "%s: %zu pool keys found differently by the sharded table", what, diff);
	CHECK(refdiff == 0, "%s: %zu pool keys differ from the reference", what, refdiff);
	CHECK(cpht_table_count(s) == cpht_table_count(u), "%s: count %llu, one table %llu", what,
		  (unsigned long long) cpht_table_count(s), (unsigned long long) cpht_table_count(u));
}

/* The reference set again from the one table (after a rollback). */
static void
ref_reload(ref_set *ref, cpht_table *u)
{
	static uint8_t f[POOL];

	ref_free(ref);
	ref_init(ref, POOL);
	cpht_table_find(u, pool, POOL, f);
	for (size_t i = 0; i < POOL; i++)
		if (f[i])
			ref_add(ref, pool[i]);
}

static int
cmp_pair(const void *a, const void *b)
{
	const uint64_t *x = a,
			   *y = b;

	return x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : x[1] < y[1] ? -1 : x[1] > y[1];
}

/* Entries [from, to) of t's log as sorted (key, deleted) pairs. */
static uint64_t *
log_pairs(cpht_table *t, uint64_t from, uint64_t to, uint64_t *keys, uint8_t *where)
{
	uint64_t	n = to - from;
	uint64_t   *pairs = malloc((n + 1) * 2 * sizeof(uint64_t));

	CHECK(cpht_table_log_read(t, from, n, keys, where) == CPHT_OK, "log_read: %s", cpht_table_error(t));
	for (uint64_t i = 0; i < n; i++)
	{
		pairs[2 * i] = keys[i];
		pairs[2 * i + 1] = where[i] != 0;
	}
	qsort(pairs, n, 2 * sizeof(uint64_t), cmp_pair);
	return pairs;
}

/* One call's log entries on both tables: the same pairs. */
static void
compare_log(cpht_table *s, cpht_table *u, uint64_t s0, uint64_t u0, const char *what)
{
	uint64_t	s1 = cpht_table_log_position(s),
				u1 = cpht_table_log_position(u);
	uint64_t   *ks,
			   *ku,
			   *ps,
			   *pu;
	uint8_t    *ws,
			   *wu;

	CHECK(s1 - s0 == u1 - u0, "%s: %llu log entries, one table %llu", what,
		  (unsigned long long) (s1 - s0), (unsigned long long) (u1 - u0));
	if (s1 - s0 != u1 - u0)
		return;
	ks = malloc((s1 - s0 + 1) * sizeof(uint64_t));
	ku = malloc((s1 - s0 + 1) * sizeof(uint64_t));
	ws = malloc(s1 - s0 + 1);
	wu = malloc(s1 - s0 + 1);
	ps = log_pairs(s, s0, s1, ks, ws);
	pu = log_pairs(u, u0, u1, ku, wu);
	CHECK(memcmp(ps, pu, (s1 - s0) * 2 * sizeof(uint64_t)) == 0, "%s: log entries differ", what);
	free(ks);
	free(ku);
	free(ws);
	free(wu);
	free(ps);
	free(pu);
}

static void
check_stats(cpht_table *s, int shards, cpht_device dev, const char *what)
{
	cpht_stats	st;
	uint64_t	sum = 0;

	CHECK(cpht_table_stats(s, &st) == CPHT_OK, "%s: stats: %s", what, cpht_table_error(s));
	CHECK(st.shards == shards, "%s: %d shards reported", what, st.shards);
	for (int i = 0; i < st.shards && i < CPHT_MAX_SHARDS; i++)
	{
		sum += st.shard[i].count;
		CHECK(st.shard[i].count > 0, "%s: shard %d is empty", what, i + 1);
		CHECK(st.shard[i].device == dev, "%s: shard %d on another device", what, i + 1);
		if (dev == CPHT_DEVICE_GPU && cpht_gpu_count() >= shards && i > 0)
			CHECK(st.shard[i].gpu != st.shard[0].gpu, "%s: shards 1 and %d share GPU %d", what,
				  i + 1, st.shard[0].gpu);
	}
	CHECK(sum == st.count && st.count == cpht_table_count(s), "%s: shard counts sum to %llu of %llu",
		  what, (unsigned long long) sum, (unsigned long long) st.count);
	CHECK(st.grows > 0, "%s: the shards never grew", what);
	/* the slot memory now, as the memory cap and cpht_tables() read it */
	CHECK(cpht_table_slot_bytes(s) == st.table_bytes, "%s: %llu slot bytes, the shards hold %llu",
		  what, (unsigned long long) cpht_table_slot_bytes(s), (unsigned long long) st.table_bytes);
}

/*
 * The key width of an automatic sharded table after wide keys and negative
 * ones: what one table over the same keys reports, the width of the widest
 * folded key, and slots that hold it.
 */
static void
check_auto_stats(cpht_table *t, int shards, int widest, const char *what)
{
	cpht_stats	st;

	CHECK(cpht_table_stats(t, &st) == CPHT_OK, "%s: stats: %s", what, cpht_table_error(t));
	CHECK(st.shards == shards, "%s: %d shards reported", what, st.shards);
	CHECK(st.auto_key_bits && st.signed_keys, "%s: auto_key_bits %d, signed_keys %d", what,
		  st.auto_key_bits, st.signed_keys);
	CHECK(st.key_bits == widest && st.slot_key_bits >= st.key_bits,
		  "%s: key_bits %d (the widest key %d), slots hold %d bits", what, st.key_bits, widest,
		  st.slot_key_bits);
	CHECK(st.widens > 0, "%s: no widening reported", what);
}

static void
run(cpht_kind kind, int key_bits, cpht_device dev, int shards)
{
	char		what[128];
	cpht_table *s = make(kind, key_bits, 20000, dev, shards, 0);
	cpht_table *u = make(kind, key_bits, 20000, CPHT_DEVICE_CPU, 0, 0);
	uint64_t	rng = 7 * (uint64_t) shards + (uint64_t) kind;
	uint64_t   *keys = malloc(200000 * sizeof(uint64_t));
	uint8_t    *ss = malloc(200000),
			   *su = malloc(200000);
	ref_set		ref;
	uint64_t	save_s = 0,
				save_u = 0;
	int			saved = 0;

	snprintf(what, sizeof(what), "%s %d-bit %s %d shards",
			 kind == CPHT_ICEBERG ? "iceberg" : "cuckoo", key_bits,
			 dev == CPHT_DEVICE_GPU ? "GPU" : "CPU", shards);
	if (!s || !u)
		return;
	ref_init(&ref, POOL);
	ref_init(&pool_set, POOL);
	for (size_t i = 0; i < POOL; i++)
	{
		pool[i] = unit_rand(&rng) >> (64 - key_bits);
		ref_add(&pool_set, pool[i]);
	}
	cpht_table_set_logging(s, 1);
	cpht_table_set_logging(u, 1);

	for (int round = 0; round < ROUNDS; round++)
	{
		size_t		n = batch_size(&rng);
		int			op = (int) (unit_rand(&rng) % 10);
		/* the pool opens up as rounds go, so the tables keep growing */
		size_t		used = POOL / 4 + (POOL * 3 / 4) * (size_t) round / ROUNDS;
		uint64_t	s0 = cpht_table_log_position(s),
					u0 = cpht_table_log_position(u);
		cpht_status rs,
					ru;

		draw(&rng, keys, n, used);
		if (op < 5)
		{
			rs = cpht_table_find_or_put(s, keys, n, ss);
			ru = cpht_table_find_or_put(u, keys, n, su);
			CHECK(rs == CPHT_OK && ru == CPHT_OK, "%s: find_or_put: %s", what, cpht_table_error(s));
			for (size_t i = 0; i < n; i++)
				if (ss[i] == CPHT_PUT)
					CHECK(ref_add(&ref, keys[i]), "%s round %d: key %zu put though present", what, round, i);
			for (size_t i = 0; i < n; i++)
				CHECK(ref_has(&ref, keys[i]) && (ss[i] == CPHT_PUT || ss[i] == CPHT_FOUND),
					  "%s round %d: key %zu absent after find_or_put (status %d)", what, round, i, ss[i]);
			compare_log(s, u, s0, u0, what);
		}
		else if (op < 7)
		{
			rs = cpht_table_find(s, keys, n, ss);
			ru = cpht_table_find(u, keys, n, su);
			CHECK(rs == CPHT_OK && ru == CPHT_OK, "%s: find: %s", what, cpht_table_error(s));
			CHECK(memcmp(ss, su, n) == 0, "%s round %d: find answers differ", what, round);
			for (size_t i = 0; i < n; i++)
				CHECK(ss[i] == (uint8_t) ref_has(&ref, keys[i]), "%s round %d: find of key %zu", what, round, i);
		}
		else if (op < 8)
		{
			rs = cpht_table_erase(s, keys, n / 4 + 1, ss);
			ru = cpht_table_erase(u, keys, n / 4 + 1, su);
			CHECK(rs == CPHT_OK && ru == CPHT_OK, "%s: erase: %s", what, cpht_table_error(s));
			for (size_t i = 0; i < n / 4 + 1; i++)
				if (ss[i])
					CHECK(ref_del(&ref, keys[i]), "%s round %d: key %zu erased though absent", what, round, i);
			for (size_t i = 0; i < n / 4 + 1; i++)
				CHECK(!ref_has(&ref, keys[i]), "%s round %d: key %zu present after erase", what, round, i);
			compare_log(s, u, s0, u0, what);
		}
		else if (op < 9)
		{
			/* savepoint, or back to it */
			if (!saved || unit_rand(&rng) % 2)
			{
				save_s = cpht_table_log_position(s);
				save_u = cpht_table_log_position(u);
				saved = 1;
			}
			else
			{
				CHECK(cpht_table_rollback_to(s, save_s) == CPHT_OK, "%s: rollback: %s", what, cpht_table_error(s));
				CHECK(cpht_table_rollback_to(u, save_u) == CPHT_OK, "%s: rollback", what);
				CHECK(cpht_table_log_position(s) == save_s, "%s: log position after rollback", what);
				ref_reload(&ref, u);
				compare_pool(s, u, &ref, what);
				saved = 0;
			}
		}
		else
		{
			/*
			 * The worker's way: a transaction's erase read out of the log
			 * and held; the table grows meanwhile; then the erase undone.
			 */
			uint64_t	d;
			uint64_t   *ks = malloc((n + 1) * sizeof(uint64_t)),
					   *ku = malloc((n + 1) * sizeof(uint64_t));
			uint8_t    *ws = malloc(n + 1),
					   *wu = malloc(n + 1);
			uint64_t   *more = malloc(POOL / 2 * sizeof(uint64_t));
			uint8_t    *mst = malloc(POOL / 2);

			CHECK(cpht_table_erase(s, keys, n, ss) == CPHT_OK, "%s: erase: %s", what, cpht_table_error(s));
			CHECK(cpht_table_erase(u, keys, n, su) == CPHT_OK, "%s: erase", what);
			d = cpht_table_log_position(s) - s0;
			CHECK(d == cpht_table_log_position(u) - u0, "%s: held erase sizes differ", what);
			CHECK(cpht_table_log_read(s, s0, d, ks, ws) == CPHT_OK, "%s: log_read: %s", what, cpht_table_error(s));
			CHECK(cpht_table_log_read(u, u0, d, ku, wu) == CPHT_OK, "%s: log_read", what);
			cpht_table_hold_deletes(s, (int64_t) d);
			cpht_table_hold_deletes(u, (int64_t) d);
			cpht_table_truncate_log(s, s0);
			cpht_table_truncate_log(u, u0);
			CHECK(cpht_table_rebuild(s) != CPHT_OK, "%s: rebuild allowed while deletes are held", what);
			/* keys never in the pool: the tables grow under the held deletes */
			for (size_t i = 0; i < POOL / 2; i++)
				do
					more[i] = unit_rand(&rng) >> (64 - key_bits);
				while (ref_has(&pool_set, more[i]));
			CHECK(cpht_table_put(s, more, POOL / 2, &(uint64_t) {0}) == CPHT_OK, "%s: put: %s", what, cpht_table_error(s));
			CHECK(cpht_table_put(u, more, POOL / 2, &(uint64_t) {0}) == CPHT_OK, "%s: put", what);
			CHECK(cpht_table_undo(s, ks, ws, d) == CPHT_OK, "%s: undo: %s", what, cpht_table_error(s));
			CHECK(cpht_table_undo(u, ku, wu, d) == CPHT_OK, "%s: undo", what);
			cpht_table_hold_deletes(s, -(int64_t) d);
			cpht_table_hold_deletes(u, -(int64_t) d);
			/* take the extra keys out again, so the pool alone is compared */
			CHECK(cpht_table_erase(s, more, POOL / 2, mst) == CPHT_OK, "%s: erase: %s", what, cpht_table_error(s));
			CHECK(cpht_table_erase(u, more, POOL / 2, mst) == CPHT_OK, "%s: erase", what);
			compare_pool(s, u, &ref, what);
			/* a rollback past this point would see the put and erase: drop
			 * the savepoint */
			saved = 0;
			free(ks);
			free(ku);
			free(ws);
			free(wu);
			free(more);
			free(mst);
		}
		CHECK(cpht_table_count(s) == ref.count, "%s round %d: count %llu, reference %llu", what, round,
			  (unsigned long long) cpht_table_count(s), (unsigned long long) ref.count);
	}
	compare_pool(s, u, &ref, what);
	check_stats(s, shards, dev, what);
	/* commit, then rebuild: the same keys */
	cpht_table_truncate_log(s, 0);
	CHECK(cpht_table_rebuild(s) == CPHT_OK, "%s: rebuild: %s", what, cpht_table_error(s));
	compare_pool(s, u, &ref, what);
	cpht_table_destroy(s);
	cpht_table_destroy(u);
	ref_free(&ref);
	ref_free(&pool_set);
	free(keys);
	free(ss);
	free(su);
}

/*
 * A fixed-size sharded table: a batch too large for it fails whole, and
 * the shards whose part fitted are undone.
 */
static void
run_full(cpht_kind kind, cpht_device dev, int shards, int logging, uint64_t capacity)
{
	cpht_table *s = make(kind, 64, capacity, dev, shards, 1);
	uint64_t	rng = 99;
	size_t		first = 2000,
				more = 2 * capacity;
	uint64_t   *keys = malloc((first + more) * sizeof(uint64_t));
	uint8_t    *st = malloc(first + more);
	cpht_stats	before,
				after;
	size_t		found = 0;

	if (!s)
		return;
	for (size_t i = 0; i < first + more; i++)
		keys[i] = unit_rand(&rng);
	cpht_table_set_logging(s, logging);
	CHECK(cpht_table_find_or_put(s, keys, first, st) == CPHT_OK, "fill: %s", cpht_table_error(s));
	cpht_table_stats(s, &before);
	CHECK(cpht_table_find_or_put(s, keys, first + more, st) == CPHT_ERR_FULL,
		  "a batch past a fixed-size sharded table did not fail full");
	cpht_table_stats(s, &after);
	CHECK(cpht_table_count(s) == first, "after a failed call: count %llu, not %zu",
		  (unsigned long long) cpht_table_count(s), first);
	for (int i = 0; i < shards; i++)
		CHECK(after.shard[i].count == before.shard[i].count && after.shard[i].live == before.shard[i].live,
			  "shard %d changed by a failed call (%llu keys, were %llu)", i + 1,
			  (unsigned long long) after.shard[i].count, (unsigned long long) before.shard[i].count);
	CHECK(cpht_table_find(s, keys, first + more, st) == CPHT_OK, "find: %s", cpht_table_error(s));
	for (size_t i = 0; i < first + more; i++)
		found += st[i] && i >= first;
	CHECK(found == 0, "%zu keys of the failed call stayed", found);
	CHECK(strstr(cpht_table_error(s), "shard ") != NULL, "the error names no shard: %s", cpht_table_error(s));
	cpht_table_destroy(s);
	free(keys);
	free(st);
}

/*
 * A sharded table without key_bits: each shard widens for its own keys
 * (small, 40-bit and negative ones here), the table over them lets every
 * key through, and an export's scan reads every shard's keys once.
 */
static void
run_auto(cpht_kind kind, cpht_device dev, int shards)
{
	const size_t n = 30000;
	cpht_table *t = make(kind, 0, 1000, dev, shards, 0);
	uint64_t   *keys = malloc(2 * n * sizeof(uint64_t));
	uint8_t    *out = malloc(2 * n);
	ref_set		ref,
				scanned;
	size_t		wrong = 0,
				got = 0;
	uint64_t	position = 0,
				end;
	char		what[64];
	int			widest = 0;

	snprintf(what, sizeof(what), "auto width, %s, %d shards", kind == CPHT_CUCKOO ? "cuckoo" : "iceberg", shards);
	if (t == NULL)
		return;
	ref_init(&ref, 2 * n);
	ref_init(&scanned, 2 * n);
	for (size_t i = 0; i < n; i++)
	{
		uint64_t	folded;

		keys[i] = i % 3 == 0 ? i : i % 3 == 1 ? ((uint64_t) i << 20) + 7 : (uint64_t) -(int64_t) (i + 1);
		/* zigzag: the width of a key once the table folds them */
		folded = (keys[i] << 1) ^ (uint64_t) ((int64_t) keys[i] >> 63);
		while (widest < 64 && (folded >> widest) != 0)
			widest++;
	}
	/* every key twice in one call: each new key PUT exactly once */
	memcpy(keys + n, keys, n * sizeof(uint64_t));
	CHECK(cpht_table_find_or_put(t, keys, 2 * n, out) == CPHT_OK, "%s: fop: %s", what, cpht_table_error(t));
	for (size_t i = 0; i < 2 * n; i++)
		if (out[i] == CPHT_PUT && !ref_add(&ref, keys[i]))
			wrong++;
	CHECK(wrong == 0 && ref.count == n, "%s: %zu keys PUT twice, %llu of %zu PUT", what, wrong,
		  (unsigned long long) ref.count, n);
	CHECK(cpht_table_find(t, keys, n, out) == CPHT_OK, "%s: find: %s", what, cpht_table_error(t));
	wrong = 0;
	for (size_t i = 0; i < n; i++)
		wrong += !out[i];
	CHECK(wrong == 0, "%s: %zu stored keys not found", what, wrong);
	for (size_t i = 0; i < n; i++)
		keys[i] = ((uint64_t) (i + 1) << 44) + 3;
	CHECK(cpht_table_find(t, keys, n, out) == CPHT_OK, "%s: find absent: %s", what, cpht_table_error(t));
	wrong = 0;
	for (size_t i = 0; i < n; i++)
		wrong += out[i];
	CHECK(wrong == 0, "%s: %zu absent keys found", what, wrong);
	end = cpht_table_scan_end(t);
	while (position < end)
	{
		size_t		m = 0;
		uint64_t	before = position;

		CHECK(cpht_table_scan_keys(t, &position, keys, 4096, &m) == CPHT_OK, "%s: scan: %s", what,
			  cpht_table_error(t));
		CHECK(position > before, "%s: the scan stopped at %llu of %llu", what,
			  (unsigned long long) position, (unsigned long long) end);
		if (position <= before)
			break;
		for (size_t i = 0; i < m; i++)
			if (!ref_has(&ref, keys[i]) || !ref_add(&scanned, keys[i]))
				wrong++;
		got += m;
	}
	CHECK(wrong == 0 && got == n, "%s: the scan read %zu keys (%zu wrong or repeated), the table holds %zu",
		  what, got, wrong, n);
	check_auto_stats(t, shards, widest, what);
	ref_free(&ref);
	ref_free(&scanned);
	free(keys);
	free(out);
	cpht_table_destroy(t);
}

/*
 * cpht_table_keep_log: a sharded table whose log is emptied after every
 * call (the cpht worker's shared tables) keeps its shards' log stores for
 * the next call instead of giving them back and allocating them again.
 */
static void
run_keep_log(cpht_kind kind, int shards)
{
	const size_t n = 300000;
	cpht_table *t = make(kind, 64, 2 * n, CPHT_DEVICE_CPU, shards, 0);
	uint64_t   *keys = malloc(n * sizeof(uint64_t));
	uint8_t    *out = malloc(n);
	int64_t		logged;

	if (t == NULL)
		return;
	for (size_t i = 0; i < n; i++)
		keys[i] = i * 7919 + 1;
	cpht_set_memory_hook(unit_memory_hook);
	unit_hook_held = 0;
	cpht_table_set_logging(t, 1);
	cpht_table_keep_log(t, 2 * n);
	CHECK(cpht_table_find_or_put(t, keys, n, out) == CPHT_OK, "keep_log: fop: %s", cpht_table_error(t));
	logged = unit_hook_held;
	cpht_table_truncate_log(t, 0);
	CHECK(logged > 0 && unit_hook_held == logged,
		  "keep_log, %d shards: the log held %lld bytes, %lld after it was emptied", shards,
		  (long long) logged, (long long) unit_hook_held);
	cpht_table_destroy(t);
	cpht_set_memory_hook(NULL);
	free(keys);
	free(out);
}

/* Bytes of each shard of a table of n shards (the shards are alike). */
static uint64_t
shard_bytes(const cpht_params *one, int n)
{
	cpht_params p = *one;

	p.shards = n > 1 ? n : 0;
	return cpht_params_table_bytes(&p) / (uint64_t) n;
}

/*
 * cpht_shards_to_fit: a table that fits one GPU stays one table; one that
 * does not gets the fewest shards (at most the GPUs, at most
 * CPHT_MAX_SHARDS) whose each fits, or the most there may be when none do.
 */
static void
run_shards_to_fit(cpht_kind kind, int key_bits)
{
	cpht_params p;
	char		err[256];
	uint64_t	whole;
	static const double room[] = {1.0, 0.9, 0.6, 0.5, 0.34, 0.3, 0.26, 0.2, 0.07, 0.01};

	CHECK(cpht_params_for_capacity(kind, 3000000, key_bits, &p, err, sizeof(err)) == CPHT_OK, "params: %s", err);
	whole = cpht_params_table_bytes(&p);
	CHECK(cpht_shards_to_fit(&p, whole, 4) == 1, "a table that fits one GPU exactly stays one table");
	CHECK(cpht_shards_to_fit(&p, whole - 1, 1) == 1, "with one GPU a table stays one table");
	CHECK(cpht_shards_to_fit(&p, whole / 100, 40) == CPHT_MAX_SHARDS,
		  "at most CPHT_MAX_SHARDS shards, however many GPUs");
	for (size_t i = 0; i < sizeof(room) / sizeof(room[0]); i++)
		for (int gpus = 2; gpus <= 8; gpus += 2)
		{
			uint64_t	fit = (uint64_t) (room[i] * (double) whole);
			int			n = cpht_shards_to_fit(&p, fit, gpus);

			if (whole <= fit)
				CHECK(n == 1, "room %.2f, %d GPUs: %d shards for a table that fits", room[i], gpus, n);
			else if (n < gpus)
				CHECK(n >= 2 && shard_bytes(&p, n) <= fit && (n == 2 || shard_bytes(&p, n - 1) > fit),
					  "room %.2f, %d GPUs: %d shards is not the fewest that fit (%llu bytes each, room %llu)",
					  room[i], gpus, n, (unsigned long long) shard_bytes(&p, n), (unsigned long long) fit);
			else
				CHECK(n == gpus && shard_bytes(&p, n - 1) > fit,
					  "room %.2f, %d GPUs: %d shards where fewer fit, or not all GPUs where none fit",
					  room[i], gpus, n);
		}
}

/*
 * Calls of many pieces.  A table made for PIPE_CAPACITY keys splits a call
 * in pieces of a few tens of thousands of keys (CPU shards: half its slots,
 * at least 65536; GPU shards: its slots), so a call of PIPE_KEYS keys goes
 * in about ten.
 */
#define PIPE_CAPACITY 60000
#define PIPE_KEYS 600000
#define PIPE_DISTINCT 450000

static uint64_t
pipe_key(size_t i)
{
	return ((uint64_t) i + 1) * 0x9e3779b97f4a7c15ULL;
}

static int
call_pieces(cpht_table *t)
{
	cpht_call_times ct;

	cpht_table_call_times(t, &ct);
	return ct.pieces;
}

/*
 * Keys 0..PIPE_DISTINCT, then the first ones again (pieces after the ones
 * they first came in), every tenth one put before: each answer is known
 * from the pieces running in order.
 */
static void
run_pipeline(cpht_kind kind, cpht_device dev, int shards)
{
	const size_t nlater = 4 * PIPE_KEYS;	/* the table grew: pieces are larger */
	cpht_table *t = make(kind, 64, PIPE_CAPACITY, dev, shards, 0);
	uint64_t   *keys = malloc(nlater * sizeof(uint64_t));
	uint64_t   *pre = malloc(PIPE_DISTINCT / 10 * sizeof(uint64_t));
	uint8_t    *st = malloc(nlater);
	size_t		wrong = 0,
				npre = 0;
	char		what[96];

	snprintf(what, sizeof(what), "pipeline, %s %s, %d shards", kind == CPHT_CUCKOO ? "cuckoo" : "iceberg",
			 dev == CPHT_DEVICE_GPU ? "GPU" : "CPU", shards);
	if (t == NULL)
		return;
	for (size_t i = 0; i < PIPE_KEYS; i++)
		keys[i] = pipe_key(i % PIPE_DISTINCT);
	for (size_t i = 3; i < PIPE_DISTINCT; i += 10)
		pre[npre++] = pipe_key(i);
	CHECK(cpht_table_find_or_put(t, pre, npre, st) == CPHT_OK, "%s: preload: %s", what, cpht_table_error(t));
	memset(st, 0xee, PIPE_KEYS);
	CHECK(cpht_table_find_or_put(t, keys, PIPE_KEYS, st) == CPHT_OK, "%s: fop: %s", what, cpht_table_error(t));
	CHECK(call_pieces(t) >= 5, "%s: the call went in %d pieces", what, call_pieces(t));
	for (size_t i = 0; i < PIPE_KEYS; i++)
		wrong += st[i] != (i < PIPE_DISTINCT && i % 10 != 3 ? CPHT_PUT : CPHT_FOUND);
	CHECK(wrong == 0, "%s: %zu find-or-put answers wrong", what, wrong);
	CHECK(cpht_table_count(t) == PIPE_DISTINCT, "%s: count %llu", what,
		  (unsigned long long) cpht_table_count(t));
	/* find: stored and absent keys in turns of 1000 */
	for (size_t i = 0; i < nlater; i++)
		keys[i] = (i / 1000) % 2 ? pipe_key(PIPE_KEYS + i) : pipe_key(i % PIPE_DISTINCT);
	memset(st, 0xee, nlater);
	CHECK(cpht_table_find(t, keys, nlater, st) == CPHT_OK, "%s: find: %s", what, cpht_table_error(t));
	CHECK(call_pieces(t) >= 3, "%s: the find went in %d pieces", what, call_pieces(t));
	wrong = 0;
	for (size_t i = 0; i < nlater; i++)
		wrong += st[i] != ((i / 1000) % 2 == 0);
	CHECK(wrong == 0, "%s: %zu find answers wrong", what, wrong);
	/* erase: every key once, then again and again in later pieces */
	for (size_t i = 0; i < nlater; i++)
		keys[i] = pipe_key(i % PIPE_DISTINCT);
	memset(st, 0xee, nlater);
	CHECK(cpht_table_erase(t, keys, nlater, st) == CPHT_OK, "%s: erase: %s", what, cpht_table_error(t));
	CHECK(call_pieces(t) >= 3, "%s: the erase went in %d pieces", what, call_pieces(t));
	wrong = 0;
	for (size_t i = 0; i < nlater; i++)
		wrong += st[i] != (i < PIPE_DISTINCT);
	CHECK(wrong == 0, "%s: %zu erase answers wrong", what, wrong);
	CHECK(cpht_table_count(t) == 0, "%s: count %llu after erasing every key", what,
		  (unsigned long long) cpht_table_count(t));
	cpht_table_destroy(t);
	free(keys);
	free(pre);
	free(st);
}

static atomic_int interrupt_calls;
static int	interrupt_at;

static int
interrupt_on_call(void)
{
	return atomic_fetch_add(&interrupt_calls, 1) + 1 >= interrupt_at;
}

/*
 * A find-or-put of many pieces that stops part way, after pieces ran whole
 * and (a fault) with one in flight: a fault injected in a later piece
 * (`fault` 1), or an interrupt before the fourth piece.  Most of the call's
 * keys are stored already and one in PIPE_NEW_EVERY is new, spread over
 * every piece, so the table need not grow (a growth reruns a shard's part,
 * which would take fault steps of its own).  Afterwards the table is as
 * before the call: its count, its log, the keys it held and none of the
 * call's new ones.
 */
#define PIPE_STORED 30000
#define PIPE_NEW_EVERY 50

static void
run_pipeline_stop(cpht_kind kind, int shards, int logging, int fault)
{
	const size_t n = 10 * ((size_t) 1 << 16);
	cpht_table *t = make(kind, 64, PIPE_CAPACITY, CPHT_DEVICE_CPU, shards, 0);
	uint64_t   *keys = malloc(n * sizeof(uint64_t));
	uint8_t    *st = malloc(n);
	size_t		wrong = 0,
				nnew = 0;
	uint64_t	log0;
	cpht_status rc;
	char		what[128];

	snprintf(what, sizeof(what), "pipeline %s, %s, %d shards, logging %d", fault ? "fault" : "interrupt",
			 kind == CPHT_CUCKOO ? "cuckoo" : "iceberg", shards, logging);
	if (t == NULL)
		return;
	for (size_t i = 0; i < PIPE_STORED; i++)
		keys[i] = pipe_key(i);
	cpht_table_set_logging(t, logging);
	CHECK(cpht_table_find_or_put(t, keys, PIPE_STORED, st) == CPHT_OK, "%s: preload: %s", what,
		  cpht_table_error(t));
	for (size_t i = 0; i < n; i++)
	{
		keys[i] = i % PIPE_NEW_EVERY == 0 ? pipe_key(PIPE_KEYS + i) : pipe_key(i % PIPE_STORED);
		nnew += i % PIPE_NEW_EVERY == 0;
	}
	log0 = cpht_table_log_position(t);
	/* answers of pieces that did not put them back would stay as set here */
	memset(st, CPHT_PUT, n);
	if (fault)
	{
		/* each shard takes a step or two per piece: the fault strikes in
		 * the third piece or later */
		cpht_fault_arm((unsigned) (4 * shards + 1));
		rc = cpht_table_find_or_put(t, keys, n, st);
		cpht_fault_arm(0);
		CHECK(rc == CPHT_ERR_DEVICE, "%s: status %d (%s)", what, (int) rc, cpht_table_error(t));
		CHECK(call_pieces(t) >= 3, "%s: the fault struck in piece %d", what, call_pieces(t));
	}
	else
	{
		atomic_store(&interrupt_calls, 0);
		interrupt_at = 3;
		cpht_set_interrupt_check(interrupt_on_call);
		rc = cpht_table_find_or_put(t, keys, n, st);
		cpht_set_interrupt_check(NULL);
		CHECK(rc == CPHT_ERR_CANCELED, "%s: status %d (%s)", what, (int) rc, cpht_table_error(t));
		CHECK(call_pieces(t) == 3, "%s: canceled after %d pieces, not 3", what, call_pieces(t));
	}
	CHECK(cpht_table_count(t) == PIPE_STORED, "%s: count %llu after the failed call, was %d", what,
		  (unsigned long long) cpht_table_count(t), PIPE_STORED);
	CHECK(cpht_table_log_position(t) == log0, "%s: log at %llu, was %llu", what,
		  (unsigned long long) cpht_table_log_position(t), (unsigned long long) log0);
	CHECK(cpht_table_find(t, keys, n, st) == CPHT_OK, "%s: find: %s", what, cpht_table_error(t));
	for (size_t i = 0; i < n; i++)
		wrong += st[i] != (i % PIPE_NEW_EVERY != 0);
	CHECK(wrong == 0, "%s: %zu keys found otherwise than before the call", what, wrong);
	/* the table works on: the call again */
	CHECK(cpht_table_find_or_put(t, keys, n, st) == CPHT_OK, "%s: fop again: %s", what,
		  cpht_table_error(t));
	CHECK(cpht_table_count(t) == PIPE_STORED + nnew, "%s: count %llu after the call again", what,
		  (unsigned long long) cpht_table_count(t));
	cpht_table_destroy(t);
	free(keys);
	free(st);
}

/*
 * The CPU threads of a table (0: one per core, at most 16) are shared out
 * over its shards, at least one each.  (On a machine of fewer cores than
 * twice the shards every shard has one thread either way.)
 */
static void
run_shard_threads(void)
{
	for (int shards = 2; shards <= 4; shards++)
	{
		cpht_table *t = make(CPHT_ICEBERG, 64, 100000, CPHT_DEVICE_CPU, shards, 0);

		if (t == NULL)
			return;
		for (int s = 0; s < t->sharded->nshards; s++)
		{
			int			want = t->params.cpu_threads / shards > 0 ? t->params.cpu_threads / shards : 1;

			CHECK(t->sharded->shard[s]->params.cpu_threads == want, "%d shards of a table of %d CPU threads: shard %d has %d",
				  shards, t->params.cpu_threads, s, t->sharded->shard[s]->params.cpu_threads);
		}
		cpht_table_destroy(t);
	}
}

/*
 * The memory limit meets a sharded call's undo logs: the shards grow their
 * logs one by one, so a call whose last log is refused has grown the
 * others'.  The refused call must give that back: afterwards it holds no
 * more memory than before it, and a call that fits the limit works.
 *
 * The hook counts from before the table is made, so that what the table
 * takes and gives back later balances to zero at destroy.  A find-or-put
 * and an erase of the same size first grow whatever buffers such calls
 * keep (on GPUs the transfer and routing buffers and the scratch area,
 * kept between calls and sized by the operation), so that the limit, set
 * just above what is held then, meets the logs alone.
 */
static _Atomic int64_t log_hook_held;
static int64_t log_hook_cap;

static int
log_hook(int64_t delta)
{
	int64_t		held = atomic_load(&log_hook_held);

	do
	{
		if (delta > 0 && held + delta > log_hook_cap)
			return 0;
	} while (!atomic_compare_exchange_weak(&log_hook_held, &held, held + delta));
	return 1;
}

static void
run_log_limit(cpht_kind kind, cpht_device dev, int shards)
{
	cpht_table *t = NULL;
	uint64_t   *keys = malloc(200000 * sizeof(uint64_t));
	uint8_t    *st = malloc(200000);
	const char *where = dev == CPHT_DEVICE_GPU ? "GPU" : "CPU";
	cpht_status rc;
	int64_t		before;

	atomic_store(&log_hook_held, 0);
	log_hook_cap = INT64_MAX;
	cpht_set_memory_hook(log_hook);
	t = make(kind, 64, 400000, dev, shards, 0);
	if (t == NULL || keys == NULL || st == NULL)
		goto done;
	for (size_t i = 0; i < 200000; i++)
		keys[i] = i * 7919 + 1;
	rc = cpht_table_find_or_put(t, keys, 200000, st);
	if (rc == CPHT_OK)
		rc = cpht_table_erase(t, keys, 200000, st);
	CHECK(rc == CPHT_OK && cpht_table_count(t) == 0,
		  "%s, %d shards: a find-or-put and an erase of 200000 keys first: %s", where, shards,
		  cpht_table_error(t));
	cpht_table_set_logging(t, 1);
	before = atomic_load(&log_hook_held);
	log_hook_cap = before + 512 * 1024;	/* one shard's log of 65536 entries */
	rc = cpht_table_find_or_put(t, keys, 200000, st);
	CHECK(rc == CPHT_ERR_LIMIT, "%s, %d shards: 200000 logged keys refused by a 512 kB limit (%d: %s)",
		  where, shards, (int) rc, cpht_table_error(t));
	CHECK(atomic_load(&log_hook_held) == before,
		  "%s, %d shards: the refused call holds no memory after it (%lld bytes more)", where, shards,
		  (long long) (atomic_load(&log_hook_held) - before));
	CHECK(cpht_table_count(t) == 0, "%s, %d shards: the refused call stored nothing", where, shards);
	rc = cpht_table_find_or_put(t, keys, 20000, st);
	CHECK(rc == CPHT_OK, "%s, %d shards: then 20000 logged keys fit the limit: %s", where, shards,
		  cpht_table_error(t));
	cpht_table_destroy(t);
	t = NULL;
	CHECK(atomic_load(&log_hook_held) == 0, "%s, %d shards: everything given back at destroy (%lld bytes held)",
		  where, shards, (long long) atomic_load(&log_hook_held));

	/*
	 * A table that does not log: an erase logs each shard's part for the
	 * call alone (to undo the others' when one fails), and that log, with
	 * what it grew, goes with the call.
	 */
	log_hook_cap = INT64_MAX;
	t = make(kind, 64, 400000, dev, shards, 0);
	if (t == NULL)
		goto done;
	rc = cpht_table_find_or_put(t, keys, 20000, st);
	if (rc == CPHT_OK)
		rc = cpht_table_erase(t, keys, 20000, st);
	CHECK(rc == CPHT_OK, "%s, %d shards: a find-or-put and an erase of 20000 keys first: %s", where,
		  shards, cpht_table_error(t));
	before = atomic_load(&log_hook_held);
	rc = cpht_table_find_or_put(t, keys, 20000, st);
	CHECK(rc == CPHT_OK && atomic_load(&log_hook_held) == before,
		  "%s, %d shards: a table that does not log holds no log after a put (%lld bytes more)", where,
		  shards, (long long) (atomic_load(&log_hook_held) - before));
	rc = cpht_table_erase(t, keys, 20000, st);
	CHECK(rc == CPHT_OK && cpht_table_count(t) == 0, "%s, %d shards: erase of 20000 keys: %s", where,
		  shards, cpht_table_error(t));
	CHECK(atomic_load(&log_hook_held) == before,
		  "%s, %d shards: the erase's log is given back with it (%lld bytes more)", where, shards,
		  (long long) (atomic_load(&log_hook_held) - before));
	cpht_table_destroy(t);
	t = NULL;
	CHECK(atomic_load(&log_hook_held) == 0, "%s, %d shards: everything given back at destroy (%lld bytes held)",
		  where, shards, (long long) atomic_load(&log_hook_held));
done:
	cpht_set_memory_hook(NULL);
	if (t)
		cpht_table_destroy(t);
	free(keys);
	free(st);
}

int
main(void)
{
	char		why[256];
	int			gpu = cpht_gpu_usable(why, sizeof(why));

	run_shard_threads();
	run_shards_to_fit(CPHT_ICEBERG, 64);
	run_shards_to_fit(CPHT_CUCKOO, 40);
	run_shards_to_fit(CPHT_ICEBERG, 0);
	run_keep_log(CPHT_ICEBERG, 2);
	run_keep_log(CPHT_CUCKOO, 3);
	run_log_limit(CPHT_ICEBERG, CPHT_DEVICE_CPU, 4);
	run_log_limit(CPHT_CUCKOO, CPHT_DEVICE_CPU, 3);
	for (int shards = 2; shards <= 3; shards++)
	{
		run(CPHT_ICEBERG, 64, CPHT_DEVICE_CPU, shards);
		run(CPHT_CUCKOO, 40, CPHT_DEVICE_CPU, shards);
		run_auto(CPHT_ICEBERG, CPHT_DEVICE_CPU, shards);
		run_auto(CPHT_CUCKOO, CPHT_DEVICE_CPU, shards);
		/* a call in one piece, and one whose second piece fails */
		run_full(CPHT_ICEBERG, CPHT_DEVICE_CPU, shards, 0, 4000);
		run_full(CPHT_CUCKOO, CPHT_DEVICE_CPU, shards, 1, 4000);
		run_full(CPHT_ICEBERG, CPHT_DEVICE_CPU, shards, 0, 100000);
		run_full(CPHT_CUCKOO, CPHT_DEVICE_CPU, shards, 1, 100000);
		run_pipeline(CPHT_ICEBERG, CPHT_DEVICE_CPU, shards);
		run_pipeline(CPHT_CUCKOO, CPHT_DEVICE_CPU, shards);
		for (int logging = 0; logging <= 1; logging++)
			for (int fault = 0; fault <= 1; fault++)
			{
				run_pipeline_stop(CPHT_ICEBERG, shards, logging, fault);
				run_pipeline_stop(CPHT_CUCKOO, shards, logging, fault);
			}
	}
	if (gpu)
	{
		printf("GPU: %d usable\n", cpht_gpu_count());
		/* the device log store's growth and its trim after a refused call */
		run_log_limit(CPHT_ICEBERG, CPHT_DEVICE_GPU, 2);
		run_log_limit(CPHT_CUCKOO, CPHT_DEVICE_GPU, 3);
		for (int shards = 2; shards <= 3; shards++)
		{
			run(CPHT_ICEBERG, 64, CPHT_DEVICE_GPU, shards);
			run(CPHT_CUCKOO, 40, CPHT_DEVICE_GPU, shards);
			run_auto(CPHT_ICEBERG, CPHT_DEVICE_GPU, shards);
			run_auto(CPHT_CUCKOO, CPHT_DEVICE_GPU, shards);
			run_full(CPHT_ICEBERG, CPHT_DEVICE_GPU, shards, 1, 4000);
			run_full(CPHT_CUCKOO, CPHT_DEVICE_GPU, shards, 0, 4000);
			run_full(CPHT_ICEBERG, CPHT_DEVICE_GPU, shards, 0, 100000);
			run_full(CPHT_CUCKOO, CPHT_DEVICE_GPU, shards, 1, 100000);
			run_pipeline(CPHT_ICEBERG, CPHT_DEVICE_GPU, shards);
			run_pipeline(CPHT_CUCKOO, CPHT_DEVICE_GPU, shards);
		}
	}
	else
		printf("SKIP GPU part: %s\n", why);
	UNIT_DONE();
}
