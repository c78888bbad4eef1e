/*
 * cpu_cuckoo.c — the compact bucketed cuckoo table on the CPU: put with a
 * bounded eviction chain (Alg. 4 of the paper), find with the early stop,
 * and erase by tombstone.
 *
 * Invariant behind the early stop: a key sits in bucket h_j only if buckets
 * h_0..h_{j-1} were full when it went there, and a full bucket stays full
 * (evictions swap slots, deletions leave tombstones).  So find may stop at
 * the first bucket with an EMPTY slot.  Put may reuse tombstones (filling
 * one keeps its bucket full), except while the undo log holds deleted keys
 * (t->keep_tombstones): a rollback puts each back into its own tombstone,
 * so then put takes EMPTY slots only and evicts live keys only.
 *
 * The cuckoo table is static in the paper's sense: put and find must not
 * run concurrently (an eviction briefly takes a key out of the table).
 * Concurrent puts are fine.
 */
#include "cpu/cpu_ops.h"
#include "cpu/cpu_slots.h"

static inline layout_perm
perm_of(const cpht_table *t, int choice)
{
	return layout_level_perm(&t->level[0], t->params.key_bits, choice);
}

void
cuckoo_prefetch(const cpht_table *t, uint64_t key)
{
	cpu_prefetch_bucket(&t->level[0], layout_address(perm_of(t, 0), key));
}

/* Slot index of the key in its choice-c bucket, -1 if absent; *open tells
 * whether the bucket has an EMPTY slot (then later choices are empty too). */
static inline int64_t
locate(const cpht_table *t, uint64_t key, int c, int *open)
{
	const layout_level *lv = &t->level[0];
	layout_perm p = perm_of(t, c);
	uint64_t	start = layout_bucket_start(lv, layout_address(p, key));
	uint64_t	want = slot_encode(layout_remainder(p, key), c, lv->choice_bits);

	*open = 0;
	for (int i = 0; i < lv->bucket_slots; i++)
	{
		uint64_t	s = cpu_slot_load(lv, start + i);

		if (s == want)
			return (int64_t) (start + i);
		if (s == CPHT_SLOT_EMPTY)
		{
			/* Slots fill in order, so the rest of the bucket is empty. */
			*open = 1;
			return -1;
		}
	}
	return -1;
}

int
cuckoo_find(const cpht_table *t, uint64_t key)
{
	for (int c = 0; c < t->level[0].choices; c++)
	{
		int			open;

		if (locate(t, key, c, &open) >= 0)
			return 1;
		if (open)
			return 0;
	}
	return 0;
}

uint8_t
cuckoo_erase(const cpht_table *t, uint64_t key)
{
	for (int c = 0; c < t->level[0].choices; c++)
	{
		int			open;
		int64_t		i = locate(t, key, c, &open);

		if (i >= 0)
		{
			uint64_t	expected = slot_encode(layout_remainder(perm_of(t, c), key), c,
											   t->level[0].choice_bits);

			return cpu_slot_cas(&t->level[0], (uint64_t) i, &expected, CPHT_SLOT_TOMBSTONE)
				? CPHT_WHERE(c, (int) ((uint64_t) i % (uint64_t) t->level[0].bucket_slots)) : 0;
		}
		if (open)
			return 0;
	}
	return 0;
}

int
cuckoo_put(const cpht_table *t, uint64_t key, uint64_t *homeless)
{
	const layout_level *lv = &t->level[0];
	int			keep = t->keep_tombstones;
	int			c = 0;

	for (int step = 0; step < t->params.max_evictions; step++)
	{
		layout_perm p = perm_of(t, c);
		uint64_t	address = layout_address(p, key);
		uint64_t	start = layout_bucket_start(lv, address);
		uint64_t	want = slot_encode(layout_remainder(p, key), c, lv->choice_bits);
		uint64_t	old;
		int			i;

		/* A free slot (empty, or tombstone unless kept)?  Take the first. */
		for (i = 0; i < lv->bucket_slots; i++)
		{
			uint64_t	s = cpu_slot_load(lv, start + i);

			if (s == CPHT_SLOT_EMPTY || (!keep && s == CPHT_SLOT_TOMBSTONE))
			{
				if (cpu_slot_cas(lv, start + i, &s, want))
					return 1;
				break;			/* lost it to another put: look again */
			}
		}
		if (i < lv->bucket_slots)
			continue;

		/*
		 * The bucket is full: evict a pseudo-random victim.  The choice
		 * depends on the key and the step, so a chain does not cycle
		 * between the same two slots.
		 */
		i = (int) (layout_mix64(key ^ ((uint64_t) step << 40) ^ lv->seeds[3]) % (uint64_t) lv->bucket_slots);
		if (keep)
		{
			/*
			 * Tombstones are kept: the victim is the first live slot from
			 * i on, cyclically (concurrent puts never turn a live slot
			 * into anything else).  A bucket of tombstones only: try the
			 * key's next choice.
			 */
			int			j = 0;

			while (j < lv->bucket_slots &&
				   !slot_is_live(cpu_slot_load(lv, start + (uint64_t) ((i + j) % lv->bucket_slots))))
				j++;
			if (j == lv->bucket_slots)
			{
				c = layout_next_choice(c, lv->choices);
				continue;
			}
			i = (i + j) % lv->bucket_slots;
		}
		old = cpu_slot_swap(lv, start + i, want);
		if (!slot_is_live(old))
			return 1;			/* the slot had just been freed: no victim */

		/* Continue with the evicted key at its next choice. */
		c = slot_choice(old, lv->choice_bits);
		key = layout_key(perm_of(t, c), address, slot_remainder(old, lv->choice_bits));
		c = layout_next_choice(c, lv->choices);
	}
	*homeless = key;
	return 0;
}
