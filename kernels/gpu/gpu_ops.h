/*
 * gpu_ops.h — the GPU operations on device arrays, one call per batch that
 * already sits in device memory.  gpu_pipeline.cu feeds them chunks of the
 * caller's host arrays; the benchmark (test/bench/kernels/gpu_bench.cu) calls them
 * directly to time the kernels alone.  All run on the table's compute
 * stream (gpu_state.comp) and return without waiting, except where noted.
 * n is at most 2^32 - 1 per call.
 */
#ifndef CPHT_GPU_OPS_H
#define CPHT_GPU_OPS_H

#include "gpu/gpu_common.h"

/* ---- iceberg (gpu_iceberg.cu) ------------------------------------------- */

/* status[i] = CPHT_FOUND, CPHT_PUT or CPHT_FULL. */
cpht_status gpu_iceberg_fop(cpht_table *t, const uint64_t *dkeys, uint32_t n, uint8_t *dstatus);

/* found[i] = 1 if present. */
cpht_status gpu_iceberg_find(cpht_table *t, const uint64_t *dkeys, uint32_t n, uint8_t *dfound);

/* present[i] = 1 where this call removed the key (tombstone, or EMPTY when
 * undoing the latest call). */
cpht_status gpu_iceberg_erase(cpht_table *t, const uint64_t *dkeys, uint32_t n,
							  uint8_t *dpresent, int to_empty);

/* Scratch bytes an iceberg find, erase or ungrouped find-or-put of n keys
 * uses (its overflow lists). */
size_t		gpu_iceberg_scratch_bytes(uint32_t n);

/* ---- cuckoo (gpu_cuckoo.cu) --------------------------------------------- */

/*
 * Sort-based find-or-put: find every key; sort the absent ones, keeping
 * their positions; the first occurrence of each absent key is PUT, the
 * rest FOUND; put the distinct absent keys.  Keys that end an eviction
 * chain without a slot are copied to homeless[*nhomeless...] on the host
 * (*nhomeless is advanced).  Waits for the device (the sort needs the
 * number of absent keys).
 */
cpht_status gpu_cuckoo_fop(cpht_table *t, const uint64_t *dkeys, uint32_t n, uint8_t *dstatus,
						   uint64_t *homeless, size_t *nhomeless);

cpht_status gpu_cuckoo_find(cpht_table *t, const uint64_t *dkeys, uint32_t n, uint8_t *dfound);
cpht_status gpu_cuckoo_erase(cpht_table *t, const uint64_t *dkeys, uint32_t n, uint8_t *dpresent);

/*
 * Put n keys known to be distinct and absent (Alg. 4).  The keys left
 * homeless go to dhomeless, counted in *dhomeless_count (device memory,
 * not reset here).
 */
cpht_status gpu_cuckoo_put(cpht_table *t, const uint64_t *dkeys, uint32_t n,
						   uint64_t *dhomeless, uint32_t *dhomeless_count);

/* ---- the kinds (gpu_pipeline.cu) ---------------------------------------- */

/*
 * What each table kind runs on a chunk of keys in device memory, indexed
 * by cpht_kind (the GPU's counterpart of cpu_kinds in cpu/cpu_batches.c):
 * the calls above under one signature.  find_or_put writes homeless keys
 * only for a kind that evicts (its policy's evicts, kind_policy.h); erase
 * honours to_empty only for one whose policy has undo_to_empty.
 * find_scratch_bytes: the scratch a find of n keys needs, reserved with
 * the transfer buffers so that a find takes no memory of its own (NULL:
 * none).  The rules of the kinds' layouts are in t->kind_policy.
 */
typedef struct gpu_kind
{
	cpht_status (*find_or_put) (cpht_table *t, const uint64_t *dkeys, uint32_t n,
								uint8_t *dstatus, uint64_t *homeless, size_t *nhomeless);
	cpht_status (*find) (cpht_table *t, const uint64_t *dkeys, uint32_t n, uint8_t *dfound);
	cpht_status (*erase) (cpht_table *t, const uint64_t *dkeys, uint32_t n,
						  uint8_t *dpresent, int to_empty);
	size_t		(*find_scratch_bytes) (uint32_t n);
} gpu_kind;

extern const gpu_kind gpu_kinds[2];

/* ---- tally and undo log (gpu_log.cu) ------------------------------------ */

/* Zero the call's counters; count (and log) one chunk's results; read the
 * counts back (waits for the device).  log_at: first log entry of this
 * call's hits, or CPHT_NO_LOG. */
cpht_status gpu_tally_reset(cpht_table *t);
cpht_status gpu_tally_chunk(cpht_table *t, const uint64_t *dkeys, const uint8_t *dout,
							uint32_t n, uint8_t hit, uint64_t log_at);
cpht_status gpu_tally_read(cpht_table *t, cpht_tally *tally);

cpht_status gpu_log_reserve(cpht_table *t, uint64_t entries, uint64_t keep);
cpht_status gpu_log_write(cpht_table *t, uint64_t at, const uint64_t *keys, size_t n);
cpht_status gpu_log_read(cpht_table *t, uint64_t at, size_t n, uint64_t *keys);
void		gpu_log_release(cpht_table *t);

/* ---- grouping a batch by bucket (gpu_group.cu) -------------------------- */

/*
 * A batch much larger than the table's share of L2 touches every bucket
 * several times; grouped by primary bucket, consecutive keys touch one
 * L2-sized slice at a time, so a bucket should come from memory about
 * once.  (Measured on the H100 it pays only for inserts on 16-byte
 * buckets; see test/bench/kernels/gpu-results.md.)
 */
typedef struct gpu_group
{
	int			bits;			/* 2^bits groups; 0: the batch is not grouped */
	uint32_t	nblocks;		/* blocks of the histogram and scatter kernels */
	uint64_t   *keys;			/* the batch, grouped */
	uint16_t   *pos;			/* key i's place in its tile sorted by group */
	uint8_t    *res;			/* results in grouped order */
	uint32_t   *counts;			/* [group][block] histogram, then offsets */
	uint32_t   *offsets;
	void	   *tmp;			/* scan temporaries */
	size_t		tmp_bytes;
} gpu_group;

/* How many bits of grouping a batch of n keys wants on this table (0: none);
 * `inserts`: the batch is a find-or-put. */
int			gpu_group_bits(const cpht_table *t, size_t n, int inserts);

/* Lay out the grouping temporaries for n keys (g->bits set). */
void		gpu_group_carve(gpu_carve *c, gpu_group *g, uint32_t n);

/* Group dkeys into g->keys, recording g->pos. */
cpht_status gpu_group_keys(cpht_table *t, const gpu_group *g, const uint64_t *dkeys, uint32_t n);

/* Results in grouped order (g->res) back to input order in dout. */
cpht_status gpu_group_results(cpht_table *t, const gpu_group *g, uint32_t n, uint8_t *dout);

/* ---- rollback support (gpu_revive.cu) ----------------------------------- */

/* Put back distinct absent keys, each into the slot where[i] names, which
 * must hold a tombstone; status[i] = CPHT_PUT, or CPHT_FULL if it did not. */
cpht_status gpu_revive(cpht_table *t, const uint64_t *dkeys, const uint8_t *dwhere, uint32_t n,
					   uint8_t *dstatus);

/* ---- rebuild, image and export support (gpu_slot_copy.cu) --------------- */

/* Copy a level's slot array to or from host memory.  Wait for the device. */
cpht_status gpu_copy_level(cpht_table *t, int level, void *host);
cpht_status gpu_copy_slot_range(cpht_table *t, int level, uint64_t first, uint64_t count, void *host);
cpht_status gpu_write_level(cpht_table *t, int level, const void *host);
/* Start copying bytes of a level's slots from host memory (on the table's
 * compute stream); gpu_slot_writes_wait waits for every such copy. */
cpht_status gpu_write_slot_bytes(cpht_table *t, int level, uint64_t offset, const void *host,
								 uint64_t bytes);
cpht_status gpu_slot_writes_wait(cpht_table *t);

/* ---- growth (gpu_grow.cu) ----------------------------------------------- */

/* Backend move_keys: every live key of `from` into the new table `to`, on
 * the device.  Waits for the device. */
cpht_status gpu_move_keys(cpht_table *to, cpht_table *from, uint64_t *full);

/* ---- scan (gpu_count.cu) -------------------------------------------------- */

/* Live and tombstone slots per level.  Waits for the device. */
cpht_status gpu_scan_levels(cpht_table *t, uint64_t *live, uint64_t *tombstones);

/* ---- the host pipeline (gpu_pipeline.cu) -------------------------------- */

/* Bytes of the transfer buffers for chunks of `chunk` keys. */
uint64_t	gpu_staging_bytes_for(size_t chunk);

/* Transfer buffers for batches of n keys (capped at GPU_CHUNK_KEYS), held
 * against the memory hook; where the hook refuses larger ones, a table
 * keeps the ones it has (calls then run in smaller chunks).
 * gpu_free_staging frees them and gives them back. */
cpht_status gpu_ensure_staging(cpht_table *t, size_t n);
void		gpu_free_staging(gpu_state *st);

/* The ops table's find_or_put, find and erase (device_ops.h): a batch of
 * host arrays in chunks through the transfer buffers. */
cpht_status gpu_find_or_put(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *status,
							uint64_t *homeless, size_t *nhomeless, cpht_tally *tally,
							uint64_t log_at);
cpht_status gpu_find(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *found);
cpht_status gpu_erase(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *present,
					  int to_empty, cpht_tally *tally, uint64_t log_at);

/* resident_ops (device_ops.h): the same on arrays already in the table's
 * device memory; each waits for the device. */
cpht_status gpu_find_or_put_resident(cpht_table *t, const uint64_t *dkeys, size_t n,
									 uint8_t *dstatus, uint64_t *homeless, size_t *nhomeless,
									 cpht_tally *tally, uint64_t log_at);
cpht_status gpu_find_resident(cpht_table *t, const uint64_t *dkeys, size_t n, uint8_t *dfound);
cpht_status gpu_resident_to_host(cpht_table *t, void *host, const void *dev, size_t bytes);
/* Device memory into any host array, through the table's pinned transfer
 * buffers (gpu_pipeline.cu); waits until it is there. */
cpht_status gpu_download(cpht_table *t, void *host, const void *dev, size_t bytes);
cpht_status gpu_resident_from_host(cpht_table *t, void *dev, const void *host, size_t bytes);
cpht_status gpu_resident_fill(cpht_table *t, void *dev, int value, size_t bytes);

/* ---- routing a batch over several tables' devices (gpu_route.cu) --------- */

extern const cpht_route_ops gpu_route_ops;

/* ---- backend (gpu_device.cu) -------------------------------------------- */

/* Force grouping on (GPU_GROUP_ON / _FINE) or off for this table
 * (benchmarks); GPU_GROUP_AUTO restores the measured rule of
 * gpu_group_bits. */
void		gpu_set_grouping(cpht_table *t, int mode);

#endif							/* CPHT_GPU_OPS_H */
