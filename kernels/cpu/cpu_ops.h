/*
 * cpu_ops.h — the CPU algorithms, one key at a time.  cpu_batches.c runs
 * them over batches on several threads (util/threads.h); the unit tests
 * call them directly.
 */
#ifndef CPHT_CPU_OPS_H
#define CPHT_CPU_OPS_H

#include "table/device_ops.h"
#include "util/threads.h"		/* the pool that runs them over batches */

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

#ifdef __cplusplus
}
#endif

#endif							/* CPHT_CPU_OPS_H */
