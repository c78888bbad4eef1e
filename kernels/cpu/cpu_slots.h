/*
 * cpu_slots.h — atomic access to 16/32/64-bit slots for the CPU
 * implementation.  Slots are read and written only through these, with
 * C11 atomics, so several threads can share one table exactly as warps
 * share it on the GPU.
 */
#ifndef CPHT_CPU_SLOTS_H
#define CPHT_CPU_SLOTS_H

#include <stdatomic.h>
#include <stdint.h>

#include "table/layout.h"

static inline uint64_t
cpu_slot_load(const layout_level *lv, uint64_t i)
{
	switch (lv->slot_bits)
	{
		case 16:
			return atomic_load_explicit(&((_Atomic uint16_t *) lv->slots)[i], memory_order_acquire);
		case 32:
			return atomic_load_explicit(&((_Atomic uint32_t *) lv->slots)[i], memory_order_acquire);
		default:
			return atomic_load_explicit(&((_Atomic uint64_t *) lv->slots)[i], memory_order_acquire);
	}
}

/* Compare-and-swap; on failure *expected receives the slot's current value. */
static inline int
cpu_slot_cas(const layout_level *lv, uint64_t i, uint64_t *expected, uint64_t desired)
{
	switch (lv->slot_bits)
	{
		case 16:
			{
				uint16_t	e = (uint16_t) *expected;
				int			ok = atomic_compare_exchange_strong(&((_Atomic uint16_t *) lv->slots)[i], &e, (uint16_t) desired);

				*expected = e;
				return ok;
			}
		case 32:
			{
				uint32_t	e = (uint32_t) *expected;
				int			ok = atomic_compare_exchange_strong(&((_Atomic uint32_t *) lv->slots)[i], &e, (uint32_t) desired);

				*expected = e;
				return ok;
			}
		default:
			{
				uint64_t	e = *expected;
				int			ok = atomic_compare_exchange_strong(&((_Atomic uint64_t *) lv->slots)[i], &e, desired);

				*expected = e;
				return ok;
			}
	}
}

static inline uint64_t
cpu_slot_swap(const layout_level *lv, uint64_t i, uint64_t desired)
{
	switch (lv->slot_bits)
	{
		case 16:
			return atomic_exchange(&((_Atomic uint16_t *) lv->slots)[i], (uint16_t) desired);
		case 32:
			return atomic_exchange(&((_Atomic uint32_t *) lv->slots)[i], (uint32_t) desired);
		default:
			return atomic_exchange(&((_Atomic uint64_t *) lv->slots)[i], desired);
	}
}

/* Start fetching a bucket's first cache line: operations touch buckets at
 * random, so a batch overlaps the misses of several keys. */
static inline void
cpu_prefetch_bucket(const layout_level *lv, uint64_t address)
{
	const char *p = (const char *) lv->slots +
		layout_bucket_start(lv, address) * layout_slot_bytes(lv);

	__builtin_prefetch(p, 1, 0);
}

#endif							/* CPHT_CPU_SLOTS_H */
