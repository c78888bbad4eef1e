/*
 * cpht_gpu.h — door of kernels/gpu/ for the PostgreSQL side: which GPUs
 * cpht uses, what they are, pinning host memory for them, and a test
 * breaker.  Plain C, no PostgreSQL or CUDA types.  Built without CUDA
 * (kernels/gpu/gpu_none.c) every function says "no GPU".
 *
 * Who: anyone; src/ includes it through cpht_table.h.  In cpht,
 * cpht.devices hands its list over as it is set (guc.c), and CUDA
 * starts only in a process that asks for a GPU: with cpht preloaded the
 * cpht worker alone, which also pins its transfer arena; otherwise the
 * backend that creates a GPU table.  Never in the postmaster: a CUDA
 * context does not survive fork().
 *
 * Concurrency: cpht_gpu_usable initialises CUDA on its first call and
 * caches the answer (a thread-safe one-time probe); after it,
 * cpht_gpu_usable, cpht_gpu_count and cpht_gpu_info may be called from any
 * thread.  cpht_gpu_set_devices (before the first cpht_gpu_usable) and
 * cpht_host_register (before the tables that should use the range run)
 * keep plain process-wide state: call them from one thread, while no table
 * runs.  Nothing here raises: 0 and a reason in errbuf mean no.
 */
#ifndef CPHT_GPU_H
#define CPHT_GPU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * GPU availability.  cpht_gpu_usable() initialises CUDA on first call (so
 * call it only when a GPU table is really wanted) and caches the answer; it
 * returns 0 when the build has no GPU support or no device/driver exists,
 * with the reason in errbuf.
 */
int			cpht_gpu_built(void);
int			cpht_gpu_usable(char *errbuf, size_t errlen);

/*
 * Which GPUs cpht uses, by CUDA ordinal: call before the first
 * cpht_gpu_usable (later calls change nothing and return 0).  n = 0 (the
 * default) means every device CUDA shows.  Devices that CUDA does not show
 * or whose compute capability is below 9.0 are left out when probed.
 */
int			cpht_gpu_set_devices(const int *ordinals, int n);

/* How many GPUs cpht uses (0 when none is usable). */
int			cpht_gpu_count(void);

/*
 * The first GPU cpht uses (after cpht_gpu_usable said yes): its name and free and
 * total memory.  Returns 0 when it cannot be read.
 */
int			cpht_gpu_info(char *name, size_t namelen, uint64_t *free_bytes,
						  uint64_t *total_bytes);

/*
 * Pins host memory for DMA (cudaHostRegister) so that GPU tables transfer
 * keys and results straight from and to it, without the copy through
 * their own pinned buffers, whenever a call's arrays lie inside it.
 * Returns 1, or 0 with the reason in errbuf (no GPU, or the driver
 * refused); memory that is not registered works as before.  At most a few
 * ranges, for the life of the process.
 */
int			cpht_host_register(void *ptr, size_t len, char *errbuf, size_t errlen);

/*
 * FOR TESTS ONLY: runs a kernel that traps, which leaves the process's
 * CUDA context broken as a sticky fault does; every later device call of
 * every GPU table then fails with CPHT_ERR_DEVICE_LOST.  Returns 0 without
 * a usable GPU.
 */
int			cpht_gpu_break_context(void);

#ifdef __cplusplus
}
#endif

#endif							/* CPHT_GPU_H */
