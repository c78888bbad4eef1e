/*
 * table/device_ops.h — what the table layer (kernels/table/) and the two
 * devices (kernels/cpu/, kernels/gpu/) share behind cpht_table.h: struct
 * cpht_table, the device ops table each device fills (cpht_cpu_ops,
 * cpht_gpu_ops) with its optional sub-tables (the GPU's undo-log store,
 * pinned memory, keys resident on the device, routing over several GPUs),
 * and the layer's helpers a device calls: table_fail, the memory hook
 * (table_memory_take/_give) and the interrupt check (table_interrupted).
 *
 * The table layer owns everything that is the same on both devices:
 * parameter checks and sizing, the key count, undoing a call that ran out
 * of room, the undo log's host store and the cuckoo stash.  A device owns
 * the slot memory and runs the algorithms.
 *
 * Who: table/, and shards/, cpu/ and gpu/ (test/check-layout.sh); never
 * src/, which sees only the opaque cpht_table of cpht_table.h.  It brings
 * table/kind_policy.h, table/layout.h and util/faults.h along.
 *
 * Concurrency: a table is used from one thread at a time (cpht_table.h):
 * its owner's, a stream's helper thread (the owner's calls wait for its
 * batch), or a shard's thread inside a sharded call.  The device entries
 * are called by the layer (and the routing entries by shards/) on that
 * thread; a device may split its host work over the pool of
 * util/threads.h.  The entries return a status and leave the message in
 * t->errmsg (table_fail); they ask table_memory_take before taking memory
 * the hook counts, and the long ones ask table_interrupted between steps
 * (CPHT_ERR_CANCELED); both hooks may run on any thread, as cpht_table.h
 * requires of them.
 */
#ifndef CPHT_DEVICE_OPS_H
#define CPHT_DEVICE_OPS_H

#include "cpht_table.h"
#include "table/kind_policy.h"
#include "table/layout.h"
#include "util/faults.h"

#include <pthread.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cpht_device_ops cpht_device_ops;

/* A run of undo-log entries [start, next run's start or log_len). */
typedef struct cpht_log_run
{
	uint64_t	start;
	int			deleted;		/* 1: keys deleted, 0: keys inserted */
	uint64_t	where_at;		/* deleted entries logged before this run:
								 * entry start + i of a deleted run has its
								 * place at log_where[where_at + i] */
} cpht_log_run;

/*
 * Where an erase found a key, one byte: 0 when absent, else
 * CPHT_WHERE(order, slot) with `order` the key's bucket in find's order
 * (layout_where_bucket) and `slot` its slot in that bucket.  Erase reports
 * it per key, the undo log keeps it with each deleted key, and rollback
 * puts the key back into exactly that slot.  CPHT_WHERE_STASH: the key was
 * in the cuckoo stash.  Codes are at least 0x80, so they never equal the
 * other result bytes (CPHT_FOUND, CPHT_PUT, CPHT_FULL, GPU_NEXT).
 */
#define CPHT_WHERE(order, slot) ((uint8_t) (0x80 | ((order) << 5) | (slot)))
#define CPHT_WHERE_ORDER(code) (((code) >> 5) & 3)
#define CPHT_WHERE_SLOT(code) ((code) & 31)
#define CPHT_WHERE_STASH ((uint8_t) 0xff)
#define CPHT_IS_WHERE(code) (((code) & 0x80) != 0)

/*
 * What a device tells about a find_or_put or erase it ran: `hits` keys
 * got status CPHT_PUT (find_or_put) or were removed (erase), `full` keys
 * got CPHT_FULL.  When the call is asked to log (log_at != CPHT_NO_LOG, only
 * for a device with a log store) it also wrote those `hits` keys to its
 * store at entries [log_at, log_at + hits), in any order.
 */
typedef struct cpht_tally
{
	uint64_t	hits;
	uint64_t	full;
} cpht_tally;

#define CPHT_NO_LOG UINT64_MAX

/*
 * An undo-log store kept by the device (the GPU keeps the logged keys in
 * device memory, next to the table, so that its kernels append to it
 * without a transfer).  reserve makes room for `entries` in all, keeping
 * the first `keep` (log_len and what the running call already wrote past
 * it); write and read copy entries [at, at + n) from and to host memory;
 * release frees the store.  A device without one (the CPU) leaves the log
 * to the table layer's host store, which its users read in place.
 */
typedef struct cpht_log_store
{
	cpht_status (*reserve) (cpht_table *t, uint64_t entries, uint64_t keep);
	cpht_status (*write) (cpht_table *t, uint64_t at, const uint64_t *keys, size_t n);
	cpht_status (*read) (cpht_table *t, uint64_t at, size_t n, uint64_t *keys);
	void		(*release) (cpht_table *t);
} cpht_log_store;

/*
 * Pinned host memory, which any of the process's devices transfers from
 * by DMA (alloc, free), and telling a table that arrays inside
 * [begin, begin + len) are such memory (set_direct), so that its calls
 * transfer from them without staging.
 */
typedef struct cpht_pinned_ops
{
	void	   *(*alloc) (size_t bytes);
	void		(*free) (void *p);
	void		(*set_direct) (cpht_table *t, const void *begin, size_t len);
} cpht_pinned_ops;

/*
 * Arrays already in the table's device memory (a sharded table routing a
 * call on its devices, kernels/shards/shards_route.c): find_or_put and find
 * mean what the entries of the same names below mean, but keys and answers
 * are device arrays on the table's device; each waits for its work before
 * it returns.  to_host copies `bytes` of such an array to host memory (the
 * undo of a call that failed or found the table full reads them there);
 * from_host copies `bytes` of host memory into one (the answers of a call
 * that went through host memory, table_resident.c); fill sets `bytes` of
 * one to `value`.
 */
typedef struct cpht_resident_ops
{
	cpht_status (*find_or_put) (cpht_table *t, const uint64_t *dkeys, size_t n,
								uint8_t *dstatus, uint64_t *homeless,
								size_t *nhomeless, cpht_tally *tally,
								uint64_t log_at);
	cpht_status (*find) (cpht_table *t, const uint64_t *dkeys, size_t n,
						 uint8_t *dfound);
	cpht_status (*to_host) (cpht_table *t, void *host, const void *dev, size_t bytes);
	cpht_status (*from_host) (cpht_table *t, void *dev, const void *host, size_t bytes);
	cpht_status (*fill) (cpht_table *t, void *dev, int value, size_t bytes);
} cpht_resident_ops;

/*
 * Routing a batch over the devices of several tables (one per device, the
 * shards of one table), kernels/gpu/gpu_route.cu.  create gives a router
 * for tables[0..n), keys going to table layout_shard_of(key, seed, n), or
 * NULL with the reason in why (the devices cannot reach each other's
 * memory, two tables share a device).  A call goes in the pieces of
 * cpht_route_piece (begin: the whole batch, keys and answer host arrays,
 * and the pieces' `chunk`).
 * prefetch(i) starts the upload of piece i, each device taking a
 * contiguous slice by position (begin starts those of pieces 0 and 1),
 * into the buffers of piece i - 2, so after scatter(i - 2).  scatter(i)
 * waits for that upload, partitions each slice by table and sends each
 * table its keys, in input order, device to device: on return table s's
 * keys of the piece are dkeys[s][0..got[s]), with room for their answers
 * in dout[s].  gather(i) brings the answers back to the devices the keys
 * came from and writes them to answer[] at the piece's positions (into
 * registered memory the copy may still run on return).  Pieces overlap: scatter(i + 1) and then
 * prefetch(i + 3) may run while the shards work on piece i, before
 * gather(i).  finish ends a call, done or failed:
 * every copy of the router done (answer[] complete), its error the
 * call's.  The router's memory is held against the memory hook;
 * failures are reported in `t` (the sharded table).
 */
/*
 * Piece i of a routed call of n keys in pieces of up to `chunk`: keys
 * [return value, + *len), *len 0 past the last piece.  A call of two
 * chunks or more starts with pieces of chunk/8, chunk/4 and chunk/2 keys:
 * the devices start on the first while the larger ones are still on their
 * way up, so that only the first small piece's upload is not hidden
 * (measured on 4 H200s, the first whole piece's upload was 1.8 ms of an
 * 18 ms call).  A shorter call goes in whole chunks: one just over a chunk
 * would otherwise take four pieces, each with its fixed costs (0.2-0.3
 * ms).  The router (gpu_route.cu) and the pipeline (shards_route.c) both
 * cut pieces here.
 */
static inline size_t
cpht_route_piece(size_t chunk, size_t n, size_t i, size_t *len)
{
	size_t		lo = 0,
				size = chunk;

	if (n >= 2 * chunk && chunk >= 8)
	{
		for (size_t k = 0; k < i && k < 3; k++)
			lo += chunk >> (3 - k);
		if (i < 3)
			size = chunk >> (3 - i);
		else
			lo += (i - 3) * chunk;
	}
	else
		lo = i * chunk;
	*len = lo >= n ? 0 : n - lo < size ? n - lo : size;
	return lo;
}

typedef struct cpht_route_ops
{
	void	   *(*create) (cpht_table **tables, int n, uint64_t seed, char *why, size_t len);
	void		(*destroy) (void *router);
	/* make the buffers for pieces of up to `chunk` keys now rather than at
	 * the first call (the sharded table asks when it is made) */
	cpht_status (*prepare) (void *router, cpht_table *t, size_t chunk);
	cpht_status (*begin) (void *router, cpht_table *t, const uint64_t *keys, size_t n,
						  uint8_t *answer, size_t chunk, int threads);
	cpht_status (*scatter) (void *router, cpht_table *t, size_t piece, size_t *got,
							uint64_t **dkeys, uint8_t **dout);
	cpht_status (*prefetch) (void *router, cpht_table *t, size_t piece);
	cpht_status (*gather) (void *router, cpht_table *t, size_t piece);
	cpht_status (*finish) (void *router, cpht_table *t);
	/* after finish: the keys [0, answered) of the call have their answers
	 * in answer[] (a copy down that failed, or was not waited for before
	 * a failure, is not counted) */
	size_t		(*answered) (void *router);
	/* what the last call's pieces spent, summed (ms): slices onto the
	 * devices, routing and sending keys, answers back, answers off the
	 * devices */
	void		(*times) (void *router, double *in, double *exchange, double *back,
						  double *out);
} cpht_route_ops;

struct cpht_table
{
	cpht_params params;			/* slot_bits resolved, cpu_threads resolved */
	const cpht_kind_policy *kind_policy;	/* the rules of params.kind's
											 * layout, set with the levels */
	int			levels;			/* kind_policy->levels: iceberg 2, cuckoo 1 */
	layout_level level[CPHT_MAX_LEVELS];
	uint64_t	count;			/* distinct keys stored, stash included */
	uint64_t   *stash;			/* cuckoo keys no bucket could take, sorted */
	size_t		nstash;
	/*
	 * Undo log: keys in call order, in runs of one operation (a call that
	 * inserts adds a run of inserted keys, a delete a run of deleted keys).
	 * The keys live in host memory (log_keys) unless the device keeps them
	 * itself (the GPU keeps them in device memory, next to the table).
	 */
	int			logging;
	uint64_t   *log_keys;		/* host store; NULL with a device store */
	void	   *log_store;		/* device store (the GPU's device array);
								 * kept by t across a rebuild */
	uint64_t	log_len;		/* entries */
	uint64_t	log_cap;		/* entries the store has room for */
	uint64_t	log_keep;		/* an emptied log keeps a store this large
								 * (cpht_table_keep_log) */
	cpht_log_run *log_runs;
	size_t		log_nruns;
	size_t		log_runs_cap;
	uint8_t    *log_where;		/* host: place of each deleted entry */
	uint64_t	log_nwhere;		/* deleted entries in the log */
	uint64_t	log_where_cap;
	/*
	 * While the log holds deleted keys, their tombstones are where a
	 * rollback puts them back: nothing may take them (cuckoo puts and
	 * evictions then take EMPTY slots only).  Kept by the log code.
	 */
	int			keep_tombstones;
	uint64_t	held_deletes;	/* deleted entries the caller read out of the
								 * log and keeps (cpht_table_hold_deletes):
								 * their tombstones are kept too */
	int			held_places_stale;	/* a growth moved the keys while deletes
									 * were held: their places are gone, so
									 * cpht_table_undo puts them back with a
									 * plain put until no delete is held */
	int			reinserting;	/* table_undo_call is putting evicted keys
								 * back: a device must try every key, not
								 * stop at the first homeless one */
	int			log_moved;		/* keys moved (rebuild, re-put by a rollback)
								 * since the log began: undo by tombstones */
	cpht_call_times times;		/* where the last call spent its time */
	/* cpht_table_expect_span: the next call's keys and their span */
	const uint64_t *span_keys;
	size_t		span_n;
	cpht_key_span span;
	/* growth (table_grow.c) */
	uint64_t	grows;
	double		last_grow_ms;
	int64_t		last_grow_at_us;
	uint64_t	initial_slots;	/* all levels, at creation */
	uint64_t	changes;		/* calls that changed the keys or their places
								 * (cpht_table_changes) */
	int64_t		grown_bytes;	/* slot bytes taken from the memory hook
								 * by growth and widening (given back at
								 * destroy) */
	/* automatic key width (table_widen.c) */
	uint64_t	widens;
	double		last_widen_ms;
	/* streams (cpht_stream_*): the batch running on a helper thread */
	int			running;
	pthread_t	runner;
	cpht_stream *streams;
	/*
	 * A sharded table: several tables hold the keys (kernels/shards/, its
	 * own state behind this pointer); this one keeps no slots (ops
	 * NULL) and its count and log_len are the sums of theirs.  NULL for
	 * one table.  Only table/table_api.c tests it.
	 */
	struct cpht_sharded *sharded;
	const cpht_device_ops *ops;	/* the device's entries, chosen at create */
	void	   *device_state;	/* the GPU's stream, buffers, device index */
	char		errmsg[512];
};

/*
 * A device: the entries both devices implement, chosen once when a table
 * is made (t->ops: cpht_cpu_ops or cpht_gpu_ops), and two optional
 * sub-tables for what only one device has.  All arrays are host arrays; the
 * GPU stages them.
 *
 * A find_or_put or erase that fails part way (a device fault) may have
 * changed the table already: it leaves status/present[i] 0 for every key it
 * did not get to, reports what it did for the others (find_or_put: CPHT_PUT
 * for every key it may have inserted; erase: the places it removed keys
 * from) and, on the cuckoo table, the homeless keys of its finished steps,
 * so that the table layer can undo exactly that.
 *
 * find_or_put: status[i] as in cpht_table.h.  When a key finds no slot the
 *   call still runs to the end and reports it:
 *   - iceberg: status[i] = CPHT_FULL for that key;
 *   - cuckoo: status[i] = CPHT_PUT for every key the call set out to insert
 *     and the keys left without a slot after a failed eviction chain (these
 *     may be keys that were stored before the call) are written to
 *     homeless[0..*nhomeless), which has room for n keys.
 *   The table layer then undoes the call.  *tally counts the outcome and,
 *   with log_at set, the inserted keys go to the log store.
 * erase: present[i] = CPHT_WHERE(...) where the key was found and removed
 *   (its place before the call), 0 where absent; to_empty = 1
 *   writes EMPTY instead of a tombstone, which is only correct when undoing
 *   the latest call on an iceberg table (its keys took slots that were
 *   empty before, and nothing was inserted after them).  *tally and log_at
 *   as for find_or_put, for the removed keys.
 * scan: live and tombstone slots per level.
 * copy_slots: copy level l's slot array to host memory (rebuild reads the
 *   keys back out of it); it may stop for an interrupt (CPHT_ERR_CANCELED).
 * revive: put back distinct keys known to be absent whose deletion a
 *   rollback undoes, each into the slot erase reported (where[i], never
 *   CPHT_WHERE_STASH), which holds its tombstone; status[i] = CPHT_PUT, or
 *   CPHT_FULL when that slot is not a tombstone (never, while the rules
 *   above hold).
 * write_slots: copy level l's slots from host memory (rebuild).
 * copy_slot_range: copy slots [first, first + count) of level l to host
 *   memory, packed at their width (export reads a table a piece at a time).
 * move_keys: insert every live key of `from` (same kind and device; its
 *   slots are only read) into `to`, a new empty table (growth); the keys are
 *   distinct and absent from `to`.  *full = keys that found no slot (then
 *   `to` is thrown away).  It may stop for an interrupt (CPHT_ERR_CANCELED).
 * device_memory: free and total memory of the table's device (0 and 0
 *   for host memory).
 * device_ordinal: the CUDA ordinal of the table's device (-1: host memory).
 */
struct cpht_device_ops
{
	const char *name;
	cpht_status (*create) (cpht_table *t);
	void		(*destroy) (cpht_table *t);
	cpht_status (*find_or_put) (cpht_table *t, const uint64_t *keys, size_t n,
								uint8_t *status, uint64_t *homeless,
								size_t *nhomeless, cpht_tally *tally,
								uint64_t log_at);
	cpht_status (*find) (cpht_table *t, const uint64_t *keys, size_t n,
						 uint8_t *found);
	cpht_status (*erase) (cpht_table *t, const uint64_t *keys, size_t n,
						  uint8_t *present, int to_empty, cpht_tally *tally,
						  uint64_t log_at);
	cpht_status (*scan) (cpht_table *t, uint64_t *live, uint64_t *tombstones);
	void		(*device_name) (cpht_table *t, char *buf, size_t len);
	uint64_t	(*staging_bytes) (cpht_table *t);
	cpht_status (*copy_slots) (cpht_table *t, int level, void *host);
	cpht_status (*revive) (cpht_table *t, const uint64_t *keys, const uint8_t *where,
						   size_t n, uint8_t *status);
	cpht_status (*write_slots) (cpht_table *t, int level, const void *host);
	void		(*device_memory) (cpht_table *t, uint64_t *free_bytes, uint64_t *total_bytes);
	cpht_status (*move_keys) (cpht_table *to, cpht_table *from, uint64_t *full);
	/* slots [first, first + count) of level l to host memory (scan_keys) */
	cpht_status (*copy_slot_range) (cpht_table *t, int level, uint64_t first,
									uint64_t count, void *host);
	/*
	 * Growth and widening: make or free only the slot arrays of t's levels
	 * (zeroed), for a new layout whose device_state is the table's own, so
	 * that it keeps its streams, transfer buffers and scratch
	 * (create_slots sizes the transfer buffers to the new layout, as
	 * create does).
	 */
	cpht_status (*create_slots) (cpht_table *t);
	void		(*destroy_slots) (cpht_table *t);
	int			(*device_ordinal) (cpht_table *t);
	/*
	 * Restore a piece at a time: copy `bytes` from host to level l's slots
	 * at byte `offset`, a copy that may still run on return (host stays
	 * untouched until slot_writes_wait, which also reports its failure).
	 */
	cpht_status (*write_slot_bytes) (cpht_table *t, int level, uint64_t offset,
									 const void *host, uint64_t bytes);
	cpht_status (*slot_writes_wait) (cpht_table *t);
	/* NULL: the table layer keeps the undo log in host memory (table_log.c) */
	const cpht_log_store *log_store;
	/* NULL: the device has no pinned memory (the CPU) */
	const cpht_pinned_ops *pinned;
	/* NULL: calls take host arrays only (the CPU) */
	const cpht_resident_ops *resident;
	/* NULL: a sharded table of this device splits its calls on the host */
	const cpht_route_ops *route;
};

/* Bits a radix sort of a batch's raw keys must cover to group equal keys:
 * key_bits, unless folded keys may be negative. */
static inline int
table_sort_bits(const cpht_table *t)
{
	return t->params.signed_keys ? 64 : t->params.key_bits;
}

extern const cpht_device_ops cpht_cpu_ops;

#ifdef CPHT_WITH_GPU
extern const cpht_device_ops cpht_gpu_ops;
#endif

/* printf into t->errmsg; returns `code` so callers can `return table_fail(...)`. */
cpht_status table_fail(cpht_table *t, cpht_status code, const char *fmt,...)
#ifdef __GNUC__
			__attribute__((format(printf, 3, 4)))
#endif
			;

/* The memory hook (cpht_set_memory_hook), for the table layer and the
 * devices (the GPU's transfer buffers and scratch area): take asks for
 * bytes more (1: go ahead), give hands bytes back (table.c). */
int			table_memory_take(uint64_t bytes);
void		table_memory_give(uint64_t bytes);

/* The interrupt check (cpht_set_interrupt_check): 1 when the caller asks
 * to stop (table.c). */
int			table_interrupted(void);

/* Default bound of a cuckoo eviction chain. */
#define CPHT_DEFAULT_MAX_EVICTIONS 256

#ifdef __cplusplus
}
#endif

#endif							/* CPHT_DEVICE_OPS_H */
