/*
 * table_shards.c — a table split over several tables (shards), each an
 * ordinary table on its own device, behind the same interface as one table.
 *
 * Routing.  A key belongs to shard route(key) = the high bits of a 64-bit
 * mix of the key and the table's shard seed, scaled to the shard count.
 * The seed is drawn from params.seed but apart from the shards' own seeds
 * (which select their in-table permutations), so the keys of one shard
 * still spread evenly over its buckets.
 *
 * A call.  The batch goes in pieces (split_chunk).  A piece is split per shard keeping input order (a
 * stable partition, in parallel over blocks of keys), every shard runs its
 * part at once on its own host thread (a GPU shard's thread makes its
 * device current, kernels/gpu_backend.cu), and the answers go back to the
 * keys' input positions, again in parallel over blocks.  For GPU shards the
 * pieces are split into pinned memory the table keeps (split_mem), so each
 * shard's transfers go by DMA straight from it, without the staging copy
 * a call on pageable memory pays.  A call is all or nothing as for one
 * table: when one shard fails, every shard's part of the call is undone
 * (rolled back to its log position before the call; a find-or-put on a
 * table without a log erases the keys it put).
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

#include "cpu_ops.h"				/* cpu_parallel_for_min */
#include "table_layer.h"

/* A stretch of the combined log: entries [start, next start or log_len)
 * are the shard's entries from shard_start on. */
typedef struct shard_log_seg
{
	uint64_t	start;
	int			shard;
	uint64_t	shard_start;
} shard_log_seg;

/* Keys per piece of a call (table_shards_find_or_put and the others). */
#define SPLIT_CHUNK_KEYS ((size_t) 1 << 26)

/* Split memory per key: the key and its answer. */
#define SPLIT_KEY_BYTES (sizeof(uint64_t) + 1)

/* Keys per block of the parallel split. */
#define SPLIT_BLOCK ((size_t) 1 << 16)

/* CPU shards run a call's parts on threads of their own from this many keys;
 * GPU shards always do (each waits on its device most of the time). */
#define CPU_PARALLEL_KEYS ((size_t) 1 << 16)

/* The shard of a key: its mix, seeded apart from the tables' own
 * permutations, scaled onto [0, nshards). */
static inline int
shard_route(uint64_t key, uint64_t seed, int nshards)
{
	return (int) layout_mulhi(layout_mix64(key ^ seed), (uint64_t) nshards);
}

/* ---- creation ------------------------------------------------------------ */

/* Shard s's parameters: 1/nshards of each level's buckets (the iceberg's
 * primary level a multiple of 4, as cpht_params_for_capacity makes it). */
static void
shard_params(const cpht_params *p, int s, cpht_params *out)
{
	int			levels = p->kind == CPHT_CUCKOO ? 1 : 2;

	*out = *p;
	out->shards = 0;
	out->gpu = p->gpu + s;
	out->seed = layout_mix64(p->seed + 0x9e3779b97f4a7c15ULL * (uint64_t) (s + 1));
	out->cpu_threads = p->cpu_threads / p->shards > 0 ? p->cpu_threads / p->shards : 1;
	for (int l = 0; l < levels && l < CPHT_MAX_LEVELS; l++)
	{
		uint64_t	b = p->bucket_slots[l] > 0 ? p->slots[l] / (uint64_t) p->bucket_slots[l] : 0;
		uint64_t	nb = (b + (uint64_t) p->shards - 1) / (uint64_t) p->shards;

		if (p->kind == CPHT_ICEBERG && l == 0)
			nb = nb < 32 ? 32 : (nb + 3) / 4 * 4;
		else if (nb < 8)
			nb = 8;
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
table_shards_bytes(const cpht_params *params)
{
	uint64_t	bytes = 0;

	if (shards_param_fail(params, NULL, 0) != CPHT_OK)
		return 0;
	for (int s = 0; s < params->shards; s++)
	{
		cpht_params sp;
		uint64_t	b;

		shard_params(params, s, &sp);
		b = cpht_params_table_bytes(&sp);
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
	if (most < 2 || cpht_params_table_bytes(&p) <= gpu_bytes)
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
			b = cpht_params_table_bytes(&sp);
			if (b == 0)
				return 1;
			largest = b > largest ? b : largest;
		}
		if (largest <= gpu_bytes)
			return n;
	}
	return most;
}

/*
 * GPU shards: pinned memory for the pieces of a call, as large as the
 * table (its shards' slots) up to SPLIT_CHUNK_KEYS, made with the table as
 * the shards' own transfer buffers are (pinning is slow: a cost of
 * creating the table, not of its first call), and counted by the memory
 * hook.  Where it cannot be had, calls split into ordinary memory.
 */
static void
split_mem_create(cpht_table *t)
{
	const cpht_backend *b = t->shard[0]->backend;
	uint64_t	slots = 0;
	size_t		cap;

	if (b->pinned_alloc == NULL)
		return;
	for (int s = 0; s < t->nshards; s++)
		for (int l = 0; l < t->shard[s]->levels; l++)
			slots += t->shard[s]->params.slots[l];
	cap = slots < SPLIT_CHUNK_KEYS ? (size_t) slots : SPLIT_CHUNK_KEYS;
	if (!table_memory_take(cap * SPLIT_KEY_BYTES))
		return;
	t->split_mem = b->pinned_alloc(cap * SPLIT_KEY_BYTES);
	if (t->split_mem == NULL)
	{
		table_memory_give(cap * SPLIT_KEY_BYTES);
		return;
	}
	t->split_cap = cap;
	for (int s = 0; s < t->nshards; s++)
		t->shard[s]->backend->set_direct(t->shard[s], t->split_mem, cap * SPLIT_KEY_BYTES);
}

cpht_status
table_shards_create(const cpht_params *params, cpht_table **out,
					char *errbuf, size_t errlen)
{
	cpht_table *t;
	cpht_status rc = shards_param_fail(params, errbuf, errlen);

	*out = NULL;
	if (rc != CPHT_OK)
		return rc;
	t = calloc(1, sizeof(cpht_table));
	if (t)
		t->shard = calloc((size_t) params->shards, sizeof(cpht_table *));
	if (t == NULL || t->shard == NULL)
	{
		free(t);
		if (errbuf && errlen)
			snprintf(errbuf, errlen, "out of host memory");
		return CPHT_ERR_NOMEM;
	}
	t->params = *params;
	/* The whole table's geometry is checked as for one table. */
	rc = table_resolve_layout(t, errbuf, errlen);
	t->nshards = params->shards;
	t->shard_seed = layout_mix64(params->seed ^ 0x5348415244534545ULL);
	for (int s = 0; rc == CPHT_OK && s < t->nshards; s++)
	{
		cpht_params sp;
		char		why[256];

		shard_params(&t->params, s, &sp);
		why[0] = '\0';
		rc = cpht_table_create(&sp, &t->shard[s], why, sizeof(why));
		if (rc != CPHT_OK && errbuf && errlen)
			snprintf(errbuf, errlen, "shard %d of %d: %s", s + 1, t->nshards, why);
	}
	if (rc != CPHT_OK)
	{
		table_shards_destroy(t);
		return rc;
	}
	for (int s = 0; s < t->nshards; s++)
		t->initial_slots += t->shard[s]->initial_slots;
	split_mem_create(t);
	*out = t;
	return CPHT_OK;
}

void
table_shards_destroy(cpht_table *t)
{
	if (t->split_mem)
	{
		t->shard[0]->backend->pinned_free(t->split_mem);
		table_memory_give(t->split_cap * SPLIT_KEY_BYTES);
	}
	for (int s = 0; s < t->nshards; s++)
		cpht_table_destroy(t->shard[s]);
	free(t->shard);
	free(t->log_segs);
	free(t);
}

/* ---- splitting a batch ---------------------------------------------------- */

/*
 * A call goes in pieces of at most split_chunk(t) keys.  A piece is split
 * by shard: shard s's keys are keys[off[s] .. off[s + 1]) in input order,
 * out[] room for their answers, bytes[] the per-key bytes that came with
 * them (undo's places).  route[] (each key's shard) and at[] (per block of
 * SPLIT_BLOCK keys, each shard's first index) put the answers back.  On
 * GPU shards keys[] and out[] lie in the table's pinned split memory, from
 * which the shards' transfers go by DMA without a staging copy.
 */
typedef struct shard_split
{
	uint64_t   *keys;
	uint8_t    *out;
	uint8_t    *bytes;
	uint8_t    *route;
	size_t	   *at;
	int			owned;			/* keys and out were allocated for this call */
	size_t		off[CPHT_MAX_SHARDS + 1];
} shard_split;

/*
 * Keys per piece: what the split memory holds; without it (CPU shards),
 * half the table's slots, at least SPLIT_MIN_KEYS and at most
 * SPLIT_CHUNK_KEYS, which keeps the temporary arrays of a call on a small
 * table small.
 */
#define SPLIT_MIN_KEYS ((size_t) 1 << 16)

static size_t
split_chunk(const cpht_table *t, size_t n)
{
	size_t		most = t->split_cap;

	if (t->split_mem == NULL)
	{
		uint64_t	slots = 0;

		for (int s = 0; s < t->nshards; s++)
			for (int l = 0; l < t->shard[s]->levels; l++)
				slots += t->shard[s]->params.slots[l];
		most = slots / 2 < SPLIT_MIN_KEYS ? SPLIT_MIN_KEYS :
			slots / 2 > SPLIT_CHUNK_KEYS ? SPLIT_CHUNK_KEYS : (size_t) (slots / 2);
	}
	return n < most ? n : most;
}

static void
split_free(shard_split *sp)
{
	if (sp->owned)
	{
		free(sp->keys);
		free(sp->out);
	}
	free(sp->bytes);
	free(sp->route);
	free(sp->at);
	memset(sp, 0, sizeof(*sp));
}

/* Buffers for pieces of `chunk` keys. */
static cpht_status
split_alloc(cpht_table *t, size_t chunk, int with_bytes, shard_split *sp)
{
	size_t		nblocks = (chunk + SPLIT_BLOCK - 1) / SPLIT_BLOCK;

	memset(sp, 0, sizeof(*sp));
	if (t->split_mem)
	{
		sp->keys = t->split_mem;
		sp->out = (uint8_t *) (sp->keys + t->split_cap);
	}
	else
	{
		sp->owned = 1;
		sp->keys = malloc((chunk ? chunk : 1) * sizeof(uint64_t));
		sp->out = malloc(chunk ? chunk : 1);
	}
	sp->route = malloc(chunk ? chunk : 1);
	sp->at = malloc((nblocks ? nblocks : 1) * (size_t) t->nshards * sizeof(size_t));
	sp->bytes = with_bytes ? malloc(chunk ? chunk : 1) : NULL;
	if (!sp->keys || !sp->out || !sp->route || !sp->at || (with_bytes && !sp->bytes))
	{
		split_free(sp);
		return table_fail(t, CPHT_ERR_NOMEM, "out of host memory for a batch of %zu keys", chunk);
	}
	return CPHT_OK;
}

typedef struct split_job
{
	const cpht_table *t;
	const uint64_t *keys;		/* the piece */
	const uint8_t *bytes;
	uint8_t    *answer;			/* the piece's answers, in input order */
	size_t		n;
	shard_split *sp;
} split_job;

/* Keys [*lo, *hi) of the piece are block b's. */
static inline void
block_range(const split_job *j, size_t b, size_t *lo, size_t *hi)
{
	*lo = b * SPLIT_BLOCK;
	*hi = *lo + SPLIT_BLOCK < j->n ? *lo + SPLIT_BLOCK : j->n;
}

/* next[s]: where block b's first key of shard s goes in the split piece. */
static inline void
block_starts(const split_job *j, size_t b, size_t *next)
{
	int			ns = j->t->nshards;

	memcpy(next, j->sp->at + b * (size_t) ns, (size_t) ns * sizeof(size_t));
}

static void
split_count(void *ctx, size_t begin, size_t end)
{
	split_job  *j = ctx;
	int			ns = j->t->nshards;

	for (size_t b = begin; b < end; b++)
	{
		size_t		lo,
					hi;
		size_t	   *c = j->sp->at + b * (size_t) ns;

		block_range(j, b, &lo, &hi);
		memset(c, 0, (size_t) ns * sizeof(size_t));
		for (size_t i = lo; i < hi; i++)
		{
			int			s = shard_route(j->keys[i], j->t->shard_seed, ns);

			j->sp->route[i] = (uint8_t) s;
			c[s]++;
		}
	}
}

static void
split_place(void *ctx, size_t begin, size_t end)
{
	split_job  *j = ctx;

	for (size_t b = begin; b < end; b++)
	{
		size_t		lo,
					hi;
		size_t		next[CPHT_MAX_SHARDS];

		block_range(j, b, &lo, &hi);
		block_starts(j, b, next);
		for (size_t i = lo; i < hi; i++)
		{
			size_t		k = next[j->sp->route[i]]++;

			j->sp->keys[k] = j->keys[i];
			if (j->bytes)
				j->sp->bytes[k] = j->bytes[i];
		}
	}
}

/* The answers of block after block back in input order. */
static void
split_answers(void *ctx, size_t begin, size_t end)
{
	split_job  *j = ctx;

	for (size_t b = begin; b < end; b++)
	{
		size_t		lo,
					hi;
		size_t		next[CPHT_MAX_SHARDS];

		block_range(j, b, &lo, &hi);
		block_starts(j, b, next);
		for (size_t i = lo; i < hi; i++)
			j->answer[i] = j->sp->out[next[j->sp->route[i]]++];
	}
}

/* Split keys[0..n) (n at most the buffers' chunk) by shard. */
static void
split_piece(cpht_table *t, const uint64_t *keys, const uint8_t *bytes, size_t n,
			shard_split *sp)
{
	size_t		nblocks = (n + SPLIT_BLOCK - 1) / SPLIT_BLOCK;
	split_job	j = {t, keys, bytes, NULL, n, sp};
	size_t		next = 0;

	cpu_parallel_for_min(t->params.cpu_threads, nblocks, 1, split_count, &j);
	/* Shard s's keys start after every earlier shard's, and within shard s
	 * block b's after those of blocks before b: input order is kept. */
	for (int s = 0; s < t->nshards; s++)
	{
		sp->off[s] = next;
		for (size_t b = 0; b < nblocks; b++)
		{
			size_t		c = sp->at[b * (size_t) t->nshards + s];

			sp->at[b * (size_t) t->nshards + s] = next;
			next += c;
		}
	}
	sp->off[t->nshards] = next;
	cpu_parallel_for_min(t->params.cpu_threads, nblocks, 1, split_place, &j);
}

static void
answers_back(cpht_table *t, shard_split *sp, size_t n, uint8_t *answer)
{
	split_job	j = {t, NULL, NULL, answer, n, sp};

	cpu_parallel_for_min(t->params.cpu_threads, (n + SPLIT_BLOCK - 1) / SPLIT_BLOCK, 1,
						 split_answers, &j);
}

/* ---- running the shards ---------------------------------------------------- */

typedef enum shard_op
{
	OP_FIND_OR_PUT,
	OP_FIND,
	OP_ERASE,
	OP_UNDO,
	OP_REBUILD,
	OP_GROW
} shard_op;

typedef struct shard_job
{
	cpht_table *t;
	int			s;
	shard_op	op;
	shard_split *sp;
	cpht_status rc;
	pthread_t	thread;
	int			started;
} shard_job;

static void *
shard_main(void *arg)
{
	shard_job  *j = arg;
	cpht_table *sub = j->t->shard[j->s];
	size_t		lo = j->sp ? j->sp->off[j->s] : 0;
	size_t		m = j->sp ? j->sp->off[j->s + 1] - lo : 0;

	switch (j->op)
	{
		case OP_FIND_OR_PUT:
			j->rc = cpht_table_find_or_put(sub, j->sp->keys + lo, m, j->sp->out + lo);
			break;
		case OP_FIND:
			j->rc = cpht_table_find(sub, j->sp->keys + lo, m, j->sp->out + lo);
			break;
		case OP_ERASE:
			j->rc = cpht_table_erase(sub, j->sp->keys + lo, m, j->sp->out + lo);
			break;
		case OP_UNDO:
			j->rc = cpht_table_undo(sub, j->sp->keys + lo, j->sp->bytes + lo, m);
			break;
		case OP_REBUILD:
			j->rc = cpht_table_rebuild(sub);
			break;
		case OP_GROW:
			j->rc = cpht_table_grow(sub);
			break;
	}
	return NULL;
}

/* Run op on every shard, on threads of their own when it pays. */
static void
run_shards(cpht_table *t, shard_job *jobs, shard_op op, shard_split *sp, size_t n)
{
	int			threads = t->params.device == CPHT_DEVICE_GPU || n >= CPU_PARALLEL_KEYS;
	sigset_t	all,
				saved;

	for (int s = 0; s < t->nshards; s++)
	{
		memset(&jobs[s], 0, sizeof(jobs[s]));
		jobs[s].t = t;
		jobs[s].s = s;
		jobs[s].op = op;
		jobs[s].sp = sp;
	}
	if (threads)
	{
		/* The helper threads block all signals: the host process handles them. */
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &saved);
		for (int s = 1; s < t->nshards; s++)
			jobs[s].started = pthread_create(&jobs[s].thread, NULL, shard_main, &jobs[s]) == 0;
		pthread_sigmask(SIG_SETMASK, &saved, NULL);
	}
	shard_main(&jobs[0]);
	for (int s = 1; s < t->nshards; s++)
	{
		if (jobs[s].started)
			pthread_join(jobs[s].thread, NULL);
		else
			shard_main(&jobs[s]);
	}
}

/* The failed shard whose error the call reports (a lost device first), or -1. */
static int
failed_shard(const cpht_table *t, const shard_job *jobs)
{
	int			worst = -1;

	for (int s = 0; s < t->nshards; s++)
		if (jobs[s].rc != CPHT_OK &&
			(worst < 0 || (jobs[s].rc == CPHT_ERR_DEVICE_LOST && jobs[worst].rc != CPHT_ERR_DEVICE_LOST)))
			worst = s;
	return worst;
}

static cpht_status
shard_fail(cpht_table *t, const shard_job *jobs, int s)
{
	const cpht_table *sub = t->shard[s];

	if (sub->backend->device_ordinal)
		return table_fail(t, jobs[s].rc, "shard %d of %d (GPU %d): %s", s + 1, t->nshards,
						  sub->backend->device_ordinal(t->shard[s]), cpht_table_error(sub));
	return table_fail(t, jobs[s].rc, "shard %d of %d: %s", s + 1, t->nshards,
					  cpht_table_error(sub));
}

/* After a call: the count and call times of the whole table (stage_in,
 * wait and copy_out are the call's own: splitting, the shards' calls,
 * putting the answers back). */
static void
shards_settled(cpht_table *t)
{
	double		total = t->times.total;

	t->count = 0;
	memset(&t->times, 0, sizeof(t->times));
	t->times.total = total;
	for (int s = 0; s < t->nshards; s++)
	{
		const cpht_call_times *c = &t->shard[s]->times;

		t->count += t->shard[s]->count;
#define SHARD_MAX(f) if (c->f > t->times.f) t->times.f = c->f
		SHARD_MAX(undo_log);
		SHARD_MAX(grow);
#undef SHARD_MAX
		t->times.grows += c->grows;
	}
}

/* ---- the combined log ------------------------------------------------------ */

/* Room for one segment per shard, before a call that logs. */
static cpht_status
segs_reserve(cpht_table *t)
{
	size_t		want = t->log_nsegs + (size_t) t->nshards;

	if (!t->logging || want <= t->log_segs_cap)
		return CPHT_OK;
	{
		size_t		cap = t->log_segs_cap ? 2 * t->log_segs_cap : 64;
		shard_log_seg *grown;

		while (cap < want)
			cap *= 2;
		grown = realloc(t->log_segs, cap * sizeof(shard_log_seg));
		if (grown == NULL)
			return table_fail(t, CPHT_ERR_NOMEM, "out of host memory for the undo log");
		t->log_segs = grown;
		t->log_segs_cap = cap;
	}
	return CPHT_OK;
}

/* A call added each shard's entries from before[s] on: append them. */
static void
segs_append(cpht_table *t, const uint64_t *before)
{
	if (!t->logging)
		return;
	for (int s = 0; s < t->nshards; s++)
	{
		uint64_t	added = t->shard[s]->log_len - before[s];
		shard_log_seg *last = t->log_nsegs ? &t->log_segs[t->log_nsegs - 1] : NULL;

		if (added == 0)
			continue;
		if (last == NULL || last->shard != s ||
			last->shard_start + (t->log_len - last->start) != before[s])
		{
			t->log_segs[t->log_nsegs].start = t->log_len;
			t->log_segs[t->log_nsegs].shard = s;
			t->log_segs[t->log_nsegs].shard_start = before[s];
			t->log_nsegs++;
		}
		t->log_len += added;
	}
}

static uint64_t
seg_end(const cpht_table *t, size_t i)
{
	return i + 1 < t->log_nsegs ? t->log_segs[i + 1].start : t->log_len;
}

/* Shard s's log length when the combined log was `position` long. */
static uint64_t
shard_position(const cpht_table *t, int s, uint64_t position)
{
	uint64_t	at = 0;

	for (size_t i = 0; i < t->log_nsegs && t->log_segs[i].start < position; i++)
	{
		const shard_log_seg *g = &t->log_segs[i];
		uint64_t	end = seg_end(t, i);

		if (g->shard == s)
			at = g->shard_start + (end < position ? end : position) - g->start;
	}
	return at;
}

/* The combined log ends at position (position < log_len). */
static void
segs_cut(cpht_table *t, uint64_t position)
{
	while (t->log_nsegs > 0 && t->log_segs[t->log_nsegs - 1].start >= position)
		t->log_nsegs--;
	t->log_len = position;
}

void
table_shards_set_logging(cpht_table *t, int on)
{
	for (int s = 0; s < t->nshards; s++)
		cpht_table_set_logging(t->shard[s], on);
	if (!on)
	{
		t->log_nsegs = 0;
		t->log_len = 0;
	}
	t->logging = on;
}

cpht_status
table_shards_rollback_to(cpht_table *t, uint64_t position)
{
	cpht_status rc = CPHT_OK;
	int			failed = -1;

	if (position >= t->log_len)
		return CPHT_OK;
	/* A failure keeps the segments: another rollback to the same position
	 * finds the shards already done with nothing left to undo. */
	for (int s = 0; s < t->nshards; s++)
	{
		cpht_status r = cpht_table_rollback_to(t->shard[s], shard_position(t, s, position));

		if (r != CPHT_OK && failed < 0)
		{
			failed = s;
			rc = table_fail(t, r, "shard %d of %d: %s", s + 1, t->nshards,
							cpht_table_error(t->shard[s]));
		}
	}
	if (rc == CPHT_OK)
		segs_cut(t, position);
	shards_settled(t);
	return rc;
}

void
table_shards_truncate_log(cpht_table *t, uint64_t position)
{
	if (position >= t->log_len)
		return;
	for (int s = 0; s < t->nshards; s++)
		cpht_table_truncate_log(t->shard[s], shard_position(t, s, position));
	segs_cut(t, position);
}

cpht_status
table_shards_log_read(cpht_table *t, uint64_t position, uint64_t n,
					  uint64_t *keys, uint8_t *where)
{
	if (position > t->log_len || n > t->log_len - position)
		return table_fail(t, CPHT_ERR_INVALID, "log entries %llu to %llu are past the log's %llu",
						  (unsigned long long) position, (unsigned long long) (position + n),
						  (unsigned long long) t->log_len);
	for (size_t i = 0; i < t->log_nsegs; i++)
	{
		const shard_log_seg *g = &t->log_segs[i];
		uint64_t	end = seg_end(t, i);
		uint64_t	lo = g->start > position ? g->start : position;
		uint64_t	hi = end < position + n ? end : position + n;
		cpht_status rc;

		if (lo >= hi)
			continue;
		rc = cpht_table_log_read(t->shard[g->shard], g->shard_start + (lo - g->start), hi - lo,
								 keys + (lo - position), where + (lo - position));
		if (rc != CPHT_OK)
			return table_fail(t, rc, "shard %d of %d: %s", g->shard + 1, t->nshards,
							  cpht_table_error(t->shard[g->shard]));
	}
	return CPHT_OK;
}

/*
 * The caller does not say which shard the deletes it holds came from, so
 * every shard holds them all: each keeps its tombstones (and refuses a
 * rebuild) while any delete of the table is held, and a shard that grows
 * meanwhile puts its deleted keys back by a plain put, which is right for
 * any key.
 */
void
table_shards_hold_deletes(cpht_table *t, int64_t delta)
{
	if (delta < 0 && (uint64_t) -delta > t->held_deletes)
		t->held_deletes = 0;
	else
		t->held_deletes += (uint64_t) delta;
	for (int s = 0; s < t->nshards; s++)
		cpht_table_hold_deletes(t->shard[s],
								(int64_t) t->held_deletes - (int64_t) t->shard[s]->held_deletes);
}

/* ---- the operations -------------------------------------------------------- */

/*
 * A find-or-put failed in the piece at `lo` (`m` keys, split in sp), after
 * the pieces before it worked: undo every shard's part.  Shards that log
 * go back to their log position before the call; otherwise the keys the
 * call put (status CPHT_PUT in the answers of the pieces done, and in the
 * failed piece's answers of the shards whose part worked) are erased.
 */
/* Say so in the call's message when undoing shard s failed too. */
static void
undo_failed(cpht_table *t, int s)
{
	char		why[sizeof(t->errmsg)];

	memcpy(why, t->errmsg, sizeof(why));
	snprintf(t->errmsg, sizeof(t->errmsg), "%s; undoing shard %d of %d failed too: %s",
			 why, s + 1, t->nshards, cpht_table_error(t->shard[s]));
}

static cpht_status
undo_find_or_put(cpht_table *t, const shard_job *jobs, int failed, const uint64_t *keys,
				 uint8_t *status, size_t lo, size_t m, shard_split *sp,
				 const uint64_t *log_before)
{
	cpht_status rc = shard_fail(t, jobs, failed);
	uint64_t   *put[CPHT_MAX_SHARDS] = {NULL};
	size_t		nput[CPHT_MAX_SHARDS] = {0};
	uint8_t    *gone;
	int			ok;

	/* The shards log alike (cpht_table_set_logging sets them all). */
	if (t->logging)
	{
		for (int s = 0; s < t->nshards; s++)
			if (cpht_table_rollback_to(t->shard[s], log_before[s]) != CPHT_OK)
				undo_failed(t, s);
		return rc;
	}
	/* The failed piece's answers: where a shard failed, it undid itself. */
	for (int f = 0; f < t->nshards; f++)
		if (jobs[f].rc != CPHT_OK)
			memset(sp->out + sp->off[f], CPHT_FOUND, sp->off[f + 1] - sp->off[f]);
	answers_back(t, sp, m, status + lo);
	gone = malloc(lo + m);
	ok = gone != NULL;
	for (int s = 0; s < t->nshards; s++)
		ok &= (put[s] = malloc((lo + m) * sizeof(uint64_t))) != NULL;
	for (size_t i = 0; ok && i < lo + m; i++)
		if (status[i] == CPHT_PUT)
		{
			int			s = shard_route(keys[i], t->shard_seed, t->nshards);

			put[s][nput[s]++] = keys[i];
		}
	for (int s = 0; s < t->nshards; s++)
	{
		if (!ok)
			(void) table_fail(t->shard[s], CPHT_ERR_NOMEM, "out of host memory while undoing %zu keys", lo + m);
		if (!ok || (nput[s] > 0 && cpht_table_erase(t->shard[s], put[s], nput[s], gone) != CPHT_OK))
			undo_failed(t, s);
		free(put[s]);
	}
	free(gone);
	return rc;
}

cpht_status
table_shards_find_or_put(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *status)
{
	shard_job	jobs[CPHT_MAX_SHARDS];
	uint64_t	before[CPHT_MAX_SHARDS];
	shard_split sp;
	size_t		chunk = split_chunk(t, n);
	double		ms[3] = {0, 0, 0};
	cpht_status rc;

	if (n == 0)
		return CPHT_OK;
	if (n > UINT32_MAX)
		return table_fail(t, CPHT_ERR_INVALID,
						  "a call on a sharded table takes at most %u keys, not %zu",
						  (unsigned) UINT32_MAX, n);
	rc = segs_reserve(t);
	if (rc == CPHT_OK)
		rc = split_alloc(t, chunk, 0, &sp);
	if (rc != CPHT_OK)
		return rc;
	for (int s = 0; s < t->nshards; s++)
		before[s] = t->shard[s]->log_len;
	for (size_t lo = 0; lo < n; lo += chunk)
	{
		size_t		m = n - lo < chunk ? n - lo : chunk;
		int			failed;

		double		mark = table_clock_ms();

		split_piece(t, keys + lo, NULL, m, &sp);
		ms[0] += table_clock_ms() - mark;
		mark = table_clock_ms();
		run_shards(t, jobs, OP_FIND_OR_PUT, &sp, m);
		ms[1] += table_clock_ms() - mark;
		failed = failed_shard(t, jobs);
		if (failed >= 0)
		{
			rc = undo_find_or_put(t, jobs, failed, keys, status, lo, m, &sp, before);
			break;
		}
		mark = table_clock_ms();
		answers_back(t, &sp, m, status + lo);
		ms[2] += table_clock_ms() - mark;
	}
	if (rc == CPHT_OK)
		segs_append(t, before);
	split_free(&sp);
	shards_settled(t);
	t->times.stage_in = ms[0];
	t->times.wait = ms[1];
	t->times.copy_out = ms[2];
	return rc;
}

cpht_status
table_shards_find(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *found)
{
	shard_job	jobs[CPHT_MAX_SHARDS];
	shard_split sp;
	size_t		chunk = split_chunk(t, n);
	double		ms[3] = {0, 0, 0};
	cpht_status rc;

	if (n == 0)
		return CPHT_OK;
	rc = split_alloc(t, chunk, 0, &sp);
	for (size_t lo = 0; rc == CPHT_OK && lo < n; lo += chunk)
	{
		size_t		m = n - lo < chunk ? n - lo : chunk;
		int			failed;

		double		mark = table_clock_ms();

		split_piece(t, keys + lo, NULL, m, &sp);
		ms[0] += table_clock_ms() - mark;
		mark = table_clock_ms();
		run_shards(t, jobs, OP_FIND, &sp, m);
		ms[1] += table_clock_ms() - mark;
		failed = failed_shard(t, jobs);
		mark = table_clock_ms();
		if (failed >= 0)
			rc = shard_fail(t, jobs, failed);
		else
			answers_back(t, &sp, m, found + lo);
		ms[2] += table_clock_ms() - mark;
	}
	split_free(&sp);
	shards_settled(t);
	t->times.stage_in = ms[0];
	t->times.wait = ms[1];
	t->times.copy_out = ms[2];
	return rc;
}

/*
 * Erase.  A shard's erase that worked is undone by its log, so while the
 * table keeps none the shards log the call (and forget it after).
 */
cpht_status
table_shards_erase(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *present)
{
	shard_job	jobs[CPHT_MAX_SHARDS];
	uint64_t	before[CPHT_MAX_SHARDS];
	shard_split sp;
	size_t		chunk = split_chunk(t, n);
	cpht_status rc;

	if (n == 0)
		return CPHT_OK;
	rc = segs_reserve(t);
	if (rc == CPHT_OK)
		rc = split_alloc(t, chunk, 0, &sp);
	if (rc != CPHT_OK)
		return rc;
	for (int s = 0; s < t->nshards; s++)
	{
		if (!t->logging)
			cpht_table_set_logging(t->shard[s], 1);
		before[s] = t->shard[s]->log_len;
	}
	for (size_t lo = 0; lo < n; lo += chunk)
	{
		size_t		m = n - lo < chunk ? n - lo : chunk;
		int			failed;

		split_piece(t, keys + lo, NULL, m, &sp);
		run_shards(t, jobs, OP_ERASE, &sp, m);
		failed = failed_shard(t, jobs);
		if (failed >= 0)
		{
			rc = shard_fail(t, jobs, failed);
			for (int s = 0; s < t->nshards; s++)
			{
				if (cpht_table_rollback_to(t->shard[s], before[s]) != CPHT_OK)
					undo_failed(t, s);
			}
			break;
		}
		answers_back(t, &sp, m, present + lo);
	}
	if (rc == CPHT_OK)
		segs_append(t, before);
	if (!t->logging)
		for (int s = 0; s < t->nshards; s++)
			cpht_table_set_logging(t->shard[s], 0);
	split_free(&sp);
	shards_settled(t);
	return rc;
}

/*
 * Undo entries read with log_read: each shard undoes its own, newest first,
 * so the pieces go from the last one back.
 */
cpht_status
table_shards_undo(cpht_table *t, const uint64_t *keys, const uint8_t *where, size_t n)
{
	shard_job	jobs[CPHT_MAX_SHARDS];
	shard_split sp;
	size_t		chunk = split_chunk(t, n);
	cpht_status rc;

	if (n == 0)
		return CPHT_OK;
	rc = split_alloc(t, chunk, 1, &sp);
	for (size_t hi = n; rc == CPHT_OK && hi > 0;)
	{
		size_t		m = hi < chunk ? hi : chunk;
		int			failed;

		split_piece(t, keys + (hi - m), where + (hi - m), m, &sp);
		run_shards(t, jobs, OP_UNDO, &sp, m);
		failed = failed_shard(t, jobs);
		if (failed >= 0)
			rc = shard_fail(t, jobs, failed);
		hi -= m;
	}
	split_free(&sp);
	shards_settled(t);
	return rc;
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

	run_shards(t, jobs, op, NULL, 0);
	failed = failed_shard(t, jobs);
	if (failed >= 0)
		rc = shard_fail(t, jobs, failed);
	shards_settled(t);
	return rc;
}

cpht_status
table_shards_rebuild(cpht_table *t)
{
	return every_shard(t, OP_REBUILD);
}

cpht_status
table_shards_grow(cpht_table *t)
{
	return every_shard(t, OP_GROW);
}

cpht_status
table_shards_stats(cpht_table *t, cpht_stats *out)
{
	int			gpus_seen[CPHT_MAX_SHARDS];
	int			ngpus = 0;

	memset(out, 0, sizeof(*out));
	out->kind = t->params.kind;
	out->device = t->params.device;
	out->key_bits = t->params.key_bits;
	out->auto_key_bits = t->params.auto_key_bits;
	out->levels = t->levels;
	out->shards = t->nshards;
	out->log_entries = t->log_len;
	for (int s = 0; s < t->nshards; s++)
	{
		cpht_stats	st;
		cpht_shard_stats *sh = &out->shard[s];
		cpht_status rc = cpht_table_stats(t->shard[s], &st);
		int			seen = 0;

		if (rc != CPHT_OK)
			return table_fail(t, rc, "shard %d of %d: %s", s + 1, t->nshards,
							  cpht_table_error(t->shard[s]));
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
