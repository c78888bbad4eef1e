/*
 * table_rebuild.c — cpht_table_rebuild: the table compacted in place, its
 * tombstones gone, keys moved up their buckets where room opened.
 *
 * Why it cannot run out of room: no key leaves the buckets it may occupy
 * and no bucket takes more keys than it has slots.  Every key starts in the
 * bucket it is in; dropping the tombstones only frees slots.  Then keys
 * move only to a bucket earlier in find's order that has a free slot, which
 * is where find-or-put would have put them.  What find needs afterwards:
 *  - iceberg: a key in a secondary bucket has a full primary bucket.  A
 *    primary bucket that lost tombstones takes the secondary keys that
 *    belong to it, until it is full or none are left.
 *  - cuckoo: a key at choice c has full buckets at choices 0..c-1.  Keys
 *    move to their earliest choice with a free slot, repeatedly, until none
 *    can move; each move lowers the sum of the keys' choices, so this ends,
 *    and when it has ended every key's earlier buckets are full.
 *  - both: a bucket's keys form a prefix (they are written from slot 0).
 * Stashed keys then go into the first of their buckets with a free slot
 * (again where find-or-put would put them); those that find none stay in
 * the stash.
 *
 * Inside a transaction the undo log may refer to tombstones of deleted
 * keys (table_put_back puts them back there).  Those tombstones are kept:
 * they take part as if their keys were present, end up as tombstones in
 * their key's new place, and the log is told that place.
 *
 * The work is done on a host copy; the table changes only when it is
 * written back, so a canceled or failing rebuild leaves it as it was.
 */
#include <stdlib.h>
#include <string.h>

#include "table/table_layer.h"

/* A key being placed: where it is, and what it is. */
typedef struct rb_item
{
	uint64_t	key;
	uint64_t	bucket;			/* in the level of `order` */
	int			order;			/* find's order (layout_where_bucket) */
	int			slot;			/* in the bucket, once written */
	int64_t		pending;		/* log_where index of a deleted key, or -1 */
} rb_item;

#define RB_CHECK_EVERY ((size_t) 1 << 18)	/* slots or keys between interrupt checks */
#define RB_TOUCH_BYTES ((size_t) 16 << 20)	/* copy bytes faulted in between checks */

static uint64_t
slot_at(const layout_level *lv, const void *slots, uint64_t i)
{
	return lv->slot_bits == 16 ? ((const uint16_t *) slots)[i]
		: lv->slot_bits == 32 ? ((const uint32_t *) slots)[i]
		: ((const uint64_t *) slots)[i];
}

static void
slot_put(const layout_level *lv, void *slots, uint64_t i, uint64_t v)
{
	if (lv->slot_bits == 16)
		((uint16_t *) slots)[i] = (uint16_t) v;
	else if (lv->slot_bits == 32)
		((uint32_t *) slots)[i] = (uint32_t) v;
	else
		((uint64_t *) slots)[i] = v;
}

static int
order_of(const cpht_table *t, int level, int choice)
{
	return t->levels > 1 && level == 1 ? 1 + choice : choice;
}

static uint64_t
bucket_of(const cpht_table *t, uint64_t key, int order)
{
	int			level,
				choice;
	const layout_level *lv;

	layout_where_bucket(t->levels, order, &level, &choice);
	lv = &t->level[level];
	return layout_address(layout_level_perm(lv, t->params.key_bits, choice), key);
}

static int
level_of(const cpht_table *t, int order)
{
	return t->levels > 1 && order > 0 ? 1 : 0;
}

static size_t
level_bytes(const cpht_table *t, int l)
{
	return (size_t) (t->params.slots[l] * (uint64_t) (t->level[l].slot_bits / 8));
}

/* Where add_pending appends. */
typedef struct rb_pending
{
	cpht_table *t;
	rb_item    *items;
	size_t	   *n;
} rb_pending;

static void
add_one_pending(void *arg, uint64_t key, uint8_t where, uint64_t where_at)
{
	rb_pending *p = arg;
	rb_item    *it = &p->items[(*p->n)++];

	it->key = key;
	it->order = CPHT_WHERE_ORDER(where);
	it->bucket = bucket_of(p->t, key, it->order);
	it->pending = (int64_t) where_at;
}

/* Add the pending deleted keys of the log (those in buckets) to items. */
static cpht_status
add_pending(cpht_table *t, rb_item *items, size_t *n)
{
	rb_pending	p = {t, items, n};

	return table_log_each_bucket_delete(t, add_one_pending, &p, "rebuilding the table");
}

/* The first of the key's buckets, in find's order, with a free slot
 * (iceberg: the primary, else the emptier secondary); -1 if none. */
static int
first_room(const cpht_table *t, uint64_t key, uint8_t *const *fill)
{
	if (t->levels == 1)
	{
		for (int c = 0; c < t->level[0].choices; c++)
			if (fill[0][bucket_of(t, key, c)] < t->level[0].bucket_slots)
				return c;
		return -1;
	}
	if (fill[0][bucket_of(t, key, 0)] < t->level[0].bucket_slots)
		return 0;
	{
		uint8_t		f1 = fill[1][bucket_of(t, key, 1)];
		uint8_t		f2 = fill[1][bucket_of(t, key, 2)];
		int			b = t->level[1].bucket_slots;

		if (f1 >= b && f2 >= b)
			return -1;
		return f1 < f2 ? 1 : 2;
	}
}

cpht_status
table_single_rebuild(cpht_table *t)
{
	void	   *copy[CPHT_MAX_LEVELS] = {NULL, NULL};
	uint8_t    *fill[CPHT_MAX_LEVELS] = {NULL, NULL};
	rb_item    *items = NULL;
	uint64_t   *left = NULL;
	size_t		n = 0,
				nleft = 0,
				most = (size_t) t->count + (size_t) t->log_nwhere + 1;
	int			moved;
	cpht_status rc = CPHT_OK;

	table_settle(t);
	/* Deleted keys held outside the log have places rebuild cannot update. */
	if (t->held_deletes > 0)
		return table_fail(t, CPHT_ERR_INVALID,
						  "the table cannot be rebuilt while %llu deleted keys wait to be put back or forgotten",
						  (unsigned long long) t->held_deletes);
	items = malloc(most * sizeof(rb_item));
	left = malloc((t->nstash + 1) * sizeof(uint64_t));
	for (int l = 0; l < t->levels; l++)
	{
		copy[l] = malloc(level_bytes(t, l));
		fill[l] = calloc((size_t) t->level[l].buckets, 1);
		if (copy[l] == NULL || fill[l] == NULL)
			rc = CPHT_ERR_NOMEM;
	}
	if (items == NULL || left == NULL || rc != CPHT_OK)
	{
		rc = table_fail(t, CPHT_ERR_NOMEM, "out of host memory for rebuilding a table of %llu keys",
						(unsigned long long) t->count);
		goto done;
	}

	/* The live keys, where they are. */
	for (int l = 0; rc == CPHT_OK && l < t->levels; l++)
	{
		const layout_level *lv = &t->level[l];
		uint64_t	nslots = lv->buckets * (uint64_t) lv->bucket_slots;

		/*
		 * Touch the fresh copy first, piece by piece with interrupt checks:
		 * faulting in a large table's pages takes hundreds of milliseconds,
		 * which inside copy_slots no cancel could cut short.
		 */
		for (size_t at = 0; rc == CPHT_OK && at < level_bytes(t, l); at += RB_TOUCH_BYTES)
		{
			size_t		len = level_bytes(t, l) - at < RB_TOUCH_BYTES ? level_bytes(t, l) - at : RB_TOUCH_BYTES;

			if (at > 0 && table_interrupted())
				rc = table_fail(t, CPHT_ERR_CANCELED, "the rebuild was canceled; the table is unchanged");
			else
				memset((char *) copy[l] + at, 0, len);
		}
		if (rc == CPHT_OK)
			rc = t->ops->copy_slots(t, l, copy[l]);
		if (rc == CPHT_ERR_CANCELED)
			table_fail(t, rc, "the rebuild was canceled; the table is unchanged");
		for (uint64_t i = 0; rc == CPHT_OK && i < nslots; i++)
		{
			uint64_t	s = slot_at(lv, copy[l], i);
			int			c;

			if (i % RB_CHECK_EVERY == RB_CHECK_EVERY - 1 && table_interrupted())
			{
				rc = table_fail(t, CPHT_ERR_CANCELED, "the rebuild was canceled; the table is unchanged");
				break;
			}
			if (!slot_is_live(s))
				continue;
			if (n + 1 >= most)
			{
				rc = table_fail(t, CPHT_ERR_INVALID, "the table holds more keys than it counts (%llu)",
								(unsigned long long) t->count);
				break;
			}
			c = slot_choice(s, lv->choice_bits);
			items[n].bucket = i / (uint64_t) lv->bucket_slots;
			items[n].key = layout_key(layout_level_perm(lv, t->params.key_bits, c),
									  items[n].bucket, slot_remainder(s, lv->choice_bits));
			items[n].order = order_of(t, l, c);
			items[n].pending = -1;
			n++;
		}
	}
	if (rc == CPHT_OK)
		rc = add_pending(t, items, &n);
	if (rc == CPHT_OK && table_interrupted())
		rc = table_fail(t, CPHT_ERR_CANCELED, "the rebuild was canceled; the table is unchanged");
	if (rc != CPHT_OK)
		goto done;
	for (size_t i = 0; i < n; i++)
	{
		if (i % RB_CHECK_EVERY == RB_CHECK_EVERY - 1 && table_interrupted())
		{
			rc = table_fail(t, CPHT_ERR_CANCELED, "the rebuild was canceled; the table is unchanged");
			goto done;
		}
		fill[level_of(t, items[i].order)][items[i].bucket]++;
	}

	/* Move keys up to earlier buckets with room until none can move. */
	do
	{
		moved = 0;
		for (size_t i = 0; i < n; i++)
		{
			rb_item    *it = &items[i];
			int			to;

			if (i % RB_CHECK_EVERY == RB_CHECK_EVERY - 1 && table_interrupted())
			{
				rc = table_fail(t, CPHT_ERR_CANCELED, "the rebuild was canceled; the table is unchanged");
				goto done;
			}
			if (it->order == 0)
				continue;
			if (t->levels > 1)
			{
				/* iceberg: only the primary bucket comes before */
				uint64_t	p = bucket_of(t, it->key, 0);

				if (fill[0][p] >= t->level[0].bucket_slots)
					continue;
				to = 0;
			}
			else
			{
				for (to = 0; to < it->order; to++)
					if (fill[0][bucket_of(t, it->key, to)] < t->level[0].bucket_slots)
						break;
				if (to == it->order)
					continue;
			}
			fill[level_of(t, it->order)][it->bucket]--;
			it->order = to;
			it->bucket = bucket_of(t, it->key, to);
			fill[level_of(t, to)][it->bucket]++;
			moved = 1;
		}
	} while (moved);

	/* Stashed keys into the first of their buckets with room. */
	for (size_t s = 0; s < t->nstash; s++)
	{
		int			to = first_room(t, t->stash[s], fill);

		if (to < 0)
		{
			left[nleft++] = t->stash[s];
			continue;
		}
		items[n].key = t->stash[s];
		items[n].order = to;
		items[n].bucket = bucket_of(t, t->stash[s], to);
		items[n].pending = -1;
		fill[level_of(t, to)][items[n].bucket]++;
		n++;
	}

	/* Write every key from slot 0 of its bucket on. */
	for (int l = 0; l < t->levels; l++)
	{
		memset(copy[l], 0, level_bytes(t, l));
		memset(fill[l], 0, (size_t) t->level[l].buckets);
	}
	for (size_t i = 0; i < n; i++)
	{
		rb_item    *it = &items[i];
		int			level,
					choice;
		const layout_level *lv;
		int			j;

		/* The table is untouched until write_slots below. */
		if (i % RB_CHECK_EVERY == RB_CHECK_EVERY - 1 && table_interrupted())
		{
			rc = table_fail(t, CPHT_ERR_CANCELED, "the rebuild was canceled; the table is unchanged");
			goto done;
		}
		layout_where_bucket(t->levels, it->order, &level, &choice);
		lv = &t->level[level];
		j = it->slot = fill[level][it->bucket]++;
		if (it->pending >= 0)
			slot_put(lv, copy[level], layout_bucket_start(lv, it->bucket) + (uint64_t) j, CPHT_SLOT_TOMBSTONE);
		else
			slot_put(lv, copy[level], layout_bucket_start(lv, it->bucket) + (uint64_t) j,
					 slot_encode(layout_remainder(layout_level_perm(lv, t->params.key_bits, choice), it->key),
								 choice, lv->choice_bits));
	}
	t->changes++;
	for (int l = 0; rc == CPHT_OK && l < t->levels; l++)
		rc = t->ops->write_slots(t, l, copy[l]);
	if (rc == CPHT_OK)
	{
		for (size_t i = 0; i < n; i++)
			if (items[i].pending >= 0)
				t->log_where[items[i].pending] = CPHT_WHERE(items[i].order, items[i].slot);
		memcpy(t->stash, left, nleft * sizeof(uint64_t));
		t->nstash = nleft;
		/* Keys moved: rolling back inserts can no longer just empty slots. */
		t->log_moved = t->log_len > 0;
	}

done:
	for (int l = 0; l < t->levels; l++)
	{
		free(copy[l]);
		free(fill[l]);
	}
	free(items);
	free(left);
	return rc;
}
