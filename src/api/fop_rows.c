/*
 * fop_rows.c — cpht_fop_rows(handle, NULL::rowtype, query, key_column):
 * runs a SELECT through a cursor and returns the rows whose key was new,
 * each new key's row exactly once, so that
 *     INSERT INTO t SELECT * FROM cpht_fop_rows(h, NULL::t, 'SELECT ...')
 * loads only new rows.
 *
 * Batches.  Rows are fetched in chunks into a batch until the batch holds
 * cpht.batch_size keys or its rows take cpht.batch_memory, whichever comes
 * first; the batch's keys then go to the table (stream/batches.c) while the next
 * batch is fetched, so at most two batches of rows are held.  Both
 * settings are read once, when the call starts.
 *
 * Row types.  The rows returned must be rows of the row type as an INSERT
 * into it would store them, because they usually are inserted and the
 * executor does not check a function's result against typmods or domain
 * constraints.  So each query column goes through the same assignment
 * coercion an INSERT applies (coerce_to_target_type with
 * COERCION_ASSIGNMENT: length checks of varchar(n) and char(n), rounding
 * and overflow checks of numeric(p,s), domain constraints), built once per
 * call and only for the columns that need it, and a row type that is a
 * domain over a composite type has its constraints checked per row.  A
 * column with no assignment cast to its row type column is 42804.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/parsenodes.h"
#include "optimizer/optimizer.h"
#include "parser/parse_coerce.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/plancache.h"
#include "utils/tuplestore.h"

#include "cpht_table.h"
#include "session/session.h"
#include "stream/stream.h"

/* Rows of the first chunk, before the width of the rows is known. */
#define FIRST_CHUNK_ROWS 16

/* The rows of one batch (in the SPI tuple tables of its chunks) and their
 * keys. */
typedef struct RowBatch
{
	SPITupleTable **chunks;
	int			nchunks;
	int			maxchunks;
	uint64	   *keys;			/* CphtBatchStream.batch_keys of them */
	int			n;				/* rows, and keys */
	uint64		bytes;			/* memory of the rows, counted in the stream */
} RowBatch;

/* How query columns become row type columns. */
typedef struct RowCoercion
{
	TupleDesc	out;			/* the row type's descriptor */
	int		   *query_col;		/* per row type column: query column, -1 if dropped */
	ExprState **coerce;			/* per row type column: NULL if none needed */
	ExprContext *econtext;		/* runs the coercions; reset per row */
	Oid			domain;			/* the row type if a domain, else InvalidOid */
	void	   *domain_extra;	/* domain_check's cache */
	MemoryContext cxt;			/* lives as long as the call */
} RowCoercion;

/* Whether a query or any query inside it has a locking clause. */
static bool
locks_rows(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Query))
	{
		if (((Query *) node)->rowMarks != NIL)
			return true;
		return query_tree_walker((Query *) node, locks_rows, context, 0);
	}
	return expression_tree_walker(node, locks_rows, context);
}

/*
 * Only a plain SELECT may run: a data-modifying statement, a locking clause
 * (FOR UPDATE and its kin) or a utility statement would change the database
 * from a query that is meant to read it.
 */
static void
check_is_select(SPIPlanPtr plan)
{
	List	   *sources = SPI_plan_get_plan_sources(plan);
	const char *why = NULL;

	/* '', a comment or ';' alone: nothing to run */
	if (sources == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the query of cpht_fop_rows is empty"),
				 errdetail("It holds no statement."),
				 errhint("Give a query that only reads, for example SELECT * FROM staging.")));
	if (list_length(sources) != 1)
		why = "It holds more than one statement.";
	else
	{
		CachedPlanSource *source = linitial(sources);
		ListCell   *lc;

		foreach(lc, source->query_list)
		{
			Query	   *q = lfirst_node(Query, lc);

			if (q->utilityStmt != NULL && IsA(q->utilityStmt, CreateTableAsStmt))
				why = "It creates a table (SELECT INTO or CREATE TABLE AS).";
			else if (q->commandType != CMD_SELECT || q->utilityStmt != NULL)
			{
				const char *tag = GetCommandTagName(source->commandTag);

				why = psprintf("It is %s %s statement.", strchr("AEIOU", tag[0]) ? "an" : "a", tag);
			}
			else if (q->hasModifyingCTE)
				why = "It holds a data-modifying statement in WITH.";
			else if (locks_rows((Node *) q, NULL))
				why = "It locks rows (FOR UPDATE, FOR SHARE and the like).";
			if (why)
				break;
		}
		if (source->query_list == NIL)
			why = "It is empty.";
	}
	if (why)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the query of cpht_fop_rows must be a SELECT"),
				 errdetail("%s", why),
				 errhint("Give a query that only reads, for example SELECT * FROM staging.")));
}

/*
 * The query's columns against the row type's live columns, in order: the
 * assignment coercion of each, or 42804.
 */
static RowCoercion *
coercion_build(MemoryContext cxt, TupleDesc query, TupleDesc out, Oid rowtype)
{
	MemoryContext old = MemoryContextSwitchTo(cxt);
	RowCoercion *rc = palloc0(sizeof(RowCoercion));
	int			q = 0;
	int			live = 0;

	rc->cxt = cxt;
	rc->out = out;
	rc->query_col = palloc(sizeof(int) * out->natts);
	rc->coerce = palloc0(sizeof(ExprState *) * out->natts);
	for (int a = 0; a < out->natts; a++)
		if (!TupleDescAttr(out, a)->attisdropped)
			live++;
	if (live != query->natts)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("query columns do not match the row type"),
				 errdetail_plural("The query returns %d column, the row type has %d.",
								  "The query returns %d columns, the row type has %d.",
								  query->natts, query->natts, live),
				 errhint("Select the columns of the row type, in order, for example SELECT * FROM staging.")));

	for (int a = 0; a < out->natts; a++)
	{
		Form_pg_attribute to = TupleDescAttr(out, a);
		Form_pg_attribute from;
		CaseTestExpr *input;
		Node	   *expr;

		if (to->attisdropped)
		{
			rc->query_col[a] = -1;
			continue;
		}
		from = TupleDescAttr(query, q);
		rc->query_col[a] = q++;

		/* The value to convert, as coerce_to_target_type sees it. */
		input = makeNode(CaseTestExpr);
		input->typeId = from->atttypid;
		input->typeMod = from->atttypmod;
		input->collation = from->attcollation;
		expr = coerce_to_target_type(NULL, (Node *) input, from->atttypid,
									 to->atttypid, to->atttypmod,
									 COERCION_ASSIGNMENT, COERCE_IMPLICIT_CAST, -1);
		/* a scalar row type (NULL::bigint) has one column, without a name */
		if (expr == NULL && !type_is_rowtype(rowtype))
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("query column %d is of type %s, which cannot be returned as the row type %s",
							q, format_type_with_typemod(from->atttypid, from->atttypmod),
							format_type_be(rowtype)),
					 errhint("Give the row type of the query's rows, for example NULL::staging, or cast the column in the query.")));
		if (expr == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("query column %d is of type %s, which cannot be stored in column \"%s\" of type %s",
							q, format_type_with_typemod(from->atttypid, from->atttypmod),
							NameStr(to->attname), format_type_with_typemod(to->atttypid, to->atttypmod)),
					 errhint("Select the columns of the row type, in order, or cast the column in the query.")));
		if (expr != (Node *) input)
			rc->coerce[a] = ExecInitExpr(expression_planner((Expr *) expr), NULL);
	}
	rc->econtext = CreateStandaloneExprContext();
	rc->domain = get_typtype(rowtype) == TYPTYPE_DOMAIN ? rowtype : InvalidOid;
	MemoryContextSwitchTo(old);
	return rc;
}

/* Emits the rows of a batch whose key the table reported new. */
static void
emit_new_rows(ReturnSetInfo *rsinfo, RowCoercion *rc, const RowBatch *b,
			  const uint8 *status, size_t nstatus)
{
	TupleDesc	out = rc->out;
	Datum	   *qvalues = NULL,
			   *values;
	bool	   *qnulls = NULL,
			   *nulls;
	int			i = 0;

	if (b->n == 0)
		return;
	Assert(nstatus == (size_t) b->n);
	values = palloc(sizeof(Datum) * out->natts);
	nulls = palloc(sizeof(bool) * out->natts);
	for (int c = 0; c < b->nchunks; c++)
	{
		SPITupleTable *chunk = b->chunks[c];
		TupleDesc	in = chunk->tupdesc;

		if (qvalues == NULL)
		{
			qvalues = palloc(sizeof(Datum) * in->natts);
			qnulls = palloc(sizeof(bool) * in->natts);
		}
		for (uint64 r = 0; r < chunk->numvals; r++, i++)
		{
			MemoryContext old;

			if (status[i] != CPHT_PUT)
				continue;
			heap_deform_tuple(chunk->vals[r], in, qvalues, qnulls);
			old = MemoryContextSwitchTo(rc->econtext->ecxt_per_tuple_memory);
			for (int a = 0; a < out->natts; a++)
			{
				int			q = rc->query_col[a];

				if (q < 0)
				{
					values[a] = (Datum) 0;
					nulls[a] = true;
				}
				else if (rc->coerce[a] == NULL)
				{
					values[a] = qvalues[q];
					nulls[a] = qnulls[q];
				}
				else
				{
					rc->econtext->caseValue_datum = qvalues[q];
					rc->econtext->caseValue_isNull = qnulls[q];
					values[a] = ExecEvalExpr(rc->coerce[a], rc->econtext, &nulls[a]);
				}
			}
			if (OidIsValid(rc->domain))
			{
				HeapTuple	row = heap_form_tuple(out, values, nulls);

				domain_check(HeapTupleGetDatum(row), false, rc->domain,
							 &rc->domain_extra, rc->cxt);
			}
			MemoryContextSwitchTo(old);
			tuplestore_putvalues(rsinfo->setResult, out, values, nulls);
			ResetExprContext(rc->econtext);
		}
	}
	Assert(i == b->n);
	if (qvalues)
	{
		pfree(qvalues);
		pfree(qnulls);
	}
	pfree(values);
	pfree(nulls);
}

/* Frees a batch's rows and gives their memory back to cpht.max_memory. */
static void
batch_clear(CphtBatchStream *stream, RowBatch *b)
{
	for (int c = 0; c < b->nchunks; c++)
		SPI_freetuptable(b->chunks[c]);
	b->nchunks = 0;
	b->n = 0;
	cpht_batch_stream_release(stream, b->bytes);
	b->bytes = 0;
}

/* Checks the key column, once, on the first chunk's descriptor. */
static int
key_column_number(TupleDesc query, const char *key_column)
{
	int			attno = SPI_fnumber(query, key_column);

	if (attno <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("the query of cpht_fop_rows has no column \"%s\"", key_column)));
	/* bigint, or a domain over it: the values are bigints either way */
	if (getBaseType(SPI_gettypeid(query, attno)) != INT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("key column \"%s\" must be of type bigint", key_column)));
	return attno;
}

PG_FUNCTION_INFO_V1(cpht_fop_rows);
Datum
cpht_fop_rows(PG_FUNCTION_ARGS)
{
	bool		began;
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int32		handle;
	char	   *query;
	char	   *key_column;
	MemoryContext outer = CurrentMemoryContext;
	CphtBatchStream *stream;
	RowCoercion *coercion = NULL;
	RowBatch	batch[2] = {{0}};
	SPIPlanPtr	plan;
	Portal		portal;
	int			attno = 0;
	int			cur = 0;
	bool		at_end = false;
	uint64		row_bytes = 0;	/* width of the rows of the last chunk */

	/* Not STRICT, since the row type is given as a typed NULL. */
	if (PG_ARGISNULL(0) || PG_ARGISNULL(2) || PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("handle, query and key_column of cpht_fop_rows must not be null")));
	handle = PG_GETARG_INT32(0);
	query = text_to_cstring(PG_GETARG_TEXT_PP(2));
	key_column = text_to_cstring(PG_GETARG_TEXT_PP(3));

	/* Settings are read here, once: the query may change them. */
	stream = cpht_batch_stream_begin(outer, handle, 2 * sizeof(uint64));
	/* cpht_stat_progress: keys sent, of a number not known ahead */
	began = cpht_progress_begin(CPHT_PROGRESS_FOP_ROWS, handle, NULL);

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	plan = SPI_prepare(query, 0, NULL);
	if (plan == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_SYNTAX_ERROR),
				 errmsg("could not prepare the query of cpht_fop_rows: %s",
						SPI_result_code_string(SPI_result))));
	check_is_select(plan);
	portal = SPI_cursor_open(NULL, plan, NULL, NULL, true);

	for (int b = 0; b < 2; b++)
	{
		batch[b].keys = MemoryContextAllocHuge(outer, sizeof(uint64) * stream->batch_keys);
		batch[b].maxchunks = 8;
		batch[b].chunks = MemoryContextAlloc(outer, sizeof(SPITupleTable *) * batch[b].maxchunks);
	}

	for (;;)
	{
		RowBatch   *b = &batch[cur];
		const uint8 *status;
		size_t		nstatus;

		/* Fetch chunks until the batch is full in keys or in bytes. */
		while (!at_end && b->n < stream->batch_keys && b->bytes < stream->batch_bytes)
		{
			SPITupleTable *chunk;
			int			got;
			uint64		bytes = 0;
			int			want;

			/* As many rows as the batch has room for, by the width of
			 * the rows so far (at least one). */
			if (row_bytes == 0)
				want = FIRST_CHUNK_ROWS;
			else
				want = (int) Min(Max((stream->batch_bytes - b->bytes) / row_bytes, 1),
								 (uint64) INT_MAX);
			want = Min(want, stream->batch_keys - b->n);

			CHECK_FOR_INTERRUPTS();
			SPI_cursor_fetch(portal, true, want);
			chunk = SPI_tuptable;
			if (SPI_processed > (uint64) want)
				elog(ERROR, "cursor returned " UINT64_FORMAT " rows for a fetch of %d",
					 SPI_processed, want);
			got = (int) SPI_processed;
			at_end = got < want;
			if (attno == 0)
			{
				attno = key_column_number(chunk->tupdesc, key_column);
				coercion = coercion_build(outer, chunk->tupdesc, rsinfo->setDesc,
										  get_fn_expr_argtype(fcinfo->flinfo, 1));
			}
			if (b->nchunks == b->maxchunks)
			{
				b->maxchunks *= 2;
				b->chunks = repalloc(b->chunks, sizeof(SPITupleTable *) * b->maxchunks);
			}
			b->chunks[b->nchunks++] = chunk;
			for (int i = 0; i < got; i++)
			{
				HeapTuple	row = chunk->vals[i];
				bool		isnull;
				Datum		d = heap_getattr(row, attno, chunk->tupdesc, &isnull);

				if (isnull)
					ereport(ERROR,
							(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
							 errmsg("key column \"%s\" is null in row %d of a batch", key_column, b->n + i + 1),
							 errhint("Filter out rows without a key, for example WHERE %s IS NOT NULL.",
									 quote_identifier(key_column))));
				b->keys[b->n + i] = (uint64) DatumGetInt64(d);
				cpht_check_key(b->keys[b->n + i], stream->key_bits);
				bytes += HEAPTUPLESIZE + row->t_len;
			}
			b->n += got;
			b->bytes += bytes;
			cpht_batch_stream_reserve(stream, bytes, "cpht_fop_rows batch");

			if (got > 0)
				row_bytes = Max(bytes / got, 1);
		}

		/* Start this batch, then emit the rows of the one before it. */
		cpht_batch_stream_swap(stream, b->keys, b->n, &status, &nstatus);
		emit_new_rows(rsinfo, coercion, &batch[1 - cur], status, nstatus);
		batch_clear(stream, &batch[1 - cur]);
		if (b->n == 0)
			break;
		cur = 1 - cur;
	}
	cpht_batch_stream_report(stream, "cpht_fop_rows");
	cpht_progress_end(began);
	SPI_cursor_close(portal);
	SPI_finish();
	if (coercion)
		FreeExprContext(coercion->econtext, true);
	return (Datum) 0;
}
