/*
 * gpu_route_buffers.cu — the buffers of a batch routed over the GPUs of a
 * sharded table (gpu_route.cu): per GPU a slice's keys, their positions
 * by shard and the tiles' counts, the receive buffers of the exchange and
 * the answers, and pinned staging for pageable keys and
 * answers.  Made when the routed table is made (route_prepare), larger
 * when a call needs it, freed with the router.
 */
#include <pthread.h>
#include <string.h>

#include "gpu/gpu_route_internal.h"

/*
 * A GPU's routing buffers are carved from one device allocation (and its
 * pinned staging from one pinned allocation), made on a thread per GPU
 * (gpu_route_ensure_buffers).  Made at a routed table's first call, with a
 * cudaMalloc each on one thread, they took about 3 ms of that call on 2
 * H100s and 14 ms on 4 (2026-11-28); now the table's creation makes them
 * (route_prepare), and its first call on 2 H200s had no time left outside
 * its parts.  With base NULL these only size the block.  Every buffer
 * starts on a 256-byte boundary.
 */
template <typename T>
static void
carve_at(T **ptr, char *base, size_t at)
{
	*ptr = (T *) (base + at);
}

#define CARVE(ptr, bytes) \
	do { \
		if (base) \
			carve_at(&(ptr), base, at); \
		at += ((size_t) (bytes) + 255) / 256 * 256; \
	} while (0)

static size_t
carve_device(route_dev *d, char *base, size_t cap, int n)
{
	size_t		at = 0;

	for (int b = 0; b < 2; b++)
		CARVE(d->in[b], cap * sizeof(uint64_t));
	for (int b = 0; b < 2; b++)
		CARVE(d->idx_sorted[b], cap * sizeof(uint32_t));
	CARVE(d->dcount, ROUTE_MAX * sizeof(uint32_t));
	CARVE(d->tile_count, route_tiles(cap) * (size_t) n * sizeof(uint32_t));
	/* a shard may receive every key of a piece */
	for (int b = 0; b < 2; b++)
	{
		CARVE(d->recv[b], cap * (size_t) n * sizeof(uint64_t));
		CARVE(d->recv_out[b], cap * (size_t) n);
		CARVE(d->out[b], cap);
	}
	return at;
}

static size_t
carve_pinned(route_dev *d, char *base, size_t stage)
{
	size_t		at = 0;

	for (int b = 0; b < 2; b++)
	{
		CARVE(d->pin_in[b], stage * sizeof(uint64_t));
		CARVE(d->pin_out[b], stage);
	}
	return at;
}

#undef CARVE

/* Bytes a GPU's buffers take against the memory hook, alignment included. */
static uint64_t
dev_bytes(const gpu_router *r, size_t cap)
{
	route_dev	scratch;

	return carve_device(&scratch, NULL, cap, r->n);
}

static uint64_t
pinned_bytes(size_t stage)
{
	route_dev	scratch;

	return carve_pinned(&scratch, NULL, stage);
}

void
gpu_route_free_buffers(gpu_router *r)
{
	for (int g = 0; g < r->n; g++)
	{
		route_dev  *d = &r->d[g];

		(void) cudaSetDevice(d->device);
		(void) cudaDeviceSynchronize();
		if (d->block)
			(void) cudaFree(d->block);
		if (d->pin_block)
			(void) cudaFreeHost(d->pin_block);
		d->block = d->pin_block = NULL;
		for (int b = 0; b < 2; b++)
		{
			d->in[b] = d->pin_in[b] = d->recv[b] = NULL;
			d->pin_out[b] = d->recv_out[b] = d->out[b] = NULL;
			d->idx_sorted[b] = NULL;
		}
		d->tile_count = d->dcount = NULL;
	}
	(void) cudaGetLastError();
	table_memory_give(r->held);
	r->held = 0;
	r->cap = 0;
	r->stage = 0;
	r->pinned_staging = 0;
	r->pending_out = 0;
}

/* One GPU's allocations, on a thread of their own: the GPUs' allocations
 * (page mapping in the driver) then overlap. */
typedef struct alloc_job
{
	gpu_router *r;
	int			g;
	size_t		cap;
	size_t		stage;			/* 0: no pinned staging */
	cudaError_t err;
	const char *what;
	pthread_t	thread;
	int			started;
} alloc_job;

static void *
alloc_one(void *arg)
{
	alloc_job  *j = (alloc_job *) arg;
	route_dev  *d = &j->r->d[j->g];
	cudaError_t err;

	j->what = "selecting a device";
	err = cudaSetDevice(d->device);
	if (err == cudaSuccess)
	{
		j->what = "allocating routing buffers";
		err = cudaMalloc(&d->block, carve_device(d, NULL, j->cap, j->r->n));
	}
	if (err == cudaSuccess)
		carve_device(d, (char *) d->block, j->cap, j->r->n);
	if (err == cudaSuccess && j->stage > 0)
	{
		err = cudaMallocHost(&d->pin_block, carve_pinned(d, NULL, j->stage));
		if (err == cudaSuccess)
			carve_pinned(d, (char *) d->pin_block, j->stage);
	}
	j->err = err;
	return NULL;
}

/* Buffers for slices of at least `want` keys (and pinned staging when
 * `staging`), kept between calls. */
cpht_status
gpu_route_ensure_buffers(gpu_router *r, cpht_table *t, size_t want, int staging)
{
	size_t		cap = (want + ROUTE_CAP_STEP - 1) / ROUTE_CAP_STEP * ROUTE_CAP_STEP;
	size_t		stage;
	uint64_t	bytes;
	alloc_job	jobs[ROUTE_MAX];
	int			failed = -1;

	if (cap <= r->cap && (!staging || r->pinned_staging))
		return CPHT_OK;
	if (cap < r->cap)
		cap = r->cap;
	gpu_route_free_buffers(r);
	stage = cap < ROUTE_STAGE_KEYS ? cap : ROUTE_STAGE_KEYS;
	bytes = (dev_bytes(r, cap) + (staging ? pinned_bytes(stage) : 0)) * (uint64_t) r->n;
	if (!table_memory_take(bytes))
		return table_fail(t, CPHT_ERR_LIMIT,
						  "the buffers routing a call over %d GPUs (%llu bytes) would pass the memory limit",
						  r->n, (unsigned long long) bytes);
	r->held = bytes;
	r->cap = cap;
	r->stage = stage;
	r->pinned_staging = staging;
	for (int g = 0; g < r->n; g++)
	{
		alloc_job  *j = &jobs[g];

		memset(j, 0, sizeof(*j));
		j->r = r;
		j->g = g;
		j->cap = cap;
		j->stage = staging ? stage : 0;
		/* GPU 0 on this thread; a thread that cannot start runs here too */
		j->started = g > 0 && pthread_create(&j->thread, NULL, alloc_one, j) == 0;
		if (!j->started)
			alloc_one(j);
	}
	for (int g = 0; g < r->n; g++)
	{
		if (jobs[g].started)
			pthread_join(jobs[g].thread, NULL);
		if (jobs[g].err != cudaSuccess && failed < 0)
			failed = g;
	}
	if (failed >= 0)
	{
		gpu_route_free_buffers(r);
		return gpu_fail(t, jobs[failed].err, jobs[failed].what);
	}
	return CPHT_OK;
}
