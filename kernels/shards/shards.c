/*
 * shards.c — a table split over several tables (shards), each an
 * ordinary table on its own device, behind the same interface as one table:
 * its creation, sizing, stats, export scan, rebuild and growth.  The other
 * files of the folder are named in shards_internal.h.
 *
 * Routing.  A key belongs to shard route(key) = the high bits of a 64-bit
 * mix of the key and the table's shard seed, scaled to the shard count.
 * The seed is drawn from params.seed but apart from the shards' own seeds
 * (which select their in-table permutations), so the keys of one shard
 * still spread evenly over its buckets.
 *
 * A call.  The batch goes in pieces (shards_split_chunk).  A piece is split per
 * shard keeping input order (a stable partition, in parallel over blocks
 * of keys: one pass routes each key once and counts, a second places the
 * keys by the stored routes), every shard runs its part at once on its own
 * host thread (a GPU shard's thread makes its device current,
 * kernels/gpu/gpu_probe.cu), and the answers go back to the keys' input
 * positions by the same routes, again in parallel over blocks.  The pieces
 * form a pipeline over two split buffers: while the shards run piece i
 * from one, the calling thread puts piece i-1's answers back from the other
 * and then splits piece i+1 into it.  For GPU shards the buffers are
 * pinned memory the table keeps (split_mem), so each shard's transfers go
 * by DMA straight from it, without the staging copy a call on pageable
 * memory pays, and the host work runs on every core but one per shard
 * (the shards' threads mostly wait on their devices).  A call is all or nothing as for one
 * table: when one shard fails, or an interrupt arrives between pieces,
 * every shard's part of the call is undone (rolled back to its log
 * position before the call; a find-or-put on a table without a log erases
 * the keys it put).
 *
 * The log.  Each shard keeps its own undo log.  The sharded table's log is
 * their entries in call order: after each call, shard by shard, the
 * entries the call added.  log_segs records, for every stretch of that
 * combined log, which shard holds it and where, so a position converts to
 * one position per shard (rollback, truncate) and a range reads out piece
 * by piece (log_read).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shards/shards_internal.h"

/* ---- creation ------------------------------------------------------------ */

/* Shard s's parameters: 1/nshards of each level's buckets, cut as the
 * kind's policy says (the iceberg's primary level a multiple of 4, as
 * cpht_params_for_capacity makes it).  An unknown kind gets the whole
 * table's levels, which its creation refuses as the whole table's. */
static void
shard_params(const cpht_params *p, int s, cpht_params *out)
{
	const cpht_kind_policy *pol = cpht_kind_policy_of(p->kind);
	int			levels = pol ? pol->levels : 0;

	*out = *p;
	out->shards = 0;
	out->gpu = p->gpu + s;
	out->seed = layout_mix64(p->seed + 0x9e3779b97f4a7c15ULL * (uint64_t) (s + 1));
	out->cpu_threads = p->cpu_threads / p->shards > 0 ? p->cpu_threads / p->shards : 1;
	for (int l = 0; l < levels && l < CPHT_MAX_LEVELS; l++)
	{
		uint64_t	b = p->bucket_slots[l] > 0 ? p->slots[l] / (uint64_t) p->bucket_slots[l] : 0;
		uint64_t	nb = (b + (uint64_t) p->shards - 1) / (uint64_t) p->shards;

		uint64_t	mult = pol->shard_bucket_multiple[l];

		nb = (nb + mult - 1) / mult * mult;
		if (nb < pol->shard_min_buckets[l])
			nb = pol->shard_min_buckets[l];
		out->slots[l] = nb * (uint64_t) p->bucket_slots[l];
	}
}

static cpht_status
shards_param_fail(const cpht_params *p, char *errbuf, size_t errlen)
{
	if (p->shards < 0 || p->shards > CPHT_MAX_SHARDS)
	{
		if (errbuf && errlen)
			snprintf(errbuf, errlen, "shards must be between 1 and %d, not %d",
					 CPHT_MAX_SHARDS, p->shards);
		return CPHT_ERR_INVALID;
	}
	return CPHT_OK;
}

uint64_t
shards_bytes(const cpht_params *params)
{
	uint64_t	bytes = 0;

	if (shards_param_fail(params, NULL, 0) != CPHT_OK)
		return 0;
	for (int s = 0; s < params->shards; s++)
	{
		cpht_params sp;
		uint64_t	b;

		shard_params(params, s, &sp);
		b = table_single_bytes(&sp);
		if (b == 0)
			return 0;
		bytes += b;
	}
	return bytes;
}

int
cpht_shards_to_fit(const cpht_params *params, uint64_t gpu_bytes, int gpus)
{
	cpht_params p = *params;
	int			most = gpus < CPHT_MAX_SHARDS ? gpus : CPHT_MAX_SHARDS;

	p.shards = 0;
	if (most < 2 || table_single_bytes(&p) <= gpu_bytes)
		return 1;
	for (int n = 2; n <= most; n++)
	{
		uint64_t	largest = 0;

		p.shards = n;
		/* every shard's bytes (the shards have alike layouts, but each is
		 * measured: a bound must hold for each) */
		for (int s = 0; s < n; s++)
		{
			cpht_params sp;
			uint64_t	b;

			shard_params(&p, s, &sp);
			b = table_single_bytes(&sp);
			if (b == 0)
				return 1;
			largest = b > largest ? b : largest;
		}
		if (largest <= gpu_bytes)
			return n;
	}
	return most;
}

/* Bytes of the split buffers for pieces of cap keys. */
static size_t
split_mem_bytes(size_t cap)
{
	return SPLIT_BUFFERS * cap * SPLIT_KEY_BYTES;
}

/*
 * GPU shards: pinned memory for the pieces of a call, SPLIT_BUFFERS
 * buffers each as large as the table (its shards' slots) up to
 * SPLIT_PIECE_KEYS, made with the table as the shards' own transfer
 * buffers are (pinning is slow: a cost of creating the table, not of its
 * first call), and counted by the memory hook.  Where it cannot be had,
 * calls split into ordinary memory.
 */
static void
split_mem_create(cpht_table *t)
{
	const cpht_device_ops *b = t->sharded->shard[0]->ops;
	uint64_t	slots = 0;
	size_t		cap;

	if (b->pinned == NULL)
		return;
	for (int s = 0; s < t->sharded->nshards; s++)
		for (int l = 0; l < t->sharded->shard[s]->levels; l++)
			slots += t->sharded->shard[s]->params.slots[l];
	cap = slots < SPLIT_PIECE_KEYS ? (size_t) slots : SPLIT_PIECE_KEYS;
	if (!table_memory_take(split_mem_bytes(cap)))
		return;
	t->sharded->split_mem = b->pinned->alloc(split_mem_bytes(cap));
	if (t->sharded->split_mem == NULL)
	{
		table_memory_give(split_mem_bytes(cap));
		return;
	}
	t->sharded->split_cap = cap;
	/* the shards' transfers go by DMA from anywhere in the buffers */
	for (int s = 0; s < t->sharded->nshards; s++)
		t->sharded->shard[s]->ops->pinned->set_direct(t->sharded->shard[s], t->sharded->split_mem, split_mem_bytes(cap));
}

/*
 * Threads splitting a call and putting its answers back: CPU shards share
 * the table's cpu_threads; GPU shards leave the host's cores to it, but
 * one for each shard's thread, which (CUDA's default with fewer devices
 * than cores) spins while it waits on its device: a split thread sharing
 * a core with it would hold up the whole pass, whose shares are equal.
 */
static int
split_threads_for(const cpht_table *t)
{
	long		cores;

	if (t->params.device != CPHT_DEVICE_GPU)
		return t->params.cpu_threads;
	cores = sysconf(_SC_NPROCESSORS_ONLN) - t->sharded->nshards;
	return cores < 1 ? 1 : cores > SPLIT_MAX_THREADS ? SPLIT_MAX_THREADS : (int) cores;
}

cpht_status
shards_create(const cpht_params *params, cpht_table **out,
					char *errbuf, size_t errlen)
{
	cpht_table *t;
	cpht_status rc = shards_param_fail(params, errbuf, errlen);

	*out = NULL;
	if (rc != CPHT_OK)
		return rc;
	t = calloc(1, sizeof(cpht_table));
	if (t)
		t->sharded = calloc(1, sizeof(struct cpht_sharded));
	if (t && t->sharded)
		t->sharded->shard = calloc((size_t) params->shards, sizeof(cpht_table *));
	if (t == NULL || t->sharded == NULL || t->sharded->shard == NULL)
	{
		if (t)
			free(t->sharded);
		free(t);
		if (errbuf && errlen)
			snprintf(errbuf, errlen, "out of host memory");
		return CPHT_ERR_NOMEM;
	}
	t->params = *params;
	/* The whole table's geometry is checked as for one table. */
	rc = table_resolve_layout(t, errbuf, errlen);
	t->sharded->nshards = params->shards;
	t->sharded->seed = layout_mix64(params->seed ^ 0x5348415244534545ULL);
	for (int s = 0; rc == CPHT_OK && s < t->sharded->nshards; s++)
	{
		cpht_params given = *params,
					sp;
		char		why[256];

		/*
		 * Slot widths as given, not as resolved for the whole: a shard has
		 * fewer buckets, so longer remainders, and picks its own widths
		 * where none were given.  The CPU threads as resolved (one per core
		 * for 0), shared out over the shards.
		 */
		given.cpu_threads = t->params.cpu_threads;
		shard_params(&given, s, &sp);
		why[0] = '\0';
		rc = table_single_create(&sp, &t->sharded->shard[s], why, sizeof(why));
		if (rc != CPHT_OK && errbuf && errlen)
			snprintf(errbuf, errlen, "shard %d of %d: %s", s + 1, t->sharded->nshards, why);
	}
	if (rc != CPHT_OK)
	{
		shards_destroy(t);
		return rc;
	}
	for (int s = 0; s < t->sharded->nshards; s++)
		t->initial_slots += t->sharded->shard[s]->initial_slots;
	split_mem_create(t);
	t->sharded->split_threads = split_threads_for(t);
	shards_choose_path(t);
	*out = t;
	return CPHT_OK;
}

void
shards_destroy(cpht_table *t)
{
	shards_drop_path(t);
	if (t->sharded->split_mem)
	{
		t->sharded->shard[0]->ops->pinned->free(t->sharded->split_mem);
		table_memory_give(split_mem_bytes(t->sharded->split_cap));
	}
	for (int s = 0; s < t->sharded->nshards; s++)
		table_single_destroy(t->sharded->shard[s]);
	free(t->sharded->shard);
	free(t->sharded->log_segs);
	free(t->sharded);
	free(t);
}

/*
 * Rebuild and grow go shard by shard, at once; one that fails leaves its
 * shard as it was, and the shards done keep their new layout (the same
 * keys, so the table answers as before).
 */
static cpht_status
every_shard(cpht_table *t, shard_op op)
{
	shard_job	jobs[CPHT_MAX_SHARDS];
	int			failed;
	cpht_status rc = CPHT_OK;

	shards_run(t, jobs, op, NULL, 0);
	failed = shards_failed(t, jobs);
	if (failed >= 0)
		rc = shards_fail(t, jobs, failed);
	shards_settled(t, NULL);
	return rc;
}

cpht_status
shards_rebuild(cpht_table *t)
{
	return every_shard(t, OP_REBUILD);
}

cpht_status
shards_grow(cpht_table *t)
{
	return every_shard(t, OP_GROW);
}

cpht_status
shards_stats(cpht_table *t, cpht_stats *out)
{
	int			gpus_seen[CPHT_MAX_SHARDS];
	int			ngpus = 0;

	memset(out, 0, sizeof(*out));
	out->kind = t->params.kind;
	out->device = t->params.device;
	out->key_bits = t->params.key_bits;
	out->auto_key_bits = t->params.auto_key_bits;
	out->levels = t->levels;
	out->shards = t->sharded->nshards;
	out->log_entries = t->log_len;
	for (int s = 0; s < t->sharded->nshards; s++)
	{
		cpht_stats	st;
		cpht_shard_stats *sh = &out->shard[s];
		cpht_status rc = table_single_stats(t->sharded->shard[s], &st);
		int			seen = 0;

		if (rc != CPHT_OK)
			return table_fail(t, rc, "shard %d of %d: %s", s + 1, t->sharded->nshards,
							  cpht_table_error(t->sharded->shard[s]));
		sh->device = st.device;
		sh->gpu = st.shard[0].gpu;
		sh->count = st.count;
		sh->grows = st.grows;
		sh->table_bytes = st.table_bytes;
		for (int l = 0; l < t->levels; l++)
		{
			out->slots[l] += st.slots[l];
			out->bucket_slots[l] = st.bucket_slots[l];
			if (st.slot_bits[l] > out->slot_bits[l])
				out->slot_bits[l] = st.slot_bits[l];
			out->live[l] += st.live[l];
			out->tombstones[l] += st.tombstones[l];
			sh->slots += st.slots[l];
			sh->live += st.live[l];
		}
		out->stashed += st.stashed;
		out->log_bytes += st.log_bytes;
		out->count += st.count;
		out->table_bytes += st.table_bytes;
		out->staging_bytes += st.staging_bytes;
		/* a device's memory once, however many shards it holds */
		for (int g = 0; g < ngpus; g++)
			seen |= gpus_seen[g] == sh->gpu;
		if (!seen && sh->gpu >= 0)
		{
			gpus_seen[ngpus++] = sh->gpu;
			out->device_free_bytes += st.device_free_bytes;
			out->device_total_bytes += st.device_total_bytes;
		}
		if (s == 0)
			snprintf(out->device_name, sizeof(out->device_name), "%s", st.device_name);
		else if (strcmp(st.device_name, out->device_name) != 0 &&
				 strlen(out->device_name) + strlen(st.device_name) + 3 < sizeof(out->device_name))
		{
			strcat(out->device_name, ", ");
			strcat(out->device_name, st.device_name);
		}
		out->grows += st.grows;
		/*
		 * Key width: each shard of an automatic table widens for its own
		 * keys, so the table's width is its widest shard's, and the widest
		 * key its slots hold without widening is its narrowest shard's.
		 */
		if (st.key_bits > out->key_bits)
			out->key_bits = st.key_bits;
		out->signed_keys |= st.signed_keys;
		if (s == 0 || st.slot_key_bits < out->slot_key_bits)
			out->slot_key_bits = st.slot_key_bits;
		out->widens += st.widens;
		if (st.last_widen_ms > out->last_widen_ms)
			out->last_widen_ms = st.last_widen_ms;
		if (st.last_grow_at_us > out->last_grow_at_us)
		{
			out->last_grow_at_us = st.last_grow_at_us;
			out->last_grow_ms = st.last_grow_ms;
		}
		out->initial_slots += st.initial_slots;
	}
	return CPHT_OK;
}


/* a sharded table's own layout is the one it was created with: its shards
 * grow and widen by themselves */
uint64_t
shards_slot_bytes(cpht_table *t)
{
	uint64_t	bytes = 0;

	for (int s = 0; s < t->sharded->nshards; s++)
		bytes += table_single_slot_bytes(t->sharded->shard[s]);
	return bytes;
}

uint64_t
shards_scan_end(cpht_table *t)
{
	uint64_t	end = t->nstash;

	for (int s = 0; s < t->sharded->nshards; s++)
		end += table_single_scan_end(t->sharded->shard[s]);
	return end;
}

uint64_t
shards_changes(cpht_table *t)
{
	uint64_t	changes = t->changes;

	for (int s = 0; s < t->sharded->nshards; s++)
		changes += table_single_changes(t->sharded->shard[s]);
	return changes;
}

cpht_status
shards_scan_keys(cpht_table *t, uint64_t *position, uint64_t *keys, size_t max, size_t *n)
{
	uint64_t	at = *position;

	*n = 0;
	for (int s = 0; s < t->sharded->nshards; s++)
	{
		cpht_table *sub = t->sharded->shard[s];
		uint64_t	end = table_single_scan_end(sub);

		if (at < end)
		{
			uint64_t	p = at;
			cpht_status rc = table_single_scan_keys(sub, &p, keys, max, n);

			*position += p - at;
			return rc;
		}
		at -= end;
	}
	return CPHT_OK;
}
