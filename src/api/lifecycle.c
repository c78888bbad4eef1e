/*
 * lifecycle.c — cpht_create(), cpht_drop(), cpht_drop_all().
 */
#include "postgres.h"

#include <unistd.h>

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "guc.h"
#include "cpht_table.h"
#include "errors.h"
#include "session/session.h"
#include "api/lifecycle.h"
#include "memcap.h"

PG_FUNCTION_INFO_V1(cpht_create);
PG_FUNCTION_INFO_V1(cpht_drop);
PG_FUNCTION_INFO_V1(cpht_drop_all);

/* The table kinds by their SQL names, one entry per cpht_kind. */
static const char *const kind_names[] = {
	[CPHT_ICEBERG] = "iceberg",
	[CPHT_CUCKOO] = "cuckoo",
};

const char *
cpht_kind_name(cpht_kind kind)
{
	Assert((int) kind >= 0 && (int) kind < (int) lengthof(kind_names));
	return kind_names[kind];
}

static cpht_kind
parse_kind(const char *kind)
{
	for (int k = 0; k < (int) lengthof(kind_names); k++)
		if (pg_strcasecmp(kind, kind_names[k]) == 0)
			return (cpht_kind) k;

	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unknown cpht table kind \"%s\"", kind),
			 errhint("Use \"iceberg\" or \"cuckoo\".")));
	pg_unreachable();
}

/*
 * The device a new table goes to, by cpht.device (tableref/tableref.c: probed by the
 * cpht worker when preloaded, by this backend otherwise, and only when the
 * setting allows it: initialising CUDA costs time and GPU memory).
 */
cpht_device
cpht_choose_device(void)
{
	return cpht_tableref_choose_device();
}

/*
 * A fresh seed per table, so that no fixed key set can be crafted against
 * every table.  Results never depend on it.
 */
uint64
cpht_new_seed(void)
{
	static uint64 counter = 0;
	uint64		seed;

	if (pg_strong_random(&seed, sizeof(seed)))
		return seed;

	/* No entropy source: still differ between tables and backends. */
	counter++;
	return ((uint64) MyProcPid << 32) ^ (uint64) GetCurrentTimestamp() ^
		(counter * UINT64CONST(0x9e3779b97f4a7c15));
}

/*
 * Durable tables are never sharded (their snapshots hold one table's
 * slots), so cpht.shards applies to every other table and a durable one
 * takes one shard unless shards is given.
 */
int32
cpht_create_shards_arg(FunctionCallInfo fcinfo, bool durable)
{
	if (PG_NARGS() > 5 && !PG_ARGISNULL(5))
		return PG_GETARG_INT32(5);
	return durable ? 1 : cpht_shards;
}

/*
 * A GPU table given no shards (shards NULL, cpht.shards 1) whose slots
 * would not fit the first GPU's room is sharded over as few of the GPUs
 * cpht uses as make each shard fit (cpht_shards_to_fit), so that it is
 * made where one table would fail for room.  Durable tables are never
 * sharded.  Returns the table's bytes of slot memory, checked against the
 * session's cap again when they changed.
 */
uint64
cpht_create_fit_gpus(FunctionCallInfo fcinfo, bool durable, cpht_params *params,
					 uint64 bytes, const char *what)
{
	int			gpus;
	uint64		room;
	int			shards;

	if (params->device != CPHT_DEVICE_GPU || durable || params->shards > 1 ||
		(PG_NARGS() > 5 && !PG_ARGISNULL(5)))
		return bytes;
	cpht_tableref_gpu_room(&gpus, &room);
	shards = cpht_shards_to_fit(params, room, gpus);
	if (shards <= 1)
		return bytes;
	params->shards = shards;
	bytes = cpht_params_table_bytes(params);
	cpht_memory_check(bytes, what);
	return bytes;
}

uint64
cpht_create_params(int64 capacity, const char *kind_name, int32 key_bits,
				   int32 shards, cpht_params *params)
{
	cpht_kind	kind;
	cpht_status status;
	char		errbuf[512];

	if (capacity <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("capacity must be positive"),
				 errdetail("The capacity is the number of distinct keys the table must hold.")));

	kind = parse_kind(kind_name);

	/* 0: no key_bits given; the table widens its keys as they come */
	if (key_bits != 0 && (key_bits < 8 || key_bits > 64))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("key_bits must be between 8 and 64, not %d", key_bits)));

	if (shards < 1 || shards > CPHT_MAX_SHARDS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("shards must be between 1 and %d, not %d", CPHT_MAX_SHARDS, shards),
				 errdetail("A sharded table splits its keys over that many tables, one per GPU in turn (or all on the CPU).")));

	errbuf[0] = '\0';
	status = cpht_params_for_capacity(kind, (uint64) capacity, key_bits,
									  params, errbuf, sizeof(errbuf));

	/*
	 * The arguments were checked above, so a failure here means the capacity
	 * exceeds what the layout can address: a limit, not a lack of memory.
	 */
	if (status != CPHT_OK)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("capacity " INT64_FORMAT " is too large for a cpht table",
						capacity),
				 errdetail("%s", cpht_sentence(errbuf))));
	/* cpht.grow off: the table keeps this size (a full call is 53000). */
	params->fixed_size = !cpht_grow;
	params->shards = shards > 1 ? shards : 0;
	return cpht_params_table_bytes(params);
}

Datum
cpht_create(PG_FUNCTION_ARGS)
{
	int64		capacity = PG_GETARG_INT64(0);
	char	   *kind_name = text_to_cstring(PG_GETARG_TEXT_PP(1));
	/* NULL: the key width follows the keys (cpht_create_params) */
	int32		key_bits = PG_ARGISNULL(2) ? 0 : PG_GETARG_INT32(2);
	bool		transactional = PG_GETARG_BOOL(3);
	uint64		bytes;
	cpht_params params;
	cpht_status status;
	CphtTableRef *table = NULL;
	CphtHandleEntry entry;
	int32		handle;
	char		errbuf[512];

	bytes = cpht_create_params(capacity, kind_name, key_bits,
							   cpht_create_shards_arg(fcinfo, false), &params);

	/* The session's memory cap, checked before any memory is taken. */
	cpht_memory_check(bytes, "cpht table");

	params.device = cpht_choose_device();
	bytes = cpht_create_fit_gpus(fcinfo, false, &params, bytes, "cpht table");
	params.seed = cpht_new_seed();
	params.cpu_threads = cpht_cpu_threads;

	/* Room in the registry first: once the table exists nothing may fail. */
	cpht_handles_reserve();

	CHECK_FOR_INTERRUPTS();
	errbuf[0] = '\0';
	status = cpht_tableref_create(&params, cpht_tableref_in_worker(&params), transactional,
								  &table, errbuf, sizeof(errbuf));
	/* a create that fails leaves nothing, and no call's keys are involved */
	cpht_check_call(status, 0, errbuf, NULL);

	memset(&entry, 0, sizeof(entry));
	entry.table = table;
	entry.kind = params.kind;
	entry.device = params.device;
	entry.key_bits = key_bits;
	entry.capacity = capacity;
	entry.bytes = bytes;
	entry.transactional = transactional;

	handle = cpht_handles_add(&entry);
	cpht_tableref_set_handle(table, handle);
	cpht_txn_created(cpht_handles_get(handle));
	PG_RETURN_INT32(handle);
}

/*
 * Drops follow transactions: the handle is gone at once, the memory is
 * freed when the transaction commits, and an abort brings the table back.
 * A shared table is dropped for every session at once instead
 * (shared.c): a different operation, not another placement.
 */
Datum
cpht_drop(PG_FUNCTION_ARGS)
{
	if (cpht_handle_is_shared(PG_GETARG_INT32(0)))
		return cpht_shared_drop(fcinfo);
	cpht_txn_drop(PG_GETARG_INT32(0));
	PG_RETURN_VOID();
}

Datum
cpht_drop_all(PG_FUNCTION_ARGS)
{
	int32		dropped = 0;
	int32		after = 0;
	CphtHandleEntry *h;

	/* A cancel midway aborts the transaction, which undoes the drops. */
	while ((h = cpht_handles_next(after)) != NULL)
	{
		CHECK_FOR_INTERRUPTS();
		after = h->handle;
		cpht_txn_drop(h->handle);
		dropped++;
	}
	PG_RETURN_INT32(dropped);
}

/* cpht_rebuild(handle): the table again without tombstones. */
PG_FUNCTION_INFO_V1(cpht_rebuild);
Datum
cpht_rebuild(PG_FUNCTION_ARGS)
{
	CphtHandleEntry *h = cpht_handles_use(PG_GETARG_INT32(0));
	uint64		removed;

	CHECK_FOR_INTERRUPTS();
	cpht_memory_sync();
	/* Its own message says the table is unchanged; it stores no keys. */
	cpht_check_call(cpht_tableref_rebuild(cpht_handle_table(h), &removed), h->handle,
					cpht_tableref_error(cpht_handle_table(h)), NULL);
	PG_RETURN_INT64((int64) removed);
}
