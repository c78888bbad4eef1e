/*
 * gpu_device.cu — the GPU implementation of the table interface
 * (cpht_gpu_ops): the ops table, a table's device memory and state, and
 * the operations that need no pipeline.  The batches go through the host
 * pipeline (gpu_pipeline.cu); which GPUs there are, gpu_probe.cu.
 *
 * Memory.  Each level's slots are one cudaMalloc of exactly slots *
 * slot_bits / 8 bytes, zeroed (EMPTY) at creation.  Per table there are
 * also the pipeline's transfer buffers (gpu_pipeline.cu) and a scratch area
 * for the temporaries of one device call (overflow lists, grouping, the
 * cuckoo sort); both grow on first use and are reported by staging_bytes.
 * The transfer buffers for batches as large as the table, and with them an
 * iceberg table's scratch for a find of one chunk, are made when the table
 * is.
 *
 * Errors.  Every CUDA call is checked; a failure becomes CPHT_ERR_NOMEM
 * (allocation) or CPHT_ERR_DEVICE with CUDA's message in the table, never
 * an abort.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu_ops.h"

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
	gpu_free_staging(st);
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
		rc = gpu_ensure_staging(t, (size_t) slots);
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
	cpht_status rc;

	GPU_TRY(t, cudaSetDevice(st->device), "selecting the device");
	rc = alloc_slots(t);
	for (int l = 0; l < t->levels; l++)
		slots += t->params.slots[l];
	/* keeps the old buffers where the hook refuses larger ones */
	if (rc == CPHT_OK)
		rc = gpu_ensure_staging(t, (size_t) slots);
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

/* ---- the operations outside the pipeline and the ops table -------------- */

/* Keys and places go up through the scratch area, no pipeline: rare and
 * small next to a table.  In pieces no larger than the scratch the table
 * has (or a small one): the undo of a call refused by cpht.max_memory puts
 * deleted keys back, and must not need much memory of its own. */
#define REVIVE_MIN_PIECE ((size_t) 1 << 16)

static cpht_status
revive_piece(cpht_table *t, const uint64_t *keys, const uint8_t *where, size_t n, uint8_t *status)
{
	gpu_state  *st = gpu_state_of(t);
	gpu_carve	c = {NULL, 0};
	uint64_t   *dkeys;
	uint8_t    *dwhere,
			   *dstatus;
	cpht_status rc;

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
gpu_revive_keys(cpht_table *t, const uint64_t *keys, const uint8_t *where, size_t n, uint8_t *status)
{
	gpu_state  *st = gpu_state_of(t);
	/* a piece's scratch: its keys, places and statuses, with carving's
	 * alignment */
	size_t		piece = st->scratch_cap / (sizeof(uint64_t) + 2) > REVIVE_MIN_PIECE + 1024 ?
		st->scratch_cap / (sizeof(uint64_t) + 2) - 1024 : REVIVE_MIN_PIECE;
	cpht_status rc = CPHT_OK;

	if (n == 0)
		return CPHT_OK;
	if (piece > UINT32_MAX)
		piece = UINT32_MAX;
	GPU_TRY(t, cudaSetDevice(st->device), "selecting the device");
	for (size_t off = 0; off < n && rc == CPHT_OK; off += piece)
		rc = revive_piece(t, keys + off, where + off, n - off < piece ? n - off : piece, status + off);
	return rc;
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
	return gpu_staging_bytes_for(st->chunk_cap) + st->scratch_cap;
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

static cpht_resident_ops
gpu_make_resident_ops(void)
{
	cpht_resident_ops r = {};

	r.find_or_put = gpu_find_or_put_resident;
	r.find = gpu_find_resident;
	r.to_host = gpu_resident_to_host;
	r.from_host = gpu_resident_from_host;
	r.fill = gpu_resident_fill;
	return r;
}

static const cpht_log_store gpu_log_store = gpu_make_log_store();
static const cpht_resident_ops gpu_resident_ops = gpu_make_resident_ops();
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
	o.resident = &gpu_resident_ops;
	o.route = &gpu_route_ops;
	return o;
}

extern "C" const cpht_device_ops cpht_gpu_ops = gpu_make_ops();
