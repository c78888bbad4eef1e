/*
 * gpu_none.c — the functions of cpht_gpu.h where cpht is built without
 * CUDA: no GPU is ever usable.  The Makefile builds this file only then;
 * the guard keeps it empty for scripts that compile every kernels C file.
 */
#include <stdio.h>

#include "cpht_gpu.h"

#ifndef CPHT_WITH_GPU

static void
no_cuda(char *errbuf, size_t errlen)
{
	if (errbuf && errlen)
		snprintf(errbuf, errlen, "cpht was built without CUDA support");
}

int
cpht_gpu_built(void)
{
	return 0;
}

int
cpht_gpu_usable(char *errbuf, size_t errlen)
{
	no_cuda(errbuf, errlen);
	return 0;
}

int
cpht_gpu_set_devices(const int *ordinals, int n)
{
	(void) ordinals;
	(void) n;
	return 0;
}

int
cpht_gpu_count(void)
{
	return 0;
}

int
cpht_gpu_info(char *name, size_t namelen, uint64_t *free_bytes, uint64_t *total_bytes)
{
	if (name && namelen)
		name[0] = '\0';
	*free_bytes = *total_bytes = 0;
	return 0;
}

int
cpht_host_register(void *ptr, size_t len, char *errbuf, size_t errlen)
{
	(void) ptr;
	(void) len;
	no_cuda(errbuf, errlen);
	return 0;
}

int
cpht_gpu_break_context(void)
{
	return 0;
}

#endif							/* !CPHT_WITH_GPU */
