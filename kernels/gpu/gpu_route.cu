/*
 * gpu_route.cu — a batch routed over the GPUs of a sharded table on the
 * devices themselves (cpht_route_ops, device_ops.h), so that the host
 * copies each key in once and each answer out once.
 *
 * A piece of the batch goes in N slices by position, slice g to GPU g over
 * its own PCIe link (straight from registered host memory, else through
 * pinned staging the router keeps).  On each GPU a kernel finds each key's
 * shard (layout_shard_of, as the host split does) and counts the keys per
 * shard and tile, and a prefix sum of the counts gives every tile's keys
 * of each shard their place in the slice ordered by shard (a stable
 * partition: input order within each shard).  The host reads the
 * N x N counts, and each GPU stores its keys, in that order, straight into
 * their shards' receive buffers on the other GPUs (peer access, NVLink
 * where the GPUs are joined by it): a shard receives its keys slice after
 * slice, so in input order, and runs its find-or-put or find on them where
 * they are (resident_ops).  Each GPU then reads its keys' answers from the
 * shards the same way into slice order, and copies them to the host.
 *
 * Pieces overlap (shards_route.c): while the shards work on piece i,
 * piece i+1 is routed and sent, then piece i+3 goes up (prefetch) into the
 * slices piece i+1 left, and the answers of piece i-1 go to the host.
 * The buffers of a piece are doubled (indexed by the piece's parity).
 * Keys and answers in pageable memory pass through pinned staging of
 * ROUTE_STAGE_KEYS keys per buffer, two per GPU, so that the host's copy
 * of one part runs while the previous part is on the bus, and the pinned
 * memory stays small (pinning is slow: a staging buffer of a whole slice
 * took longer to pin than the call).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cub/block/block_scan.cuh>

#include "gpu/gpu_route_internal.h"
#include "util/threads.h"

static double
route_clock_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Keys [*lo, *lo + *len) of the batch are piece `piece`'s slice g. */
static void
slice_of(const gpu_router *r, size_t piece, int g, size_t *lo, size_t *len)
{
	size_t		m;
	size_t		base = cpht_route_piece(r->chunk, r->nkeys, piece, &m);
	size_t		a = base + m * (size_t) g / (size_t) r->n;
	size_t		b = base + m * (size_t) (g + 1) / (size_t) r->n;

	*lo = a;
	*len = b - a;
}

/* ---- kernels ----------------------------------------------------------------- */

/*
 * A slice goes to its shards as a stable partition: tile k of the slice
 * (ROUTE_TILE keys from k * ROUTE_TILE) is block k of both kernels below.
 * route_count_kernel counts each tile's keys per shard, into
 * tile_count[s * tiles + k] (shard-major) and the slice's count per shard;
 * route_scan_kernel turns those counts, in place, into where each tile's
 * keys of each shard start in the slice ordered by shard (an exclusive
 * prefix sum: shard 0's keys tile after tile, then shard 1's, ...);
 * route_send_kernel (below) sends each key there.  One pass of counting
 * and one of placing replaced a radix sort of (shard, position) pairs and
 * a gather: on 4 H200s the sort took 0.8 ms of GPU time and its host-side
 * dispatch most of the 1.9 ms the host spent launching a 200M-key call's
 * routing.
 */
#define ROUTE_WARPS (GPU_BLOCK / 32)
#define ROUTE_SCAN_THREADS 1024

/* a block's threads clear and fill its per-shard and per-warp counts */
static_assert(ROUTE_MAX <= GPU_BLOCK, "a routing block has a thread per shard");
static_assert(ROUTE_WARPS * ROUTE_MAX <= GPU_BLOCK, "a routing block has a thread per warp and shard");

__global__ void
route_count_kernel(const uint64_t *keys, uint32_t n, uint64_t seed, int nshards, uint32_t *tile_count,
				   uint32_t *count)
{
	__shared__ uint32_t c[ROUTE_MAX];
	uint32_t	tiles = gridDim.x;
	uint32_t	base = blockIdx.x * ROUTE_TILE;

	if (threadIdx.x < ROUTE_MAX)
		c[threadIdx.x] = 0;
	__syncthreads();
	for (uint32_t r = 0; r < ROUTE_ITEMS; r++)
	{
		uint32_t	i = base + r * GPU_BLOCK + threadIdx.x;

		if (i < n)
			atomicAdd(&c[layout_shard_of(keys[i], seed, nshards)], 1u);
	}
	__syncthreads();
	if (threadIdx.x < (unsigned) nshards)
	{
		tile_count[threadIdx.x * tiles + blockIdx.x] = c[threadIdx.x];
		if (c[threadIdx.x] != 0)
			atomicAdd(&count[threadIdx.x], c[threadIdx.x]);
	}
}

/* One block: the exclusive prefix sum of v[0..m), in place. */
__global__ void
route_scan_kernel(uint32_t *v, uint32_t m)
{
	typedef cub::BlockScan<uint32_t, ROUTE_SCAN_THREADS> scan_t;
	__shared__ typename scan_t::TempStorage tmp;
	uint32_t	per = (m + ROUTE_SCAN_THREADS - 1) / ROUTE_SCAN_THREADS;
	uint32_t	lo = threadIdx.x * per,
				hi = lo + per < m ? lo + per : m;
	uint32_t	sum = 0,
				at;

	for (uint32_t i = lo; i < hi; i++)
		sum += v[i];
	scan_t(tmp).ExclusiveSum(sum, at);
	for (uint32_t i = lo; i < hi; i++)
	{
		uint32_t	x = v[i];

		v[i] = at;
		at += x;
	}
}

/*
 * A slice sorted by shard is n runs, shard s's at [start[s], start[s + 1]);
 * its keys go to, and its answers come from, remote[s] on shard s's GPU
 * (another GPU's memory, reached over NVLink by peer access).
 */
typedef struct route_runs
{
	int			n;
	uint32_t	start[ROUTE_MAX + 1];
	void	   *remote[ROUTE_MAX];
} route_runs;

/* The run that holds sorted position j (the last whose start is <= j:
 * empty runs start where the next one does). */
static __device__ __forceinline__ int
run_of(const route_runs &runs, uint32_t j)
{
	int			s = 0;

	while (s + 1 < runs.n && j >= runs.start[s + 1])
		s++;
	return s;
}

/*
 * Keys to their shards: block k places tile k's keys, in input order
 * within each shard, at sorted position tile_start[s * tiles + k] + their
 * rank among the tile's keys of shard s, and stores each straight into
 * its shard's receive buffer (the stores of a warp's keys of one shard are
 * contiguous, so they cross NVLink whole).  idx[position] records where
 * the key was in the slice, for the answers.  A tile goes in rounds of
 * GPU_BLOCK keys: a key's rank is the keys of its shard before it in its
 * warp (a match of the lanes), in the warps before it, and in the rounds
 * before.
 */
__global__ void
route_send_kernel(const uint64_t *keys, uint32_t n, uint64_t seed, const uint32_t *tile_start,
				  route_runs runs, uint32_t *idx)
{
	__shared__ uint32_t warp_count[ROUTE_WARPS][ROUTE_MAX];
	__shared__ uint32_t warp_base[ROUTE_WARPS][ROUTE_MAX];
	__shared__ uint32_t done[ROUTE_MAX];
	uint32_t	tiles = gridDim.x;
	uint32_t	base = blockIdx.x * ROUTE_TILE;
	int			warp = threadIdx.x / 32,
				lane = threadIdx.x % 32;

	if (threadIdx.x < ROUTE_MAX)
		done[threadIdx.x] = 0;
	for (uint32_t r = 0; r < ROUTE_ITEMS; r++)
	{
		uint32_t	i = base + r * GPU_BLOCK + threadIdx.x;
		uint64_t	key = i < n ? keys[i] : 0;
		int			s = i < n ? layout_shard_of(key, seed, runs.n) : ROUTE_MAX;
		unsigned	same = __match_any_sync(0xffffffffu, s);
		uint32_t	rank = __popc(same & ((1u << lane) - 1));

		if (threadIdx.x < ROUTE_WARPS * ROUTE_MAX)
			warp_count[threadIdx.x / ROUTE_MAX][threadIdx.x % ROUTE_MAX] = 0;
		__syncthreads();
		if (s < ROUTE_MAX && rank == 0)
			warp_count[warp][s] = __popc(same);
		__syncthreads();
		if (threadIdx.x < (unsigned) runs.n)
		{
			uint32_t	at = done[threadIdx.x];

			for (int w = 0; w < ROUTE_WARPS; w++)
			{
				warp_base[w][threadIdx.x] = at;
				at += warp_count[w][threadIdx.x];
			}
			done[threadIdx.x] = at;
		}
		__syncthreads();
		if (s < ROUTE_MAX)
		{
			uint32_t	pos = tile_start[s * tiles + blockIdx.x] + warp_base[warp][s] + rank;

			((uint64_t *) runs.remote[s])[pos - runs.start[s]] = key;
			idx[pos] = i;
		}
	}
}

/* Answers back: the GPU reads each answer from its shard's answers and
 * puts it at the key's position in the slice. */
__global__ void
route_back_kernel(const uint32_t *idx, route_runs runs, uint8_t *out)
{
	uint32_t	n = runs.start[runs.n];

	for (uint32_t j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += gridDim.x * blockDim.x)
	{
		int			s = run_of(runs, j);

		out[idx[j]] = ((const uint8_t *) runs.remote[s])[j - runs.start[s]];
	}
}

static unsigned
route_grid(const gpu_router *r, int g, size_t n)
{
	return gpu_grid(gpu_state_of(r->tables[g]), n, 8);
}

/* ---- the router ---------------------------------------------------------------- */

static void route_destroy(void *router);

static void *
route_create(cpht_table **tables, int n, uint64_t seed, char *why, size_t len)
{
	gpu_router *r;

	if (n < 2 || n > ROUTE_MAX)
	{
		snprintf(why, len, "%d shards", n);
		return NULL;
	}
	for (int a = 0; a < n; a++)
		for (int b = 0; b < a; b++)
			if (gpu_state_of(tables[a])->device == gpu_state_of(tables[b])->device)
			{
				snprintf(why, len, "shards %d and %d share GPU %d", b + 1, a + 1,
						 gpu_state_of(tables[a])->device);
				return NULL;
			}
	for (int a = 0; a < n; a++)
		for (int b = 0; b < n; b++)
		{
			int			can = 0;
			int			da = gpu_state_of(tables[a])->device,
						db = gpu_state_of(tables[b])->device;

			if (a == b)
				continue;
			if (cudaDeviceCanAccessPeer(&can, da, db) != cudaSuccess || !can)
			{
				(void) cudaGetLastError();
				snprintf(why, len, "GPU %d cannot reach the memory of GPU %d", da, db);
				return NULL;
			}
		}
	r = (gpu_router *) calloc(1, sizeof(gpu_router));
	if (r == NULL)
	{
		snprintf(why, len, "out of host memory");
		return NULL;
	}
	r->n = n;
	r->seed = seed;
	for (int g = 0; g < n; g++)
		r->d[g].device = gpu_state_of(tables[g])->device;
	for (int g = 0; g < n; g++)
	{
		route_dev  *d = &r->d[g];
		cudaError_t err;

		r->tables[g] = tables[g];
		err = cudaSetDevice(d->device);
		for (int b = 0; b < n && err == cudaSuccess; b++)
			if (b != g)
			{
				err = cudaDeviceEnablePeerAccess(r->d[b].device, 0);
				if (err == cudaErrorPeerAccessAlreadyEnabled)
				{
					(void) cudaGetLastError();
					err = cudaSuccess;
				}
			}
		if (err == cudaSuccess)
			err = cudaStreamCreateWithFlags(&d->work, cudaStreamNonBlocking);
		if (err == cudaSuccess)
			err = cudaStreamCreateWithFlags(&d->up, cudaStreamNonBlocking);
		if (err == cudaSuccess)
			err = cudaStreamCreateWithFlags(&d->down, cudaStreamNonBlocking);
		for (int b = 0; b < 2 && err == cudaSuccess; b++)
		{
			cudaEvent_t *ev[] = {&d->uploaded[b], &d->routed[b], &d->ordered[b], &d->downloaded[b],
			&d->staged_in[b], &d->staged_out[b]};

			for (size_t e = 0; e < sizeof(ev) / sizeof(ev[0]) && err == cudaSuccess; e++)
				err = cudaEventCreateWithFlags(ev[e], cudaEventDisableTiming);
		}
		if (err == cudaSuccess)
			err = cudaMallocHost((void **) &d->hcount, ROUTE_MAX * sizeof(uint32_t));
		if (err != cudaSuccess)
		{
			snprintf(why, len, "GPU %d: %s", d->device, cudaGetErrorString(err));
			(void) cudaGetLastError();
			route_destroy(r);
			return NULL;
		}
	}
	return r;
}

static void
route_destroy(void *router)
{
	gpu_router *r = (gpu_router *) router;

	if (r == NULL)
		return;
	gpu_route_free_buffers(r);
	for (int g = 0; g < r->n; g++)
	{
		route_dev  *d = &r->d[g];

		(void) cudaSetDevice(d->device);
		for (int b = 0; b < 2; b++)
		{
			cudaEvent_t ev[] = {d->uploaded[b], d->routed[b], d->ordered[b], d->downloaded[b],
			d->staged_in[b], d->staged_out[b]};

			for (size_t e = 0; e < sizeof(ev) / sizeof(ev[0]); e++)
				if (ev[e])
					(void) cudaEventDestroy(ev[e]);
		}
		if (d->work)
			(void) cudaStreamDestroy(d->work);
		if (d->up)
			(void) cudaStreamDestroy(d->up);
		if (d->down)
			(void) cudaStreamDestroy(d->down);
		if (d->hcount)
			(void) cudaFreeHost(d->hcount);
	}
	(void) cudaGetLastError();
	free(r);
}

/* Piece `piece`'s answers are in answer[]: every key before its end has
 * its answer (pieces come down in order). */
static void
answers_arrived(gpu_router *r, size_t piece)
{
	size_t		len;
	size_t		lo = cpht_route_piece(r->chunk, r->nkeys, piece, &len);

	r->answered = lo + len;
}

/* After a failure: let every queued copy and kernel finish, so that no
 * buffer is in use when the call returns. */
static void
drain_all(gpu_router *r)
{
	int			down_ok = 1;

	for (int g = 0; g < r->n; g++)
	{
		(void) cudaSetDevice(r->d[g].device);
		(void) cudaStreamSynchronize(r->d[g].up);
		(void) cudaStreamSynchronize(r->d[g].work);
		down_ok &= cudaStreamSynchronize(r->d[g].down) == cudaSuccess;
	}
	(void) cudaGetLastError();
	/* answers on their way down count only if they all arrived */
	if (r->pending_out && down_ok)
		answers_arrived(r, r->pending_piece);
	r->pending_out = 0;
}

#define ROUTE_TRY(call, what) \
	do { \
		cudaError_t route_err_ = (call); \
		if (route_err_ != cudaSuccess) \
		{ \
			cpht_status route_rc_ = gpu_fail(t, route_err_, (what)); \
			drain_all(r); \
			return route_rc_; \
		} \
	} while (0)

/* A parallel copy between pageable and pinned memory. */
typedef struct route_copy
{
	char	   *dst;
	const char *src;
} route_copy;

static void
route_copy_range(void *ctx, size_t begin, size_t end)
{
	route_copy *c = (route_copy *) ctx;

	memcpy(c->dst + begin, c->src + begin, end - begin);
}

static void
host_copy(const gpu_router *r, void *dst, const void *src, size_t bytes)
{
	route_copy	c = {(char *) dst, (const char *) src};

	cpu_parallel_for_min(r->threads, bytes, (size_t) 1 << 20, route_copy_range, &c);
}

/* Keys [*lo, *lo + *len) of piece `piece`'s slice g that staging part k
 * holds (len 0 past the slice's end). */
static void
stage_part(const gpu_router *r, size_t piece, int g, size_t k, size_t *lo, size_t *len)
{
	size_t		a,
				n;

	slice_of(r, piece, g, &a, &n);
	*lo = a + k * r->stage;
	*len = k * r->stage >= n ? 0 : n - k * r->stage < r->stage ? n - k * r->stage : r->stage;
}

/*
 * Start piece `piece`'s uploads into in[piece & 1].  Pageable keys go
 * through the staging buffers part by part, the GPUs in turn, so that the
 * host copies a part while the previous ones are on the bus.
 */
static cpht_status
route_prefetch(void *router, cpht_table *t, size_t piece)
{
	gpu_router *r = (gpu_router *) router;
	int			b = (int) (piece & 1);
	double		mark = route_clock_ms();
	size_t		most = 0;

	(void) cpht_route_piece(r->chunk, r->nkeys, piece, &most);
	if (most == 0)
		return CPHT_OK;
	most = 0;
	for (int g = 0; g < r->n; g++)
	{
		size_t		lo,
					len;

		slice_of(r, piece, g, &lo, &len);
		most = len > most ? len : most;
		ROUTE_TRY(cudaSetDevice(r->d[g].device), "selecting a device");
		/* in[b] is free once piece - 2 was routed */
		ROUTE_TRY(cudaStreamWaitEvent(r->d[g].up, r->d[g].routed[b], 0), "ordering an upload");
		if (r->direct_in && len > 0)
			ROUTE_TRY(cudaMemcpyAsync(r->d[g].in[b], r->keys + lo, len * sizeof(uint64_t),
									  cudaMemcpyHostToDevice, r->d[g].up), "uploading keys");
	}
	for (size_t k = 0; !r->direct_in && k * r->stage < most; k++)
		for (int g = 0; g < r->n; g++)
		{
			route_dev  *d = &r->d[g];
			size_t		lo,
						len,
						first,
						whole;
			int			sb = (int) (d->nstaged & 1);

			stage_part(r, piece, g, k, &lo, &len);
			if (len == 0)
				continue;
			slice_of(r, piece, g, &first, &whole);
			ROUTE_TRY(cudaSetDevice(d->device), "selecting a device");
			/* pin_in[sb] is free once its last upload is done */
			ROUTE_TRY(cudaEventSynchronize(d->staged_in[sb]), "waiting for an upload");
			host_copy(r, d->pin_in[sb], r->keys + lo, len * sizeof(uint64_t));
			ROUTE_TRY(cudaMemcpyAsync(d->in[b] + (lo - first), d->pin_in[sb], len * sizeof(uint64_t),
									  cudaMemcpyHostToDevice, d->up), "uploading keys");
			ROUTE_TRY(cudaEventRecord(d->staged_in[sb], d->up), "recording an event");
			d->nstaged++;
		}
	for (int g = 0; g < r->n; g++)
	{
		ROUTE_TRY(cudaSetDevice(r->d[g].device), "selecting a device");
		ROUTE_TRY(cudaEventRecord(r->d[g].uploaded[b], r->d[g].up), "recording an event");
	}
	r->ms[0] += route_clock_ms() - mark;
	return CPHT_OK;
}

static cpht_status
route_begin(void *router, cpht_table *t, const uint64_t *keys, size_t n, uint8_t *answer,
			size_t chunk, int threads)
{
	gpu_router *r = (gpu_router *) router;
	cpht_status rc;
	size_t		most = (chunk + (size_t) r->n - 1) / (size_t) r->n;

	r->keys = keys;
	r->nkeys = n;
	r->answer = answer;
	r->chunk = chunk;
	r->threads = threads > 0 ? threads : 1;
	r->pending_out = 0;
	r->answered = 0;
	memset(r->ms, 0, sizeof(r->ms));
	r->direct_in = gpu_host_registered(keys, n * sizeof(uint64_t));
	r->direct_out = gpu_host_registered(answer, n);
	rc = gpu_route_ensure_buffers(r, t, most, !r->direct_in || !r->direct_out);
	if (rc == CPHT_OK)
		rc = route_prefetch(r, t, 0);
	if (rc == CPHT_OK)
		rc = route_prefetch(r, t, 1);
	return rc;
}

static cpht_status
route_prepare(void *router, cpht_table *t, size_t chunk)
{
	gpu_router *r = (gpu_router *) router;

	return gpu_route_ensure_buffers(r, t, (chunk + (size_t) r->n - 1) / (size_t) r->n, 0);
}

/* GPU g's runs of piece parity b: where its keys go in each shard's
 * receive buffer (keys), or where their answers are (answers). */
static route_runs
runs_of(const gpu_router *r, int b, int g, int keys)
{
	route_runs	runs;

	memset(&runs, 0, sizeof(runs));
	runs.n = r->n;
	for (int s = 0; s < r->n; s++)
	{
		runs.start[s] = (uint32_t) r->start[b][g][s];
		runs.remote[s] = keys ? (void *) (r->d[s].recv[b] + r->off[b][g][s]) :
			(void *) (r->d[s].recv_out[b] + r->off[b][g][s]);
	}
	runs.start[r->n] = (uint32_t) (r->start[b][g][r->n - 1] + r->cnt[b][g][r->n - 1]);
	return runs;
}

/*
 * Route piece `piece` and send every shard its keys.  The shards may be
 * working on the piece before meanwhile: everything written here is the
 * piece's parity's own (idx_sorted, recv, cnt, start, off), or used by
 * this call alone (tile_count, dcount, hcount).
 */
static cpht_status
route_scatter(void *router, cpht_table *t, size_t piece, size_t *got, uint64_t **dkeys,
			  uint8_t **dout)
{
	gpu_router *r = (gpu_router *) router;
	int			b = (int) (piece & 1);
	double		mark = route_clock_ms();

	/* the slices on the devices: the time of the uploads not hidden */
	for (int g = 0; g < r->n; g++)
	{
		ROUTE_TRY(cudaSetDevice(r->d[g].device), "selecting a device");
		ROUTE_TRY(cudaEventSynchronize(r->d[g].uploaded[b]), "uploading keys");
	}
	r->ms[0] += route_clock_ms() - mark;
	mark = route_clock_ms();
	for (int g = 0; g < r->n; g++)
	{
		route_dev  *d = &r->d[g];
		size_t		lo,
					len;

		slice_of(r, piece, g, &lo, &len);
		ROUTE_TRY(cudaSetDevice(d->device), "selecting a device");
		ROUTE_TRY(cudaMemsetAsync(d->dcount, 0, ROUTE_MAX * sizeof(uint32_t), d->work), "clearing counts");
		if (len > 0)
		{
			unsigned	tiles = (unsigned) route_tiles(len);

			route_count_kernel<<<tiles, GPU_BLOCK, 0, d->work>>>
				(d->in[b], (uint32_t) len, r->seed, r->n, d->tile_count, d->dcount);
			ROUTE_TRY(cudaGetLastError(), "counting keys by shard");
			route_scan_kernel<<<1, ROUTE_SCAN_THREADS, 0, d->work>>>(d->tile_count, tiles * (uint32_t) r->n);
			ROUTE_TRY(cudaGetLastError(), "placing keys by shard");
		}
		ROUTE_TRY(cudaMemcpyAsync(d->hcount, d->dcount, (size_t) r->n * sizeof(uint32_t),
								  cudaMemcpyDeviceToHost, d->work), "reading counts");
	}
	for (int g = 0; g < r->n; g++)
	{
		size_t		at = 0;

		ROUTE_TRY(cudaSetDevice(r->d[g].device), "selecting a device");
		ROUTE_TRY(cudaStreamSynchronize(r->d[g].work), "routing keys");
		for (int s = 0; s < r->n; s++)
		{
			r->cnt[b][g][s] = r->d[g].hcount[s];
			r->start[b][g][s] = at;
			at += r->cnt[b][g][s];
		}
	}
	/* shard s receives the slices' keys in slice order: input order */
	for (int s = 0; s < r->n; s++)
	{
		size_t		at = 0;

		for (int g = 0; g < r->n; g++)
		{
			r->off[b][g][s] = at;
			at += r->cnt[b][g][s];
		}
		got[s] = at;
		dkeys[s] = r->d[s].recv[b];
		dout[s] = r->d[s].recv_out[b];
	}
	for (int g = 0; g < r->n; g++)
	{
		route_dev  *d = &r->d[g];
		route_runs	runs = runs_of(r, b, g, 1);

		ROUTE_TRY(cudaSetDevice(d->device), "selecting a device");
		if (runs.start[r->n] > 0)
		{
			route_send_kernel<<<(unsigned) route_tiles(runs.start[r->n]), GPU_BLOCK, 0, d->work>>>
				(d->in[b], runs.start[r->n], r->seed, d->tile_count, runs, d->idx_sorted[b]);
			ROUTE_TRY(cudaGetLastError(), "sending keys to their shard's GPU");
		}
		/* in[b] was read: free for the upload of piece + 2 (prefetch) */
		ROUTE_TRY(cudaEventRecord(d->routed[b], d->work), "recording an event");
	}
	for (int g = 0; g < r->n; g++)
	{
		ROUTE_TRY(cudaSetDevice(r->d[g].device), "selecting a device");
		ROUTE_TRY(cudaStreamSynchronize(r->d[g].work), "sending keys to their shard's GPU");
	}
	r->ms[1] += route_clock_ms() - mark;
	return CPHT_OK;
}

/* Wait for the answers of the piece on their way down (registered
 * memory), if any. */
static cpht_status
wait_out(gpu_router *r, cpht_table *t)
{
	if (!r->pending_out)
		return CPHT_OK;
	for (int g = 0; g < r->n; g++)
	{
		ROUTE_TRY(cudaSetDevice(r->d[g].device), "selecting a device");
		ROUTE_TRY(cudaEventSynchronize(r->d[g].downloaded[r->pending_piece & 1]), "downloading answers");
	}
	r->pending_out = 0;
	answers_arrived(r, r->pending_piece);
	return CPHT_OK;
}

/* Pageable answers: part k of piece `piece`'s slices down into the
 * staging buffers (start), then into answer[] (end). */
static cpht_status
out_part(gpu_router *r, cpht_table *t, size_t piece, size_t k, int end)
{
	int			b = (int) (piece & 1);

	for (int g = 0; g < r->n; g++)
	{
		route_dev  *d = &r->d[g];
		size_t		lo,
					len,
					first,
					whole;
		int			sb = (int) (k & 1);

		stage_part(r, piece, g, k, &lo, &len);
		if (len == 0)
			continue;
		slice_of(r, piece, g, &first, &whole);
		ROUTE_TRY(cudaSetDevice(d->device), "selecting a device");
		if (!end)
		{
			ROUTE_TRY(cudaMemcpyAsync(d->pin_out[sb], d->out[b] + (lo - first), len, cudaMemcpyDeviceToHost,
									  d->down), "downloading answers");
			ROUTE_TRY(cudaEventRecord(d->staged_out[sb], d->down), "recording an event");
		}
		else
		{
			ROUTE_TRY(cudaEventSynchronize(d->staged_out[sb]), "downloading answers");
			host_copy(r, r->answer + lo, d->pin_out[sb], len);
		}
	}
	return CPHT_OK;
}

/*
 * The answers of piece `piece` back to the GPUs its keys came from, in
 * slice order, and to the host.  Into registered memory the copy down is
 * left running (the next gather or route_finish waits for it); pageable
 * answers are in answer[] on return.
 */
static cpht_status
route_gather(void *router, cpht_table *t, size_t piece)
{
	gpu_router *r = (gpu_router *) router;
	int			b = (int) (piece & 1);
	double		mark = route_clock_ms();
	size_t		most = 0;
	cpht_status rc;

	/*
	 * Each GPU reads its slice's answers from the shards (whose calls have
	 * returned, so their answers are written) into slice order.
	 */
	for (int g = 0; g < r->n; g++)
	{
		route_dev  *d = &r->d[g];
		route_runs	runs = runs_of(r, b, g, 0);
		size_t		lo,
					len;

		slice_of(r, piece, g, &lo, &len);
		most = len > most ? len : most;
		ROUTE_TRY(cudaSetDevice(d->device), "selecting a device");
		/* out[b] is free once piece - 2's answers are down */
		ROUTE_TRY(cudaStreamWaitEvent(d->work, d->downloaded[b], 0), "ordering answers");
		if (len > 0)
		{
			route_back_kernel<<<route_grid(r, g, len), GPU_BLOCK, 0, d->work>>>
				(d->idx_sorted[b], runs, d->out[b]);
			ROUTE_TRY(cudaGetLastError(), "reading answers back");
		}
		ROUTE_TRY(cudaEventRecord(d->ordered[b], d->work), "recording an event");
	}
	/* the shards' answers are free for the piece after next once read */
	for (int g = 0; g < r->n; g++)
	{
		ROUTE_TRY(cudaSetDevice(r->d[g].device), "selecting a device");
		ROUTE_TRY(cudaStreamSynchronize(r->d[g].work), "reading answers back");
	}
	r->ms[2] += route_clock_ms() - mark;
	mark = route_clock_ms();
	/* one piece's answers on their way down at a time */
	rc = wait_out(r, t);
	if (rc != CPHT_OK)
		return rc;
	if (r->direct_out)
	{
		for (int g = 0; g < r->n; g++)
		{
			route_dev  *d = &r->d[g];
			size_t		lo,
						len;

			slice_of(r, piece, g, &lo, &len);
			ROUTE_TRY(cudaSetDevice(d->device), "selecting a device");
			ROUTE_TRY(cudaStreamWaitEvent(d->down, d->ordered[b], 0), "ordering answers");
			if (len > 0)
				ROUTE_TRY(cudaMemcpyAsync(r->answer + lo, d->out[b], len, cudaMemcpyDeviceToHost, d->down),
						  "downloading answers");
			ROUTE_TRY(cudaEventRecord(d->downloaded[b], d->down), "recording an event");
		}
		r->pending_out = 1;
		r->pending_piece = piece;
	}
	else
	{
		for (int g = 0; g < r->n; g++)
		{
			ROUTE_TRY(cudaSetDevice(r->d[g].device), "selecting a device");
			ROUTE_TRY(cudaStreamWaitEvent(r->d[g].down, r->d[g].ordered[b], 0), "ordering answers");
		}
		/* part k + 1 comes down while part k is copied out */
		rc = out_part(r, t, piece, 0, 0);
		for (size_t k = 0; rc == CPHT_OK && k * r->stage < most; k++)
		{
			if ((k + 1) * r->stage < most)
				rc = out_part(r, t, piece, k + 1, 0);
			if (rc == CPHT_OK)
				rc = out_part(r, t, piece, k, 1);
		}
		if (rc != CPHT_OK)
			return rc;
		for (int g = 0; g < r->n; g++)
		{
			ROUTE_TRY(cudaSetDevice(r->d[g].device), "selecting a device");
			ROUTE_TRY(cudaEventRecord(r->d[g].downloaded[b], r->d[g].down), "recording an event");
		}
		answers_arrived(r, piece);
	}
	r->ms[3] += route_clock_ms() - mark;
	return CPHT_OK;
}

/* The end of a call, done or failed: every copy and kernel of the router
 * finished; an error of the last answers' copy down is the call's. */
static cpht_status
route_finish(void *router, cpht_table *t)
{
	gpu_router *r = (gpu_router *) router;
	double		mark = route_clock_ms();
	cpht_status rc = wait_out(r, t);

	drain_all(r);
	r->ms[3] += route_clock_ms() - mark;
	return rc;
}

#undef ROUTE_TRY

static size_t
route_answered(void *router)
{
	return ((gpu_router *) router)->answered;
}

static void
route_times(void *router, double *in, double *exchange, double *back, double *out)
{
	gpu_router *r = (gpu_router *) router;

	*in = r->ms[0];
	*exchange = r->ms[1];
	*back = r->ms[2];
	*out = r->ms[3];
}

static cpht_route_ops
gpu_make_route_ops(void)
{
	cpht_route_ops o = {};

	o.create = route_create;
	o.destroy = route_destroy;
	o.prepare = route_prepare;
	o.begin = route_begin;
	o.scatter = route_scatter;
	o.prefetch = route_prefetch;
	o.gather = route_gather;
	o.finish = route_finish;
	o.answered = route_answered;
	o.times = route_times;
	return o;
}

const cpht_route_ops gpu_route_ops = gpu_make_route_ops();
