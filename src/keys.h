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

#endif							/* CPHT_KEYS_H */
