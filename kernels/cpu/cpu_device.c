/*
 * cpu_device.c — the CPU implementation of the table interface: slot
 * memory from mmap (huge pages), batches split over threads, algorithms from
 * cpu_iceberg.c and cpu_cuckoo.c.
 *
 * Each thread walks its share of the batch with a short prefetch window:
 * buckets are spread at random over a table much larger than the caches,
 * so overlapping the misses of a few keys is what sets the speed.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cpu/cpu_ops.h"
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

static uint64_t
level_bytes(const layout_level *lv)
{
	return lv->buckets * (uint64_t) lv->bucket_slots * (uint64_t) (lv->slot_bits / 8);
}

/*
 * Zeroed slot memory straight from the kernel, asking for transparent huge
 * pages: buckets are touched at random, so 4 kB pages cost a page fault per
 * page on first touch and a TLB miss on nearly every access.
 */
static void *
slots_alloc(uint64_t bytes)
{
	void	   *p;

	if (bytes != (size_t) bytes)
		return NULL;
	p = mmap(NULL, (size_t) bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
#ifdef MADV_HUGEPAGE
	(void) madvise(p, (size_t) bytes, MADV_HUGEPAGE);
#endif
	return p;
}

static void
slots_free(layout_level *lv)
{
	if (lv->slots)
		munmap(lv->slots, (size_t) level_bytes(lv));
	lv->slots = NULL;
}

static cpht_status
cpu_create(cpht_table *t)
{
	for (int l = 0; l < t->levels; l++)
	{
		layout_level *lv = &t->level[l];
		uint64_t	bytes = level_bytes(lv);

		lv->slots = slots_alloc(bytes);
		if (lv->slots == NULL)
		{
			for (int k = 0; k < l; k++)
				slots_free(&t->level[k]);
			return table_fail(t, CPHT_ERR_NOMEM,
							  "could not allocate %llu bytes of host memory for level %d",
							  (unsigned long long) bytes, l + 1);
		}
	}
	return CPHT_OK;
}

static void
cpu_destroy(cpht_table *t)
{
	for (int l = 0; l < t->levels; l++)
		slots_free(&t->level[l]);
}

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
 * out[i] is 0 for every key not reached, as the backend interface asks.
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

/* ---- the backend -------------------------------------------------------- */

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

static cpht_status
cpu_find_or_put(cpht_table *t, const uint64_t *keys, size_t n,
				uint8_t *status, uint64_t *homeless, size_t *nhomeless,
				cpht_tally *tally, uint64_t log_at)
{
	batch_job	job = {.t = t, .keys = keys, .out = status};
	cpht_status rc = CPHT_OK;

	(void) log_at;
	*nhomeless = 0;
	if (t->params.kind == CPHT_CUCKOO)
		rc = cuckoo_fop_batch(t, keys, n, status, homeless, nhomeless);
	else
		rc = run_steps(t, &job, n, iceberg_fop_range);
	if (rc == CPHT_OK)
		tally_status(t, status, n, CPHT_PUT, tally);
	return rc;
}

static cpht_status
cpu_find(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *found)
{
	batch_job	job = {.t = t, .keys = keys, .out = found};

	cpu_parallel_for(t->params.cpu_threads, n,
					 t->params.kind == CPHT_CUCKOO ? cuckoo_find_range : iceberg_find_range,
					 &job);
	return CPHT_OK;
}

static cpht_status
cpu_erase(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *present, int to_empty,
		  cpht_tally *tally, uint64_t log_at)
{
	batch_job	job = {.t = t, .keys = keys, .out = present};
	cpht_status rc;

	(void) log_at;
	job.replacement = to_empty ? CPHT_SLOT_EMPTY : CPHT_SLOT_TOMBSTONE;
	rc = run_steps(t, &job, n, t->params.kind == CPHT_CUCKOO ? cuckoo_erase_range : iceberg_erase_range);
	if (rc == CPHT_OK)
		tally_status(t, present, n, CPHT_WHERE(0, 0), tally);
	return rc;
}

static cpht_status
cpu_scan(cpht_table *t, uint64_t *live, uint64_t *tombstones)
{
	for (int l = 0; l < t->levels; l++)
	{
		const layout_level *lv = &t->level[l];
		uint64_t	nslots = lv->buckets * (uint64_t) lv->bucket_slots;

		live[l] = tombstones[l] = 0;
		for (uint64_t i = 0; i < nslots; i++)
		{
			uint64_t	s = lv->slot_bits == 16 ? ((uint16_t *) lv->slots)[i]
				: lv->slot_bits == 32 ? ((uint32_t *) lv->slots)[i]
				: ((uint64_t *) lv->slots)[i];

			live[l] += slot_is_live(s);
			tombstones[l] += s == CPHT_SLOT_TOMBSTONE;
		}
	}
	return CPHT_OK;
}

static void
cpu_device_name(cpht_table *t, char *buf, size_t len)
{
	snprintf(buf, len, "CPU (%d threads)", t->params.cpu_threads);
}

static uint64_t
cpu_staging_bytes(cpht_table *t)
{
	(void) t;
	return 0;
}

/* Put a key back into the slot its erase reported (device_ops.h). */
static uint8_t
revive_at(const cpht_table *t, uint64_t key, uint8_t where)
{
	int			level,
				c;
	const layout_level *lv;
	layout_perm p;
	uint64_t	expected = CPHT_SLOT_TOMBSTONE;

	layout_where_bucket(t->levels, CPHT_WHERE_ORDER(where), &level, &c);
	lv = &t->level[level];
	if (c >= lv->choices || CPHT_WHERE_SLOT(where) >= lv->bucket_slots)
		return CPHT_FULL;
	p = layout_level_perm(lv, t->params.key_bits, c);
	return cpu_slot_cas(lv, layout_bucket_start(lv, layout_address(p, key)) + CPHT_WHERE_SLOT(where),
						&expected, slot_encode(layout_remainder(p, key), c, lv->choice_bits))
		? CPHT_PUT : CPHT_FULL;
}

typedef struct revive_job
{
	const cpht_table *t;
	const uint64_t *keys;
	const uint8_t *where;
	uint8_t    *status;
} revive_job;

static void
revive_range(void *arg, size_t begin, size_t end)
{
	revive_job *job = arg;

	for (size_t i = begin; i < end; i++)
		job->status[i] = revive_at(job->t, job->keys[i], job->where[i]);
}

static cpht_status
cpu_revive(cpht_table *t, const uint64_t *keys, const uint8_t *where, size_t n, uint8_t *status)
{
	revive_job	job = {t, keys, where, status};

	cpu_parallel_for(t->params.cpu_threads, n, revive_range, &job);
	return CPHT_OK;
}

/* Bytes copied between interrupt checks: a level of a large table takes
 * a few hundred milliseconds to copy (a rebuild reads it). */
#define COPY_PIECE_BYTES ((size_t) 32 << 20)

static cpht_status
cpu_copy_slots(cpht_table *t, int level, void *host)
{
	const layout_level *lv = &t->level[level];
	size_t		bytes = (size_t) level_bytes(lv);

	for (size_t at = 0; at < bytes; at += COPY_PIECE_BYTES)
	{
		if (at > 0 && table_interrupted())
			return table_fail(t, CPHT_ERR_CANCELED, "canceled while copying the table");
		memcpy((char *) host + at, (const char *) lv->slots + at,
			   bytes - at < COPY_PIECE_BYTES ? bytes - at : COPY_PIECE_BYTES);
	}
	return CPHT_OK;
}

static cpht_status
cpu_copy_slot_range(cpht_table *t, int level, uint64_t first, uint64_t count, void *host)
{
	const layout_level *lv = &t->level[level];
	size_t		width = (size_t) (lv->slot_bits / 8);

	memcpy(host, (const char *) lv->slots + (size_t) first * width, (size_t) count * width);
	return CPHT_OK;
}

static cpht_status
cpu_write_slots(cpht_table *t, int level, const void *host)
{
	const layout_level *lv = &t->level[level];

	memcpy(lv->slots, host, (size_t) level_bytes(lv));
	return CPHT_OK;
}

static cpht_status
cpu_write_slot_bytes(cpht_table *t, int level, uint64_t offset, const void *host, uint64_t bytes)
{
	memcpy((char *) t->level[level].slots + offset, host, (size_t) bytes);
	return CPHT_OK;
}

/* cpu_write_slot_bytes is done when it returns */
static cpht_status
cpu_slot_writes_wait(cpht_table *t)
{
	(void) t;
	return CPHT_OK;
}

/*
 * Growth: every live key of `from` into `to`.  Slot ranges of MOVE_SLOTS are
 * decoded into keys over the threads (each thread its own part of the
 * range, written at the part's start and packed afterwards), then inserted
 * into `to` as one find-or-put.
 */
#define MOVE_SLOTS ((uint64_t) 1 << 20)
#define MOVE_PARTS 64

typedef struct move_job
{
	const cpht_table *from;
	const layout_level *lv;
	uint64_t	begin;			/* first slot of the range */
	uint64_t	len;
	uint64_t   *keys;			/* room for len keys */
	size_t		count[MOVE_PARTS];
} move_job;

static void
move_decode_parts(void *arg, size_t pbegin, size_t pend)
{
	move_job   *j = arg;
	const layout_level *lv = j->lv;
	uint64_t	per = (j->len + MOVE_PARTS - 1) / MOVE_PARTS;

	for (size_t p = pbegin; p < pend; p++)
	{
		uint64_t	lo = p * per,
					hi = lo + per < j->len ? lo + per : j->len;
		size_t		c = 0;

		for (uint64_t i = lo; i < hi; i++)
		{
			uint64_t	s = cpu_slot_load(lv, j->begin + i);
			int			ch;

			if (!slot_is_live(s))
				continue;
			ch = slot_choice(s, lv->choice_bits);
			j->keys[lo + c++] = layout_key(layout_level_perm(lv, j->from->params.key_bits, ch),
										   (j->begin + i) / (uint64_t) lv->bucket_slots,
										   slot_remainder(s, lv->choice_bits));
		}
		j->count[p] = lo < hi ? c : 0;
	}
}

static cpht_status
cpu_move_keys(cpht_table *to, cpht_table *from, uint64_t *full)
{
	uint64_t   *keys = malloc(MOVE_SLOTS * sizeof(uint64_t));
	uint64_t   *homeless = malloc(MOVE_SLOTS * sizeof(uint64_t));
	uint8_t    *status = malloc(MOVE_SLOTS);
	move_job   *job = malloc(sizeof(move_job));
	cpht_status rc = CPHT_OK;

	*full = 0;
	if (!keys || !homeless || !status || !job)
		rc = table_fail(to, CPHT_ERR_NOMEM, "out of host memory for growing the table");
	for (int l = 0; rc == CPHT_OK && l < from->levels; l++)
	{
		const layout_level *lv = &from->level[l];
		uint64_t	nslots = lv->buckets * (uint64_t) lv->bucket_slots;

		for (uint64_t at = 0; rc == CPHT_OK && at < nslots && *full == 0; at += MOVE_SLOTS)
		{
			uint64_t	per;
			size_t		n = 0,
						nhomeless = 0;
			cpht_tally	tally = {0, 0};

			if (at > 0 && table_interrupted())
			{
				rc = table_fail(to, CPHT_ERR_CANCELED, "growing the table was canceled; the table is unchanged");
				break;
			}
			job->from = from;
			job->lv = lv;
			job->begin = at;
			job->len = nslots - at < MOVE_SLOTS ? nslots - at : MOVE_SLOTS;
			job->keys = keys;
			cpu_parallel_for_min(from->params.cpu_threads, MOVE_PARTS, 1, move_decode_parts, job);
			per = (job->len + MOVE_PARTS - 1) / MOVE_PARTS;
			for (size_t p = 0; p < MOVE_PARTS; p++)
			{
				memmove(keys + n, keys + p * per, job->count[p] * sizeof(uint64_t));
				n += job->count[p];
			}
			rc = cpu_find_or_put(to, keys, n, status, homeless, &nhomeless, &tally, CPHT_NO_LOG);
			if (rc == CPHT_OK)
				*full = tally.full + nhomeless;
		}
	}
	free(keys);
	free(homeless);
	free(status);
	free(job);
	return rc;
}

/* host memory: no device to report */
static void
cpu_device_memory(cpht_table *t, uint64_t *free_bytes, uint64_t *total_bytes)
{
	(void) t;
	*free_bytes = *total_bytes = 0;
}

static int
cpu_device_ordinal(cpht_table *t)
{
	(void) t;
	return -1;
}

/* No log store and no pinned memory: the table layer keeps the undo log
 * in host memory. */
const cpht_device_ops cpht_cpu_ops = {
	.name = "cpu",
	.create = cpu_create,
	.destroy = cpu_destroy,
	.find_or_put = cpu_find_or_put,
	.find = cpu_find,
	.erase = cpu_erase,
	.scan = cpu_scan,
	.device_name = cpu_device_name,
	.staging_bytes = cpu_staging_bytes,
	.copy_slots = cpu_copy_slots,
	.revive = cpu_revive,
	.write_slots = cpu_write_slots,
	.write_slot_bytes = cpu_write_slot_bytes,
	.slot_writes_wait = cpu_slot_writes_wait,
	.move_keys = cpu_move_keys,
	.copy_slot_range = cpu_copy_slot_range,
	.create_slots = cpu_create,
	.destroy_slots = cpu_destroy,
	.device_memory = cpu_device_memory,
	.device_ordinal = cpu_device_ordinal,
};
