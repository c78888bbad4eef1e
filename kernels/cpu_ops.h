/*
 * cpu_ops.h — the CPU algorithms, one key at a time.  cpu_backend.c runs
 * them over batches on several threads; the unit tests call them directly.
 */
#ifndef CPHT_CPU_OPS_H
#define CPHT_CPU_OPS_H

#include "table_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Iceberg (Alg. 1 of the paper, with tombstones that count as occupied).
 * The erases return where the key was (CPHT_WHERE), 0 when absent. */
uint8_t		iceberg_fop(const cpht_table *t, uint64_t key);
int			iceberg_find(const cpht_table *t, uint64_t key);
uint8_t		iceberg_erase(const cpht_table *t, uint64_t key, uint64_t replacement);
void		iceberg_prefetch(const cpht_table *t, uint64_t key);

/* Cuckoo (Alg. 4).  cuckoo_put returns 1 when the key (or the key its
 * eviction chain ended with) found a slot; otherwise 0 and *homeless is the
 * key left without one. */
int			cuckoo_find(const cpht_table *t, uint64_t key);
int			cuckoo_put(const cpht_table *t, uint64_t key, uint64_t *homeless);
uint8_t		cuckoo_erase(const cpht_table *t, uint64_t key);
void		cuckoo_prefetch(const cpht_table *t, uint64_t key);

/* Run fn(ctx, begin, end) over [0, n) in contiguous chunks on up to
 * `threads` threads (the caller's thread included).  Worker threads block
 * all signals: the host process (a PostgreSQL backend) handles them. */
typedef void (*cpu_range_fn) (void *ctx, size_t begin, size_t end);
void		cpu_parallel_for(int threads, size_t n, cpu_range_fn fn, void *ctx);
/* The same with a chosen least number of items per thread. */
void		cpu_parallel_for_min(int threads, size_t n, size_t min_per_thread,
								 cpu_range_fn fn, void *ctx);

#ifdef __cplusplus
}
#endif

#endif							/* CPHT_CPU_OPS_H */
