/*
 * shards/shards.h — door of kernels/shards/: a table split over several
 * tables (shards) by a hash of the key, behind the same calls as one
 * table.  Each call means what its cpht_table_* says in cpht_table.h.  A
 * call fails whole: the shards whose part worked are undone when another
 * fails.  One call takes at most UINT32_MAX keys; log positions count the
 * entries of all shards.
 *
 * Who: table/table_api.c alone outside shards/ (test/check-layout.sh),
 * which routes every public call on a table whose `sharded` is set here;
 * nothing else in the table layer knows shards exist.  shards_internal.h
 * is private.
 *
 * Concurrency: the caller (table_api.c) calls from the table's one
 * thread, has settled the table's stream (table_settle) and, for the
 * batch calls, begun and ends their timing (table_call_begin/_end); these
 * fill in the times a sharded call reports (cpht_call_times).  Inside a
 * call the shards run their parts through the one-table calls of
 * table/table_layer.h, on threads of their own where that pays (GPU
 * shards always, CPU shards for parts of many keys) and otherwise on the
 * calling thread, so each shard still has one thread at a time; the
 * threads are started per call with every signal blocked and joined
 * before the call returns.  The interrupt check is asked between pieces
 * and inside the shards' calls; a call stopped or failed part way is
 * undone on every shard.  Nothing here raises: a status is returned, with
 * the message in the sharded table.
 */
#ifndef CPHT_SHARDS_H
#define CPHT_SHARDS_H

#include "cpht_table.h"

/* params->shards 2..CPHT_MAX_SHARDS (else CPHT_ERR_INVALID) */
cpht_status shards_create(const cpht_params *params, cpht_table **out,
						  char *errbuf, size_t errlen);
uint64_t	shards_bytes(const cpht_params *params);
void		shards_destroy(cpht_table *t);

cpht_status shards_find_or_put(cpht_table *t, const uint64_t *keys, size_t n,
							   uint8_t *status);
cpht_status shards_find(cpht_table *t, const uint64_t *keys, size_t n,
						uint8_t *found);
cpht_status shards_erase(cpht_table *t, const uint64_t *keys, size_t n,
						 uint8_t *present);
cpht_status shards_undo(cpht_table *t, const uint64_t *keys,
						const uint8_t *where, size_t n);

void		shards_set_logging(cpht_table *t, int on);
void		shards_keep_log(cpht_table *t, uint64_t entries);
cpht_status shards_rollback_to(cpht_table *t, uint64_t position);
void		shards_truncate_log(cpht_table *t, uint64_t position);
cpht_status shards_log_read(cpht_table *t, uint64_t position, uint64_t n,
							uint64_t *keys, uint8_t *where);
void		shards_hold_deletes(cpht_table *t, int64_t delta);

cpht_status shards_rebuild(cpht_table *t);
cpht_status shards_grow(cpht_table *t);
cpht_status shards_stats(cpht_table *t, cpht_stats *out);
uint64_t	shards_slot_bytes(cpht_table *t);

/* Export scan: a sharded table's positions run over its shards in turn,
 * each shard's from 0 to its own scan end. */
uint64_t	shards_scan_end(cpht_table *t);
uint64_t	shards_changes(cpht_table *t);
cpht_status shards_scan_keys(cpht_table *t, uint64_t *position, uint64_t *keys,
							 size_t max, size_t *n);

#endif							/* CPHT_SHARDS_H */
