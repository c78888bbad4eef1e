/*
 * fop_new_agg.c — the aggregate cpht_fop_new_agg(handle, key): find-or-put
 * of every key of the group, streamed in batches as cpht_fop_agg does, that
 * returns the keys that were new as a bigint[] (NULL over no rows).
 *
 * Why.  cpht_fop_new(h, array_agg(id)) gathers every key into one array in
 * one process before the table sees any of them.  Over a shared table this
 * aggregate runs in parallel workers instead: each sends its rows' keys to
 * the table as they come and hands the leader only the keys that were new
 * (serialize, deserialize, combine).  The planner puts it in the place of
 * cpht_fop_new(h, array_agg(x)) over a shared table (plan/array_agg.c), and
 * it can be called by name.
 *
 * Same answer.  Every key of the group goes to the table once; a key that
 * appears several times, or in several workers, is new for exactly one of
 * them (the workers share the leader's transaction), so the result holds
 * each new key once, as cpht_fop_new's does; its order, like array_agg's
 * without ORDER BY, is unspecified.  A NULL key is an error, as a NULL
 * element of cpht_fop_new's array is.  Unlike one call of cpht_fop_new, the
 * keys go to the table batch by batch: a statement that fails half way has
 * stored the batches before the failure in a table that is not
 * transactional (a transactional one undoes them with the transaction).
 *
 * Memory.  A state holds two batches of keys (the one the table is working
 * on and the one being filled; a batch's status names the keys of the batch
 * sent before it) and the new keys so far, all counted against
 * cpht.max_memory; the result is limited as any array is (1 GB).
 */
#include "postgres.h"

#include "fmgr.h"
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/memutils.h"

#include "errors.h"
#include "stream/stream.h"

typedef struct FopNewAggState
{
	CphtBatchStream *stream;	/* NULL: combined from workers' results */
	MemoryContext cxt;			/* the aggregate's, where the arrays grow */
	uint64	   *batch[2];		/* batch_keys each */
	int			filling;		/* the batch being filled */
	int			n;				/* its keys */
	int			sent;			/* keys of the other one, sent and not
								 * collected */
	uint64	   *news;			/* the new keys so far */
	uint64		nnew;
	uint64		capacity;
	uint64		reserved;		/* bytes of news counted (without a stream:
								 * nothing is counted) */
} FopNewAggState;

/* Room for more new keys: the array doubles, counted against cpht.max_memory. */
static void
news_room(FopNewAggState *s, uint64 more)
{
	uint64		want = s->nnew + more;
	uint64		capacity;

	if (want <= s->capacity)
		return;
	if (want > MaxAllocHugeSize / sizeof(uint64))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many new keys for one cpht_fop_new_agg result")));
	capacity = Max(want, Max(s->capacity * 2, 1024));
	if (s->stream != NULL)
		cpht_batch_stream_reserve(s->stream, (capacity - s->capacity) * sizeof(uint64),
								  "cpht_fop_new_agg new keys");
	s->news = s->news == NULL
		? MemoryContextAllocHuge(s->cxt, capacity * sizeof(uint64))
		: repalloc_huge(s->news, capacity * sizeof(uint64));
	s->capacity = capacity;
}

/*
 * Hands the batch being filled to the table (n may be 0: then only the one
 * sent before is collected) and keeps the new keys of the one collected.
 */
static void
swap(FopNewAggState *s)
{
	const uint8 *status = NULL;
	size_t		nstatus = 0;
	const uint64 *collected = s->batch[1 - s->filling];
	uint64		inserted;

	inserted = cpht_batch_stream_swap(s->stream, s->batch[s->filling], s->n, &status, &nstatus);
	if (nstatus != (size_t) s->sent)
		elog(ERROR, "cpht_fop_new_agg collected %zu statuses for a batch of %d keys", nstatus, s->sent);
	if (inserted > 0)
	{
		news_room(s, inserted);
		for (size_t i = 0; i < nstatus; i++)
			if (status[i] == CPHT_PUT)
				s->news[s->nnew++] = collected[i];
	}
	s->sent = s->n;
	s->n = 0;
	s->filling = 1 - s->filling;
}

/* Every key seen is in the table and its answer in news. */
static void
flush(FopNewAggState *s)
{
	if (s->stream == NULL)
		return;
	swap(s);					/* the last partial batch */
	swap(s);					/* its answer */
	cpht_batch_stream_report(s->stream, "cpht_fop_new_agg");
}

PG_FUNCTION_INFO_V1(cpht_fop_new_agg_step);
Datum
cpht_fop_new_agg_step(PG_FUNCTION_ARGS)
{
	MemoryContext aggcontext;
	FopNewAggState *s;

	if (!AggCheckCallContext(fcinfo, &aggcontext))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cpht_fop_new_agg_step called in a non-aggregate context")));
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("handle must not be null")));
	if (PG_ARGISNULL(0))
	{
		s = MemoryContextAllocZero(aggcontext, sizeof(FopNewAggState));
		s->cxt = aggcontext;
		/* two batches of keys the state holds, next to the stream's own */
		s->stream = cpht_batch_stream_begin(aggcontext, PG_GETARG_INT32(1), 2 * sizeof(uint64));
		s->batch[0] = MemoryContextAllocHuge(aggcontext, sizeof(uint64) * s->stream->batch_keys);
		s->batch[1] = MemoryContextAllocHuge(aggcontext, sizeof(uint64) * s->stream->batch_keys);
	}
	else
	{
		s = (FopNewAggState *) PG_GETARG_POINTER(0);
		if (PG_GETARG_INT32(1) != s->stream->handle)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("cpht_fop_new_agg must get the same handle in every row of a group")));
	}
	/* as a NULL element of cpht_fop_new's array */
	if (PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("keys must not be null"),
				 errhint("Filter out rows without a key, for example WHERE id IS NOT NULL.")));
	{
		uint64		key = (uint64) PG_GETARG_INT64(2);

		cpht_check_key(key, s->stream->key_bits);
		s->batch[s->filling][s->n++] = key;
		if (s->n == s->stream->batch_keys)
			swap(s);
	}
	PG_RETURN_POINTER(s);
}

PG_FUNCTION_INFO_V1(cpht_fop_new_agg_final);
Datum
cpht_fop_new_agg_final(PG_FUNCTION_ARGS)
{
	FopNewAggState *s;
	ArrayType  *result;

	/* no rows: NULL, as cpht_fop_new of array_agg over no rows */
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	s = (FopNewAggState *) PG_GETARG_POINTER(0);
	flush(s);
	if (s->nnew > (uint64) MaxArraySize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many new keys for one array: " UINT64_FORMAT, s->nnew),
				 errhint("Use cpht_fop_new_relation, which returns the new keys as rows.")));
	result = construct_array((Datum *) s->news, (int) s->nnew, INT8OID, sizeof(int64),
							 FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
	PG_RETURN_ARRAYTYPE_P(result);
}

/*
 * Parallel aggregation (planned only over shared tables: plan/hooks.c).  A
 * worker's keys are all in the table once its state is serialized; the
 * leader gets its new keys.
 */
PG_FUNCTION_INFO_V1(cpht_fop_new_agg_serialize);
Datum
cpht_fop_new_agg_serialize(PG_FUNCTION_ARGS)
{
	FopNewAggState *s = (FopNewAggState *) PG_GETARG_POINTER(0);
	Size		bytes;
	bytea	   *out;

	if (!AggCheckCallContext(fcinfo, NULL))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cpht_fop_new_agg_serialize called in a non-aggregate context")));
	flush(s);
	bytes = s->nnew * sizeof(uint64);
	if (bytes > MaxAllocSize - VARHDRSZ)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many new keys in one parallel worker of cpht_fop_new_agg: " UINT64_FORMAT, s->nnew)));
	out = palloc(VARHDRSZ + bytes);
	SET_VARSIZE(out, VARHDRSZ + bytes);
	if (bytes > 0)
		memcpy(VARDATA(out), s->news, bytes);
	PG_RETURN_BYTEA_P(out);
}

PG_FUNCTION_INFO_V1(cpht_fop_new_agg_deserialize);
Datum
cpht_fop_new_agg_deserialize(PG_FUNCTION_ARGS)
{
	bytea	   *in = PG_GETARG_BYTEA_PP(0);
	Size		bytes = VARSIZE_ANY_EXHDR(in);
	FopNewAggState *s;

	if (!AggCheckCallContext(fcinfo, NULL))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cpht_fop_new_agg_deserialize called in a non-aggregate context")));
	if (bytes % sizeof(uint64) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("invalid cpht_fop_new_agg partial state of %zu bytes", bytes)));
	s = palloc0(sizeof(FopNewAggState));
	s->cxt = CurrentMemoryContext;
	s->nnew = s->capacity = bytes / sizeof(uint64);
	if (bytes > 0)
	{
		s->news = palloc(bytes);
		memcpy(s->news, VARDATA_ANY(in), bytes);
	}
	PG_RETURN_POINTER(s);
}

/*
 * Not strict: the state is internal, so the first one is made in the
 * aggregate's context here (a deserialized one lives in a per-tuple
 * context).  A state with a stream of its own is flushed first.
 */
PG_FUNCTION_INFO_V1(cpht_fop_new_agg_combine);
Datum
cpht_fop_new_agg_combine(PG_FUNCTION_ARGS)
{
	MemoryContext aggcontext;
	FopNewAggState *s = PG_ARGISNULL(0) ? NULL : (FopNewAggState *) PG_GETARG_POINTER(0);
	FopNewAggState *other = PG_ARGISNULL(1) ? NULL : (FopNewAggState *) PG_GETARG_POINTER(1);

	if (!AggCheckCallContext(fcinfo, &aggcontext))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cpht_fop_new_agg_combine called in a non-aggregate context")));
	if (other == NULL)
	{
		if (s == NULL)
			PG_RETURN_NULL();
		PG_RETURN_POINTER(s);
	}
	flush(other);
	if (s == NULL)
	{
		s = MemoryContextAllocZero(aggcontext, sizeof(FopNewAggState));
		s->cxt = aggcontext;
	}
	if (other->nnew > 0)
	{
		news_room(s, other->nnew);
		memcpy(s->news + s->nnew, other->news, other->nnew * sizeof(uint64));
		s->nnew += other->nnew;
	}
	PG_RETURN_POINTER(s);
}
