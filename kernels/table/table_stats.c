/*
 * table_stats.c — what a table reports about itself: its key count and
 * cpht_table_stats.
 */
#include <string.h>

#include "table/table_layer.h"

uint64_t
cpht_table_count(cpht_table *t)
{
	table_settle(t);
	return t->count;
}

uint64_t
table_single_slot_bytes(cpht_table *t)
{
	uint64_t	bytes = 0;

	table_settle(t);			/* a stream's batch may be growing it */
	for (int l = 0; l < t->levels; l++)
		bytes += t->params.slots[l] * (uint64_t) (t->level[l].slot_bits / 8);
	return bytes;
}

cpht_status
table_single_stats(cpht_table *t, cpht_stats *out)
{
	cpht_status rc;

	table_settle(t);
	memset(out, 0, sizeof(*out));
	out->kind = t->params.kind;
	out->device = t->params.device;
	out->key_bits = t->params.key_bits;
	out->levels = t->levels;
	for (int l = 0; l < t->levels; l++)
	{
		out->slots[l] = t->params.slots[l];
		out->bucket_slots[l] = t->level[l].bucket_slots;
		out->slot_bits[l] = t->level[l].slot_bits;
	}
	out->table_bytes = table_single_slot_bytes(t);
	out->stashed = t->nstash;
	out->log_entries = t->log_len;
	out->log_bytes = t->log_cap * sizeof(uint64_t) + t->log_runs_cap * sizeof(cpht_log_run);
	out->count = t->count;
	out->grows = t->grows;
	out->last_grow_ms = t->last_grow_ms;
	out->last_grow_at_us = t->last_grow_at_us;
	out->initial_slots = t->initial_slots;
	out->auto_key_bits = t->params.auto_key_bits;
	out->signed_keys = t->params.signed_keys;
	out->slot_key_bits = table_slot_key_bits(t);
	out->widens = t->widens;
	out->last_widen_ms = t->last_widen_ms;
	out->staging_bytes = t->ops->staging_bytes(t);
	t->ops->device_memory(t, &out->device_free_bytes, &out->device_total_bytes);
	t->ops->device_name(t, out->device_name, sizeof(out->device_name));
	rc = t->ops->scan(t, out->live, out->tombstones);
	/* one shard: the whole table */
	out->shards = 1;
	out->shard[0].device = t->params.device;
	out->shard[0].gpu = t->ops->device_ordinal(t);
	out->shard[0].count = out->count;
	out->shard[0].table_bytes = out->table_bytes;
	out->shard[0].grows = out->grows;
	for (int l = 0; l < t->levels; l++)
	{
		out->shard[0].slots += out->slots[l];
		out->shard[0].live += out->live[l];
	}
	return rc;
}
