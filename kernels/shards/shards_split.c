/*
 * shards_split.c — a batch split by shard and the answers put back in the
 * keys' order, in parallel over blocks of keys (shards.c tells how a call
 * goes).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shards/shards_internal.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* ---- splitting a batch ---------------------------------------------------- */


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

size_t
shards_split_chunk(const cpht_table *t, size_t n)
{
	uint64_t	slots = 0;
	size_t		most;

	for (int s = 0; s < t->sharded->nshards; s++)
		for (int l = 0; l < t->sharded->shard[s]->levels; l++)
			slots += t->sharded->shard[s]->params.slots[l];
	most = slots / 2 < SPLIT_MIN_KEYS ? SPLIT_MIN_KEYS :
		slots / 2 > SPLIT_PIECE_KEYS ? SPLIT_PIECE_KEYS : (size_t) (slots / 2);
	if (t->sharded->split_mem != NULL && t->sharded->split_cap >= most)
		most = t->sharded->split_cap;
	return n < most ? n : most;
}

/* Whether pieces of `chunk` keys go into the pinned split buffers. */
static int
split_pinned(const cpht_table *t, size_t chunk)
{
	return t->sharded->split_mem != NULL && chunk <= t->sharded->split_cap;
}

void
shards_split_free(shard_split *sp)
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
cpht_status
shards_split_alloc(cpht_table *t, size_t chunk, int with_bytes, int which, shard_split *sp)
{
	size_t		nblocks = (chunk + SPLIT_BLOCK - 1) / SPLIT_BLOCK;

	memset(sp, 0, sizeof(*sp));
	if (split_pinned(t, chunk))
	{
		sp->keys = (uint64_t *) t->sharded->split_mem + (size_t) which * t->sharded->split_cap;
		sp->out = (uint8_t *) ((uint64_t *) t->sharded->split_mem + SPLIT_BUFFERS * t->sharded->split_cap) +
			(size_t) which * t->sharded->split_cap;
	}
	else
	{
		sp->owned = 1;
		sp->keys = malloc((chunk ? chunk : 1) * sizeof(uint64_t));
		sp->out = malloc(chunk ? chunk : 1);
	}
	sp->route = malloc(chunk ? chunk : 1);
	sp->at = malloc((nblocks ? nblocks : 1) * (size_t) t->sharded->nshards * sizeof(size_t));
	sp->bytes = with_bytes ? malloc(chunk ? chunk : 1) : NULL;
	if (!sp->keys || !sp->out || !sp->route || !sp->at || (with_bytes && !sp->bytes))
	{
		shards_split_free(sp);
		return table_fail(t, CPHT_ERR_NOMEM, "out of host memory for a batch of %zu keys", chunk);
	}
	return CPHT_OK;
}

/* Both split buffers of a pipelined call (only the first for a call of
 * one piece). */
cpht_status
shards_splits_alloc(cpht_table *t, size_t chunk, size_t n, shard_split *bufs)
{
	cpht_status rc = shards_split_alloc(t, chunk, 0, 0, &bufs[0]);

	memset(&bufs[1], 0, sizeof(bufs[1]));
	if (rc == CPHT_OK && n > chunk)
	{
		rc = shards_split_alloc(t, chunk, 0, 1, &bufs[1]);
		if (rc != CPHT_OK)
			shards_split_free(&bufs[0]);
	}
	return rc;
}

void
shards_splits_free(shard_split *bufs)
{
	for (int b = 0; b < SPLIT_BUFFERS; b++)
		shards_split_free(&bufs[b]);
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
	int			ns = j->t->sharded->nshards;

	memcpy(next, j->sp->at + b * (size_t) ns, (size_t) ns * sizeof(size_t));
}

/* Route each key once (kept in route[]) and count each block's keys per shard. */
static void
split_count(void *ctx, size_t begin, size_t end)
{
	split_job  *j = ctx;
	const uint64_t *keys = j->keys;
	uint8_t    *route = j->sp->route;
	uint64_t	seed = j->t->sharded->seed;
	int			ns = j->t->sharded->nshards;

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
	int			streamed = !j->sp->owned && j->t->sharded->nshards <= STREAM_MAX_SHARDS;

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
void
shards_split_piece(cpht_table *t, const uint64_t *keys, const uint8_t *bytes, size_t n,
			shard_split *sp)
{
	size_t		nblocks = (n + SPLIT_BLOCK - 1) / SPLIT_BLOCK;
	split_job	j = {t, keys, bytes, NULL, n, sp};
	size_t		next = 0;

	cpu_parallel_for_min(t->sharded->split_threads, nblocks, 1, split_count, &j);
	/* Shard s's keys start after every earlier shard's, and within shard s
	 * block b's after those of blocks before b: input order is kept. */
	for (int s = 0; s < t->sharded->nshards; s++)
	{
		sp->off[s] = next;
		for (size_t b = 0; b < nblocks; b++)
		{
			size_t		c = sp->at[b * (size_t) t->sharded->nshards + s];

			sp->at[b * (size_t) t->sharded->nshards + s] = next;
			next += c;
		}
	}
	sp->off[t->sharded->nshards] = next;
	cpu_parallel_for_min(t->sharded->split_threads, nblocks, 1, split_place, &j);
}

void
shards_answers_back(cpht_table *t, shard_split *sp, size_t n, uint8_t *answer)
{
	split_job	j = {t, NULL, NULL, answer, n, sp};

	cpu_parallel_for_min(t->sharded->split_threads, (n + SPLIT_BLOCK - 1) / SPLIT_BLOCK, 1,
						 split_answers, &j);
}

