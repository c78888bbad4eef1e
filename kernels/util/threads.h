/*
 * util/threads.h — the host thread pool (util/threads.c): a batch split
 * over a few threads.  It knows nothing of tables.
 *
 * Who: every kernels folder (table, shards, cpu, gpu; test/check-layout.sh);
 * src/ reaches the pool only through cpht_util.h's copies.
 *
 * Concurrency: fn runs on the calling thread (the first share) and on the
 * pool's helpers, which are kept for the life of the process and block
 * every signal: the host process (a PostgreSQL backend or the cpht worker)
 * handles them.  A call returns only when every share is done.  Any
 * thread may call: a call that finds the pool taken by another thread (the
 * shards of a table split their batches at once) starts threads of its
 * own, and a share whose thread cannot be started runs on the calling
 * thread.  fn must not call back into the host process (no palloc, no
 * ereport, no signal handling); a process forked after the helpers
 * started starts its own.
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
