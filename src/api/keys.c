/*
 * keys.c — reading bigint[] arguments and building array results.
 *
 * Batches run to tens of millions of keys, so nothing here touches one
 * Datum per element: a bigint[] without NULLs stores its elements as a
 * contiguous, 8-byte aligned run of int64, which is exactly the uint64 key
 * array the kernels take, and a boolean[] stores one byte per element, which
 * is exactly the status array they fill (CPHT_FOUND = 0, CPHT_PUT = 1).
 */
#include "postgres.h"

#include <sys/mman.h>

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/expandeddatum.h"
#include "utils/memutils.h"

#include "api/keys.h"

/* Reports the first NULL of an array that has a null bitmap, if any. */
static void
check_no_nulls(ArrayType *array, int n)
{
	bits8	   *bitmap = ARR_NULLBITMAP(array);
	int			i;

	if (bitmap == NULL)
		return;

	/* A null bitmap may exist without any NULL in it; only a 0 bit counts. */
	for (i = 0; i < n; i++)
	{
		if ((bitmap[i / 8] & (1 << (i % 8))) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("keys must not be null"),
					 errdetail("Element %d of the array is null.",
							   ARR_LBOUND(array)[0] + i)));
	}
}

/* Reports the first key outside [0, 2^key_bits); key_bits 0 (a table
 * that widens itself) takes every key. */
static void
check_key_bits(const uint64 *keys, int n, int key_bits, int lbound)
{
	int			i;

	if (key_bits <= 0 || key_bits >= 64)
		return;

	for (i = 0; i < n; i++)
	{
		/* One shift covers negative keys too: their high bit is set. */
		if ((keys[i] >> key_bits) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("key " INT64_FORMAT " is out of range for a table with key_bits %d",
							(int64) keys[i], key_bits),
					 errdetail("Element %d of the array is outside 0 <= key < 2^%d.",
							   lbound + i, key_bits),
					 errhint("Create the table with a larger key_bits.")));
	}
}

const uint64 *
cpht_keys_read(ArrayType *array, int key_bits, int *n)
{
	const uint64 *keys;
	int			nkeys;

	if (ARR_ELEMTYPE(array) != INT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("keys must be an array of bigint")));

	/* An empty array has no dimensions at all. */
	if (ARR_NDIM(array) == 0)
	{
		*n = 0;
		return NULL;
	}

	if (ARR_NDIM(array) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("keys must be a one-dimensional array"),
				 errdetail("The array has %d dimensions.", ARR_NDIM(array))));

	nkeys = ArrayGetNItems(ARR_NDIM(array), ARR_DIMS(array));
	check_no_nulls(array, nkeys);

	keys = (const uint64 *) ARR_DATA_PTR(array);
	check_key_bits(keys, nkeys, key_bits, ARR_LBOUND(array)[0]);

	*n = nkeys;
	return keys;
}

/*
 * The keys of argument argno.  An expanded bigint[] (a PL/pgSQL array
 * variable assigned from a query, for one) usually keeps the flat array it
 * was made from: its keys are read there in place, without the flat copy
 * of the whole array PG_GETARG_ARRAYTYPE_P would make (400 MB for 50M
 * keys).  One without a flat array (its elements were assigned one by one)
 * is flattened as before.
 */
const uint64 *
cpht_keys_read_arg(FunctionCallInfo fcinfo, int argno, int key_bits, int *n)
{
	Datum		d = PG_GETARG_DATUM(argno);

	if (VARATT_IS_EXTERNAL_EXPANDED(DatumGetPointer(d)))
	{
		ExpandedArrayHeader *eah = (ExpandedArrayHeader *) DatumGetEOHP(d);

		if (eah->fvalue != NULL)
			return cpht_keys_read(eah->fvalue, key_bits, n);
	}
	return cpht_keys_read(DatumGetArrayTypeP(d), key_bits, n);
}

/*
 * Huge pages for a large buffer a call fills whole.  Such a buffer is
 * fresh memory from the kernel (glibc maps large allocations on their own),
 * whose first touch faults once per 4 kB page: a 50M-key call's statuses
 * took 12,000 faults, most of the time of copying them out.  The aligned
 * 2 MB stretches inside it are marked for transparent huge pages, where
 * the kernel offers them on request (enabled = madvise or always), so that
 * they fault once per 2 MB.  Only a hint: nothing changes where the kernel
 * has none, and memory already touched stays as it is.
 */
#define HUGE_PAGE_BYTES ((Size) 2 * 1024 * 1024)

static void
huge_pages_hint(void *p, Size bytes)
{
#ifdef MADV_HUGEPAGE
	uintptr_t	begin = TYPEALIGN(HUGE_PAGE_BYTES, (uintptr_t) p);
	uintptr_t	end = TYPEALIGN_DOWN(HUGE_PAGE_BYTES, (uintptr_t) p + bytes);

	if (bytes >= CPHT_HUGE_PAGES_MIN && end > begin)
		(void) madvise((void *) begin, end - begin, MADV_HUGEPAGE);
#else
	(void) p;
	(void) bytes;
#endif
}

void *
cpht_palloc_filled(Size bytes)
{
	void	   *p = palloc(bytes);

	huge_pages_hint(p, bytes);
	return p;
}

/* A one-dimensional array of n elements of a fixed-length type whose data
 * needs no padding between elements (bool, int8). */
static ArrayType *
new_array(int n, Oid elemtype, int elemsize)
{
	Size		nbytes;
	ArrayType  *result;

	Assert(n > 0);
	nbytes = ARR_OVERHEAD_NONULLS(1) + (Size) n * elemsize;
	if (!AllocSizeIsValid(nbytes))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("array size exceeds the maximum allowed (%d)",
						(int) MaxAllocSize)));

	/* Only the header needs zeroing; the caller writes every element. */
	result = (ArrayType *) cpht_palloc_filled(nbytes);
	memset(result, 0, ARR_OVERHEAD_NONULLS(1));
	SET_VARSIZE(result, nbytes);
	result->ndim = 1;
	result->dataoffset = 0;
	result->elemtype = elemtype;
	ARR_DIMS(result)[0] = n;
	ARR_LBOUND(result)[0] = 1;
	return result;
}

ArrayType *
cpht_bool_array(int n)
{
	return new_array(n, BOOLOID, sizeof(bool));
}

ArrayType *
cpht_int8_array(int n)
{
	return new_array(n, INT8OID, sizeof(int64));
}
