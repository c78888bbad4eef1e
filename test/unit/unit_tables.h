/*
 * unit_tables.h — what the table unit tests share: a table made for a test,
 * and a memory hook (cpht_set_memory_hook) that counts what the kernels
 * hold, refuses what would pass a limit and remembers the peak.
 */
#ifndef CPHT_UNIT_TABLES_H
#define CPHT_UNIT_TABLES_H

#include <stdint.h>

#include "cpht_table.h"
#include "unit.h"

/* A table for `capacity` keys of `key_bits`, on two CPU threads. */
static inline cpht_table *
unit_table(cpht_kind kind, cpht_device dev, uint64_t capacity, int key_bits, uint64_t seed)
{
	cpht_params p;
	cpht_table *t = NULL;
	char		err[256];

	CHECK(cpht_params_for_capacity(kind, capacity, key_bits, &p, err, sizeof(err)) == CPHT_OK, "params: %s", err);
	p.device = dev;
	p.seed = seed;
	p.cpu_threads = 2;
	CHECK(cpht_table_create(&p, &t, err, sizeof(err)) == CPHT_OK, "create: %s", err);
	return t;
}

static int64_t unit_hook_held = 0;
static int64_t unit_hook_limit = INT64_MAX;
static int64_t unit_hook_peak = 0;

static inline int
unit_memory_hook(int64_t delta)
{
	if (delta > 0 && unit_hook_held + delta > unit_hook_limit)
		return 0;
	unit_hook_held += delta;
	if (unit_hook_held > unit_hook_peak)
		unit_hook_peak = unit_hook_held;
	return 1;
}

#endif
