/*
 * cpht_util.h — door of kernels/util/: host helpers that the kernels use
 * and that the PostgreSQL side (src/) may call too.  Plain C, no
 * PostgreSQL or CUDA types.
 *
 * Offers: a parallel copy, a stable sort of (key, index) pairs, and the
 * span of a batch of keys (the width a table without key_bits reads).
 *
 * Who: anyone.  In src/, client/remote.c copies keys and statuses through
 * the worker's transfer windows with them, and api/insert_new.c and
 * plan/rows_by_tid_node.c sort rows by key; inside kernels/, util/'s own
 * headers (util/threads.h, util/key_span.h) offer the rest.
 *
 * Concurrency: every function is safe on any thread of the host process
 * and never calls back into it: the copies share the work between the
 * calling thread and the process's helper threads (util/threads.h), which
 * block every signal, and return only when every share is done; the sort
 * runs on the calling thread.  Nothing here raises or takes a lock of the
 * host's; a failure is a return value.
 */
#ifndef CPHT_UTIL_H
#define CPHT_UTIL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Copies `bytes` from src to dst on up to `threads` threads (0: one per
 * core), a thread per megabyte at most: one thread's memory bandwidth
 * would make a copy of hundreds of megabytes (a large batch going into the
 * cpht worker's transfer windows) cost more than the call on the GPU.  The
 * threads only copy, with every signal blocked, and each has finished its
 * share before it returns (the pool's helpers stay for the next call).
 */
void		cpht_parallel_memcpy(void *dst, const void *src, size_t bytes, int threads);

/* A key and the index (or other word) a sort carries with it. */
typedef struct cpht_key_index
{
	uint64_t	key;
	uint64_t	index;
} cpht_key_index;

/* Sorts items by key, ascending and stable (an LSD radix sort, on the
 * calling thread).  0, or -1 when its n-item buffer could not be had. */
int			cpht_sort_key_index(cpht_key_index *items, size_t n);

/*
 * The span of a batch of keys: the OR of the keys and the OR of their
 * zigzag folds, from which a table without key_bits reads the width of
 * the widest (kernels/table/table_widen.c; the span is taken in
 * kernels/util/key_span.c).  A table finds it with a pass over
 * the keys before every call; a caller that copies the keys anyway gets it
 * from that copy and hands it over, sparing the table its pass.
 */
typedef struct cpht_key_span
{
	uint64_t	plain;
	uint64_t	folded;
} cpht_key_span;

/* cpht_parallel_memcpy of n keys that also returns their span. */
void		cpht_copy_keys_spanned(uint64_t *dst, const uint64_t *src, size_t n, int threads,
								   cpht_key_span *span);

#ifdef __cplusplus
}
#endif

#endif							/* CPHT_UTIL_H */
