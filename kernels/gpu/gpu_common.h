/*
 * gpu_common.h — what every CUDA file of the GPU backend shares: the
 * per-table device state, the error helpers, the scratch arena and the
 * launch geometry.  CUDA-side only (nvcc); the C side sees cpht_table.h and
 * device_ops.h alone.
 */
#ifndef CPHT_GPU_COMMON_H
#define CPHT_GPU_COMMON_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "table/device_ops.h"

/* Threads per block of every table kernel. */
#define GPU_BLOCK 256

/* Keys per chunk of the host pipeline: the staging and upload of chunk i+1
 * overlap the kernels of chunk i.  4M keys (32 MB) make host threads worth
 * starting per chunk and keep the first, unoverlapped chunk short. */
#define GPU_CHUNK_KEYS ((size_t) 1 << 22)

/* Result code of a first pass: the key needs the next level / next step. */
#define GPU_NEXT 3

/* Grouping of a batch by bucket (gpu_group.cu): automatic, off, on (slices
 * of a quarter of L2), fine (slices of a sixteenth). */
enum
{
	GPU_GROUP_AUTO = -1,
	GPU_GROUP_OFF = 0,
	GPU_GROUP_ON = 1,
	GPU_GROUP_FINE = 2
};

/* Per-table device state (t->device_state). */
typedef struct gpu_state
{
	int			device;
	int			sm_count;
	size_t		l2_bytes;
	char		name[128];

	cudaStream_t comp;			/* kernels, in call order */
	cudaStream_t h2d;			/* key uploads */
	cudaStream_t d2h;			/* result downloads */
	cudaEvent_t ev_in[2];		/* chunk's keys are on the device */
	cudaEvent_t ev_k[2];		/* chunk's kernels are done */
	cudaEvent_t ev_out[2];		/* chunk's results are on the host */

	/* Host pipeline: pinned staging and device buffers, two of each. */
	size_t		chunk_cap;		/* keys per buffer, 0 before first use */
	uint64_t   *pin_keys[2];
	uint8_t    *pin_out[2];
	uint64_t   *dkeys[2];
	uint8_t    *dout[2];

	/* Temporaries of one device call (overflow lists, grouping, sort). */
	char	   *scratch;
	size_t		scratch_cap;

	/* Small pinned counters read back by the host (sizes of device lists). */
	uint32_t   *pin_count;

	/* A call's tally (gpu_log.cu): device counters and their host copy. */
	unsigned long long *dtally;
	unsigned long long *pin_tally;

	int			grouping;		/* GPU_GROUP_* */

	/* Pinned host memory the table's owner keeps for its calls (a sharded
	 * table's split buffers): arrays inside it go by DMA as they are. */
	const char *direct_begin;
	const char *direct_end;
} gpu_state;

static inline gpu_state *
gpu_state_of(const cpht_table *t)
{
	return (gpu_state *) t->device_state;
}

/* Record a CUDA failure in the table (clearing the error where it is not
 * sticky) and return CPHT_ERR_NOMEM or CPHT_ERR_DEVICE. */
cpht_status gpu_fail(cpht_table *t, cudaError_t err, const char *what);

/* The status a CUDA error stands for: NOMEM, DEVICE_LOST for the sticky
 * errors that leave the context unusable, DEVICE otherwise. */
cpht_status gpu_status_of(cudaError_t err);
/* the CUDA ordinal of cpht's GPU number `gpu` (gpu_probe.cu) */
int			gpu_ordinal(int gpu);

/* Whether [p, p + len) lies inside host memory cpht_host_register pinned
 * (gpu_probe.cu). */
int			gpu_host_registered(const void *p, size_t len);

#define GPU_TRY(t, call, what) \
	do { \
		cudaError_t gpu_err_ = (call); \
		if (gpu_err_ != cudaSuccess) \
			return gpu_fail((t), gpu_err_, (what)); \
	} while (0)

/* After a kernel launch: configuration errors show up here. */
#define GPU_LAUNCHED(t, what) GPU_TRY((t), cudaGetLastError(), (what))

/*
 * Scratch carving.  An operation lays out its temporaries twice with the
 * same calls: once with base == NULL to learn the size, once for real.
 */
typedef struct gpu_carve
{
	char	   *base;
	size_t		off;
} gpu_carve;

template <class T>
static inline T *
carve(gpu_carve *c, size_t count)
{
	T		   *p;

	c->off = (c->off + 255) & ~(size_t) 255;
	p = c->base ? (T *) (c->base + c->off) : NULL;
	c->off += count * sizeof(T);
	return p;
}

/* Make st->scratch hold at least `bytes` (waits for the table's work). */
cpht_status gpu_scratch_reserve(cpht_table *t, size_t bytes);

/* Blocks for a grid-stride kernel over n items: enough to fill the device
 * (blocks_per_sm resident per multiprocessor), no more than the items need. */
static inline unsigned
gpu_grid(const gpu_state *st, size_t n, int blocks_per_sm)
{
	size_t		need = (n + GPU_BLOCK - 1) / GPU_BLOCK;
	size_t		full = (size_t) st->sm_count * (size_t) (blocks_per_sm > 0 ? blocks_per_sm : 1);

	if (need == 0)
		need = 1;
	return (unsigned) (need < full ? need : full);
}

/* Resident blocks per multiprocessor of a kernel (1 if unknown). */
template <class K>
static inline int
gpu_occupancy(K kernel)
{
	int			blocks = 0;

	if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, GPU_BLOCK, 0) != cudaSuccess)
	{
		(void) cudaGetLastError();
		return 1;
	}
	return blocks > 0 ? blocks : 1;
}

#ifdef __CUDACC__
/*
 * Warp-aggregated append, in two parts.  GPU_WARP_BALLOT(want) asks the
 * warp which lanes want a place; GPU_WARP_APPEND(C, counter, want, at, put)
 * then takes consecutive places for them from *counter (of type C) with one
 * atomic for the whole warp (by its first wanting lane), and runs `put` on
 * each wanting lane with `at`, the warp's first place, in scope; its own
 * place is at + GPU_WARP_RANK, added in the width of the caller's index.
 * Every lane of the warp must come here (a ballot), so loops that use it
 * run whole warps together.  The one place for it: the overflow lists
 * (gpu_list_append), growth's gather and the log's tally.  Macros, not a
 * function taking a callback: the kernels compile to what they did when
 * each wrote it out (the same PTX and registers).
 */
#define GPU_WARP_BALLOT(want) \
	unsigned	gpu_wa_ballot = __ballot_sync(0xffffffffu, (want)); \
	int			gpu_wa_lane = (int) (threadIdx.x & 31)

#define GPU_WARP_APPEND(C, counter, want, at, put) \
	do { \
		C			at = 0; \
		\
		if (gpu_wa_ballot == 0) \
			break;				/* nobody in this warp appends */ \
		if (gpu_wa_lane == __ffs(gpu_wa_ballot) - 1) \
			at = atomicAdd((counter), (C) __popc(gpu_wa_ballot)); \
		at = __shfl_sync(0xffffffffu, at, __ffs(gpu_wa_ballot) - 1); \
		if (want) \
			put; \
	} while (0)

/* Inside GPU_WARP_APPEND's put: this lane's place among the wanting lanes. */
#define GPU_WARP_RANK ((unsigned) __popc(gpu_wa_ballot & ((1u << gpu_wa_lane) - 1)))
#endif

#endif							/* CPHT_GPU_COMMON_H */
