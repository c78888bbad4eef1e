/*
 * gpu_host.cu — the process's view of the GPU outside any table: what the
 * device is, host memory pinned for direct transfers, and (tests only) a
 * way to break the context as a sticky fault does.
 */
#include <stdio.h>
#include <string.h>

#include "gpu/gpu_ops.h"

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
