/*
 * table_sizing.c — parameter checks and sizing of the table layer: the
 * parameters for a capacity, the levels that take the fewest bytes, the
 * level geometry resolved from a table's parameters (slot widths), and a
 * table's bytes.  What differs between the kinds is their policy's
 * (kind_policy.c).
 */
#include <string.h>
#include <unistd.h>

#include "table/table_layer.h"

#define MIN_BUCKETS 8			/* per level */
#define MAX_BUCKETS ((uint64_t) 1 << 48)

/* ceil(capacity / keys_per_bucket) buckets, as a double (no overflow). */
static double
buckets_for(uint64_t capacity, double keys_per_bucket)
{
	double		x = (double) capacity / keys_per_bucket;
	double		whole = (double) (uint64_t) x;

	return whole < x ? whole + 1 : whole;
}

static int
floor_log2(uint64_t x)
{
	int			b = 0;

	while (x >> (b + 1))
		b++;
	return b;
}

/* ---- sizing and validation ---------------------------------------------- */

/*
 * The levels for at least `primary` primary buckets (or cuckoo buckets)
 * that take the fewest bytes.  A slot holds a remainder, and a remainder is
 * shorter the more buckets there are, so a somewhat larger level may take
 * slots half as wide: 37-bit keys need 32-bit slots in 2^21 buckets and
 * 16-bit ones in 2^21 + 65 (layout.h).  Such a level holds more keys in
 * fewer bytes, and is taken instead wherever it is no larger.  With slot
 * widths to resolve only (slot_bits 0), as growth has them.
 */
void
table_size_levels(cpht_params *p, double primary)
{
	const cpht_kind_policy *pol = cpht_kind_policy_of(p->kind);
	int			choices = pol->choices[0];
	int			choice_bits = choices == 1 ? 0 : 2;
	uint64_t	bytes;

	pol->make_levels(p, primary);
	bytes = cpht_params_table_bytes(p);
	for (int w = 32; w >= 16 && bytes > 0; w /= 2)
	{
		uint64_t	fewest = slot_fewest_buckets(w, p->key_bits, choices, choice_bits);
		cpht_params q = *p;
		uint64_t	qbytes;

		if (fewest <= (uint64_t) primary || fewest > MAX_BUCKETS)
			continue;
		pol->make_levels(&q, (double) fewest);
		qbytes = cpht_params_table_bytes(&q);
		if (qbytes > 0 && qbytes <= bytes)
		{
			*p = q;
			bytes = qbytes;
		}
	}
}

cpht_status
cpht_params_for_capacity(cpht_kind kind, uint64_t capacity, int key_bits,
						 cpht_params *out, char *errbuf, size_t errlen)
{
	const cpht_kind_policy *pol = cpht_kind_policy_of(kind);
	int			auto_bits = key_bits == 0;

	memset(out, 0, sizeof(*out));
	if (pol == NULL)
		return table_param_fail(errbuf, errlen, CPHT_ERR_INVALID, "unknown table kind %d", (int) kind);
	/* Automatic: any key, so no bound on the capacity from the keys. */
	if (auto_bits)
		key_bits = 64;
	if (key_bits < 8 || key_bits > 64)
		return table_param_fail(errbuf, errlen, CPHT_ERR_INVALID, "key_bits must be between 8 and 64, not %d", key_bits);
	if (capacity == 0)
		return table_param_fail(errbuf, errlen, CPHT_ERR_INVALID, "capacity must be positive");
	/* No table needs room for more keys than the key domain has. */
	if (key_bits < 64 && capacity > ((uint64_t) 1 << key_bits))
		capacity = (uint64_t) 1 << key_bits;

	out->kind = kind;
	out->key_bits = key_bits;
	if (auto_bits)
	{
		out->auto_key_bits = 1;
		out->key_bits = CPHT_AUTO_KEY_BITS_START;
	}
	{
		double		want = buckets_for(capacity, pol->slots_per_bucket * pol->target_fill);

		if (want > (double) MAX_BUCKETS)
			return table_param_fail(errbuf, errlen, CPHT_ERR_NOMEM,
							  "capacity %llu is larger than any table cpht can allocate",
							  (unsigned long long) capacity);
		/*
		 * Sized for the capacity, without table_size_levels' larger,
		 * narrower layout: shards are set after this, and a shard, with a
		 * share of the buckets, would need the wider slots again, on more
		 * buckets.  Growth, a shard's too, takes that layout (table_grow).
		 */
		pol->make_levels(out, want);
	}
	return CPHT_OK;
}

/* Fill in the level geometry of t from t->params, resolving slot widths. */
cpht_status
table_resolve_layout(cpht_table *t, char *errbuf, size_t errlen)
{
	cpht_params *p = &t->params;
	const cpht_kind_policy *pol = cpht_kind_policy_of(p->kind);

	if (pol == NULL)
		return table_param_fail(errbuf, errlen, CPHT_ERR_INVALID, "unknown table kind %d", (int) p->kind);
	if (p->key_bits < 8 || p->key_bits > 64)
		return table_param_fail(errbuf, errlen, CPHT_ERR_INVALID, "key_bits must be between 8 and 64, not %d", p->key_bits);

	t->kind_policy = pol;
	t->levels = pol->levels;
	for (int l = 0; l < t->levels; l++)
	{
		layout_level *lv = &t->level[l];
		int			b = p->bucket_slots[l];
		int			floor_bits;

		if (b != 4 && b != 8 && b != 16 && b != 32)
			return table_param_fail(errbuf, errlen, CPHT_ERR_INVALID,
							  "bucket size of level %d must be 4, 8, 16 or 32 slots, not %d", l + 1, b);
		if (p->slots[l] % (uint64_t) b != 0)
			return table_param_fail(errbuf, errlen, CPHT_ERR_INVALID,
							  "slots of level %d must be a multiple of the bucket size", l + 1);
		lv->bucket_slots = b;
		lv->buckets = p->slots[l] / (uint64_t) b;
		if (lv->buckets < MIN_BUCKETS || lv->buckets > MAX_BUCKETS)
			return table_param_fail(errbuf, errlen, CPHT_ERR_INVALID,
							  "level %d must have between %d and 2^48 buckets, not %llu",
							  l + 1, MIN_BUCKETS, (unsigned long long) lv->buckets);
		/* (An automatic key width is no bound: wider keys may come.) */
		if (!p->auto_key_bits && p->key_bits < 64 && lv->buckets > ((uint64_t) 1 << p->key_bits))
			return table_param_fail(errbuf, errlen, CPHT_ERR_INVALID,
							  "level %d has more buckets than there are %d-bit keys", l + 1, p->key_bits);
		floor_bits = floor_log2(lv->buckets);
		/* A power of two splits by bits, other counts by division (layout.h). */
		if ((lv->buckets & (lv->buckets - 1)) == 0)
		{
			lv->addr_bits = floor_bits;
			lv->recip = 0;
		}
		else
		{
			lv->addr_bits = floor_bits + 1;
			lv->recip = UINT64_MAX / lv->buckets;
		}

		lv->choices = pol->choices[l];
		lv->choice_bits = lv->choices == 1 ? 0 : lv->choices == 2 ? 1 : 2;
		if (p->slot_bits[l] == 0)
			p->slot_bits[l] = slot_width_for(p->key_bits, lv->buckets, lv->choices, lv->choice_bits);
		if (p->slot_bits[l] != 16 && p->slot_bits[l] != 32 && p->slot_bits[l] != 64)
			return table_param_fail(errbuf, errlen, CPHT_ERR_INVALID,
							  "slot width of level %d must be 16, 32 or 64 bits, not %d", l + 1, p->slot_bits[l]);
		if (!slot_fits(p->slot_bits[l], p->key_bits, lv->buckets, lv->choices, lv->choice_bits))
			return table_param_fail(errbuf, errlen, CPHT_ERR_INVALID,
							  "slots of level %d hold keys of at most %d bits, not %d",
							  l + 1, slot_key_bits_held(p->slot_bits[l], lv->buckets, lv->choices, lv->choice_bits),
							  p->key_bits);
		lv->slot_bits = p->slot_bits[l];
		lv->fold = p->signed_keys != 0;
		for (int c = 0; c < 4; c++)
			lv->seeds[c] = layout_choice_seed(p->seed, l, c);
	}
	if (p->max_evictions <= 0)
		p->max_evictions = CPHT_DEFAULT_MAX_EVICTIONS;
	if (p->cpu_threads <= 0)
	{
		long		cores = sysconf(_SC_NPROCESSORS_ONLN);

		p->cpu_threads = cores < 1 ? 1 : cores > 16 ? 16 : (int) cores;
	}
	return CPHT_OK;
}

/*
 * The widest key (folded, with signed_keys) every level's slots hold
 * (slot_fits in layout.h: the largest remainder's code must fit).
 */
int
table_slot_key_bits(const cpht_table *t)
{
	int			bits = 64;

	for (int l = 0; l < t->levels; l++)
	{
		const layout_level *lv = &t->level[l];
		int			hold = slot_key_bits_held(lv->slot_bits, lv->buckets, lv->choices, lv->choice_bits);

		if (hold < bits)
			bits = hold;
	}
	return bits;
}

uint64_t
table_single_bytes(const cpht_params *params)
{
	cpht_table	t;
	uint64_t	bytes = 0;

	memset(&t, 0, sizeof(t));
	t.params = *params;
	if (table_resolve_layout(&t, NULL, 0) != CPHT_OK)
		return 0;
	for (int l = 0; l < t.levels; l++)
		bytes += t.params.slots[l] * (uint64_t) (t.level[l].slot_bits / 8);
	return bytes;
}
