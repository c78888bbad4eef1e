/*
 * cpht.c — module entry point and settings.
 *
 * Loading the library only defines settings, and when preloaded
 * (shared_preload_libraries) asks for the shared memory of the cpht worker
 * and registers it.  CUDA is never initialised here, because _PG_init may
 * run in the postmaster and a CUDA context does not survive fork().  The
 * GPU is first touched by cpht_create() in a backend that asks for it.
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/guc.h"

#include "cpht.h"
#include "access.h"
#include "client.h"
#include "cpht_table.h"
#include "fop_new_scan.h"
#include "memcap.h"
#include "parallel_plan.h"
#include "protocol.h"
#include "rows_by_tid.h"
#include "stream.h"
#include "txn.h"
#include "waits.h"

PG_MODULE_MAGIC;

int			cpht_device_setting = CPHT_SETTING_AUTO;
int			cpht_cpu_threads = 0;
int			cpht_max_memory_kb = 0;
bool		cpht_trace = false;
bool		cpht_grow = true;
int			cpht_shards = 1;

static const struct config_enum_entry placement_options[] = {
	{"backend", CPHT_PLACEMENT_BACKEND, false},
	{"worker", CPHT_PLACEMENT_WORKER, false},
	{NULL, 0, false}
};

static const struct config_enum_entry device_options[] = {
	{"auto", CPHT_SETTING_AUTO, false},
	{"gpu", CPHT_SETTING_GPU, false},
	{"cpu", CPHT_SETTING_CPU, false},
	{NULL, 0, false}
};

/*
 * Asked by the kernels between chunks of a long call, possibly from a helper
 * thread: it only reads the flags the signal handlers set.  Only a cancel or
 * terminate request stops a call; other interrupts wait for its end.
 */
static int
cpht_interrupt_pending(void)
{
	return QueryCancelPending || ProcDiePending;
}

/*
 * cpht.devices: the CUDA ordinals of the GPUs cpht uses, as "0,1"; empty
 * for all.  A process uses the list it has when CUDA starts in it (the
 * kernels ignore a list given later): a reload reaches new sessions, and
 * the cpht worker when it next starts.  (A PGC_POSTMASTER setting cannot
 * be defined by a library loaded after the server started.)
 */
static char *cpht_devices_setting = NULL;

#define CPHT_MAX_DEVICES 64

static bool
parse_devices(const char *value, int *ordinals, int *n)
{
	const char *p = value ? value : "";

	*n = 0;
	while (*p)
	{
		char	   *end;
		long		d;

		while (*p == ' ' || *p == ',')
			p++;
		if (*p == '\0')
			break;
		d = strtol(p, &end, 10);
		if (end == p || d < 0 || d > 1023 || *n >= CPHT_MAX_DEVICES)
			return false;
		ordinals[(*n)++] = (int) d;
		p = end;
		while (*p == ' ')
			p++;
		if (*p != ',' && *p != '\0')
			return false;
	}
	return true;
}

static bool
check_devices(char **newval, void **extra, GucSource source)
{
	int			ordinals[CPHT_MAX_DEVICES];
	int			n;

	if (!parse_devices(*newval, ordinals, &n))
	{
		GUC_check_errdetail("cpht.devices is a comma-separated list of at most %d GPU numbers (CUDA ordinals), or empty for every GPU.",
							CPHT_MAX_DEVICES);
		return false;
	}
	return true;
}

static void
assign_devices(const char *newval, void *extra)
{
	int			ordinals[CPHT_MAX_DEVICES];
	int			n;

	if (parse_devices(newval, ordinals, &n))
		(void) cpht_gpu_set_devices(ordinals, n);
}

void
_PG_init(void)
{
	DefineCustomEnumVariable("cpht.device",
							 "Where cpht_create() places new tables.",
							 "auto uses the GPU when one is usable and the CPU otherwise, "
							 "gpu fails where no GPU is usable, cpu never touches the GPU. "
							 "A table stays on the device it was created on.",
							 &cpht_device_setting,
							 CPHT_SETTING_AUTO,
							 device_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomEnumVariable("cpht.placement",
							 "Where cpht_create() keeps a new private table when cpht is preloaded.",
							 "backend keeps CPU tables in the session's backend, worker puts "
							 "them in the cpht worker too.  GPU tables of a preloaded server "
							 "always live in the worker; without preloading every table "
							 "lives in its backend.",
							 &cpht_placement_setting,
							 CPHT_PLACEMENT_BACKEND,
							 placement_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("cpht.inject_device_fault",
							 "Tests only: requests to the cpht worker break its GPU context first.",
							 "A sticky device fault, as an illegal address would leave; "
							 "the worker then restarts and its GPU tables are lost.",
							 &cpht_inject_device_fault,
							 false,
							 PGC_SUSET,
							 GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("cpht.cpu_threads",
							"Threads a CPU table created by cpht_create() uses per call.",
							"0 uses one thread per core.",
							&cpht_cpu_threads,
							0, 0, 1024,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("cpht.max_memory",
							"Memory one session's cpht tables may hold, host and device together.",
							"0 means no limit.  Only superusers can change it.",
							&cpht_max_memory_kb,
							0, 0, PG_INT32_MAX,
							PGC_SUSET,
							GUC_UNIT_KB,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("cpht.trace",
							 "Reports where the time of cpht_fop() and cpht_fop_new() goes.",
							 "A NOTICE per call: reading the array, the table call, building the result.",
							 &cpht_trace,
							 false,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("cpht.grow",
							 "Whether new cpht tables grow when they run out of room.",
							 "On: a table created with cpht_create() grows past its capacity as keys arrive. Off: it keeps the size it was created with, and a call that finds no room for a key fails with an error and stores nothing.",
							 &cpht_grow,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("cpht.shards",
							"Shards of a cpht table created without shards => N.",
							"1 makes one table; N splits the keys of every new table by hash over N tables, one per GPU in turn (or all on the CPU). A durable table takes one shard unless shards is given.",
							&cpht_shards,
							1, 1, CPHT_MAX_SHARDS,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);

	DefineCustomStringVariable("cpht.devices",
							   "The GPUs cpht uses, by CUDA number.",
							   "A comma-separated list such as 0,1; empty uses every GPU with compute capability 9.0 or newer. GPU tables go to the first of them; the shards of a sharded table to each in turn.",
							   &cpht_devices_setting,
							   "",
							   PGC_SIGHUP,
							   0,
							   check_devices, assign_devices, NULL);

	cpht_stream_define_gucs();
	cpht_txn_init();
	/*
	 * With cpht preloaded, shared tables go with their database and the
	 * extension (client/db_drop.c).  Registered before cpht_xact_end_init,
	 * so its commit callback runs after the one that tells the worker the
	 * transaction committed.
	 */
	if (process_shared_preload_libraries_in_progress)
	{
		cpht_db_drop_init();
		/* owner roles of shared tables (client/owners.c), likewise */
		cpht_owners_init();
	}
	/* transactional shared tables tell the worker how transactions end */
	cpht_xact_end_init();
	/* shared_preload_libraries: the worker's settings, memory and
	 * registration (shmem/shmem.c) */
	cpht_shmem_init();

	/* cpht_fop_agg over shared tables in parallel workers */
	cpht_parallel_init();
	cpht_new_keys_init();
	cpht_rows_by_tid_init();

	MarkGUCPrefixReserved("cpht");

	/* Loaded by a function call: restore a cap a superuser set, now (see
	 * memcap.c); otherwise the first cpht_create does. */
	cpht_memory_settle();

	cpht_set_interrupt_check(cpht_interrupt_pending);
	cpht_memory_init();
}
