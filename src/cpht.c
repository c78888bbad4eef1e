/*
 * cpht.c — module entry point.
 *
 * Loading the library only defines settings (guc.c), and when preloaded
 * (shared_preload_libraries) asks for the shared memory of the cpht worker
 * and registers it.  CUDA is never initialised here, because _PG_init may
 * run in the postmaster and a CUDA context does not survive fork().  With
 * cpht preloaded only the cpht worker touches a GPU (its first table that
 * asks for one); without, the first cpht_create() of a backend that asks
 * for one.
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/guc.h"

#include "guc.h"
#include "tableref/tableref.h"
#include "worker/worker.h"
#include "client/client.h"
#include "cpht_table.h"
#include "api/api.h"
#include "plan/plan.h"
#include "memcap.h"
#include "shmem/protocol.h"
#include "stream/stream.h"
#include "session/session.h"

PG_MODULE_MAGIC;

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

void
_PG_init(void)
{
	/* every cpht.* setting (guc.c) */
	cpht_guc_define();
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
		/* shared tables created and dropped in transaction blocks
		 * (client/ddl_xact.c), likewise */
		cpht_ddl_xact_init();
	}
	/* transactional shared tables tell the worker how transactions end */
	cpht_xact_end_init();
	if (process_shared_preload_libraries_in_progress)
	{
		/* durable tables would not survive pg_upgrade: refuse it
		 * (worker/durable_catalog.c) */
		cpht_catalog_refuse_binary_upgrade();
		/* the resource manager of durable tables (worker/durable_wal.c) */
		cpht_wal_register();
	}
	/* shared_preload_libraries: the worker's memory and registration
	 * (shmem/shmem.c) */
	cpht_shmem_init();

	/* the functions of api/ the planner recognises in queries (plan/ does
	 * not include api/), then the planner's hooks and nodes */
	{
		CphtPlanEntryPoints entry = {
			.fop_new_relation = cpht_fop_new_relation,
			.table_in = cpht_table_in,
			.insert_new = cpht_insert_new,
			.fop_relation = cpht_fop_relation,
		};

		cpht_plan_set_entry_points(&entry);
	}
	/* cpht_fop_agg over shared tables in parallel workers */
	cpht_parallel_init();
	cpht_new_keys_init();
	cpht_rows_by_tid_init();
	cpht_call_node_init();

	MarkGUCPrefixReserved("cpht");

	/* Loaded by a function call: restore a cap a superuser set, now (see
	 * memcap.c); otherwise the first cpht_create does. */
	cpht_memory_settle();

	cpht_set_interrupt_check(cpht_interrupt_pending);
	cpht_memory_init();
}
