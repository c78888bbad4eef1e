/*
 * threads.c — split a batch over a few threads.
 *
 * The CPU implementation runs inside a PostgreSQL backend, which is single
 * threaded and handles signals itself.  Helper threads therefore block every
 * signal (so the kernel delivers them to the backend's own thread) and never
 * call back into the host process; a call returns only when every helper
 * has finished its share.  Helpers are kept for the life of the process and
 * woken for each call: a streamed call through the cpht worker copies keys
 * and statuses on all cores twice per window, and starting a thread for each
 * slice of each copy took a noticeable part of the copy itself.  A call that
 * finds the helpers busy (another thread of the process is splitting a batch,
 * as the shards of a table do) starts threads of its own; a process forked
 * after helpers started starts its own.  If a thread cannot be started its
 * share runs on the calling thread.
 */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "util/threads.h"
#include "cpht_util.h"

/* Below this many keys per thread, starting threads costs more than it saves. */
#define MIN_KEYS_PER_THREAD 16384
#define MAX_THREADS 64

typedef struct range_job
{
	cpu_range_fn fn;
	void	   *ctx;
	size_t		begin;
	size_t		end;
} range_job;

static void *
run_job(void *arg)
{
	range_job  *job = arg;

	job->fn(job->ctx, job->begin, job->end);
	return NULL;
}

void
cpu_parallel_for(int threads, size_t n, cpu_range_fn fn, void *ctx)
{
	cpu_parallel_for_min(threads, n, MIN_KEYS_PER_THREAD, fn, ctx);
}

/*
 * The process's helpers.  Helper i runs job i + 1 of a round (job 0 is the
 * caller's); a round is published by bumping `round` under `lock`.
 */
static struct
{
	pthread_mutex_t in_use;		/* held by the caller of a round */
	pthread_mutex_t lock;		/* guards what follows */
	pthread_cond_t wake;		/* helpers wait here for a round */
	pthread_cond_t done;		/* the caller waits here for its helpers */
	int			nhelpers;
	uint64_t	round;
	range_job  *jobs;
	int			njobs;
	int			pending;		/* helpers of this round not yet done */
}			pool = {
	.in_use = PTHREAD_MUTEX_INITIALIZER,
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.wake = PTHREAD_COND_INITIALIZER,
	.done = PTHREAD_COND_INITIALIZER,
};

/* the round a new helper has already seen, by helper index */
static uint64_t helper_start_round[MAX_THREADS];

static void *
helper_main(void *arg)
{
	int			index = (int) (intptr_t) arg;
	uint64_t	seen = helper_start_round[index];

	pthread_mutex_lock(&pool.lock);
	for (;;)
	{
		while (pool.round == seen)
			pthread_cond_wait(&pool.wake, &pool.lock);
		seen = pool.round;
		if (index + 1 < pool.njobs)
		{
			range_job  *job = &pool.jobs[index + 1];

			pthread_mutex_unlock(&pool.lock);
			run_job(job);
			pthread_mutex_lock(&pool.lock);
			if (--pool.pending == 0)
				pthread_cond_signal(&pool.done);
		}
	}
	return NULL;
}

/*
 * Starts helpers until there are `want` (under in_use); the number there
 * is.  Called with every signal blocked, so that the helpers block them too.
 */
static int
pool_grow(int want)
{
	while (pool.nhelpers < want)
	{
		pthread_t	tid;
		pthread_attr_t attr;
		int			ok;

		helper_start_round[pool.nhelpers] = pool.round;
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		ok = pthread_create(&tid, &attr, helper_main, (void *) (intptr_t) pool.nhelpers) == 0;
		pthread_attr_destroy(&attr);
		if (!ok)
			break;
		pool.nhelpers++;
	}
	return pool.nhelpers < want ? pool.nhelpers : want;
}

/* A forked child has none of its parent's helpers (fork keeps only the
 * calling thread) and may have copied the pool's locks held: it starts
 * afresh. */
static void
pool_after_fork(void)
{
	pthread_mutex_init(&pool.in_use, NULL);
	pthread_mutex_init(&pool.lock, NULL);
	pthread_cond_init(&pool.wake, NULL);
	pthread_cond_init(&pool.done, NULL);
	pool.nhelpers = 0;
	pool.jobs = NULL;
	pool.njobs = 0;
	pool.pending = 0;
}

static pthread_once_t pool_once = PTHREAD_ONCE_INIT;

static void
pool_watch_forks(void)
{
	(void) pthread_atfork(NULL, NULL, pool_after_fork);
}

/* jobs[0..threads) on the pool's helpers and the calling thread; 0 when
 * the pool is taken. */
static int
pool_run(range_job *jobs, int threads)
{
	sigset_t	all,
				saved;
	int			helpers;

	(void) pthread_once(&pool_once, pool_watch_forks);
	if (pthread_mutex_trylock(&pool.in_use) != 0)
		return 0;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &saved);
	helpers = pool_grow(threads - 1);
	pthread_sigmask(SIG_SETMASK, &saved, NULL);

	pthread_mutex_lock(&pool.lock);
	pool.jobs = jobs;
	pool.njobs = helpers + 1;
	pool.pending = helpers;
	pool.round++;
	pthread_cond_broadcast(&pool.wake);
	pthread_mutex_unlock(&pool.lock);

	run_job(&jobs[0]);
	/* the shares of helpers that could not be started */
	for (int i = helpers + 1; i < threads; i++)
		run_job(&jobs[i]);

	pthread_mutex_lock(&pool.lock);
	while (pool.pending > 0)
		pthread_cond_wait(&pool.done, &pool.lock);
	pool.jobs = NULL;
	pthread_mutex_unlock(&pool.lock);
	pthread_mutex_unlock(&pool.in_use);
	return 1;
}

/* jobs[0..threads) on threads started for this call. */
static void
run_on_new_threads(range_job *jobs, int threads)
{
	pthread_t	tids[MAX_THREADS];
	int			started[MAX_THREADS] = {0};
	sigset_t	all,
				saved;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &saved);
	for (int i = 1; i < threads; i++)
		started[i] = pthread_create(&tids[i], NULL, run_job, &jobs[i]) == 0;
	pthread_sigmask(SIG_SETMASK, &saved, NULL);

	run_job(&jobs[0]);
	for (int i = 1; i < threads; i++)
	{
		if (started[i])
			pthread_join(tids[i], NULL);
		else
			run_job(&jobs[i]);
	}
}

void
cpu_parallel_for_min(int threads, size_t n, size_t min_per_thread, cpu_range_fn fn, void *ctx)
{
	range_job	jobs[MAX_THREADS];
	size_t		per;

	if (threads > MAX_THREADS)
		threads = MAX_THREADS;
	if (min_per_thread < 1)
		min_per_thread = 1;
	if ((size_t) threads > n / min_per_thread)
		threads = (int) (n / min_per_thread);
	if (threads <= 1)
	{
		fn(ctx, 0, n);
		return;
	}

	per = (n + (size_t) threads - 1) / (size_t) threads;
	for (int i = 0; i < threads; i++)
	{
		jobs[i].fn = fn;
		jobs[i].ctx = ctx;
		jobs[i].begin = per * (size_t) i < n ? per * (size_t) i : n;
		jobs[i].end = jobs[i].begin + per < n ? jobs[i].begin + per : n;
	}
	if (!pool_run(jobs, threads))
		run_on_new_threads(jobs, threads);
}

/*
 * A large host copy in slices of at least this many bytes per thread: a
 * window's statuses (4 MB) into a fresh result array are bound by page
 * faults more than by bandwidth, and go on every core from here on.
 */
#define MIN_COPY_BYTES_PER_THREAD ((size_t) 1 << 18)

typedef struct copy_job
{
	char	   *dst;
	const char *src;
} copy_job;

static void
copy_slice(void *ctx, size_t begin, size_t end)
{
	copy_job   *j = ctx;

	memcpy(j->dst + begin, j->src + begin, end - begin);
}

void
cpht_parallel_memcpy(void *dst, const void *src, size_t bytes, int threads)
{
	copy_job	j = {dst, src};

	if (threads <= 0)
		threads = (int) sysconf(_SC_NPROCESSORS_ONLN);
	cpu_parallel_for_min(threads, bytes, MIN_COPY_BYTES_PER_THREAD, copy_slice, &j);
}
