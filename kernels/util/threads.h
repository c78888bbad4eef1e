/*
 * util/threads.h — the host thread pool (util/threads.c): a batch split
 * over a few threads.  Any kernels folder may use it; it knows nothing of
 * tables.
 *
 * Worker threads block all signals: the host process (a PostgreSQL
 * backend) handles them.  A call returns only when every share is done.
 */
#ifndef CPHT_UTIL_THREADS_H
#define CPHT_UTIL_THREADS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Run fn(ctx, begin, end) over [0, n) in contiguous chunks on up to
 * `threads` threads (the caller's thread included). */
typedef void (*cpu_range_fn) (void *ctx, size_t begin, size_t end);
void		cpu_parallel_for(int threads, size_t n, cpu_range_fn fn, void *ctx);
/* The same with a chosen least number of items per thread. */
void		cpu_parallel_for_min(int threads, size_t n, size_t min_per_thread,
								 cpu_range_fn fn, void *ctx);

#ifdef __cplusplus
}
#endif

#endif							/* CPHT_UTIL_THREADS_H */
