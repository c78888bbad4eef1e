/*
 * cpu_threads.c — split a batch over a few threads.
 *
 * The CPU implementation runs inside a PostgreSQL backend, which is single
 * threaded and handles signals itself.  Worker threads therefore block every
 * signal (so the kernel delivers them to the backend's own thread), never
 * call back into the host process, and are joined before the call returns.
 * If a thread cannot be started its share runs on the calling thread.
 */
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "cpu_ops.h"
#include "cpht_table.h"

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

void
cpu_parallel_for_min(int threads, size_t n, size_t min_per_thread, cpu_range_fn fn, void *ctx)
{
	range_job	jobs[MAX_THREADS];
	pthread_t	tids[MAX_THREADS];
	int			started[MAX_THREADS] = {0};
	sigset_t	all,
				saved;
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

/* A large host copy in slices of at least this many bytes per thread. */
#define MIN_COPY_BYTES_PER_THREAD ((size_t) 1 << 20)

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
