/*
 * table_api.c — the public calls of cpht_table.h that differ for a sharded
 * table: each tests once whether the table is sharded and goes to the
 * shards (kernels/shards/, through shards/shards.h) or to the one-table
 * call of the layer (table_single_*, table/table_layer.h).  This is the
 * only file of the table layer that knows shards exist; the calls that are
 * the same for both (count, log position, errors, images, streams) stay
 * in their own files.
 *
 * A sharded table's calls are settled and timed here as one table's are
 * in its own files: wait for the table's running stream batch first
 * (table_settle), and for the batch calls time the whole call
 * (table_call_begin/_end) around the shards' work.
 */
#include <stdlib.h>

#include "shards/shards.h"
#include "table/table_layer.h"

static int
params_sharded(const cpht_params *params)
{
	/* a negative count is refused by the shards' parameter check */
	return params->shards > 1 || params->shards < 0;
}

/* ---- lifecycle and sizing ------------------------------------------------ */

cpht_status
cpht_table_create(const cpht_params *params, cpht_table **out,
				  char *errbuf, size_t errlen)
{
	if (params_sharded(params))
	{
		*out = NULL;
		return shards_create(params, out, errbuf, errlen);
	}
	return table_single_create(params, out, errbuf, errlen);
}

uint64_t
cpht_params_table_bytes(const cpht_params *params)
{
	return params_sharded(params) ? shards_bytes(params) : table_single_bytes(params);
}

void
cpht_table_destroy(cpht_table *t)
{
	if (t == NULL)
		return;
	if (t->sharded == NULL)
	{
		table_single_destroy(t);
		return;
	}
	table_streams_detach(t);
	shards_destroy(t);
}

/* ---- batch operations ---------------------------------------------------- */

/*
 * Find-or-put on any table: a stream's batch runs it on its helper thread
 * (table_stream.c), without the settling and timing of the public call.
 */
cpht_status
table_find_or_put_counted(cpht_table *t, const uint64_t *keys, size_t n,
						  uint8_t *status, uint64_t *inserted)
{
	uint64_t	before = t->count;
	cpht_status rc;

	if (n == 0)
		rc = CPHT_OK;
	else if (t->sharded)
		rc = shards_find_or_put(t, keys, n, status);	/* each shard grows */
	else
		rc = table_find_or_put(t, keys, n, status);
	*inserted = rc == CPHT_OK ? t->count - before : 0;
	return rc;
}

cpht_status
cpht_table_find_or_put(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *status)
{
	if (t->sharded == NULL)
		return table_single_find_or_put(t, keys, n, status);
	table_settle(t);
	table_call_begin(t);
	return table_call_end(t, n == 0 ? CPHT_OK : shards_find_or_put(t, keys, n, status));
}

cpht_status
cpht_table_find(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *found)
{
	if (t->sharded == NULL)
		return table_single_find(t, keys, n, found);
	table_settle(t);
	table_call_begin(t);
	return table_call_end(t, shards_find(t, keys, n, found));
}

cpht_status
cpht_table_put(cpht_table *t, const uint64_t *keys, size_t n, uint64_t *inserted)
{
	uint8_t    *status;
	cpht_status rc;

	if (t->sharded == NULL)
		return table_single_put(t, keys, n, inserted);
	table_settle(t);
	table_call_begin(t);
	*inserted = 0;
	if (n == 0)
		return table_call_end(t, CPHT_OK);
	status = malloc(n);
	if (status == NULL)
		return table_call_end(t, table_fail(t, CPHT_ERR_NOMEM, "out of host memory for a batch of %zu keys", n));
	rc = table_find_or_put_counted(t, keys, n, status, inserted);
	free(status);
	return table_call_end(t, rc);
}

cpht_status
cpht_table_erase(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *present)
{
	if (t->sharded == NULL)
		return table_single_erase(t, keys, n, present);
	table_settle(t);
	table_call_begin(t);
	return table_call_end(t, n == 0 ? CPHT_OK : shards_erase(t, keys, n, present));
}

/* ---- undo log ------------------------------------------------------------ */

void
cpht_table_set_logging(cpht_table *t, int on)
{
	if (t->sharded == NULL)
	{
		table_single_set_logging(t, on);
		return;
	}
	table_settle(t);
	shards_set_logging(t, on);
}

void
cpht_table_keep_log(cpht_table *t, uint64_t entries)
{
	if (t->sharded)
		shards_keep_log(t, entries);
	else
		table_single_keep_log(t, entries);
}

void
cpht_table_truncate_log(cpht_table *t, uint64_t position)
{
	if (t->sharded == NULL)
	{
		table_single_truncate_log(t, position);
		return;
	}
	table_settle(t);
	shards_truncate_log(t, position);
}

cpht_status
cpht_table_log_read(cpht_table *t, uint64_t position, uint64_t n,
					uint64_t *keys, uint8_t *where)
{
	if (t->sharded == NULL)
		return table_single_log_read(t, position, n, keys, where);
	table_settle(t);
	return shards_log_read(t, position, n, keys, where);
}

void
cpht_table_hold_deletes(cpht_table *t, int64_t delta)
{
	if (t->sharded == NULL)
	{
		table_single_hold_deletes(t, delta);
		return;
	}
	table_settle(t);
	shards_hold_deletes(t, delta);
}

cpht_status
cpht_table_rollback_to(cpht_table *t, uint64_t position)
{
	if (t->sharded == NULL)
		return table_single_rollback_to(t, position);
	table_settle(t);
	return shards_rollback_to(t, position);
}

cpht_status
cpht_table_undo(cpht_table *t, const uint64_t *keys, const uint8_t *where, size_t n)
{
	if (t->sharded == NULL)
		return table_single_undo(t, keys, where, n);
	table_settle(t);
	return shards_undo(t, keys, where, n);
}

/* ---- rebuild, growth, stats ---------------------------------------------- */

cpht_status
cpht_table_rebuild(cpht_table *t)
{
	if (t->sharded == NULL)
		return table_single_rebuild(t);
	table_settle(t);
	return shards_rebuild(t);
}

cpht_status
cpht_table_grow(cpht_table *t)
{
	if (t->sharded == NULL)
		return table_single_grow(t);
	table_settle(t);
	return shards_grow(t);
}

cpht_status
cpht_table_stats(cpht_table *t, cpht_stats *out)
{
	if (t->sharded == NULL)
		return table_single_stats(t, out);
	table_settle(t);
	return shards_stats(t, out);
}

uint64_t
cpht_table_slot_bytes(cpht_table *t)
{
	if (t->sharded == NULL)
		return table_single_slot_bytes(t);
	table_settle(t);			/* a stream's batch may be growing a shard */
	return shards_slot_bytes(t);
}

/* ---- export scan --------------------------------------------------------- */

uint64_t
cpht_table_scan_end(cpht_table *t)
{
	if (t->sharded == NULL)
		return table_single_scan_end(t);
	table_settle(t);
	return shards_scan_end(t);
}

uint64_t
cpht_table_changes(cpht_table *t)
{
	if (t->sharded == NULL)
		return table_single_changes(t);
	table_settle(t);
	return shards_changes(t);
}

cpht_status
cpht_table_scan_keys(cpht_table *t, uint64_t *position, uint64_t *keys, size_t max, size_t *n)
{
	if (t->sharded == NULL)
		return table_single_scan_keys(t, position, keys, max, n);
	table_settle(t);
	return shards_scan_keys(t, position, keys, max, n);
}
