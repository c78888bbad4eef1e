/*
 * gpu_probe.cu — the process's view of the GPU outside any table: which
 * GPUs cpht uses and what they are, host memory pinned for direct
 * transfers, and (tests only) a way to break the context as a sticky fault
 * does.  The functions of cpht_gpu.h.
 */
#include <stdio.h>
#include <string.h>

#include "gpu/gpu_ops.h"

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

/* ---- host memory pinned for direct transfers ---------------------------- */

/* Registered ranges; written once at start by one thread (the cpht worker
 * registers its shared memory arena), read by every call after. */
#define MAX_HOST_RANGES 4

static struct
{
	const char *begin;
	const char *end;
}			host_ranges[MAX_HOST_RANGES];
static int	nhost_ranges = 0;

int
gpu_host_registered(const void *p, size_t len)
{
	const char *b = (const char *) p;

	for (int i = 0; i < nhost_ranges; i++)
		if (b >= host_ranges[i].begin && len <= (size_t) (host_ranges[i].end - b))
			return 1;
	return 0;
}

extern "C" int
cpht_host_register(void *ptr, size_t len, char *errbuf, size_t errlen)
{
	cudaError_t err;

	if (nhost_ranges == MAX_HOST_RANGES)
	{
		snprintf(errbuf, errlen, "at most %d ranges of host memory can be registered", MAX_HOST_RANGES);
		return 0;
	}
	if (!cpht_gpu_usable(errbuf, errlen))
		return 0;
	/* Portable: every device (and every table's context use) sees it. */
	err = cudaHostRegister(ptr, len, cudaHostRegisterPortable);
	if (err != cudaSuccess)
	{
		(void) cudaGetLastError();
		snprintf(errbuf, errlen, "cudaHostRegister of %zu bytes failed: %s", len, cudaGetErrorString(err));
		return 0;
	}
	host_ranges[nhost_ranges].begin = (const char *) ptr;
	host_ranges[nhost_ranges].end = (const char *) ptr + len;
	nhost_ranges++;
	return 1;
}

/* ---- what the first GPU is ------------------------------------------------ */

extern "C" int
cpht_gpu_info(char *name, size_t namelen, uint64_t *free_bytes, uint64_t *total_bytes)
{
	cudaDeviceProp prop;
	size_t		f = 0,
				total = 0;

	*free_bytes = *total_bytes = 0;
	if (name && namelen)
		name[0] = '\0';
	if (!cpht_gpu_usable(NULL, 0) ||
		cudaSetDevice(gpu_ordinal(0)) != cudaSuccess ||
		cudaGetDeviceProperties(&prop, gpu_ordinal(0)) != cudaSuccess ||
		cudaMemGetInfo(&f, &total) != cudaSuccess)
	{
		(void) cudaGetLastError();
		return 0;
	}
	if (name && namelen)
		snprintf(name, namelen, "%s", prop.name);
	*free_bytes = f;
	*total_bytes = total;
	return 1;
}

/* ---- the test breaker ------------------------------------------------------ */

__global__ void
trap_kernel(void)
{
	__trap();
}

extern "C" int
cpht_gpu_break_context(void)
{
	if (!cpht_gpu_usable(NULL, 0) || cudaSetDevice(gpu_ordinal(0)) != cudaSuccess)
		return 0;
	trap_kernel<<<1, 1>>>();
	(void) cudaDeviceSynchronize();
	return 1;
}
