/*
 * batch.c — the batch operations: cpht_fop(), cpht_fop_new(), cpht_find(),
 * cpht_put(), cpht_delete(), cpht_count().
 *
 * Keys go to the table straight out of the argument array and statuses
 * come back straight into the result array (see keys.c), so a batch costs
 * one pass of checks plus the table call.  Every function takes the same
 * path (batch_begin, batch_call below): the handle, the keys, the checks
 * before the call, the call and its status; what differs is only the
 * result each builds.  The table call checks for a cancel itself between
 * chunks (and undoes what it did); the check before it answers a cancel
 * that came while the array was read.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/array.h"

#include "cpht_table.h"
#include "errors.h"
#include "session/session.h"
#include "api/keys.h"
#include "memcap.h"
#include "guc.h"
#include "portability/instr_time.h"

/* A find_or_put status array is a boolean array as it stands. */
StaticAssertDecl(CPHT_FOUND == 0 && CPHT_PUT == 1,
				 "find_or_put statuses must be the bytes of false and true");
StaticAssertDecl(sizeof(bool) == 1, "bool must be one byte");

PG_FUNCTION_INFO_V1(cpht_fop);
PG_FUNCTION_INFO_V1(cpht_fop_new);
PG_FUNCTION_INFO_V1(cpht_find);
PG_FUNCTION_INFO_V1(cpht_put);
PG_FUNCTION_INFO_V1(cpht_delete);
PG_FUNCTION_INFO_V1(cpht_count);

#define STORED_NOTHING "No key of this call was stored."
#define DELETED_NOTHING "No key of this call was deleted."


/*
 * cpht.trace: a NOTICE per call splitting its time into reading the array
 * argument (detoasting and checking), the table call (transfers and kernels
 * for a GPU table) and building the result.
 */
typedef struct CallClock
{
	instr_time	start;
	instr_time	read;
	instr_time	table;
} CallClock;

static inline void
clock_mark(instr_time *t)
{
	if (cpht_trace)
		INSTR_TIME_SET_CURRENT(*t);
}

static void
clock_report(const char *fn, const CallClock *c, int n, CphtTableRef *t)
{
	cpht_call_times inside;

	instr_time	end,
				read,
				table,
				result;

	if (!cpht_trace)
		return;
	INSTR_TIME_SET_CURRENT(end);
	read = c->read;
	INSTR_TIME_SUBTRACT(read, c->start);
	table = c->table;
	INSTR_TIME_SUBTRACT(table, c->read);
	result = end;
	INSTR_TIME_SUBTRACT(result, c->table);
	cpht_tableref_call_times(t, &inside);
	ereport(NOTICE,
			(errmsg("%s: %d keys: read array %.3f ms, table %.3f ms, result %.3f ms",
					fn, n, INSTR_TIME_GET_MILLISEC(read), INSTR_TIME_GET_MILLISEC(table),
					INSTR_TIME_GET_MILLISEC(result)),
			 errdetail_internal("%s", cpht_call_times_sentence(&inside, false))));
}

/* One batch call on a table by handle, from its arguments to its status. */
typedef struct Batch
{
	CphtHandleEntry *entry;
	const uint64 *keys;
	int			n;
	CallClock	clock;
} Batch;

typedef enum BatchOp
{
	BATCH_FIND_OR_PUT,
	BATCH_FIND,
	BATCH_PUT,
	BATCH_ERASE
} BatchOp;

/* What each operation calls, whether it writes, and what a failure of it
 * left (cpht_check_call's undone). */
typedef struct BatchKind
{
	/* a status per key; NULL for BATCH_PUT, which counts the inserted */
	cpht_status (*status_call) (CphtTableRef *t, const uint64 *keys, size_t n, uint8 *status);
	bool		writes;
	const char *undone;
} BatchKind;

static const BatchKind batch_kinds[] = {
	[BATCH_FIND_OR_PUT] = {cpht_tableref_find_or_put, true, STORED_NOTHING},
	[BATCH_FIND] = {cpht_tableref_find, false, NULL},
	[BATCH_PUT] = {NULL, true, STORED_NOTHING},
	[BATCH_ERASE] = {cpht_tableref_erase, true, DELETED_NOTHING},
};

/*
 * The table of handle argument 0 and the keys of array argument 1, checked
 * against its key width (keys.c).  False for an empty array: there is no
 * call to make, and the caller returns its empty result.
 */
static bool
batch_begin(FunctionCallInfo fcinfo, Batch *b)
{
	b->entry = cpht_handles_use(PG_GETARG_INT32(0));
	clock_mark(&b->clock.start);
	b->keys = cpht_keys_read_arg(fcinfo, 1, b->entry->key_bits, &b->n);
	return b->n > 0;
}

/*
 * Runs op on the batch: a status per key into status, or the number
 * inserted into *inserted (BATCH_PUT).  A write first marks the session's
 * savepoint on a transactional table and settles the memory cap.  A failed
 * call raises, saying what it left (nothing stored or deleted: the table
 * undid it).
 */
static void
batch_call(Batch *b, BatchOp op, uint8 *status, uint64 *inserted)
{
	const BatchKind *k = &batch_kinds[op];
	CphtTableRef *t;
	cpht_status st;

	CHECK_FOR_INTERRUPTS();
	if (k->writes)
	{
		cpht_txn_before_write(b->entry);
		cpht_memory_sync();
	}
	clock_mark(&b->clock.read);
	t = cpht_handle_table(b->entry);
	st = k->status_call != NULL ? k->status_call(t, b->keys, b->n, status) :
		cpht_tableref_put(t, b->keys, b->n, inserted);
	if (st != CPHT_OK)
		cpht_check_call(st, b->entry->handle, cpht_tableref_error(t), k->undone);
	clock_mark(&b->clock.table);
}

/* cpht.trace: the batch's NOTICE, once its result is built */
static void
batch_trace(const Batch *b, const char *fn)
{
	clock_report(fn, &b->clock, b->n, cpht_handle_table(b->entry));
}

/*
 * A batch whose result is a boolean per key: the statuses as they stand
 * (find-or-put: put; find: present; erase: was present).  fn names it in
 * cpht.trace, NULL: not traced.
 */
static Datum
bool_batch(FunctionCallInfo fcinfo, BatchOp op, const char *fn)
{
	Batch		b;
	ArrayType  *result;

	if (!batch_begin(fcinfo, &b))
		PG_RETURN_ARRAYTYPE_P(construct_empty_array(BOOLOID));
	result = cpht_bool_array(b.n);
	batch_call(&b, op, (uint8 *) ARR_DATA_PTR(result), NULL);
	if (fn != NULL)
		batch_trace(&b, fn);
	PG_RETURN_ARRAYTYPE_P(result);
}

Datum
cpht_fop(PG_FUNCTION_ARGS)
{
	return bool_batch(fcinfo, BATCH_FIND_OR_PUT, "cpht_fop");
}

Datum
cpht_fop_new(PG_FUNCTION_ARGS)
{
	Batch		b;
	uint8	   *status;
	ArrayType  *result;
	int64	   *out;
	int64	   *end;
	int			nnew = 0;
	int			i;

	if (!batch_begin(fcinfo, &b))
		PG_RETURN_ARRAYTYPE_P(construct_empty_array(INT8OID));
	status = cpht_palloc_filled(b.n);
	batch_call(&b, BATCH_FIND_OR_PUT, status, NULL);

	for (i = 0; i < b.n; i++)
		nnew += status[i];
	if (nnew == 0)
		result = construct_empty_array(INT8OID);
	else
	{
		result = cpht_int8_array(nnew);
		out = (int64 *) ARR_DATA_PTR(result);
		end = out + nnew;
		for (i = 0; out < end; i++)
		{
			/* Write every key, advance only past new ones: no branch on
			 * the status, whose outcome is as good as random. */
			*out = (int64) b.keys[i];
			out += status[i];
		}
	}
	pfree(status);
	batch_trace(&b, "cpht_fop_new");
	PG_RETURN_ARRAYTYPE_P(result);
}

Datum
cpht_find(PG_FUNCTION_ARGS)
{
	return bool_batch(fcinfo, BATCH_FIND, NULL);
}

Datum
cpht_put(PG_FUNCTION_ARGS)
{
	Batch		b;
	uint64		inserted = 0;

	if (!batch_begin(fcinfo, &b))
		PG_RETURN_INT64(0);
	batch_call(&b, BATCH_PUT, NULL, &inserted);
	PG_RETURN_INT64((int64) inserted);
}

Datum
cpht_delete(PG_FUNCTION_ARGS)
{
	return bool_batch(fcinfo, BATCH_ERASE, NULL);
}

Datum
cpht_count(PG_FUNCTION_ARGS)
{
	CphtHandleEntry *entry = cpht_handles_use(PG_GETARG_INT32(0));

	PG_RETURN_INT64((int64) cpht_tableref_count(cpht_handle_table(entry)));
}
