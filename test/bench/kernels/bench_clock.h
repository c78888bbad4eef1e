/*
 * bench_clock.h — the wall clock of the C benchmarks (grow_bench.c,
 * widen_bench.c, shard_bench.c): monotonic milliseconds.
 */
#ifndef CPHT_BENCH_CLOCK_H
#define CPHT_BENCH_CLOCK_H

#include <time.h>

static inline double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

#endif							/* CPHT_BENCH_CLOCK_H */
