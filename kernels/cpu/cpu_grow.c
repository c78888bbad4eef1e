/*
 * cpu_grow.c — growth on the CPU: every live key of a table moved into a
 * larger one (the move_keys entry of the device ops).
 *
 * Invariants: the old table is only read, so a failed or canceled move
 * leaves it as it was; the keys go into the new table as find-or-puts of
 * cpu_batches.c, and *full counts the keys that found no slot there.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_device.h"
#include "cpu/cpu_slots.h"

/*
 * Growth: every live key of `from` into `to`.  Slot ranges of MOVE_SLOTS are
 * decoded into keys over the threads (each thread its own part of the
 * range, written at the part's start and packed afterwards), then inserted
 * into `to` as one find-or-put.
 */
#define MOVE_SLOTS ((uint64_t) 1 << 20)
#define MOVE_PARTS 64

typedef struct move_job
{
	const cpht_table *from;
	const layout_level *lv;
	uint64_t	begin;			/* first slot of the range */
	uint64_t	len;
	uint64_t   *keys;			/* room for len keys */
	size_t		count[MOVE_PARTS];
} move_job;

static void
move_decode_parts(void *arg, size_t pbegin, size_t pend)
{
	move_job   *j = arg;
	const layout_level *lv = j->lv;
	uint64_t	per = (j->len + MOVE_PARTS - 1) / MOVE_PARTS;

	for (size_t p = pbegin; p < pend; p++)
	{
		uint64_t	lo = p * per,
					hi = lo + per < j->len ? lo + per : j->len;
		size_t		c = 0;

		for (uint64_t i = lo; i < hi; i++)
		{
			uint64_t	s = cpu_slot_load(lv, j->begin + i);
			int			ch;

			if (!slot_is_live(s))
				continue;
			ch = slot_choice(s, lv->choice_bits);
			j->keys[lo + c++] = layout_key(layout_level_perm(lv, j->from->params.key_bits, ch),
										   (j->begin + i) / (uint64_t) lv->bucket_slots,
										   slot_remainder(s, lv->choice_bits));
		}
		j->count[p] = lo < hi ? c : 0;
	}
}

cpht_status
cpu_move_keys(cpht_table *to, cpht_table *from, uint64_t *full)
{
	uint64_t   *keys = malloc(MOVE_SLOTS * sizeof(uint64_t));
	uint64_t   *homeless = malloc(MOVE_SLOTS * sizeof(uint64_t));
	uint8_t    *status = malloc(MOVE_SLOTS);
	move_job   *job = malloc(sizeof(move_job));
	cpht_status rc = CPHT_OK;

	*full = 0;
	if (!keys || !homeless || !status || !job)
		rc = table_fail(to, CPHT_ERR_NOMEM, "out of host memory for growing the table");
	for (int l = 0; rc == CPHT_OK && l < from->levels; l++)
	{
		const layout_level *lv = &from->level[l];
		uint64_t	nslots = lv->buckets * (uint64_t) lv->bucket_slots;

		for (uint64_t at = 0; rc == CPHT_OK && at < nslots && *full == 0; at += MOVE_SLOTS)
		{
			uint64_t	per;
			size_t		n = 0,
						nhomeless = 0;
			cpht_tally	tally = {0, 0};

			if (at > 0 && table_interrupted())
			{
				rc = table_fail(to, CPHT_ERR_CANCELED, "growing the table was canceled; the table is unchanged");
				break;
			}
			job->from = from;
			job->lv = lv;
			job->begin = at;
			job->len = nslots - at < MOVE_SLOTS ? nslots - at : MOVE_SLOTS;
			job->keys = keys;
			cpu_parallel_for_min(from->params.cpu_threads, MOVE_PARTS, 1, move_decode_parts, job);
			per = (job->len + MOVE_PARTS - 1) / MOVE_PARTS;
			for (size_t p = 0; p < MOVE_PARTS; p++)
			{
				memmove(keys + n, keys + p * per, job->count[p] * sizeof(uint64_t));
				n += job->count[p];
			}
			rc = cpu_find_or_put(to, keys, n, status, homeless, &nhomeless, &tally, CPHT_NO_LOG);
			if (rc == CPHT_OK)
				*full = tally.full + nhomeless;
		}
	}
	free(keys);
	free(homeless);
	free(status);
	free(job);
	return rc;
}
