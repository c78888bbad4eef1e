/*
 * cpu_threads.c — split a batch over a few threads.
 *
 * The CPU implementation runs inside a PostgreSQL backend, which is single
 * threaded and handles signals itself.  Worker threads therefore block every
 * signal (so the kernel delivers them to the backend's own thread), never
 * call back into the host process, and finish their share before the call
 * returns.
 *
 * The workers are started once per process, on first use (never in the
 * postmaster: only a backend's table calls get here), and then wait for
 * work.  Starting 16 threads costs about half a millisecond, as long as
 * copying a GPU chunk's keys takes: a pool keeps that cost off every call.
 * One call uses the pool at a time; a call that finds it busy (a stream's
 * helper thread and the backend working on two tables at once) starts its
 * own threads as before.  If a thread cannot be started its share runs on
 * the calling thread.
 */
#include <pthread.h>
#include <signal.h>

#include "cpu_ops.h"

/* Below this many keys per thread, waking threads costs more than it saves. */
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

/* ---- the pool ----------------------------------------------------------- */

typedef struct pool_worker
{
	pthread_t	tid;
	int			index;			/* takes jobs[index + 1] */
	unsigned long first_round;	/* the round before it started */
} pool_worker;

static struct
{
	pthread_mutex_t busy;		/* held by the one call using the pool */
	pthread_mutex_t lock;		/* guards everything below */
	pthread_cond_t wake;
	pthread_cond_t done;
	int			started;		/* workers running */
	unsigned long round;		/* bumped for every call */
	int			active;			/* workers with a job this round */
	int			pending;		/* of those, not finished yet */
	range_job	jobs[MAX_THREADS];
	pool_worker workers[MAX_THREADS];
}			pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
	PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER};

static void *
pool_main(void *arg)
{
	pool_worker *w = arg;
	unsigned long seen;

	/*
	 * Not pool.round: a worker started by pool_run begins after that call
	 * bumped the round, and must still take its share of it.
	 */
	pthread_mutex_lock(&pool.lock);
	seen = w->first_round;
	for (;;)
	{
		while (pool.round == seen)
			pthread_cond_wait(&pool.wake, &pool.lock);
		seen = pool.round;
		if (w->index >= pool.active)
			continue;			/* no share this round */
		pthread_mutex_unlock(&pool.lock);
		run_job(&pool.jobs[w->index + 1]);
		pthread_mutex_lock(&pool.lock);
		if (--pool.pending == 0)
			pthread_cond_signal(&pool.done);
	}
	return NULL;
}

/* Start workers up to `want` (pool.lock held, before the round is
 * bumped); returns how many run.  They block every signal. */
static int
pool_grow(int want)
{
	sigset_t	all,
				saved;

	if (pool.started >= want)
		return pool.started;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &saved);
	while (pool.started < want)
	{
		pool_worker *w = &pool.workers[pool.started];

		w->index = pool.started;
		w->first_round = pool.round;
		if (pthread_create(&w->tid, NULL, pool_main, w) != 0)
			break;
		pthread_detach(w->tid);
		pool.started++;
	}
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
	return pool.started;
}

/* Run jobs[0..threads) with the pool (the caller takes jobs[0]). */
static void
pool_run(const range_job *jobs, int threads)
{
	int			helpers;

	pthread_mutex_lock(&pool.lock);
	helpers = pool_grow(threads - 1);
	if (helpers > threads - 1)
		helpers = threads - 1;
	for (int i = 0; i < threads; i++)
		pool.jobs[i] = jobs[i];
	pool.active = helpers;
	pool.pending = helpers;
	pool.round++;
	pthread_cond_broadcast(&pool.wake);
	pthread_mutex_unlock(&pool.lock);

	run_job(&pool.jobs[0]);
	/* Shares no worker took (a thread could not be started): run them here. */
	for (int i = helpers + 1; i < threads; i++)
		run_job(&pool.jobs[i]);

	pthread_mutex_lock(&pool.lock);
	while (pool.pending > 0)
		pthread_cond_wait(&pool.done, &pool.lock);
	pthread_mutex_unlock(&pool.lock);
}

/* The pool is busy: threads of this call's own, joined before returning. */
static void
spawn_run(range_job *jobs, int threads)
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
cpu_parallel_for(int threads, size_t n, cpu_range_fn fn, void *ctx)
{
	cpu_parallel_for_min(threads, n, MIN_KEYS_PER_THREAD, fn, ctx);
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

	if (pthread_mutex_trylock(&pool.busy) == 0)
	{
		pool_run(jobs, threads);
		pthread_mutex_unlock(&pool.busy);
	}
	else
		spawn_run(jobs, threads);
}
