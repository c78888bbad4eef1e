/*
 * cpu_iceberg.c — the compact iceberg table on the CPU: find-or-put (the
 * lockless Alg. 1 of the paper), find, and erase by tombstone.
 *
 * Invariant that makes the lockless find-or-put correct: in every bucket the
 * non-empty slots form a prefix.  Inserts only ever fill the first empty
 * slot, and a deleted key leaves a tombstone, which is non-empty, so the
 * prefix never gets a hole.  When a thread tries to insert key k into slot
 * i, it has read slots 0..i-1 of that bucket as non-empty and not k; a
 * concurrent insert of k must then aim at the same slot i, and only one
 * compare-and-swap wins.
 */
#include "cpu/cpu_ops.h"
#include "cpu/cpu_slots.h"

/* A key's place in one bucket: where the bucket starts and its slot value. */
typedef struct bucket_ref
{
	uint64_t	start;
	uint64_t	want;
} bucket_ref;

static inline bucket_ref
bucket_of(const cpht_table *t, int level, int choice, uint64_t key)
{
	const layout_level *lv = &t->level[level];
	layout_perm p = layout_level_perm(lv, t->params.key_bits, choice);
	bucket_ref	b;

	b.start = layout_bucket_start(lv, layout_address(p, key));
	b.want = slot_encode(layout_remainder(p, key), choice, lv->choice_bits);
	return b;
}

/*
 * Scan a bucket up to its first empty slot.  Returns the index of the slot
 * holding `want`, or -1; *load is the index of the first empty slot (the
 * bucket's fill, since non-empty slots form a prefix).
 */
static inline int
bucket_scan(const layout_level *lv, bucket_ref b, int *load)
{
	for (int i = 0; i < lv->bucket_slots; i++)
	{
		uint64_t	s = cpu_slot_load(lv, b.start + i);

		if (s == b.want)
			return i;
		if (s == CPHT_SLOT_EMPTY)
		{
			*load = i;
			return -1;
		}
	}
	*load = lv->bucket_slots;
	return -1;
}

void
iceberg_prefetch(const cpht_table *t, uint64_t key)
{
	const layout_level *lv = &t->level[0];

	cpu_prefetch_bucket(lv, layout_address(layout_level_perm(lv, t->params.key_bits, 0), key));
}

uint8_t
iceberg_fop(const cpht_table *t, uint64_t key)
{
	const layout_level *l0 = &t->level[0];
	const layout_level *l1 = &t->level[1];
	bucket_ref	b = bucket_of(t, 0, 0, key);
	bucket_ref	sb[CPHT_ICEBERG_CHOICES];

	/* Level 1: the primary bucket, slot by slot. */
	for (int i = 0; i < l0->bucket_slots; i++)
	{
		uint64_t	s = cpu_slot_load(l0, b.start + i);

		/* Slots 0..i-1 are non-empty and not the key: try to take slot i. */
		while (s == CPHT_SLOT_EMPTY)
		{
			if (cpu_slot_cas(l0, b.start + i, &s, b.want))
				return CPHT_PUT;
			/* Lost the race: s is what the winner wrote; look at it. */
		}
		if (s == b.want)
			return CPHT_FOUND;
	}

	/* The primary bucket is full: level 2, two choices of secondary bucket. */
	for (int c = 0; c < CPHT_ICEBERG_CHOICES; c++)
		sb[c] = bucket_of(t, 1, c, key);

	for (;;)
	{
		int			load[CPHT_ICEBERG_CHOICES];
		int			c;
		uint64_t	expected = CPHT_SLOT_EMPTY;

		for (c = 0; c < CPHT_ICEBERG_CHOICES; c++)
			if (bucket_scan(l1, sb[c], &load[c]) >= 0)
				return CPHT_FOUND;

		/* Insert into the strictly less full bucket, the second on a tie. */
		c = load[0] < load[1] ? 0 : 1;
		if (load[c] == l1->bucket_slots)
			return CPHT_FULL;	/* both secondary buckets are full */
		if (cpu_slot_cas(l1, sb[c].start + load[c], &expected, sb[c].want))
			return CPHT_PUT;
		if (expected == sb[c].want)
			return CPHT_FOUND;	/* another thread inserted this very key */
		/* Another key took the slot: both loads may have changed, re-read. */
	}
}

int
iceberg_find(const cpht_table *t, uint64_t key)
{
	const layout_level *l0 = &t->level[0];
	const layout_level *l1 = &t->level[1];
	int			load = 0;

	if (bucket_scan(l0, bucket_of(t, 0, 0, key), &load) >= 0)
		return 1;
	/* A key goes to level 2 only when its primary bucket is full. */
	if (load < l0->bucket_slots)
		return 0;
	for (int c = 0; c < CPHT_ICEBERG_CHOICES; c++)
		if (bucket_scan(l1, bucket_of(t, 1, c, key), &load) >= 0)
			return 1;
	return 0;
}

/*
 * Replace the key's slot by `replacement` (a tombstone, or EMPTY when
 * undoing the latest call).  Returns where the key was (CPHT_WHERE) when
 * this call removed it, else 0.
 *
 * Undoing empties slots in no particular order, so a bucket may already
 * have a hole before the key's slot: then every slot of all three buckets
 * is searched instead of stopping at the first empty one.
 */
uint8_t
iceberg_erase(const cpht_table *t, uint64_t key, uint64_t replacement)
{
	int			undoing = replacement == CPHT_SLOT_EMPTY;

	for (int level = 0; level < t->levels; level++)
	{
		const layout_level *lv = &t->level[level];
		int			full = 1;

		for (int c = 0; c < lv->choices; c++)
		{
			bucket_ref	b = bucket_of(t, level, c, key);
			int			load = 0;
			int			i = -1;
			uint64_t	expected = b.want;

			if (undoing)
			{
				for (int j = 0; j < lv->bucket_slots && i < 0; j++)
					if (cpu_slot_load(lv, b.start + j) == b.want)
						i = j;
			}
			else
				i = bucket_scan(lv, b, &load);
			if (i >= 0)
				return cpu_slot_cas(lv, b.start + i, &expected, replacement)
					? CPHT_WHERE(level == 0 ? 0 : 1 + c, i) : 0;
			if (!undoing && load < lv->bucket_slots)
				full = 0;
		}
		/* Not in a primary bucket with room: it is in no secondary one. */
		if (!full)
			return 0;
	}
	return 0;
}
