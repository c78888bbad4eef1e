/*
 * guc.c — every cpht.* setting: its variable and its definition.
 *
 * _PG_init calls cpht_guc_define() first, before anything else registers a
 * hook, and marks the cpht prefix reserved after it.  Postmaster settings
 * (those of the worker's shared memory) can be defined only while the
 * postmaster loads the library from shared_preload_libraries; a plain
 * server has no worker to configure, so they are defined then only.  The
 * cpht worker is forked from the postmaster and so has every setting the
 * postmaster defined.  Nothing here touches CUDA (cpht.devices only hands
 * the list to the kernels, which use it when CUDA starts in a process).
 */
#include "postgres.h"

#include <limits.h>

#include "miscadmin.h"
#include "utils/guc.h"

#include "cpht_table.h"
#include "guc.h"

/* cpht.device, .cpu_threads, .max_memory, .trace, .grow, .shards */
int			cpht_device_setting = CPHT_SETTING_AUTO;
int			cpht_cpu_threads = 0;
int			cpht_max_memory_kb = 0;
bool		cpht_trace = false;
bool		cpht_fop_agg_relation_scan = true;
bool		cpht_grow = true;
int			cpht_shards = 1;

/* cpht.placement */
int			cpht_placement_setting = CPHT_PLACEMENT_BACKEND;

/* cpht.inject_device_fault (tests only) */
bool		cpht_inject_device_fault = false;

/* cpht.batch_size, cpht.batch_memory: streams read them once, as they open */
int			cpht_batch_size = 1 << 20;
int			cpht_batch_memory_kb = 128 * 1024;

/* Durable shared tables (worker/durable_rounds.c) */
int			cpht_snapshot_interval = 300;	/* seconds; 0: no timed rounds */
int			cpht_snapshot_wal = 1024;	/* MB of WAL; 0: no such rounds */
int			cpht_debug_round_delay = 0; /* ms; tests only */

/* The cpht worker's shared memory (shmem/shmem.c) and quota (worker/quota.c) */
int			cpht_max_shared_tables = 64;
int			cpht_max_shared_tables_per_database = -1;
int			cpht_transfer_windows = 4;
int			cpht_transfer_chunk = 1 << 22;
int			cpht_max_shared_memory_mb = -1;

/* cpht.leader_shared_tables (internal, plan/hooks.c) */
char	   *cpht_leader_shared_tables = NULL;

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
cpht_guc_define(void)
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

	DefineCustomBoolVariable("cpht.fop_agg_relation_scan",
							 "Plans SELECT cpht_fop_agg(h, col) FROM a table as cpht_fop_relation(h, table, col).",
							 "On: such a query, with nothing else in it, reads the column by cpht's own parallel scan, with no aggregate call per row. Off: it is planned as an aggregate.",
							 &cpht_fop_agg_relation_scan,
							 true,
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

	DefineCustomIntVariable("cpht.batch_size",
							"Keys cpht_fop_agg() and cpht_fop_rows() send to a table per batch.",
							"Larger batches use the GPU better; each batch is held twice in memory.",
							&cpht_batch_size,
							1 << 20, 1024, 1 << 26,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("cpht.batch_memory",
							"Memory the rows of one cpht_fop_rows() batch may take.",
							"A batch ends early once its rows take this much.",
							&cpht_batch_memory_kb,
							128 * 1024, 64, MAX_KILOBYTES,
							PGC_USERSET,
							GUC_UNIT_KB,
							NULL, NULL, NULL);

	/*
	 * Durable shared tables (src/worker/durable_rounds.c): reloadable, so defined
	 * on a plain server too, where they have no effect.
	 */
	DefineCustomIntVariable("cpht.snapshot_interval",
							"Seconds between the cpht worker's snapshot rounds of changed durable shared tables.",
							"0 turns timed rounds off.  Each round lets the server remove the WAL older than the oldest snapshot.",
							&cpht_snapshot_interval,
							300, 0, 7 * 24 * 3600,
							PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("cpht.snapshot_wal",
							"WAL written since the last snapshot round after which the cpht worker takes another.",
							"0 turns such rounds off.",
							&cpht_snapshot_wal,
							1024, 0, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MB,
							NULL, NULL, NULL);
	DefineCustomIntVariable("cpht.debug_round_delay",
							"Tests only: the cpht worker waits this long before the snapshot round that follows a checkpoint.",
							"It widens the window in which a base backup could copy files older than its start, which checkpoints must not allow.",
							&cpht_debug_round_delay,
							0, 0, 60000,
							PGC_SIGHUP, GUC_UNIT_MS | GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE,
							NULL, NULL, NULL);

	/*
	 * What all shared tables may hold in the cpht worker (worker/quota.c).
	 * Not unlimited by default: any role that may create a shared table
	 * could otherwise fill the worker's host memory, and the OOM killer's
	 * SIGKILL of the worker restarts the whole server.  How much memory
	 * there is is known only to the worker (the host's RAM, the GPUs it
	 * found), so -1 lets it derive the bound.
	 */
	DefineCustomIntVariable("cpht.max_shared_memory",
							"Memory all shared cpht tables may hold together in the cpht worker.",
							"Table slots, their growth and open transactions' changes. -1: half of the host's memory plus the memory of the GPUs the worker uses; 0: no limit.",
							&cpht_max_shared_memory_mb,
							-1, -1, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MB,
							NULL, NULL, NULL);

	/* Reloadable like the two above, so defined on every server; the
	 * worker enforces it (worker/registry.c). */
	DefineCustomIntVariable("cpht.max_shared_tables_per_database",
							"Shared cpht tables one database can hold at once.",
							"-1 allows three quarters of cpht.max_shared_tables, so that one database cannot take every slot; 0 sets no limit of its own. Durable tables restored at start count but are never refused.",
							&cpht_max_shared_tables_per_database,
							-1, -1, 65536,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);

	/* Postmaster settings can only be defined while the postmaster loads
	 * the library; a plain server has no worker to configure. */
	if (process_shared_preload_libraries_in_progress)
	{
		DefineCustomIntVariable("cpht.max_shared_tables",
								"Shared cpht tables the server can hold at once.",
								NULL,
								&cpht_max_shared_tables,
								64, 1, 65536,
								PGC_POSTMASTER, 0,
								NULL, NULL, NULL);
		DefineCustomIntVariable("cpht.transfer_windows",
								"Windows of the shared memory arena that carry keys to the cpht worker.",
								"Each call on a shared table holds one window while it runs, a call larger than a window up to four when they are free.",
								&cpht_transfer_windows,
								4, 1, 64,
								PGC_POSTMASTER, 0,
								NULL, NULL, NULL);
		DefineCustomIntVariable("cpht.transfer_chunk",
								"Keys one transfer window carries; larger calls stream through the windows piece by piece.",
								"Each window takes 9 bytes per key of shared memory.",
								&cpht_transfer_chunk,
								1 << 22, 1024, 1 << 26,
								PGC_POSTMASTER, 0,
								NULL, NULL, NULL);
	}

	/* cpht_fop_agg over shared tables in parallel workers (plan/hooks.c) */
	DefineCustomStringVariable(CPHT_LEADER_SETTING,
							   "Internal: the shared cpht tables a parallel query's leader has open.",
							   "Set by cpht before a parallel query with cpht_fop_agg runs; "
							   "parallel workers find the leader's handles here.",
							   &cpht_leader_shared_tables,
							   "",
							   PGC_SUSET,
							   GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE | GUC_DISALLOW_IN_FILE |
							   GUC_NO_RESET_ALL,
							   NULL, NULL, NULL);
}
