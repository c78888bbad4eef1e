/*
 * shards_internal.h — what the files of kernels/shards/ share: a sharded
 * table's own state, how a batch is split by shard, and the jobs that run
 * the shards.  Private to the folder; table/table_api.c meets the folder
 * through shards/shards.h.
 *
 * The files: shards.c (creation, destruction, sizing, stats, scans,
 * rebuild and growth), shards_route.c (the path a table's calls take, and
 * the device path: a call routed on the GPUs), shards_split.c (routing a batch's keys to their
 * shards and the answers back), shards_run.c (the shards' threads and the
 * pipeline of a call's pieces), shards_log.c (the combined undo log),
 * shards_ops.c (find-or-put, find, erase and undo, all or nothing).  A
 * shard is one table: the shards call it through table/table_layer.h's
 * table_single_* calls, never back through cpht_table.h.
 */
#ifndef CPHT_SHARDS_INTERNAL_H
#define CPHT_SHARDS_INTERNAL_H

#include <pthread.h>

#include "shards/shards.h"
#include "table/table_layer.h"
#include "util/threads.h"

/*
 * A sharded table's own state (cpht_table.sharded): nshards tables hold
 * the keys; log_segs says which shard holds each stretch of the combined
 * log.
 */
typedef struct shard_path shard_path;

struct cpht_sharded
{
	const shard_path *path;		/* how calls go, chosen at creation */
	void	   *router;			/* the device path's router */
	const cpht_route_ops *route;	/* its entries (the shards' device's) */
	int			nshards;
	cpht_table **shard;
	uint64_t	seed;			/* routing seed, apart from the shards' own */
	struct shard_log_seg *log_segs;
	size_t		log_nsegs;
	size_t		log_segs_cap;
	void	   *split_mem;		/* GPU shards: pinned buffers a call is split
								 * into, split_cap keys each */
	size_t		split_cap;
	int			split_threads;	/* threads splitting a call */
};

/* A stretch of the combined log: entries [start, next start or log_len)
 * are the shard's entries from shard_start on. */
typedef struct shard_log_seg
{
	uint64_t	start;
	int			shard;
	uint64_t	shard_start;
} shard_log_seg;

/*
 * Keys per piece of a call, at most.  The first piece's split and the last
 * piece's answers are not overlapped with the shards, so pieces are kept
 * small: 4M keys split in a millisecond or two on a host's cores, while a
 * piece's fixed costs (waking the splitting threads, starting the shards'
 * threads, a GPU shard's call) are tens of microseconds.  On 32 cores a
 * thread's share of a piece is 128K keys (1 MiB), which the place pass
 * reads again soon after the count pass read it, mostly from the core's
 * own cache.  A piece is one transfer chunk of the GPU backend
 * (GPU_CHUNK_KEYS), so a shard's part of it is one upload.
 */
#define SPLIT_PIECE_KEYS ((size_t) 1 << 22)

/* Non-temporal stores into the split memory (split_place) for up to this
 * many shards: each thread then writes that many streams at once, which
 * the cores' write-combining buffers keep whole. */
#define STREAM_MAX_SHARDS 4

/* Split buffers: the one the shards run from, and the one the calling
 * thread reads the previous piece's answers from and splits the next
 * piece into (in that order, so two suffice). */
#define SPLIT_BUFFERS 2

/* Split memory per key: the key and its answer. */
#define SPLIT_KEY_BYTES (sizeof(uint64_t) + 1)

/* Keys per block of the parallel split. */
#define SPLIT_BLOCK ((size_t) 1 << 16)

/* CPU shards run a call's parts on threads of their own from this many keys;
 * GPU shards always do (each waits on its device most of the time). */
#define CPU_PARALLEL_KEYS ((size_t) 1 << 16)

/* Threads splitting a call of GPU shards, at most: what
 * cpu_parallel_for_min runs at once. */
#define SPLIT_MAX_THREADS 64

/* The shard of a key (table/layout.h: the devices route by the same). */
static inline int
shard_route(uint64_t key, uint64_t seed, int nshards)
{
	return layout_shard_of(key, seed, nshards);
}


/* ---- splitting a batch (shards_split.c) ---------------------------------- */

/*
 * A call goes in pieces of at most shards_split_chunk(t) keys.  A piece is split
 * by shard: shard s's keys are keys[off[s] .. off[s + 1]) in input order,
 * out[] room for their answers, bytes[] the per-key bytes that came with
 * them (undo's places).  route[] (each key's shard) and at[] (per block of
 * SPLIT_BLOCK keys, each shard's first index) put the answers back.  On
 * GPU shards keys[] and out[] lie in one of the table's pinned split
 * buffers, from which the shards' transfers go by DMA without a staging
 * copy.
 */
typedef struct shard_split
{
	uint64_t   *keys;
	uint8_t    *out;
	uint8_t    *bytes;
	uint8_t    *route;
	size_t	   *at;
	int			owned;			/* keys and out were allocated for this call */
	size_t		off[CPHT_MAX_SHARDS + 1];
} shard_split;

size_t		shards_split_chunk(const cpht_table *t, size_t n);
cpht_status shards_split_alloc(cpht_table *t, size_t chunk, int with_bytes, int which, shard_split *sp);
cpht_status shards_splits_alloc(cpht_table *t, size_t chunk, size_t n, shard_split *bufs);
void		shards_split_free(shard_split *sp);
void		shards_splits_free(shard_split *bufs);
void		shards_split_piece(cpht_table *t, const uint64_t *keys, const uint8_t *bytes, size_t n, shard_split *sp);
void		shards_answers_back(cpht_table *t, shard_split *sp, size_t n, uint8_t *answer);

/* ---- running the shards (shards_run.c) ----------------------------------- */

typedef enum shard_op
{
	OP_FIND_OR_PUT,
	OP_FIND,
	OP_ERASE,
	OP_UNDO,
	OP_REBUILD,
	OP_GROW
} shard_op;

typedef struct shard_job
{
	cpht_table *t;
	int			s;
	shard_op	op;
	shard_split *sp;
	cpht_status rc;
	pthread_t	thread;
	int			started;
} shard_job;

/*
 * The pipeline of a find-or-put, find or erase: pieces of `chunk` keys,
 * piece i run by the shards from bufs[i % 2] while the calling thread puts
 * piece i-1's answers back from bufs[(i + 1) % 2] and then splits piece
 * i+1 into it.  Before each piece but the first it asks for an interrupt.
 * It returns CPHT_OK with every answer in answer[], or the call's error
 * (its message set) and where it stopped: keys [0, done) ran and have
 * their answers; on a shard's failure the piece at `done` (m keys, split in
 * sp, the shards' outcomes in jobs) ran in part, on an interrupt nothing
 * else did (m = 0).
 */
typedef struct pipe_stop
{
	size_t		done;
	size_t		m;
	shard_split *sp;
	double		ms[3];			/* split, wait, answers back */
	int			pieces;
} pipe_stop;

cpht_status shards_pipeline(cpht_table *t, shard_op op, const uint64_t *keys, size_t n, uint8_t *answer, shard_split *bufs, size_t chunk, shard_job *jobs, pipe_stop *stop);
void		shards_run(cpht_table *t, shard_job *jobs, shard_op op, shard_split *sp, size_t n);
int		shards_failed(const cpht_table *t, const shard_job *jobs);
cpht_status shards_fail(cpht_table *t, const shard_job *jobs, int s);
void		shards_settled(cpht_table *t, const pipe_stop *stop);

/* ---- the combined log (shards_log.c) -------------------------------------- */

cpht_status shards_segs_reserve(cpht_table *t);
void		shards_segs_append(cpht_table *t, const uint64_t *before);

/* ---- the paths of a call (shards_route.c, shards_ops.c) -------------------- */

/*
 * How a sharded table takes a find-or-put and a find: split on the host
 * (shards_ops.c), or routed on the shards' GPUs (shards_route.c), which
 * gives a call it cannot take as it is to the host path.  Chosen once, at
 * creation (shards_choose_path); shards_use_host_path sets the host path
 * on a table (tests and benchmarks compare the two).
 */
struct shard_path
{
	const char *name;
	cpht_status (*find_or_put) (cpht_table *t, const uint64_t *keys, size_t n, uint8_t *status);
	cpht_status (*find) (cpht_table *t, const uint64_t *keys, size_t n, uint8_t *found);
};

void		shards_choose_path(cpht_table *t);
void		shards_use_host_path(cpht_table *t);
void		shards_drop_path(cpht_table *t);

cpht_status shards_host_find_or_put(cpht_table *t, const uint64_t *keys, size_t n,
									uint8_t *status);
cpht_status shards_host_find(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *found);

/* The shards' logs before a call: their positions and their capacities,
 * so that undoing the call gives back what their logs grew too. */
typedef struct shard_log_marks
{
	uint64_t	len[CPHT_MAX_SHARDS];
	uint64_t	cap[CPHT_MAX_SHARDS];
} shard_log_marks;

void		shards_log_mark(const cpht_table *t, shard_log_marks *marks);

/* Undo a find-or-put that stopped (the pipeline's stop, the error rc with
 * its message set): the shards' logs before it are `before`. */
cpht_status shards_undo_find_or_put(cpht_table *t, const shard_job *jobs, const pipe_stop *stop,
									const uint64_t *keys, uint8_t *status,
									const shard_log_marks *before, cpht_status rc);

#endif							/* CPHT_SHARDS_INTERNAL_H */
