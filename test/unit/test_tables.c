/*
 * test_tables.c — both table kinds, over their geometries, against a plain
 * reference set: find-or-put, find, put, erase, the key count, the stats,
 * undoing a call that runs out of room, and the extreme key values.
 */
#include <string.h>

#include "cpht_table.h"
#include "table/device_ops.h"
#include "reference_set.h"
#include "unit.h"

typedef struct geometry
{
	cpht_kind	kind;
	int			key_bits;
	int			buckets[2];
	int			widths[2];
} geometry;

static cpht_table *
make_table(const geometry *g, uint64_t primary_slots, int threads, uint64_t seed)
{
	cpht_params p;
	cpht_table *t;
	char		err[256];

	memset(&p, 0, sizeof(p));
	p.kind = g->kind;
	p.key_bits = g->key_bits;
	p.seed = seed;
	p.cpu_threads = threads;
	p.fixed_size = 1;			/* these tables test one geometry each */
	p.slots[0] = primary_slots;
	p.bucket_slots[0] = g->buckets[0];
	p.slot_bits[0] = g->widths[0];
	if (g->kind == CPHT_ICEBERG)
	{
		p.slots[1] = primary_slots / 8;
		p.bucket_slots[1] = g->buckets[1];
		p.slot_bits[1] = g->widths[1];
	}
	if (cpht_table_create(&p, &t, err, sizeof(err)) != CPHT_OK)
	{
		fprintf(stderr, "create failed: %s\n", err);
		exit(2);
	}
	return t;
}

static uint64_t
draw_key(uint64_t *rng, int key_bits, uint64_t pool)
{
	/* Keys from a bounded pool so batches repeat keys and hit old ones. */
	uint64_t	k = unit_rand(rng) % pool;

	return layout_mix64(k * 2 + 1) & layout_mask(key_bits);
}

static void
check_against_reference(const geometry *g, int threads)
{
	const uint64_t primary = 1 << 16;
	cpht_table *t = make_table(g, primary, threads, 77);
	ref_set		ref;
	uint64_t	rng = 1234 + (uint64_t) g->kind;
	uint64_t	pool = primary / 4;
	size_t		n = 50000;
	uint64_t   *keys = malloc(n * sizeof(uint64_t));
	uint8_t    *out = malloc(n);
	int			bad_fop = 0,
				bad_find = 0,
				bad_erase = 0,
				bad_once = 0;
	cpht_stats	st;

	ref_init(&ref, pool);
	for (int round = 0; round < 8; round++)
	{
		ref_set		batch;

		/* find-or-put */
		ref_init(&batch, n);
		for (size_t i = 0; i < n; i++)
			keys[i] = draw_key(&rng, g->key_bits, pool);
		CHECK(cpht_table_find_or_put(t, keys, n, out) == CPHT_OK, "fop: %s", cpht_table_error(t));
		for (size_t i = 0; i < n; i++)
		{
			int			was_new = !ref_has(&ref, keys[i]);

			/* A new key is PUT at exactly one of its occurrences. */
			if (out[i] == CPHT_PUT)
				bad_once += !ref_add(&batch, keys[i]);
			bad_fop += out[i] == CPHT_PUT && !was_new;
			bad_fop += out[i] != CPHT_PUT && out[i] != CPHT_FOUND;
		}
		for (size_t i = 0; i < n; i++)
		{
			bad_fop += !ref_has(&ref, keys[i]) && !ref_has(&batch, keys[i]);
			ref_add(&ref, keys[i]);
		}
		ref_free(&batch);
		CHECK(cpht_table_count(t) == ref.count, "count %llu, reference %llu",
			  (unsigned long long) cpht_table_count(t), (unsigned long long) ref.count);

		/* find: half present, half from outside the pool */
		for (size_t i = 0; i < n; i++)
			keys[i] = i % 2 ? draw_key(&rng, g->key_bits, pool) : layout_mix64(unit_rand(&rng)) & layout_mask(g->key_bits);
		CHECK(cpht_table_find(t, keys, n, out) == CPHT_OK, "find");
		for (size_t i = 0; i < n; i++)
			bad_find += out[i] != ref_has(&ref, keys[i]);

		/* erase a few keys, some twice in the batch */
		for (size_t i = 0; i < 1000; i++)
			keys[i] = draw_key(&rng, g->key_bits, pool);
		CHECK(cpht_table_erase(t, keys, 1000, out) == CPHT_OK, "erase");
		for (size_t i = 0; i < 1000; i++)
		{
			if (out[i])
				bad_erase += !ref_del(&ref, keys[i]);
		}
		for (size_t i = 0; i < 1000; i++)
			bad_erase += ref_has(&ref, keys[i]);
		CHECK(cpht_table_count(t) == ref.count, "count after erase");
	}
	CHECK(bad_fop == 0, "%d wrong find-or-put answers", bad_fop);
	CHECK(bad_once == 0, "%d keys PUT twice in one batch", bad_once);
	CHECK(bad_find == 0, "%d wrong find answers", bad_find);
	CHECK(bad_erase == 0, "%d wrong erase answers", bad_erase);

	CHECK(cpht_table_stats(t, &st) == CPHT_OK, "stats");
	CHECK(st.live[0] + st.live[1] + st.stashed == ref.count, "live slots %llu+%llu+%llu, reference %llu",
		  (unsigned long long) st.live[0], (unsigned long long) st.live[1],
		  (unsigned long long) st.stashed, (unsigned long long) ref.count);
	CHECK(st.tombstones[0] + st.tombstones[1] > 0, "erase leaves tombstones");
	CHECK(st.table_bytes == cpht_params_table_bytes(&t->params), "bytes");

	/* Rebuilding drops the tombstones and keeps exactly the keys. */
	CHECK(cpht_table_rebuild(t) == CPHT_OK, "rebuild: %s", cpht_table_error(t));
	CHECK(cpht_table_stats(t, &st) == CPHT_OK, "stats");
	CHECK(st.tombstones[0] + st.tombstones[1] == 0 && st.stashed == 0, "no tombstones after rebuild");
	CHECK(st.live[0] + st.live[1] == ref.count && cpht_table_count(t) == ref.count, "rebuild keeps the count");
	{
		int			wrong = 0;

		for (size_t i = 0; i < n; i++)
			keys[i] = i % 2 ? draw_key(&rng, g->key_bits, pool) : unit_rand(&rng) & layout_mask(g->key_bits);
		CHECK(cpht_table_find(t, keys, n, out) == CPHT_OK, "find after rebuild");
		for (size_t i = 0; i < n; i++)
			wrong += out[i] != ref_has(&ref, keys[i]);
		CHECK(wrong == 0, "%d wrong answers after rebuild", wrong);
	}

	ref_free(&ref);
	free(keys);
	free(out);
	cpht_table_destroy(t);
}

/* A call that runs out of room leaves the table exactly as it was. */
static void
check_full_undo(const geometry *g)
{
	const uint64_t primary = 1 << 14;
	cpht_table *t = make_table(g, primary, 2, 5);
	uint64_t	rng = 99;
	size_t		n = 4 * primary;
	uint64_t   *keys = malloc(n * sizeof(uint64_t));
	uint8_t    *out = malloc(n);
	uint64_t	inserted = 0;
	size_t		prefill = primary / 2;
	void	   *snapshot[2] = {NULL, NULL};
	size_t		bytes[2] = {0, 0};
	int			lost = 0;

	/* Distinct keys: multiplying by an odd number is a bijection mod 2^w. */
	for (size_t i = 0; i < n; i++)
		keys[i] = ((uint64_t) i * 0x9e3779b97f4a7c15ULL + rng) & layout_mask(g->key_bits);
	CHECK(cpht_table_put(t, keys, prefill, &inserted) == CPHT_OK && inserted == prefill, "prefill");
	for (int l = 0; l < t->levels; l++)
	{
		bytes[l] = t->params.slots[l] * (size_t) (t->level[l].slot_bits / 8);
		snapshot[l] = malloc(bytes[l]);
		memcpy(snapshot[l], t->level[l].slots, bytes[l]);
	}

	CHECK(cpht_table_find_or_put(t, keys, n, out) == CPHT_ERR_FULL, "overfill reports FULL");
	CHECK(cpht_table_count(t) == prefill, "count unchanged after FULL");
	if (g->kind == CPHT_ICEBERG)
		for (int l = 0; l < t->levels; l++)
			CHECK(memcmp(snapshot[l], t->level[l].slots, bytes[l]) == 0, "level %d restored bit for bit", l + 1);
	CHECK(cpht_table_find(t, keys, n, out) == CPHT_OK, "find after FULL");
	for (size_t i = 0; i < n; i++)
		lost += out[i] != (i < prefill);
	CHECK(lost == 0, "%d keys wrong after undoing a FULL call", lost);

	for (int l = 0; l < t->levels; l++)
		free(snapshot[l]);
	free(keys);
	free(out);
	cpht_table_destroy(t);
}

/* Every 64-bit pattern is a key: 0, all ones, both signed extremes. */
static void
check_extreme_keys(cpht_kind kind)
{
	cpht_params p;
	cpht_table *t;
	char		err[256];
	uint64_t	keys[] = {0, ~(uint64_t) 0, (uint64_t) 1 << 63, ((uint64_t) 1 << 63) - 1, 1, 0, ~(uint64_t) 0};
	uint8_t		out[7];
	uint8_t		expect[7] = {1, 1, 1, 1, 1, 0, 0};

	CHECK(cpht_params_for_capacity(kind, 100, 64, &p, err, sizeof(err)) == CPHT_OK, "params");
	CHECK(cpht_table_create(&p, &t, err, sizeof(err)) == CPHT_OK, "create: %s", err);
	CHECK(cpht_table_find_or_put(t, keys, 7, out) == CPHT_OK, "fop");
	CHECK(memcmp(out, expect, 7) == 0, "extreme keys PUT once each");
	CHECK(cpht_table_find(t, keys, 7, out) == CPHT_OK && memchr(out, 0, 7) == NULL, "extreme keys found");
	CHECK(cpht_table_count(t) == 5, "five distinct extreme keys");
	cpht_table_destroy(t);
}

/* Narrow keys: a table for all 256 8-bit keys takes every one of them. */
static void
check_small_domain(cpht_kind kind)
{
	cpht_params p;
	cpht_table *t;
	char		err[256];
	uint64_t	keys[512];
	uint8_t		out[512];
	uint64_t	inserted;

	CHECK(cpht_params_for_capacity(kind, 1000, 8, &p, err, sizeof(err)) == CPHT_OK, "params 8-bit");
	CHECK(cpht_table_create(&p, &t, err, sizeof(err)) == CPHT_OK, "create 8-bit: %s", err);
	for (int i = 0; i < 512; i++)
		keys[i] = (uint64_t) (i * 37) % 256;
	CHECK(cpht_table_put(t, keys, 512, &inserted) == CPHT_OK && inserted == 256, "all 256 keys: %s",
		  cpht_table_error(t));
	CHECK(cpht_table_find(t, keys, 512, out) == CPHT_OK && memchr(out, 0, 512) == NULL, "all found");
	cpht_table_destroy(t);
}

/* Streams give the answers of the plain find-or-put, two streams may share
 * a table, and any other call waits for a running batch. */
static void
check_streams(cpht_kind kind)
{
	cpht_params p;
	cpht_table *a,
			   *b;
	char		err[256];
	size_t		n = 200000;
	uint64_t   *keys = malloc(n * sizeof(uint64_t));
	uint8_t    *expect = malloc(n);
	const uint8_t *status;
	size_t		got;
	uint64_t	inserted,
				total = 0,
				rng = 5;
	int			differ = 0;
	cpht_stream *s1,
			   *s2;

	cpht_params_for_capacity(kind, 2 * n, 64, &p, err, sizeof(err));
	CHECK(cpht_table_create(&p, &a, err, sizeof(err)) == CPHT_OK, "create");
	CHECK(cpht_table_create(&p, &b, err, sizeof(err)) == CPHT_OK, "create");
	s1 = cpht_stream_open(b);
	s2 = cpht_stream_open(b);
	for (int round = 0; round < 4; round++)
	{
		for (size_t i = 0; i < n; i++)
			keys[i] = unit_rand(&rng) % (n / 2);
		CHECK(cpht_table_find_or_put(a, keys, n, expect) == CPHT_OK, "sync fop");
		CHECK(cpht_stream_start(s1, keys, n) == CPHT_OK, "start");
		keys[0] ^= 1;			/* the started batch works on its own copy */
		CHECK(cpht_stream_finish(s1, &status, &got, &inserted) == CPHT_OK && got == n, "finish");
		if (kind == CPHT_CUCKOO)
			differ += memcmp(status, expect, n) != 0;
		total += inserted;
	}
	CHECK(differ == 0, "streamed and plain find-or-put differ");
	CHECK(total == cpht_table_count(b) && cpht_table_count(a) == cpht_table_count(b), "counts agree");

	/* Two streams interleaved on one table keep their own results. */
	for (size_t i = 0; i < n; i++)
		keys[i] = (uint64_t) i + 10 * n;
	CHECK(cpht_stream_start(s1, keys, n / 2) == CPHT_OK, "start 1");
	CHECK(cpht_stream_start(s2, keys + n / 2, n / 2) == CPHT_OK, "start 2");
	CHECK(cpht_stream_finish(s1, &status, &got, &inserted) == CPHT_OK && got == n / 2 && inserted == n / 2, "stream 1's own result");
	CHECK(cpht_stream_finish(s2, &status, &got, &inserted) == CPHT_OK && got == n / 2 && inserted == n / 2, "stream 2's own result");
	CHECK(cpht_stream_finish(s2, &status, &got, &inserted) == CPHT_OK && got == 0, "nothing pending");

	CHECK(cpht_stream_start(s1, keys, n) == CPHT_OK, "start");
	CHECK(cpht_table_count(b) == total + n, "count waits for the running batch");
	cpht_stream_close(s1);		/* closed with a result unread */
	cpht_table_destroy(b);
	CHECK(cpht_stream_start(s2, keys, n) == CPHT_ERR_INVALID, "a stream outlives its table only to fail");
	cpht_stream_close(s2);
	cpht_table_destroy(a);
	free(keys);
	free(expect);
}

static int	interrupt_after = 0;

static int
count_down_interrupt(void)
{
	return --interrupt_after <= 0;
}

/* An interrupt between chunks undoes the whole call. */
static void
check_interrupt(cpht_kind kind)
{
	cpht_params p;
	cpht_table *t;
	char		err[256];
	size_t		n = 5000000;
	uint64_t   *keys = malloc(n * sizeof(uint64_t));
	uint8_t    *out = malloc(n);
	uint64_t	inserted;
	cpht_stats	st;

	cpht_params_for_capacity(kind, n + 1000, 64, &p, err, sizeof(err));
	CHECK(cpht_table_create(&p, &t, err, sizeof(err)) == CPHT_OK, "create");
	for (size_t i = 0; i < n; i++)
		keys[i] = layout_mix64(i);
	CHECK(cpht_table_put(t, keys, 1000, &inserted) == CPHT_OK && inserted == 1000, "prefill");
	interrupt_after = 2;
	cpht_set_interrupt_check(count_down_interrupt);
	CHECK(cpht_table_find_or_put(t, keys, n, out) == CPHT_ERR_CANCELED, "canceled: %s", cpht_table_error(t));
	cpht_set_interrupt_check(NULL);
	CHECK(cpht_table_count(t) == 1000, "count back to 1000");
	cpht_table_stats(t, &st);
	CHECK(st.live[0] + st.live[1] == 1000, "1000 live slots after the canceled call");
	CHECK(cpht_table_find(t, keys, n, out) == CPHT_OK, "find");
	CHECK(memchr(out, 0, 1000) == NULL && memchr(out + 1000, 1, n - 1000) == NULL, "only the old keys");
	cpht_table_destroy(t);
	free(keys);
	free(out);
}

static void
check_params(void)
{
	cpht_params p;
	cpht_table *t;
	char		err[256];

	CHECK(cpht_params_for_capacity(CPHT_ICEBERG, 0, 64, &p, err, sizeof(err)) == CPHT_ERR_INVALID, "capacity 0");
	CHECK(cpht_params_for_capacity(CPHT_ICEBERG, 10, 65, &p, err, sizeof(err)) == CPHT_ERR_INVALID, "key_bits 65");
	CHECK(cpht_params_for_capacity(CPHT_ICEBERG, ~(uint64_t) 0, 64, &p, err, sizeof(err)) == CPHT_ERR_NOMEM, "huge");
	CHECK(cpht_params_for_capacity(CPHT_ICEBERG, 1000000, 64, &p, err, sizeof(err)) == CPHT_OK, "1M");
	CHECK((p.slots[0] + p.slots[1]) * 0.8 >= 1000000, "1M keys fit at fill 0.8");
	p.slot_bits[0] = 16;
	CHECK(cpht_table_create(&p, &t, err, sizeof(err)) == CPHT_ERR_INVALID, "16-bit slots cannot hold 64-bit keys");
	p.slot_bits[0] = 0;
	p.slots[0] += 8;
	CHECK(cpht_table_create(&p, &t, err, sizeof(err)) == CPHT_ERR_INVALID, "slots must be whole buckets");
	p.slots[0] = 7 * 16;
	CHECK(cpht_table_create(&p, &t, err, sizeof(err)) == CPHT_ERR_INVALID, "at least 8 buckets");
	p.slots[0] = 1000003 * 16;	/* no power of two: split by division */
	CHECK(cpht_table_create(&p, &t, err, sizeof(err)) == CPHT_OK, "any bucket count: %s", err);
	if (t)
		cpht_table_destroy(t);

	/*
	 * A table sized for a capacity is sized as one table: splitting it into
	 * shards, each with a share of the buckets and so longer remainders,
	 * takes at most a little more (each shard's rounding).  37-bit keys
	 * are where a larger, narrower layout would have taken less as one
	 * table and more as shards.
	 */
	{
		static const struct
		{
			cpht_kind	kind;
			uint64_t	capacity;
			int			key_bits;
		}			c[] = {{CPHT_ICEBERG, 20000000, 37}, {CPHT_CUCKOO, 100000000, 37}, {CPHT_ICEBERG, 200000000, 40}};

		for (int i = 0; i < 3; i++)
			for (int shards = 2; shards <= 4; shards++)
			{
				uint64_t	one,
							split;

				CHECK(cpht_params_for_capacity(c[i].kind, c[i].capacity, c[i].key_bits, &p, err, sizeof(err)) == CPHT_OK,
					  "params: %s", err);
				one = cpht_params_table_bytes(&p);
				p.shards = shards;
				split = cpht_params_table_bytes(&p);
				CHECK(split > 0 && (double) split <= 1.01 * (double) one,
					  "%llu %d-bit keys in %d shards take %llu bytes, in one table %llu",
					  (unsigned long long) c[i].capacity, c[i].key_bits, shards,
					  (unsigned long long) split, (unsigned long long) one);
			}
	}
}

int
main(void)
{
	geometry	geometries[] = {
		{CPHT_ICEBERG, 64, {16, 8}, {0, 0}},
		{CPHT_ICEBERG, 26, {8, 4}, {16, 32}},
		{CPHT_ICEBERG, 37, {16, 8}, {32, 32}},
		{CPHT_ICEBERG, 37, {32, 16}, {64, 64}},
		{CPHT_ICEBERG, 20, {32, 16}, {16, 16}},
		{CPHT_CUCKOO, 64, {16, 0}, {0, 0}},
		{CPHT_CUCKOO, 37, {8, 0}, {32, 0}},
		{CPHT_CUCKOO, 37, {32, 0}, {64, 0}},
		{CPHT_CUCKOO, 23, {16, 0}, {16, 0}},
	};

	check_params();
	for (size_t i = 0; i < sizeof(geometries) / sizeof(geometries[0]); i++)
	{
		fprintf(stderr, "# geometry %zu\n", i);
		check_against_reference(&geometries[i], 1);
		check_against_reference(&geometries[i], 4);
		check_full_undo(&geometries[i]);
	}
	check_extreme_keys(CPHT_ICEBERG);
	check_extreme_keys(CPHT_CUCKOO);
	check_small_domain(CPHT_ICEBERG);
	check_small_domain(CPHT_CUCKOO);
	check_streams(CPHT_ICEBERG);
	check_streams(CPHT_CUCKOO);
	check_interrupt(CPHT_ICEBERG);
	check_interrupt(CPHT_CUCKOO);
	UNIT_DONE();
}
