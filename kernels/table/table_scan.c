/*
 * table_scan.c — reading a table's keys out a piece at a time (export):
 * cpht_table_scan_keys, cpht_table_scan_end, cpht_table_changes.
 *
 * A piece of slots is copied into the caller's key array itself (slots are
 * at most 8 bytes wide), widened to one slot per 8 bytes from the last
 * slot down (so no slot is overwritten before it is read), then decoded
 * and packed from the first up.  The caller's array is the only memory a
 * scan uses, on both devices.
 */
#include <string.h>

#include "table/table_layer.h"

static uint64_t
level_slots(const layout_level *lv)
{
	return lv->buckets * (uint64_t) lv->bucket_slots;
}

uint64_t
table_single_scan_end(cpht_table *t)
{
	uint64_t	end = t->nstash;

	table_settle(t);
	for (int l = 0; l < t->levels; l++)
		end += level_slots(&t->level[l]);
	return end;
}

uint64_t
table_single_changes(cpht_table *t)
{
	table_settle(t);
	return t->changes;
}

/* Slots [first, first + count) of level l, decoded; the live keys packed
 * at keys[0..), how many returned. */
static cpht_status
scan_level(cpht_table *t, int l, uint64_t first, uint64_t count, uint64_t *keys, size_t *n)
{
	const layout_level *lv = &t->level[l];
	cpht_status rc = t->ops->copy_slot_range(t, l, first, count, keys);
	size_t		out = 0;

	if (rc != CPHT_OK)
		return rc;
	/* widen in place, last slot first */
	for (uint64_t i = count; i-- > 0;)
		keys[i] = lv->slot_bits == 16 ? ((const uint16_t *) keys)[i]
			: lv->slot_bits == 32 ? ((const uint32_t *) keys)[i]
			: keys[i];
	for (uint64_t i = 0; i < count; i++)
	{
		uint64_t	s = keys[i];
		int			c;

		if (!slot_is_live(s))
			continue;
		c = slot_choice(s, lv->choice_bits);
		keys[out++] = layout_key(layout_level_perm(lv, t->params.key_bits, c),
								 (first + i) / (uint64_t) lv->bucket_slots,
								 slot_remainder(s, lv->choice_bits));
	}
	*n = out;
	return CPHT_OK;
}

cpht_status
table_single_scan_keys(cpht_table *t, uint64_t *position, uint64_t *keys, size_t max, size_t *n)
{
	uint64_t	at = *position;
	cpht_status rc = CPHT_OK;

	table_settle(t);
	*n = 0;
	for (int l = 0; l < t->levels; l++)
	{
		uint64_t	slots = level_slots(&t->level[l]);

		if (at < slots)
		{
			uint64_t	count = slots - at < (uint64_t) max ? slots - at : (uint64_t) max;

			rc = scan_level(t, l, at, count, keys, n);
			if (rc == CPHT_OK)
				*position += count;
			return rc;
		}
		at -= slots;
	}
	if (at < t->nstash)
	{
		uint64_t	count = t->nstash - at < (uint64_t) max ? t->nstash - at : (uint64_t) max;

		memcpy(keys, t->stash + at, (size_t) count * sizeof(uint64_t));
		*n = (size_t) count;
		*position += count;
	}
	return rc;
}
