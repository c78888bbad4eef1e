/*
 * table_grow.c — growing a table into a larger layout (cpht_table_grow), and
 * when a find-or-put asks for it (table_past_safe_fill); and moving the
 * keys into a new layout (table_relayout), which growth and widening the
 * keys (table_widen.c: same buckets, wider slots) share.
 *
 * A growth builds a second table of the same kind on the same device with
 * twice as many buckets in every level (more where the caller asks for
 * room for more keys at the safe fill) (bucket counts need not be
 * powers of two: layout.h), moves the keys into it and takes over its
 * slots; the old slots are freed.  The new layout keeps the table's
 * device state (backend create_slots: a GPU table's streams and transfer
 * buffers).  At the peak both layouts are held: 3 times the old slots,
 * 1.5 times the new.  Doubling (rather than growing by half) moves each
 * key about once over a table's growth from small (the keys moved sum to
 * about the final count, not twice it) in 60 % as many growths, at the
 * price of a fill between 44 % and 89 % (iceberg; 42 % and 85 % while
 * its secondary buckets have 8 slots) after the first growth.
 * The keys move on the device where they
 * live (backend move_keys: the GPU decodes its slots into keys with a kernel
 * and inserts them with its own find-or-put kernels), so a GPU table's keys
 * never pass through the host.  Only the keys of logged deletes do: there
 * are as many as the transaction deleted, and they are in the log already.
 *
 * The undo log.  Inserted entries are keys: a rollback finds them in the new
 * layout like any key.  A deleted entry names the tombstone its key left
 * (log_where), where a rollback puts the key back; the new layout needs a
 * tombstone for each such entry, in one of its key's buckets, and the entry
 * must name it.  The key may be live again too (deleted, then inserted
 * again), and may have been deleted more than once, each time leaving its
 * own tombstone.  So the entries are placed first, in rounds that take one
 * entry of each key: the round's keys (distinct, absent from the new table)
 * are inserted and erased again, and erase reports the tombstone each left.
 * Then the live keys go in; while tombstones are kept (keep_tombstones) no
 * insert takes one.  Keys moved, so a later rollback of inserts leaves
 * tombstones (log_moved), as after a rebuild.
 *
 * Memory.  The new slots are asked of the memory hook before they are
 * allocated (CPHT_ERR_LIMIT, table unchanged, when it says no), and the old
 * slots given back once freed: the hook sees both at the peak, as the
 * process holds both.  The difference to the slots the table was created
 * with is given back when the table is destroyed (cpht_table_destroy).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "table/table_layer.h"

/* Buckets of a grown layout over those of the old one, at least. */
#define GROW_FACTOR 2.0

static uint64_t
total_slots(const cpht_table *t)
{
	uint64_t	s = 0;

	for (int l = 0; l < t->levels; l++)
		s += t->params.slots[l];
	return s;
}

static uint64_t
slot_bytes(const cpht_table *t)
{
	uint64_t	b = 0;

	for (int l = 0; l < t->levels; l++)
		b += t->params.slots[l] * (uint64_t) (t->level[l].slot_bits / 8);
	return b;
}

/*
 * Fill (keys in buckets over slots) past which a find-or-put grows the
 * table before it runs: the kind's grow_fill (kind_policy.c), a little
 * above its sizing target and below where keys start to find no slot, so
 * that growth is rarely a failed call done again.
 */
static double
safe_fill(const cpht_table *t)
{
	return t->kind_policy->grow_fill(t);
}

int
table_past_safe_fill(const cpht_table *t)
{
	return (double) (t->count - t->nstash) > safe_fill(t) * (double) total_slots(t);
}

/* A logged delete whose tombstone must move: its key and log_where index. */
typedef struct pending_entry
{
	uint64_t	key;
	uint64_t	where_at;
} pending_entry;

static int
cmp_pending(const void *a, const void *b)
{
	const pending_entry *x = a,
			   *y = b;

	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->where_at < y->where_at ? -1 : x->where_at > y->where_at;
}

/* Where collect_pending appends. */
typedef struct grow_pending
{
	pending_entry *items;
	size_t		n;
} grow_pending;

static void
collect_one_pending(void *arg, uint64_t key, uint8_t where, uint64_t where_at)
{
	grow_pending *p = arg;

	(void) where;
	p->items[p->n].key = key;
	p->items[p->n].where_at = where_at;
	p->n++;
}

/* The logged deletes whose keys left a tombstone in the buckets. */
static cpht_status
collect_pending(cpht_table *t, pending_entry **out, size_t *nout)
{
	grow_pending p;
	cpht_status rc;

	*out = NULL;
	*nout = 0;
	p.items = malloc((size_t) (t->log_nwhere + 1) * sizeof(pending_entry));
	p.n = 0;
	if (p.items == NULL)
		return table_fail(t, CPHT_ERR_NOMEM, "out of host memory for growing the table");
	rc = table_log_each_bucket_delete(t, collect_one_pending, &p, "growing the table");
	if (rc != CPHT_OK)
	{
		free(p.items);
		return rc;
	}
	*out = p.items;
	*nout = p.n;
	return CPHT_OK;
}

/*
 * Give every pending entry a tombstone in `nt` (empty so far) and its place
 * in where[] (by position in items, sorted by key): round r takes the r-th
 * entry of every key.
 */
static cpht_status
place_tombstones(cpht_table *t, cpht_table *nt, pending_entry *items, size_t n, uint8_t *where)
{
	uint64_t   *keys = malloc((n + 1) * sizeof(uint64_t));
	size_t	   *pos = malloc((n + 1) * sizeof(size_t));
	uint8_t    *status = malloc(n + 1);
	uint64_t   *homeless = malloc((n + 1) * sizeof(uint64_t));
	uint8_t    *placed = calloc(n + 1, 1);
	size_t		left = n;
	cpht_status rc = CPHT_OK;

	if (!keys || !pos || !status || !homeless || !placed)
		rc = table_fail(t, CPHT_ERR_NOMEM, "out of host memory for growing the table");
	while (rc == CPHT_OK && left > 0)
	{
		size_t		m = 0,
					nhomeless = 0;
		cpht_tally	tally = {0, 0};

		/* The first unplaced entry of each key (items are sorted by key). */
		for (size_t i = 0; i < n; i++)
			if (!placed[i] && (m == 0 || keys[m - 1] != items[i].key))
			{
				keys[m] = items[i].key;
				pos[m++] = i;
			}
		rc = nt->ops->find_or_put(nt, keys, m, status, homeless, &nhomeless, &tally, CPHT_NO_LOG);
		if (rc == CPHT_OK && (tally.full > 0 || nhomeless > 0 || tally.hits != m))
			rc = table_fail(t, CPHT_ERR_FULL, "the larger layout had no room for the tombstones of deleted keys");
		if (rc == CPHT_OK)
			rc = nt->ops->erase(nt, keys, m, status, 0, &tally, CPHT_NO_LOG);
		for (size_t j = 0; rc == CPHT_OK && j < m; j++)
		{
			if (!CPHT_IS_WHERE(status[j]) || status[j] == CPHT_WHERE_STASH)
			{
				rc = table_fail(t, CPHT_ERR_INVALID, "a deleted key's tombstone was not found after growing");
				break;
			}
			where[pos[j]] = status[j];
			placed[pos[j]] = 1;
			left--;
		}
		if (rc != CPHT_OK && nt->errmsg[0] && t->errmsg[0] == '\0')
			memcpy(t->errmsg, nt->errmsg, sizeof(t->errmsg));
	}
	free(keys);
	free(pos);
	free(status);
	free(homeless);
	free(placed);
	return rc;
}

static int64_t
wall_clock_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

cpht_status
table_grow(cpht_table *t, uint64_t min_keys)
{
	cpht_params np = t->params;
	cpht_table	probe;
	char		why[256];
	double		scale;

	/* Twice the buckets, or room for min_keys at the safe fill if more. */
	scale = (double) min_keys / (safe_fill(t) * (double) total_slots(t));
	if (scale < GROW_FACTOR)
		scale = GROW_FACTOR;
	for (int l = 0; l < t->levels; l++)
		np.slot_bits[l] = 0;	/* longer addresses may leave narrower remainders */

	/*
	 * `scale` times the buckets.  A table sized by cpht_params_for_capacity
	 * is sized again by the same rule (the kind's make_levels): an iceberg
	 * table that grows past ICEBERG_WIDE_FROM primary buckets gets 16-slot
	 * secondary buckets, and a level somewhat larger than `scale` times is
	 * taken where its slots are narrower and it takes fewer bytes
	 * (table_size_levels).
	 */
	if (t->kind_policy->made_levels(&t->params))
	{
		double		scaled = (double) t->level[0].buckets * scale;

		if (scaled > (double) ((uint64_t) 1 << 50))
			scaled = (double) ((uint64_t) 1 << 50);	/* refused below, as too large */
		table_size_levels(&np, scaled + t->kind_policy->grow_extra_buckets);
	}
	else
		for (int l = 0; l < t->levels; l++)
		{
			double		scaled = (double) t->level[l].buckets * scale;

			if (scaled > (double) ((uint64_t) 1 << 50))
				scaled = (double) ((uint64_t) 1 << 50);	/* refused below, as too large */
			np.slots[l] = ((uint64_t) scaled + 1) * (uint64_t) t->level[l].bucket_slots;
		}
	why[0] = '\0';
	memset(&probe, 0, sizeof(probe));
	probe.params = np;
	if (table_resolve_layout(&probe, why, sizeof(why)) != CPHT_OK)
		return table_fail(t, CPHT_ERR_FULL, "the table is full and cannot grow past %llu slots: %s",
						  (unsigned long long) total_slots(t), why);
	return table_relayout(t, &np, 0);
}

/*
 * Move t's keys into a new table with parameters np (slot widths 0 are
 * resolved here) and take over its slots.  widen: the change is to the
 * key width, counted as a widening, not a growth.
 */
cpht_status
table_relayout(cpht_table *t, const cpht_params *np, int widen)
{
	double		start = table_clock_ms();
	const char *what = widen ? "widening the table's keys" : "growing the table";
	cpht_table *nt = calloc(1, sizeof(cpht_table));
	cpht_table	old;
	pending_entry *items = NULL;
	uint8_t    *where = NULL;
	size_t		npending = 0;
	uint64_t	new_bytes,
				old_bytes = slot_bytes(t),
				full = 0;
	char		why[256];
	double		took;
	/* the new layout keeps the table's device state (backend create_slots) */
	int			shared_state = t->ops->create_slots != NULL;
	cpht_status rc;

	if (nt == NULL)
		return table_fail(t, CPHT_ERR_NOMEM, "out of host memory for %s", what);
	nt->params = *np;
	why[0] = '\0';
	if (table_resolve_layout(nt, why, sizeof(why)) != CPHT_OK)
	{
		free(nt);
		return table_fail(t, CPHT_ERR_INVALID, "no layout for %s: %s", what, why);
	}
	new_bytes = slot_bytes(nt);
	if (!table_memory_take(new_bytes))
	{
		free(nt);
		return table_fail(t, CPHT_ERR_LIMIT,
						  "%s from %llu to %llu bytes of slots would pass the memory limit (both are held while the keys move)",
						  what, (unsigned long long) old_bytes, (unsigned long long) new_bytes);
	}
	nt->ops = t->ops;
	nt->keep_tombstones = t->keep_tombstones;
	if (shared_state)
	{
		nt->device_state = t->device_state;
		rc = nt->ops->create_slots(nt);
	}
	else
		rc = nt->ops->create(nt);
	if (rc != CPHT_OK)
	{
		table_memory_give(new_bytes);
		memcpy(t->errmsg, nt->errmsg, sizeof(t->errmsg));
		free(nt);
		return rc;
	}

	t->errmsg[0] = '\0';
	if (t->logging && t->log_nwhere > 0)
	{
		rc = collect_pending(t, &items, &npending);
		if (rc == CPHT_OK && npending > 0)
		{
			qsort(items, npending, sizeof(pending_entry), cmp_pending);
			where = malloc(npending);
			rc = where ? place_tombstones(t, nt, items, npending, where)
				: table_fail(t, CPHT_ERR_NOMEM, "out of host memory for %s", what);
		}
	}
	if (rc == CPHT_OK)
	{
		rc = t->ops->move_keys(nt, t, &full);
		if (rc != CPHT_OK)
			memcpy(t->errmsg, nt->errmsg, sizeof(t->errmsg));
		else if (full > 0)
			rc = table_fail(t, CPHT_ERR_FULL, "%llu keys found no slot in the %s layout",
							(unsigned long long) full, widen ? "wider" : "larger");
	}
	if (rc != CPHT_OK)
	{
		if (shared_state)
			nt->ops->destroy_slots(nt);
		else
			nt->ops->destroy(nt);
		table_memory_give(new_bytes);
		free(nt);
		free(items);
		free(where);
		return rc;
	}

	/* Take over the new layout; free the old one. */
	memset(&old, 0, sizeof(old));
	old.params = t->params;
	old.kind_policy = t->kind_policy;
	old.levels = t->levels;
	memcpy(old.level, t->level, sizeof(old.level));
	old.ops = t->ops;
	old.device_state = t->device_state;
	t->params = nt->params;
	memcpy(t->level, nt->level, sizeof(t->level));
	t->device_state = nt->device_state;
	if (shared_state)
		old.ops->destroy_slots(&old);
	else
		old.ops->destroy(&old);
	table_memory_give(old_bytes);
	t->grown_bytes += (int64_t) new_bytes - (int64_t) old_bytes;
	for (size_t i = 0; i < npending; i++)
		t->log_where[items[i].where_at] = where[i];
	t->log_moved = t->log_len > 0;
	/* Places the caller read out of the log name the old layout. */
	if (t->held_deletes > 0)
		t->held_places_stale = 1;
	free(nt);
	free(items);
	free(where);

	took = table_clock_ms() - start;
	t->changes++;
	if (widen)
	{
		t->widens++;
		t->last_widen_ms = took;
		t->times.widen += took;
		t->times.widens++;
	}
	else
	{
		t->grows++;
		t->last_grow_ms = took;
		t->last_grow_at_us = wall_clock_us();
		t->times.grow += took;
		t->times.grows++;
	}
	return CPHT_OK;
}

cpht_status
table_single_grow(cpht_table *t)
{
	table_settle(t);
	return table_grow(t, 0);
}
