/*
 * keys.h — reading bigint[] arguments and building array results without
 * a per-element Datum round trip.
 */
#ifndef CPHT_KEYS_H
#define CPHT_KEYS_H

#include "fmgr.h"
#include "utils/array.h"

/*
 * The keys of a bigint[] argument as 64-bit patterns, checked: one
 * dimension, no NULL element, and 0 <= key < 2^key_bits when key_bits < 64.
 * Points into the array itself (no copy).  *n is the number of keys.
 */
extern const uint64 *cpht_keys_read(ArrayType *array, int key_bits, int *n);

/*
 * The same for argument argno of a function: an expanded array that keeps
 * its flat form (a PL/pgSQL array variable assigned from a query) is read
 * in place, without the flat copy PG_GETARG_ARRAYTYPE_P would make of it.
 * Valid while the argument is.
 */
extern const uint64 *cpht_keys_read_arg(FunctionCallInfo fcinfo, int argno, int key_bits, int *n);

/* A one-dimensional boolean[] of n elements (n > 0) whose data the caller
 * fills through ARR_DATA_PTR: one byte per element, 0 or 1. */
extern ArrayType *cpht_bool_array(int n);

/* A one-dimensional bigint[] of n elements (n > 0), data to be filled. */
extern ArrayType *cpht_int8_array(int n);

/*
 * palloc of a buffer of `bytes` that the caller writes whole (statuses of a
 * call, an array result): from CPHT_HUGE_PAGES_MIN bytes on its aligned
 * 2 MB stretches are asked of the kernel in transparent huge pages, so
 * that its first touch faults per 2 MB, not per 4 kB.
 */
#define CPHT_HUGE_PAGES_MIN ((Size) 4 * 1024 * 1024)
extern void *cpht_palloc_filled(Size bytes);

#endif							/* CPHT_KEYS_H */
