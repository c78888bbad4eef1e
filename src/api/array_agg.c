/*
 * array_agg.c — cpht_array_agg(bigint): array_agg of bigint that runs in
 * parallel workers.
 *
 * PostgreSQL 15's array_agg has no combine function, so a query that
 * gathers a large relation's keys into one array for the array functions
 * scans it in one process.  This aggregate gives the same value as
 * array_agg(bigint) without ORDER BY — every input row's value once, NULL
 * elements included, in an unspecified order; NULL when no row came — and
 * can be split into partial aggregates: each process collects its rows'
 * keys, and the leader appends the partial arrays one after another.  The
 * planner puts it in place of array_agg where an array function of cpht
 * takes the array directly (plan/array_agg.c).
 *
 * The state is a growable run of int64 (and, from the first NULL on, one
 * byte per element marking NULLs), so the final array is one copy of it.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "utils/array.h"
#include "utils/memutils.h"

#include "api/keys.h"

typedef struct KeysAggState
{
	int64		n;				/* elements, NULLs included */
	int64		cap;			/* room in keys (and nulls) */
	int64		nnulls;
	int64	   *keys;			/* a NULL element's slot holds 0 */
	bool	   *nulls;			/* NULL until the first NULL element */
	MemoryContext cxt;			/* where keys and nulls live */

	/*
	 * A deserialized state only lends its elements to the combine function
	 * that follows: they stay in the partial state's bytes (keys NULL, cap
	 * 0), saving a copy of every worker's keys.
	 */
	const char *lent_keys;
	const char *lent_nulls;		/* NULL when nnulls is 0 */
} KeysAggState;

#define FIRST_CAP 1024

/* The most elements a bigint[] without NULLs can hold (1 GB). */
#define MAX_ELEMENTS ((int64) ((MaxAllocSize - ARR_OVERHEAD_NONULLS(1)) / sizeof(int64)))

static void
too_many(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
			 errmsg("array size exceeds the maximum allowed (%d)", (int) MaxAllocSize),
			 errdetail("A bigint array holds at most " INT64_FORMAT " elements.", MAX_ELEMENTS),
			 errhint("Feed the keys to cpht_fop_agg or cpht_fop_relation, which stream and have no such limit.")));
}

static MemoryContext
agg_context(FunctionCallInfo fcinfo, const char *fn)
{
	MemoryContext aggcontext;

	if (!AggCheckCallContext(fcinfo, &aggcontext))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s called in a non-aggregate context", fn)));
	return aggcontext;
}

static KeysAggState *
state_new(MemoryContext cxt, int64 cap)
{
	KeysAggState *s = MemoryContextAllocZero(cxt, sizeof(KeysAggState));

	s->cxt = cxt;
	s->cap = Max(cap, FIRST_CAP);
	s->keys = MemoryContextAllocHuge(cxt, sizeof(int64) * s->cap);
	return s;
}

static void
state_start_nulls(KeysAggState *s)
{
	s->nulls = MemoryContextAllocHuge(s->cxt, s->cap);
	memset(s->nulls, 0, s->n);
}

/* Room for `more` elements past n. */
static void
state_reserve(KeysAggState *s, int64 more)
{
	int64		need = s->n + more;
	int64		cap = s->cap;

	if (need > MAX_ELEMENTS)
		too_many();
	if (need <= cap)
		return;
	while (cap < need)
		cap = Min(cap * 2, MAX_ELEMENTS);
	s->keys = repalloc_huge(s->keys, sizeof(int64) * cap);
	if (s->nulls != NULL)
		s->nulls = repalloc_huge(s->nulls, cap);
	s->cap = cap;
}

PG_FUNCTION_INFO_V1(cpht_array_agg_step);
Datum
cpht_array_agg_step(PG_FUNCTION_ARGS)
{
	MemoryContext cxt = agg_context(fcinfo, "cpht_array_agg_step");
	KeysAggState *s = PG_ARGISNULL(0) ? state_new(cxt, FIRST_CAP)
		: (KeysAggState *) PG_GETARG_POINTER(0);

	if (s->n == s->cap)
		state_reserve(s, 1);
	if (PG_ARGISNULL(1))
	{
		if (s->nulls == NULL)
			state_start_nulls(s);
		s->nulls[s->n] = true;
		s->keys[s->n] = 0;
		s->nnulls++;
	}
	else
	{
		if (s->nulls != NULL)
			s->nulls[s->n] = false;
		s->keys[s->n] = PG_GETARG_INT64(1);
	}
	s->n++;
	PG_RETURN_POINTER(s);
}

/* Appends b's elements to a's. */
static void
state_append(KeysAggState *a, const KeysAggState *b)
{
	const void *keys = b->keys != NULL ? (const void *) b->keys : (const void *) b->lent_keys;
	const void *nulls = b->keys != NULL ? (const void *) b->nulls : (const void *) b->lent_nulls;

	state_reserve(a, b->n);
	if (b->nnulls > 0 && a->nulls == NULL)
		state_start_nulls(a);
	memcpy(a->keys + a->n, keys, sizeof(int64) * b->n);
	if (a->nulls != NULL)
	{
		if (nulls != NULL)
			memcpy(a->nulls + a->n, nulls, b->n);
		else
			memset(a->nulls + a->n, 0, b->n);
	}
	a->n += b->n;
	a->nnulls += b->nnulls;
}

/*
 * Not strict (a combine function of an internal state may not be): a
 * first state is copied into the aggregate's context, since the second
 * may live in a per-tuple one (a deserialized state does).
 */
PG_FUNCTION_INFO_V1(cpht_array_agg_combine);
Datum
cpht_array_agg_combine(PG_FUNCTION_ARGS)
{
	MemoryContext cxt = agg_context(fcinfo, "cpht_array_agg_combine");
	KeysAggState *a = PG_ARGISNULL(0) ? NULL : (KeysAggState *) PG_GETARG_POINTER(0);
	KeysAggState *b = PG_ARGISNULL(1) ? NULL : (KeysAggState *) PG_GETARG_POINTER(1);

	if (b == NULL || b->n == 0)
	{
		if (a == NULL)
			PG_RETURN_NULL();
		PG_RETURN_POINTER(a);
	}
	if (a == NULL)
		a = state_new(cxt, b->n);
	state_append(a, b);
	PG_RETURN_POINTER(a);
}

/*
 * The partial state as bytes: n, the number of NULLs, the n keys, then,
 * when there are NULLs, one byte per element.  Partial states travel only
 * between processes of one server, so the bytes are the machine's own.
 */
#define SERIAL_HEADER (2 * sizeof(int64))

PG_FUNCTION_INFO_V1(cpht_array_agg_serialize);
Datum
cpht_array_agg_serialize(PG_FUNCTION_ARGS)
{
	KeysAggState *s;
	Size		bytes;
	bytea	   *out;
	char	   *p;

	(void) agg_context(fcinfo, "cpht_array_agg_serialize");
	s = (KeysAggState *) PG_GETARG_POINTER(0);
	Assert(s->keys != NULL);
	bytes = VARHDRSZ + SERIAL_HEADER + sizeof(int64) * s->n + (s->nnulls > 0 ? s->n : 0);
	if (!AllocSizeIsValid(bytes))
		too_many();
	out = palloc(bytes);
	SET_VARSIZE(out, bytes);
	p = VARDATA(out);
	memcpy(p, &s->n, sizeof(int64));
	memcpy(p + sizeof(int64), &s->nnulls, sizeof(int64));
	p += SERIAL_HEADER;
	memcpy(p, s->keys, sizeof(int64) * s->n);
	if (s->nnulls > 0)
		memcpy(p + sizeof(int64) * s->n, s->nulls, s->n);
	PG_RETURN_BYTEA_P(out);
}

PG_FUNCTION_INFO_V1(cpht_array_agg_deserialize);
Datum
cpht_array_agg_deserialize(PG_FUNCTION_ARGS)
{
	bytea	   *in;
	const char *p;
	Size		len;
	int64		n;
	int64		nnulls;
	KeysAggState *s;

	(void) agg_context(fcinfo, "cpht_array_agg_deserialize");
	in = PG_GETARG_BYTEA_PP(0);
	p = VARDATA_ANY(in);
	len = VARSIZE_ANY_EXHDR(in);
	if (len < SERIAL_HEADER)
		goto invalid;
	memcpy(&n, p, sizeof(int64));
	memcpy(&nnulls, p + sizeof(int64), sizeof(int64));
	if (n < 0 || n > MAX_ELEMENTS || nnulls < 0 || nnulls > n ||
		len != SERIAL_HEADER + sizeof(int64) * n + (nnulls > 0 ? n : 0))
		goto invalid;
	p += SERIAL_HEADER;
	/* lent: read in place by the combine function (may be unaligned) */
	s = palloc0(sizeof(KeysAggState));
	s->cxt = CurrentMemoryContext;
	s->n = n;
	s->nnulls = nnulls;
	s->lent_keys = p;
	s->lent_nulls = nnulls > 0 ? p + sizeof(int64) * n : NULL;
	PG_RETURN_POINTER(s);

invalid:
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
			 errmsg("invalid cpht_array_agg partial state of %zu bytes", len)));
	PG_RETURN_NULL();			/* not reached */
}

/*
 * The bigint[] of the state's elements, lower bound 1; NULL for no
 * element, as array_agg.  Reads the state only: equal calls of the
 * aggregate in one query share one state and each gets its own array.
 */
PG_FUNCTION_INFO_V1(cpht_array_agg_final);
Datum
cpht_array_agg_final(PG_FUNCTION_ARGS)
{
	KeysAggState *s;
	ArrayType  *result;
	Size		dataoffset;
	Size		bytes;
	bits8	   *bitmap;
	int64	   *out;

	(void) agg_context(fcinfo, "cpht_array_agg_final");
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	s = (KeysAggState *) PG_GETARG_POINTER(0);
	Assert(s->keys != NULL);
	if (s->n == 0)
		PG_RETURN_NULL();

	if (s->nnulls == 0)
	{
		result = cpht_int8_array((int) s->n);
		memcpy(ARR_DATA_PTR(result), s->keys, sizeof(int64) * s->n);
		PG_RETURN_ARRAYTYPE_P(result);
	}

	dataoffset = ARR_OVERHEAD_WITHNULLS(1, s->n);
	bytes = dataoffset + sizeof(int64) * (s->n - s->nnulls);
	if (!AllocSizeIsValid(bytes))
		too_many();
	result = (ArrayType *) palloc0(bytes);
	SET_VARSIZE(result, bytes);
	result->ndim = 1;
	result->dataoffset = (int32) dataoffset;
	result->elemtype = INT8OID;
	ARR_DIMS(result)[0] = (int) s->n;
	ARR_LBOUND(result)[0] = 1;
	bitmap = ARR_NULLBITMAP(result);
	out = (int64 *) ARR_DATA_PTR(result);
	for (int64 i = 0; i < s->n; i++)
	{
		if (s->nulls[i])
			continue;
		bitmap[i / 8] |= (bits8) (1 << (i % 8));
		*out++ = s->keys[i];
	}
	PG_RETURN_ARRAYTYPE_P(result);
}
