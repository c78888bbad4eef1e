/*
 * cpu_batches.c — a batch of find-or-put, find or erase on the CPU: the
 * keys split over the table's threads (util/threads.h), each thread
 * walking its share with a short prefetch window (buckets are spread at
 * random over a table much larger than the caches, so overlapping the
 * misses of a few keys is what sets the speed), the algorithms one key at
 * a time from cpu_iceberg.c and cpu_cuckoo.c, and the tally of the
 * outcome.
 *
 * Invariants: find-or-put and erase go step by step (run_steps), so an
 * injected fault leaves the steps done and 0 for every key not reached,
 * as the device interface asks; a cuckoo put stops at the first key left
 * without a slot and reports the rest homeless, untried.  Threads share
 * the slots only through the atomics of cpu_slots.h.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_device.h"
#include "cpu/cpu_slots.h"

#define PREFETCH_AHEAD 16

typedef struct batch_job
{
	const cpht_table *t;
	const uint64_t *keys;
	uint8_t    *out;
	uint64_t   *homeless;
	_Atomic size_t nhomeless;
	int			stop_at_homeless;	/* cuckoo put: the first homeless key
									 * fails the call (not while the table
									 * layer re-inserts evicted keys) */
	uint64_t	replacement;	/* erase: tombstone or EMPTY */
} batch_job;

/* ---- iceberg ------------------------------------------------------------ */

static void
iceberg_fop_range(void *arg, size_t begin, size_t end)
{
	batch_job  *job = arg;

	for (size_t i = begin; i < end; i++)
	{
		if (i + PREFETCH_AHEAD < end)
			iceberg_prefetch(job->t, job->keys[i + PREFETCH_AHEAD]);
		job->out[i] = iceberg_fop(job->t, job->keys[i]);
	}
}

static void
iceberg_find_range(void *arg, size_t begin, size_t end)
{
	batch_job  *job = arg;

	for (size_t i = begin; i < end; i++)
	{
		if (i + PREFETCH_AHEAD < end)
			iceberg_prefetch(job->t, job->keys[i + PREFETCH_AHEAD]);
		job->out[i] = (uint8_t) iceberg_find(job->t, job->keys[i]);
	}
}

static void
iceberg_erase_range(void *arg, size_t begin, size_t end)
{
	batch_job  *job = arg;

	for (size_t i = begin; i < end; i++)
		job->out[i] = iceberg_erase(job->t, job->keys[i], job->replacement);
}

/*
 * A find-or-put or erase goes over its keys in steps of CPU_STEP_KEYS (all
 * threads on one step at a time), and each step first asks the fault
 * injection of the tests (faults.h), so a failure can strike a call
 * part way as a device fault does on the GPU.  A step is milliseconds of
 * work, next to which starting the threads (tens of microseconds) is little.
 */
#define CPU_STEP_KEYS ((size_t) 1 << 16)

/*
 * Run fn over job->keys[0, n) step by step (job->keys and job->out point at
 * the step's part while it runs).  On a fault the steps done stay done and
 * out[i] is 0 for every key not reached, as the device ops table asks.
 */
static cpht_status
run_steps(cpht_table *t, batch_job *job, size_t n, cpu_range_fn fn)
{
	const uint64_t *keys = job->keys;
	uint8_t    *out = job->out;
	cpht_status rc = CPHT_OK;

	for (size_t off = 0; off < n; off += CPU_STEP_KEYS)
	{
		size_t		m = n - off < CPU_STEP_KEYS ? n - off : CPU_STEP_KEYS;

		if (table_fault_step())
		{
			if (out)
				memset(out + off, 0, n - off);
			rc = table_fail(t, CPHT_ERR_DEVICE, "injected fault after %zu of %zu keys", off, n);
			break;
		}
		job->keys = keys + off;
		job->out = out ? out + off : NULL;
		cpu_parallel_for(t->params.cpu_threads, m, fn, job);
		/* a homeless key fails the call: the steps after it are moot, and
		 * their keys are reported homeless, untried (cuckoo_put_range) */
		if (job->stop_at_homeless && atomic_load(&job->nhomeless) > 0)
		{
			for (size_t i = off + m; i < n; i++)
				job->homeless[atomic_fetch_add(&job->nhomeless, 1)] = keys[i];
			break;
		}
	}
	job->keys = keys;
	job->out = out;
	return rc;
}

/* ---- cuckoo ------------------------------------------------------------- */

static void
cuckoo_find_range(void *arg, size_t begin, size_t end)
{
	batch_job  *job = arg;

	for (size_t i = begin; i < end; i++)
	{
		if (i + PREFETCH_AHEAD < end)
			cuckoo_prefetch(job->t, job->keys[i + PREFETCH_AHEAD]);
		job->out[i] = (uint8_t) cuckoo_find(job->t, job->keys[i]);
	}
}

static void
cuckoo_put_range(void *arg, size_t begin, size_t end)
{
	batch_job  *job = arg;

	for (size_t i = begin; i < end; i++)
	{
		uint64_t	homeless;

		/*
		 * Once a key is homeless the call fails and is undone whole, so
		 * the keys after it are not worth an eviction chain each (in a
		 * table full of tombstones a rollback still needs, every one of
		 * them would run the chain to its bound).  They are reported
		 * homeless, untried: the undo of a failing call drops the new
		 * ones, and when the undo itself re-inserts evicted keys, it
		 * retries or stashes them, so none is lost.
		 */
		if (job->stop_at_homeless && atomic_load_explicit(&job->nhomeless, memory_order_relaxed) > 0)
		{
			for (; i < end; i++)
				job->homeless[atomic_fetch_add(&job->nhomeless, 1)] = job->keys[i];
			break;
		}
		if (i + PREFETCH_AHEAD < end)
			cuckoo_prefetch(job->t, job->keys[i + PREFETCH_AHEAD]);
		if (!cuckoo_put(job->t, job->keys[i], &homeless))
			job->homeless[atomic_fetch_add(&job->nhomeless, 1)] = homeless;
	}
}

static void
cuckoo_erase_range(void *arg, size_t begin, size_t end)
{
	batch_job  *job = arg;

	for (size_t i = begin; i < end; i++)
		job->out[i] = cuckoo_erase(job->t, job->keys[i]);
}

/*
 * Sort-based find-or-put of the paper's baseline: group duplicates by
 * sorting, look each distinct key up once, put the absent ones.  Not safe
 * for concurrent batches on one table (a find may miss a key that a
 * concurrent put is moving); the table layer runs one batch at a time.
 */
static cpht_status
cuckoo_fop_batch(cpht_table *t, const uint64_t *keys, size_t n,
				 uint8_t *status, uint64_t *homeless, size_t *nhomeless)
{
	cpht_key_index *items = malloc((n ? n : 1) * sizeof(cpht_key_index));
	uint64_t   *distinct = malloc((n ? n : 1) * sizeof(uint64_t));
	uint64_t   *first = malloc((n ? n : 1) * sizeof(uint64_t));
	uint8_t    *found = malloc(n ? n : 1);
	batch_job	job = {.t = t};
	size_t		nd = 0,
				absent = 0;
	cpht_status rc;

	if (!items || !distinct || !first || !found)
		goto nomem;
	for (size_t i = 0; i < n; i++)
	{
		items[i].key = keys[i];
		items[i].index = i;
	}
	if (cpht_sort_key_index(items, n) != 0)
		goto nomem;

	/* One representative per distinct key: its first occurrence. */
	memset(status, CPHT_FOUND, n);
	for (size_t i = 0; i < n; i++)
		if (i == 0 || items[i].key != items[i - 1].key)
		{
			distinct[nd] = items[i].key;
			first[nd++] = items[i].index;
		}
	free(items);
	items = NULL;

	job.keys = distinct;
	job.out = found;
	cpu_parallel_for(t->params.cpu_threads, nd, cuckoo_find_range, &job);

	/* Compact the absent keys to the front; their first occurrence is PUT. */
	for (size_t d = 0; d < nd; d++)
		if (!found[d])
		{
			status[first[d]] = CPHT_PUT;
			distinct[absent++] = distinct[d];
		}

	/* A fault part way leaves every absent key PUT: it may be inserted. */
	job.keys = distinct;
	job.out = NULL;
	job.homeless = homeless;
	job.stop_at_homeless = !t->reinserting;
	atomic_init(&job.nhomeless, 0);
	rc = run_steps(t, &job, absent, cuckoo_put_range);
	*nhomeless = atomic_load(&job.nhomeless);

	free(distinct);
	free(first);
	free(found);
	return rc;

nomem:
	free(items);
	free(distinct);
	free(first);
	free(found);
	return table_fail(t, CPHT_ERR_NOMEM, "could not allocate host memory for a batch of %zu keys", n);
}

/* An iceberg find-or-put: step by step over the threads.  A key that finds
 * no slot is answered CPHT_FULL; none is left homeless. */
static cpht_status
iceberg_fop_batch(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *status,
				  uint64_t *homeless, size_t *nhomeless)
{
	batch_job	job = {.t = t, .keys = keys, .out = status};

	(void) homeless;
	(void) nhomeless;
	return run_steps(t, &job, n, iceberg_fop_range);
}

/* What each table kind runs on the CPU, indexed by cpht_kind (the code;
 * the rules of the kind's layout are t->kind_policy's, kind_policy.h). */
typedef struct cpu_kind
{
	cpht_status (*find_or_put) (cpht_table *t, const uint64_t *keys, size_t n,
								uint8_t *status, uint64_t *homeless, size_t *nhomeless);
	cpu_range_fn find_range;
	cpu_range_fn erase_range;
} cpu_kind;

static const cpu_kind cpu_kinds[] = {
	[CPHT_ICEBERG] = {iceberg_fop_batch, iceberg_find_range, iceberg_erase_range},
	[CPHT_CUCKOO] = {cuckoo_fop_batch, cuckoo_find_range, cuckoo_erase_range},
};

/* Count the outcome of a batch over the table's threads (the CPU keeps no
 * log store: log_at is always CPHT_NO_LOG here). */
typedef struct tally_job
{
	const uint8_t *out;
	uint8_t		hit;			/* CPHT_WHERE(0, 0): any place code counts */
	uint64_t	hits;			/* summed atomically by the threads */
	uint64_t	full;
} tally_job;

static void
tally_range(void *arg, size_t begin, size_t end)
{
	tally_job  *job = arg;
	uint64_t	hits = 0,
				full = 0;

	for (size_t i = begin; i < end; i++)
	{
		hits += job->hit == CPHT_WHERE(0, 0) ? CPHT_IS_WHERE(job->out[i]) : job->out[i] == job->hit;
		full += job->out[i] == CPHT_FULL;
	}
	__atomic_fetch_add(&job->hits, hits, __ATOMIC_RELAXED);
	__atomic_fetch_add(&job->full, full, __ATOMIC_RELAXED);
}

static void
tally_status(const cpht_table *t, const uint8_t *out, size_t n, uint8_t hit, cpht_tally *tally)
{
	tally_job	job = {out, hit, 0, 0};

	/* Joining the threads orders their sums before these reads. */
	cpu_parallel_for(t->params.cpu_threads, n, tally_range, &job);
	tally->hits = job.hits;
	tally->full = job.full;
}

cpht_status
cpu_find_or_put(cpht_table *t, const uint64_t *keys, size_t n,
				uint8_t *status, uint64_t *homeless, size_t *nhomeless,
				cpht_tally *tally, uint64_t log_at)
{
	cpht_status rc;

	(void) log_at;
	*nhomeless = 0;
	rc = cpu_kinds[t->params.kind].find_or_put(t, keys, n, status, homeless, nhomeless);
	if (rc == CPHT_OK)
		tally_status(t, status, n, CPHT_PUT, tally);
	return rc;
}

cpht_status
cpu_find(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *found)
{
	batch_job	job = {.t = t, .keys = keys, .out = found};

	cpu_parallel_for(t->params.cpu_threads, n, cpu_kinds[t->params.kind].find_range, &job);
	return CPHT_OK;
}

cpht_status
cpu_erase(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *present, int to_empty,
		  cpht_tally *tally, uint64_t log_at)
{
	batch_job	job = {.t = t, .keys = keys, .out = present};
	cpht_status rc;

	(void) log_at;
	job.replacement = to_empty ? CPHT_SLOT_EMPTY : CPHT_SLOT_TOMBSTONE;
	rc = run_steps(t, &job, n, cpu_kinds[t->params.kind].erase_range);
	if (rc == CPHT_OK)
		tally_status(t, present, n, CPHT_WHERE(0, 0), tally);
	return rc;
}
