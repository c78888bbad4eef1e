/*
 * gpu_device.cu — the GPU implementation of the table interface
 * (cpht_gpu_ops): device memory, streams, the host pipeline, and the
 * check for a usable GPU.
 *
 * Memory.  Each level's slots are one cudaMalloc of exactly slots *
 * slot_bits / 8 bytes, zeroed (EMPTY) at creation.  Per table there are
 * also two pinned host buffers and two device buffers of one chunk each,
 * and a scratch area for the temporaries of one device call (overflow
 * lists, grouping, the cuckoo sort); all grow on first use and are
 * reported by staging_bytes.  The transfer buffers for batches as large as
 * the table, and with them an iceberg table's scratch for a find of one
 * chunk, are made when the table is.
 *
 * Pipeline.  The caller's arrays are pageable host memory.  A batch goes
 * in chunks: the host copies chunk i+1 into pinned memory and uploads it
 * (stream h2d) while the kernels of chunk i run (stream comp), and results
 * come back one byte per key (stream d2h).  Kernels of all chunks run in
 * order on one stream, so chunk i+1 sees every write of chunk i: the
 * chunks of one batch behave as one batch.
 *
 * Errors.  Every CUDA call is checked; a failure becomes CPHT_ERR_NOMEM
 * (allocation) or CPHT_ERR_DEVICE with CUDA's message in the table, never
 * an abort.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu/gpu_ops.h"
#include "util/threads.h"

cpht_status
gpu_status_of(cudaError_t err)
{
	switch (err)
	{
		case cudaErrorMemoryAllocation:
			return CPHT_ERR_NOMEM;
			/* The context is corrupt: every later call of the process fails. */
		case cudaErrorIllegalAddress:
		case cudaErrorLaunchFailure:
		case cudaErrorECCUncorrectable:
		case cudaErrorHardwareStackError:
		case cudaErrorIllegalInstruction:
		case cudaErrorMisalignedAddress:
		case cudaErrorInvalidAddressSpace:
		case cudaErrorInvalidPc:
		case cudaErrorAssert:
		case cudaErrorLaunchTimeout:
		case cudaErrorContextIsDestroyed:
		case cudaErrorDevicesUnavailable:
		case cudaErrorUnknown:
			return CPHT_ERR_DEVICE_LOST;
		default:
			return CPHT_ERR_DEVICE;
	}
}

cpht_status
gpu_fail(cpht_table *t, cudaError_t err, const char *what)
{
	/* Clear the error so later calls can work (sticky errors stay). */
	(void) cudaGetLastError();
	return table_fail(t, gpu_status_of(err), "GPU: %s failed: %s", what, cudaGetErrorString(err));
}

/* ---- is there a GPU? ------------------------------------------------------ */

/*
 * The GPUs cpht uses: the ordinals cpht_gpu_set_devices named (all devices
 * without a list) that exist and have compute capability 9.0 or newer,
 * found once, on the first cpht_gpu_usable.  A table's params.gpu picks
 * one of them; every operation makes the table's device current first
 * (cudaSetDevice is per host thread, and a sharded table runs its shards on
 * threads of their own), so each GPU has its one context, the primary one.
 */
#define GPU_MAX_DEVICES 64

typedef struct gpu_probe
{
	int			ok;
	char		msg[256];
} gpu_probe;

static int	wanted[GPU_MAX_DEVICES];
static int	nwanted;
static int	usable[GPU_MAX_DEVICES];
static int	nusable;
static volatile int probed;

static gpu_probe
probe_device(void)
{
	gpu_probe	p;
	int			count = 0;
	cudaError_t err;
	char		why[200] = "no CUDA device found";

	memset(&p, 0, sizeof(p));
	probed = 1;
	/* With no driver this fails cleanly (the runtime is linked statically
	 * and loads the driver library at run time). */
	err = cudaGetDeviceCount(&count);
	if (err != cudaSuccess)
	{
		(void) cudaGetLastError();
		snprintf(p.msg, sizeof(p.msg), "no usable GPU: %s", cudaGetErrorString(err));
		return p;
	}
	for (int i = 0; i < (nwanted ? nwanted : count) && nusable < GPU_MAX_DEVICES; i++)
	{
		int			d = nwanted ? wanted[i] : i,
					major = 0,
					minor = 0;

		if (d < 0 || d >= count)
		{
			snprintf(why, sizeof(why), "cpht.devices names device %d, but CUDA shows %d device%s",
					 d, count, count == 1 ? "" : "s");
			continue;
		}
		if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d) != cudaSuccess ||
			cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, d) != cudaSuccess)
		{
			err = cudaGetLastError();
			snprintf(why, sizeof(why), "device %d: %s", d, cudaGetErrorString(err));
			continue;
		}
		if (major < 9)
		{
			snprintf(why, sizeof(why),
					 "device %d has compute capability %d.%d, cpht's kernels need 9.0 or newer",
					 d, major, minor);
			continue;
		}
		usable[nusable++] = d;
	}
	if (nusable == 0)
	{
		snprintf(p.msg, sizeof(p.msg), "no usable GPU: %s", why);
		return p;
	}
	p.ok = 1;
	return p;
}

extern "C" int
cpht_gpu_built(void)
{
	return 1;
}

extern "C" int
cpht_gpu_set_devices(const int *ordinals, int n)
{
	if (probed || n < 0 || n > GPU_MAX_DEVICES)
		return 0;
	for (int i = 0; i < n; i++)
		wanted[i] = ordinals[i];
	nwanted = n;
	return 1;
}

extern "C" int
cpht_gpu_usable(char *errbuf, size_t errlen)
{
	/* Probed once, on the first call (thread-safe static initialisation). */
	static const gpu_probe probe = probe_device();

	if (!probe.ok && errbuf && errlen)
		snprintf(errbuf, errlen, "%s", probe.msg);
	return probe.ok;
}

extern "C" int
cpht_gpu_count(void)
{
	return cpht_gpu_usable(NULL, 0) ? nusable : 0;
}

/* The CUDA ordinal of the GPU a table's params.gpu picks (after a probe
 * that found one). */
int
gpu_ordinal(int gpu)
{
	int			i = nusable > 0 ? gpu % nusable : 0;

	return usable[i < 0 ? i + nusable : i];
}

/* Whether [p, p + len) lies in the pinned memory the table's owner keeps. */
static int
in_direct_range(const gpu_state *st, const void *p, size_t len)
{
	const char *b = (const char *) p;

	return st->direct_begin && b >= st->direct_begin && len <= (size_t) (st->direct_end - b);
}

/* ---- memory ---------------------------------------------------------------- */

cpht_status
gpu_scratch_reserve(cpht_table *t, size_t bytes)
{
	gpu_state  *st = gpu_state_of(t);
	size_t		grown;

	if (bytes <= st->scratch_cap)
		return CPHT_OK;
	/* Kernels already queued may still use the old area. */
	GPU_TRY(t, cudaStreamSynchronize(st->comp), "waiting for the table's kernels");
	grown = bytes + bytes / 8;
	/*
	 * cpht.max_memory counts it (the memory hook): the hook is asked for
	 * the difference only, so from here on it holds `grown` bytes for the
	 * area, whether the new allocation succeeds (then all of it is in use)
	 * or fails (then all of it is given back, the old area being freed).
	 */
	if (!table_memory_take(grown - st->scratch_cap))
		return table_fail(t, CPHT_ERR_LIMIT,
						  "growing the GPU scratch area to %zu bytes would pass the memory limit", grown);
	if (st->scratch)
		(void) cudaFree(st->scratch);
	st->scratch = NULL;
	st->scratch_cap = 0;
	{
		cudaError_t err = cudaMalloc((void **) &st->scratch, grown);

		if (err != cudaSuccess)
		{
			table_memory_give(grown);
			return gpu_fail(t, err, "allocating scratch memory");
		}
	}
	st->scratch_cap = grown;
	return CPHT_OK;
}

/* Bytes of the transfer buffers for chunks of `chunk` keys: pinned host
 * keys and results, device keys and results, two of each. */
static uint64_t
staging_bytes_for(size_t chunk)
{
	return (uint64_t) chunk * (sizeof(uint64_t) + 1) * 4;
}

static void
free_staging(gpu_state *st)
{
	table_memory_give(staging_bytes_for(st->chunk_cap));
	for (int b = 0; b < 2; b++)
	{
		if (st->pin_keys[b])
			(void) cudaFreeHost(st->pin_keys[b]);
		if (st->pin_out[b])
			(void) cudaFreeHost(st->pin_out[b]);
		if (st->dkeys[b])
			(void) cudaFree(st->dkeys[b]);
		if (st->dout[b])
			(void) cudaFree(st->dout[b]);
		st->pin_keys[b] = NULL;
		st->pin_out[b] = NULL;
		st->dkeys[b] = NULL;
		st->dout[b] = NULL;
	}
	st->chunk_cap = 0;
}

/* Chunk buffers for batches of n keys (capped at GPU_CHUNK_KEYS). */
static cpht_status
ensure_staging(cpht_table *t, size_t n)
{
	gpu_state  *st = gpu_state_of(t);
	size_t		want = (size_t) 1 << 16;

	while (want < n && want < GPU_CHUNK_KEYS)
		want <<= 1;
	if (want <= st->chunk_cap)
		return CPHT_OK;
	/* The old buffers may be in use by queued copies. */
	GPU_TRY(t, cudaDeviceSynchronize(), "waiting for the device");
	free_staging(st);
	/* cpht.max_memory counts them (the memory hook); free_staging gives
	 * them back. */
	if (!table_memory_take(staging_bytes_for(want)))
		return table_fail(t, CPHT_ERR_LIMIT,
						  "GPU transfer buffers of %llu bytes would pass the memory limit",
						  (unsigned long long) staging_bytes_for(want));
	st->chunk_cap = want;
	for (int b = 0; b < 2; b++)
	{
		cudaError_t err = cudaMallocHost((void **) &st->pin_keys[b], want * sizeof(uint64_t));

		if (err == cudaSuccess)
			err = cudaMallocHost((void **) &st->pin_out[b], want);
		if (err == cudaSuccess)
			err = cudaMalloc((void **) &st->dkeys[b], want * sizeof(uint64_t));
		if (err == cudaSuccess)
			err = cudaMalloc((void **) &st->dout[b], want);
		if (err != cudaSuccess)
		{
			free_staging(st);
			return gpu_fail(t, err, "allocating transfer buffers");
		}
	}
	/*
	 * With them, the scratch an iceberg find of one chunk needs: a find
	 * then takes no memory of its own, so a table that the memory hook
	 * keeps from growing still answers finds of any size.
	 */
	if (t->params.kind == CPHT_ICEBERG)
		return gpu_scratch_reserve(t, gpu_iceberg_scratch_bytes((uint32_t) want));
	return CPHT_OK;
}

/* ---- lifecycle ------------------------------------------------------------- */

static void
free_slots(cpht_table *t)
{
	for (int l = 0; l < t->levels; l++)
	{
		if (t->level[l].slots)
			(void) cudaFree(t->level[l].slots);
		t->level[l].slots = NULL;
	}
}

/* Zeroed (EMPTY) slot arrays for every level; free_slots undoes a part. */
static cpht_status
alloc_slots(cpht_table *t)
{
	gpu_state  *st = gpu_state_of(t);

	for (int l = 0; l < t->levels; l++)
		t->level[l].slots = NULL;
	for (int l = 0; l < t->levels; l++)
	{
		layout_level *lv = &t->level[l];
		uint64_t	bytes = lv->buckets * (uint64_t) lv->bucket_slots * (uint64_t) (lv->slot_bits / 8);

		GPU_TRY(t, cudaMalloc(&lv->slots, bytes), "allocating table memory");
		GPU_TRY(t, cudaMemsetAsync(lv->slots, 0, bytes, st->comp), "clearing table memory");
	}
	GPU_TRY(t, cudaStreamSynchronize(st->comp), "clearing table memory");
	return CPHT_OK;
}

static void
gpu_destroy(cpht_table *t)
{
	gpu_state  *st = gpu_state_of(t);

	/* Nothing was set up (create failed before its first allocation). */
	if (st == NULL)
		return;
	(void) cudaSetDevice(st->device);
	(void) cudaDeviceSynchronize();
	free_slots(t);
	free_staging(st);
	if (st->scratch)
		(void) cudaFree(st->scratch);
	table_memory_give(st->scratch_cap);
	if (st->pin_count)
		(void) cudaFreeHost(st->pin_count);
	if (st->pin_tally)
		(void) cudaFreeHost(st->pin_tally);
	if (st->dtally)
		(void) cudaFree(st->dtally);
	for (int b = 0; b < 2; b++)
	{
		if (st->ev_in[b])
			(void) cudaEventDestroy(st->ev_in[b]);
		if (st->ev_k[b])
			(void) cudaEventDestroy(st->ev_k[b]);
		if (st->ev_out[b])
			(void) cudaEventDestroy(st->ev_out[b]);
	}
	if (st->comp)
		(void) cudaStreamDestroy(st->comp);
	if (st->h2d)
		(void) cudaStreamDestroy(st->h2d);
	if (st->d2h)
		(void) cudaStreamDestroy(st->d2h);
	(void) cudaGetLastError();
	free(st);
	t->device_state = NULL;
}

static cpht_status
create_state(cpht_table *t)
{
	gpu_state  *st = gpu_state_of(t);
	cudaDeviceProp prop;

	GPU_TRY(t, cudaSetDevice(st->device), "selecting the device");
	GPU_TRY(t, cudaGetDeviceProperties(&prop, st->device), "reading device properties");
	st->sm_count = prop.multiProcessorCount;
	st->l2_bytes = (size_t) prop.l2CacheSize;
	snprintf(st->name, sizeof(st->name), "%s", prop.name);

	GPU_TRY(t, cudaStreamCreateWithFlags(&st->comp, cudaStreamNonBlocking), "creating a stream");
	GPU_TRY(t, cudaStreamCreateWithFlags(&st->h2d, cudaStreamNonBlocking), "creating a stream");
	GPU_TRY(t, cudaStreamCreateWithFlags(&st->d2h, cudaStreamNonBlocking), "creating a stream");
	for (int b = 0; b < 2; b++)
	{
		GPU_TRY(t, cudaEventCreateWithFlags(&st->ev_in[b], cudaEventDisableTiming), "creating an event");
		GPU_TRY(t, cudaEventCreateWithFlags(&st->ev_k[b], cudaEventDisableTiming), "creating an event");
		GPU_TRY(t, cudaEventCreateWithFlags(&st->ev_out[b], cudaEventDisableTiming), "creating an event");
	}
	GPU_TRY(t, cudaMallocHost((void **) &st->pin_count, 64), "allocating pinned memory");
	GPU_TRY(t, cudaMallocHost((void **) &st->pin_tally, 2 * sizeof(unsigned long long)),
			"allocating pinned memory");
	GPU_TRY(t, cudaMalloc((void **) &st->dtally, 2 * sizeof(unsigned long long)),
			"allocating counters");
	return alloc_slots(t);
}

static cpht_status
gpu_create(cpht_table *t)
{
	gpu_state  *st = (gpu_state *) calloc(1, sizeof(gpu_state));
	cpht_status rc;

	for (int l = 0; l < t->levels; l++)
		t->level[l].slots = NULL;
	if (st == NULL)
		return table_fail(t, CPHT_ERR_NOMEM, "out of host memory");
	st->device = gpu_ordinal(t->params.gpu);
	st->grouping = GPU_GROUP_AUTO;
	t->device_state = st;
	rc = create_state(t);
	/*
	 * Transfer buffers for batches as large as the table, now: pinning
	 * host memory is slow (tens of milliseconds for a full chunk pair), a
	 * cost that belongs to creating the table, not to its first batch.
	 */
	if (rc == CPHT_OK)
	{
		uint64_t	slots = 0;

		for (int l = 0; l < t->levels; l++)
			slots += t->params.slots[l];
		rc = ensure_staging(t, (size_t) slots);
	}
	if (rc != CPHT_OK)
		gpu_destroy(t);
	return rc;
}

/*
 * The slots of a grown or widened layout (table_grow.c), which keeps the
 * table's state: its streams, events, counters and scratch, and its
 * transfer buffers, made larger where the new layout calls for it and the
 * memory hook allows it (otherwise the old ones serve: the keys move in
 * smaller ranges, and a call makes them larger when it can).  Making all
 * of it afresh for every growth cost more than moving the keys (pinning
 * host memory alone takes milliseconds).
 */
static cpht_status
gpu_create_slots(cpht_table *t)
{
	gpu_state  *st = gpu_state_of(t);
	uint64_t	slots = 0;
	size_t		want = (size_t) 1 << 16;
	cpht_status rc;

	GPU_TRY(t, cudaSetDevice(st->device), "selecting the device");
	rc = alloc_slots(t);
	for (int l = 0; l < t->levels; l++)
		slots += t->params.slots[l];
	while (want < slots && want < GPU_CHUNK_KEYS)
		want <<= 1;
	if (rc == CPHT_OK && want > st->chunk_cap)
	{
		/* ensure_staging frees the old buffers before it asks the hook */
		uint64_t	more = staging_bytes_for(want) - staging_bytes_for(st->chunk_cap);

		if (table_memory_take(more))
		{
			table_memory_give(more);
			rc = ensure_staging(t, (size_t) slots);
		}
	}
	if (rc != CPHT_OK)
		free_slots(t);
	return rc;
}

static void
gpu_destroy_slots(cpht_table *t)
{
	gpu_state  *st = gpu_state_of(t);

	(void) cudaSetDevice(st->device);
	/* The kernels that read the slots are done before they go. */
	(void) cudaStreamSynchronize(st->comp);
	free_slots(t);
}

void
gpu_set_grouping(cpht_table *t, int mode)
{
	gpu_state_of(t)->grouping = mode;
}

/* ---- the host pipeline ----------------------------------------------------- */

/* What runs on one chunk of keys already on the device. */
typedef cpht_status (*chunk_fn) (cpht_table *t, void *ctx, const uint64_t *dkeys, uint32_t n, uint8_t *dout);

/* After a failure: let queued work finish so no buffer is still in use. */
static void
drain(gpu_state *st)
{
	(void) cudaStreamSynchronize(st->h2d);
	(void) cudaStreamSynchronize(st->comp);
	(void) cudaStreamSynchronize(st->d2h);
	(void) cudaGetLastError();
}

/*
 * Copies between the caller's arrays and pinned memory run at one thread's
 * memory bandwidth, well below the bus's, and the result array is fresh
 * memory whose first touch faults page by page: every core shares them
 * (on the H100 host, 400 MB of keys in, 50 MB of results out).
 */
typedef struct copy_job
{
	char	   *dst;
	const char *src;
	size_t		unit;			/* bytes per item */
} copy_job;

static void
copy_range(void *ctx, size_t begin, size_t end)
{
	copy_job   *j = (copy_job *) ctx;

	memcpy(j->dst + begin * j->unit, j->src + begin * j->unit, (end - begin) * j->unit);
}

static void
parallel_copy(const cpht_table *t, void *dst, const void *src, size_t n, size_t unit)
{
	copy_job	j = {(char *) dst, (const char *) src, unit};

	cpu_parallel_for(t->params.cpu_threads, n, copy_range, &j);
}

static double
clock_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* What a find-or-put or erase wants counted (and logged) per chunk. */
typedef struct pipeline_tally
{
	uint8_t		hit;			/* the result byte that counts as a hit */
	uint64_t	log_at;			/* first log entry, or CPHT_NO_LOG */
	cpht_tally *out;
} pipeline_tally;

/*
 * After chunk `failed` (or a download) failed: let queued work finish, then
 * bring back the results of the chunks not copied out yet, from
 * `copied` on (their kernels ran, or ran part way: the failed chunk's
 * result buffer was cleared before its kernels, so keys they did not reach
 * read 0), and clear the results of the chunks never started.  The table
 * layer then undoes exactly what the call did (device_ops.h).  Only a
 * sticky error stops the results from coming back: the device is then lost
 * for every table, and the message says so.
 */
static void
recover_results(cpht_table *t, uint8_t *out, size_t n, size_t cap, size_t copied, size_t failed,
				int failed_cleared)
{
	gpu_state  *st = gpu_state_of(t);
	size_t		upto = failed_cleared ? failed + 1 : failed;
	int			lost = 0;

	drain(st);
	for (size_t i = copied; i < upto && i * cap < n; i++)
	{
		size_t		off = i * cap;
		size_t		len = n - off < cap ? n - off : cap;

		if (cudaMemcpy(out + off, st->dout[i & 1], len, cudaMemcpyDeviceToHost) != cudaSuccess)
		{
			(void) cudaGetLastError();
			memset(out + off, 0, len);
			lost = 1;
		}
	}
	if (upto * cap < n)
		memset(out + upto * cap, 0, n - upto * cap);
	if (lost)
	{
		size_t		len = strlen(t->errmsg);

		snprintf(t->errmsg + len, sizeof(t->errmsg) - len,
				 " (its results could not be read back, so keys of it may remain)");
	}
}

/* Inside pipeline_run: a failing CUDA call ends the call through `failed`. */
#define CHUNK_TRY(call, what) \
	do { \
		cudaError_t chunk_err_ = (call); \
		if (chunk_err_ != cudaSuccess) \
		{ \
			rc = gpu_fail(t, chunk_err_, (what)); \
			goto failed; \
		} \
	} while (0)

static cpht_status
pipeline_run(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *out, chunk_fn fn, void *ctx,
			 const pipeline_tally *tally)
{
	gpu_state  *st = gpu_state_of(t);
	size_t		cap,
				chunks,
				copied = 0,		/* chunks whose results are in out */
				current = 0;	/* the chunk being started */
	int			cleared = 0;	/* its result buffer was cleared */
	int			direct_in,
				direct_out;
	double		mark;
	cpht_status rc;

	GPU_TRY(t, cudaSetDevice(st->device), "selecting the device");
	rc = ensure_staging(t, n);
	if (rc == CPHT_OK && tally)
		rc = gpu_tally_reset(t);
	if (rc != CPHT_OK)
		return rc;
	cap = st->chunk_cap;
	chunks = (n + cap - 1) / cap;
	/* Arrays in registered (pinned) host memory go by DMA as they are. */
	direct_in = gpu_host_registered(keys, n * sizeof(uint64_t)) ||
		in_direct_range(st, keys, n * sizeof(uint64_t));
	direct_out = gpu_host_registered(out, n) || in_direct_range(st, out, n);

	for (size_t i = 0; i <= chunks; i++)
	{
		current = i;
		cleared = 0;
		if (i < chunks)
		{
			int			b = (int) (i & 1);
			size_t		off = i * cap;
			size_t		len = n - off < cap ? n - off : cap;

			/* pin_keys[b] is free once chunk i-2 finished uploading. */
			mark = clock_ms();
			CHUNK_TRY(cudaEventSynchronize(st->ev_in[b]), "waiting for an upload");
			t->times.wait += clock_ms() - mark;
			if (!direct_in)
			{
				mark = clock_ms();
				parallel_copy(t, st->pin_keys[b], keys + off, len, sizeof(uint64_t));
				t->times.stage_in += clock_ms() - mark;
			}
			/* dkeys[b] is free once chunk i-2's kernels are done. */
			CHUNK_TRY(cudaStreamWaitEvent(st->h2d, st->ev_k[b], 0), "ordering an upload");
			CHUNK_TRY(cudaMemcpyAsync(st->dkeys[b], direct_in ? keys + off : st->pin_keys[b],
									  len * sizeof(uint64_t), cudaMemcpyHostToDevice, st->h2d),
					  "uploading keys");
			CHUNK_TRY(cudaEventRecord(st->ev_in[b], st->h2d), "recording an event");
			/* Kernels wait for the keys, and for dout[b] to be downloaded. */
			CHUNK_TRY(cudaStreamWaitEvent(st->comp, st->ev_in[b], 0), "ordering kernels");
			CHUNK_TRY(cudaStreamWaitEvent(st->comp, st->ev_out[b], 0), "ordering kernels");
			/* Cleared first, so that a failure part way tells which keys
			 * the chunk reached. */
			CHUNK_TRY(cudaMemsetAsync(st->dout[b], 0, len, st->comp), "clearing results");
			cleared = 1;
			if (table_fault_step())
				rc = table_fail(t, CPHT_ERR_DEVICE, "GPU: injected fault in chunk %zu of %zu", i + 1, chunks);
			else
				rc = fn(t, ctx, st->dkeys[b], (uint32_t) len, st->dout[b]);
			if (rc == CPHT_OK && tally)
				rc = gpu_tally_chunk(t, st->dkeys[b], st->dout[b], (uint32_t) len, tally->hit,
									 tally->log_at);
			if (rc != CPHT_OK)
				goto failed;
			CHUNK_TRY(cudaEventRecord(st->ev_k[b], st->comp), "recording an event");
			CHUNK_TRY(cudaStreamWaitEvent(st->d2h, st->ev_k[b], 0), "ordering a download");
			CHUNK_TRY(cudaMemcpyAsync(direct_out ? out + off : st->pin_out[b], st->dout[b], len,
									  cudaMemcpyDeviceToHost, st->d2h),
					  "downloading results");
			CHUNK_TRY(cudaEventRecord(st->ev_out[b], st->d2h), "recording an event");
		}
		if (i >= 1)
		{
			int			b = (int) ((i - 1) & 1);
			size_t		off = (i - 1) * cap;
			size_t		len = n - off < cap ? n - off : cap;
			cudaError_t err;

			mark = clock_ms();
			err = cudaEventSynchronize(st->ev_out[b]);
			t->times.wait += clock_ms() - mark;
			if (err != cudaSuccess)
			{
				rc = gpu_fail(t, err, "running a batch");
				/* chunk i started (results cleared) if i < chunks */
				cleared = i < chunks;
				goto failed;
			}
			if (!direct_out)
			{
				mark = clock_ms();
				parallel_copy(t, out + off, st->pin_out[b], len, 1);
				t->times.copy_out += clock_ms() - mark;
			}
			copied = i;
		}
	}
	if (tally)
	{
		mark = clock_ms();
		rc = gpu_tally_read(t, tally->out);
		t->times.wait += clock_ms() - mark;
	}
	return rc;

failed:
	recover_results(t, out, n, cap, copied, current, cleared);
	return rc;
}

#undef CHUNK_TRY

/* ---- the operations ------------------------------------------------------ */

typedef struct fop_ctx
{
	uint64_t   *homeless;
	size_t	   *nhomeless;
} fop_ctx;

static cpht_status
chunk_fop(cpht_table *t, void *ctx, const uint64_t *dkeys, uint32_t n, uint8_t *dout)
{
	fop_ctx    *c = (fop_ctx *) ctx;

	if (t->params.kind == CPHT_CUCKOO)
		return gpu_cuckoo_fop(t, dkeys, n, dout, c->homeless, c->nhomeless);
	return gpu_iceberg_fop(t, dkeys, n, dout);
}

static cpht_status
chunk_find(cpht_table *t, void *, const uint64_t *dkeys, uint32_t n, uint8_t *dout)
{
	if (t->params.kind == CPHT_CUCKOO)
		return gpu_cuckoo_find(t, dkeys, n, dout);
	return gpu_iceberg_find(t, dkeys, n, dout);
}

static cpht_status
chunk_erase(cpht_table *t, void *ctx, const uint64_t *dkeys, uint32_t n, uint8_t *dout)
{
	if (t->params.kind == CPHT_CUCKOO)
		return gpu_cuckoo_erase(t, dkeys, n, dout);
	return gpu_iceberg_erase(t, dkeys, n, dout, *(const int *) ctx);
}

/* Rare and small next to a table: keys and places go up through the
 * scratch area in one piece, no pipeline. */
static cpht_status
gpu_revive_keys(cpht_table *t, const uint64_t *keys, const uint8_t *where, size_t n, uint8_t *status)
{
	gpu_state  *st = gpu_state_of(t);
	gpu_carve	c = {NULL, 0};
	uint64_t   *dkeys;
	uint8_t    *dwhere,
			   *dstatus;
	cpht_status rc;

	if (n == 0)
		return CPHT_OK;
	if (n > UINT32_MAX)
		return table_fail(t, CPHT_ERR_INVALID, "too many keys to put back at once (%zu)", n);
	GPU_TRY(t, cudaSetDevice(st->device), "selecting the device");
	for (int pass = 0; pass < 2; pass++)
	{
		dkeys = carve<uint64_t>(&c, n);
		dwhere = carve<uint8_t>(&c, n);
		dstatus = carve<uint8_t>(&c, n);
		if (pass == 0)
		{
			rc = gpu_scratch_reserve(t, c.off);
			if (rc != CPHT_OK)
				return rc;
			c.base = st->scratch;
			c.off = 0;
		}
	}
	GPU_TRY(t, cudaMemcpyAsync(dkeys, keys, n * sizeof(uint64_t), cudaMemcpyHostToDevice, st->comp),
			"uploading keys");
	GPU_TRY(t, cudaMemcpyAsync(dwhere, where, n, cudaMemcpyHostToDevice, st->comp), "uploading keys");
	rc = gpu_revive(t, dkeys, dwhere, (uint32_t) n, dstatus);
	if (rc != CPHT_OK)
		return rc;
	GPU_TRY(t, cudaMemcpyAsync(status, dstatus, n, cudaMemcpyDeviceToHost, st->comp),
			"downloading results");
	GPU_TRY(t, cudaStreamSynchronize(st->comp), "putting keys back");
	return CPHT_OK;
}

static cpht_status
gpu_find_or_put(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *status,
				uint64_t *homeless, size_t *nhomeless, cpht_tally *tally, uint64_t log_at)
{
	fop_ctx		c = {homeless, nhomeless};
	pipeline_tally want = {CPHT_PUT, log_at, tally};

	*nhomeless = 0;
	tally->hits = tally->full = 0;
	if (n == 0)
		return CPHT_OK;
	return pipeline_run(t, keys, n, status, chunk_fop, &c, &want);
}

static cpht_status
gpu_find(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *found)
{
	if (n == 0)
		return CPHT_OK;
	return pipeline_run(t, keys, n, found, chunk_find, NULL, NULL);
}

static cpht_status
gpu_erase(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *present, int to_empty,
		  cpht_tally *tally, uint64_t log_at)
{
	pipeline_tally want = {CPHT_WHERE(0, 0), log_at, tally};

	tally->hits = tally->full = 0;
	if (n == 0)
		return CPHT_OK;
	return pipeline_run(t, keys, n, present, chunk_erase, &to_empty, &want);
}

static cpht_status
gpu_scan(cpht_table *t, uint64_t *live, uint64_t *tombstones)
{
	GPU_TRY(t, cudaSetDevice(gpu_state_of(t)->device), "selecting the device");
	return gpu_scan_levels(t, live, tombstones);
}

static void
gpu_device_name(cpht_table *t, char *buf, size_t len)
{
	gpu_state  *st = gpu_state_of(t);

	snprintf(buf, len, "%s (GPU %d)", st->name, st->device);
}

static uint64_t
gpu_staging_bytes(cpht_table *t)
{
	gpu_state  *st = gpu_state_of(t);

	/* Pinned and device chunk buffers, two each, plus the scratch area. */
	return staging_bytes_for(st->chunk_cap) + st->scratch_cap;
}

static void
gpu_device_memory(cpht_table *t, uint64_t *free_bytes, uint64_t *total_bytes)
{
	size_t		f = 0,
				total = 0;

	if (cudaSetDevice(gpu_state_of(t)->device) != cudaSuccess ||
		cudaMemGetInfo(&f, &total) != cudaSuccess)
		(void) cudaGetLastError();
	*free_bytes = f;
	*total_bytes = total;
}

/* Pinned host memory for a caller that hands its arrays to several GPU
 * tables (portable: every device's context may transfer from it). */
static void *
gpu_pinned_alloc(size_t bytes)
{
	void	   *p = NULL;

	if (cudaHostAlloc(&p, bytes, cudaHostAllocPortable) != cudaSuccess)
	{
		(void) cudaGetLastError();
		return NULL;
	}
	return p;
}

static void
gpu_pinned_free(void *p)
{
	if (p)
		(void) cudaFreeHost(p);
	(void) cudaGetLastError();
}

static void
gpu_set_direct(cpht_table *t, const void *begin, size_t len)
{
	gpu_state  *st = gpu_state_of(t);

	st->direct_begin = (const char *) begin;
	st->direct_end = (const char *) begin + len;
}

static int
gpu_device_ordinal(cpht_table *t)
{
	return gpu_state_of(t)->device;
}

/*
 * The GPU's entries, each assigned by name (nvcc's C++17 has no designated
 * initializers), so that reordering the struct cannot miswire them.
 */
static cpht_log_store
gpu_make_log_store(void)
{
	cpht_log_store s = {};

	s.reserve = gpu_log_reserve;
	s.write = gpu_log_write;
	s.read = gpu_log_read;
	s.release = gpu_log_release;
	return s;
}

static cpht_pinned_ops
gpu_make_pinned_ops(void)
{
	cpht_pinned_ops p = {};

	p.alloc = gpu_pinned_alloc;
	p.free = gpu_pinned_free;
	p.set_direct = gpu_set_direct;
	return p;
}

static const cpht_log_store gpu_log_store = gpu_make_log_store();
static const cpht_pinned_ops gpu_pinned_ops = gpu_make_pinned_ops();

static cpht_device_ops
gpu_make_ops(void)
{
	cpht_device_ops o = {};

	o.name = "gpu";
	o.create = gpu_create;
	o.destroy = gpu_destroy;
	o.find_or_put = gpu_find_or_put;
	o.find = gpu_find;
	o.erase = gpu_erase;
	o.scan = gpu_scan;
	o.device_name = gpu_device_name;
	o.staging_bytes = gpu_staging_bytes;
	o.copy_slots = gpu_copy_level;
	o.revive = gpu_revive_keys;
	o.write_slots = gpu_write_level;
	o.device_memory = gpu_device_memory;
	o.move_keys = gpu_move_keys;
	o.copy_slot_range = gpu_copy_slot_range;
	o.create_slots = gpu_create_slots;
	o.destroy_slots = gpu_destroy_slots;
	o.device_ordinal = gpu_device_ordinal;
	o.write_slot_bytes = gpu_write_slot_bytes;
	o.slot_writes_wait = gpu_slot_writes_wait;
	o.log_store = &gpu_log_store;
	o.pinned = &gpu_pinned_ops;
	return o;
}

extern "C" const cpht_device_ops cpht_gpu_ops = gpu_make_ops();
