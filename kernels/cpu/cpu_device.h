/*
 * cpu_device.h — what the files of the CPU device share (private to
 * kernels/cpu/): the batch operations of cpu_batches.c, the slot copies,
 * scan and revive of cpu_slot_copy.c and the growth of cpu_grow.c, which
 * cpu_device.c puts in the ops table (cpht_cpu_ops).  Their contracts are
 * those of the entries of the same name in table/device_ops.h.
 */
#ifndef CPHT_CPU_DEVICE_H
#define CPHT_CPU_DEVICE_H

#include "cpu/cpu_ops.h"

/* cpu_batches.c */
cpht_status cpu_find_or_put(cpht_table *t, const uint64_t *keys, size_t n,
							uint8_t *status, uint64_t *homeless, size_t *nhomeless,
							cpht_tally *tally, uint64_t log_at);
cpht_status cpu_find(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *found);
cpht_status cpu_erase(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *present,
					  int to_empty, cpht_tally *tally, uint64_t log_at);

/* cpu_slot_copy.c */
cpht_status cpu_scan(cpht_table *t, uint64_t *live, uint64_t *tombstones);
cpht_status cpu_revive(cpht_table *t, const uint64_t *keys, const uint8_t *where, size_t n,
					   uint8_t *status);
cpht_status cpu_copy_slots(cpht_table *t, int level, void *host);
cpht_status cpu_copy_slot_range(cpht_table *t, int level, uint64_t first, uint64_t count,
								void *host);
cpht_status cpu_write_slots(cpht_table *t, int level, const void *host);
cpht_status cpu_write_slot_bytes(cpht_table *t, int level, uint64_t offset, const void *host,
								 uint64_t bytes);
cpht_status cpu_slot_writes_wait(cpht_table *t);

/* cpu_grow.c */
cpht_status cpu_move_keys(cpht_table *to, cpht_table *from, uint64_t *full);

#endif							/* CPHT_CPU_DEVICE_H */
