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
 *
 * Copies.  The new keys cross from the workers to the leader as the
 * partial state, a bytea made in place in front of a worker's keys; the
 * leader reads each one where it lies in the tuple it received, copies its
 * keys once into a part of their own, and the final function copies the
 * parts once into a result sized exactly: no array of the leader grows by
 * copying, and no key is copied element by element.
 */
#include "postgres.h"

#include "fmgr.h"
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/memutils.h"

#include "errors.h"
#include "stream/stream.h"

/*
 * The new keys sit NEWS_HEAD bytes into their buffer: a bytea's header fits
 * right before them, so a worker's state is serialized where it lies (the
 * partial state is the new keys as a bytea, with no copy made for it).
 */
#define NEWS_HEAD	MAXALIGN(VARHDRSZ)

/* The result's header: a one-dimensional bigint[] without NULLs. */
#define RESULT_HEAD	ARR_OVERHEAD_NONULLS(1)

typedef struct FopNewAggState
{
	CphtBatchStream *stream;	/* NULL: combined from workers' results, or
								 * deserialized */
	MemoryContext cxt;			/* the aggregate's, where the arrays grow */
	uint64	   *batch[2];		/* batch_keys each */
	int			filling;		/* the batch being filled */
	int			n;				/* its keys */
	int			sent;			/* keys of the other one, sent and not
								 * collected */
	char	   *buf;			/* NEWS_HEAD bytes, then capacity keys */
	uint64	   *news;			/* the new keys so far: buf + NEWS_HEAD */
	uint64		nnew;
	uint64		capacity;

	/*
	 * Deserialized: the partial state's keys where they lie, in the input
	 * tuple (valid while it is combined); unaligned where the bytea has a
	 * short header.
	 */
	const char *view;

	/*
	 * Combined: each other state's keys, copied once into a part of exactly
	 * their size (no array grows by copying), and the sum of their counts.
	 * The final function sizes the result once and copies each part once.
	 */
	uint64	  **parts;
	uint64	   *part_keys;
	int			nparts;
	int			maxparts;
	uint64		parts_total;
} FopNewAggState;

/* Room for more new keys: the array doubles, counted against cpht.max_memory. */
static void
news_room(FopNewAggState *s, uint64 more)
{
	uint64		want = s->nnew + more;
	uint64		capacity;

	if (want <= s->capacity)
		return;
	if (want > (MaxAllocHugeSize - NEWS_HEAD) / sizeof(uint64))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many new keys for one cpht_fop_new_agg result")));
	capacity = Max(want, Max(s->capacity * 2, 1024));
	if (s->stream != NULL)
		cpht_batch_stream_reserve(s->stream, (capacity - s->capacity) * sizeof(uint64),
								  "cpht_fop_new_agg new keys");
	s->buf = s->buf == NULL
		? MemoryContextAllocHuge(s->cxt, NEWS_HEAD + capacity * sizeof(uint64))
		: repalloc_huge(s->buf, NEWS_HEAD + capacity * sizeof(uint64));
	s->news = (uint64 *) (s->buf + NEWS_HEAD);
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
		uint64	   *news;
		uint64		nnew = s->nnew;

		/*
		 * Without a branch per key (new and seen keys mix at random): every
		 * key is written at the next free place, which only a new key
		 * takes; one place more than the new keys is room for the last
		 * write.
		 */
		news_room(s, inserted + 1);
		news = s->news;
		for (size_t i = 0; i < nstatus; i++)
		{
			news[nnew] = collected[i];
			nnew += (status[i] == CPHT_PUT);
		}
		if (nnew - s->nnew != inserted)
			elog(ERROR, "cpht_fop_new_agg found " UINT64_FORMAT " new keys in a batch the table counted " UINT64_FORMAT " in",
				 nnew - s->nnew, inserted);
		s->nnew = nnew;
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

/*
 * The keys a state holds, its own and its parts', as one bigint[] sized
 * once: each key is copied once, from where it lies into the result.
 */
PG_FUNCTION_INFO_V1(cpht_fop_new_agg_final);
Datum
cpht_fop_new_agg_final(PG_FUNCTION_ARGS)
{
	FopNewAggState *s;
	ArrayType  *result;
	uint64		total;
	Size		bytes;
	char	   *to;

	/* no rows: NULL, as cpht_fop_new of array_agg over no rows */
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	s = (FopNewAggState *) PG_GETARG_POINTER(0);
	flush(s);
	total = s->nnew + s->parts_total;
	if (total > (uint64) MaxArraySize ||
		total > (MaxAllocSize - RESULT_HEAD) / sizeof(uint64))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many new keys for one array: " UINT64_FORMAT, total),
				 errhint("Use cpht_fop_new_relation, which returns the new keys as rows.")));
	/* as construct_array of no element */
	if (total == 0)
		PG_RETURN_ARRAYTYPE_P(construct_empty_array(INT8OID));

	/*
	 * In the current (output) context: nodeAgg copies a final value that
	 * lies elsewhere, so the result is made here rather than grown in the
	 * aggregate's context.
	 */
	bytes = RESULT_HEAD + total * sizeof(uint64);
	result = (ArrayType *) palloc(bytes);
	memset(result, 0, RESULT_HEAD);
	SET_VARSIZE(result, bytes);
	result->ndim = 1;
	result->dataoffset = 0;		/* no NULLs */
	result->elemtype = INT8OID;
	ARR_DIMS(result)[0] = (int) total;
	ARR_LBOUND(result)[0] = 1;
	to = ARR_DATA_PTR(result);
	if (s->nnew > 0)
	{
		memcpy(to, s->view != NULL ? s->view : (const char *) s->news,
			   s->nnew * sizeof(uint64));
		to += s->nnew * sizeof(uint64);
	}
	for (int i = 0; i < s->nparts; i++)
	{
		memcpy(to, s->parts[i], s->part_keys[i] * sizeof(uint64));
		to += s->part_keys[i] * sizeof(uint64);
	}
	Assert(to == (char *) result + bytes);
	PG_RETURN_ARRAYTYPE_P(result);
}

/*
 * Parallel aggregation (planned only over shared tables: plan/hooks.c).  A
 * worker's keys are all in the table once its state is serialized; the
 * leader gets its new keys: the partial state is a bytea of the new keys
 * (native order, 8 bytes each), made in place in front of them.
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
	if (s->parts != NULL || s->view != NULL)
		elog(ERROR, "cpht_fop_new_agg_serialize called on a combined or deserialized state");
	bytes = s->nnew * sizeof(uint64);
	if (bytes > MaxAllocSize - VARHDRSZ)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many new keys in one parallel worker of cpht_fop_new_agg: " UINT64_FORMAT, s->nnew)));
	if (s->buf == NULL)
	{
		out = palloc(VARHDRSZ);
		SET_VARSIZE(out, VARHDRSZ);
		PG_RETURN_BYTEA_P(out);
	}

	/*
	 * The header goes right before the keys, in the state's own buffer: the
	 * state is done with (READ_WRITE final function, and a serialized state
	 * takes no more rows), and lives as long as the aggregate, longer than
	 * the tuple that carries the bytea.
	 */
	out = (bytea *) (s->buf + NEWS_HEAD - VARHDRSZ);
	SET_VARSIZE(out, VARHDRSZ + bytes);
	PG_RETURN_BYTEA_P(out);
}

/* A read-only view of the partial state: the keys stay in the input tuple. */
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
	s->nnew = bytes / sizeof(uint64);
	s->view = VARDATA_ANY(in);
	PG_RETURN_POINTER(s);
}

/*
 * Not strict: the state is internal, so the first one is made in the
 * aggregate's context here (a deserialized one lives in a per-tuple
 * context).  A state with a stream of its own is flushed first.  The other
 * state's keys are copied once, into a part of their own; nothing grows.
 */
PG_FUNCTION_INFO_V1(cpht_fop_new_agg_combine);
Datum
cpht_fop_new_agg_combine(PG_FUNCTION_ARGS)
{
	MemoryContext aggcontext;
	FopNewAggState *s = PG_ARGISNULL(0) ? NULL : (FopNewAggState *) PG_GETARG_POINTER(0);
	FopNewAggState *other = PG_ARGISNULL(1) ? NULL : (FopNewAggState *) PG_GETARG_POINTER(1);
	const char *from;
	uint64	   *part;

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
	if (other->parts != NULL)
		elog(ERROR, "cpht_fop_new_agg_combine called with a combined state to add");
	if (s == NULL)
	{
		s = MemoryContextAllocZero(aggcontext, sizeof(FopNewAggState));
		s->cxt = aggcontext;
	}
	if (other->nnew == 0)
		PG_RETURN_POINTER(s);
	if (s->nparts == s->maxparts)
	{
		int			more = Max(8, s->maxparts * 2);

		s->parts = s->parts == NULL
			? MemoryContextAlloc(aggcontext, more * sizeof(uint64 *))
			: repalloc(s->parts, more * sizeof(uint64 *));
		s->part_keys = s->part_keys == NULL
			? MemoryContextAlloc(aggcontext, more * sizeof(uint64))
			: repalloc(s->part_keys, more * sizeof(uint64));
		s->maxparts = more;
	}
	from = other->view != NULL ? other->view : (const char *) other->news;
	part = MemoryContextAllocHuge(aggcontext, other->nnew * sizeof(uint64));
	memcpy(part, from, other->nnew * sizeof(uint64));
	s->parts[s->nparts] = part;
	s->part_keys[s->nparts] = other->nnew;
	s->nparts++;
	s->parts_total += other->nnew;
	PG_RETURN_POINTER(s);
}
