/*
 * test_image.c — a table's image restores it exactly: the same layout
 * (after growth too), the same keys, the same count, tombstones and cuckoo
 * stash, whether restored whole or a piece at a time (as a snapshot file
 * is read), or read in version 1 of the slot encoding and converted (as a
 * version 1 snapshot file is); an image that does not fit its parameters is refused.  Runs on the
 * CPU, and on the GPU where one is usable (images taken on one device
 * restore on the other: the slot arrays are the same bytes).
 */
#include <string.h>

#include "cpht_table.h"
#include "table/layout.h"
#include "unit.h"
#include "unit_tables.h"

#define NKEYS 50000

/* t's image read into host arrays: its levels and its stash. */
static void
read_image(cpht_table *t, cpht_device to, cpht_image_info *info, void **levels, uint64_t **stash)
{
	CHECK(cpht_table_image_info(t, info) == CPHT_OK, "image info: %s", cpht_table_error(t));
	for (int l = 0; l < info->levels; l++)
	{
		levels[l] = malloc(info->level_bytes[l]);
		CHECK(cpht_table_image_read_level(t, l, levels[l]) == CPHT_OK, "read level %d", l);
	}
	*stash = malloc((info->nstash + 1) * sizeof(uint64_t));
	cpht_table_image_read_stash(t, *stash);
	info->params.device = to;
}

static void
free_image(const cpht_image_info *info, void **levels, uint64_t *stash)
{
	for (int l = 0; l < info->levels; l++)
		free(levels[l]);
	free(stash);
}

/* Slot i of a level, and its store. */
static uint64_t
slot_at(const void *slots, int bits, uint64_t i)
{
	return bits == 16 ? ((const uint16_t *) slots)[i] : bits == 32 ? ((const uint32_t *) slots)[i] : ((const uint64_t *) slots)[i];
}

static void
slot_set(void *slots, int bits, uint64_t i, uint64_t v)
{
	if (bits == 16)
		((uint16_t *) slots)[i] = (uint16_t) v;
	else if (bits == 32)
		((uint32_t *) slots)[i] = (uint32_t) v;
	else
		((uint64_t *) slots)[i] = v;
}

/*
 * A level's slots rewritten in version 1 of the slot encoding (EMPTY 0,
 * TOMBSTONE 2, a live slot (code << 1) | 1, code being what this encoding
 * keeps above its two state values), then converted back the way a
 * version 1 snapshot is read.  Returns how many slots the version 1 form
 * changed, so a caller knows the conversion had work to do.
 */
static uint64_t
through_v1(void *slots, uint64_t bytes, int bits)
{
	uint64_t	n = bytes / (uint64_t) (bits / 8),
				changed = 0;

	for (uint64_t i = 0; i < n; i++)
	{
		uint64_t	s = slot_at(slots, bits, i);
		uint64_t	v1 = s == CPHT_SLOT_EMPTY ? 0 : s == CPHT_SLOT_TOMBSTONE ? 2 : ((s - 2) << 1) | 1;

		/* (every slot of these tests' tables has a spare top bit) */
		CHECK(bits == 64 || v1 >> bits == 0, "slot %llu has no version 1 form in %d bits",
			  (unsigned long long) s, bits);
		changed += v1 != s;
		slot_set(slots, bits, i, v1);
	}
	cpht_image_slots_from_v1(slots, bytes, bits);
	return changed;
}

/* Image of t restored on device `to` (through version 1 of the slot
 * encoding when v1); NULL on failure. */
static cpht_table *
roundtrip(cpht_table *t, cpht_device to, cpht_image_info *info, int v1)
{
	void	   *levels[CPHT_MAX_LEVELS] = {NULL, NULL};
	uint64_t   *stash;
	cpht_table *r = NULL;
	char		err[256];
	cpht_status st;

	read_image(t, to, info, levels, &stash);
	if (v1)
	{
		uint64_t	changed = 0;

		for (int l = 0; l < info->levels; l++)
			changed += through_v1(levels[l], info->level_bytes[l], info->params.slot_bits[l]);
		CHECK(changed > 0, "version 1 slots differ from these");
	}
	st = cpht_table_from_image(info, (const void *const *) levels, stash, &r, err, sizeof(err));
	CHECK(st == CPHT_OK, "from image: %s", err);
	free_image(info, levels, stash);
	return r;
}

/*
 * Image of t restored on device `to` the way a snapshot file is read: each
 * level in pieces of an odd size (not a multiple of a slot), alternating
 * between two buffers, each piece's copy running while the next is filled.
 */
static cpht_table *
roundtrip_pieces(cpht_table *t, cpht_device to, cpht_image_info *info)
{
	const size_t piece = 4099;
	void	   *levels[CPHT_MAX_LEVELS] = {NULL, NULL};
	void	   *buf[2];
	uint64_t   *stash;
	cpht_table *r = NULL;
	char		err[256];
	int			cur = 0;
	uint64_t	pieces = 0;

	read_image(t, to, info, levels, &stash);
	CHECK(cpht_table_image_begin(info, &r, err, sizeof(err)) == CPHT_OK, "image begin: %s", err);
	if (r == NULL)
	{
		free_image(info, levels, stash);
		return NULL;
	}
	buf[0] = cpht_table_image_buffer(r, piece);
	buf[1] = cpht_table_image_buffer(r, piece);
	CHECK(buf[0] != NULL && buf[1] != NULL, "image buffers");
	for (int l = 0; l < info->levels; l++)
	{
		for (uint64_t at = 0; at < info->level_bytes[l]; at += piece)
		{
			uint64_t	n = info->level_bytes[l] - at < piece ? info->level_bytes[l] - at : piece;

			memcpy(buf[cur], (const char *) levels[l] + at, n);
			CHECK(cpht_table_image_wait(r) == CPHT_OK, "wait: %s", cpht_table_error(r));
			CHECK(cpht_table_image_write(r, l, at, buf[cur], n) == CPHT_OK, "write: %s", cpht_table_error(r));
			cur ^= 1;
			pieces++;
		}
	}
	CHECK(pieces > 2 * (uint64_t) info->levels, "the levels went in %llu pieces", (unsigned long long) pieces);
	/* a piece past a level's end is refused */
	CHECK(cpht_table_image_write(r, 0, info->level_bytes[0] - 8, buf[0], 16) == CPHT_ERR_INVALID,
		  "a piece past the end of level 1 is refused");
	CHECK(cpht_table_image_finish(r, info, stash, err, sizeof(err)) == CPHT_OK, "image finish: %s", err);
	cpht_table_image_buffer_free(r, buf[0]);
	cpht_table_image_buffer_free(r, buf[1]);
	free_image(info, levels, stash);
	return r;
}

static void
same_table(cpht_kind kind, cpht_device from, cpht_device to, int key_bits)
{
	const char *what = kind == CPHT_ICEBERG ? "iceberg" : "cuckoo";
	uint64_t   *keys = malloc(2 * NKEYS * sizeof(uint64_t));
	uint8_t    *a = malloc(2 * NKEYS),
			   *b = malloc(2 * NKEYS);
	uint64_t	state = 99,
				inserted = 0;
	/* small on purpose: the keys below make it grow several times */
	cpht_table *t = unit_table(kind, from, 1000, key_bits, 7);
	cpht_table *r;
	cpht_image_info info;
	cpht_stats	st,
				sr;
	int			mismatches = 0;

	for (int i = 0; i < 2 * NKEYS; i++)
		keys[i] = unit_rand(&state) & (key_bits == 64 ? ~(uint64_t) 0 : (((uint64_t) 1 << key_bits) - 1));
	CHECK(cpht_table_put(t, keys, NKEYS, &inserted) == CPHT_OK, "%s put: %s", what, cpht_table_error(t));
	/* tombstones: every third key deleted */
	for (int i = 0; i < NKEYS; i += 3)
		CHECK(cpht_table_erase(t, keys + i, 1, a) == CPHT_OK, "%s erase", what);
	CHECK(cpht_table_stats(t, &st) == CPHT_OK, "stats");
	CHECK(st.grows > 0, "%s: the table grew (%llu times)", what, (unsigned long long) st.grows);

	for (int way = 0; way < 3; way++)
	{
		r = way == 1 ? roundtrip_pieces(t, to, &info) : roundtrip(t, to, &info, way == 2);
		if (r == NULL)
			goto out;
		CHECK(cpht_table_stats(r, &sr) == CPHT_OK, "stats of the restored table");
		CHECK(sr.count == st.count, "%s count %llu vs %llu", what, (unsigned long long) sr.count, (unsigned long long) st.count);
		CHECK(sr.slots[0] == st.slots[0] && sr.slots[1] == st.slots[1], "%s: same slots", what);
		CHECK(sr.tombstones[0] == st.tombstones[0] && sr.tombstones[1] == st.tombstones[1], "%s: same tombstones", what);
		CHECK(sr.grows == st.grows && sr.initial_slots == st.initial_slots, "%s: same growth record", what);
		CHECK(sr.device == to, "%s: restored on the asked device", what);
		CHECK(cpht_table_find(t, keys, 2 * NKEYS, a) == CPHT_OK, "find original");
		CHECK(cpht_table_find(r, keys, 2 * NKEYS, b) == CPHT_OK, "find restored");
		for (int i = 0; i < 2 * NKEYS; i++)
			mismatches += a[i] != b[i];
		CHECK(mismatches == 0, "%s: %d keys answer differently", what, mismatches);
		/* the restored table keeps working: the second half goes in */
		CHECK(cpht_table_put(r, keys + NKEYS, NKEYS, &inserted) == CPHT_OK, "put into the restored table");
		cpht_table_destroy(r);
	}

	/* an image whose parameters give another layout is refused */
	{
		void	   *levels[CPHT_MAX_LEVELS] = {NULL, NULL};
		char		err[256];

		CHECK(cpht_table_image_info(t, &info) == CPHT_OK, "info");
		for (int l = 0; l < info.levels; l++)
			levels[l] = calloc(1, info.level_bytes[l]);
		info.level_bytes[0] += 8;
		r = NULL;
		CHECK(cpht_table_from_image(&info, (const void *const *) levels, NULL, &r, err, sizeof(err)) == CPHT_ERR_INVALID && r == NULL,
			  "%s: a mismatched image is refused", what);
		info.level_bytes[0] -= 8;
		info.count = info.params.slots[0] + info.params.slots[1] + 1;
		CHECK(cpht_table_from_image(&info, (const void *const *) levels, NULL, &r, err, sizeof(err)) == CPHT_ERR_INVALID && r == NULL,
			  "%s: an impossible count is refused", what);
		for (int l = 0; l < info.levels; l++)
			free(levels[l]);
	}
	/* no image while the undo log holds entries */
	cpht_table_set_logging(t, 1);
	CHECK(cpht_table_put(t, keys + NKEYS, 10, &inserted) == CPHT_OK, "logged put");
	CHECK(cpht_table_image_info(t, &info) == CPHT_ERR_INVALID, "%s: no image with a log", what);
out:
	cpht_table_destroy(t);
	free(keys);
	free(a);
	free(b);
}

int
main(void)
{
	char		why[256];
	int			gpu = cpht_gpu_usable(why, sizeof(why));

	same_table(CPHT_ICEBERG, CPHT_DEVICE_CPU, CPHT_DEVICE_CPU, 64);
	same_table(CPHT_CUCKOO, CPHT_DEVICE_CPU, CPHT_DEVICE_CPU, 64);
	same_table(CPHT_ICEBERG, CPHT_DEVICE_CPU, CPHT_DEVICE_CPU, 37);
	if (gpu)
	{
		same_table(CPHT_ICEBERG, CPHT_DEVICE_GPU, CPHT_DEVICE_GPU, 64);
		same_table(CPHT_CUCKOO, CPHT_DEVICE_GPU, CPHT_DEVICE_GPU, 37);
		same_table(CPHT_ICEBERG, CPHT_DEVICE_GPU, CPHT_DEVICE_CPU, 64);
		same_table(CPHT_CUCKOO, CPHT_DEVICE_CPU, CPHT_DEVICE_GPU, 64);
	}
	else
		printf("SKIP GPU images: %s\n", why);
	UNIT_DONE();
}
