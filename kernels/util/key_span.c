/*
 * key_span.c — the span of a batch of keys: the OR of the keys and the OR
 * of their zigzag folds, from which a table without key_bits reads the
 * width of the widest (table/table_widen.c), taken by a pass of its own
 * (util_key_span) or on the way of a copy (cpht_copy_keys_spanned, for a
 * caller that copies the keys anyway and hands the span to the table).
 */
#include <string.h>
#include <unistd.h>

#include "util/key_span.h"
#include "util/threads.h"

/*
 * A pass over a batch is memory bound (100M keys: 70 ms on one core of the
 * build machine, as long as a GPU table's whole right-sized ingest), so
 * large batches are split over threads.
 */
#define SPAN_KEYS_PER_THREAD ((size_t) 1 << 20)

/* A copy that takes the span on the way is split as cpht_parallel_memcpy
 * splits a copy: a thread per 256 kB at most. */
#define SPAN_COPY_KEYS_PER_THREAD ((size_t) 1 << 15)

typedef struct span_job
{
	const uint64_t *keys;
	uint64_t	plain;
	uint64_t	folded;
} span_job;

static void
span_range(void *arg, size_t begin, size_t end)
{
	span_job   *job = arg;
	const uint64_t *keys = job->keys;
	uint64_t	p0 = 0,
				p1 = 0,
				f0 = 0,
				f1 = 0;
	size_t		i = begin;

	for (; i + 2 <= end; i += 2)
	{
		p0 |= keys[i];
		p1 |= keys[i + 1];
		f0 |= CPHT_KEY_FOLD(keys[i]);
		f1 |= CPHT_KEY_FOLD(keys[i + 1]);
	}
	if (i < end)
	{
		p0 |= keys[i];
		f0 |= CPHT_KEY_FOLD(keys[i]);
	}
	__atomic_fetch_or(&job->plain, p0 | p1, __ATOMIC_RELAXED);
	__atomic_fetch_or(&job->folded, f0 | f1, __ATOMIC_RELAXED);
}

void
util_key_span(const uint64_t *keys, size_t n, int threads, cpht_key_span *span)
{
	span_job	job = {keys, 0, 0};

	if (threads <= 0)
		threads = (int) sysconf(_SC_NPROCESSORS_ONLN);
	cpu_parallel_for_min(threads, n, SPAN_KEYS_PER_THREAD, span_range, &job);
	span->plain = job.plain;
	span->folded = job.folded;
}

/* A copy's slice that also takes the span of the keys it copies. */
typedef struct spanned_copy_job
{
	uint64_t   *dst;
	span_job	span;
} spanned_copy_job;

static void
spanned_copy_range(void *arg, size_t begin, size_t end)
{
	spanned_copy_job *job = arg;

	memcpy(job->dst + begin, job->span.keys + begin, (end - begin) * sizeof(uint64_t));
	/* the slice is in this core's cache now: the span costs no memory traffic */
	span_range(&job->span, begin, end);
}

void
cpht_copy_keys_spanned(uint64_t *dst, const uint64_t *src, size_t n, int threads,
					   cpht_key_span *span)
{
	spanned_copy_job job = {dst, {src, 0, 0}};

	if (threads <= 0)
		threads = (int) sysconf(_SC_NPROCESSORS_ONLN);
	cpu_parallel_for_min(threads, n, SPAN_COPY_KEYS_PER_THREAD, spanned_copy_range, &job);
	span->plain = job.span.plain;
	span->folded = job.span.folded;
}
