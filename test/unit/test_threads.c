/*
 * test_threads.c — cpu_parallel_for: every item is visited exactly once,
 * whatever the number of threads (up to more than there are items), while
 * two threads call it at once (a stream's helper thread and the backend do),
 * thousands of times in a row (a hang would be stopped by an alarm, which
 * fails the test); and in a process forked after the helper threads
 * started, which has none of them.
 */
#include <pthread.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cpu/cpu_ops.h"
#include "unit.h"

#define ROUNDS 5000
#define MAXN 6000

typedef struct visit
{
	unsigned char *seen;		/* one counter per item */
} visit;

static void
visit_range(void *ctx, size_t begin, size_t end)
{
	visit	   *v = ctx;

	for (size_t i = begin; i < end; i++)
		__atomic_fetch_add(&v->seen[i], 1, __ATOMIC_RELAXED);
}

static void *
caller(void *arg)
{
	int		   *bad = arg;
	unsigned char seen[MAXN];
	visit		v = {seen};

	for (int r = 0; r < ROUNDS; r++)
	{
		int			threads = 1 + r % 17;
		size_t		n = 1 + (size_t) (r * 7919) % MAXN;

		memset(seen, 0, n);
		cpu_parallel_for_min(threads, n, 1, visit_range, &v);
		for (size_t i = 0; i < n; i++)
			*bad += seen[i] != 1;
	}
	return NULL;
}

/* One round in a child forked after this process's helpers started: the
 * child has only the forking thread, so it must start helpers of its own
 * (a hang is ended by the alarm, as a failure). */
static int
forked_round_ok(void)
{
	pid_t		pid = fork();
	int			wstatus;

	if (pid < 0)
		return 0;
	if (pid == 0)
	{
		int			bad = 0;
		unsigned char seen[MAXN];
		visit		v = {seen};

		alarm(10);
		memset(seen, 0, MAXN);
		cpu_parallel_for_min(8, MAXN, 1, visit_range, &v);
		for (size_t i = 0; i < MAXN; i++)
			bad += seen[i] != 1;
		_exit(bad == 0 ? 0 : 1);
	}
	if (waitpid(pid, &wstatus, 0) != pid)
		return 0;
	return WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0;
}

int
main(void)
{
	pthread_t	a,
				b;
	int			bad_a = 0,
				bad_b = 0;

	alarm(300);

	CHECK(pthread_create(&a, NULL, caller, &bad_a) == 0, "start caller a");
	CHECK(pthread_create(&b, NULL, caller, &bad_b) == 0, "start caller b");
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	CHECK(bad_a == 0, "caller a: %d items not visited exactly once", bad_a);
	CHECK(bad_b == 0, "caller b: %d items not visited exactly once", bad_b);
	CHECK(forked_round_ok(), "a process forked after helpers started splits a batch");
	UNIT_DONE();
}
