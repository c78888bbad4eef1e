/*
 * test_widen.c — tables created without key_bits (auto_key_bits): on the
 * CPU and (where one is usable) on the GPU, for both kinds.
 *
 *  - every key pattern (sequential, strided, snowflake-style, random
 *    64-bit (half of them negative), negative, both signs mixed) streamed
 *    in overlapping batches into a small table: the answers of a plain set, key_bits the width of
 *    the widest key (of its fold once negative keys came), the slots the
 *    narrowest that hold it, and as many bytes as a table declared with
 *    that key_bits; keys wider than the table are absent to find and erase;
 *  - widening inside a transaction (deletes in the log, some keys deleted
 *    twice), rolled back to a savepoint and whole: exactly the keys before;
 *  - widening while the caller holds deletes read out of the log: undo
 *    puts them back;
 *  - the memory hook refusing the wider slots: CPHT_ERR_LIMIT, the table
 *    unchanged, then the call goes through;
 *  - a widening whose folded keys find no room in the same buckets (keys
 *    chosen to collide there): the table grows and widens again, answers
 *    exact; a table that keeps its size fails with CPHT_ERR_FULL, unchanged;
 *  - a GPU table widens like the CPU table fed the same batches: the same
 *    answers and layouts, and keeps its device state (streams, transfer
 *    buffers) across its growths and widenings.
 */
#include <string.h>

#include "cpht_table.h"
#include "table/layout.h"
#include "reference_set.h"
#include "table/device_ops.h"
#include "util/key_span.h"
#include "unit.h"
#include "unit_tables.h"

static cpht_stats
stats_of(cpht_table *t)
{
	cpht_stats	s;

	memset(&s, 0, sizeof(s));
	CHECK(cpht_table_stats(t, &s) == CPHT_OK, "stats: %s", cpht_table_error(t));
	return s;
}

enum
{
	SEQUENTIAL, STRIDED, SNOWFLAKE, RANDOM64, NEGATIVE, MIXED, PATTERNS
};

static const char *const pattern_names[PATTERNS] = {
	"sequential", "strided", "snowflake", "random 64-bit", "negative", "mixed signs"
};

/* Key i of a pattern; each pattern's keys are distinct for distinct i. */
static uint64_t
pattern_key(int pattern, uint64_t i)
{
	switch (pattern)
	{
		case SEQUENTIAL:
			return 1000 + i;
		case STRIDED:
			return i << 12;
		case SNOWFLAKE:
			/* 41-bit milliseconds since an epoch, 10-bit worker, 12-bit
			 * sequence: 4096 ids a millisecond from worker 37 */
			return ((uint64_t) (1700000000000ULL - 1288834974657ULL + i / 4096) << 22) |
				((uint64_t) 37 << 12) | (i % 4096);
		case RANDOM64:
			return layout_mix64(i + 1);
		case NEGATIVE:
			return (uint64_t) (-(int64_t) i - 1);
		default:
			return (i & 1) ? (uint64_t) (-(int64_t) (i / 2) - 1) : i / 2 * 3;
	}
}

/* The width an auto table must have for these keys. */
static int
width_of(const uint64_t *keys, size_t n, int folded)
{
	uint64_t	x = 0;

	for (size_t i = 0; i < n; i++)
		x |= folded ? layout_fold(keys[i]) : keys[i];
	return layout_width(x) < CPHT_AUTO_KEY_BITS_START ? CPHT_AUTO_KEY_BITS_START : layout_width(x);
}

/* Slots as narrow as key_bits allows, and the bytes of a declared table. */
static void
expect_narrowest(cpht_table *t, const char *what)
{
	cpht_stats	s = stats_of(t);
	cpht_params p = t->params;
	uint64_t	declared;

	for (int l = 0; l < t->levels; l++)
	{
		const layout_level *lv = &t->level[l];
		int			want = slot_width_for(s.key_bits, lv->buckets, lv->choices, lv->choice_bits);

		CHECK(s.slot_bits[l] == want, "%s: level %d has %d-bit slots for %d-bit keys, narrowest is %d",
			  what, l + 1, s.slot_bits[l], s.key_bits, want);
		p.slot_bits[l] = 0;
	}
	p.auto_key_bits = 0;
	p.signed_keys = 0;
	declared = cpht_params_table_bytes(&p);
	CHECK(declared == s.table_bytes, "%s: %llu bytes of slots, a table declared with key_bits %d has %llu",
		  what, (unsigned long long) s.table_bytes, s.key_bits, (unsigned long long) declared);
}

/*
 * Stream batches of a pattern (each half new, half from the batch before,
 * with repeats inside) into an auto table and compare with a plain set.
 */
static void
check_pattern(cpht_kind kind, cpht_device dev, int pattern, const char *what)
{
	const size_t batch = 20000;
	const int	rounds = 8;
	cpht_table *t = unit_table(kind, dev, 1000, 0, 42);
	uint64_t   *keys = malloc(batch * sizeof(uint64_t));
	uint64_t   *all = malloc((rounds + 1) * batch * sizeof(uint64_t));
	uint8_t    *out = malloc(batch);
	ref_set		ref,
				put_now;
	size_t		wrong = 0,
				nall = 0;
	uint64_t	rng = 11 + (uint64_t) pattern;
	cpht_stats	s;
	char		label[160];

	if (t == NULL)
		return;
	snprintf(label, sizeof(label), "%s %s", what, pattern_names[pattern]);
	s = stats_of(t);
	CHECK(s.auto_key_bits == 1 && s.key_bits == CPHT_AUTO_KEY_BITS_START && !s.signed_keys,
		  "%s: a new table starts at %d-bit keys (%d)", label, CPHT_AUTO_KEY_BITS_START, s.key_bits);
	CHECK(s.slot_bits[0] == 16, "%s: a new table starts with 16-bit slots (%d)", label, s.slot_bits[0]);
	ref_init(&ref, (rounds + 1) * batch);
	for (int r = 0; r < rounds; r++)
	{
		for (size_t i = 0; i < batch; i++)
		{
			uint64_t	idx = (uint64_t) r * batch / 2 + unit_rand(&rng) % batch;

			keys[i] = pattern_key(pattern, idx);
		}
		CHECK(cpht_table_find_or_put(t, keys, batch, out) == CPHT_OK, "%s: round %d: %s", label, r,
			  cpht_table_error(t));
		/*
		 * A key new to the table is PUT at exactly one of its occurrences
		 * in the batch, any one (the GPU iceberg's threads race for it);
		 * a key the table held is never PUT.
		 */
		ref_init(&put_now, batch);
		for (size_t i = 0; i < batch; i++)
			if (out[i] == CPHT_PUT)
				wrong += ref_has(&ref, keys[i]) || !ref_add(&put_now, keys[i]);
		for (size_t i = 0; i < batch; i++)
			if (ref_add(&ref, keys[i]))
			{
				wrong += !ref_has(&put_now, keys[i]);
				all[nall++] = keys[i];
			}
		ref_free(&put_now);
	}
	CHECK(wrong == 0, "%s: %zu answers differ from a plain set", label, wrong);
	CHECK(cpht_table_count(t) == ref.count, "%s: count %llu, expected %llu", label,
		  (unsigned long long) cpht_table_count(t), (unsigned long long) ref.count);
	s = stats_of(t);
	{
		int			negative = pattern == NEGATIVE || pattern == MIXED || pattern == RANDOM64;
		int			want = width_of(all, nall, negative);

		CHECK(s.signed_keys == negative, "%s: signed_keys %d", label, s.signed_keys);
		CHECK(s.key_bits == want, "%s: key_bits %d, the widest key has %d bits", label, s.key_bits, want);
		CHECK(s.widens >= 1, "%s: widened %llu times", label, (unsigned long long) s.widens);
	}
	expect_narrowest(t, label);

	/* Every stored key found; keys just past them, and far wider, absent. */
	{
		uint8_t    *found = malloc(nall + 1);
		uint64_t	absent[4];
		uint8_t		got[4];

		CHECK(cpht_table_find(t, all, nall, found) == CPHT_OK && memchr(found, 0, nall) == NULL,
			  "%s: every stored key found", label);
		absent[0] = pattern_key(pattern, (uint64_t) (rounds + 2) * batch);
		absent[1] = s.key_bits < 63 ? (uint64_t) 1 << 62 | 12345 : pattern_key(pattern, (uint64_t) (rounds + 3) * batch);
		absent[2] = s.signed_keys ? pattern_key(pattern, (uint64_t) (rounds + 4) * batch) : (uint64_t) -5;
		absent[3] = (uint64_t) INT64_MIN;
		CHECK(cpht_table_find(t, absent, 4, got) == CPHT_OK && memchr(got, 1, 4) == NULL,
			  "%s: absent keys (wider than the table too) not found: %d %d %d %d", label,
			  got[0], got[1], got[2], got[3]);
		CHECK(cpht_table_erase(t, absent, 4, got) == CPHT_OK && memchr(got, 1, 4) == NULL &&
			  cpht_table_count(t) == ref.count, "%s: absent keys not erased", label);
		CHECK(stats_of(t).key_bits == s.key_bits, "%s: find and erase do not widen", label);
		/* erase a third, then they are absent and the rest present */
		CHECK(cpht_table_erase(t, all, nall / 3, found) == CPHT_OK && memchr(found, 0, nall / 3) == NULL,
			  "%s: erase", label);
		CHECK(cpht_table_find(t, all, nall, found) == CPHT_OK, "%s: find after erase", label);
		wrong = 0;
		for (size_t i = 0; i < nall; i++)
			wrong += found[i] != (i >= nall / 3);
		CHECK(wrong == 0, "%s: %zu keys wrong after erasing a third", label, wrong);
		free(found);
	}
	ref_free(&ref);
	free(keys);
	free(all);
	free(out);
	cpht_table_destroy(t);
}

/* The table holds exactly keys[0, n) and none of keys[n, n + beyond). */
static void
expect_exactly(cpht_table *t, const uint64_t *keys, size_t n, size_t beyond, const char *what,
			   const char *after)
{
	uint8_t    *found = malloc(n + beyond);
	size_t		wrong = 0;

	CHECK(cpht_table_find(t, keys, n + beyond, found) == CPHT_OK, "%s: find after %s: %s", what, after,
		  cpht_table_error(t));
	for (size_t i = 0; i < n + beyond; i++)
		wrong += found[i] != (i < n);
	CHECK(wrong == 0, "%s: after %s: %zu keys wrong", what, after, wrong);
	CHECK(cpht_table_count(t) == n, "%s: after %s: count %llu, expected %zu", what, after,
		  (unsigned long long) cpht_table_count(t), n);
	free(found);
}

/*
 * Narrow keys, deletes in the log (keys 0..999 deleted, 0..299 back,
 * 0..99 deleted again), then keys that widen the table twice (wider, then
 * negative: the keys move both times), rolled back to the savepoint and
 * then whole.
 */
static void
check_transaction(cpht_kind kind, cpht_device dev, const char *what)
{
	const size_t base = 5000,
				more = 3000;
	cpht_table *t = unit_table(kind, dev, 1000, 0, 42);
	uint64_t   *keys = malloc((base + 2 * more) * sizeof(uint64_t));
	uint8_t    *out = malloc(base + 2 * more);
	uint64_t	mark;
	cpht_stats	s;
	size_t		wrong = 0,
				stashed;

	if (t == NULL)
		return;
	for (size_t i = 0; i < base; i++)
		keys[i] = i * 7;
	for (size_t i = 0; i < more; i++)
	{
		keys[base + i] = ((uint64_t) 1 << 40) + i;
		keys[base + more + i] = (uint64_t) -(int64_t) (i + 1) * 1000003;
	}
	CHECK(cpht_table_find_or_put(t, keys, base, out) == CPHT_OK, "%s: base", what);
	s = stats_of(t);
	CHECK(s.key_bits == width_of(keys, base, 0) && s.slot_bits[0] == 16, "%s: base keys %d bits, slots %d",
		  what, s.key_bits, s.slot_bits[0]);
	cpht_table_set_logging(t, 1);
	CHECK(cpht_table_erase(t, keys, 1000, out) == CPHT_OK, "%s: erase", what);
	CHECK(cpht_table_find_or_put(t, keys, 300, out) == CPHT_OK, "%s: reinsert", what);
	CHECK(cpht_table_erase(t, keys, 100, out) == CPHT_OK, "%s: erase again", what);
	mark = cpht_table_log_position(t);
	CHECK(cpht_table_find_or_put(t, keys + base, more, out) == CPHT_OK, "%s: wider keys: %s", what,
		  cpht_table_error(t));
	CHECK(cpht_table_find_or_put(t, keys + base + more, more, out) == CPHT_OK, "%s: negative keys: %s", what,
		  cpht_table_error(t));
	s = stats_of(t);
	CHECK(s.signed_keys && s.key_bits == width_of(keys + 100, base + 2 * more - 100, 1) && s.widens >= 2,
		  "%s: widened to signed %d-bit keys (%d, %llu widenings)", what, s.key_bits,
		  s.signed_keys, (unsigned long long) s.widens);
	/* Deleted keys go back into their tombstones, which the widenings
	 * moved: none to the stash (where a key whose logged place held no
	 * tombstone would end up; a rollback may take keys out of it). */
	stashed = t->nstash;
	CHECK(cpht_table_rollback_to(t, mark) == CPHT_OK, "%s: rollback to the savepoint: %s", what,
		  cpht_table_error(t));
	CHECK(t->nstash <= stashed, "%s: the rollback stashed keys (%zu, was %zu)", what, t->nstash, stashed);
	CHECK(cpht_table_find(t, keys, base + 2 * more, out) == CPHT_OK, "%s: find", what);
	for (size_t i = 0; i < base + 2 * more; i++)
		wrong += out[i] != ((i >= 100 && i < 300) || (i >= 1000 && i < base));
	CHECK(wrong == 0, "%s: after the rollback to the savepoint: %zu keys wrong", what, wrong);
	CHECK(stats_of(t).key_bits == s.key_bits, "%s: the rollback keeps the width", what);
	CHECK(cpht_table_rollback_to(t, 0) == CPHT_OK, "%s: rollback: %s", what, cpht_table_error(t));
	CHECK(t->nstash <= stashed, "%s: the whole rollback stashed keys (%zu, was %zu)", what, t->nstash,
		  stashed);
	expect_exactly(t, keys, base, 2 * more, what, "the rollback");
	cpht_table_set_logging(t, 0);
	free(keys);
	free(out);
	cpht_table_destroy(t);
}

/* Deletes the caller read out of the log and holds, across a widening. */
static void
check_held_deletes(cpht_kind kind, cpht_device dev, const char *what)
{
	const size_t base = 4000,
				gone = 500;
	cpht_table *t = unit_table(kind, dev, 1000, 0, 42);
	uint64_t   *keys = malloc((base + 1) * sizeof(uint64_t));
	uint64_t   *logged = malloc(gone * sizeof(uint64_t));
	uint8_t    *where = malloc(gone);
	uint8_t    *out = malloc(base + 1);
	uint64_t	pos,
				wide = (uint64_t) 1 << 50;
	size_t		stashed;

	if (t == NULL)
		return;
	for (size_t i = 0; i < base; i++)
		keys[i] = i;
	keys[base] = wide;
	CHECK(cpht_table_find_or_put(t, keys, base, out) == CPHT_OK, "%s: base", what);
	cpht_table_set_logging(t, 1);
	pos = cpht_table_log_position(t);
	CHECK(cpht_table_erase(t, keys, gone, out) == CPHT_OK, "%s: erase", what);
	CHECK(cpht_table_log_read(t, pos, gone, logged, where) == CPHT_OK, "%s: log read: %s", what,
		  cpht_table_error(t));
	cpht_table_hold_deletes(t, (int64_t) gone);
	cpht_table_truncate_log(t, pos);
	/* a wider key: the keys move, the held places are gone */
	CHECK(cpht_table_find_or_put(t, keys + base, 1, out) == CPHT_OK && out[0] == CPHT_PUT,
		  "%s: wide key: %s", what, cpht_table_error(t));
	CHECK(stats_of(t).key_bits == 51, "%s: widened to 51 bits (%d)", what, stats_of(t).key_bits);
	/* The held places name the old layout: the keys go back by a put,
	 * not into whatever those places are now, nor to the stash. */
	stashed = t->nstash;
	CHECK(cpht_table_undo(t, logged, where, gone) == CPHT_OK, "%s: undo: %s", what, cpht_table_error(t));
	CHECK(t->nstash <= stashed, "%s: the undo stashed keys (%zu, was %zu)", what, t->nstash, stashed);
	cpht_table_hold_deletes(t, -(int64_t) gone);
	expect_exactly(t, keys, base + 1, 0, what, "undoing held deletes across a widening");
	cpht_table_set_logging(t, 0);
	free(keys);
	free(logged);
	free(where);
	free(out);
	cpht_table_destroy(t);
}

static void
check_memory_hook(cpht_kind kind, cpht_device dev, const char *what)
{
	cpht_table *t;
	uint64_t	keys[2001];
	uint8_t		out[2001];
	cpht_stats	before,
				after;

	unit_hook_held = 0;
	unit_hook_limit = INT64_MAX;
	cpht_set_memory_hook(unit_memory_hook);
	t = unit_table(kind, dev, 5000, 0, 42);
	if (t == NULL)
		return;
	for (size_t i = 0; i < 2000; i++)
		keys[i] = i;
	keys[2000] = (uint64_t) 1 << 45;
	CHECK(cpht_table_find_or_put(t, keys, 2000, out) == CPHT_OK, "%s: narrow keys", what);
	before = stats_of(t);
	unit_hook_limit = unit_hook_held;
	CHECK(cpht_table_find_or_put(t, keys, 2001, out) == CPHT_ERR_LIMIT, "%s: refused widening: %s", what,
		  cpht_table_error(t));
	after = stats_of(t);
	CHECK(after.key_bits == before.key_bits && after.slot_bits[0] == before.slot_bits[0] &&
		  after.table_bytes == before.table_bytes, "%s: unchanged after a refused widening", what);
	expect_exactly(t, keys, 2000, 1, what, "a refused widening");
	unit_hook_limit = INT64_MAX;
	CHECK(cpht_table_find_or_put(t, keys, 2001, out) == CPHT_OK, "%s: widening allowed: %s", what,
		  cpht_table_error(t));
	CHECK(stats_of(t).slot_bits[0] > before.slot_bits[0], "%s: wider slots", what);
	expect_exactly(t, keys, 2001, 0, what, "an allowed widening");
	cpht_table_destroy(t);
	CHECK(unit_hook_held == 0, "%s: %lld bytes not given back", what, (long long) unit_hook_held);
	cpht_set_memory_hook(NULL);
}

/*
 * A widening that finds no room in the same buckets.  Keys chosen so that,
 * once folded, every one of their buckets (in find's order: the iceberg's
 * primary and both secondary choices, the cuckoo's three choices) lies in
 * the buckets of the first of them: one key more than those buckets hold,
 * so the folded layout with the same buckets has no room for them whatever
 * the insert order, while the unfolded layout spreads them.  A negative key
 * then makes the table fold: a table that may grow grows and widens again
 * (one growth, one widening counted, the answers exact); a table that keeps
 * its size fails with CPHT_ERR_FULL and stays as it was.
 */
static size_t
colliding_keys(const cpht_table *t, uint64_t *keys, size_t max)
{
	uint64_t	target[4];
	int			tlevel[4],
				ntarget = 0,
				norder = t->levels > 1 ? 1 + t->level[1].choices : t->level[0].choices;
	uint64_t	hold = 0;
	size_t		n = 0;

	for (uint64_t k = 1; n < max && k < ((uint64_t) 1 << 40); k++)
	{
		int			inside = 1;

		for (int o = 0; o < norder && inside; o++)
		{
			int			level,
						choice,
						known = 0;
			layout_level lv;
			uint64_t	a;

			layout_where_bucket(t->levels, o, &level, &choice);
			lv = t->level[level];
			lv.fold = 1;
			a = layout_address(layout_level_perm(&lv, 64, choice), k);
			for (int j = 0; j < ntarget; j++)
				known |= tlevel[j] == level && target[j] == a;
			if (n == 0 && !known)
			{
				tlevel[ntarget] = level;
				target[ntarget++] = a;
				hold += (uint64_t) lv.bucket_slots;
			}
			else if (!known)
				inside = 0;
		}
		if (inside)
		{
			keys[n++] = k;
			if (n == hold + 1)
				return n;
		}
	}
	return 0;
}

static void
check_widen_must_grow(cpht_kind kind, cpht_device dev, int fixed_size, const char *what)
{
	cpht_params p;
	cpht_table *t = NULL;
	char		err[256],
				label[160];
	uint64_t	keys[64];
	uint64_t	negative = (uint64_t) -7;
	uint8_t		out[64];
	size_t		n;
	cpht_stats	before,
				after;
	cpht_status rc;

	snprintf(label, sizeof(label), "%s, widening that finds no room%s", what,
			 fixed_size ? " in a table that keeps its size" : "");
	CHECK(cpht_params_for_capacity(kind, 1000, 0, &p, err, sizeof(err)) == CPHT_OK, "params: %s", err);
	p.device = dev;
	p.seed = 42;
	p.cpu_threads = 2;
	p.fixed_size = fixed_size;
	CHECK(cpht_table_create(&p, &t, err, sizeof(err)) == CPHT_OK, "create: %s", err);
	if (t == NULL)
		return;
	n = colliding_keys(t, keys, 63);
	CHECK(n > 0, "%s: no colliding keys found", label);
	if (n == 0)
	{
		cpht_table_destroy(t);
		return;
	}
	CHECK(cpht_table_find_or_put(t, keys, n, out) == CPHT_OK && memchr(out, CPHT_FOUND, n) == NULL,
		  "%s: the keys fit unfolded: %s", label, cpht_table_error(t));
	before = stats_of(t);
	CHECK(!before.signed_keys && before.grows == 0, "%s: unfolded, not grown", label);
	keys[n] = negative;
	rc = cpht_table_find_or_put(t, keys + n, 1, out);
	after = stats_of(t);
	if (fixed_size)
	{
		CHECK(rc == CPHT_ERR_FULL && strstr(cpht_table_error(t), "no slot in the wider layout") != NULL,
			  "%s: %d: %s", label, (int) rc, cpht_table_error(t));
		CHECK(!after.signed_keys && after.key_bits == before.key_bits && after.grows == 0 &&
			  after.widens == before.widens && after.slots[0] == before.slots[0] &&
			  after.slots[1] == before.slots[1] && after.slot_bits[0] == before.slot_bits[0] &&
			  after.table_bytes == before.table_bytes,
			  "%s: the layout changed: signed %d, %d-bit keys, %llu slots", label, after.signed_keys,
			  after.key_bits, (unsigned long long) after.slots[0]);
		expect_exactly(t, keys, n, 1, label, "the failed widening");
	}
	else
	{
		CHECK(rc == CPHT_OK && out[0] == CPHT_PUT, "%s: %d: %s", label, (int) rc, cpht_table_error(t));
		CHECK(after.signed_keys && after.grows == 1 && after.widens == before.widens + 1 &&
			  after.slots[0] > before.slots[0],
			  "%s: signed %d, grew %llu times, widened %llu times (was %llu), %llu slots (was %llu)", label,
			  after.signed_keys, (unsigned long long) after.grows, (unsigned long long) after.widens,
			  (unsigned long long) before.widens, (unsigned long long) after.slots[0],
			  (unsigned long long) before.slots[0]);
		expect_exactly(t, keys, n + 1, 0, label, "the widening that grew");
		CHECK(cpht_table_find_or_put(t, keys, n + 1, out) == CPHT_OK &&
			  memchr(out, CPHT_PUT, n + 1) == NULL, "%s: find-or-put again finds every key", label);
	}
	cpht_table_destroy(t);
}

/* A declared key_bits never widens (the caller rejects wider keys). */
static void
check_declared(cpht_kind kind, cpht_device dev, const char *what)
{
	cpht_table *t = unit_table(kind, dev, 1000, 20, 42);
	cpht_stats	s;

	if (t == NULL)
		return;
	s = stats_of(t);
	CHECK(!s.auto_key_bits && s.key_bits == 20, "%s: declared key_bits 20", what);
	CHECK(cpht_table_widen(t, 30, 0) == CPHT_ERR_INVALID, "%s: a declared width is not widened", what);
	cpht_table_destroy(t);
}

/*
 * A span handed over for a call (cpht_table_expect_span) is what that call
 * widens by, for that call's keys only; cpht_copy_keys_spanned's span is
 * the OR of the keys and of their folds, whatever the threads.
 */
static void
check_given_span(cpht_kind kind, cpht_device dev, const char *what)
{
	cpht_table *t = unit_table(kind, dev, 100000, 0, 42);
	const size_t n = 300001;
	uint64_t   *keys = malloc(n * sizeof(uint64_t)),
			   *copy = malloc(n * sizeof(uint64_t));
	uint8_t    *out = malloc(n);
	cpht_key_span wide = {(uint64_t) 1 << 44, layout_fold((uint64_t) 1 << 44)},
				span;
	uint64_t	plain = 0,
				folded = 0;
	int			bits;

	if (t == NULL)
		return;
	for (size_t i = 0; i < n; i++)
	{
		keys[i] = 1000 + i * 7;
		plain |= keys[i];
		folded |= layout_fold(keys[i]);
	}
	keys[n / 3] = (uint64_t) -12345;	/* one negative key, in the middle */
	plain = folded = 0;
	for (size_t i = 0; i < n; i++)
	{
		plain |= keys[i];
		folded |= layout_fold(keys[i]);
	}
	for (int threads = 1; threads <= 4; threads += 3)
	{
		memset(copy, 0, n * sizeof(uint64_t));
		cpht_copy_keys_spanned(copy, keys, n, threads, &span);
		CHECK(memcmp(copy, keys, n * sizeof(uint64_t)) == 0 && span.plain == plain &&
			  span.folded == folded, "%s: spanned copy on %d threads", what, threads);
	}
	cpht_copy_keys_spanned(copy, keys, 0, 4, &span);
	CHECK(span.plain == 0 && span.folded == 0, "%s: the span of no keys", what);
	/* the table's own pass (util/key_span.c) takes the same span */
	for (int threads = 0; threads <= 4; threads += 2)
	{
		util_key_span(keys, n, threads, &span);
		CHECK(span.plain == plain && span.folded == folded, "%s: span pass on %d threads", what, threads);
	}
	util_key_span(keys, 0, 4, &span);
	CHECK(span.plain == 0 && span.folded == 0, "%s: the span pass of no keys", what);

	/* small keys, handed a 45-bit span: the call widens to it */
	keys[n / 3] = 5;
	cpht_table_expect_span(t, keys, 1000, &wide);
	CHECK(cpht_table_find_or_put(t, keys, 1000, out) == CPHT_OK, "%s: call with a span", what);
	bits = stats_of(t).key_bits;
	CHECK(bits == 45, "%s: a handed span widens the call to 45 bits, not %d", what, bits);
	/* it was for that call only, and only for its keys */
	cpht_table_expect_span(t, keys + 1000, 1000, &wide);
	CHECK(cpht_table_find_or_put(t, keys, 1000, out) == CPHT_OK &&
		  cpht_table_find_or_put(t, keys + 1000, 1000, out) == CPHT_OK &&
		  memchr(out, CPHT_FOUND, 1000) == NULL, "%s: calls after", what);
	keys[1500] = (uint64_t) 1 << 50;
	CHECK(cpht_table_find_or_put(t, keys + 1000, 1000, out) == CPHT_OK && out[500] == CPHT_PUT &&
		  stats_of(t).key_bits == 51, "%s: the same keys again, one wider: the call reads them (%d bits)",
		  what, stats_of(t).key_bits);
	free(keys);
	free(copy);
	free(out);
	cpht_table_destroy(t);
}

/* The GPU widens like the CPU: same batches, same answers and layouts. */
static void
check_gpu_like_cpu(cpht_kind kind, const char *what)
{
	cpht_table *cpu = unit_table(kind, CPHT_DEVICE_CPU, 1000, 0, 42);
	cpht_table *gpu = unit_table(kind, CPHT_DEVICE_GPU, 1000, 0, 42);
	const size_t batch = 40000;
	uint64_t   *keys = malloc(batch * sizeof(uint64_t));
	uint8_t    *a = malloc(batch),
			   *b = malloc(batch);
	size_t		differ = 0;
	cpht_stats	sc,
				sg;
	void	   *state;

	if (cpu == NULL || gpu == NULL)
		return;
	state = gpu->device_state;
	for (int round = 0; round < PATTERNS; round++)
	{
		for (size_t i = 0; i < batch; i++)
			keys[i] = pattern_key(round, i * 3 % batch);
		CHECK(cpht_table_find_or_put(cpu, keys, batch, a) == CPHT_OK &&
			  cpht_table_find_or_put(gpu, keys, batch, b) == CPHT_OK, "%s: round %d", what, round);
		differ += memcmp(a, b, batch) != 0;
		sc = stats_of(cpu);
		sg = stats_of(gpu);
		CHECK(sc.key_bits == sg.key_bits && sc.signed_keys == sg.signed_keys &&
			  sc.slot_bits[0] == sg.slot_bits[0] && sc.slots[0] == sg.slots[0] && sc.count == sg.count,
			  "%s: round %d: cpu %d-bit keys in %d-bit slots, gpu %d in %d", what, round,
			  sc.key_bits, sc.slot_bits[0], sg.key_bits, sg.slot_bits[0]);
	}
	CHECK(differ == 0, "%s: %zu batches answered differently", what, differ);
	/* Growths and widenings keep the table's streams and buffers. */
	CHECK(gpu->device_state == state && stats_of(gpu).grows > 0 && stats_of(gpu).widens > 0,
		  "%s: the GPU state was made anew by a growth or widening", what);
	for (int round = 0; round < PATTERNS; round++)
	{
		for (size_t i = 0; i < batch; i++)
			keys[i] = pattern_key(round, i);
		CHECK(cpht_table_find(cpu, keys, batch, a) == CPHT_OK && cpht_table_find(gpu, keys, batch, b) == CPHT_OK &&
			  memcmp(a, b, batch) == 0 && memchr(b, 0, batch) == NULL, "%s: pattern %d all found on both",
			  what, round);
	}
	free(keys);
	free(a);
	free(b);
	cpht_table_destroy(cpu);
	cpht_table_destroy(gpu);
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
			for (int pattern = 0; pattern < PATTERNS; pattern++)
				check_pattern((cpht_kind) kind, (cpht_device) dev, pattern, what);
			check_transaction((cpht_kind) kind, (cpht_device) dev, what);
			check_held_deletes((cpht_kind) kind, (cpht_device) dev, what);
			check_memory_hook((cpht_kind) kind, (cpht_device) dev, what);
			check_widen_must_grow((cpht_kind) kind, (cpht_device) dev, 0, what);
			check_widen_must_grow((cpht_kind) kind, (cpht_device) dev, 1, what);
			check_declared((cpht_kind) kind, (cpht_device) dev, what);
			check_given_span((cpht_kind) kind, (cpht_device) dev, what);
			if (dev == 1)
				check_gpu_like_cpu((cpht_kind) kind, what);
		}
	UNIT_DONE();
}
