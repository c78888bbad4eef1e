/*
 * table_log.c — the undo log of transactional tables: where its keys live
 * (host memory, or the backend's store), making room before a call, runs of
 * inserts and deletes, savepoint positions and truncation.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE				/* mremap */
#endif
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "util/threads.h"
#include "table/table_layer.h"

/*
 * Where the log's keys live.  The CPU keeps them here, in host memory; the
 * GPU keeps them in device memory, written by the kernels that insert or
 * delete them, so logging a large ingest costs no host work and no
 * transfer (a rollback reads them back).
 */
int
table_log_on_device(const cpht_table *t)
{
	return t->ops->log_store != NULL;
}

/*
 * The host store is an anonymous mapping grown with mremap: a large ingest
 * logs hundreds of megabytes, and realloc would copy them at every doubling
 * and fault in 4 kB pages one by one; huge pages and no copies keep logging
 * a small part of a call's time.
 */
static void *
log_grow(void *p, size_t old_bytes, size_t new_bytes)
{
	void	   *q = old_bytes
		? mremap(p, old_bytes, new_bytes, MREMAP_MAYMOVE)
		: mmap(NULL, new_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (q == MAP_FAILED)
		return NULL;
#ifdef MADV_HUGEPAGE
	(void) madvise(q, new_bytes, MADV_HUGEPAGE);
#endif
	return q;
}

void
table_log_free(cpht_table *t)
{
	if (t->log_keys)
		munmap(t->log_keys, t->log_cap * sizeof(uint64_t));
	else if (t->log_cap && table_log_on_device(t))
		t->ops->log_store->release(t);
	table_memory_give(t->log_cap * sizeof(uint64_t));
	t->log_keys = NULL;
	t->log_cap = 0;
	free(t->log_runs);
	t->log_runs = NULL;
	t->log_nruns = 0;
	t->log_runs_cap = 0;
	free(t->log_where);
	t->log_where = NULL;
	t->log_nwhere = 0;
	t->log_where_cap = 0;
	t->keep_tombstones = t->held_deletes > 0;
}

/*
 * Make room for `extra` more entries after the log's end and the `pending`
 * entries a call already wrote past it (a GPU call's earlier chunks, not yet
 * counted in log_len: growing the store must keep them), plus the one spare
 * slot table_log_append writes past the last entry, and for one more run, before a
 * call changes anything: a call that cannot log what it will do fails
 * untouched.
 */
cpht_status
table_log_reserve(cpht_table *t, uint64_t pending, uint64_t extra)
{
	uint64_t	want = t->log_len + pending + extra + 1;
	uint64_t	cap = t->log_cap ? t->log_cap : 4096;

	if (!t->logging)
		return CPHT_OK;
	if (t->log_nruns == t->log_runs_cap)
	{
		size_t		runs = t->log_runs_cap ? 2 * t->log_runs_cap : 16;
		cpht_log_run *grown = realloc(t->log_runs, runs * sizeof(cpht_log_run));

		if (grown == NULL)
			return table_fail(t, CPHT_ERR_NOMEM, "out of host memory for the undo log");
		t->log_runs = grown;
		t->log_runs_cap = runs;
	}
	if (want <= t->log_cap)
		return CPHT_OK;
	while (cap < want)
		cap *= 2;
	if (!table_memory_take((cap - t->log_cap) * sizeof(uint64_t)))
		return table_fail(t, CPHT_ERR_LIMIT, "growing the undo log to %llu entries (%llu bytes) would pass the memory limit",
						  (unsigned long long) cap, (unsigned long long) (cap * sizeof(uint64_t)));
	if (table_log_on_device(t))
	{
		cpht_status rc = t->ops->log_store->reserve(t, cap, t->log_len + pending);

		if (rc != CPHT_OK)
		{
			table_memory_give((cap - t->log_cap) * sizeof(uint64_t));
			return rc;
		}
	}
	else
	{
		uint64_t   *keys = log_grow(t->log_keys, t->log_cap * sizeof(uint64_t), cap * sizeof(uint64_t));

		if (keys == NULL)
		{
			table_memory_give((cap - t->log_cap) * sizeof(uint64_t));
			return table_fail(t, CPHT_ERR_NOMEM, "out of host memory for the undo log (%llu entries)",
							  (unsigned long long) want);
		}
		t->log_keys = keys;
	}
	t->log_cap = cap;
	return CPHT_OK;
}

/*
 * Give back what the log grew past `cap` entries, once a call that grew it
 * was undone: a sharded call's shards grow their logs one by one, and when
 * one is refused by the memory limit the others' growth must not stay
 * held, or the transaction's next call, which fits, meets the limit (seen
 * with 4 shards).  Only while the log's entries and its spare slot fit
 * `cap`; when the smaller store cannot be made the larger one stays.
 */
void
table_log_trim(cpht_table *t, uint64_t cap)
{
	uint64_t	was = t->log_cap;

	if (cap >= was || (cap == 0 ? t->log_len > 0 : t->log_len + 1 > cap))
		return;
	if (cap == 0)
	{
		if (t->log_keys)
			munmap(t->log_keys, was * sizeof(uint64_t));
		else if (table_log_on_device(t))
			t->ops->log_store->release(t);
		t->log_keys = NULL;
	}
	else if (table_log_on_device(t))
	{
		if (t->ops->log_store->reserve(t, cap, t->log_len) != CPHT_OK)
			return;
	}
	else
	{
		/* shrinking a mapping in place never moves it */
		if (mremap(t->log_keys, was * sizeof(uint64_t), cap * sizeof(uint64_t), 0) == MAP_FAILED)
			return;
	}
	t->log_cap = cap;
	table_memory_give((was - cap) * sizeof(uint64_t));
}

/* Room for the places of `extra` more deleted entries (log_where). */
cpht_status
table_log_reserve_where(cpht_table *t, uint64_t extra)
{
	uint64_t	want = t->log_nwhere + extra;
	uint64_t	cap = t->log_where_cap ? t->log_where_cap : 4096;
	uint8_t    *grown;

	if (!t->logging || want <= t->log_where_cap)
		return CPHT_OK;
	while (cap < want)
		cap *= 2;
	grown = realloc(t->log_where, (size_t) cap);
	if (grown == NULL)
		return table_fail(t, CPHT_ERR_NOMEM, "out of host memory for the undo log (%llu deleted keys)",
						  (unsigned long long) want);
	t->log_where = grown;
	t->log_where_cap = cap;
	return CPHT_OK;
}

/*
 * The store holds `added` more entries of one kind: extend the runs.  For
 * deleted entries the caller wrote their places at log_where[log_nwhere...].
 */
void
table_log_mark(cpht_table *t, int deleted, uint64_t added)
{
	if (!t->logging || added == 0)
		return;
	if (t->log_nruns == 0 || t->log_runs[t->log_nruns - 1].deleted != deleted)
	{
		/* table_log_reserve made room for this run */
		t->log_runs[t->log_nruns].start = t->log_len;
		t->log_runs[t->log_nruns].deleted = deleted;
		t->log_runs[t->log_nruns].where_at = t->log_nwhere;
		t->log_nruns++;
	}
	t->log_len += added;
	if (deleted)
		t->log_nwhere += added;
	t->keep_tombstones = t->log_nwhere > 0 || t->held_deletes > 0;
}

/*
 * Host store: log keys[i] where flags[i] == which, `matches` of them, for
 * which table_log_reserve made room.  A large call is split into blocks of
 * LOG_BLOCK keys over the table's threads: each block's matches are counted,
 * a prefix sum gives each block its first entry, then the blocks are copied
 * (a single thread appends 50M keys in about 150 ms, long next to the call).
 * A small call runs one loop that stores every key and advances past the
 * matching ones only (no branch on flags), writing one entry past the last:
 * table_log_reserve keeps a spare slot for that.
 */
#define LOG_BLOCK ((size_t) 1 << 16)

typedef struct log_job
{
	const uint64_t *keys;
	const uint8_t *flags;
	size_t		n;
	uint8_t		which;
	uint64_t   *out;			/* the first new entry */
	uint64_t   *offsets;		/* per block: matches, then first entry */
} log_job;

/* Block b covers keys [*lo, *hi). */
static inline void
log_block(const log_job *j, size_t b, size_t *lo, size_t *hi)
{
	*lo = b * LOG_BLOCK;
	*hi = *lo + LOG_BLOCK < j->n ? *lo + LOG_BLOCK : j->n;
}

static void
log_count_blocks(void *ctx, size_t begin, size_t end)
{
	log_job    *j = ctx;

	for (size_t b = begin; b < end; b++)
	{
		size_t		lo,
					hi;
		uint64_t	c = 0;

		log_block(j, b, &lo, &hi);
		for (size_t i = lo; i < hi; i++)
			c += j->flags[i] == j->which;
		j->offsets[b] = c;
	}
}

static void
log_copy_blocks(void *ctx, size_t begin, size_t end)
{
	log_job    *j = ctx;

	for (size_t b = begin; b < end; b++)
	{
		size_t		lo,
					hi;
		uint64_t   *out = j->out + j->offsets[b];

		log_block(j, b, &lo, &hi);
		/* A branch, not the spare-slot trick: the slot past this block's
		 * last entry is the next block's first, written by another thread. */
		for (size_t i = lo; i < hi; i++)
			if (j->flags[i] == j->which)
				*out++ = j->keys[i];
	}
}

void
table_log_append(cpht_table *t, const uint64_t *keys, size_t n, const uint8_t *flags,
		   uint8_t which, int deleted, uint64_t matches)
{
	size_t		nblocks = (n + LOG_BLOCK - 1) / LOG_BLOCK;
	uint64_t   *offsets = NULL;

	if (!t->logging || matches == 0)
		return;
	if (nblocks > 2 && t->params.cpu_threads > 1)
		offsets = malloc(nblocks * sizeof(uint64_t));
	if (offsets)
	{
		log_job		j = {keys, flags, n, which, t->log_keys + t->log_len, offsets};
		uint64_t	next = 0;

		cpu_parallel_for_min(t->params.cpu_threads, nblocks, 1, log_count_blocks, &j);
		for (size_t b = 0; b < nblocks; b++)
		{
			uint64_t	c = offsets[b];

			offsets[b] = next;
			next += c;
		}
		cpu_parallel_for_min(t->params.cpu_threads, nblocks, 1, log_copy_blocks, &j);
		free(offsets);
		table_log_mark(t, deleted, next);
	}
	else
	{
		uint64_t   *out = t->log_keys;
		uint64_t	len = t->log_len;

		/* A local, not t->log_len: stores through out could alias it. */
		for (size_t i = 0; i < n; i++)
		{
			out[len] = keys[i];
			len += flags[i] == which;
		}
		table_log_mark(t, deleted, len - t->log_len);
	}
}

void
table_single_set_logging(cpht_table *t, int on)
{
	table_settle(t);
	if (!on)
		table_single_truncate_log(t, 0);
	t->logging = on;
}

void
table_single_keep_log(cpht_table *t, uint64_t entries)
{
	t->log_keep = entries;
}

uint64_t
cpht_table_log_position(cpht_table *t)
{
	table_settle(t);
	return t->log_len;
}

void
table_single_truncate_log(cpht_table *t, uint64_t position)
{
	table_settle(t);
	/* Drop the runs that begin at or after position (the one holding it
	 * just ends there now). */
	while (t->log_nruns > 0 && t->log_runs[t->log_nruns - 1].start >= position)
		t->log_nruns--;
	if (position < t->log_len)
		t->log_len = position;
	if (t->log_nruns == 0)
		t->log_nwhere = 0;
	else
	{
		const cpht_log_run *last = &t->log_runs[t->log_nruns - 1];

		t->log_nwhere = last->where_at + (last->deleted ? t->log_len - last->start : 0);
	}
	t->keep_tombstones = t->log_nwhere > 0 || t->held_deletes > 0;
	if (t->log_len == 0)
		t->log_moved = 0;
	/* A finished transaction gives back a large log's memory, beyond what
	 * the caller asked it to keep for the next call. */
	if (t->log_len == 0 && t->log_cap > ((uint64_t) 1 << 16) && t->log_cap > t->log_keep)
		table_log_free(t);
}

cpht_status
table_single_log_read(cpht_table *t, uint64_t position, uint64_t n,
					  uint64_t *keys, uint8_t *where)
{
	cpht_status rc = CPHT_OK;

	table_settle(t);
	if (position > t->log_len || n > t->log_len - position)
		return table_fail(t, CPHT_ERR_INVALID, "log entries %llu to %llu are past the log's %llu",
						  (unsigned long long) position, (unsigned long long) (position + n),
						  (unsigned long long) t->log_len);
	if (n == 0)
		return CPHT_OK;
	if (table_log_on_device(t))
		rc = t->ops->log_store->read(t, position, (size_t) n, keys);
	else
		memcpy(keys, t->log_keys + position, (size_t) n * sizeof(uint64_t));
	if (rc != CPHT_OK)
		return rc;
	memset(where, 0, (size_t) n);
	for (size_t r = 0; r < t->log_nruns; r++)
	{
		const cpht_log_run *run = &t->log_runs[r];
		uint64_t	end = r + 1 < t->log_nruns ? t->log_runs[r + 1].start : t->log_len;
		uint64_t	lo = run->start > position ? run->start : position;
		uint64_t	hi = end < position + n ? end : position + n;

		if (!run->deleted || lo >= hi)
			continue;
		memcpy(where + (lo - position), t->log_where + run->where_at + (lo - run->start),
			   (size_t) (hi - lo));
	}
	return CPHT_OK;
}

void
table_single_hold_deletes(cpht_table *t, int64_t delta)
{
	table_settle(t);
	if (delta < 0 && (uint64_t) -delta > t->held_deletes)
		t->held_deletes = 0;
	else
		t->held_deletes += (uint64_t) delta;
	if (t->held_deletes == 0)
		t->held_places_stale = 0;
	t->keep_tombstones = t->log_nwhere > 0 || t->held_deletes > 0;
}

cpht_status
table_log_each_bucket_delete(cpht_table *t, table_log_delete_fn fn, void *arg,
							 const char *what)
{
	uint64_t   *keys = NULL;
	cpht_status rc = CPHT_OK;

	for (size_t r = 0; rc == CPHT_OK && r < t->log_nruns; r++)
	{
		const cpht_log_run *run = &t->log_runs[r];
		uint64_t	end = r + 1 < t->log_nruns ? t->log_runs[r + 1].start : t->log_len;
		size_t		len = (size_t) (end - run->start);
		const uint64_t *k;

		if (!run->deleted || len == 0)
			continue;
		if (table_log_on_device(t))
		{
			uint64_t   *grown = realloc(keys, len * sizeof(uint64_t));

			if (grown == NULL)
			{
				rc = table_fail(t, CPHT_ERR_NOMEM, "out of host memory for %s", what);
				break;
			}
			keys = grown;
			rc = t->ops->log_store->read(t, run->start, len, keys);
			if (rc != CPHT_OK)
				break;
			k = keys;
		}
		else
			k = t->log_keys + run->start;
		for (size_t i = 0; i < len; i++)
		{
			uint8_t		w = t->log_where[run->where_at + i];

			if (w != CPHT_WHERE_STASH)
				fn(arg, k[i], w, run->where_at + i);
		}
	}
	free(keys);
	return rc;
}
