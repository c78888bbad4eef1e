/*
 * table_image.c — a table's raw image, for saving it to a file and
 * restoring it: the parameters that define its layout, its counts, the
 * slot arrays of its levels as they lie in memory, and the cuckoo stash.
 * The slot arrays move between the table's memory and host memory through
 * the backend (a memcpy on the CPU, cudaMemcpy on the GPU), so a restore is
 * a copy into a freshly allocated table, never a re-insert of keys.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "table_layer.h"

static uint64_t
image_level_bytes(const cpht_table *t, int l)
{
	const layout_level *lv = &t->level[l];

	return lv->buckets * (uint64_t) lv->bucket_slots * (uint64_t) (lv->slot_bits / 8);
}

cpht_status
cpht_table_image_info(cpht_table *t, cpht_image_info *out)
{
	table_settle(t);
	memset(out, 0, sizeof(*out));
	if (t->log_len > 0)
		return table_fail(t, CPHT_ERR_INVALID,
						  "the table's undo log holds %llu entries: an image is taken between calls, with the log empty",
						  (unsigned long long) t->log_len);
	out->params = t->params;
	out->levels = t->levels;
	out->count = t->count;
	out->nstash = t->nstash;
	for (int l = 0; l < t->levels; l++)
		out->level_bytes[l] = image_level_bytes(t, l);
	out->grows = t->grows;
	out->widens = t->widens;
	out->initial_slots = t->initial_slots;
	return CPHT_OK;
}

cpht_status
cpht_table_image_read_level(cpht_table *t, int level, void *host)
{
	if (level < 0 || level >= t->levels)
		return table_fail(t, CPHT_ERR_INVALID, "the table has no level %d", level + 1);
	table_settle(t);
	return t->backend->copy_slots(t, level, host);
}

void
cpht_table_image_read_stash(cpht_table *t, uint64_t *keys)
{
	table_settle(t);
	if (t->nstash > 0)
		memcpy(keys, t->stash, t->nstash * sizeof(uint64_t));
}

static cpht_status
image_fail(char *errbuf, size_t errlen, cpht_status code, const char *what)
{
	if (errbuf != NULL && errlen > 0)
		snprintf(errbuf, errlen, "%s", what);
	return code;
}

cpht_status
cpht_table_from_image(const cpht_image_info *info, const void *const *levels,
					  const uint64_t *stash, cpht_table **out,
					  char *errbuf, size_t errlen)
{
	cpht_table *t;
	cpht_status rc;
	uint64_t	slots = 0;

	*out = NULL;
	rc = cpht_table_create(&info->params, &t, errbuf, errlen);
	if (rc != CPHT_OK)
		return rc;
	/* The layout the parameters give must be the one the image holds. */
	if (t->levels != info->levels)
	{
		cpht_table_destroy(t);
		return image_fail(errbuf, errlen, CPHT_ERR_INVALID,
						  "the image has another number of levels than its parameters give");
	}
	for (int l = 0; l < t->levels; l++)
	{
		if (image_level_bytes(t, l) != info->level_bytes[l] ||
			t->params.slot_bits[l] != info->params.slot_bits[l])
		{
			cpht_table_destroy(t);
			return image_fail(errbuf, errlen, CPHT_ERR_INVALID,
							  "the image's slot arrays do not match the layout of its parameters");
		}
		slots += t->params.slots[l];
	}
	for (uint64_t i = 1; i < info->nstash; i++)
	{
		if (stash[i - 1] >= stash[i])
		{
			cpht_table_destroy(t);
			return image_fail(errbuf, errlen, CPHT_ERR_INVALID, "the image's stash is not sorted");
		}
	}
	if (info->count > slots + info->nstash)
	{
		cpht_table_destroy(t);
		return image_fail(errbuf, errlen, CPHT_ERR_INVALID,
						  "the image counts more keys than it has slots");
	}
	for (int l = 0; l < t->levels; l++)
	{
		rc = t->backend->write_slots(t, l, levels[l]);
		if (rc != CPHT_OK)
		{
			image_fail(errbuf, errlen, rc, t->errmsg);
			cpht_table_destroy(t);
			return rc;
		}
	}
	if (info->nstash > 0)
	{
		rc = table_stash_add(t, stash, (size_t) info->nstash);
		if (rc != CPHT_OK)
		{
			image_fail(errbuf, errlen, rc, t->errmsg);
			cpht_table_destroy(t);
			return rc;
		}
	}
	t->count = info->count;
	t->grows = info->grows;
	t->widens = info->widens;
	t->initial_slots = info->initial_slots;
	*out = t;
	return CPHT_OK;
}
