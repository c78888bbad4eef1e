/*
 * table_image.c — a table's raw image, for saving it to a file and
 * restoring it: the parameters that define its layout, its counts, the
 * slot arrays of its levels as they lie in memory, and the cuckoo stash.
 * The slot arrays move between the table's memory and host memory through
 * the backend (a memcpy on the CPU, cudaMemcpy on the GPU), so a restore is
 * a copy into a freshly allocated table, never a re-insert of keys; a
 * restore may write a level a piece at a time, each piece's copy running
 * while the caller reads the next (cpht_table_image_write).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "table/table_layer.h"

static uint64_t
image_level_bytes(const cpht_table *t, int l)
{
	return layout_level_bytes(&t->level[l]);
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
	return t->ops->copy_slots(t, level, host);
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

/* Creates the table of an image and checks that its parameters give
 * exactly the image's layout. */
cpht_status
cpht_table_image_begin(const cpht_image_info *info, cpht_table **out,
					   char *errbuf, size_t errlen)
{
	cpht_table *t;
	cpht_status rc;
	uint64_t	slots = 0;

	*out = NULL;
	rc = cpht_table_create(&info->params, &t, errbuf, errlen);
	if (rc != CPHT_OK)
		return rc;
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
	if (info->count > slots + info->nstash)
	{
		cpht_table_destroy(t);
		return image_fail(errbuf, errlen, CPHT_ERR_INVALID,
						  "the image counts more keys than it has slots");
	}
	*out = t;
	return CPHT_OK;
}

void *
cpht_table_image_buffer(cpht_table *t, size_t bytes)
{
	if (t->ops->pinned != NULL)
		return t->ops->pinned->alloc(bytes);
	return malloc(bytes);
}

void
cpht_table_image_buffer_free(cpht_table *t, void *p)
{
	if (t->ops->pinned != NULL)
		t->ops->pinned->free(p);
	else
		free(p);
}

cpht_status
cpht_table_image_write(cpht_table *t, int level, uint64_t offset,
					   const void *host, uint64_t bytes)
{
	if (level < 0 || level >= t->levels || offset > image_level_bytes(t, level) ||
		bytes > image_level_bytes(t, level) - offset)
		return table_fail(t, CPHT_ERR_INVALID, "bytes [%llu, %llu) are outside level %d's slots",
						  (unsigned long long) offset, (unsigned long long) (offset + bytes), level + 1);
	return t->ops->write_slot_bytes(t, level, offset, host, bytes);
}

cpht_status
cpht_table_image_wait(cpht_table *t)
{
	return t->ops->slot_writes_wait(t);
}

cpht_status
cpht_table_image_finish(cpht_table *t, const cpht_image_info *info,
						const uint64_t *stash, char *errbuf, size_t errlen)
{
	cpht_status rc = cpht_table_image_wait(t);

	if (rc != CPHT_OK)
		return image_fail(errbuf, errlen, rc, t->errmsg);
	for (uint64_t i = 1; i < info->nstash; i++)
	{
		if (stash[i - 1] >= stash[i])
			return image_fail(errbuf, errlen, CPHT_ERR_INVALID, "the image's stash is not sorted");
	}
	if (info->nstash > 0)
	{
		rc = table_stash_add(t, stash, (size_t) info->nstash);
		if (rc != CPHT_OK)
			return image_fail(errbuf, errlen, rc, t->errmsg);
	}
	t->count = info->count;
	t->grows = info->grows;
	t->widens = info->widens;
	t->initial_slots = info->initial_slots;
	return CPHT_OK;
}

cpht_status
cpht_table_from_image(const cpht_image_info *info, const void *const *levels,
					  const uint64_t *stash, cpht_table **out,
					  char *errbuf, size_t errlen)
{
	cpht_table *t;
	cpht_status rc;

	*out = NULL;
	rc = cpht_table_image_begin(info, &t, errbuf, errlen);
	if (rc != CPHT_OK)
		return rc;
	for (int l = 0; l < t->levels && rc == CPHT_OK; l++)
	{
		rc = cpht_table_image_write(t, l, 0, levels[l], info->level_bytes[l]);
		if (rc == CPHT_OK)
			rc = cpht_table_image_wait(t);
		if (rc != CPHT_OK)
			image_fail(errbuf, errlen, rc, t->errmsg);
	}
	if (rc == CPHT_OK)
		rc = cpht_table_image_finish(t, info, stash, errbuf, errlen);
	if (rc != CPHT_OK)
	{
		cpht_table_destroy(t);
		return rc;
	}
	*out = t;
	return CPHT_OK;
}

void
cpht_image_slots_from_v1(void *slots, uint64_t bytes, int slot_bits)
{
	uint64_t	n = bytes / (uint64_t) (slot_bits / 8);

	if (slot_bits == 16)
		for (uint64_t i = 0; i < n; i++)
			((uint16_t *) slots)[i] = (uint16_t) slot_from_v1(((uint16_t *) slots)[i]);
	else if (slot_bits == 32)
		for (uint64_t i = 0; i < n; i++)
			((uint32_t *) slots)[i] = (uint32_t) slot_from_v1(((uint32_t *) slots)[i]);
	else
		for (uint64_t i = 0; i < n; i++)
			((uint64_t *) slots)[i] = slot_from_v1(((uint64_t *) slots)[i]);
}
