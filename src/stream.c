/*
 * stream.c — find-or-put over any number of rows.
 *
 * An array is limited to about 2^26 bigints (array_agg's state passes the
 * 1 GB allocation limit while doubling), so large ingests stream instead:
 *
 *   cpht_fop_agg(handle, key)  aggregate: sends the keys in batches of
 *       cpht.batch_size and returns how many were new;
 *   cpht_fop_rows(handle, NULL::rowtype, query, key_column)  runs the query
 *       through a cursor and returns the rows whose key was new, each new
 *       key's row exactly once, so that
 *       INSERT INTO t SELECT * FROM cpht_fop_rows(h, NULL::t, 'SELECT ...')
 *       loads only new rows.
 *
 * Both overlap the table's work with the executor: batch k runs on a helper
 * thread (and on the GPU for GPU tables) while batch k+1 is collected
 * (cpht_stream_start / cpht_stream_finish).  The stream copies each batch,
 * so a batch in flight never points into memory the executor frees on an
 * error; the next call on the table waits for it.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/tuplestore.h"

#include "cpht_table.h"
#include "errors.h"
#include "handles.h"
#include "stream.h"
#include "txn.h"

int			cpht_batch_size = 1 << 20;

void
cpht_stream_define_gucs(void)
{
	DefineCustomIntVariable("cpht.batch_size",
							"Keys cpht_fop_agg() and cpht_fop_rows() send to a table per batch.",
							"Larger batches use the GPU better; each batch is held twice in memory.",
							&cpht_batch_size,
							1 << 20, 1024, 1 << 26,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);
}

/* Rejects a key outside the table's domain, as the array functions do. */
static inline void
check_key(uint64 key, int key_bits)
{
	if (key_bits < 64 && (key >> key_bits) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("key " INT64_FORMAT " is out of range for a table with key_bits %d",
						(int64) key, key_bits),
				 errhint("Create the table with a larger key_bits.")));
}

/*
 * One stream of batches into a table.  The kernels' stream object is
 * malloc'ed and a helper thread may still be working on its buffers when an
 * ERROR unwinds the statement, so it is closed by a callback of the memory
 * context the caller's state lives in: whether the statement ends normally
 * or by an error, the batch is waited for and the buffers freed.
 */
typedef struct Stream
{
	int32		handle;
	cpht_stream *stream;
	MemoryContextCallback closer;
} Stream;

static void
stream_close_callback(void *arg)
{
	Stream	   *st = arg;

	cpht_stream_close(st->stream);
	st->stream = NULL;
}

static Stream *
stream_open(MemoryContext cxt, CphtHandle *h)
{
	Stream	   *st = MemoryContextAllocZero(cxt, sizeof(Stream));

	st->handle = h->handle;
	st->stream = cpht_stream_open(h->table);
	if (st->stream == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	st->closer.func = stream_close_callback;
	st->closer.arg = st;
	MemoryContextRegisterResetCallback(cxt, &st->closer);
	return st;
}

/*
 * Hands a batch (n may be 0) to the table and collects the stream's
 * previous one: its status through status and nstatus when asked for, and
 * how many keys it inserted as the result.
 */
static uint64
batch_swap(Stream *st, const uint64 *keys, int n, const uint8 **status, size_t *nstatus)
{
	CphtHandle *h = cpht_handles_get(st->handle);
	uint64		inserted = 0;
	const uint8 *done;
	size_t		got;

	cpht_txn_before_write(h);
	cpht_check_status(cpht_stream_finish(st->stream, &done, &got, &inserted),
					  st->handle, cpht_table_error(h->table));
	if (status)
	{
		*status = done;
		*nstatus = got;
	}
	if (n > 0)
		cpht_check_status(cpht_stream_start(st->stream, keys, (size_t) n),
						  st->handle, cpht_table_error(h->table));
	return inserted;
}

/* ---- cpht_fop_agg ------------------------------------------------------- */

typedef struct FopAggState
{
	Stream	   *stream;
	int			key_bits;
	int			n;
	int			cap;
	uint64		inserted;
	uint64	   *keys;
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
		CphtHandle *h;

		if (PG_ARGISNULL(1))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("handle must not be null")));
		h = cpht_handles_get(PG_GETARG_INT32(1));
		state = MemoryContextAllocZero(aggcontext, sizeof(FopAggState));
		state->stream = stream_open(aggcontext, h);
		state->key_bits = h->key_bits;
		state->cap = cpht_batch_size;
		state->keys = MemoryContextAllocHuge(aggcontext, sizeof(uint64) * state->cap);
	}
	else
	{
		state = (FopAggState *) PG_GETARG_POINTER(0);
		if (PG_ARGISNULL(1) || PG_GETARG_INT32(1) != state->stream->handle)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("cpht_fop_agg must get the same handle in every row of a group")));
	}

	/* Like count(key), the aggregate skips NULL keys. */
	if (!PG_ARGISNULL(2))
	{
		uint64		key = (uint64) PG_GETARG_INT64(2);

		check_key(key, state->key_bits);
		state->keys[state->n++] = key;
		if (state->n == state->cap)
		{
			state->inserted += batch_swap(state->stream, state->keys, state->n, NULL, NULL);
			state->n = 0;
		}
	}
	PG_RETURN_POINTER(state);
}

PG_FUNCTION_INFO_V1(cpht_fop_agg_final);
Datum
cpht_fop_agg_final(PG_FUNCTION_ARGS)
{
	FopAggState *state;

	if (PG_ARGISNULL(0))
		PG_RETURN_INT64(0);		/* no rows at all */
	state = (FopAggState *) PG_GETARG_POINTER(0);

	/* Send the last partial batch, then collect it too. */
	state->inserted += batch_swap(state->stream, state->keys, state->n, NULL, NULL);
	state->n = 0;
	state->inserted += batch_swap(state->stream, NULL, 0, NULL, NULL);
	PG_RETURN_INT64((int64) state->inserted);
}

/* ---- cpht_fop_rows ------------------------------------------------------ */

/* Rows of one fetched batch and their keys. */
typedef struct RowBatch
{
	SPITupleTable *tuples;
	uint64	   *keys;
	int			n;
} RowBatch;

/*
 * Emit the rows of a batch whose key the table reported new.  The query's
 * columns go to the row type's live columns in order; dropped columns of
 * the row type (still in its descriptor) get NULLs.
 */
static void
emit_new_rows(ReturnSetInfo *rsinfo, const RowBatch *b, const uint8 *status, size_t nstatus)
{
	TupleDesc	in,
				out = rsinfo->setDesc;
	Datum	   *qvalues,
			   *values;
	bool	   *qnulls,
			   *nulls;

	if (b->tuples == NULL || b->n == 0)
		return;
	Assert(nstatus == (size_t) b->n);
	in = b->tuples->tupdesc;
	qvalues = palloc(sizeof(Datum) * in->natts);
	qnulls = palloc(sizeof(bool) * in->natts);
	values = palloc(sizeof(Datum) * out->natts);
	nulls = palloc(sizeof(bool) * out->natts);
	for (int i = 0; i < b->n; i++)
	{
		int			q = 0;

		if (status[i] != CPHT_PUT)
			continue;
		heap_deform_tuple(b->tuples->vals[i], in, qvalues, qnulls);
		for (int a = 0; a < out->natts; a++)
		{
			if (TupleDescAttr(out, a)->attisdropped)
			{
				values[a] = (Datum) 0;
				nulls[a] = true;
				continue;
			}
			values[a] = qvalues[q];
			nulls[a] = qnulls[q++];
		}
		tuplestore_putvalues(rsinfo->setResult, out, values, nulls);
	}
	pfree(qvalues);
	pfree(qnulls);
	pfree(values);
	pfree(nulls);
}

/* The query must give the row type's live columns, in order. */
static void
check_row_type(TupleDesc query, TupleDesc result)
{
	int			q = 0;
	bool		same = true;

	for (int a = 0; same && a < result->natts; a++)
	{
		if (TupleDescAttr(result, a)->attisdropped)
			continue;
		same = q < query->natts &&
			TupleDescAttr(query, q)->atttypid == TupleDescAttr(result, a)->atttypid;
		q++;
	}
	if (!same || q != query->natts)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("query columns do not match the row type"),
				 errdetail("The query must return the columns of the row type, in order and of the same types."),
				 errhint("Select the columns explicitly, for example SELECT * FROM staging.")));
}

PG_FUNCTION_INFO_V1(cpht_fop_rows);
Datum
cpht_fop_rows(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int32		handle;
	char	   *query;
	char	   *key_column;
	int			key_bits;
	MemoryContext outer = CurrentMemoryContext;
	Stream	   *stream;
	RowBatch	batch[2] = {{0}};
	SPIPlanPtr	plan;
	Portal		portal;
	int			attno = 0;
	int			cur = 0;

	/* Not STRICT, since the row type is given as a typed NULL. */
	if (PG_ARGISNULL(0) || PG_ARGISNULL(2) || PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("handle, query and key_column of cpht_fop_rows must not be null")));
	handle = PG_GETARG_INT32(0);
	query = text_to_cstring(PG_GETARG_TEXT_PP(2));
	key_column = text_to_cstring(PG_GETARG_TEXT_PP(3));
	key_bits = cpht_handles_get(handle)->key_bits;
	stream = stream_open(outer, cpht_handles_get(handle));

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	plan = SPI_prepare(query, 0, NULL);
	if (plan == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_SYNTAX_ERROR),
				 errmsg("could not prepare the query of cpht_fop_rows: %s",
						SPI_result_code_string(SPI_result))));
	if (!SPI_is_cursor_plan(plan))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the query of cpht_fop_rows must return rows")));
	portal = SPI_cursor_open(NULL, plan, NULL, NULL, true);

	for (int b = 0; b < 2; b++)
		batch[b].keys = MemoryContextAllocHuge(outer, sizeof(uint64) * cpht_batch_size);

	for (;;)
	{
		RowBatch   *b = &batch[cur];
		const uint8 *status;
		size_t		nstatus;

		CHECK_FOR_INTERRUPTS();
		SPI_cursor_fetch(portal, true, cpht_batch_size);
		b->tuples = SPI_tuptable;
		b->n = (int) SPI_processed;
		if (attno == 0)
		{
			attno = SPI_fnumber(b->tuples->tupdesc, key_column);
			if (attno <= 0)
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_COLUMN),
						 errmsg("the query of cpht_fop_rows has no column \"%s\"", key_column)));
			if (SPI_gettypeid(b->tuples->tupdesc, attno) != INT8OID)
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("key column \"%s\" must be of type bigint", key_column)));
			check_row_type(b->tuples->tupdesc, rsinfo->setDesc);
		}
		for (int i = 0; i < b->n; i++)
		{
			bool		isnull;
			Datum		d = SPI_getbinval(b->tuples->vals[i], b->tuples->tupdesc, attno, &isnull);

			if (isnull)
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("key column \"%s\" is null in row %d of a batch", key_column, i + 1),
						 errhint("Filter out rows without a key, for example WHERE %s IS NOT NULL.", key_column)));
			b->keys[i] = (uint64) DatumGetInt64(d);
			check_key(b->keys[i], key_bits);
		}

		/* Start this batch, then emit the rows of the one before it. */
		batch_swap(stream, b->keys, b->n, &status, &nstatus);
		emit_new_rows(rsinfo, &batch[1 - cur], status, nstatus);
		if (batch[1 - cur].tuples)
			SPI_freetuptable(batch[1 - cur].tuples);
		batch[1 - cur].tuples = NULL;
		if (b->n == 0)
			break;
		cur = 1 - cur;
	}
	SPI_cursor_close(portal);
	SPI_finish();
	return (Datum) 0;
}
