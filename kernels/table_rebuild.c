/*
 * table_rebuild.c — cpht_table_rebuild: the table again from its live keys,
 * without tombstones or stash.
 */
#include <stdlib.h>
#include <string.h>

#include "table_layer.h"

/* Decode the live keys of one level's host copy into keys[]. */
static size_t
decode_level(const cpht_table *t, int l, const void *slots, uint64_t *keys)
{
	const layout_level *lv = &t->level[l];
	uint64_t	nslots = lv->buckets * (uint64_t) lv->bucket_slots;
	size_t		n = 0;

	for (uint64_t i = 0; i < nslots; i++)
	{
		uint64_t	s = lv->slot_bits == 16 ? ((const uint16_t *) slots)[i]
			: lv->slot_bits == 32 ? ((const uint32_t *) slots)[i]
			: ((const uint64_t *) slots)[i];

		if (slot_is_live(s))
		{
			layout_perm p = layout_level_perm(lv, t->params.key_bits, slot_choice(s, lv->choice_bits));

			keys[n++] = layout_key(p, i / (uint64_t) lv->bucket_slots, slot_remainder(s, lv->choice_bits));
		}
	}
	return n;
}

cpht_status
cpht_table_rebuild(cpht_table *t)
{
	cpht_table *fresh = NULL;
	uint64_t   *keys = NULL;
	void	   *copy = NULL;
	size_t		n = 0,
				biggest = 0;
	uint8_t    *status = NULL;
	char		err[sizeof(t->errmsg)];
	cpht_status rc;

	table_settle(t);
	for (int l = 0; l < t->levels; l++)
	{
		size_t		bytes = (size_t) (t->params.slots[l] * (uint64_t) (t->level[l].slot_bits / 8));

		biggest = bytes > biggest ? bytes : biggest;
	}
	keys = malloc((size_t) (t->count + 1) * sizeof(uint64_t));
	status = malloc((size_t) (t->count + 1));
	copy = malloc(biggest);
	if (!keys || !status || !copy)
	{
		rc = table_fail(t, CPHT_ERR_NOMEM, "out of host memory for rebuilding a table of %llu keys",
						(unsigned long long) t->count);
		goto done;
	}
	for (int l = 0; l < t->levels; l++)
	{
		rc = t->backend->copy_slots(t, l, copy);
		if (rc != CPHT_OK)
			goto done;
		n += decode_level(t, l, copy, keys + n);
	}
	memcpy(keys + n, t->stash, t->nstash * sizeof(uint64_t));
	n += t->nstash;

	rc = cpht_table_create(&t->params, &fresh, err, sizeof(err));
	if (rc != CPHT_OK)
	{
		table_fail(t, rc, "%s", err);
		goto done;
	}
	rc = table_find_or_put(fresh, keys, n, status);
	if (rc != CPHT_OK)
	{
		table_fail(t, rc, "%s", fresh->errmsg);
		goto done;
	}

	/* Swap the slot memory and the stash; the undo log stays with t. */
	for (int l = 0; l < t->levels; l++)
	{
		layout_level tmp = t->level[l];

		t->level[l] = fresh->level[l];
		fresh->level[l] = tmp;
	}
	{
		void	   *state = t->backend_state;
		uint64_t   *stash = t->stash;
		size_t		nstash = t->nstash;

		t->backend_state = fresh->backend_state;
		fresh->backend_state = state;
		t->stash = fresh->stash;
		t->nstash = fresh->nstash;
		fresh->stash = stash;
		fresh->nstash = nstash;
	}
	/* Keys moved: rolling back inserts can no longer just empty slots. */
	t->log_moved = t->log_len > 0;
	rc = CPHT_OK;

done:
	cpht_table_destroy(fresh);
	free(keys);
	free(status);
	free(copy);
	return rc;
}
