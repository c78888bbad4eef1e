/*
 * kind_policy.c — the rules of each table kind's layout (kind_policy.h):
 * the iceberg and cuckoo policies, with their levels, sizing targets,
 * growth fills and shard cuts.
 */
#include "table/kind_policy.h"
#include "table/device_ops.h"

/* Fill each kind reaches with margin on random keys (the sizing target). */
#define ICEBERG_TARGET_FILL 0.80
#define CUCKOO_TARGET_FILL 0.90

/*
 * Fill past which a find-or-put grows the table before it runs: a little
 * above the sizing targets (80 % and 90 %), below where keys start to find
 * no slot on random keys (iceberg with 8-slot secondary buckets 86-88 %,
 * with 16-slot ones 90 % (table_iceberg_levels), cuckoo near 95 %), so
 * that growth is rarely a failed call done again.
 */
#define ICEBERG_GROW_FILL 0.85
#define ICEBERG_WIDE_GROW_FILL 0.89
#define CUCKOO_GROW_FILL 0.92

/* ---- iceberg ---------------------------------------------------------------- */

/*
 * The levels of an iceberg table with about `primary` primary buckets:
 * 16-slot primary buckets and a secondary level an eighth of the primary
 * in slots, 18 slots per primary bucket.  From ICEBERG_WIDE_FROM primary
 * buckets on, the secondary buckets have 16 slots (an eighth as many
 * buckets as the primary level, whose number is then a multiple of 8):
 * random keys fill such a table to 0.900-0.904 before a key finds no slot,
 * against 0.864-0.875 with 8-slot secondary buckets (2^20 and 2^22
 * primary buckets), so it grows later (table_grow.c) and holds more keys
 * in the same slots.  (32-slot secondary buckets, a sixteenth as many,
 * fill to 0.915 but make a find of an absent key read twice as much of
 * each.)  Smaller tables
 * keep 8-slot secondary buckets, a quarter as many as the primary (a
 * multiple of 4 primary buckets, 32 at least): a level has 8 buckets at
 * least.
 */
void
table_iceberg_levels(cpht_params *p, double primary)
{
	uint64_t	b;

	p->bucket_slots[0] = 16;
	if (primary >= (double) ICEBERG_WIDE_FROM)
	{
		b = ((uint64_t) primary + 7) / 8 * 8;
		p->bucket_slots[1] = 16;
		p->slots[1] = 16 * (b / 8);
	}
	else
	{
		b = primary < 32 ? 32 : ((uint64_t) primary + 3) / 4 * 4;
		p->bucket_slots[1] = 8;
		p->slots[1] = 8 * (b / 4);
	}
	p->slots[0] = 16 * b;
}

/* Whether an iceberg table's levels are those table_iceberg_levels makes. */
static int
iceberg_made_levels(const cpht_params *p)
{
	uint64_t	b;

	if (p->bucket_slots[0] != 16)
		return 0;
	b = p->slots[0] / 16;
	if (p->bucket_slots[1] == 16)
		return b % 8 == 0 && p->slots[1] == 16 * (b / 8);
	return p->bucket_slots[1] == 8 && b % 4 == 0 && p->slots[1] == 8 * (b / 4);
}

static double
iceberg_grow_fill(const cpht_table *t)
{
	return t->level[1].bucket_slots >= 16 ? ICEBERG_WIDE_GROW_FILL : ICEBERG_GROW_FILL;
}

/* ---- cuckoo ----------------------------------------------------------------- */

/* One level of 16-slot buckets, 8 at least. */
static void
cuckoo_levels(cpht_params *p, double primary)
{
	p->bucket_slots[0] = 16;
	p->slots[0] = 16 * (primary < 8 ? 8 : (uint64_t) primary);
}

static int
cuckoo_made_levels(const cpht_params *p)
{
	return p->bucket_slots[0] == 16;
}

static double
cuckoo_grow_fill(const cpht_table *t)
{
	(void) t;
	return CUCKOO_GROW_FILL;
}

/* ---- the policies ----------------------------------------------------------- */

static const cpht_kind_policy policies[] = {
	[CPHT_ICEBERG] = {
		.kind = CPHT_ICEBERG,
		.levels = 2,
		.choices = {1, CPHT_ICEBERG_CHOICES},
		.slots_per_bucket = 18.0,
		.target_fill = ICEBERG_TARGET_FILL,
		.make_levels = table_iceberg_levels,
		.made_levels = iceberg_made_levels,
		.grow_extra_buckets = 0.0,
		.grow_fill = iceberg_grow_fill,
		/* a primary level of a multiple of 4 buckets, 32 at least */
		.shard_min_buckets = {32, 8},
		.shard_bucket_multiple = {4, 1},
		.undo_to_empty = 1,
		.evicts = 0,
	},
	[CPHT_CUCKOO] = {
		.kind = CPHT_CUCKOO,
		.levels = 1,
		.choices = {CPHT_CUCKOO_CHOICES},
		.slots_per_bucket = 16.0,
		.target_fill = CUCKOO_TARGET_FILL,
		.make_levels = cuckoo_levels,
		.made_levels = cuckoo_made_levels,
		.grow_extra_buckets = 1.0,
		.grow_fill = cuckoo_grow_fill,
		.shard_min_buckets = {8},
		.shard_bucket_multiple = {1},
		.undo_to_empty = 0,
		.evicts = 1,
	},
};

const cpht_kind_policy *
cpht_kind_policy_of(cpht_kind kind)
{
	if ((int) kind < 0 || (size_t) kind >= sizeof(policies) / sizeof(policies[0]))
		return NULL;
	return &policies[kind];
}
