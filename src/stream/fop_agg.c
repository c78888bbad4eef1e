/*
 * fop_agg.c — the cpht_fop_agg aggregate: cpht_fop_agg(handle, key) sends
 * the keys of its group to the table in batches of cpht.batch_size through
 * a stream of batches (batches.c) and returns how many were new.
 *
 * It lives in stream/ rather than with the other SQL functions in api/: the
 * planner hooks (plan/hooks.c) recognise the aggregate by the address of
 * its transition function, and plan/ may include stream/'s door but not
 * api/'s (cpht_fop_new_agg, fop_new_agg.c, is recognised the same way).
 */
#include "postgres.h"

#include "fmgr.h"

#include "stream/stream.h"

typedef struct FopAggState
{
	CphtBatchStream *stream;
	int			n;				/* keys collected, < stream->batch_keys */
	uint64		inserted;
	uint64	   *keys;			/* stream->batch_keys of them */
} FopAggState;

PG_FUNCTION_INFO_V1(cpht_fop_agg_step);
Datum
cpht_fop_agg_step(PG_FUNCTION_ARGS)
{
	MemoryContext aggcontext;
	FopAggState *state;

	if (!AggCheckCallContext(fcinfo, &aggcontext))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cpht_fop_agg_step called in a non-aggregate context")));

	if (PG_ARGISNULL(0))
	{
		if (PG_ARGISNULL(1))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("handle must not be null")));
		state = MemoryContextAllocZero(aggcontext, sizeof(FopAggState));
		state->stream = cpht_batch_stream_begin(aggcontext, PG_GETARG_INT32(1), sizeof(uint64));
		state->keys = MemoryContextAllocHuge(aggcontext, sizeof(uint64) * state->stream->batch_keys);
	}
	else
	{
		state = (FopAggState *) PG_GETARG_POINTER(0);
		if (PG_ARGISNULL(1))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("handle must not be null")));
		if (PG_GETARG_INT32(1) != state->stream->handle)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("cpht_fop_agg must get the same handle in every row of a group")));
	}

	/* Like count(key), the aggregate skips NULL keys. */
	if (!PG_ARGISNULL(2))
	{
		uint64		key = (uint64) PG_GETARG_INT64(2);

		cpht_check_key(key, state->stream->key_bits);
		state->keys[state->n++] = key;
		if (state->n == state->stream->batch_keys)
		{
			state->inserted += cpht_batch_stream_swap(state->stream, state->keys, state->n, NULL, NULL);
			state->n = 0;
		}
	}
	PG_RETURN_POINTER(state);
}

/*
 * Sends a state's last partial batch and collects it: afterwards every key
 * the state saw is in the table and counted in inserted.  A state combined
 * from parallel workers' counts has no stream.
 */
static void
fop_agg_flush(FopAggState *state)
{
	if (state->stream == NULL)
		return;
	state->inserted += cpht_batch_stream_swap(state->stream, state->keys, state->n, NULL, NULL);
	state->n = 0;
	state->inserted += cpht_batch_stream_swap(state->stream, NULL, 0, NULL, NULL);
	cpht_batch_stream_report(state->stream, "cpht_fop_agg");
}

PG_FUNCTION_INFO_V1(cpht_fop_agg_final);
Datum
cpht_fop_agg_final(PG_FUNCTION_ARGS)
{
	FopAggState *state;

	if (PG_ARGISNULL(0))
		PG_RETURN_INT64(0);		/* no rows at all */
	state = (FopAggState *) PG_GETARG_POINTER(0);
	fop_agg_flush(state);
	PG_RETURN_INT64((int64) state->inserted);
}

/*
 * Parallel aggregation (the planner allows it for shared tables only:
 * parallel.c).  A worker's partial state is serialized when its rows are
 * done: its keys are sent to the table then, so what goes to the leader is
 * only the count of new keys.  Workers share the leader's transaction, so
 * a key two workers both meet is new for exactly one of them, and the sum
 * of the counts is the serial answer.
 */
PG_FUNCTION_INFO_V1(cpht_fop_agg_serialize);
Datum
cpht_fop_agg_serialize(PG_FUNCTION_ARGS)
{
	FopAggState *state = (FopAggState *) PG_GETARG_POINTER(0);
	bytea	   *out;

	if (!AggCheckCallContext(fcinfo, NULL))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cpht_fop_agg_serialize called in a non-aggregate context")));
	fop_agg_flush(state);
	out = palloc(VARHDRSZ + sizeof(int64));
	SET_VARSIZE(out, VARHDRSZ + sizeof(int64));
	memcpy(VARDATA(out), &state->inserted, sizeof(int64));
	PG_RETURN_BYTEA_P(out);
}

PG_FUNCTION_INFO_V1(cpht_fop_agg_deserialize);
Datum
cpht_fop_agg_deserialize(PG_FUNCTION_ARGS)
{
	bytea	   *in = PG_GETARG_BYTEA_PP(0);
	FopAggState *state;

	if (!AggCheckCallContext(fcinfo, NULL))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cpht_fop_agg_deserialize called in a non-aggregate context")));
	if (VARSIZE_ANY_EXHDR(in) != sizeof(int64))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("invalid cpht_fop_agg partial state of %d bytes",
						(int) VARSIZE_ANY_EXHDR(in))));
	state = palloc0(sizeof(FopAggState));
	memcpy(&state->inserted, VARDATA_ANY(in), sizeof(int64));
	PG_RETURN_POINTER(state);
}

/*
 * Not strict: the state is internal, so a first state must be copied into
 * the aggregate's context here (the deserialized one lives in a per-tuple
 * context).  A state with a stream of its own (partial aggregation in one
 * process, without serialization) is flushed first.
 */
PG_FUNCTION_INFO_V1(cpht_fop_agg_combine);
Datum
cpht_fop_agg_combine(PG_FUNCTION_ARGS)
{
	MemoryContext aggcontext;
	FopAggState *state = PG_ARGISNULL(0) ? NULL : (FopAggState *) PG_GETARG_POINTER(0);
	FopAggState *other = PG_ARGISNULL(1) ? NULL : (FopAggState *) PG_GETARG_POINTER(1);

	if (!AggCheckCallContext(fcinfo, &aggcontext))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cpht_fop_agg_combine called in a non-aggregate context")));
	if (other == NULL)
	{
		if (state == NULL)
			PG_RETURN_NULL();
		PG_RETURN_POINTER(state);
	}
	fop_agg_flush(other);
	if (state == NULL)
		state = MemoryContextAllocZero(aggcontext, sizeof(FopAggState));
	state->inserted += other->inserted;
	PG_RETURN_POINTER(state);
}
