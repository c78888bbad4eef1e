/*
 * unit.h — a minimal TAP-style harness for the C unit tests of kernels/.
 */
#ifndef CPHT_UNIT_H
#define CPHT_UNIT_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int	unit_failures = 0;
static int	unit_checks = 0;

#define CHECK(cond, ...) \
	do { \
		unit_checks++; \
		if (!(cond)) \
		{ \
			unit_failures++; \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__); \
			fputc('\n', stderr); \
		} \
	} while (0)

#define UNIT_DONE() \
	do { \
		printf("%s: %d checks, %d failures\n", __FILE__, unit_checks, unit_failures); \
		return unit_failures ? 1 : 0; \
	} while (0)

/* splitmix64: reproducible test keys. */
static inline uint64_t
unit_rand(uint64_t *state)
{
	uint64_t	z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

#endif
