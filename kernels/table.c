/*
 * table.c — the table layer behind cpht_table.h: parameter checks and
 * sizing, the choice of implementation, the key count, undoing a call that
 * ran out of room, and the cuckoo stash.  Everything here is the same for
 * the CPU and the GPU; the algorithms live in the backends.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE				/* mremap */
#endif
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "cpu_ops.h"				/* cpu_parallel_for_min */
#include "table_internal.h"

/* Fill each kind reaches with margin on random keys (the sizing target). */
#define ICEBERG_TARGET_FILL 0.80
#define CUCKOO_TARGET_FILL 0.90
#define MIN_ADDR_BITS 3			/* at least 8 buckets per level */
#define MAX_ADDR_BITS 48
#define MAX_STASH_RETRIES 4
/* Keys per backend call in a long find-or-put: between chunks the call
 * looks for an interrupt, a fraction of a second apart (a GPU chunk takes
 * tens of milliseconds; larger chunks let it overlap transfers longer). */
#define CPU_CHUNK_KEYS ((size_t) 1 << 21)
#define GPU_CHUNK_KEYS_PER_CALL ((size_t) 1 << 24)

static cpht_interrupt_fn interrupt_check = NULL;

static double
clock_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The public batch calls time themselves (cpht_table_call_times). */
static void
call_begin(cpht_table *t)
{
	memset(&t->times, 0, sizeof(t->times));
	t->times.total = clock_ms();
}

static cpht_status
call_end(cpht_table *t, cpht_status rc)
{
	t->times.total = clock_ms() - t->times.total;
	return rc;
}

void
cpht_table_call_times(const cpht_table *t, cpht_call_times *out)
{
	*out = t->times;
}

void
cpht_set_interrupt_check(cpht_interrupt_fn fn)
{
	interrupt_check = fn;
}

static void streams_detach(cpht_table *t);
static void log_free(cpht_table *t);

cpht_status
table_fail(cpht_table *t, cpht_status code, const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(t->errmsg, sizeof(t->errmsg), fmt, ap);
	va_end(ap);
	return code;
}

static cpht_status param_fail(char *errbuf, size_t errlen, cpht_status code, const char *fmt,...)
#ifdef __GNUC__
			__attribute__((format(printf, 4, 5)))
#endif
			;

static cpht_status
param_fail(char *errbuf, size_t errlen, cpht_status code, const char *fmt,...)
{
	va_list		ap;

	if (errbuf && errlen)
	{
		va_start(ap, fmt);
		vsnprintf(errbuf, errlen, fmt, ap);
		va_end(ap);
	}
	return code;
}

static int
log2_exact(uint64_t x)
{
	int			b = 0;

	if (x == 0 || (x & (x - 1)) != 0)
		return -1;
	while ((x >> b) != 1)
		b++;
	return b;
}

/* ---- sizing and validation ---------------------------------------------- */

cpht_status
cpht_params_for_capacity(cpht_kind kind, uint64_t capacity, int key_bits,
						 cpht_params *out, char *errbuf, size_t errlen)
{
	int			n;

	memset(out, 0, sizeof(*out));
	if (kind != CPHT_ICEBERG && kind != CPHT_CUCKOO)
		return param_fail(errbuf, errlen, CPHT_ERR_INVALID, "unknown table kind %d", (int) kind);
	if (key_bits < 8 || key_bits > 64)
		return param_fail(errbuf, errlen, CPHT_ERR_INVALID, "key_bits must be between 8 and 64, not %d", key_bits);
	if (capacity == 0)
		return param_fail(errbuf, errlen, CPHT_ERR_INVALID, "capacity must be positive");
	/* No table needs room for more keys than the key domain has. */
	if (key_bits < 64 && capacity > ((uint64_t) 1 << key_bits))
		capacity = (uint64_t) 1 << key_bits;

	out->kind = kind;
	out->key_bits = key_bits;
	if (kind == CPHT_ICEBERG)
	{
		/*
		 * 16-slot primary buckets and 8-slot secondary buckets, the
		 * secondary level an eighth of the primary in slots: total slots
		 * = 18 * 2^n for 2^n primary buckets.
		 */
		for (n = MIN_ADDR_BITS + 2; n <= MAX_ADDR_BITS; n++)
			if (18.0 * (double) ((uint64_t) 1 << n) * ICEBERG_TARGET_FILL >= (double) capacity)
				break;
		out->bucket_slots[0] = 16;
		out->bucket_slots[1] = 8;
		out->slots[0] = (uint64_t) 16 << n;
		out->slots[1] = (uint64_t) 8 << (n - 2);
	}
	else
	{
		for (n = MIN_ADDR_BITS; n <= MAX_ADDR_BITS; n++)
			if (16.0 * (double) ((uint64_t) 1 << n) * CUCKOO_TARGET_FILL >= (double) capacity)
				break;
		out->bucket_slots[0] = 16;
		out->slots[0] = (uint64_t) 16 << n;
	}
	if (n > MAX_ADDR_BITS)
		return param_fail(errbuf, errlen, CPHT_ERR_NOMEM,
						  "capacity %llu is larger than any table cpht can allocate",
						  (unsigned long long) capacity);
	return CPHT_OK;
}

/* Fill in the level geometry of t from t->params, resolving slot widths. */
static cpht_status
resolve_layout(cpht_table *t, char *errbuf, size_t errlen)
{
	cpht_params *p = &t->params;

	if (p->kind != CPHT_ICEBERG && p->kind != CPHT_CUCKOO)
		return param_fail(errbuf, errlen, CPHT_ERR_INVALID, "unknown table kind %d", (int) p->kind);
	if (p->key_bits < 8 || p->key_bits > 64)
		return param_fail(errbuf, errlen, CPHT_ERR_INVALID, "key_bits must be between 8 and 64, not %d", p->key_bits);

	t->levels = p->kind == CPHT_ICEBERG ? 2 : 1;
	for (int l = 0; l < t->levels; l++)
	{
		layout_level *lv = &t->level[l];
		int			b = p->bucket_slots[l];
		int			needed;

		if (b != 4 && b != 8 && b != 16 && b != 32)
			return param_fail(errbuf, errlen, CPHT_ERR_INVALID,
							  "bucket size of level %d must be 4, 8, 16 or 32 slots, not %d", l + 1, b);
		if (p->slots[l] % (uint64_t) b != 0)
			return param_fail(errbuf, errlen, CPHT_ERR_INVALID,
							  "slots of level %d must be a multiple of the bucket size", l + 1);
		lv->bucket_slots = b;
		lv->buckets = p->slots[l] / (uint64_t) b;
		lv->addr_bits = log2_exact(lv->buckets);
		if (lv->addr_bits < MIN_ADDR_BITS || lv->addr_bits > MAX_ADDR_BITS)
			return param_fail(errbuf, errlen, CPHT_ERR_INVALID,
							  "level %d must have a power of two of buckets between 2^%d and 2^%d",
							  l + 1, MIN_ADDR_BITS, MAX_ADDR_BITS);
		if (lv->addr_bits > p->key_bits)
			return param_fail(errbuf, errlen, CPHT_ERR_INVALID,
							  "level %d has more buckets than there are %d-bit keys", l + 1, p->key_bits);

		lv->choices = p->kind == CPHT_CUCKOO ? CPHT_CUCKOO_CHOICES : l == 0 ? 1 : CPHT_ICEBERG_CHOICES;
		lv->choice_bits = lv->choices == 1 ? 0 : lv->choices == 2 ? 1 : 2;
		needed = slot_bits_needed(p->key_bits, lv->addr_bits, lv->choice_bits);
		if (p->slot_bits[l] == 0)
			p->slot_bits[l] = slot_width_for(needed);
		if (p->slot_bits[l] != 16 && p->slot_bits[l] != 32 && p->slot_bits[l] != 64)
			return param_fail(errbuf, errlen, CPHT_ERR_INVALID,
							  "slot width of level %d must be 16, 32 or 64 bits, not %d", l + 1, p->slot_bits[l]);
		if (needed > p->slot_bits[l])
			return param_fail(errbuf, errlen, CPHT_ERR_INVALID,
							  "slots of level %d need %d bits for %d-bit keys, more than %d",
							  l + 1, needed, p->key_bits, p->slot_bits[l]);
		lv->slot_bits = p->slot_bits[l];
		for (int c = 0; c < 4; c++)
			lv->seeds[c] = layout_choice_seed(p->seed, l, c);
	}
	if (p->max_evictions <= 0)
		p->max_evictions = CPHT_DEFAULT_MAX_EVICTIONS;
	if (p->cpu_threads <= 0)
	{
		long		cores = sysconf(_SC_NPROCESSORS_ONLN);

		p->cpu_threads = cores < 1 ? 1 : cores > 16 ? 16 : (int) cores;
	}
	return CPHT_OK;
}

uint64_t
cpht_params_table_bytes(const cpht_params *params)
{
	cpht_table	t;
	uint64_t	bytes = 0;

	memset(&t, 0, sizeof(t));
	t.params = *params;
	if (resolve_layout(&t, NULL, 0) != CPHT_OK)
		return 0;
	for (int l = 0; l < t.levels; l++)
		bytes += t.params.slots[l] * (uint64_t) (t.level[l].slot_bits / 8);
	return bytes;
}

/* ---- lifecycle ---------------------------------------------------------- */

#ifndef CPHT_WITH_GPU
int
cpht_gpu_built(void)
{
	return 0;
}

int
cpht_gpu_usable(char *errbuf, size_t errlen)
{
	param_fail(errbuf, errlen, CPHT_ERR_NODEVICE, "cpht was built without CUDA support");
	return 0;
}
#endif

cpht_status
cpht_table_create(const cpht_params *params, cpht_table **out,
				  char *errbuf, size_t errlen)
{
	cpht_table *t = calloc(1, sizeof(cpht_table));
	cpht_status rc;

	*out = NULL;
	if (t == NULL)
		return param_fail(errbuf, errlen, CPHT_ERR_NOMEM, "out of host memory");
	t->params = *params;
	rc = resolve_layout(t, errbuf, errlen);
	if (rc != CPHT_OK)
	{
		free(t);
		return rc;
	}

	if (params->device == CPHT_DEVICE_GPU)
	{
#ifdef CPHT_WITH_GPU
		if (!cpht_gpu_usable(errbuf, errlen))
		{
			free(t);
			return CPHT_ERR_NODEVICE;
		}
		t->backend = &cpht_gpu_backend;
#else
		free(t);
		return param_fail(errbuf, errlen, CPHT_ERR_NODEVICE, "cpht was built without CUDA support");
#endif
	}
	else
		t->backend = &cpht_cpu_backend;

	rc = t->backend->create(t);
	if (rc != CPHT_OK)
	{
		param_fail(errbuf, errlen, rc, "%s", t->errmsg);
		free(t);
		return rc;
	}
	*out = t;
	return CPHT_OK;
}

void
cpht_table_destroy(cpht_table *t)
{
	if (t == NULL)
		return;
	streams_detach(t);
	log_free(t);				/* a backend store goes before the backend */
	t->backend->destroy(t);
	free(t->stash);
	free(t);
}

const char *
cpht_table_error(const cpht_table *t)
{
	return t->errmsg;
}

/* ---- streams: the overlapped find-or-put --------------------------------- */

/*
 * A stream owns its buffers.  Two sets alternate: batch k uses set k % 2, so
 * the status of batch k, handed out by cpht_stream_finish, stays intact
 * while batch k + 1 runs.  A table runs at most one batch at a time (any
 * stream's); every call on the table first waits for it (settle).
 */
typedef struct stream_buffers
{
	uint64_t   *keys;			/* owned copy of the batch */
	uint8_t    *status;
	size_t		cap;
} stream_buffers;

struct cpht_stream
{
	cpht_table *t;				/* NULL once the table is destroyed */
	cpht_stream *next;			/* the table's list of open streams */
	stream_buffers buf[2];
	int			cur;			/* the set of the latest batch */
	int			has_result;		/* a batch was started and not finished */
	cpht_status rc;
	size_t		n;
	uint64_t	inserted;
	char		errmsg[sizeof(((cpht_table *) 0)->errmsg)];
};

static cpht_status find_or_put_counted(cpht_table *t, const uint64_t *keys, size_t n,
									   uint8_t *status, uint64_t *inserted);

static void *
stream_main(void *arg)
{
	cpht_stream *s = arg;

	s->rc = find_or_put_counted(s->t, s->buf[s->cur].keys, s->n, s->buf[s->cur].status, &s->inserted);
	if (s->rc != CPHT_OK)
		memcpy(s->errmsg, s->t->errmsg, sizeof(s->errmsg));
	return NULL;
}

/* Wait for the table's running batch, if any; its stream keeps the result. */
static void
settle(cpht_table *t)
{
	if (t->running)
	{
		pthread_join(t->runner, NULL);
		t->running = 0;
	}
}

cpht_stream *
cpht_stream_open(cpht_table *t)
{
	cpht_stream *s = calloc(1, sizeof(cpht_stream));

	if (s == NULL)
		return NULL;
	s->t = t;
	s->next = t->streams;
	t->streams = s;
	return s;
}

void
cpht_stream_close(cpht_stream *s)
{
	if (s == NULL)
		return;
	if (s->t)
	{
		cpht_stream **p;

		settle(s->t);
		for (p = &s->t->streams; *p; p = &(*p)->next)
			if (*p == s)
			{
				*p = s->next;
				break;
			}
	}
	for (int i = 0; i < 2; i++)
	{
		free(s->buf[i].keys);
		free(s->buf[i].status);
	}
	free(s);
}

cpht_status
cpht_stream_start(cpht_stream *s, const uint64_t *keys, size_t n)
{
	cpht_table *t = s->t;
	stream_buffers *b;
	sigset_t	all,
				saved;

	if (t == NULL)
		return CPHT_ERR_INVALID;
	settle(t);
	s->cur = 1 - s->cur;
	b = &s->buf[s->cur];
	if (n > b->cap)
	{
		uint64_t   *k = realloc(b->keys, n * sizeof(uint64_t));
		uint8_t    *st = k ? realloc(b->status, n) : NULL;

		if (k)
			b->keys = k;
		if (st)
			b->status = st;
		if (!k || !st)
			return table_fail(t, CPHT_ERR_NOMEM, "out of host memory for a batch of %zu keys", n);
		b->cap = n;
	}
	memcpy(b->keys, keys, n * sizeof(uint64_t));
	s->n = n;
	s->has_result = 1;
	s->inserted = 0;

	/* The helper thread blocks all signals: the host process handles them. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &saved);
	t->running = pthread_create(&t->runner, NULL, stream_main, s) == 0;
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
	if (!t->running)
		stream_main(s);			/* no thread to be had: run it here */
	return CPHT_OK;
}

cpht_status
cpht_stream_finish(cpht_stream *s, const uint8_t **status, size_t *n, uint64_t *inserted)
{
	*status = NULL;
	*n = 0;
	*inserted = 0;
	if (s->t == NULL)
		return CPHT_ERR_INVALID;
	settle(s->t);
	if (!s->has_result)
		return CPHT_OK;
	s->has_result = 0;
	if (s->rc != CPHT_OK)
	{
		memcpy(s->t->errmsg, s->errmsg, sizeof(s->errmsg));
		return s->rc;
	}
	*status = s->buf[s->cur].status;
	*n = s->n;
	*inserted = s->inserted;
	return CPHT_OK;
}

/* The table goes away: wait for its batch and cut its streams loose. */
static void
streams_detach(cpht_table *t)
{
	settle(t);
	for (cpht_stream *s = t->streams; s; s = s->next)
		s->t = NULL;
	t->streams = NULL;
}

uint64_t
cpht_table_count(cpht_table *t)
{
	settle(t);
	return t->count;
}

/* ---- the cuckoo stash --------------------------------------------------- */

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t	x = *(const uint64_t *) a;
	uint64_t	y = *(const uint64_t *) b;

	return x < y ? -1 : x > y;
}

static int
in_sorted(const uint64_t *v, size_t n, uint64_t key)
{
	return n > 0 && bsearch(&key, v, n, sizeof(uint64_t), cmp_u64) != NULL;
}

/* Add keys (distinct, none already stashed) to the sorted stash. */
static cpht_status
stash_add(cpht_table *t, const uint64_t *keys, size_t n)
{
	uint64_t   *grown = realloc(t->stash, (t->nstash + n) * sizeof(uint64_t));

	if (grown == NULL)
		return table_fail(t, CPHT_ERR_NOMEM, "out of host memory for the cuckoo stash");
	memcpy(grown + t->nstash, keys, n * sizeof(uint64_t));
	t->stash = grown;
	t->nstash += n;
	qsort(t->stash, t->nstash, sizeof(uint64_t), cmp_u64);
	return CPHT_OK;
}

static int
stash_remove(cpht_table *t, uint64_t key)
{
	uint64_t   *hit = t->nstash ? bsearch(&key, t->stash, t->nstash, sizeof(uint64_t), cmp_u64) : NULL;

	if (hit == NULL)
		return 0;
	memmove(hit, hit + 1, (size_t) (t->stash + t->nstash - hit - 1) * sizeof(uint64_t));
	t->nstash--;
	return 1;
}

/* ---- undoing a call that ran out of room -------------------------------- */

/*
 * The call put the keys marked CPHT_PUT and then some key found no slot.
 * Take the call's keys out again so the table holds exactly what it held
 * before.  Iceberg: the call's keys took slots that were empty and nothing
 * came after them, so emptying those slots restores the table bit for bit.
 * Cuckoo: evictions moved older keys, so the call's keys become tombstones
 * and any older key that an eviction chain left homeless is put back (or,
 * if no chain finds it a slot, kept in the stash, never dropped).
 */
static cpht_status
undo_call(cpht_table *t, const uint64_t *keys, size_t n, const uint8_t *status,
		  uint64_t *homeless, size_t nhomeless)
{
	uint64_t   *added = malloc((n ? n : 1) * sizeof(uint64_t));
	uint8_t    *flags = malloc(n ? n : 1);
	size_t		nadded = 0,
				nold = 0;
	cpht_tally	tally;
	cpht_status rc;

	if (added == NULL || flags == NULL)
	{
		free(added);
		free(flags);
		return table_fail(t, CPHT_ERR_NOMEM, "out of host memory while undoing a failed call");
	}
	for (size_t i = 0; i < n; i++)
		if (status[i] == CPHT_PUT)
			added[nadded++] = keys[i];

	rc = t->backend->erase(t, added, nadded, flags, t->params.kind == CPHT_ICEBERG,
						   &tally, CPHT_NO_LOG);
	if (rc != CPHT_OK || t->params.kind == CPHT_ICEBERG)
		goto done;

	qsort(added, nadded, sizeof(uint64_t), cmp_u64);
	for (size_t h = 0; h < nhomeless; h++)
		if (!in_sorted(added, nadded, homeless[h]))
			homeless[nold++] = homeless[h];

	for (int attempt = 0; attempt < MAX_STASH_RETRIES && nold > 0 && rc == CPHT_OK; attempt++)
	{
		size_t		still = 0;

		/* These keys are absent, so the backend inserts every one of them. */
		rc = t->backend->find_or_put(t, homeless, nold, flags, added, &still,
									 &tally, CPHT_NO_LOG);
		memcpy(homeless, added, still * sizeof(uint64_t));
		nold = still;
	}
	if (rc == CPHT_OK && nold > 0)
		rc = stash_add(t, homeless, nold);

done:
	free(added);
	free(flags);
	return rc;
}

/* ---- the undo log ------------------------------------------------------- */

/*
 * Where the log's keys live.  The CPU keeps them here, in host memory; the
 * GPU keeps them in device memory, written by the kernels that insert or
 * delete them, so logging a large ingest costs no host work and no
 * transfer (a rollback reads them back).
 */
static inline int
log_on_backend(const cpht_table *t)
{
	return t->backend->log_reserve != NULL;
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

static void
log_free(cpht_table *t)
{
	if (t->log_keys)
		munmap(t->log_keys, t->log_cap * sizeof(uint64_t));
	else if (t->log_cap && log_on_backend(t))
		t->backend->log_release(t);
	t->log_keys = NULL;
	t->log_cap = 0;
	free(t->log_runs);
	t->log_runs = NULL;
	t->log_nruns = 0;
	t->log_runs_cap = 0;
}

/*
 * Make room for `extra` more entries after the log's end and the `pending`
 * entries a call already wrote past it (a GPU call's earlier chunks, not yet
 * counted in log_len: growing the store must keep them), plus the one spare
 * slot log_append writes past the last entry, and for one more run, before a
 * call changes anything: a call that cannot log what it will do fails
 * untouched.
 */
static cpht_status
log_reserve(cpht_table *t, uint64_t pending, uint64_t extra)
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
	if (log_on_backend(t))
	{
		cpht_status rc = t->backend->log_reserve(t, cap, t->log_len + pending);

		if (rc != CPHT_OK)
			return rc;
	}
	else
	{
		uint64_t   *keys = log_grow(t->log_keys, t->log_cap * sizeof(uint64_t), cap * sizeof(uint64_t));

		if (keys == NULL)
			return table_fail(t, CPHT_ERR_NOMEM, "out of host memory for the undo log (%llu entries)",
							  (unsigned long long) want);
		t->log_keys = keys;
	}
	t->log_cap = cap;
	return CPHT_OK;
}

/* The store holds `added` more entries of one kind: extend the runs. */
static void
log_mark(cpht_table *t, int deleted, uint64_t added)
{
	if (!t->logging || added == 0)
		return;
	if (t->log_nruns == 0 || t->log_runs[t->log_nruns - 1].deleted != deleted)
	{
		/* log_reserve made room for this run */
		t->log_runs[t->log_nruns].start = t->log_len;
		t->log_runs[t->log_nruns].deleted = deleted;
		t->log_nruns++;
	}
	t->log_len += added;
}

/*
 * Host store: log keys[i] where flags[i] == which, `matches` of them, for
 * which log_reserve made room.  A large call is split into blocks of
 * LOG_BLOCK keys over the table's threads: each block's matches are counted,
 * a prefix sum gives each block its first entry, then the blocks are copied
 * (a single thread appends 50M keys in about 150 ms, long next to the call).
 * A small call runs one loop that stores every key and advances past the
 * matching ones only (no branch on flags), writing one entry past the last:
 * log_reserve keeps a spare slot for that.
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

static void
log_append(cpht_table *t, const uint64_t *keys, size_t n, const uint8_t *flags,
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
		log_mark(t, deleted, next);
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
		log_mark(t, deleted, len - t->log_len);
	}
}

void
cpht_table_set_logging(cpht_table *t, int on)
{
	settle(t);
	if (!on)
		cpht_table_truncate_log(t, 0);
	t->logging = on;
}

uint64_t
cpht_table_log_position(cpht_table *t)
{
	settle(t);
	return t->log_len;
}

void
cpht_table_truncate_log(cpht_table *t, uint64_t position)
{
	settle(t);
	/* Drop the runs that begin at or after position (the one holding it
	 * just ends there now). */
	while (t->log_nruns > 0 && t->log_runs[t->log_nruns - 1].start >= position)
		t->log_nruns--;
	if (position < t->log_len)
		t->log_len = position;
	if (t->log_len == 0)
		t->log_moved = 0;
	/* A finished transaction gives back a large log's memory. */
	if (t->log_len == 0 && t->log_cap > ((uint64_t) 1 << 16))
		log_free(t);
}

static cpht_status find_or_put_in_buckets(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *status);
static cpht_status erase_keys(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *present);

/*
 * Put back keys whose deletion is rolled back, into the first free slot
 * along their buckets: the tombstones their deletions left make the room,
 * so a full table (or one full of tombstones) still takes them.  A key can
 * find none when another revived key took the tombstone it needed, or a
 * rebuild removed it: those go through a normal insert (cuckoo evictions
 * reach further), and if that finds the table full, the table is rebuilt
 * without tombstones and they are inserted again.  The table held all these
 * keys before.
 */
static cpht_status
revive_keys(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *status)
{
	uint64_t   *rest;
	size_t		nrest = 0;
	cpht_status rc = t->backend->revive(t, keys, n, status);

	if (rc != CPHT_OK)
		return rc;
	for (size_t i = 0; i < n; i++)
		t->count += status[i] == CPHT_PUT;
	if (memchr(status, CPHT_FULL, n) == NULL)
		return CPHT_OK;

	rest = malloc(n * sizeof(uint64_t));
	if (rest == NULL)
		return table_fail(t, CPHT_ERR_NOMEM, "out of host memory while rolling back");
	for (size_t i = 0; i < n; i++)
		if (status[i] == CPHT_FULL)
			rest[nrest++] = keys[i];
	rc = find_or_put_in_buckets(t, rest, nrest, status);
	if (rc == CPHT_ERR_FULL)
	{
		rc = cpht_table_rebuild(t);
		if (rc == CPHT_OK)
			rc = find_or_put_in_buckets(t, rest, nrest, status);
	}
	free(rest);
	return rc;
}

cpht_status
cpht_table_rollback_to(cpht_table *t, uint64_t position)
{
	int			logging = t->logging;
	uint64_t	end,
				deletes = 0;
	const uint64_t *keys;
	uint64_t   *copied = NULL;
	uint8_t    *flags;
	cpht_tally	tally;
	cpht_status rc = CPHT_OK;

	settle(t);
	end = t->log_len;
	if (position >= end)
		return CPHT_OK;
	for (size_t r = 0; r < t->log_nruns; r++)
	{
		uint64_t	lo = t->log_runs[r].start > position ? t->log_runs[r].start : position;
		uint64_t	hi = r + 1 < t->log_nruns ? t->log_runs[r + 1].start : end;

		if (t->log_runs[r].deleted && hi > lo)
			deletes += hi - lo;
	}
	flags = malloc((size_t) (end - position));
	if (log_on_backend(t))
		copied = malloc((size_t) (end - position) * sizeof(uint64_t));
	if (flags == NULL || (log_on_backend(t) && copied == NULL))
	{
		free(flags);
		free(copied);
		return table_fail(t, CPHT_ERR_NOMEM, "out of host memory while rolling back");
	}
	/* keys[i] is entry position + i. */
	if (copied)
	{
		rc = t->backend->log_read(t, position, (size_t) (end - position), copied);
		keys = copied;
	}
	else
		keys = t->log_keys + position;
	t->logging = 0;

	if (rc != CPHT_OK)
		;
	else if (deletes == 0 && t->params.kind == CPHT_ICEBERG && !t->log_moved)
	{
		/* Only inserts since the savepoint: they took slots that were empty
		 * then, so emptying them restores the table bit for bit. */
		rc = t->backend->erase(t, keys, end - position, flags, 1, &tally, CPHT_NO_LOG);
		if (rc == CPHT_OK)
			t->count -= end - position;
	}
	else
	{
		/* Newest first, one run of inserts or deletes at a time. */
		uint64_t	hi = end;

		for (size_t r = t->log_nruns; rc == CPHT_OK && r-- > 0 && hi > position;)
		{
			uint64_t	lo = t->log_runs[r].start > position ? t->log_runs[r].start : position;

			/*
			 * A deleted key comes back in a new slot, possibly after slots
			 * that older log entries filled: emptying those later would
			 * hide it, so from now on rollbacks use tombstones.
			 */
			if (t->log_runs[r].deleted)
			{
				rc = revive_keys(t, keys + (lo - position), hi - lo, flags);
				t->log_moved = 1;
			}
			else
				rc = erase_keys(t, keys + (lo - position), hi - lo, flags);
			hi = lo;
		}
	}
	free(flags);
	free(copied);
	t->logging = logging;
	if (rc == CPHT_OK)
		cpht_table_truncate_log(t, position);
	return rc;
}

/* ---- operations --------------------------------------------------------- */

/*
 * Find-or-put in the buckets (not the stash), chunk by chunk.  If a chunk
 * finds the table full, a device call fails or an interrupt arrives, the
 * chunks done so far are undone too, so the call is all or nothing.
 */
static cpht_status
find_or_put_in_buckets(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *status)
{
	uint64_t   *homeless = NULL;
	size_t		most = t->params.device == CPHT_DEVICE_GPU ? GPU_CHUNK_KEYS_PER_CALL : CPU_CHUNK_KEYS;
	size_t		chunk = n < most ? n : most;
	size_t		done = 0;
	uint64_t	puts = 0;
	int			on_backend = t->logging && log_on_backend(t);
	cpht_status rc = CPHT_OK;

	if (t->params.kind == CPHT_CUCKOO)
	{
		homeless = malloc(chunk * sizeof(uint64_t));
		if (homeless == NULL)
			return table_fail(t, CPHT_ERR_NOMEM, "out of host memory for a batch of %zu keys", n);
	}
	while (done < n && rc == CPHT_OK)
	{
		size_t		m = n - done < chunk ? n - done : chunk;
		size_t		nhomeless = 0;
		cpht_tally	tally = {0, 0};
		char		why[sizeof(t->errmsg)];

		if (done > 0 && interrupt_check && interrupt_check())
		{
			rc = undo_call(t, keys, done, status, NULL, 0);
			if (rc == CPHT_OK)
				rc = table_fail(t, CPHT_ERR_CANCELED, "canceled after %zu of %zu keys", done, n);
			break;
		}
		/*
		 * A backend store takes this chunk's inserts after the earlier
		 * chunks' (it grows chunk by chunk, so running out of device memory
		 * for it can happen in the middle of a call, undone like the rest).
		 */
		rc = on_backend ? log_reserve(t, puts, m) : CPHT_OK;
		if (rc == CPHT_OK)
			rc = t->backend->find_or_put(t, keys + done, m, status + done, homeless, &nhomeless,
										 &tally, on_backend ? t->log_len + puts : CPHT_NO_LOG);
		if (rc != CPHT_OK)
		{
			/* Keep the device's message; undo what earlier chunks put. */
			memcpy(why, t->errmsg, sizeof(why));
			if (undo_call(t, keys, done, status, NULL, 0) == CPHT_OK)
			{
				if (done > 0)
					snprintf(t->errmsg, sizeof(t->errmsg),
							 "%s (after %zu of %zu keys, which were taken out again)", why, done, n);
				else
					memcpy(t->errmsg, why, sizeof(why));
			}
			break;
		}
		puts += tally.hits;
		done += m;
		if (tally.full > 0 || nhomeless > 0)
		{
			rc = undo_call(t, keys, done, status, homeless, nhomeless);
			if (rc == CPHT_OK)
				rc = table_fail(t, CPHT_ERR_FULL,
								"the table is full: a key found no free slot after %llu keys",
								(unsigned long long) t->count);
		}
	}
	/* Host store: log what the call inserted; without room, undo the call. */
	if (rc == CPHT_OK && !on_backend && log_reserve(t, 0, puts) != CPHT_OK)
	{
		char		why[sizeof(t->errmsg)];

		memcpy(why, t->errmsg, sizeof(why));
		rc = undo_call(t, keys, n, status, NULL, 0);
		if (rc == CPHT_OK)
		{
			memcpy(t->errmsg, why, sizeof(why));
			rc = CPHT_ERR_NOMEM;
		}
	}
	if (rc == CPHT_OK)
	{
		double		log_start = clock_ms();

		t->count += puts;
		if (on_backend)
			log_mark(t, 0, puts);
		else
			log_append(t, keys, n, status, CPHT_PUT, 0, puts);
		t->times.undo_log += clock_ms() - log_start;
	}
	free(homeless);
	return rc;
}

static cpht_status
find_or_put(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *status)
{
	uint64_t   *rest;
	size_t	   *where;
	uint8_t    *sub;
	size_t		nrest = 0;
	cpht_status rc;

	if (n == 0)
		return CPHT_OK;
	if (t->nstash == 0)
		return find_or_put_in_buckets(t, keys, n, status);

	/* Stashed keys are present; the buckets see only the others. */
	rest = malloc(n * sizeof(uint64_t));
	where = malloc(n * sizeof(size_t));
	sub = malloc(n);
	if (!rest || !where || !sub)
		rc = table_fail(t, CPHT_ERR_NOMEM, "out of host memory for a batch of %zu keys", n);
	else
	{
		for (size_t i = 0; i < n; i++)
		{
			status[i] = CPHT_FOUND;
			if (!in_sorted(t->stash, t->nstash, keys[i]))
			{
				rest[nrest] = keys[i];
				where[nrest++] = i;
			}
		}
		rc = nrest ? find_or_put_in_buckets(t, rest, nrest, sub) : CPHT_OK;
		for (size_t j = 0; rc == CPHT_OK && j < nrest; j++)
			status[where[j]] = sub[j];
	}
	free(rest);
	free(where);
	free(sub);
	return rc;
}

/* find_or_put, also telling how many keys it inserted. */
static cpht_status
find_or_put_counted(cpht_table *t, const uint64_t *keys, size_t n,
					uint8_t *status, uint64_t *inserted)
{
	uint64_t	before = t->count;
	cpht_status rc = find_or_put(t, keys, n, status);

	*inserted = rc == CPHT_OK ? t->count - before : 0;
	return rc;
}

cpht_status
cpht_table_find_or_put(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *status)
{
	settle(t);
	call_begin(t);
	return call_end(t, find_or_put(t, keys, n, status));
}

cpht_status
cpht_table_find(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *found)
{
	cpht_status rc;

	settle(t);
	call_begin(t);
	if (n == 0)
		return call_end(t, CPHT_OK);
	rc = t->backend->find(t, keys, n, found);
	for (size_t i = 0; rc == CPHT_OK && t->nstash > 0 && i < n; i++)
		if (!found[i])
			found[i] = (uint8_t) in_sorted(t->stash, t->nstash, keys[i]);
	return call_end(t, rc);
}

cpht_status
cpht_table_put(cpht_table *t, const uint64_t *keys, size_t n, uint64_t *inserted)
{
	uint8_t    *status;
	cpht_status rc;

	settle(t);
	call_begin(t);
	*inserted = 0;
	if (n == 0)
		return call_end(t, CPHT_OK);
	status = malloc(n);
	if (status == NULL)
		return call_end(t, table_fail(t, CPHT_ERR_NOMEM, "out of host memory for a batch of %zu keys", n));
	rc = find_or_put_counted(t, keys, n, status, inserted);
	free(status);
	return call_end(t, rc);
}

static cpht_status
erase_keys(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *present)
{
	int			on_backend = t->logging && log_on_backend(t);
	cpht_tally	tally = {0, 0};
	uint64_t   *stashed = NULL;
	size_t		nstashed = 0;
	cpht_status rc = log_reserve(t, 0, n);

	if (rc != CPHT_OK)
		return rc;
	if (on_backend && t->nstash > 0)
	{
		stashed = malloc(n * sizeof(uint64_t));
		if (stashed == NULL)
			return table_fail(t, CPHT_ERR_NOMEM, "out of host memory for a batch of %zu keys", n);
	}
	rc = t->backend->erase(t, keys, n, present, 0, &tally, on_backend ? t->log_len : CPHT_NO_LOG);
	if (rc != CPHT_OK)
	{
		free(stashed);
		return rc;
	}
	for (size_t i = 0; t->nstash > 0 && i < n; i++)
	{
		if (!present[i] && stash_remove(t, keys[i]))
		{
			present[i] = 1;
			tally.hits++;
			if (stashed)
				stashed[nstashed++] = keys[i];
		}
	}
	/*
	 * A backend store holds the buckets' deletions already; the keys taken
	 * from the stash follow them.  If they cannot be logged they go back
	 * into the stash (not deleted, the call fails), so nothing is deleted
	 * without a log entry.
	 */
	if (nstashed > 0)
	{
		rc = t->backend->log_write(t, t->log_len + tally.hits - nstashed, stashed, nstashed);
		if (rc != CPHT_OK)
		{
			char		why[sizeof(t->errmsg)];

			memcpy(why, t->errmsg, sizeof(why));
			(void) stash_add(t, stashed, nstashed);
			memcpy(t->errmsg, why, sizeof(why));
			tally.hits -= nstashed;
		}
	}
	free(stashed);
	t->count -= tally.hits;
	if (on_backend)
		log_mark(t, 1, tally.hits);
	else
		log_append(t, keys, n, present, 1, 1, tally.hits);
	return rc;
}

cpht_status
cpht_table_erase(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *present)
{
	settle(t);
	call_begin(t);
	if (n == 0)
		return call_end(t, CPHT_OK);
	return call_end(t, erase_keys(t, keys, n, present));
}

/* ---- rebuild ------------------------------------------------------------ */

/* Decode the live keys of one level's host copy into keys[]. */
static size_t
decode_level(const cpht_table *t, int l, const void *slots, uint64_t *keys)
{
	const layout_level *lv = &t->level[l];
	uint64_t	nslots = lv->buckets * (uint64_t) lv->bucket_slots;
	size_t		n = 0;

	for (uint64_t i = 0; i < nslots; i++)
	{
		uint64_t	s = lv->slot_bits == 16 ? ((const uint16_t *) slots)[i]
			: lv->slot_bits == 32 ? ((const uint32_t *) slots)[i]
			: ((const uint64_t *) slots)[i];

		if (slot_is_live(s))
		{
			layout_perm p = layout_level_perm(lv, t->params.key_bits, slot_choice(s, lv->choice_bits));

			keys[n++] = layout_key(p, i / (uint64_t) lv->bucket_slots, slot_remainder(s, lv->choice_bits));
		}
	}
	return n;
}

cpht_status
cpht_table_rebuild(cpht_table *t)
{
	cpht_table *fresh = NULL;
	uint64_t   *keys = NULL;
	void	   *copy = NULL;
	size_t		n = 0,
				biggest = 0;
	uint8_t    *status = NULL;
	char		err[sizeof(t->errmsg)];
	cpht_status rc;

	settle(t);
	for (int l = 0; l < t->levels; l++)
	{
		size_t		bytes = (size_t) (t->params.slots[l] * (uint64_t) (t->level[l].slot_bits / 8));

		biggest = bytes > biggest ? bytes : biggest;
	}
	keys = malloc((size_t) (t->count + 1) * sizeof(uint64_t));
	status = malloc((size_t) (t->count + 1));
	copy = malloc(biggest);
	if (!keys || !status || !copy)
	{
		rc = table_fail(t, CPHT_ERR_NOMEM, "out of host memory for rebuilding a table of %llu keys",
						(unsigned long long) t->count);
		goto done;
	}
	for (int l = 0; l < t->levels; l++)
	{
		rc = t->backend->copy_slots(t, l, copy);
		if (rc != CPHT_OK)
			goto done;
		n += decode_level(t, l, copy, keys + n);
	}
	memcpy(keys + n, t->stash, t->nstash * sizeof(uint64_t));
	n += t->nstash;

	rc = cpht_table_create(&t->params, &fresh, err, sizeof(err));
	if (rc != CPHT_OK)
	{
		table_fail(t, rc, "%s", err);
		goto done;
	}
	rc = find_or_put(fresh, keys, n, status);
	if (rc != CPHT_OK)
	{
		table_fail(t, rc, "%s", fresh->errmsg);
		goto done;
	}

	/* Swap the slot memory and the stash; the undo log stays with t. */
	for (int l = 0; l < t->levels; l++)
	{
		layout_level tmp = t->level[l];

		t->level[l] = fresh->level[l];
		fresh->level[l] = tmp;
	}
	{
		void	   *state = t->backend_state;
		uint64_t   *stash = t->stash;
		size_t		nstash = t->nstash;

		t->backend_state = fresh->backend_state;
		fresh->backend_state = state;
		t->stash = fresh->stash;
		t->nstash = fresh->nstash;
		fresh->stash = stash;
		fresh->nstash = nstash;
	}
	/* Keys moved: rolling back inserts can no longer just empty slots. */
	t->log_moved = t->log_len > 0;
	rc = CPHT_OK;

done:
	cpht_table_destroy(fresh);
	free(keys);
	free(status);
	free(copy);
	return rc;
}

cpht_status
cpht_table_stats(cpht_table *t, cpht_stats *out)
{
	cpht_status rc;

	settle(t);
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
		out->table_bytes += t->params.slots[l] * (uint64_t) (t->level[l].slot_bits / 8);
	}
	out->stashed = t->nstash;
	out->log_entries = t->log_len;
	out->log_bytes = t->log_cap * sizeof(uint64_t) + t->log_runs_cap * sizeof(cpht_log_run);
	out->count = t->count;
	out->staging_bytes = t->backend->staging_bytes(t);
	if (t->backend->device_memory)
		t->backend->device_memory(t, &out->device_free_bytes, &out->device_total_bytes);
	t->backend->device_name(t, out->device_name, sizeof(out->device_name));
	rc = t->backend->scan(t, out->live, out->tombstones);
	return rc;
}
