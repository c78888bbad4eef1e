/*
 * table_internal.h — what the table layer (table.c) and the two
 * implementations (cpu_*.c, gpu_*.cu) share behind cpht_table.h.
 *
 * table.c owns everything that is the same on both devices: parameter
 * checks and sizing, the key count, undoing a call that ran out of room and
 * the cuckoo stash.  A backend owns the slot memory and runs the algorithms.
 */
#ifndef CPHT_TABLE_INTERNAL_H
#define CPHT_TABLE_INTERNAL_H

#include "cpht_table.h"
#include "layout.h"

#include <pthread.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cpht_backend cpht_backend;

struct cpht_table
{
	cpht_params params;			/* slot_bits resolved, cpu_threads resolved */
	int			levels;			/* iceberg 2, cuckoo 1 */
	layout_level level[CPHT_MAX_LEVELS];
	uint64_t	count;			/* distinct keys stored, stash included */
	uint64_t   *stash;			/* cuckoo keys no bucket could take, sorted */
	size_t		nstash;
	/* undo log: keys in call order, and whether each was put or deleted */
	int			logging;
	uint64_t   *log_keys;
	uint8_t    *log_deleted;
	uint64_t	log_len;
	uint64_t	log_cap;
	uint64_t	log_deletes;	/* deletes among the entries */
	int			log_moved;		/* keys moved (rebuild, re-put by a rollback)
								 * since the log began: undo by tombstones */
	/* streams (cpht_stream_*): the batch running on a helper thread */
	int			running;
	pthread_t	runner;
	cpht_stream *streams;
	const cpht_backend *backend;
	void	   *backend_state;	/* the GPU's stream, buffers, device index */
	char		errmsg[512];
};

/*
 * A backend.  All arrays are host arrays; a GPU backend stages them.
 *
 * find_or_put: status[i] as in cpht_table.h.  When a key finds no slot the
 *   call still runs to the end and reports it:
 *   - iceberg: status[i] = CPHT_FULL for that key;
 *   - cuckoo: status[i] = CPHT_PUT for every key the call set out to insert
 *     and the keys left without a slot after a failed eviction chain (these
 *     may be keys that were stored before the call) are written to
 *     homeless[0..*nhomeless), which has room for n keys.
 *   The table layer then undoes the call.
 * erase: present[i] = 1 where the key was found and removed; to_empty = 1
 *   writes EMPTY instead of a tombstone, which is only correct when undoing
 *   the latest call on an iceberg table (its keys took slots that were
 *   empty before, and nothing was inserted after them).
 * scan: live and tombstone slots per level.
 * copy_slots: copy level l's slot array to host memory (rebuild reads the
 *   keys back out of it).
 * revive: put back distinct keys known to be absent whose deletion a
 *   rollback undoes, into the first free slot (EMPTY or TOMBSTONE) along
 *   their buckets in find's order; status[i] = CPHT_PUT or CPHT_FULL.
 */
struct cpht_backend
{
	const char *name;
	cpht_status (*create) (cpht_table *t);
	void		(*destroy) (cpht_table *t);
	cpht_status (*find_or_put) (cpht_table *t, const uint64_t *keys, size_t n,
								uint8_t *status, uint64_t *homeless,
								size_t *nhomeless);
	cpht_status (*find) (cpht_table *t, const uint64_t *keys, size_t n,
						 uint8_t *found);
	cpht_status (*erase) (cpht_table *t, const uint64_t *keys, size_t n,
						  uint8_t *present, int to_empty);
	cpht_status (*scan) (cpht_table *t, uint64_t *live, uint64_t *tombstones);
	void		(*device_name) (cpht_table *t, char *buf, size_t len);
	uint64_t	(*staging_bytes) (cpht_table *t);
	cpht_status (*copy_slots) (cpht_table *t, int level, void *host);
	cpht_status (*revive) (cpht_table *t, const uint64_t *keys, size_t n, uint8_t *status);
};

extern const cpht_backend cpht_cpu_backend;

#ifdef CPHT_WITH_GPU
extern const cpht_backend cpht_gpu_backend;
#endif

/* printf into t->errmsg; returns `code` so callers can `return table_fail(...)`. */
cpht_status table_fail(cpht_table *t, cpht_status code, const char *fmt,...)
#ifdef __GNUC__
			__attribute__((format(printf, 3, 4)))
#endif
			;

/* Default bound of a cuckoo eviction chain. */
#define CPHT_DEFAULT_MAX_EVICTIONS 256

#ifdef __cplusplus
}
#endif

#endif							/* CPHT_TABLE_INTERNAL_H */
