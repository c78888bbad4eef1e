/*
 * shards.c — a table split over several tables (shards), each an
 * ordinary table on its own device, behind the same interface as one table.
 *
 * Routing.  A key belongs to shard route(key) = the high bits of a 64-bit
 * mix of the key and the table's shard seed, scaled to the shard count.
 * The seed is drawn from params.seed but apart from the shards' own seeds
 * (which select their in-table permutations), so the keys of one shard
 * still spread evenly over its buckets.
 *
 * A call.  The batch goes in pieces (split_chunk).  A piece is split per
 * shard keeping input order (a stable partition, in parallel over blocks
 * of keys: one pass routes each key once and counts, a second places the
 * keys by the stored routes), every shard runs its part at once on its own
 * host thread (a GPU shard's thread makes its device current,
 * kernels/gpu_device.cu), and the answers go back to the keys' input
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

#include "util/threads.h"
#include "table/table_layer.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* A stretch of the combined log: entries [start, next start or log_len)
 * are the shard's entries from shard_start on. */
typedef struct shard_log_seg
{
	uint64_t	start;
	int			shard;
	uint64_t	shard_start;
} shard_log_seg;

/*
 * Keys per piece of a call, at most.  The first piece's split and the last
 * piece's answers are not overlapped with the shards, so pieces are kept
 * small: 4M keys split in a millisecond or two on a host's cores, while a
 * piece's fixed costs (waking the splitting threads, starting the shards'
 * threads, a GPU shard's call) are tens of microseconds.  On 32 cores a
 * thread's share of a piece is 128K keys (1 MiB), which the place pass
 * reads again soon after the count pass read it, mostly from the core's
 * own cache.  A piece is one transfer chunk of the GPU backend
 * (GPU_CHUNK_KEYS), so a shard's part of it is one upload.
 */
#define SPLIT_PIECE_KEYS ((size_t) 1 << 22)

/* Non-temporal stores into the split memory (split_place) for up to this
 * many shards: each thread then writes that many streams at once, which
 * the cores' write-combining buffers keep whole. */
#define STREAM_MAX_SHARDS 4

/* Split buffers: the one the shards run from, and the one the calling
 * thread reads the previous piece's answers from and splits the next
 * piece into (in that order, so two suffice). */
#define SPLIT_BUFFERS 2

/* Split memory per key: the key and its answer. */
#define SPLIT_KEY_BYTES (sizeof(uint64_t) + 1)

/* Keys per block of the parallel split. */
#define SPLIT_BLOCK ((size_t) 1 << 16)

/* CPU shards run a call's parts on threads of their own from this many keys;
 * GPU shards always do (each waits on its device most of the time). */
#define CPU_PARALLEL_KEYS ((size_t) 1 << 16)

/* Threads splitting a call of GPU shards, at most: what
 * cpu_parallel_for_min runs at once. */
#define SPLIT_MAX_THREADS 64

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
	const cpht_backend *b = t->shard[0]->backend;
	uint64_t	slots = 0;
	size_t		cap;

	if (b->pinned_alloc == NULL)
		return;
	for (int s = 0; s < t->nshards; s++)
		for (int l = 0; l < t->shard[s]->levels; l++)
			slots += t->shard[s]->params.slots[l];
	cap = slots < SPLIT_PIECE_KEYS ? (size_t) slots : SPLIT_PIECE_KEYS;
	if (!table_memory_take(split_mem_bytes(cap)))
		return;
	t->split_mem = b->pinned_alloc(split_mem_bytes(cap));
	if (t->split_mem == NULL)
	{
		table_memory_give(split_mem_bytes(cap));
		return;
	}
	t->split_cap = cap;
	/* the shards' transfers go by DMA from anywhere in the buffers */
	for (int s = 0; s < t->nshards; s++)
		t->shard[s]->backend->set_direct(t->shard[s], t->split_mem, split_mem_bytes(cap));
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
	cores = sysconf(_SC_NPROCESSORS_ONLN) - t->nshards;
	return cores < 1 ? 1 : cores > SPLIT_MAX_THREADS ? SPLIT_MAX_THREADS : (int) cores;
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
	t->split_threads = split_threads_for(t);
	*out = t;
	return CPHT_OK;
}

void
table_shards_destroy(cpht_table *t)
{
	if (t->split_mem)
	{
		t->shard[0]->backend->pinned_free(t->split_mem);
		table_memory_give(split_mem_bytes(t->split_cap));
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
 * GPU shards keys[] and out[] lie in one of the table's pinned split
 * buffers, from which the shards' transfers go by DMA without a staging
 * copy.
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
 * Keys per piece: half the table's slots, at least SPLIT_MIN_KEYS and at
 * most SPLIT_PIECE_KEYS, which keeps the temporary arrays of a call on a
 * small table small; or what a pinned split buffer holds (GPU shards),
 * where that is as much.  The buffers were sized when the table was made:
 * a table that has grown well past that size splits its calls into
 * ordinary memory instead of into pieces of its size at creation (a table
 * made with capacity 1000 would otherwise take a call of 100M keys in
 * pieces of a thousand, each waking the split threads and the shards).
 */
#define SPLIT_MIN_KEYS ((size_t) 1 << 16)

static size_t
split_chunk(const cpht_table *t, size_t n)
{
	uint64_t	slots = 0;
	size_t		most;

	for (int s = 0; s < t->nshards; s++)
		for (int l = 0; l < t->shard[s]->levels; l++)
			slots += t->shard[s]->params.slots[l];
	most = slots / 2 < SPLIT_MIN_KEYS ? SPLIT_MIN_KEYS :
		slots / 2 > SPLIT_PIECE_KEYS ? SPLIT_PIECE_KEYS : (size_t) (slots / 2);
	if (t->split_mem != NULL && t->split_cap >= most)
		most = t->split_cap;
	return n < most ? n : most;
}

/* Whether pieces of `chunk` keys go into the pinned split buffers. */
static int
split_pinned(const cpht_table *t, size_t chunk)
{
	return t->split_mem != NULL && chunk <= t->split_cap;
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

/* Split buffer `which` for pieces of `chunk` keys. */
static cpht_status
split_alloc(cpht_table *t, size_t chunk, int with_bytes, int which, shard_split *sp)
{
	size_t		nblocks = (chunk + SPLIT_BLOCK - 1) / SPLIT_BLOCK;

	memset(sp, 0, sizeof(*sp));
	if (split_pinned(t, chunk))
	{
		sp->keys = (uint64_t *) t->split_mem + (size_t) which * t->split_cap;
		sp->out = (uint8_t *) ((uint64_t *) t->split_mem + SPLIT_BUFFERS * t->split_cap) +
			(size_t) which * t->split_cap;
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

/* Both split buffers of a pipelined call (only the first for a call of
 * one piece). */
static cpht_status
splits_alloc(cpht_table *t, size_t chunk, size_t n, shard_split *bufs)
{
	cpht_status rc = split_alloc(t, chunk, 0, 0, &bufs[0]);

	memset(&bufs[1], 0, sizeof(bufs[1]));
	if (rc == CPHT_OK && n > chunk)
	{
		rc = split_alloc(t, chunk, 0, 1, &bufs[1]);
		if (rc != CPHT_OK)
			split_free(&bufs[0]);
	}
	return rc;
}

static void
splits_free(shard_split *bufs)
{
	for (int b = 0; b < SPLIT_BUFFERS; b++)
		split_free(&bufs[b]);
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

/*
 * The passes below copy what they use into locals first: the extension is
 * built with -fno-strict-aliasing, under which every byte stored (a route,
 * an answer) would otherwise make the compiler load the job's pointers and
 * counters again.
 */

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

/* Route each key once (kept in route[]) and count each block's keys per shard. */
static void
split_count(void *ctx, size_t begin, size_t end)
{
	split_job  *j = ctx;
	const uint64_t *keys = j->keys;
	uint8_t    *route = j->sp->route;
	uint64_t	seed = j->t->shard_seed;
	int			ns = j->t->nshards;

	for (size_t b = begin; b < end; b++)
	{
		size_t		lo,
					hi;
		size_t		count[CPHT_MAX_SHARDS] = {0};

		block_range(j, b, &lo, &hi);
		for (size_t i = lo; i < hi; i++)
		{
			int			s = shard_route(keys[i], seed, ns);

			route[i] = (uint8_t) s;
			count[s]++;
		}
		memcpy(j->sp->at + b * (size_t) ns, count, (size_t) ns * sizeof(size_t));
	}
}

/*
 * Keys placed into the pinned split memory are read by the GPUs' DMA, not
 * by this CPU: on x86-64 they go by non-temporal stores, which write the
 * cache lines without reading them in first (a third less memory traffic
 * for the pass), fenced before the pass reports done (then the shards'
 * threads start, or the next pass runs).
 */
static void
place_streamed(const uint64_t *keys, const uint8_t *route, uint64_t *to, size_t *next,
			   size_t lo, size_t hi)
{
#if defined(__x86_64__)
	for (size_t i = lo; i < hi; i++)
		_mm_stream_si64((long long *) &to[next[route[i]]++], (long long) keys[i]);
#else
	for (size_t i = lo; i < hi; i++)
		to[next[route[i]]++] = keys[i];
#endif
}

static void
split_place(void *ctx, size_t begin, size_t end)
{
	split_job  *j = ctx;
	const uint64_t *keys = j->keys;
	const uint8_t *bytes = j->bytes;
	const uint8_t *route = j->sp->route;
	uint64_t   *to = j->sp->keys;
	uint8_t    *to_bytes = j->sp->bytes;
	int			streamed = !j->sp->owned && j->t->nshards <= STREAM_MAX_SHARDS;

	for (size_t b = begin; b < end; b++)
	{
		size_t		lo,
					hi;
		size_t		next[CPHT_MAX_SHARDS];

		block_range(j, b, &lo, &hi);
		block_starts(j, b, next);
		if (bytes)
			for (size_t i = lo; i < hi; i++)
			{
				size_t		k = next[route[i]]++;

				to[k] = keys[i];
				to_bytes[k] = bytes[i];
			}
		else if (streamed)
			place_streamed(keys, route, to, next, lo, hi);
		else
			for (size_t i = lo; i < hi; i++)
				to[next[route[i]]++] = keys[i];
	}
#if defined(__x86_64__)
	if (streamed)
		_mm_sfence();
#endif
}

/* The answers of block after block back in input order. */
static void
split_answers(void *ctx, size_t begin, size_t end)
{
	split_job  *j = ctx;
	const uint8_t *route = j->sp->route;
	const uint8_t *out = j->sp->out;
	uint8_t    *answer = j->answer;

	for (size_t b = begin; b < end; b++)
	{
		size_t		lo,
					hi;
		size_t		next[CPHT_MAX_SHARDS];

		block_range(j, b, &lo, &hi);
		block_starts(j, b, next);
		for (size_t i = lo; i < hi; i++)
			answer[i] = out[next[route[i]]++];
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

	cpu_parallel_for_min(t->split_threads, nblocks, 1, split_count, &j);
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
	cpu_parallel_for_min(t->split_threads, nblocks, 1, split_place, &j);
}

static void
answers_back(cpht_table *t, shard_split *sp, size_t n, uint8_t *answer)
{
	split_job	j = {t, NULL, NULL, answer, n, sp};

	cpu_parallel_for_min(t->split_threads, (n + SPLIT_BLOCK - 1) / SPLIT_BLOCK, 1,
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

/*
 * Start op on every shard: shards `first` and after on threads of their
 * own, the others run by shards_wait on the calling thread (first =
 * nshards: all of them).
 */
static void
shards_start(cpht_table *t, shard_job *jobs, shard_op op, shard_split *sp, int first)
{
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
	if (first >= t->nshards)
		return;
	/* The helper threads block all signals: the host process handles them. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &saved);
	for (int s = first; s < t->nshards; s++)
		jobs[s].started = pthread_create(&jobs[s].thread, NULL, shard_main, &jobs[s]) == 0;
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
}

/* Every shard's part is done: those without a thread run here. */
static void
shards_wait(cpht_table *t, shard_job *jobs)
{
	for (int s = 0; s < t->nshards; s++)
		if (!jobs[s].started)
			shard_main(&jobs[s]);
	for (int s = 0; s < t->nshards; s++)
		if (jobs[s].started)
			pthread_join(jobs[s].thread, NULL);
}

/* Shards run on threads of their own where it pays: on GPUs always, on
 * the CPU for parts of many keys. */
static int
shards_threaded(const cpht_table *t, size_t n)
{
	return t->params.device == CPHT_DEVICE_GPU || n >= CPU_PARALLEL_KEYS;
}

/* Run op on every shard and wait for them. */
static void
run_shards(cpht_table *t, shard_job *jobs, shard_op op, shard_split *sp, size_t n)
{
	shards_start(t, jobs, op, sp, shards_threaded(t, n) ? 1 : t->nshards);
	shards_wait(t, jobs);
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

/*
 * The pipeline of a find-or-put, find or erase: pieces of `chunk` keys,
 * piece i run by the shards from bufs[i % 2] while the calling thread puts
 * piece i-1's answers back from bufs[(i + 1) % 2] and then splits piece
 * i+1 into it.  Before each piece but the first it asks for an interrupt.
 * It returns CPHT_OK with every answer in answer[], or the call's error
 * (its message set) and where it stopped: keys [0, done) ran and have
 * their answers; on a shard's failure the piece at `done` (m keys, split in
 * sp, the shards' outcomes in jobs) ran in part, on an interrupt nothing
 * else did (m = 0).
 */
typedef struct pipe_stop
{
	size_t		done;
	size_t		m;
	shard_split *sp;
	double		ms[3];			/* split, wait, answers back */
	int			pieces;
} pipe_stop;

static cpht_status
pipeline(cpht_table *t, shard_op op, const uint64_t *keys, size_t n, uint8_t *answer,
		 shard_split *bufs, size_t chunk, shard_job *jobs, pipe_stop *stop)
{
	size_t		pieces = (n + chunk - 1) / chunk;
	/* a call of one piece has nothing to overlap: shard 0 runs here */
	int			first = !shards_threaded(t, n) ? t->nshards : pieces > 1 ? 0 : 1;
	double		mark = table_clock_ms();

	memset(stop, 0, sizeof(*stop));
	split_piece(t, keys, NULL, n < chunk ? n : chunk, &bufs[0]);
	stop->ms[0] += table_clock_ms() - mark;
	for (size_t i = 0; i < pieces; i++)
	{
		size_t		lo = i * chunk;
		size_t		m = n - lo < chunk ? n - lo : chunk;
		shard_split *cur = &bufs[i % 2],
				   *other = &bufs[(i + 1) % 2];
		int			failed;

		if (i > 0 && table_interrupted())
		{
			/* piece i-1 ran: its answers first, for the undo */
			answers_back(t, other, chunk, answer + lo - chunk);
			stop->done = lo;
			return table_fail(t, CPHT_ERR_CANCELED, "canceled after %zu of %zu keys", lo, n);
		}
		shards_start(t, jobs, op, cur, first);
		stop->pieces++;
		if (i > 0)
		{
			mark = table_clock_ms();
			answers_back(t, other, chunk, answer + lo - chunk);
			stop->ms[2] += table_clock_ms() - mark;
		}
		if (i + 1 < pieces)
		{
			mark = table_clock_ms();
			split_piece(t, keys + lo + chunk, NULL, n - lo - chunk < chunk ? n - lo - chunk : chunk,
						other);
			stop->ms[0] += table_clock_ms() - mark;
		}
		mark = table_clock_ms();
		shards_wait(t, jobs);
		stop->ms[1] += table_clock_ms() - mark;
		failed = failed_shard(t, jobs);
		if (failed >= 0)
		{
			stop->done = lo;
			stop->m = m;
			stop->sp = cur;
			return shard_fail(t, jobs, failed);
		}
		if (i + 1 == pieces)
		{
			mark = table_clock_ms();
			answers_back(t, cur, m, answer + lo);
			stop->ms[2] += table_clock_ms() - mark;
		}
	}
	stop->done = n;
	return CPHT_OK;
}

/* After a call: the count and call times of the whole table (stage_in,
 * wait and copy_out are the calling thread's own: splitting, waiting for
 * the shards after its own work, putting the answers back). */
static void
shards_settled(cpht_table *t, const pipe_stop *stop)
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
	if (stop)
	{
		t->times.stage_in = stop->ms[0];
		t->times.wait = stop->ms[1];
		t->times.copy_out = stop->ms[2];
		t->times.pieces = stop->pieces;
		t->times.threads = t->split_threads;
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
	shards_settled(t, NULL);
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

/* Say so in the call's message when undoing shard s failed too. */
static void
undo_failed(cpht_table *t, int s)
{
	char		why[sizeof(t->errmsg)];

	memcpy(why, t->errmsg, sizeof(why));
	snprintf(t->errmsg, sizeof(t->errmsg), "%s; undoing shard %d of %d failed too: %s",
			 why, s + 1, t->nshards, cpht_table_error(t->shard[s]));
}

/*
 * A find-or-put stopped (pipeline's stop, the error `rc` with its message
 * set) after the pieces before stop->done worked: undo every shard's part.
 * Shards that log go back to their log position before the call;
 * otherwise the keys the call put (status CPHT_PUT in the answers of the
 * pieces done, and in the failed piece's answers of the shards whose part
 * worked) are erased.
 */
static cpht_status
undo_find_or_put(cpht_table *t, const shard_job *jobs, const pipe_stop *stop,
				 const uint64_t *keys, uint8_t *status, const uint64_t *log_before,
				 cpht_status rc)
{
	size_t		ran = stop->done + stop->m;
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
	if (stop->sp)
	{
		for (int f = 0; f < t->nshards; f++)
			if (jobs[f].rc != CPHT_OK)
				memset(stop->sp->out + stop->sp->off[f], CPHT_FOUND,
					   stop->sp->off[f + 1] - stop->sp->off[f]);
		answers_back(t, stop->sp, stop->m, status + stop->done);
	}
	gone = malloc(ran ? ran : 1);
	ok = gone != NULL;
	for (int s = 0; s < t->nshards; s++)
		ok &= (put[s] = malloc((ran ? ran : 1) * sizeof(uint64_t))) != NULL;
	for (size_t i = 0; ok && i < ran; i++)
		if (status[i] == CPHT_PUT)
		{
			int			s = shard_route(keys[i], t->shard_seed, t->nshards);

			put[s][nput[s]++] = keys[i];
		}
	for (int s = 0; s < t->nshards; s++)
	{
		if (!ok)
			(void) table_fail(t->shard[s], CPHT_ERR_NOMEM, "out of host memory while undoing %zu keys", ran);
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
	shard_split bufs[SPLIT_BUFFERS];
	size_t		chunk = split_chunk(t, n);
	pipe_stop	stop;
	cpht_status rc;

	if (n == 0)
		return CPHT_OK;
	if (n > UINT32_MAX)
		return table_fail(t, CPHT_ERR_INVALID,
						  "a call on a sharded table takes at most %u keys, not %zu",
						  (unsigned) UINT32_MAX, n);
	rc = segs_reserve(t);
	if (rc == CPHT_OK)
		rc = splits_alloc(t, chunk, n, bufs);
	if (rc != CPHT_OK)
		return rc;
	for (int s = 0; s < t->nshards; s++)
		before[s] = t->shard[s]->log_len;
	rc = pipeline(t, OP_FIND_OR_PUT, keys, n, status, bufs, chunk, jobs, &stop);
	if (rc != CPHT_OK)
		rc = undo_find_or_put(t, jobs, &stop, keys, status, before, rc);
	else
		segs_append(t, before);
	splits_free(bufs);
	shards_settled(t, &stop);
	return rc;
}

cpht_status
table_shards_find(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *found)
{
	shard_job	jobs[CPHT_MAX_SHARDS];
	shard_split bufs[SPLIT_BUFFERS];
	size_t		chunk = split_chunk(t, n);
	pipe_stop	stop;
	cpht_status rc;

	if (n == 0)
		return CPHT_OK;
	rc = splits_alloc(t, chunk, n, bufs);
	if (rc != CPHT_OK)
		return rc;
	rc = pipeline(t, OP_FIND, keys, n, found, bufs, chunk, jobs, &stop);
	splits_free(bufs);
	shards_settled(t, &stop);
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
	shard_split bufs[SPLIT_BUFFERS];
	size_t		chunk = split_chunk(t, n);
	pipe_stop	stop;
	cpht_status rc;

	if (n == 0)
		return CPHT_OK;
	rc = segs_reserve(t);
	if (rc == CPHT_OK)
		rc = splits_alloc(t, chunk, n, bufs);
	if (rc != CPHT_OK)
		return rc;
	for (int s = 0; s < t->nshards; s++)
	{
		if (!t->logging)
			cpht_table_set_logging(t->shard[s], 1);
		before[s] = t->shard[s]->log_len;
	}
	rc = pipeline(t, OP_ERASE, keys, n, present, bufs, chunk, jobs, &stop);
	if (rc != CPHT_OK)
	{
		for (int s = 0; s < t->nshards; s++)
			if (cpht_table_rollback_to(t->shard[s], before[s]) != CPHT_OK)
				undo_failed(t, s);
	}
	else
		segs_append(t, before);
	if (!t->logging)
		for (int s = 0; s < t->nshards; s++)
			cpht_table_set_logging(t->shard[s], 0);
	splits_free(bufs);
	shards_settled(t, &stop);
	return rc;
}

/*
 * Undo entries read with log_read: each shard undoes its own, newest first,
 * so the pieces go from the last one back, one at a time (a rare path: a
 * transaction of a shared table rolled back).
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
	rc = split_alloc(t, chunk, 1, 0, &sp);
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
	shards_settled(t, NULL);
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
	shards_settled(t, NULL);
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
