/*
 * test_bytes_per_key.c — the slot memory of iceberg tables created without
 * key_bits, at the highest fill before each growth, on the CPU and (where
 * one is usable) on the GPU.
 *
 * Random keys of 27 bits streamed into a table created for 1000 keys: from
 * 2^11 + 1 primary buckets on, the largest remainder is at most 65533, so
 * the primary slots are 16 bits wide, and the secondary ones 32 (the widths
 * 37-bit keys take from 2^21 + 65 primary buckets on, about 34M keys, with
 * the same bytes per key at the same fill).  There, before
 * each growth, the table holds its keys in at most 2.5 bytes each, grows
 * only past its safe fill of 89 %, and has 16-slot secondary buckets an
 * eighth as many as its primary ones; every answer is that of a plain set.
 *
 * Each growth takes no more bytes than twice the buckets would at the same
 * key width, and one of them takes more than twice: the table of 576
 * primary buckets (32-bit slots) grows to the 2049 or more at which 16-bit
 * slots hold its keys, in fewer bytes than 1152 buckets of 32-bit slots.
 */
#include <string.h>

#include "cpht_table.h"
#include "table/layout.h"
#include "reference_set.h"
#include "unit.h"

static void
check_highest_fills(cpht_device dev, const char *what)
{
	const size_t total = 600000,
				batch = 256;
	cpht_params p;
	cpht_table *t = NULL;
	char		err[256];
	uint64_t   *keys = malloc(total * sizeof(uint64_t));
	uint8_t    *out = malloc(batch);
	cpht_stats	s,
				prev;
	ref_set		ref;
	size_t		wrong = 0;
	int			checked = 0,
				past_double = 0;
	double		worst = 0,
				lowest_fill = 1;

	CHECK(cpht_params_for_capacity(CPHT_ICEBERG, 1000, 0, &p, err, sizeof(err)) == CPHT_OK, "params: %s", err);
	p.device = dev;
	p.seed = 5;
	p.cpu_threads = 2;
	CHECK(cpht_table_create(&p, &t, err, sizeof(err)) == CPHT_OK, "%s: create: %s", what, err);
	if (t == NULL)
		return;
	/* distinct 27-bit keys: a bijection on them, applied to 1..total */
	for (size_t i = 0; i < total; i++)
	{
		uint64_t	x = (uint64_t) i + 1;

		for (int r = 0; r < 3; r++)
		{
			x = (x * 0x9e3779b97f4a7c15ULL) & layout_mask(27);
			x ^= x >> 13;
		}
		keys[i] = x;
	}
	ref_init(&ref, total);
	CHECK(cpht_table_stats(t, &prev) == CPHT_OK, "%s: stats", what);
	for (size_t at = 0; at < total; at += batch)
	{
		size_t		m = total - at < batch ? total - at : batch;

		CHECK(cpht_table_find_or_put(t, keys + at, m, out) == CPHT_OK, "%s: find-or-put: %s", what,
			  cpht_table_error(t));
		for (size_t i = 0; i < m; i++)
			wrong += (out[i] == CPHT_PUT) != ref_add(&ref, keys[at + i]);
		CHECK(cpht_table_stats(t, &s) == CPHT_OK, "%s: stats", what);
		if (s.grows != prev.grows && s.widens == prev.widens)
		{
			cpht_params twice = p;

			/* the same layout with twice the buckets, slot widths resolved */
			twice.key_bits = s.key_bits;
			for (int l = 0; l < 2; l++)
			{
				twice.slots[l] = 2 * prev.slots[l];
				twice.bucket_slots[l] = prev.bucket_slots[l];
				twice.slot_bits[l] = 0;
			}
			CHECK(s.table_bytes <= cpht_params_table_bytes(&twice),
				  "%s: grew from %llu to %llu primary slots in %llu bytes, twice the slots take %llu",
				  what, (unsigned long long) prev.slots[0], (unsigned long long) s.slots[0],
				  (unsigned long long) s.table_bytes, (unsigned long long) cpht_params_table_bytes(&twice));
			past_double += s.slots[0] > 2 * prev.slots[0];
		}
		if (s.grows != prev.grows && prev.slots[0] > 16 * 2048)
		{
			double		fill = (double) prev.count / (double) (prev.slots[0] + prev.slots[1]);
			double		bytes = (double) prev.table_bytes / (double) prev.count;

			CHECK(prev.slot_bits[0] == 16 && prev.bucket_slots[1] == 16 &&
				  prev.slots[1] * 8 == prev.slots[0],
				  "%s: %llu primary slots of %d bits, %llu secondary in buckets of %d", what,
				  (unsigned long long) prev.slots[0], prev.slot_bits[0],
				  (unsigned long long) prev.slots[1], prev.bucket_slots[1]);
			if (bytes > worst)
				worst = bytes;
			if (fill < lowest_fill)
				lowest_fill = fill;
			checked++;
		}
		prev = s;
	}
	CHECK(wrong == 0, "%s: %zu answers differ from a plain set", what, wrong);
	CHECK(checked >= 5, "%s: %d growths past 2^11 primary buckets", what, checked);
	CHECK(past_double >= 1, "%s: no growth took more than twice the buckets for narrower slots", what);
	CHECK(worst <= 2.5, "%s: %.3f bytes per key at a highest fill", what, worst);
	CHECK(lowest_fill > 0.89, "%s: grew at a fill of %.4f", what, lowest_fill);
	printf("# %s: %d growths checked, at most %.3f bytes per key, fills from %.4f\n", what, checked, worst,
		   lowest_fill);
	ref_free(&ref);
	free(keys);
	free(out);
	cpht_table_destroy(t);
}

int
main(void)
{
	char		why[256];
	int			gpu = cpht_gpu_usable(why, sizeof(why));

	check_highest_fills(CPHT_DEVICE_CPU, "CPU");
	if (gpu)
		check_highest_fills(CPHT_DEVICE_GPU, "GPU");
	else
		printf("# GPU part skipped: %s\n", why);
	UNIT_DONE();
}
