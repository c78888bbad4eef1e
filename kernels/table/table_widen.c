/*
 * table_widen.c — automatic key width: a table created without key_bits
 * (params.auto_key_bits) keeps key_bits at the width of the widest key it
 * was given so far, so its slots are as narrow as its keys allow, and
 * widens the first time a key needs more.
 *
 * A key's width is that of its pattern, or of its zigzag fold once the
 * table folds its keys (params.signed_keys): a table turns folding on at
 * its first negative key, since without it every negative key is 64 bits
 * wide.  A slot holds only a remainder (layout.h), so the slots of a level
 * with more buckets hold wider keys: the widest key the slots hold
 * (table_slot_key_bits) is often above key_bits.  Widening to a width the
 * slots hold changes key_bits alone; past it, or when folding turns on
 * (the permutation changes), the keys move into a layout with the same
 * buckets and wider slots (table_relayout, the machinery of a growth: on
 * the table's device, the undo log kept valid, the memory hook asked).
 * Growth resolves slot widths from key_bits, so a growing table narrows
 * its slots again as its addresses take more of the key.
 *
 * The width is the widest key ever stored: deleting the widest key leaves
 * it, since finding the next widest would mean reading every slot.
 */
#include "util/key_span.h"
#include "table/table_layer.h"

/*
 * OR of the keys and OR of their folds: the widths of the widest.  The
 * caller of this call may have handed them over (cpht_table_expect_span).
 */
static void
batch_span(const cpht_table *t, const uint64_t *keys, size_t n, uint64_t *plain, uint64_t *folded)
{
	cpht_key_span span;

	if (t->span_keys == keys && t->span_n == n)
		span = t->span;
	else
		util_key_span(keys, n, t->params.cpu_threads, &span);
	*plain = span.plain;
	*folded = span.folded;
}

void
cpht_table_expect_span(cpht_table *t, const uint64_t *keys, size_t n, const cpht_key_span *span)
{
	t->span_keys = keys;
	t->span_n = n;
	t->span = *span;
}

/* Every 64-bit key fits already: no pass over the batch. */
static int
widest(const cpht_table *t)
{
	return t->params.signed_keys && t->params.key_bits >= 64;
}

/* held is table_slot_key_bits(t), asked once per batch by the caller.
 * (A sharded table never asks: its shards follow their own keys' width,
 * each in its own calls.) */
int
table_key_fits(const cpht_table *t, uint64_t key, int held)
{
	return !t->params.auto_key_bits ||
		layout_shr(t->params.signed_keys ? layout_fold(key) : key, held) == 0;
}

int
table_keys_fit(const cpht_table *t, const uint64_t *keys, size_t n)
{
	uint64_t	plain,
				folded;

	if (!t->params.auto_key_bits || n == 0 || widest(t))
		return 1;
	batch_span(t, keys, n, &plain, &folded);
	return layout_width(t->params.signed_keys ? folded : plain) <= table_slot_key_bits(t);
}

static cpht_status
widen_to(cpht_table *t, int key_bits, int signed_keys)
{
	cpht_params np;

	if (key_bits < CPHT_AUTO_KEY_BITS_START)
		key_bits = CPHT_AUTO_KEY_BITS_START;
	signed_keys = signed_keys || t->params.signed_keys;
	if (key_bits <= t->params.key_bits && signed_keys == t->params.signed_keys)
		return CPHT_OK;
	/* The slots hold the wider keys already: nothing moves. */
	if (signed_keys == t->params.signed_keys && key_bits <= table_slot_key_bits(t))
	{
		t->params.key_bits = key_bits;
		t->widens++;
		t->last_widen_ms = 0;
		t->times.widens++;
		return CPHT_OK;
	}
	for (int tries = 0;; tries++)
	{
		cpht_status rc;

		np = t->params;
		np.key_bits = key_bits > np.key_bits ? key_bits : np.key_bits;
		np.signed_keys = signed_keys;
		for (int l = 0; l < t->levels; l++)
			np.slot_bits[l] = 0;
		rc = table_relayout(t, &np, 1);

		/*
		 * Folded keys, and the other permutation of a wider layout, put
		 * the keys in other buckets than before, where a well filled table
		 * may lack room for a few: a table that may grow grows (its keys
		 * as they are) and widens again.  A failed relayout or growth
		 * leaves the table as it was.
		 */
		if (rc != CPHT_ERR_FULL || t->params.fixed_size || tries == 3)
			return rc;
		rc = table_grow(t, 0);
		if (rc != CPHT_OK)
			return rc;
	}
}

cpht_status
table_widen_for(cpht_table *t, const uint64_t *keys, size_t n)
{
	uint64_t	plain,
				folded;
	int			bits;

	if (!t->params.auto_key_bits || n == 0 || widest(t))
		return CPHT_OK;
	batch_span(t, keys, n, &plain, &folded);
	if (t->params.signed_keys)
		bits = layout_width(folded);
	else if ((plain >> 63) != 0)
	{
		/*
		 * A first negative key: fold from now on.  A stored key of w bits
		 * folds to w + 1 bits.
		 */
		bits = layout_width(folded);
		if (bits < t->params.key_bits + 1)
			bits = t->params.key_bits + 1;
		return widen_to(t, bits, 1);
	}
	else
		bits = layout_width(plain);
	if (bits <= t->params.key_bits)
		return CPHT_OK;
	return widen_to(t, bits, t->params.signed_keys);
}

cpht_status
cpht_table_widen(cpht_table *t, int key_bits, int signed_keys)
{
	table_settle(t);
	if (!t->params.auto_key_bits)
		return table_fail(t, CPHT_ERR_INVALID, "the table was created with a fixed key width");
	if (key_bits < 8 || key_bits > 64)
		return table_fail(t, CPHT_ERR_INVALID, "key_bits must be between 8 and 64, not %d", key_bits);
	if (signed_keys && key_bits <= t->params.key_bits && !t->params.signed_keys)
		key_bits = t->params.key_bits + 1 > 64 ? 64 : t->params.key_bits + 1;
	return widen_to(t, key_bits, signed_keys);
}
