/*
 * cpu_slot_copy.c — the CPU device's slots as a whole: copies of a level
 * to and from host memory (images, rebuild, widening), counting live slots
 * and tombstones, and reviving erased keys in the slots their erase
 * reported (the undo of a failed call).
 *
 * Invariants: the slot memory of a CPU table is host memory, so a write is
 * done when it returns (slot_writes_wait has nothing to wait for); a long
 * copy checks for interrupts between pieces.  Revive puts a key back only
 * where its tombstone still is (a compare-and-swap of cpu_slots.h).
 */
#include <string.h>

#include "cpu/cpu_device.h"
#include "cpu/cpu_slots.h"

cpht_status
cpu_scan(cpht_table *t, uint64_t *live, uint64_t *tombstones)
{
	for (int l = 0; l < t->levels; l++)
	{
		const layout_level *lv = &t->level[l];
		uint64_t	nslots = lv->buckets * (uint64_t) lv->bucket_slots;

		live[l] = tombstones[l] = 0;
		for (uint64_t i = 0; i < nslots; i++)
		{
			uint64_t	s = lv->slot_bits == 16 ? ((uint16_t *) lv->slots)[i]
				: lv->slot_bits == 32 ? ((uint32_t *) lv->slots)[i]
				: ((uint64_t *) lv->slots)[i];

			live[l] += slot_is_live(s);
			tombstones[l] += s == CPHT_SLOT_TOMBSTONE;
		}
	}
	return CPHT_OK;
}

/* Put a key back into the slot its erase reported (device_ops.h). */
static uint8_t
revive_at(const cpht_table *t, uint64_t key, uint8_t where)
{
	int			level,
				c;
	const layout_level *lv;
	layout_perm p;
	uint64_t	expected = CPHT_SLOT_TOMBSTONE;

	layout_where_bucket(t->levels, CPHT_WHERE_ORDER(where), &level, &c);
	lv = &t->level[level];
	if (c >= lv->choices || CPHT_WHERE_SLOT(where) >= lv->bucket_slots)
		return CPHT_FULL;
	p = layout_level_perm(lv, t->params.key_bits, c);
	return cpu_slot_cas(lv, layout_bucket_start(lv, layout_address(p, key)) + CPHT_WHERE_SLOT(where),
						&expected, slot_encode(layout_remainder(p, key), c, lv->choice_bits))
		? CPHT_PUT : CPHT_FULL;
}

typedef struct revive_job
{
	const cpht_table *t;
	const uint64_t *keys;
	const uint8_t *where;
	uint8_t    *status;
} revive_job;

static void
revive_range(void *arg, size_t begin, size_t end)
{
	revive_job *job = arg;

	for (size_t i = begin; i < end; i++)
		job->status[i] = revive_at(job->t, job->keys[i], job->where[i]);
}

cpht_status
cpu_revive(cpht_table *t, const uint64_t *keys, const uint8_t *where, size_t n, uint8_t *status)
{
	revive_job	job = {t, keys, where, status};

	cpu_parallel_for(t->params.cpu_threads, n, revive_range, &job);
	return CPHT_OK;
}

/* Bytes copied between interrupt checks: a level of a large table takes
 * a few hundred milliseconds to copy (a rebuild reads it). */
#define COPY_PIECE_BYTES ((size_t) 32 << 20)

cpht_status
cpu_copy_slots(cpht_table *t, int level, void *host)
{
	const layout_level *lv = &t->level[level];
	size_t		bytes = (size_t) layout_level_bytes(lv);

	for (size_t at = 0; at < bytes; at += COPY_PIECE_BYTES)
	{
		if (at > 0 && table_interrupted())
			return table_fail(t, CPHT_ERR_CANCELED, "canceled while copying the table");
		memcpy((char *) host + at, (const char *) lv->slots + at,
			   bytes - at < COPY_PIECE_BYTES ? bytes - at : COPY_PIECE_BYTES);
	}
	return CPHT_OK;
}

cpht_status
cpu_copy_slot_range(cpht_table *t, int level, uint64_t first, uint64_t count, void *host)
{
	const layout_level *lv = &t->level[level];
	size_t		width = (size_t) layout_slot_bytes(lv);

	memcpy(host, (const char *) lv->slots + (size_t) first * width, (size_t) count * width);
	return CPHT_OK;
}

cpht_status
cpu_write_slots(cpht_table *t, int level, const void *host)
{
	const layout_level *lv = &t->level[level];

	memcpy(lv->slots, host, (size_t) layout_level_bytes(lv));
	return CPHT_OK;
}

cpht_status
cpu_write_slot_bytes(cpht_table *t, int level, uint64_t offset, const void *host, uint64_t bytes)
{
	memcpy((char *) t->level[level].slots + offset, host, (size_t) bytes);
	return CPHT_OK;
}

/* cpu_write_slot_bytes is done when it returns */
cpht_status
cpu_slot_writes_wait(cpht_table *t)
{
	(void) t;
	return CPHT_OK;
}
