/*
 * batch.c — the batch operations: cpht_fop(), cpht_fop_new(), cpht_find(),
 * cpht_put(), cpht_delete(), cpht_count().
 *
 * Keys go to the kernels straight out of the argument array and statuses
 * come back straight into the result array (see keys.c), so a batch costs
 * one pass of checks plus the kernel call.  A kernel call cannot be
 * interrupted; the interrupt check before it keeps a cancel from waiting
 * for the next one.
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

/* undone: what a failed call left, as cpht_check_call takes it. */
static void
check_table(cpht_status status, CphtHandle *entry, const char *undone)
{
	if (status != CPHT_OK)
		cpht_check_call(status, entry->handle,
						cpht_access_error(cpht_handle_table(entry)), undone);
}

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
clock_report(const char *fn, const CallClock *c, int n, CphtTable *t)
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
	cpht_access_call_times(t, &inside);
	ereport(NOTICE,
			(errmsg("%s: %d keys: read array %.3f ms, table %.3f ms, result %.3f ms",
					fn, n, INSTR_TIME_GET_MILLISEC(read), INSTR_TIME_GET_MILLISEC(table),
					INSTR_TIME_GET_MILLISEC(result)),
			 inside.grows > 0 || inside.widens > 0 ?
			 errdetail("Inside the table call: staging keys %.3f ms, waiting for the device %.3f ms, copying results %.3f ms, undo log %.3f ms, growing the table %d times %.3f ms, widening its keys %d times %.3f ms.",
					   inside.stage_in, inside.wait, inside.copy_out, inside.undo_log,
					   inside.grows, inside.grow, inside.widens, inside.widen) :
			 errdetail("Inside the table call: staging keys %.3f ms, waiting for the device %.3f ms, copying results %.3f ms, undo log %.3f ms.",
					   inside.stage_in, inside.wait, inside.copy_out, inside.undo_log)));
}

Datum
cpht_fop(PG_FUNCTION_ARGS)
{
	CphtHandle *entry;
	const uint64 *keys;
	ArrayType  *result;
	int			n;
	CallClock	clock;

	entry = cpht_handles_use(PG_GETARG_INT32(0));

	clock_mark(&clock.start);
	keys = cpht_keys_read_arg(fcinfo, 1, entry->key_bits, &n);
	if (n == 0)
		PG_RETURN_ARRAYTYPE_P(construct_empty_array(BOOLOID));

	result = cpht_bool_array(n);
	CHECK_FOR_INTERRUPTS();
	cpht_txn_before_write(entry);
	cpht_memory_sync();
	clock_mark(&clock.read);
	check_table(cpht_access_find_or_put(cpht_handle_table(entry), keys, n,
									   (uint8 *) ARR_DATA_PTR(result)),
				entry, STORED_NOTHING);
	clock_mark(&clock.table);
	clock_report("cpht_fop", &clock, n, cpht_handle_table(entry));
	PG_RETURN_ARRAYTYPE_P(result);
}

Datum
cpht_fop_new(PG_FUNCTION_ARGS)
{
	CphtHandle *entry;
	const uint64 *keys;
	uint8	   *status;
	ArrayType  *result;
	int64	   *out;
	int64	   *end;
	CallClock	clock;
	int			n;
	int			nnew = 0;
	int			i;

	entry = cpht_handles_use(PG_GETARG_INT32(0));

	clock_mark(&clock.start);
	keys = cpht_keys_read_arg(fcinfo, 1, entry->key_bits, &n);
	if (n == 0)
		PG_RETURN_ARRAYTYPE_P(construct_empty_array(INT8OID));

	status = cpht_palloc_filled(n);
	CHECK_FOR_INTERRUPTS();
	cpht_txn_before_write(entry);
	cpht_memory_sync();
	clock_mark(&clock.read);
	check_table(cpht_access_find_or_put(cpht_handle_table(entry), keys, n, status), entry, STORED_NOTHING);
	clock_mark(&clock.table);

	for (i = 0; i < n; i++)
		nnew += status[i];

	if (nnew == 0)
	{
		pfree(status);
		clock_report("cpht_fop_new", &clock, n, cpht_handle_table(entry));
		PG_RETURN_ARRAYTYPE_P(construct_empty_array(INT8OID));
	}

	result = cpht_int8_array(nnew);
	out = (int64 *) ARR_DATA_PTR(result);
	end = out + nnew;
	for (i = 0; out < end; i++)
	{
		/* Write every key, advance only past new ones: no branch on the
		 * status, whose outcome is as good as random. */
		*out = (int64) keys[i];
		out += status[i];
	}
	pfree(status);
	clock_report("cpht_fop_new", &clock, n, cpht_handle_table(entry));
	PG_RETURN_ARRAYTYPE_P(result);
}

Datum
cpht_find(PG_FUNCTION_ARGS)
{
	CphtHandle *entry;
	const uint64 *keys;
	ArrayType  *result;
	int			n;

	entry = cpht_handles_use(PG_GETARG_INT32(0));

	keys = cpht_keys_read_arg(fcinfo, 1, entry->key_bits, &n);
	if (n == 0)
		PG_RETURN_ARRAYTYPE_P(construct_empty_array(BOOLOID));

	result = cpht_bool_array(n);
	CHECK_FOR_INTERRUPTS();
	check_table(cpht_access_find(cpht_handle_table(entry), keys, n,
								(uint8 *) ARR_DATA_PTR(result)),
				entry, NULL);
	PG_RETURN_ARRAYTYPE_P(result);
}

Datum
cpht_put(PG_FUNCTION_ARGS)
{
	CphtHandle *entry;
	const uint64 *keys;
	uint64		inserted = 0;
	int			n;

	entry = cpht_handles_use(PG_GETARG_INT32(0));

	keys = cpht_keys_read_arg(fcinfo, 1, entry->key_bits, &n);
	if (n == 0)
		PG_RETURN_INT64(0);

	CHECK_FOR_INTERRUPTS();
	cpht_txn_before_write(entry);
	cpht_memory_sync();
	check_table(cpht_access_put(cpht_handle_table(entry), keys, n, &inserted), entry, STORED_NOTHING);
	PG_RETURN_INT64((int64) inserted);
}

Datum
cpht_delete(PG_FUNCTION_ARGS)
{
	CphtHandle *entry;
	const uint64 *keys;
	ArrayType  *result;
	int			n;

	entry = cpht_handles_use(PG_GETARG_INT32(0));

	keys = cpht_keys_read_arg(fcinfo, 1, entry->key_bits, &n);
	if (n == 0)
		PG_RETURN_ARRAYTYPE_P(construct_empty_array(BOOLOID));

	result = cpht_bool_array(n);
	CHECK_FOR_INTERRUPTS();
	cpht_txn_before_write(entry);
	cpht_memory_sync();
	check_table(cpht_access_erase(cpht_handle_table(entry), keys, n,
								 (uint8 *) ARR_DATA_PTR(result)),
				entry, DELETED_NOTHING);
	PG_RETURN_ARRAYTYPE_P(result);
}

Datum
cpht_count(PG_FUNCTION_ARGS)
{
	CphtHandle *entry;

	entry = cpht_handles_use(PG_GETARG_INT32(0));

	PG_RETURN_INT64((int64) cpht_access_count(cpht_handle_table(entry)));
}
