/*
 * gpu_pipeline.cu — the host pipeline of the GPU tables: the transfer
 * buffers, a batch in chunks through them, and the results of a call that
 * failed part way.  find-or-put, find and erase of gpu_device.cu's ops
 * table run here.
 *
 * Buffers.  Two pinned host buffers and two device buffers of one chunk
 * each, per table (gpu_staging.cu).
 *
 * Pipeline.  The caller's arrays are pageable host memory.  A batch goes
 * in chunks: the host copies chunk i+1 into pinned memory and uploads it
 * (stream h2d) while the kernels of chunk i run (stream comp), and results
 * come back one byte per key (stream d2h).  Kernels of all chunks run in
 * order on one stream, so chunk i+1 sees every write of chunk i: the
 * chunks of one batch behave as one batch.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu/gpu_ops.h"
#include "util/threads.h"

/* ---- arrays that go by DMA as they are ------------------------------------ */

/* Whether [p, p + len) lies in the pinned memory the table's owner keeps. */
static int
in_direct_range(const gpu_state *st, const void *p, size_t len)
{
	const char *b = (const char *) p;

	return st->direct_begin && b >= st->direct_begin && len <= (size_t) (st->direct_end - b);
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
	rc = gpu_ensure_staging(t, n);
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

/* ---- the kinds ------------------------------------------------------------ */

static cpht_status
iceberg_fop(cpht_table *t, const uint64_t *dkeys, uint32_t n, uint8_t *dstatus,
			uint64_t *, size_t *)
{
	return gpu_iceberg_fop(t, dkeys, n, dstatus);
}

static cpht_status
cuckoo_erase(cpht_table *t, const uint64_t *dkeys, uint32_t n, uint8_t *dpresent, int)
{
	return gpu_cuckoo_erase(t, dkeys, n, dpresent);
}

static_assert(CPHT_ICEBERG == 0 && CPHT_CUCKOO == 1, "gpu_kinds is indexed by cpht_kind");
const gpu_kind gpu_kinds[2] = {
	/* CPHT_ICEBERG */ {iceberg_fop, gpu_iceberg_find, gpu_iceberg_erase, gpu_iceberg_scratch_bytes},
	/* CPHT_CUCKOO */ {gpu_cuckoo_fop, gpu_cuckoo_find, cuckoo_erase, NULL},
};

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

	return gpu_kinds[t->params.kind].find_or_put(t, dkeys, n, dout, c->homeless, c->nhomeless);
}

static cpht_status
chunk_find(cpht_table *t, void *, const uint64_t *dkeys, uint32_t n, uint8_t *dout)
{
	return gpu_kinds[t->params.kind].find(t, dkeys, n, dout);
}

static cpht_status
chunk_erase(cpht_table *t, void *ctx, const uint64_t *dkeys, uint32_t n, uint8_t *dout)
{
	return gpu_kinds[t->params.kind].erase(t, dkeys, n, dout, *(const int *) ctx);
}

/* How a batch's chunks reach the kernels: from host memory through the
 * transfer buffers (pipeline_run), or already on the device (resident_run). */
typedef cpht_status (*batch_runner) (cpht_table *t, const uint64_t *keys, size_t n, uint8_t *out,
									 chunk_fn fn, void *ctx, const pipeline_tally *tally);

/* Find-or-put and find, the same for either runner. */
static cpht_status
run_find_or_put(batch_runner run, cpht_table *t, const uint64_t *keys, size_t n, uint8_t *status,
				uint64_t *homeless, size_t *nhomeless, cpht_tally *tally, uint64_t log_at)
{
	fop_ctx		c = {homeless, nhomeless};
	pipeline_tally want = {CPHT_PUT, log_at, tally};

	*nhomeless = 0;
	tally->hits = tally->full = 0;
	if (n == 0)
		return CPHT_OK;
	return run(t, keys, n, status, chunk_fop, &c, &want);
}

static cpht_status
run_find(batch_runner run, cpht_table *t, const uint64_t *keys, size_t n, uint8_t *found)
{
	if (n == 0)
		return CPHT_OK;
	return run(t, keys, n, found, chunk_find, NULL, NULL);
}

cpht_status
gpu_find_or_put(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *status,
				uint64_t *homeless, size_t *nhomeless, cpht_tally *tally, uint64_t log_at)
{
	return run_find_or_put(pipeline_run, t, keys, n, status, homeless, nhomeless, tally, log_at);
}

cpht_status
gpu_find(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *found)
{
	return run_find(pipeline_run, t, keys, n, found);
}

cpht_status
gpu_erase(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *present, int to_empty,
		  cpht_tally *tally, uint64_t log_at)
{
	pipeline_tally want = {CPHT_WHERE(0, 0), log_at, tally};

	tally->hits = tally->full = 0;
	if (n == 0)
		return CPHT_OK;
	return pipeline_run(t, keys, n, present, chunk_erase, &to_empty, &want);
}


/* ---- arrays already on the device (resident_ops) ---------------------------- */

/*
 * A batch whose keys a router put in this table's device memory: the same
 * kernels as the host pipeline, in chunks of the transfer buffers' size
 * (the scratch the kernels take is sized for one), without transfers.  The
 * answers are cleared first, so that a failure part way tells which keys
 * the call reached (device_ops.h); then everything is waited for.
 */
static cpht_status
resident_run(cpht_table *t, const uint64_t *dkeys, size_t n, uint8_t *dout, chunk_fn fn, void *ctx,
			 const pipeline_tally *tally)
{
	gpu_state  *st = gpu_state_of(t);
	size_t		cap;
	cpht_status rc;

	GPU_TRY(t, cudaSetDevice(st->device), "selecting the device");
	rc = gpu_ensure_staging(t, n);
	if (rc == CPHT_OK && tally)
		rc = gpu_tally_reset(t);
	if (rc != CPHT_OK)
		return rc;
	cap = st->chunk_cap;
	GPU_TRY(t, cudaMemsetAsync(dout, 0, n, st->comp), "clearing results");
	for (size_t off = 0; off < n; off += cap)
	{
		size_t		len = n - off < cap ? n - off : cap;

		if (table_fault_step())
			rc = table_fail(t, CPHT_ERR_DEVICE, "GPU: injected fault at key %zu of %zu", off, n);
		else
			rc = fn(t, ctx, dkeys + off, (uint32_t) len, dout + off);
		if (rc == CPHT_OK && tally)
			rc = gpu_tally_chunk(t, dkeys + off, dout + off, (uint32_t) len, tally->hit,
								 tally->log_at);
		if (rc != CPHT_OK)
		{
			drain(st);
			return rc;
		}
	}
	if (tally)
		rc = gpu_tally_read(t, tally->out);
	if (rc == CPHT_OK)
		GPU_TRY(t, cudaStreamSynchronize(st->comp), "running a batch");
	else
		drain(st);
	return rc;
}

cpht_status
gpu_find_or_put_resident(cpht_table *t, const uint64_t *dkeys, size_t n, uint8_t *dstatus,
						 uint64_t *homeless, size_t *nhomeless, cpht_tally *tally, uint64_t log_at)
{
	return run_find_or_put(resident_run, t, dkeys, n, dstatus, homeless, nhomeless, tally, log_at);
}

cpht_status
gpu_find_resident(cpht_table *t, const uint64_t *dkeys, size_t n, uint8_t *dfound)
{
	return run_find(resident_run, t, dkeys, n, dfound);
}

/*
 * Device memory into a host array of any kind, through the table's pinned
 * transfer buffers: a chunk comes down by DMA while the threads copy the
 * one before into place.  cudaMemcpy into pageable memory bounces through
 * the driver's own small pinned buffers, one at a time: measured at a few
 * GB/s on an H200 host, where the transaction bookkeeping of a shared
 * table read each call's undo log that way and spent most of the cpht
 * worker's time on it.  Without transfer buffers the plain copy serves.
 */
cpht_status
gpu_download(cpht_table *t, void *host, const void *dev, size_t bytes)
{
	gpu_state  *st = gpu_state_of(t);
	size_t		cap = st->chunk_cap * sizeof(uint64_t);
	size_t		chunks;

	cudaError_t err = cudaSuccess;

	GPU_TRY(t, cudaSetDevice(st->device), "selecting the device");
	if (bytes == 0)
		return CPHT_OK;
	/* what the table's kernels write is there; the transfer buffers are
	 * free once the streams that use them are idle */
	GPU_TRY(t, cudaStreamSynchronize(st->comp), "waiting for the table's kernels");
	if (cap == 0 || gpu_host_registered(host, bytes))
	{
		GPU_TRY(t, cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost), "copying to the host");
		return CPHT_OK;
	}
	GPU_TRY(t, cudaStreamSynchronize(st->h2d), "waiting for the table's copies");
	GPU_TRY(t, cudaStreamSynchronize(st->d2h), "waiting for the table's copies");
	chunks = (bytes + cap - 1) / cap;
	for (size_t i = 0; i <= chunks && err == cudaSuccess; i++)
	{
		/* chunk i down, then chunk i - 1 into place */
		if (i < chunks)
		{
			size_t		len = bytes - i * cap < cap ? bytes - i * cap : cap;

			err = cudaMemcpyAsync(st->pin_keys[i & 1], (const char *) dev + i * cap, len,
								  cudaMemcpyDeviceToHost, st->d2h);
			if (err == cudaSuccess)
				err = cudaEventRecord(st->ev_out[i & 1], st->d2h);
		}
		if (i > 0 && err == cudaSuccess)
		{
			size_t		j = i - 1;
			size_t		len = bytes - j * cap < cap ? bytes - j * cap : cap;

			err = cudaEventSynchronize(st->ev_out[j & 1]);
			if (err == cudaSuccess)
				parallel_copy(t, (char *) host + j * cap, st->pin_keys[j & 1], len, 1);
		}
	}
	if (err != cudaSuccess)
	{
		cpht_status rc = gpu_fail(t, err, "copying to the host");

		/* no copy into the transfer buffers is left queued for the next
		 * call to meet */
		drain(st);
		return rc;
	}
	return CPHT_OK;
}

cpht_status
gpu_resident_to_host(cpht_table *t, void *host, const void *dev, size_t bytes)
{
	gpu_state  *st = gpu_state_of(t);

	GPU_TRY(t, cudaSetDevice(st->device), "selecting the device");
	GPU_TRY(t, cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, st->comp),
			"copying results to the host");
	GPU_TRY(t, cudaStreamSynchronize(st->comp), "copying results to the host");
	return CPHT_OK;
}

cpht_status
gpu_resident_from_host(cpht_table *t, void *dev, const void *host, size_t bytes)
{
	gpu_state  *st = gpu_state_of(t);

	GPU_TRY(t, cudaSetDevice(st->device), "selecting the device");
	GPU_TRY(t, cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, st->comp),
			"copying results to the device");
	GPU_TRY(t, cudaStreamSynchronize(st->comp), "copying results to the device");
	return CPHT_OK;
}

cpht_status
gpu_resident_fill(cpht_table *t, void *dev, int value, size_t bytes)
{
	gpu_state  *st = gpu_state_of(t);

	GPU_TRY(t, cudaSetDevice(st->device), "selecting the device");
	GPU_TRY(t, cudaMemsetAsync(dev, value, bytes, st->comp), "setting results");
	GPU_TRY(t, cudaStreamSynchronize(st->comp), "setting results");
	return CPHT_OK;
}
