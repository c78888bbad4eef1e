/*
 * gpu_route_internal.h — the state of a batch routed over the GPUs of a
 * sharded table (gpu_route.cu), shared with its buffers
 * (gpu_route_buffers.cu).  Private to kernels/gpu/.
 *
 * A router belongs to one sharded table; the table layer calls it from one
 * thread at a time (the table's caller), so nothing here is locked.
 */
#ifndef CPHT_GPU_ROUTE_INTERNAL_H
#define CPHT_GPU_ROUTE_INTERNAL_H

#include "gpu/gpu_ops.h"

#define ROUTE_MAX CPHT_MAX_SHARDS

/* Slice capacities are rounded up to a multiple of this, so that calls of
 * slightly different sizes reuse the buffers. */
#define ROUTE_CAP_STEP ((size_t) 1 << 16)

/* Keys of a slice that one block of the routing kernels places (a tile),
 * and the tiles of a slice of n keys. */
#define ROUTE_ITEMS 16
#define ROUTE_TILE ((size_t) GPU_BLOCK * ROUTE_ITEMS)

static inline size_t
route_tiles(size_t n)
{
	return (n + ROUTE_TILE - 1) / ROUTE_TILE;
}

/* Keys per pinned staging buffer (pageable keys and answers). */
#define ROUTE_STAGE_KEYS ((size_t) 1 << 22)

typedef struct route_dev
{
	int			device;
	cudaStream_t work;			/* routing, sending, answers back */
	cudaStream_t up;			/* uploads of slices */
	cudaStream_t down;			/* answers to the host */
	cudaEvent_t uploaded[2];	/* the slice in in[b] arrived */
	cudaEvent_t routed[2];		/* in[b] was read (free for the next upload) */
	cudaEvent_t ordered[2];		/* out[b] holds the piece's answers */
	cudaEvent_t downloaded[2];	/* out[b] reached the host (free again) */
	cudaEvent_t staged_in[2];	/* pin_in[k] went up (free again) */
	cudaEvent_t staged_out[2];	/* pin_out[k] came down */
	unsigned	nstaged;		/* staging buffers used, to alternate them */
	uint64_t   *in[2];			/* a piece's slice, two pieces in flight */
	uint64_t   *pin_in[2];		/* staging of pageable keys, ROUTE_STAGE_KEYS */
	uint8_t    *pin_out[2];		/* staging of pageable answers */
	uint32_t   *idx_sorted[2];	/* each key's position in the slice, by
								 * shard: read again by the answers */
	uint32_t   *tile_count;		/* per shard and tile: keys, then where
								 * they start by shard */
	uint32_t   *dcount;			/* keys per shard */
	uint32_t   *hcount;			/* pinned copy */
	uint64_t   *recv[2];		/* as a shard: the keys it received */
	uint8_t    *recv_out[2];	/* and their answers */
	uint8_t    *out[2];			/* the slice's answers in slice order */
	void	   *block;			/* one device allocation holding the above */
	void	   *pin_block;		/* one pinned allocation holding pin_in, pin_out */
} route_dev;

typedef struct gpu_router
{
	int			n;
	cpht_table *tables[ROUTE_MAX];
	uint64_t	seed;
	size_t		cap;			/* keys per slice */
	uint64_t	held;			/* bytes held against the memory hook */
	int			pinned_staging; /* pin_in and pin_out are allocated */
	route_dev	d[ROUTE_MAX];
	/* per piece parity b: */
	size_t		cnt[2][ROUTE_MAX][ROUTE_MAX];	/* [b][g][s]: GPU g's keys for shard s */
	size_t		start[2][ROUTE_MAX][ROUTE_MAX];	/* where they start in g's slice sorted by shard */
	size_t		off[2][ROUTE_MAX][ROUTE_MAX];	/* and where in s's recv */
	size_t		stage;			/* keys per staging buffer */
	int			pending_out;	/* a piece's answers are on their way down */
	size_t		answered;		/* keys of the call whose answers are in
								 * answer[] for sure */
	size_t		pending_piece;
	/* the call */
	const uint64_t *keys;
	size_t		nkeys;
	uint8_t    *answer;
	size_t		chunk;
	int			threads;
	int			direct_in;
	int			direct_out;
	double		ms[4];			/* in, exchange, back, out */
} gpu_router;

/*
 * The buffers of every GPU for slices of at least `want` keys (and pinned
 * staging of pageable keys and answers when `staging`), kept between
 * calls and counted against the memory hook; free gives them back.
 */
cpht_status gpu_route_ensure_buffers(gpu_router *r, cpht_table *t, size_t want, int staging);
void		gpu_route_free_buffers(gpu_router *r);

#endif							/* CPHT_GPU_ROUTE_INTERNAL_H */
